/*
 * The registry's tables (backends.h) and the backend an endpoint picks by
 * its scheme (backend.h).
 */
#include <string.h>

#include "rdzv/backend.h"
#include "rdzv/backends.h"

#define DECLARE(name, ops) extern const struct amldist__rz_backend_ops ops;
AMLDIST__RZ_BACKENDS(DECLARE)
#undef DECLARE

#define ROW(name, ops) {name, &ops},
static const struct {
    const char *name;
    const struct amldist__rz_backend_ops *ops;
} rows[] = {AMLDIST__RZ_BACKENDS(ROW)};
#undef ROW

const struct amldist__rz_backend_ops *
amldist__rz_backend_pick(const char *endpoint, const char **rest)
{
    for (size_t i = 1; i < sizeof rows / sizeof *rows; i++) {
        size_t n = strlen(rows[i].name);
        if (strncmp(endpoint, rows[i].name, n) == 0 &&
            strncmp(endpoint + n, "://", 3) == 0) {
            *rest = endpoint + n + 3;
            return rows[i].ops;
        }
    }
    *rest = endpoint;
    return rows[0].ops;
}
