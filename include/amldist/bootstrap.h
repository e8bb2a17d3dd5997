/* libamldist: bootstrap API (see libamldist(3)).  Included by <amldist.h>. */
#ifndef AMLDIST_BOOTSTRAP_H
#define AMLDIST_BOOTSTRAP_H

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* AMLDIST_BOOTSTRAP_H */
