/* libamldist: topo API (see libamldist(3)).  Included by <amldist.h>. */
#ifndef AMLDIST_TOPO_H
#define AMLDIST_TOPO_H

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* AMLDIST_TOPO_H */
