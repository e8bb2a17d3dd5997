#ifndef AMLDIST_TOPO_DL_H
#define AMLDIST_TOPO_DL_H
/*
 * hwloc and libxml2, loaded (dlopen) at first use instead of linked: a
 * program that never reads a topology (amlrun with every binding off) does
 * not load them, nor what they bring (libxml2's ICU, libudev...), nor pays
 * for their mappings at each fork.  dl.c defines, hidden, every hwloc_* and
 * xml* function the library calls, each forwarding to the loaded one.
 */

/* Load libhwloc (once per process): 0, or -1 with AMLDIST_ETOPO set,
 * naming the library and why it could not be loaded. */
int amldist__dl_hwloc(void);

/* The same for libxml2 (the NCCL topology reader's). */
int amldist__dl_xml(void);

/* The file libhwloc was loaded from, or NULL when it was not. */
const char *amldist__dl_hwloc_file(void);

#endif
