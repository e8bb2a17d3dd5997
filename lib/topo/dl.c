/*
 * The hwloc and libxml2 functions the library calls (topo/dl.h), each a
 * hidden definition with the prototype of the header it includes (so the
 * compiler checks it) that calls the function of the same name in the
 * library loaded by dlopen.  The sonames are those the build found (the
 * Makefile reads them from the development libraries), never a guessed
 * version.
 *
 * Every path into hwloc or libxml2 passes amldist__dl_hwloc() or
 * amldist__dl_xml() first (amldist__hwloc_new, the NCCL file's reader),
 * which fail with an error naming the library.  A call that comes without
 * it still loads what it needs; if the library cannot be loaded then, the
 * process stops with that message: there is no value to return for it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hwloc.h>
#include <hwloc/export.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>
#include <libxml/xmlmemory.h>

#include "topo/dl.h"
#include "util/dltable.h"
#include "util/internal.h"

#ifndef AMLDIST_HWLOC_SONAME
#error "AMLDIST_HWLOC_SONAME: libhwloc's soname, from the Makefile"
#endif
#ifndef AMLDIST_XML_SONAME
#error "AMLDIST_XML_SONAME: libxml2's soname, from the Makefile"
#endif

#define SHIM __attribute__((visibility("hidden")))

#define HWLOC_FUNCTIONS(X)                                                     \
    X(hwloc_bitmap_alloc) X(hwloc_bitmap_and) X(hwloc_bitmap_asprintf)         \
    X(hwloc_bitmap_copy) X(hwloc_bitmap_dup) X(hwloc_bitmap_first)             \
    X(hwloc_bitmap_free) X(hwloc_bitmap_intersects) X(hwloc_bitmap_isequal)    \
    X(hwloc_bitmap_isincluded) X(hwloc_bitmap_isset) X(hwloc_bitmap_iszero)    \
    X(hwloc_bitmap_last) X(hwloc_bitmap_list_asprintf)                         \
    X(hwloc_bitmap_list_snprintf) X(hwloc_bitmap_list_sscanf)                  \
    X(hwloc_bitmap_next) X(hwloc_bitmap_only) X(hwloc_bitmap_or)               \
    X(hwloc_bitmap_set) X(hwloc_bitmap_weight) X(hwloc_bitmap_zero)            \
    X(hwloc_free_xmlbuffer) X(hwloc_get_api_version)                           \
    X(hwloc_get_nbobjs_by_depth) X(hwloc_get_obj_by_depth)                     \
    X(hwloc_get_type_depth) X(hwloc_obj_add_info) X(hwloc_obj_type_is_dcache)  \
    X(hwloc_topology_destroy) X(hwloc_topology_export_xml)                     \
    X(hwloc_topology_export_xmlbuffer) X(hwloc_topology_get_allowed_cpuset)    \
    X(hwloc_topology_get_topology_cpuset) X(hwloc_topology_init)               \
    X(hwloc_topology_insert_misc_object) X(hwloc_topology_load)                \
    X(hwloc_topology_set_all_types_filter) X(hwloc_topology_set_components)    \
    X(hwloc_topology_set_flags) X(hwloc_topology_set_io_types_filter)          \
    X(hwloc_topology_set_synthetic) X(hwloc_topology_set_xml)                  \
    X(hwloc_topology_set_xmlbuffer)

/* xmlFree is a variable of libxml2's (a pointer to its deallocator). */
#define XML_FUNCTIONS(X)                                                       \
    X(xmlDocGetRootElement) X(xmlFreeDoc) X(xmlGetLastError) X(xmlGetLineNo)   \
    X(xmlGetProp) X(xmlReadFile)

#define FIELD(name) __typeof__(&name) name;
struct lib {
    const char *soname, *what;
    pthread_once_t once;
    void *h;
    char why[300];
};

static struct {
    HWLOC_FUNCTIONS(FIELD)
} hw;
static struct {
    XML_FUNCTIONS(FIELD)
    xmlFreeFunc *free;
} xm;

static struct lib hwlib = {AMLDIST_HWLOC_SONAME, "hwloc", PTHREAD_ONCE_INIT,
                           NULL, ""};
static struct lib xmllib = {AMLDIST_XML_SONAME, "libxml2", PTHREAD_ONCE_INIT,
                            NULL, ""};

/* hwloc's plugins (hwloc_pci.so, hwloc_xml_libxml.so...) do not link
 * libhwloc: they find its functions in the global scope, where linking
 * it put them, so it is loaded RTLD_GLOBAL (RTLD_LOCAL makes every plugin
 * fail: "undefined symbol: hwloc_topology_reconnect").  libxml2 serves
 * nobody else. */
#define NAME(name) #name,
#define HW_SLOT(name) (void **)&hw.name,
#define XM_SLOT(name) (void **)&xm.name,

static void load_hwloc(void)
{
    static const char *const names[] = {HWLOC_FUNCTIONS(NAME)};
    void **const slots[] = {HWLOC_FUNCTIONS(HW_SLOT)};
    hwlib.h = amldist__dl_table(hwlib.soname, hwlib.what, RTLD_GLOBAL, names,
                                slots, sizeof names / sizeof *names,
                                hwlib.why, sizeof hwlib.why);
}

static void load_xml(void)
{
    static const char *const names[] = {XML_FUNCTIONS(NAME) "xmlFree"};
    void **const slots[] = {XML_FUNCTIONS(XM_SLOT)(void **) & xm.free};
    xmllib.h = amldist__dl_table(xmllib.soname, xmllib.what, RTLD_LOCAL,
                                 names, slots, sizeof names / sizeof *names,
                                 xmllib.why, sizeof xmllib.why);
}

static int gate(struct lib *l, void (*load)(void))
{
    pthread_once(&l->once, load);
    return l->h ? 0 : amldist__fail(AMLDIST_ETOPO, "%s", l->why);
}

int amldist__dl_hwloc(void)
{
    return gate(&hwlib, load_hwloc);
}

int amldist__dl_xml(void)
{
    return gate(&xmllib, load_xml);
}

const char *amldist__dl_hwloc_file(void)
{
    Dl_info info;
    void *addr;
    if (amldist__dl_hwloc() < 0)
        return NULL;
    memcpy(&addr, &hw.hwloc_get_api_version, sizeof addr);
    return dladdr(addr, &info) && info.dli_fname ? info.dli_fname : NULL;
}

/* A call that did not pass the gate, when the library is not there. */
static void need(struct lib *l, void (*load)(void))
{
    pthread_once(&l->once, load);
    if (l->h)
        return;
    fprintf(stderr, "libamldist: %s\n", l->why);
    abort();
}

#define H(name) (need(&hwlib, load_hwloc), hw.name)
#define XM(name) (need(&xmllib, load_xml), xm.name)

/* ---- hwloc: the prototypes of hwloc.h, helper.h, export.h ---- */

SHIM hwloc_bitmap_t hwloc_bitmap_alloc(void)
{
    return H(hwloc_bitmap_alloc)();
}
SHIM int hwloc_bitmap_and(hwloc_bitmap_t res, hwloc_const_bitmap_t a,
                          hwloc_const_bitmap_t b)
{
    return H(hwloc_bitmap_and)(res, a, b);
}
SHIM int hwloc_bitmap_asprintf(char **strp, hwloc_const_bitmap_t bitmap)
{
    return H(hwloc_bitmap_asprintf)(strp, bitmap);
}
SHIM int hwloc_bitmap_copy(hwloc_bitmap_t dst, hwloc_const_bitmap_t src)
{
    return H(hwloc_bitmap_copy)(dst, src);
}
SHIM hwloc_bitmap_t hwloc_bitmap_dup(hwloc_const_bitmap_t bitmap)
{
    return H(hwloc_bitmap_dup)(bitmap);
}
SHIM int hwloc_bitmap_first(hwloc_const_bitmap_t bitmap)
{
    return H(hwloc_bitmap_first)(bitmap);
}
SHIM void hwloc_bitmap_free(hwloc_bitmap_t bitmap)
{
    H(hwloc_bitmap_free)(bitmap);
}
SHIM int hwloc_bitmap_intersects(hwloc_const_bitmap_t a,
                                 hwloc_const_bitmap_t b)
{
    return H(hwloc_bitmap_intersects)(a, b);
}
SHIM int hwloc_bitmap_isequal(hwloc_const_bitmap_t a, hwloc_const_bitmap_t b)
{
    return H(hwloc_bitmap_isequal)(a, b);
}
SHIM int hwloc_bitmap_isincluded(hwloc_const_bitmap_t sub,
                                 hwloc_const_bitmap_t super)
{
    return H(hwloc_bitmap_isincluded)(sub, super);
}
SHIM int hwloc_bitmap_isset(hwloc_const_bitmap_t bitmap, unsigned id)
{
    return H(hwloc_bitmap_isset)(bitmap, id);
}
SHIM int hwloc_bitmap_iszero(hwloc_const_bitmap_t bitmap)
{
    return H(hwloc_bitmap_iszero)(bitmap);
}
SHIM int hwloc_bitmap_last(hwloc_const_bitmap_t bitmap)
{
    return H(hwloc_bitmap_last)(bitmap);
}
SHIM int hwloc_bitmap_list_asprintf(char **strp, hwloc_const_bitmap_t bitmap)
{
    return H(hwloc_bitmap_list_asprintf)(strp, bitmap);
}
SHIM int hwloc_bitmap_list_snprintf(char *buf, size_t buflen,
                                    hwloc_const_bitmap_t bitmap)
{
    return H(hwloc_bitmap_list_snprintf)(buf, buflen, bitmap);
}
SHIM int hwloc_bitmap_list_sscanf(hwloc_bitmap_t bitmap, const char *string)
{
    return H(hwloc_bitmap_list_sscanf)(bitmap, string);
}
SHIM int hwloc_bitmap_next(hwloc_const_bitmap_t bitmap, int prev)
{
    return H(hwloc_bitmap_next)(bitmap, prev);
}
SHIM int hwloc_bitmap_only(hwloc_bitmap_t bitmap, unsigned id)
{
    return H(hwloc_bitmap_only)(bitmap, id);
}
SHIM int hwloc_bitmap_or(hwloc_bitmap_t res, hwloc_const_bitmap_t a,
                         hwloc_const_bitmap_t b)
{
    return H(hwloc_bitmap_or)(res, a, b);
}
SHIM int hwloc_bitmap_set(hwloc_bitmap_t bitmap, unsigned id)
{
    return H(hwloc_bitmap_set)(bitmap, id);
}
SHIM int hwloc_bitmap_weight(hwloc_const_bitmap_t bitmap)
{
    return H(hwloc_bitmap_weight)(bitmap);
}
SHIM void hwloc_bitmap_zero(hwloc_bitmap_t bitmap)
{
    H(hwloc_bitmap_zero)(bitmap);
}
SHIM void hwloc_free_xmlbuffer(hwloc_topology_t topology, char *xmlbuffer)
{
    H(hwloc_free_xmlbuffer)(topology, xmlbuffer);
}
SHIM unsigned hwloc_get_api_version(void)
{
    return H(hwloc_get_api_version)();
}
SHIM unsigned hwloc_get_nbobjs_by_depth(hwloc_topology_t topology, int depth)
{
    return H(hwloc_get_nbobjs_by_depth)(topology, depth);
}
SHIM hwloc_obj_t hwloc_get_obj_by_depth(hwloc_topology_t topology, int depth,
                                        unsigned idx)
{
    return H(hwloc_get_obj_by_depth)(topology, depth, idx);
}
SHIM int hwloc_get_type_depth(hwloc_topology_t topology,
                              hwloc_obj_type_t type)
{
    return H(hwloc_get_type_depth)(topology, type);
}
SHIM int hwloc_obj_add_info(hwloc_obj_t obj, const char *name,
                            const char *value)
{
    return H(hwloc_obj_add_info)(obj, name, value);
}
SHIM int hwloc_obj_type_is_dcache(hwloc_obj_type_t type)
{
    return H(hwloc_obj_type_is_dcache)(type);
}
SHIM void hwloc_topology_destroy(hwloc_topology_t topology)
{
    H(hwloc_topology_destroy)(topology);
}
SHIM int hwloc_topology_export_xml(hwloc_topology_t topology,
                                   const char *xmlpath, unsigned long flags)
{
    return H(hwloc_topology_export_xml)(topology, xmlpath, flags);
}
SHIM int hwloc_topology_export_xmlbuffer(hwloc_topology_t topology,
                                         char **xmlbuffer, int *buflen,
                                         unsigned long flags)
{
    return H(hwloc_topology_export_xmlbuffer)(topology, xmlbuffer, buflen,
                                              flags);
}
SHIM hwloc_const_cpuset_t
hwloc_topology_get_allowed_cpuset(hwloc_topology_t topology)
{
    return H(hwloc_topology_get_allowed_cpuset)(topology);
}
SHIM hwloc_const_cpuset_t
hwloc_topology_get_topology_cpuset(hwloc_topology_t topology)
{
    return H(hwloc_topology_get_topology_cpuset)(topology);
}
SHIM int hwloc_topology_init(hwloc_topology_t *topologyp)
{
    return H(hwloc_topology_init)(topologyp);
}
SHIM hwloc_obj_t hwloc_topology_insert_misc_object(hwloc_topology_t topology,
                                                   hwloc_obj_t parent,
                                                   const char *name)
{
    return H(hwloc_topology_insert_misc_object)(topology, parent, name);
}
SHIM int hwloc_topology_load(hwloc_topology_t topology)
{
    return H(hwloc_topology_load)(topology);
}
SHIM int hwloc_topology_set_all_types_filter(hwloc_topology_t topology,
                                             enum hwloc_type_filter_e filter)
{
    return H(hwloc_topology_set_all_types_filter)(topology, filter);
}
SHIM int hwloc_topology_set_components(hwloc_topology_t topology,
                                       unsigned long flags, const char *name)
{
    return H(hwloc_topology_set_components)(topology, flags, name);
}
SHIM int hwloc_topology_set_flags(hwloc_topology_t topology,
                                  unsigned long flags)
{
    return H(hwloc_topology_set_flags)(topology, flags);
}
SHIM int hwloc_topology_set_io_types_filter(hwloc_topology_t topology,
                                            enum hwloc_type_filter_e filter)
{
    return H(hwloc_topology_set_io_types_filter)(topology, filter);
}
SHIM int hwloc_topology_set_synthetic(hwloc_topology_t topology,
                                      const char *description)
{
    return H(hwloc_topology_set_synthetic)(topology, description);
}
SHIM int hwloc_topology_set_xml(hwloc_topology_t topology,
                                const char *xmlpath)
{
    return H(hwloc_topology_set_xml)(topology, xmlpath);
}
SHIM int hwloc_topology_set_xmlbuffer(hwloc_topology_t topology,
                                      const char *buffer, int size)
{
    return H(hwloc_topology_set_xmlbuffer)(topology, buffer, size);
}

/* ---- libxml2: the prototypes of tree.h, parser.h, xmlerror.h ---- */

SHIM xmlNodePtr xmlDocGetRootElement(const xmlDoc *doc)
{
    return XM(xmlDocGetRootElement)(doc);
}
SHIM void xmlFreeDoc(xmlDocPtr cur)
{
    XM(xmlFreeDoc)(cur);
}
/* const since libxml2 2.12: the header's type, whichever it is. */
SHIM __typeof__(xmlGetLastError()) xmlGetLastError(void)
{
    return XM(xmlGetLastError)();
}
SHIM long xmlGetLineNo(const xmlNode *node)
{
    return XM(xmlGetLineNo)(node);
}
SHIM xmlChar *xmlGetProp(const xmlNode *node, const xmlChar *name)
{
    return XM(xmlGetProp)(node, name);
}
SHIM xmlDocPtr xmlReadFile(const char *URL, const char *encoding, int options)
{
    return XM(xmlReadFile)(URL, encoding, options);
}

/* What xmlFree points to in the loaded libxml2, read at each call: a
 * program may have set its own deallocator (xmlMemSetup). */
static void free_through_libxml(void *mem)
{
    (*XM(free))(mem);
}
#ifdef xmlFree
#error "this libxml2 makes xmlFree a macro (thread-local allocators)"
#else
SHIM xmlFreeFunc xmlFree = free_through_libxml;
#endif
