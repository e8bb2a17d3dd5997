/* --dry-run=json in head-node mode (see headjson.h). */
#include <stdio.h>

#include "cli/hostfile.h"
#include "head/headjson.h"
#include "output/json.h"

int headnode_print_json(const char *launcher, const struct hostlist *hl,
                        int slots, char *const argv[])
{
    struct json j;
    json_begin(&j, stdout);
    json_object(&j, NULL);
    json_str(&j, "mode", "head");
    json_str(&j, "launcher", launcher);
    json_array(&j, "hosts");
    for (int i = 0; i < hl->n; i++) {
        json_object(&j, NULL);
        json_str(&j, "name", hl->h[i].name);
        json_id(&j, "slots", hl->h[i].slots);
        json_close(&j);
    }
    json_close(&j);
    json_id(&j, "nproc_per_node", slots > 0 ? slots : -1);
    json_array(&j, "command");
    for (int i = 0; argv[i]; i++)
        json_str(&j, NULL, argv[i]);
    json_close(&j);
    return json_end(&j);
}
