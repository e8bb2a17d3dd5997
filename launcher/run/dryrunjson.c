/* --dry-run=json (see dryrun.h). */
#include <string.h>

#include "output/json.h"
#include "output/msg.h"
#include "run/dryrun.h"

extern char **environ;

static int in_base(char *const *base, const char *entry)
{
    for (size_t i = 0; base && base[i]; i++)
        if (strcmp(base[i], entry) == 0)
            return 1;
    return 0;
}

/* "env": {"NAME": "value", ...}: an entry without '=' is named whole, with
 * the value null. */
static void put_env(struct json *j, char *const *env, int all)
{
    json_object(j, "env");
    for (size_t i = 0; env[i]; i++) {
        if (!all && in_base(environ, env[i]))
            continue;
        const char *eq = strchr(env[i], '=');
        char name[256];
        if (!eq || (size_t)(eq - env[i]) >= sizeof name) {
            json_null(j, env[i]);
            continue;
        }
        memcpy(name, env[i], (size_t)(eq - env[i]));
        name[eq - env[i]] = '\0';
        json_str(j, name, dryrun_hidden(env[i]) ? DRYRUN_HIDDEN : eq + 1);
    }
    json_close(j);
}

int dryrun_json(const struct amlrun_opts *o, const struct plan *p,
                const struct command *c, struct env_spec *es,
                const struct amlrun_binding *b, FILE *f)
{
    struct json j;
    json_begin(&j, f);
    json_object(&j, NULL);
    json_str(&j, "mode", p->mode == MODE_PROCESS ? "process" : "node");
    json_str(&j, "mode_reason", p->why);
    /* Per-process mode: this process is the one rank. */
    int n = p->mode == MODE_PROCESS ? 1 : p->nproc;
    json_int(&j, "workers", n);
    json_str(&j, "gpu_note", p->topo ? amldist_topo_gpu_note(p->topo)
                                     : bind_gpu_note(b));
    if (options_c10d(o)) {
        /* The node rank comes from the rendezvous: shown as for a node
         * alone, as in the text. */
        json_object(&j, "rendezvous");
        json_str(&j, "backend", o->rdzv_backend);
        json_str(&j, "host", o->owned_addr);
        json_int(&j, "port", o->endpoint_port);
        json_close(&j);
    } else {
        json_null(&j, "rendezvous");
    }
    json_object(&j, "command");
    json_str(&j, "path", c->path);
    json_str(&j, "how", c->how);
    json_close(&j);
    json_array(&j, "ranks");
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        struct worker_id id;
        char **env = worker_env(es, i, 0, &id);
        char **argv = env ? command_argv_for(c, id.local) : NULL;
        if (!argv) {
            amldist_envp_free(env);
            rc = AMLRUN_EXIT_SYSTEM;
            break;
        }
        json_object(&j, NULL);
        json_id(&j, "rank", id.rank);
        json_id(&j, "local_rank", id.local);
        json_id(&j, "node_rank", id.node);
        json_id(&j, "world_size", id.world);
        put_env(&j, env, o->verbose);
        json_array(&j, "argv");
        json_str(&j, NULL, c->path);
        for (size_t k = 1; argv[k]; k++)
            json_str(&j, NULL, argv[k]);
        json_close(&j);
        bind_json(b, p->mode == MODE_PROCESS ? id.local : i, &j);
        json_close(&j);
        command_argv_free(c, argv);
        amldist_envp_free(env);
    }
    if (json_end(&j) < 0 && rc == 0)
        rc = AMLRUN_EXIT_SYSTEM;
    return rc;
}
