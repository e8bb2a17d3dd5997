/* "Did you mean" for options amlrun lacks (see optsuggest.h). */
#include <string.h>

#include "cli/opttable.h"
#include "cli/optsuggest.h"

/* The names users of the other launchers type for what amlrun does under
 * another name.  Spelled as they type them, dashes and all. */
static const struct { const char *word, *whose, *ours; } foreign[] = {
    {"--tag-output", "mpirun's", "prefix"},
    {"--label", "srun's", "prefix"},
    {"-l", "srun's", "prefix"},
    {"--output-filename", "mpirun's", "log-dir"},
    {"--output", "srun's", "log-dir"},
    {"--bind-to", "mpirun's", "cpu-bind"},
    {"-np", "mpirun's", "nproc-per-node"},
    {"--npernode", "mpirun's", "nproc-per-node"},
    {"--ntasks-per-node", "srun's", "nproc-per-node"},
    {"--nodes", "srun's", "nnodes"},
    {"-N", "srun's", "nnodes"},
    {"--host", "mpirun's", "hosts"},
    {"-H", "mpirun's", "hosts"},
    {"--nodelist", "srun's", "hosts"},
    {"-w", "srun's", "hosts"},
};

/* The edit distance of a and b (dashes and underscores the same), up to
 * 63 characters each: longer words are no typos of our names. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            char ca = a[i - 1] == '_' ? '-' : a[i - 1];
            size_t up = row[j], best = diag + (ca != b[j - 1]);
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            if (up + 1 < best)
                best = up + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

const char *optsuggest(const char *word, const char **whose)
{
    size_t n = strcspn(word, "=");
    *whose = NULL;
    for (size_t k = 0; k < sizeof foreign / sizeof foreign[0]; k++)
        if (foreign[k].ours && strlen(foreign[k].word) == n &&
            strncmp(foreign[k].word, word, n) == 0) {
            *whose = foreign[k].whose;
            return foreign[k].ours;
        }
    if (n < 4 || word[0] != '-' || word[1] != '-')
        return NULL;
    char name[64];
    if (n - 2 >= sizeof name)
        return NULL;
    memcpy(name, word + 2, n - 2);
    name[n - 2] = '\0';
    /* A third of the word may be wrong, at most 3 letters: nearer ones
     * win, the table's order breaks ties. */
    size_t limit = (n - 2) / 3 < 3 ? (n - 2) / 3 : 3, best = limit + 1;
    const char *found = NULL;
    for (const struct option_def *d = opttable; d->name; d++) {
        size_t dist = distance(name, d->name);
        if (dist < best) {
            best = dist;
            found = d->name;
        }
    }
    return found;
}
