/*
 * The workers' progress page (lib/progress/page.h), made with the job:
 * each worker inherits its descriptor and finds its slot (its index) in
 * the environment, emptied at every start.  Who reads the slots is a
 * plugin's business (the hang watch's view, the straggler readings).
 */
#include <errno.h>
#include <stdio.h>

#include "amldist.h"
#include "job/job.h"
#include "output/msg.h"
#include "progress/page.h"

void job_page_init(struct job *j)
{
    j->page = amldist__progress_page_create((unsigned)j->n);
    if (!j->page && j->s->o->verbose)
        msg_errno(errno, "no progress page for the workers");
}

void job_page_free(struct job *j)
{
    amldist__progress_page_destroy(j->page);
    j->page = NULL;
}

int job_page_fd(const struct job *j)
{
    return j->page ? amldist__progress_page_fd(j->page) : -1;
}

int job_page_worker_env(struct job *j, int index, char ***env)
{
    if (!j->page)
        return 0;
    amldist__progress_page_reset(j->page, (unsigned)index);
    char fd[16], slot[16];
    snprintf(fd, sizeof fd, "%d", amldist__progress_page_fd(j->page));
    snprintf(slot, sizeof slot, "%d", index);
    if (amldist_envp_set(env, AMLDIST__PROGRESS_FD_ENV, fd) < 0 ||
        amldist_envp_set(env, AMLDIST__PROGRESS_SLOT_ENV, slot) < 0)
        return -1;
    return 0;
}
