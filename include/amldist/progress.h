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

/* Announce a long step (a checkpoint's save, an evaluation, the first
 * step's compilation, a data loader warming up): this process's next
 * amldist_progress() call comes within `seconds`.  Until then amlrun's
 * --hang-timeout does not take it for stalled; past it without a call, it
 * is.  The next call ends the announcement; a new one replaces it (0:
 * none).  As torchelastic's `expires(after=seconds)`.  Without amlrun it
 * does nothing.  0, or -1 with errno EINVAL when `seconds` is not a number
 * in [0, 1e9].  Safe from any thread.  Since AMLDIST_1.3. */
AMLDIST_API int amldist_progress_expect(double seconds);

#ifdef __cplusplus
}
#endif

#endif /* AMLDIST_PROGRESS_H */
