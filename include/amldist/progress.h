/*
 * libamldist: the progress API (see amldist_progress(3)).  Included by
 * <amldist.h>.
 *
 * A worker that amlrun started tells it how far it got, once a step, in a
 * shared page that amlrun reads for hang detection, stragglers and
 * --status.  A call makes no system call.
 */
#ifndef AMLDIST_PROGRESS_H
#define AMLDIST_PROGRESS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Record that this process reached `step` now.  Without amlrun (no page in
 * the environment, or a bad one) it does nothing.  Always returns 0; safe
 * from any thread; in a child made by fork() it does nothing.  Since
 * AMLDIST_1.2. */
AMLDIST_API int amldist_progress(uint64_t step);

#ifdef __cplusplus
}
#endif

#endif /* AMLDIST_PROGRESS_H */
