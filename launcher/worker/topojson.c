/*
 * amlrun --topo=json: the topology --topo prints, built from the library's
 * public queries (amldist_topo(3)), never from its text.
 */
#include <stdio.h>

#include "amldist.h"
#include "output/json.h"
#include "worker/bind.h"

/* One row of distance classes from GPU `gpu` to every GPU or NIC. */
static void dist_row(struct json *j, const amldist_topo_t *t, int gpu,
                     int nic_row)
{
    int n = nic_row ? amldist_topo_num_nics(t) : amldist_topo_num_gpus(t);
    json_array(j, NULL);
    for (int k = 0; k < n; k++) {
        int d = nic_row ? amldist_topo_gpu_nic_dist(t, gpu, k)
                        : amldist_topo_gpu_gpu_dist(t, gpu, k);
        json_str(j, NULL, d < 0 ? NULL : amldist_dist_name(d));
    }
    json_close(j);
}

int topo_json(const amldist_topo_t *t, FILE *f)
{
    struct json j;
    int ngpus = amldist_topo_num_gpus(t), nnics = amldist_topo_num_nics(t);
    json_begin(&j, f);
    json_object(&j, NULL);
    json_str(&j, "source", amldist_topo_source(t));
    json_str(&j, "locality", amldist_topo_locality(t));
    json_str(&j, "gpu_note", amldist_topo_gpu_note(t));
    json_int(&j, "numa_nodes", amldist_topo_num_numa(t));
    json_int(&j, "cores", amldist_topo_num_cores(t));
    json_int(&j, "pci_gpus", amldist_topo_num_pci_gpus(t));
    json_array(&j, "gpus");
    for (int g = 0; g < ngpus; g++) {
        const char *uuid = amldist_topo_gpu_uuid(t, g);
        json_object(&j, NULL);
        json_int(&j, "index", g);
        json_str(&j, "busid", amldist_topo_gpu_busid(t, g));
        json_str(&j, "uuid", uuid && *uuid ? uuid : NULL);
        json_id(&j, "numa", amldist_topo_gpu_numa(t, g));
        json_close(&j);
    }
    json_close(&j);
    json_array(&j, "nics");
    for (int k = 0; k < nnics; k++)
        json_str(&j, NULL, amldist_topo_nic_name(t, k));
    json_close(&j);
    /* Rows by GPU, columns by GPU or NIC, as --topo's matrix. */
    json_array(&j, "gpu_gpu");
    for (int g = 0; g < ngpus; g++)
        dist_row(&j, t, g, 0);
    json_close(&j);
    json_array(&j, "gpu_nic");
    for (int g = 0; g < ngpus; g++)
        dist_row(&j, t, g, 1);
    json_close(&j);
    json_array(&j, "warnings");
    const char *w = amldist_topo_warnings(t);
    while (w && *w) {
        const char *nl = w;
        while (*nl && *nl != '\n')
            nl++;
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(nl - w), w);
        json_str(&j, NULL, line);
        w = *nl ? nl + 1 : nl;
    }
    json_close(&j);
    return json_end(&j);
}
