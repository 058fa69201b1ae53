/*
 * The node board under sanitizers (TSan cannot run Criterion binaries): three local ranks
 * over the in-process transport with the board on, rank 0's consumer slower (so ranks
 * hold back, starve and borrow while I/O threads are gated), stats read from another
 * thread meanwhile; then the same run with the board off must deliver the same sequences.
 * Plain C; prints "N passed, N failed" and exits non-zero on any failure.
 */
#include "hdmlp.h"
#include "loader.h"
#include "support/fakenet.h"
#include "support/testds.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORLD 3

typedef struct rank_run {
    hdmlp_loader *ld;
    testds_seq seq;
    int rc;
    uint32_t delay_us;
    hdmlp_stats st;
    atomic_int done;
} rank_run;

static void *consume(void *arg)
{
    rank_run *r = arg;
    hdmlp_batch *b;
    while ((r->rc = hdmlp_loader_next(r->ld, &b)) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            if (r->seq.n == r->seq.cap) {
                r->seq.cap = r->seq.cap ? 2 * r->seq.cap : 1024;
                r->seq.idx = realloc(r->seq.idx, r->seq.cap * sizeof(uint64_t));
                r->seq.ep = realloc(r->seq.ep, r->seq.cap * sizeof(uint64_t));
                if (r->seq.idx == NULL || r->seq.ep == NULL) {
                    abort();
                }
            }
            r->seq.ep[r->seq.n] = hdmlp_batch_epoch(b);
            r->seq.idx[r->seq.n++] = v[i].index;
        }
        if (r->delay_us > 0) {
            const struct timespec ts = {0, (long)r->delay_us * 1000};
            nanosleep(&ts, NULL);
        }
        hdmlp_batch_release(b);
    }
    hdmlp_loader_stats(r->ld, &r->st, sizeof r->st);
    atomic_store(&r->done, 1);
    return NULL;
}

/* Reads every rank's stats while they run (the stats lock against the board's writes). */
static void *watch(void *arg)
{
    rank_run *runs = arg;
    hdmlp_stats st;
    for (;;) {
        int all = 1;
        for (uint32_t r = 0; r < WORLD; r++) {
            if (!atomic_load(&runs[r].done)) {
                all = 0;
                hdmlp_loader_stats(runs[r].ld, &st, sizeof st);
            }
        }
        if (all) {
            return NULL;
        }
        const struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

static int run_world(const char *dir, int board, uint64_t token, rank_run *runs)
{
    hdmlp_dataset *ds = NULL;
    if (hdmlp_dataset_open(dir, &ds) != HDMLP_OK) {
        return -1;
    }
    fakenet *hub = NULL;
    fakenet_create(WORLD, &hub);
    const char *peers[WORLD] = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
    int rc = 0;
    for (uint32_t r = 0; r < WORLD && rc == 0; r++) {
        hdmlp_config *cfg = NULL;
        hdmlp_config_create(&cfg);
        hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 3);
        hdmlp_config_set_batch_size(cfg, 16);
        hdmlp_config_set_epochs(cfg, 2);
        hdmlp_config_set_seed(cfg, 5);
        hdmlp_config_set_threads(cfg, 4);
        hdmlp_config_set_rank(cfg, r, WORLD);
        hdmlp_config_set_peers(cfg, peers, WORLD);
        hdmlp_config_set_job_token(cfg, token);
        hdmlp_config_set_peer_timeout(cfg, 20000);
        hdmlp_config_set_node_board(cfg, board);
        memset(&runs[r], 0, sizeof(runs[r]));
        runs[r].delay_us = r == 0 ? 1500 : 0;
        if (loader_create_with(ds, cfg, fakenet_factory, &runs[r].ld) != HDMLP_OK) {
            fprintf(stderr, "rank %u: %s\n", r, hdmlp_last_error());
            rc = -1;
        }
        hdmlp_config_free(cfg);
    }
    if (rc == 0) {
        pthread_t th[WORLD], w;
        for (uint32_t r = 0; r < WORLD; r++) {
            pthread_create(&th[r], NULL, consume, &runs[r]);
        }
        pthread_create(&w, NULL, watch, runs);
        for (uint32_t r = 0; r < WORLD; r++) {
            pthread_join(th[r], NULL);
        }
        pthread_join(w, NULL);
    }
    for (uint32_t r = 0; r < WORLD; r++) {
        hdmlp_loader_free(runs[r].ld);
        runs[r].ld = NULL;
    }
    fakenet_free(hub);
    hdmlp_dataset_close(ds);
    return rc;
}

int main(void)
{
    char dir[512];
    const uint64_t n = getenv("HDMLP_TEST_SHORT") != NULL ? 900 : 2400;
    if (testds_mkdtemp("balthr", dir, sizeof(dir)) != 0) {
        fprintf(stderr, "cannot make a temporary directory\n");
        return 1;
    }
    const testds_spec spec = {n, 8, 0, 17, 200, 1200, 0, 0, 5, 0};
    if (testds_write(dir, &spec) != HDMLP_OK) {
        fprintf(stderr, "%s\n", hdmlp_last_error());
        return 1;
    }
    const uint64_t token = ((uint64_t)getpid() << 16) ^ 0xba1;
    rank_run on[WORLD], off[WORLD];
    memset(on, 0, sizeof(on));
    memset(off, 0, sizeof(off));
    int failures = 0, passes = 0;
    if (run_world(dir, HDMLP_NODE_BOARD_ON, token, on) != 0 ||
        run_world(dir, HDMLP_NODE_BOARD_OFF, token, off) != 0) {
        fprintf(stderr, "FAIL: cannot run the ranks\n");
        failures++;
    } else {
        uint64_t total = 0, windows = 0;
        for (uint32_t r = 0; r < WORLD; r++) {
            total += on[r].seq.n;
            windows += on[r].st.board_windows;
            int same =
                on[r].rc == HDMLP_END && off[r].rc == HDMLP_END && on[r].seq.n == off[r].seq.n;
            for (uint64_t i = 0; same && i < on[r].seq.n; i++) {
                same = on[r].seq.idx[i] == off[r].seq.idx[i] &&
                       on[r].seq.ep[i] == off[r].seq.ep[i];
            }
            if (!same) {
                fprintf(stderr,
                        "FAIL: rank %u: board on (%s, %llu samples) and off (%s, %llu)"
                        " differ\n",
                        r, hdmlp_err_name(on[r].rc), (unsigned long long)on[r].seq.n,
                        hdmlp_err_name(off[r].rc), (unsigned long long)off[r].seq.n);
                failures++;
            } else {
                passes++;
            }
        }
        if (total != 2 * n || windows == 0) {
            fprintf(stderr, "FAIL: %llu samples delivered of %llu, %llu board windows\n",
                    (unsigned long long)total, (unsigned long long)(2 * n),
                    (unsigned long long)windows);
            failures++;
        } else {
            passes++;
        }
    }
    for (uint32_t r = 0; r < WORLD; r++) {
        testds_seq_free(&on[r].seq);
        testds_seq_free(&off[r].seq);
    }
    testds_rm_rf(dir);
    printf("%d passed, %d failed\n", passes, failures);
    return failures == 0 ? 0 : 1;
}
