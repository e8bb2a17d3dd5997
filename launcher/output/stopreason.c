/* The stop reasons' table (see stopreason.h). */
#include "output/msg.h"
#include "output/stopreason.h"

static const struct stop_row rows[STOP_NREASONS] = {
    [STOP_FAILURE] = {"failure", -1, 1, NULL, NULL},
    [STOP_HANG] = {"hang", AMLRUN_EXIT_HANG, 1, "hang: no progress for",
                   "idle_s"},
    [STOP_TIMEOUT] = {"timeout", AMLRUN_EXIT_HANG, 0,
                      "timeout: the job ran for", "run_s"},
    [STOP_SIGNAL] = {"signal", -1, 0, NULL, NULL},
    [STOP_DEADLINE] = {"deadline", -1, 0, NULL, NULL},
    [STOP_PEER] = {"peer", -1, 1, NULL, NULL},
    [STOP_REQUEST] = {"request", 0, 0, NULL, NULL},
};

const struct stop_row *stop_row(enum stop_reason r)
{
    return r >= 0 && r < STOP_NREASONS ? &rows[r] : &rows[STOP_REQUEST];
}
