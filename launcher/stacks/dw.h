#ifndef AMLRUN_STACKS_DW_H
#define AMLRUN_STACKS_DW_H
/*
 * elfutils' libdw, loaded (dlopen) at the first native capture: amlrun
 * does not link it, so that a launch, where stacks are read only on a hang,
 * neither loads it (nor libelf, libz, libbz2...) nor pays for its mappings
 * at each of its forks.  The headers give the types.
 */
#include <stddef.h>

#include <dwarf.h>
#include <elfutils/libdwfl.h>

#define STK_DW_FUNCTIONS(X)                                                    \
    X(dwarf_get_units) X(dwarf_getaranges) X(dwarf_getsrc_die)                 \
    X(dwarf_haspc) X(dwarf_lineno) X(dwarf_linesrc) X(dwfl_addrmodule)         \
    X(dwfl_begin) X(dwfl_build_id_find_debuginfo) X(dwfl_end)                  \
    X(dwfl_errmsg) X(dwfl_frame_pc) X(dwfl_getthread_frames)                   \
    X(dwfl_lineinfo) X(dwfl_linux_proc_attach) X(dwfl_linux_proc_find_elf)     \
    X(dwfl_linux_proc_report) X(dwfl_module_addrname)                          \
    X(dwfl_module_build_id) X(dwfl_module_getdwarf) X(dwfl_module_getelf)      \
    X(dwfl_module_getsrc) X(dwfl_module_info) X(dwfl_report_begin)             \
    X(dwfl_report_elf) X(dwfl_report_end)

#define STK_DW_FIELD(name) __typeof__(&name) name;
struct stk_dw {
    STK_DW_FUNCTIONS(STK_DW_FIELD)
};
#undef STK_DW_FIELD

/* The table, libdw loaded once per process (thread-safe); NULL when it
 * cannot be: why names the library and dlerror's reason. */
const struct stk_dw *stk_dw_load(const char **why);

#endif
