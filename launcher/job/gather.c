/* Every node's part of an answer (see gather.h).  Without a provider this
 * node's part is the whole answer; with one (the plane plugin, across
 * nodes: hooks.h), it asks every node for theirs. */
#include <stdlib.h>

#include "job/gather.h"
#include "job/hooks.h"

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
    if (job_hooks_gather(j, k, mine, done, arg) == 0)
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
