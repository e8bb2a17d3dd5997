/* Every node's part of an answer (see gather.h).  Without a control plane
 * this node's part is the whole answer; with one, plane.c asks every node
 * for theirs. */
#include <stdlib.h>

#include "run/gather.h"
#include "run/job.h"
#include "run/plane.h"

void part_free(struct part *p)
{
    if (!p)
        return;
    free(p->data);
    free(p->error);
    p->data = p->error = NULL;
}

void job_gather(struct job *j, enum part_kind k, struct part *mine,
                gather_done_fn *done, void *arg)
{
    if (j->s->rz && plane_gather(j, k, mine, done, arg) == 0)
        return; /* done() comes from the loop */
    struct part *parts = malloc(sizeof *parts);
    if (!parts) {
        part_free(mine);
        done(arg, NULL, 0);
        return;
    }
    parts[0] = *mine;
    done(arg, parts, 1);
}
