/*
 * cost_follow: iterates a dataset with default settings (cost learning on, I/O mode auto)
 * (batch 8) and changes the storage under the running loader: after --switch-after chunk loads
 * it writes LINE into FILE (a blkio throttle of its own cgroup), then records how many more
 * reads the cost model needs until its per-operation estimate crosses --threshold-us in the
 * direction of the change. Prints one JSON object. Used by cost_cell.sh (root, cgroup v1).
 *
 *     cost_follow DATASET --memory BYTES --switch-after N --file FILE --line LINE
 *                 --threshold-us US --direction up|down [--epochs E]
 *
 * Exit 0 with the JSON (followed: true/false), 1 on a loader error, 2 on usage errors.
 */
#include "hdmlp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: cost_follow DATASET --memory BYTES --switch-after N --file FILE "
                    "--line LINE --threshold-us US --direction up|down [--epochs E]\n");
    return 2;
}

static int write_line(const char *file, const char *line)
{
    FILE *f = fopen(file, "we");
    if (f == NULL) {
        perror(file);
        return -1;
    }
    const int ok = fprintf(f, "%s\n", line) > 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        return usage();
    }
    const char *path = argv[1], *file = NULL, *line = NULL;
    uint64_t memory = 0, switch_after = 0, epochs = 4;
    double threshold = 0;
    int up = 1;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--memory") == 0) {
            memory = strtoull(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--switch-after") == 0) {
            switch_after = strtoull(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--file") == 0) {
            file = argv[i + 1];
        } else if (strcmp(argv[i], "--line") == 0) {
            line = argv[i + 1];
        } else if (strcmp(argv[i], "--threshold-us") == 0) {
            threshold = strtod(argv[i + 1], NULL);
        } else if (strcmp(argv[i], "--direction") == 0) {
            up = strcmp(argv[i + 1], "up") == 0;
        } else if (strcmp(argv[i], "--epochs") == 0) {
            epochs = strtoull(argv[i + 1], NULL, 10);
        } else {
            return usage();
        }
    }
    if (memory == 0 || file == NULL || line == NULL || threshold <= 0 || epochs == 0) {
        return usage();
    }
    hdmlp_dataset *ds = NULL;
    hdmlp_config *cfg = NULL;
    hdmlp_loader *ld = NULL;
    int rc = hdmlp_dataset_open(path, &ds);
    if (rc == HDMLP_OK) {
        rc = hdmlp_config_create(&cfg);
    }
    if (rc == HDMLP_OK) {
        hdmlp_config_set_memory(cfg, memory);
        hdmlp_config_set_epochs(cfg, epochs);
        hdmlp_config_set_seed(cfg, 5);
        hdmlp_config_set_batch_size(cfg, 8);
        rc = hdmlp_loader_create(ds, cfg, &ld);
    }
    uint64_t reads_at_switch = 0, reads_at_follow = 0, batches = 0;
    double op_before = 0, op_after = 0;
    int switched = 0, followed = 0;
    hdmlp_batch *b;
    while (rc == HDMLP_OK && (rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        hdmlp_batch_release(b);
        batches++;
        hdmlp_stats st;
        hdmlp_loader_stats(ld, &st, sizeof st);
        const double op = (double)st.source_op_ns / 1e3;
        if (!switched && st.chunk_loads >= switch_after) {
            if (write_line(file, line) != 0) {
                rc = HDMLP_E_IO;
                break;
            }
            switched = 1;
            reads_at_switch = st.cost_reads;
            op_before = op;
        } else if (switched && !followed && (up ? op > threshold : op < threshold)) {
            followed = 1;
            reads_at_follow = st.cost_reads;
            op_after = op;
        }
    }
    if (rc != HDMLP_END) {
        fprintf(stderr, "cost_follow: %s: %s\n", hdmlp_strerror(rc), hdmlp_last_error());
        hdmlp_loader_free(ld);
        hdmlp_config_free(cfg);
        hdmlp_dataset_close(ds);
        return 1;
    }
    hdmlp_stats st;
    hdmlp_loader_stats(ld, &st, sizeof st);
    printf("{\"switched\": %s, \"followed\": %s, \"reads_at_switch\": %" PRIu64
           ", \"reads_to_follow\": %" PRIu64 ", \"op_us_before\": %.1f, \"op_us_after\": %.1f"
           ", \"op_us_end\": %.1f, \"bytes_per_s_end\": %" PRIu64 ", \"cost_reads\": %" PRIu64
           ", \"cost_changes\": %" PRIu64 ", \"cost_explorations\": %" PRIu64
           ", \"direct_io\": %" PRIu64 ", \"batches\": %" PRIu64 "}\n",
           switched ? "true" : "false", followed ? "true" : "false", reads_at_switch,
           followed ? reads_at_follow - reads_at_switch : 0, op_before, op_after,
           (double)st.source_op_ns / 1e3, st.source_bytes_per_s, st.cost_reads, st.cost_changes,
           st.cost_explorations, st.direct_io, batches);
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    return 0;
}
