/*
 * The handlers of torchrun 2.x's options that need more than a family
 * handler of optapply.c: --signals-to-handle, --event-log-handler and the
 * refused --logs-specs.  Same contract as optapply.c's handlers: -1 to go
 * on, or an exit status after a message (`name` is the option's label,
 * "--signals-to-handle " or "PET_SIGNALS_TO_HANDLE=").
 */
#ifndef AMLRUN_TORCHOPTS_H
#define AMLRUN_TORCHOPTS_H

#include "cli/options.h"

struct handler;

int on_signals_to_handle(struct amlrun_opts *o, const struct handler *h,
                         const char *name, const char *val);
int on_event_log_handler(struct amlrun_opts *o, const struct handler *h,
                         const char *name, const char *val);
int on_logs_specs(struct amlrun_opts *o, const struct handler *h,
                  const char *name, const char *val);

#endif /* AMLRUN_TORCHOPTS_H */
