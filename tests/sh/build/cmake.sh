#!/usr/bin/env bash
# A user's build against an installed libamldist, with CMake (Debian's 3.25)
# and with pkg-config: find_package(amldist CONFIG REQUIRED) gives
# amldist::amldist and amldist::amldist_static with the headers and the
# version; the programs run under mpirun -np 2 and under amlrun.  The tree is
# installed with DESTDIR (a moved tree: the package finds itself from its own
# place), with a plain PREFIX, and behind a /lib -> usr/lib link as on a
# merged-/usr system.
. "$(dirname "$0")/../../lib.sh"
if ! have cmake; then skip "cmake" "cmake not installed (scripts/install-deps.sh)"; exit 0; fi
diag "$(cmake --version | head -n 1)"
tmake BUILD="$BUILD" all >/dev/null 2>&1
d=$TEST_TMP/dest p=/opt/amldist
tmake BUILD="$BUILD" install PREFIX=$p DESTDIR="$d" >"$TEST_TMP/log" 2>&1
expect_eq "make install PREFIX=$p DESTDIR=...: exit 0" "$?" 0
cm=$d$p/lib/cmake/amldist
check "the CMake package in lib/cmake/amldist/" test -f "$cm/amldistConfig.cmake" -a -f "$cm/amldistConfigVersion.cmake"
want=$(sed -n 's/^#define AMLDIST_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$TOP/include/amldist.h" | paste -sd.)

# project DIR FIND_ARGS: a CMake project that builds hello twice, with the
# shared and the static target, and says the version it found.
project() {
    mkdir -p "$1"
    cat >"$1/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(hello C)
find_package(amldist $2 CONFIG REQUIRED)
message(STATUS "amldist_VERSION=\${amldist_VERSION}")
add_executable(hello "$TOP/examples/hello.c")
target_link_libraries(hello PRIVATE amldist::amldist)
add_executable(hello_static "$TOP/examples/hello.c")
target_link_libraries(hello_static PRIVATE amldist::amldist_static)
CMAKE
}
# configure NAME PREFIX_PATH FIND_ARGS: configures build/NAME; exit status.
configure() {
    project "$TEST_TMP/$1" "$3"
    cmake -S "$TEST_TMP/$1" -B "$TEST_TMP/$1/b" -DCMAKE_PREFIX_PATH="$2" \
        >"$TEST_TMP/$1.log" 2>&1
}

# examples/CMakeLists.txt, as its comment says to build it.
mkdir -p "$TEST_TMP/moved"
cmake -S "$TOP/examples" -B "$TEST_TMP/moved/b" -DCMAKE_PREFIX_PATH="$d$p" >"$TEST_TMP/moved.log" 2>&1
expect_eq "cmake -S examples configures against the installed tree" "$?" 0
expect_eq "amldist_VERSION is the header's, amldist_DIR the installed package" \
    "$(sed -n 's/^-- libamldist //p' "$TEST_TMP/moved.log")" "$want from $d$p/lib/cmake/amldist"
cmake --build "$TEST_TMP/moved/b" >"$TEST_TMP/build.log" 2>&1
expect_eq "cmake --build: hello with amldist::amldist and amldist::amldist_static" "$?" 0
grep -q -- "-I$d$p/include\|-isystem $d$p/include" "$TEST_TMP/moved/b/CMakeFiles/hello.dir/flags.make"
expect_eq "the include directory is the installed one" "$?" 0
needs() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(libamldist[^]]*\)\]/\1/p'; }
expect_eq "hello needs libamldist.so.1" "$(needs "$TEST_TMP/moved/b/hello")" "libamldist.so.1"
expect_eq "hello_static needs no libamldist.so" "$(needs "$TEST_TMP/moved/b/hello_static")" ""
if cat "$TEST_TMP/build.log" "$TEST_TMP/moved.log" | grep -q -i 'warning'; then
    fail "no CMake or compiler warnings"; grep -i warning "$TEST_TMP/build.log" "$TEST_TMP/moved.log" | sed 's/^/# /' | head -5
else ok "no CMake or compiler warnings"; fi

# A C++ program (libtorch's trainers are), with either target.
mkdir -p "$TEST_TMP/cxx"
printf '%s\n' '#include <amldist.h>' '#include <cstdio>' \
    'int main() { std::puts(amldist_version_string()); return 0; }' >"$TEST_TMP/cxx/v.cpp"
printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' 'project(v CXX)' \
    'find_package(amldist 1.0 CONFIG REQUIRED)' \
    'add_executable(v v.cpp)' 'target_link_libraries(v PRIVATE amldist::amldist)' \
    'add_executable(v_static v.cpp)' 'target_link_libraries(v_static PRIVATE amldist::amldist_static)' \
    >"$TEST_TMP/cxx/CMakeLists.txt"
cmake -S "$TEST_TMP/cxx" -B "$TEST_TMP/cxx/b" -DCMAKE_PREFIX_PATH="$d$p" >"$TEST_TMP/cxx.log" 2>&1 &&
    cmake --build "$TEST_TMP/cxx/b" >>"$TEST_TMP/cxx.log" 2>&1
expect_eq "a C++ project (project(v CXX)) builds with both targets" "$?" 0
expect_eq "and they run" "$("$TEST_TMP/cxx/b/v" 2>&1) $("$TEST_TMP/cxx/b/v_static" 2>&1)" "$want $want"

# The version file: the same major, at least the minor asked for; ranges.
# Each case configures the same build directory again with its own
# find_package line: CMake checks the version file at every call, the
# cached amldist_DIR or not, and the compilers are found once, not in each
# of the 13 (0.3 s of CPU a fresh directory).
major=${want%%.*} rest=${want#*.} minor=${rest%%.*}
for c in "$major.0:0" "$major:0" "$major.$minor:0" "$want EXACT:0" \
         "$major.$((minor + 1)):1" "$((major + 1)):1" "$((major + 1)).0:1" \
         "$major.0...<$((major + 1)):0" "$major.0...<$major.$minor:1" "$major.0...$want:0" \
         "$((major - 1)).0...$((major + 1)).0:1"; do
    args=${c%:*} rc=${c##*:}
    configure ver "$d$p" "$args"
    got=$?; [ "$got" = 0 ] || got=1
    expect_eq "find_package(amldist $args): $([ "$rc" = 0 ] && echo found || echo refused)" "$got" "$rc"
done
configure ver "$d$p" "COMPONENTS static"
expect_eq "find_package(amldist COMPONENTS static): refused (no components)" "$?" 1
tr -s ' \n' '  ' <"$TEST_TMP/ver.log" | grep -q "has no components (asked for: static)"
expect_eq "and says so" "$?" 0
configure ver "$d$p" "$major.$((minor + 1))"
check "a refused version says which one was found" grep -q "$want" "$TEST_TMP/ver.log"
rm -rf "$TEST_TMP/ver"

# The programs, each built with CMake (shared, static) and with pkg-config,
# under mpirun -np 2 and under amlrun.  (No pkg-config --static: hwloc's .pc
# asks for libudev's development files, which the CMake target does not need.)
sed "s|^prefix=.*|prefix=$d$p|; s|^libdir=.*|libdir=$d$p/lib|; s|^includedir=.*|includedir=$d$p/include|" \
    "$d$p/lib/pkgconfig/amldist.pc" >"$TEST_TMP/amldist.pc"
# README.md's line, the rpath from the .pc; without it the loader does not
# find the library (the line the README had).
export PKG_CONFIG_PATH=$TEST_TMP
# shellcheck disable=SC2046
cc -o "$TEST_TMP/hello_pc" "$TOP/examples/hello.c" \
    $(pkg-config --cflags --libs amldist) -Wl,-rpath,$(pkg-config --variable=libdir amldist) 2>"$TEST_TMP/cc.err"
expect_eq "hello builds with pkg-config (README.md's line)" "$?" 0
# shellcheck disable=SC2046
cc -o "$TEST_TMP/hello_norpath" "$TOP/examples/hello.c" $(pkg-config --cflags --libs amldist) 2>"$TEST_TMP/cc.err"
env -u LD_LIBRARY_PATH "$TEST_TMP/hello_norpath" >/dev/null 2>"$TEST_TMP/err"
check "without the rpath: libamldist.so.1 not found" grep -q 'libamldist.so.1: cannot open' "$TEST_TMP/err"
unset PKG_CONFIG_PATH
values() { sed -n "s/^$1=//p" "$2" | sort -n | tr '\n' ' ' | sed 's/ $//'; }
port=$((20000 + RANDOM % 10000))
for prog in "$TEST_TMP/moved/b/hello" "$TEST_TMP/moved/b/hello_static" "$TEST_TMP/hello_pc"; do
    name=${prog#"$TEST_TMP"/}
    if have mpirun; then
        timeout 120 $MPIRUN -np 2 "$prog" >"$TEST_TMP/out" 2>"$TEST_TMP/err"
        expect_eq "mpirun -np 2 $name: exit 0" "$?" 0
        expect_eq "mpirun -np 2 $name: ranks" "$(values RANK "$TEST_TMP/out")" "0 1"
        expect_eq "mpirun -np 2 $name: world size" "$(values WORLD_SIZE "$TEST_TMP/out")" "2 2"
    else
        skip "mpirun -np 2 $name" "mpirun not installed"
    fi
    port=$((port + 1))
    timeout 120 "$AMLRUN" --nproc-per-node 2 --master-port $port --cpu-bind none "$prog" \
        >"$TEST_TMP/out" 2>"$TEST_TMP/err"
    expect_eq "amlrun --nproc-per-node 2 $name: exit 0" "$?" 0
    expect_eq "amlrun --nproc-per-node 2 $name: ranks" "$(values RANK "$TEST_TMP/out")" "0 1"
    expect_eq "amlrun --nproc-per-node 2 $name: master port" "$(values MASTER_PORT "$TEST_TMP/out")" "$port $port"
done

# Installed where it was configured to go (no DESTDIR): the install paths
# themselves; and reached through a /lib -> usr/lib link, where the headers
# are not ../include of the path CMake found.
# Another LIBDIR relinks amlrun (its rpath): in a copy of the build, not
# under the feet of the tests that run $BUILD/bin/amlrun.
r=$TEST_TMP/root multiarch=$(cc -print-multiarch) b=$TEST_TMP/build
mkdir -p "$b"
for sub in obj pic lib bin examples man; do [ ! -e "$BUILD/$sub" ] || cp -a "$BUILD/$sub" "$b/"; done
tmake BUILD="$b" install PREFIX="$r/usr" LIBDIR="$r/usr/lib/$multiarch" >"$TEST_TMP/log" 2>&1
expect_eq "make install PREFIX=.../usr LIBDIR=.../usr/lib/$multiarch: exit 0" "$?" 0
ln -s usr/lib "$r/lib"
check "the package is in lib/$multiarch/cmake/amldist" test -f "$r/usr/lib/$multiarch/cmake/amldist/amldistConfig.cmake"
project "$TEST_TMP/merged" ""
cmake -S "$TEST_TMP/merged" -B "$TEST_TMP/merged/b" -Damldist_DIR="$r/lib/$multiarch/cmake/amldist" \
    >"$TEST_TMP/merged.log" 2>&1 && cmake --build "$TEST_TMP/merged/b" >>"$TEST_TMP/merged.log" 2>&1
expect_eq "found through /lib -> usr/lib: configures and builds" "$?" 0
grep -q -- "$r/usr/include" "$TEST_TMP/merged/b/CMakeFiles/hello.dir/flags.make"
expect_eq "through /lib: the include directory is the installed one" "$?" 0
out=$(RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1234 "$TEST_TMP/merged/b/hello" 2>&1)
check "through /lib: hello runs" sh -c 'echo "$0" | grep -qx "RANK=1"' "$out"
tmake BUILD="$b" uninstall PREFIX="$r/usr" LIBDIR="$r/usr/lib/$multiarch" >/dev/null 2>&1
expect_eq "make uninstall removes it all" "$(find "$r/usr" -type f -o -type l | wc -l)" 0

# A split install (libamldist1 without libamldist-dev) is refused with the
# missing file named, not at link time.
rm -f "$d$p/include/amldist.h"
configure split "$d$p" ""
expect_eq "without the headers: find_package fails" "$?" 1
tr -s ' \n' '  ' <"$TEST_TMP/split.log" | grep -q "include/amldist.h, which does not exist"
expect_eq "and names the missing header" "$?" 0
tmake BUILD="$BUILD" lib >/dev/null 2>&1
