/*
 * --output FILE.svg|png|pdf: the binding plan drawn by lstopo(1) from the
 * library's annotated XML (amldist_plan_export_xml).
 */
#ifndef AMLRUN_PICTURE_H
#define AMLRUN_PICTURE_H

#include "amldist.h"

/* Draw plan `p` on topology `t` into `path`, its format from its
 * extension.  Returns 0, or -1 after an "amlrun: --output ..." message. */
int picture_draw(const amldist_plan_t *p, const amldist_topo_t *t,
                 const char *path);

#endif /* AMLRUN_PICTURE_H */
