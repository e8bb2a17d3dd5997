/*
 * The library's messages in amlrun's words.  The library names the options
 * amlrun gives it (amldist_options_t's num_nodes, node_rank, master_addr,
 * master_port) as "option node_rank=0" (lib/layout/options.c), in its
 * errors and in the explanations of the values they set; the user typed
 * --node-rank 0, --node_rank=0 or PET_NODE_RANK=0, or --standalone, or
 * gave no port and amlrun picked one.  libwords_set() writes down, for
 * what amlrun passed, the library's words and amlrun's; libwords() puts
 * amlrun's in place of the library's in any text of the library, so that
 * every message about these options says what the user typed.
 */
#ifndef AMLRUN_LIBWORDS_H
#define AMLRUN_LIBWORDS_H

#include <stddef.h>

#include "amldist.h"
#include "cli/options.h"

/* The most a text of the library is, in amlrun's words. */
#define LIBWORDS_MAX 1536

/* How amlrun chose a port the user did not give (plan_make()). */
enum libwords_port { PORT_GIVEN, PORT_PICKED_STANDALONE, PORT_PICKED_ENDPOINT,
                     PORT_PICKED_TAKEN };

struct libwords {
    int n;
    struct {
        char lib[96];  /* "option node_rank=0" */
        char ours[160]; /* "--node_rank=0" */
    } pair[5];
};

/* The pairs for the options `ao` that amlrun, run with `o`, passes. */
void libwords_set(struct libwords *w, const struct amlrun_opts *o,
                  const amldist_options_t *ao, enum libwords_port port);
/* `text` with amlrun's words for the library's: buf, or text when there
 * is nothing to put in its place. */
const char *libwords(const struct libwords *w, const char *text, char *buf,
                     size_t size);

#endif /* AMLRUN_LIBWORDS_H */
