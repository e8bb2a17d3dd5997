# libamldist and amlrun.  A hand-written Makefile: `make`, `make check`,
# `make install PREFIX=/usr/local DESTDIR=`.  Everything is built under
# $(BUILD); `make BUILD=build-asan SAN=1` gives an ASan+UBSan build beside it.

.DELETE_ON_ERROR:
.SUFFIXES:

BUILD   ?= build
PREFIX  ?= /usr/local
DESTDIR ?=
LIBDIR  ?= $(PREFIX)/lib
BINDIR  ?= $(PREFIX)/bin
INCDIR  ?= $(PREFIX)/include
MANDIR  ?= $(PREFIX)/share/man
PKGDIR  ?= $(LIBDIR)/pkgconfig
# The Python module (python/amldist, pure Python) goes where that Python
# looks for a prefix's packages (lib/pythonX.Y/dist-packages on Debian,
# site-packages elsewhere); PYTHONDIR= (empty): not installed (Debian's
# python3-amldist installs it with pybuild).  Asked of Python at install.
PYTHON  ?= python3
PYTHONDIR ?= $(shell $(PYTHON) -c 'import sys; print("%s/lib/python%d.%d/%s" % (sys.argv[1], *sys.version_info[:2], "dist-packages" if any(p.endswith("dist-packages") for p in sys.path) else "site-packages"))' '$(PREFIX)' 2>/dev/null)

CC      ?= cc
CLANG   ?= clang
MPICC   ?= mpicc
SAN     ?=

MAJOR := $(shell sed -n 's/^\#define AMLDIST_VERSION_MAJOR \([0-9]*\)/\1/p' include/amldist.h)
MINOR := $(shell sed -n 's/^\#define AMLDIST_VERSION_MINOR \([0-9]*\)/\1/p' include/amldist.h)
PATCH := $(shell sed -n 's/^\#define AMLDIST_VERSION_PATCH \([0-9]*\)/\1/p' include/amldist.h)
VERSION := $(MAJOR).$(MINOR).$(PATCH)
SONAME  := libamldist.so.$(MAJOR)

HWLOC_CFLAGS := $(shell pkg-config --cflags hwloc 2>/dev/null)
# Linked only by a test that calls hwloc beyond what lib/topo/dl.c forwards.
HWLOC_LIBS   := $(shell pkg-config --libs hwloc 2>/dev/null || echo -lhwloc)
# libxml2 reads NCCL topology files (lib/topo/ncclxml.c).
XML_CFLAGS := $(shell pkg-config --cflags libxml-2.0 2>/dev/null || echo -I/usr/include/libxml2)
# elfutils' libdwfl unwinds the workers' native stacks (launcher/stacks/):
# amlrun loads it (dlopen) at the first capture, its headers only here.
DW_CFLAGS := $(shell pkg-config --cflags libdw 2>/dev/null)
# The soname of a development library (pkg-config's name, file): what the
# build found, so the dlopen takes that ABI, never a guessed version.  Empty
# when it is not there: the file that needs it says so (#error).
soname_of = $(shell objdump -p "$$(pkg-config --variable=libdir $(1) 2>/dev/null | \
    sed 's|$$|/$(2)|' | grep . || $(CC) -print-file-name=$(2))" 2>/dev/null | \
    sed -n 's/^ *SONAME *//p')
DW_SONAME    := $(call soname_of,libdw,libdw.so)
HWLOC_SONAME := $(call soname_of,hwloc,libhwloc.so)
XML_SONAME   := $(call soname_of,libxml-2.0,libxml2.so)
# OpenSSL 3's libcrypto: the control plane's and the bootstrap's channel
# (lib/net/chan.c: HKDF, HMAC, ChaCha20-Poly1305), its headers only: the
# library loads libcrypto.so.3 (dlopen) when a job has a secret.
CRYPTO_CFLAGS := $(shell pkg-config --cflags libcrypto 2>/dev/null)

# NCCL support is built when the CUDA runtime headers and NCCL are found:
# nccl.h under NCCL_HOME (when given, it must hold it), pkg-config's nccl,
# CUDA_HOME, or the system's include directories (Debian, NGC images);
# libnccl.so.2 beside it (lib64, lib) or in the system's library directory.
# Programs link the soname itself: pip's and NGC's NCCL ship no libnccl.so.
comma := ,
CUDA_HOME ?= /usr/local/cuda
NCCL_HOME ?=
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
CUDA_RT_H := $(firstword $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h                                     /usr/include/cuda_runtime_api.h))
ifneq ($(NCCL_HOME),)
NCCL_H := $(wildcard $(NCCL_HOME)/include/nccl.h)
ifeq ($(NCCL_H),)
$(error NCCL_HOME=$(NCCL_HOME) has no include/nccl.h)
endif
else
NCCL_PC_INC := $(patsubst -I%,%,$(filter -I%,$(shell pkg-config --cflags-only-I nccl 2>/dev/null)))
NCCL_H := $(firstword $(wildcard $(addsuffix /nccl.h,$(NCCL_PC_INC))               $(CUDA_HOME)/include/nccl.h /usr/local/include/nccl.h               /usr/include/$(MULTIARCH)/nccl.h /usr/include/nccl.h))
endif
NCCL_INC := $(patsubst %/,%,$(dir $(NCCL_H)))
NCCL_SO  := $(firstword $(wildcard $(addsuffix /libnccl.so.2,               $(NCCL_INC:%/include=%/lib64) $(NCCL_INC:%/include=%/lib)               $(CUDA_HOME)/lib64 /usr/lib/$(MULTIARCH) /usr/lib64 /usr/lib)))
CUDART_DIR := $(patsubst %/,%,$(dir $(firstword $(wildcard               $(CUDA_HOME)/lib64/libcudart.so $(CUDA_HOME)/lib/libcudart.so               /usr/lib/$(MULTIARCH)/libcudart.so))))
HAVE_NCCL := $(if $(and $(CUDA_RT_H),$(NCCL_H),$(NCCL_SO),$(CUDART_DIR)),1)
ifeq ($(HAVE_NCCL),1)
NCCL_DIR    := $(patsubst %/,%,$(dir $(NCCL_SO)))
# The compiler searches /usr/include itself: naming it with -I would move it
# ahead of the other system directories.
NCCL_CFLAGS := -DAMLDIST_HAVE_NCCL=1 \
               $(addprefix -I,$(filter-out /usr/include /usr/local/include, \
                   $(sort $(NCCL_INC) $(patsubst %/,%,$(dir $(CUDA_RT_H))))))
NCCL_LIBDIRS:= $(sort $(NCCL_DIR) $(CUDART_DIR))
NCCL_LIBS   := $(addprefix -L,$(NCCL_LIBDIRS)) \
               $(addprefix -Wl$(comma)-rpath$(comma),$(NCCL_LIBDIRS)) \
               -l:libnccl.so.2 -lcudart
NCCL_STATUS := yes (nccl.h in $(NCCL_INC), $(NCCL_SO), libcudart in $(CUDART_DIR))
else
NCCL_STATUS := no ($(if $(CUDA_RT_H),,cuda_runtime_api.h not under CUDA_HOME=$(CUDA_HOME) or /usr/include; )$(if $(NCCL_H),,nccl.h not found (set NCCL_HOME); )$(if $(NCCL_H),$(if $(NCCL_SO),,libnccl.so.2 not found beside $(NCCL_INC) or in the system's directories; ))$(if $(CUDART_DIR),,libcudart.so not found; )amldist-nccl-check and examples/nccl_allreduce are not built)
endif
ifeq ($(filter clean uninstall,$(MAKECMDGOALS)),)
$(info libamldist: NCCL support: $(NCCL_STATUS))
endif

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
            -Wmissing-prototypes -Wformat=2 -Wvla
CSTD     := -std=c11 -D_GNU_SOURCE
OPT      ?= -O2 -g
HARDEN   := -D_FORTIFY_SOURCE=2 -fstack-protector-strong
TEST_OPT :=
ifeq ($(SAN),1)
OPT      := -O1 -g -fno-omit-frame-pointer
HARDEN   := -fsanitize=address,undefined -fno-sanitize-recover=all
# The unit tests' own code at -O0: instrumented, it compiled 2 to 3 times
# slower at -O1 (35 s of the ASan build's 78 s of CPU) for code that only
# drives the library, which stays at -O1.
TEST_OPT := -O0
endif
CFLAGS   ?=
CPPFLAGS ?=
LDFLAGS  ?=
ALL_CFLAGS  = $(CSTD) $(OPT) $(WARN) $(HARDEN) -Iinclude $(HWLOC_CFLAGS) $(CPPFLAGS) $(CFLAGS)
LIB_CFLAGS  = $(ALL_CFLAGS) -Ilib -DAMLDIST_BUILDING -fvisibility=hidden $(NCCL_CFLAGS) \
              $(XML_CFLAGS) $(CRYPTO_CFLAGS)
ALL_LDFLAGS = $(HARDEN) -Wl,-z,relro,-z,now $(LDFLAGS)
# The library reaches NCCL, the CUDA runtime, hwloc and libxml2 through
# dlopen (lib/topo/dl.c for the last two), so that linking it (and
# starting amlrun) never loads them.
LIB_LIBS    = -ldl -lpthread

# Sources: one flat list per component folder.  Every lib/<component>/*.c is
# part of the library; launcher/main.c and launcher/<component>/*.c make
# amlrun; each tools/*.c, examples/*.c and tests/unit/<component>/test_*.c
# is one program.
LIB_PARTS  := util sources layout topo progress plan net bootstrap rdzv nccl
# The rendezvous backends (lib/rdzv/backends.h): each folder of lib/rdzv/.
LIB_PARTS  += $(patsubst lib/%/,%,$(wildcard lib/rdzv/*/))
RUN_PARTS_DIRS := cli head worker job plugins run contain output stacks query
LIB_SRCS   := $(foreach d,$(LIB_PARTS),$(wildcard lib/$(d)/*.c))
LIB_HDRS   := $(wildcard include/*.h include/amldist/*.h) \
              $(foreach d,$(LIB_PARTS),$(wildcard lib/$(d)/*.h))
RUN_SRCS   := launcher/main.c \
              $(foreach d,$(RUN_PARTS_DIRS),$(wildcard launcher/$(d)/*.c))
RUN_HDRS   := $(foreach d,$(RUN_PARTS_DIRS),$(wildcard launcher/$(d)/*.h))
# Object names are the source's path with '/' as '-' (lib-topo-query.o),
# so that topo/query.c and plan/query.c stay two members of libamldist.a.
objname     = $(subst /,-,$(1:%.c=%.o))
# The static library is made of the shared one's position-independent
# objects: one compile of each source per build, not two (-fPIC costs
# next to nothing on x86-64, and a static libamldist.a may then also go
# into a PIE or a shared object of the user's).
PIC_OBJS   := $(foreach f,$(LIB_SRCS),$(BUILD)/pic/$(call objname,$(f)))
STATIC_OBJS:= $(PIC_OBJS)
RUN_OBJS   := $(foreach f,$(RUN_SRCS),$(BUILD)/obj/$(call objname,$(f)))
# Library sources that amlrun also links as its own objects: the library
# hides their symbols, and amlrun is their client too (one poll loop, on
# the one monotonic clock; the job's secret; the progress page it makes for its workers, the
# straggler statistics it prints and the hang decision it makes).
RUN_LIB_SRCS := lib/net/loop.c lib/util/clock.c lib/util/secret.c lib/util/dltable.c
RUN_LIB_SRCS += lib/progress/page.c lib/progress/straggler.c lib/progress/hang.c
RUN_OBJS   += $(foreach f,$(RUN_LIB_SRCS),$(BUILD)/obj/launcher-$(call objname,$(f)))
# The library's internal headers amlrun includes (tests/sh/build/arrows.sh):
# those of the sources it links, and the registry of rendezvous backends
# (their names; nothing to link).  Its objects are made again when one
# changes (a new backend's row: a new --rdzv-backend name).
RUN_LIB_HDRS := $(RUN_LIB_SRCS:.c=.h) lib/rdzv/backends.h
TOOL_SRCS  := $(wildcard tools/*.c)
ifneq ($(HAVE_NCCL),1)
TOOL_SRCS  := $(foreach f,$(TOOL_SRCS),$(if $(findstring nccl,$(notdir $(f))),,$(f)))
endif
EX_SRCS    := $(filter-out examples/mpi_%,$(wildcard examples/*.c))
ifneq ($(HAVE_NCCL),1)
EX_SRCS    := $(filter-out examples/nccl_%,$(EX_SRCS))
endif
HAVE_MPICC := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_MPICC),1)
MPI_EX_SRCS := $(wildcard examples/mpi_*.c)
endif
TEST_SRCS  := $(wildcard tests/unit/*/test_*.c)
TEST_HDRS  := $(wildcard tests/unit/*.h tests/unit/*/*.h)

SHLIB   := $(BUILD)/lib/$(SONAME)
SHLINK  := $(BUILD)/lib/libamldist.so
STLIB   := $(BUILD)/lib/libamldist.a
PCFILE  := $(BUILD)/lib/pkgconfig/amldist.pc
AMLRUN  := $(BUILD)/bin/amlrun
TOOLS   := $(TOOL_SRCS:tools/%.c=$(BUILD)/bin/%)
EXAMPLES:= $(EX_SRCS:%.c=$(BUILD)/%) $(MPI_EX_SRCS:%.c=$(BUILD)/%)
TESTS   := $(addprefix $(BUILD)/tests/,$(notdir $(TEST_SRCS:%.c=%)))
MANPAGES:= $(wildcard man/*.[1-8])
# One page per function of the section-3 pages, a .so link to its page.
MAN3LINKS := $(BUILD)/man/man3/.stamp
CMAKEDIR:= $(BUILD)/lib/cmake/amldist
CMAKEFILES := $(CMAKEDIR)/amldistConfig.cmake $(CMAKEDIR)/amldistConfigVersion.cmake

# amlrun's bash and zsh completions, written from its option table.
COMPLETIONS := $(BUILD)/completion/amlrun.bash $(BUILD)/completion/_amlrun
STK_PYTHON := $(BUILD)/share/amldist/python/sitecustomize.py
STK_GUARD  := $(BUILD)/lib/amldist/stack-guard.so

# Programs find the library next to them, both in $(BUILD) and installed,
# and where LIBDIR is not BINDIR/../lib (Debian's lib/<multiarch>) by the
# path between the two (so also in a tree unpacked elsewhere).
LIB_FROM_BIN := $(shell realpath -m --relative-to='$(BINDIR)' '$(LIBDIR)')
RPATH := -Wl,-rpath,'$$ORIGIN/../lib' \
    $(if $(filter-out ../lib,$(LIB_FROM_BIN)),-Wl$(comma)-rpath$(comma)'$$ORIGIN/$(LIB_FROM_BIN)')

.PHONY: all lib tests check bench install uninstall clean FORCE
all: lib $(AMLRUN) $(STK_PYTHON) $(STK_GUARD) $(TOOLS) $(EXAMPLES) $(COMPLETIONS)
lib: $(SHLIB) $(SHLINK) $(STLIB) $(PCFILE) $(CMAKEFILES) $(MAN3LINKS)
tests: lib $(TESTS)

# One rule per source, for the flattened object names.
define lib_object
$(BUILD)/pic/$(call objname,$(1)): $(1) $$(LIB_HDRS)
	@mkdir -p $$(@D)
	$$(CC) $$(LIB_CFLAGS) -fPIC -c $$< -o $$@
endef
define run_object
$(BUILD)/obj/$(call objname,$(1)): $(1) $$(RUN_HDRS) $$(RUN_LIB_HDRS) include/amldist.h $$(wildcard include/amldist/*.h)
	@mkdir -p $$(@D)
	$$(CC) $$(ALL_CFLAGS) $$(DW_CFLAGS) -Ilauncher -Ilib -c $$< -o $$@
endef
$(foreach f,$(LIB_SRCS),$(eval $(call lib_object,$(f))))
$(foreach f,$(RUN_SRCS),$(eval $(call run_object,$(f))))
$(BUILD)/obj/$(call objname,launcher/stacks/dw.c): CPPFLAGS += -DSTK_DW_SONAME='"$(DW_SONAME)"'
$(BUILD)/pic/$(call objname,lib/topo/dl.c): \
    CPPFLAGS += -DAMLDIST_HWLOC_SONAME='"$(HWLOC_SONAME)"' \
                -DAMLDIST_XML_SONAME='"$(XML_SONAME)"'
define run_lib_object
$(BUILD)/obj/launcher-$(call objname,$(1)): $(1) $$(LIB_HDRS)
	@mkdir -p $$(@D)
	$$(CC) $$(ALL_CFLAGS) -Ilib -c $$< -o $$@
endef
$(foreach f,$(RUN_LIB_SRCS),$(eval $(call run_lib_object,$(f))))

# lib/amldist.map versions every exported symbol (AMLDIST_1.0, ...).
# --no-undefined but in a sanitizer build: clang links its ASan runtime
# into executables only, and the library's __asan_* symbols come from there.
NO_UNDEFINED := $(if $(filter 1,$(SAN)),,-Wl,--no-undefined)
$(SHLIB): $(PIC_OBJS) lib/amldist.map
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,$(SONAME) $(NO_UNDEFINED) \
	    -Wl,--version-script=lib/amldist.map $(ALL_LDFLAGS) \
	    -o $@ $(PIC_OBJS) $(LIB_LIBS)

$(SHLINK): $(SHLIB)
	ln -sf $(SONAME) $@

$(STLIB): $(STATIC_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $(STATIC_OBJS)

# The .pc holds the install paths: a stamp of their values makes it follow
# `make install PREFIX=...` after a plain `make`.
PC_VARS := $(PREFIX) $(LIBDIR) $(INCDIR)
PC_STAMP := $(BUILD)/lib/pkgconfig/.paths
$(PC_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(PC_VARS)' | cmp -s - $@ || echo '$(PC_VARS)' >$@

$(PCFILE): Makefile include/amldist.h $(PC_STAMP)
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCDIR)' '' \
	    'Name: amldist' \
	    'Description: canonical distributed-training layout, topology and binding' \
	    'Version: $(VERSION)' \
	    'Cflags: -I$${includedir}' \
	    'Libs: -L$${libdir} -lamldist' \
	    'Libs.private: -ldl -lpthread' > $@

# The CMake package (cmake/): the version and the install paths filled in.
# The headers are found from LIBDIR by this relative path when the tree has
# moved (see amldistConfig.cmake.in).
SIZEOF_VOID_P := $(shell $(CC) -dM -E - </dev/null | sed -n 's/^\#define __SIZEOF_POINTER__ //p')
CMAKE_SUBST = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@MAJOR@|$(MAJOR)|g' \
    -e 's|@SONAME@|$(SONAME)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCDIR@|$(INCDIR)|g' \
    -e "s|@LIBDIR_TO_INCDIR@|$$(realpath -m --relative-to='$(LIBDIR)' '$(INCDIR)')|g" \
    -e 's|@SIZEOF_VOID_P@|$(SIZEOF_VOID_P)|g'
$(CMAKEDIR)/%.cmake: cmake/%.cmake.in Makefile include/amldist.h $(PC_STAMP)
	@mkdir -p $(@D)
	$(CMAKE_SUBST) $< >$@

$(MAN3LINKS): $(filter %.3,$(MANPAGES)) scripts/man-links.sh
	rm -rf $(@D)
	scripts/man-links.sh $(@D) $(filter %.3,$(MANPAGES))
	touch $@

# The installed programs' rpath follows LIBDIR: they relink when the path
# from BINDIR to LIBDIR changes, and only then.
RPATH_STAMP := $(BUILD)/bin/.rpath
$(RPATH_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(LIB_FROM_BIN)' | cmp -s - $@ || echo '$(LIB_FROM_BIN)' >$@
$(AMLRUN) $(TOOLS): $(RPATH_STAMP)
$(AMLRUN): $(RUN_OBJS) $(SHLIB) $(SHLINK)
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $(RUN_OBJS) -L$(BUILD)/lib -lamldist $(RPATH) \
	    -ldl -lpthread

# The hook a Python worker's stacks are read through (launcher/stacks/),
# where amlrun looks for it: BINDIR/../share/amldist/python, in the build
# tree as installed.
$(STK_PYTHON): launcher/stacks/python/sitecustomize.py
	@mkdir -p $(@D)
	cp $< $@

# The guard preloaded into those workers (launcher/stacks/python/guard.c),
# where amlrun looks for it: BINDIR/../lib/amldist (PREFIX/lib/amldist, an
# object of its own, not a library to link).  Never sanitized: it is loaded
# into a Python that has no sanitizer runtime.  Only its interposers are
# exported.
$(STK_GUARD): launcher/stacks/python/guard.c
	@mkdir -p $(@D)
	$(CC) $(CSTD) -O2 -g $(WARN) -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
	    -fPIC -fvisibility=hidden -shared -Wl,-z,relro,-z,now $(CPPFLAGS) \
	    $(filter-out -fsanitize%,$(CFLAGS)) $(filter-out -fsanitize%,$(LDFLAGS)) \
	    -o $@ $< -ldl

# The option table as amlrun prints it (--complete-spec), made into the
# completions by one script: they list what --help lists.
$(BUILD)/completion/amlrun.bash: $(AMLRUN) scripts/completion.sh
	@mkdir -p $(@D)
	scripts/completion.sh bash $(AMLRUN) >$@
$(BUILD)/completion/_amlrun: $(AMLRUN) scripts/completion.sh
	@mkdir -p $(@D)
	scripts/completion.sh zsh $(AMLRUN) >$@

# amldist-nccl-check is made of its main file and its parts.
NCCL_CHECK_SRCS := $(wildcard tools/nccl_check/*.c)
$(BUILD)/bin/amldist-nccl-check: tools/amldist-nccl-check.c $(NCCL_CHECK_SRCS) \
                                 tools/nccl_check/check.h $(SHLIB) $(SHLINK)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(NCCL_CFLAGS) -Itools $(ALL_LDFLAGS) -o $@ \
	    tools/amldist-nccl-check.c $(NCCL_CHECK_SRCS) \
	    -L$(BUILD)/lib -lamldist $(NCCL_LIBS) -lm $(RPATH)

$(BUILD)/bin/%: tools/%.c $(SHLIB) $(SHLINK)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(NCCL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< \
	    -L$(BUILD)/lib -lamldist $(NCCL_LIBS) -lm $(RPATH)

$(BUILD)/examples/nccl_%: examples/nccl_%.c $(SHLIB) $(SHLINK)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(NCCL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< \
	    -L$(BUILD)/lib -lamldist $(NCCL_LIBS) $(RPATH)

$(BUILD)/examples/mpi_%: examples/mpi_%.c $(SHLIB) $(SHLINK)
	@mkdir -p $(@D)
	$(MPICC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< -L$(BUILD)/lib -lamldist $(RPATH)

$(BUILD)/examples/%: examples/%.c $(SHLIB) $(SHLINK)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< -L$(BUILD)/lib -lamldist $(RPATH)

# Unit tests link the static library so they can reach internal functions.
# TEST_CFLAGS and TEST_LINK: what one test adds to its command line.
define unit_test
$(BUILD)/tests/$(notdir $(1:%.c=%)): $(1) $$(TEST_HDRS) $$(STLIB)
	@mkdir -p $$(@D)
	$$(CC) $$(ALL_CFLAGS) $$(TEST_OPT) -Ilib -Itests/unit -I$(dir $(1)) $$(TEST_CFLAGS) \
	    $$(NCCL_CFLAGS) $$(ALL_LDFLAGS) -o $$@ $$< $$(TEST_LINK) $$(STLIB) $$(LIB_LIBS) $$(TEST_LIBS)
endef
$(foreach f,$(TEST_SRCS),$(eval $(call unit_test,$(f))))

# The drivers of bench/rdzv.sh (public API only) and bench/bootstrap.sh
# (the bootstrap's internals, which the static library holds), linked like
# the unit tests.
BENCH_BINS := $(BUILD)/bench/rdzv_bench $(BUILD)/bench/rdzv_host_bench $(BUILD)/bench/bootstrap_bench \
    $(BUILD)/bench/progress_bench \
    $(BUILD)/bench/launch_floor $(BUILD)/bench/chan_bench
$(BUILD)/bench/%: bench/%.c $(STLIB) $(LIB_HDRS) $(wildcard bench/*.h)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Ilib $(ALL_LDFLAGS) -o $@ $< $(STLIB) $(LIB_LIBS)

# amlrun's objects but main.o, for the unit tests of its parts: they link
# the same objects amlrun is made of, rebuilt when a launcher source changes.
RUN_PARTS := $(BUILD)/lib/libamlrun-parts.a
RUN_PART_OBJS := $(filter-out $(BUILD)/obj/launcher-main.o,$(RUN_OBJS))
$(RUN_PARTS): $(RUN_PART_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $(RUN_PART_OBJS)

LAUNCHER_TESTS := $(addprefix $(BUILD)/tests/,$(notdir \
                  $(basename $(wildcard tests/unit/launcher/test_*.c \
                                        tests/unit/stacks/test_*.c))))
$(LAUNCHER_TESTS): $(RUN_PARTS)
$(LAUNCHER_TESTS): TEST_CFLAGS = -Ilauncher
$(LAUNCHER_TESTS): TEST_LINK = $(RUN_PARTS) -ldl -lpthread
# The stacks' tests start Python workers through the installed hook's place
# in the build tree, and unwind a program built with -g.
$(BUILD)/tests/test_stacks_capture: $(STK_PYTHON) $(STK_GUARD)

# test_topo_cache restricts a topology itself (hwloc_topology_restrict):
# after the library, whose own calls still go through lib/topo/dl.c.
$(BUILD)/tests/test_topo_cache: TEST_LIBS = $(HWLOC_LIBS)

# test_envp fails chosen allocations and counts every block: the library's
# calls to the allocator go to the test's __wrap_ functions.
$(BUILD)/tests/test_envp: TEST_LINK = $(foreach f,malloc calloc realloc free strdup,-Wl,--wrap=$(f))

# A stand-in libpmix (tests/standin/fake_pmix.c), NOT PMIx: the client
# calls the library makes, answering, failing or never returning on demand.
# Nothing links it; AMLDIST_PMIX_LIBRARY names it.
FAKE_PMIX_LIB := $(abspath $(BUILD))/tests/standin/libfake_pmix.so
tests: $(FAKE_PMIX_LIB)
$(FAKE_PMIX_LIB): tests/standin/fake_pmix.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -fPIC -shared $(ALL_LDFLAGS) -o $@ $< -lpthread
$(BUILD)/tests/test_layout_pmix: $(FAKE_PMIX_LIB)

# The unit tests and what they load, without the stand-ins below (no unit
# test loads those): tests/run.sh's ASan pass builds this in build-asan,
# where the stand-ins would be built for nothing (nccl_standin.sh builds
# its ASan stand-ins in a directory of its own).
.PHONY: unit-tests
unit-tests: lib $(TESTS) $(FAKE_PMIX_LIB)
$(BUILD)/tests/test_layout_pmix: TEST_CFLAGS = -DFAKE_PMIX_LIB='"$(FAKE_PMIX_LIB)"'

# Stand-in libcudart and libnccl (tests/standin/), NOT CUDA or NCCL: they
# run the NCCL paths of our code on machines without a GPU, ranks exchanging
# data through files.  Built against the real headers and named by the real
# sonames, so LD_LIBRARY_PATH=$(BUILD)/tests/standin puts them in place of
# the real ones, for linked programs and for the library's dlopen alike.
ifeq ($(HAVE_NCCL),1)
CUDART_SOVER := $(shell objdump -p $(CUDART_DIR)/libcudart.so 2>/dev/null | \
                  sed -n 's/^ *SONAME *libcudart\.so\.//p')
STANDIN        := $(BUILD)/tests/standin
STANDIN_CUDART := $(STANDIN)/libcudart.so.$(CUDART_SOVER)
STANDIN_NCCL   := $(STANDIN)/libnccl.so.2
STANDIN_HDRS   := $(wildcard tests/standin/*.h)
STANDIN_LINK   := -L$(STANDIN) -Wl,-rpath,'$$ORIGIN' -lpthread -lm
tests: $(STANDIN_CUDART) $(STANDIN)/libcudart.so $(STANDIN_NCCL) \
       $(STANDIN)/standin_driver

# The real runtime versions its symbols by soname: so does the stand-in,
# or the loader warns about every program linked with the real one.
$(STANDIN_CUDART): tests/standin/fake_cudart.c $(STANDIN_HDRS)
	@mkdir -p $(@D)
	printf 'libcudart.so.$(CUDART_SOVER) { global: *; };\n' >$(STANDIN)/cudart.map
	$(CC) $(ALL_CFLAGS) $(NCCL_CFLAGS) -fPIC -shared $(ALL_LDFLAGS) \
	    -Wl,-soname,libcudart.so.$(CUDART_SOVER) \
	    -Wl,--version-script=$(STANDIN)/cudart.map -o $@ $< -lpthread -lm

$(STANDIN)/libcudart.so: $(STANDIN_CUDART)
	ln -sf libcudart.so.$(CUDART_SOVER) $@

$(STANDIN_NCCL): tests/standin/fake_nccl.c tests/standin/fake_nccl_coll.c \
                 $(STANDIN_HDRS) $(STANDIN_CUDART)
	$(CC) $(ALL_CFLAGS) $(NCCL_CFLAGS) -fPIC -shared $(ALL_LDFLAGS) \
	    -Wl,-soname,libnccl.so.2 -o $@ tests/standin/fake_nccl.c \
	    tests/standin/fake_nccl_coll.c -l:libcudart.so.$(CUDART_SOVER) \
	    $(STANDIN_LINK)

$(STANDIN)/standin_driver: tests/standin/standin_driver.c $(STANDIN_HDRS) \
                           $(STANDIN_NCCL) $(STANDIN_CUDART)
	$(CC) $(ALL_CFLAGS) $(NCCL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< \
	    -l:libnccl.so.2 -l:libcudart.so.$(CUDART_SOVER) $(STANDIN_LINK)
endif

# The fuzz targets (tests/fuzz/fuzz_*.c, run by tests/fuzz/run.sh): clang's
# libFuzzer with ASan+UBSan, in $(FUZZ_BUILD).  The library's objects are
# compiled once for all five (coverage without libFuzzer's main:
# fuzzer-no-link), in parallel under -j, and each target links them all;
# a target's own file may include launcher sources, so it follows them.
FUZZ_BUILD  ?= build-fuzz
FUZZ_FLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 -fno-sanitize-recover=all \
               -Iinclude -Ilib -Ilauncher $(HWLOC_CFLAGS) $(XML_CFLAGS) $(CRYPTO_CFLAGS)
FUZZ_OBJS   := $(foreach f,$(LIB_SRCS),$(FUZZ_BUILD)/obj/$(call objname,$(f)))
FUZZ_BINS   := $(addprefix $(FUZZ_BUILD)/,$(notdir $(basename $(wildcard tests/fuzz/fuzz_*.c))))
.PHONY: fuzz
fuzz: $(FUZZ_BINS)
define fuzz_object
$(FUZZ_BUILD)/obj/$(call objname,$(1)): $(1) $$(LIB_HDRS)
	@mkdir -p $$(@D)
	$$(CLANG) $$(FUZZ_FLAGS) $$(CPPFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c $$< -o $$@
endef
$(foreach f,$(LIB_SRCS),$(eval $(call fuzz_object,$(f))))
$(FUZZ_BUILD)/obj/$(call objname,lib/topo/dl.c): \
    CPPFLAGS += -DAMLDIST_HWLOC_SONAME='"$(HWLOC_SONAME)"' \
                -DAMLDIST_XML_SONAME='"$(XML_SONAME)"'
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJS) $(LIB_HDRS) \
                      $(wildcard launcher/*/*.c launcher/*/*.h)
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< \
	    $(FUZZ_OBJS) $(shell pkg-config --libs hwloc libxml-2.0 libcrypto 2>/dev/null) -ldl -lpthread

# The whole suite: unit tests (plain, ASan+UBSan, valgrind), shell tests with
# real mpirun / PyTorch / namespaces, fuzzing, header and man-page checks,
# JOBS programs at a time (tests/run.sh: twice the CPUs, at least 4).
# The build first, on every CPU whatever -j says (a fresh clone's build is
# part of the suite's time).
JOBS ?=
# (nproc would count OMP_NUM_THREADS, which HPC shells often export as 1)
NPROC := $(shell env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2)
check:
	$(MAKE) -j$(NPROC) all tests $(BENCH_BINS)
	JOBS=$(JOBS) tests/run.sh

# Every figure of README.md's Benchmarks, with the date and the machine.
bench: all $(BENCH_BINS)
	BUILD=$(BUILD) bench/all.sh

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGDIR) $(DESTDIR)$(BINDIR) \
	    $(DESTDIR)$(INCDIR)/amldist $(DESTDIR)$(MANDIR)/man1 \
	    $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man7
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libamldist.so
	install -m 644 $(STLIB) $(DESTDIR)$(LIBDIR)/libamldist.a
	install -m 644 $(PCFILE) $(DESTDIR)$(PKGDIR)/amldist.pc
	install -m 644 include/amldist.h $(DESTDIR)$(INCDIR)/amldist.h
	install -m 644 include/amldist/*.h $(DESTDIR)$(INCDIR)/amldist/
	install -m 755 $(AMLRUN) $(TOOLS) $(DESTDIR)$(BINDIR)/
	install -D -m 644 $(STK_PYTHON) $(DESTDIR)$(PREFIX)/share/amldist/python/sitecustomize.py
	install -D -m 644 $(STK_GUARD) $(DESTDIR)$(PREFIX)/lib/amldist/stack-guard.so
	for m in $(MANPAGES); do \
	    s=$${m##*.}; install -d $(DESTDIR)$(MANDIR)/man$$s; \
	    install -m 644 $$m $(DESTDIR)$(MANDIR)/man$$s/; done
	install -D -m 644 $(BUILD)/completion/amlrun.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/amlrun
	install -D -m 644 $(BUILD)/completion/_amlrun $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_amlrun
	install -m 644 $(BUILD)/man/man3/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -d $(DESTDIR)$(LIBDIR)/cmake/amldist
	install -m 644 $(CMAKEFILES) $(DESTDIR)$(LIBDIR)/cmake/amldist/
	$(if $(PYTHONDIR),install -d $(DESTDIR)$(PYTHONDIR)/amldist)
	$(if $(PYTHONDIR),install -m 644 python/amldist/*.py $(DESTDIR)$(PYTHONDIR)/amldist/)

# Every program and page install can put there, whether or not this build
# made it (amldist-nccl-check is built only where NCCL is found).
ALL_TOOL_NAMES := $(notdir $(basename $(wildcard tools/*.c)))
uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libamldist.so \
	    $(DESTDIR)$(LIBDIR)/libamldist.a $(DESTDIR)$(PKGDIR)/amldist.pc \
	    $(DESTDIR)$(INCDIR)/amldist.h $(DESTDIR)$(BINDIR)/amlrun \
	    $(addprefix $(DESTDIR)$(BINDIR)/,$(ALL_TOOL_NAMES))
	for m in $(MANPAGES); do \
	    rm -f $(DESTDIR)$(MANDIR)/man$${m##*.}/$${m##*/}; done
	rm -f $(DESTDIR)$(PREFIX)/share/bash-completion/completions/amlrun \
	    $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_amlrun
	scripts/man-links.sh --list $(filter %.3,$(MANPAGES)) | \
	    while read -r name page; do rm -f $(DESTDIR)$(MANDIR)/man3/$$name.3; done
	rm -rf $(DESTDIR)$(INCDIR)/amldist $(DESTDIR)$(LIBDIR)/cmake/amldist
	$(if $(PYTHONDIR),rm -rf $(DESTDIR)$(PYTHONDIR)/amldist)
	rm -rf $(DESTDIR)$(PREFIX)/share/amldist/python
	rmdir --ignore-fail-on-non-empty $(DESTDIR)$(PREFIX)/share/amldist 2>/dev/null || true
	rm -rf $(DESTDIR)$(PREFIX)/lib/amldist

clean:
	rm -rf build build-asan build-clang build-fuzz
