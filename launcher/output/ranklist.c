/* Rank lists as ranges (see ranklist.h). */
#include <stdio.h>
#include <string.h>

#include "output/ranklist.h"

int ranklist_format(const int *ranks, size_t n, char *buf, size_t size)
{
    static const char cut[] = ",...";
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && (long long)ranks[j + 1] <= (long long)ranks[j] + 1) /* a run */
            j++;
        char item[32];
        int k = ranks[j] > ranks[i]
                    ? snprintf(item, sizeof item, "%s%d-%d", used ? "," : "", ranks[i], ranks[j])
                    : snprintf(item, sizeof item, "%s%d", used ? "," : "", ranks[i]);
        /* Room for this item, and for the mark of a cut after it unless it
         * is the last one. */
        size_t need = (size_t)k + (j + 1 < n ? sizeof cut - 1 : 0);
        if (used + need + 1 > size) {
            const char *mark = used ? cut : cut + 1; /* it fits: see need */
            snprintf(buf + used, size - used, "%s", mark);
            return 1;
        }
        memcpy(buf + used, item, (size_t)k + 1);
        used += (size_t)k;
        i = j + 1;
    }
    return 0;
}
