/*
 * Soak and resource limits (issue 7, item 7), in plain C over the public API (the
 * datasets are written with tests/support/testds.c).
 *
 *   soak soak [EPOCHS]   one loader, EPOCHS (default 20) epochs, 2 I/O threads: RSS
 *                        (/proc/self/statm) and open fds (/proc/self/fd) sampled at every
 *                        epoch end and printed; last - second epoch must stay within
 *                        2 MiB and 2 fds; then 10 loader create/free cycles must return to
 *                        the same fd count. Exactly once per epoch throughout.
 *   soak budget [--strict]
 *                        for --threads 1, 4, 16 (engine auto) and 16 (pread), lookahead 0
 *                        (as far as memory allows): each in a fresh child process, 2
 *                        epochs with a budget well below the dataset; peak_memory_bytes <=
 *                        budget always; the peak RSS growth over the child's baseline
 *                        (VmHWM after clear_refs) <= budget + SOAK_RSS_OVERHEAD with one
 *                        malloc arena (mallopt M_ARENA_MAX 1, as MALLOC_ARENA_MAX=1 does);
 *                        with glibc's default arenas the growth is printed, and checked
 *                        against the same bound only with --strict.
 *   soak ssd-enospc      the SSD cache directory on a full 1 MiB tmpfs: staging stops, loading
 *                        continues from the source, exactly once; no partial cache file is
 *                        left; a second run reuses what was staged. Exit 77 when mounting a
 *                        tmpfs is not permitted.
 *   soak emfile          RLIMIT_NOFILE lowered, then a dataset of one chunk per segment file:
 *                        a clear HDMLP_E_MFILE (or E_IO) naming the segment file, no crash;
 *                        with the limit restored a new loader delivers the epoch.
 *
 * RSS checks are reported but not asserted in sanitizer builds (ASan's quarantine and
 * TSan's shadow memory are not the loader's). Datasets go under $HDMLP_TEST_TMP or /tmp.
 */
#include "resources/soak.h"

#include <malloc.h>
#include <string.h>
#include <unistd.h>

/* ---- soak ------------------------------------------------------------------------------- */

int cmd_soak(uint64_t epochs)
{
    static const testds_spec spec = {2000, 16, 8, 71, 256, 8192, 1, 0, 10, 0};
    char dir[4200];
    make_dataset("soak", &spec, dir, sizeof(dir));
    const int fds_none = open_fds();
    hdmlp_dataset *ds = NULL;
    REQUIRE(hdmlp_dataset_open(dir, &ds) == HDMLP_OK, "open: %s", hdmlp_last_error());
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    hdmlp_config *const cfg = config(2u << 20, 2, epochs);

    const int fds0 = open_fds();
    uint64_t *const rss = calloc((size_t)epochs, sizeof(uint64_t));
    int *const fds = calloc((size_t)epochs, sizeof(int));
    REQUIRE(rss && fds, "calloc");
    hdmlp_loader *ld = NULL;
    REQUIRE(hdmlp_loader_create(ds, cfg, &ld) == HDMLP_OK, "create: %s", hdmlp_last_error());
    epoch_check ec;
    ec_init(&ec, n);
    hdmlp_batch *b;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        const uint64_t prev = ec.epoch;
        const int boundary = ec_batch(&ec, b);
        hdmlp_batch_release(b);
        if (boundary && prev < epochs) {
            rss[prev] = rss_bytes(); /* at the end of epoch `prev` (one batch held) */
            fds[prev] = open_fds();
        }
    }
    CHECK(rc == HDMLP_END, "loader_next: %s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    ec_close(&ec);
    rss[epochs - 1] = rss_bytes();
    fds[epochs - 1] = open_fds();
    hdmlp_stats st;
    hdmlp_loader_stats(ld, &st, sizeof st);
    CHECK(st.epochs == epochs && st.samples == epochs * n, "stats: %llu epochs, %llu samples",
          (unsigned long long)st.epochs, (unsigned long long)st.samples);
    CHECK(st.peak_memory_bytes <= st.memory_budget, "peak %llu > budget %llu",
          (unsigned long long)st.peak_memory_bytes, (unsigned long long)st.memory_budget);
    hdmlp_loader_free(ld);
    free(ec.seen);
    const int fds_kept = open_fds(); /* + the dataset's segment files, kept until close */

    printf("soak: %llu epochs x %llu samples, 2 threads, budget 2 MiB, %llu chunk loads, "
           "fds before the loader %d\n",
           (unsigned long long)epochs, (unsigned long long)n,
           (unsigned long long)st.chunk_loads, fds0);
    printf("soak: epoch  rss_kib  fds\n");
    for (uint64_t e = 0; e < epochs; e++) {
        printf("soak: %5llu %8llu %4d\n", (unsigned long long)e,
               (unsigned long long)(rss[e] / 1024), fds[e]);
    }
    const double drss = ((double)rss[epochs - 1] - (double)rss[1]) / MIB;
    const int dfd = fds[epochs - 1] - fds[1];
    printf("soak: last - second epoch: rss %+.3f MiB, fds %+d\n", drss, dfd);
    if (SOAK_SANITIZED) {
        printf("soak: sanitizer build: RSS growth reported, not checked\n");
    } else {
        CHECK(drss <= 2.0, "RSS grew %.3f MiB between epoch 1 and %llu", drss,
              (unsigned long long)(epochs - 1));
    }
    CHECK(dfd <= 2, "open fds grew by %d between epoch 1 and %llu", dfd,
          (unsigned long long)(epochs - 1));

    /* loader lifetimes: create/free cycles return every descriptor */
    for (int i = 0; i < 10; i++) {
        hdmlp_config_set_epochs(cfg, 1);
        rc = run_all(ds, cfg, NULL);
        CHECK(rc == HDMLP_END, "cycle %d: %s: %s", i, hdmlp_err_name(rc), hdmlp_last_error());
        CHECK(open_fds() == fds_kept, "cycle %d: %d fds open after loader_free, %d before", i,
              open_fds(), fds_kept);
    }
    printf("soak: 10 loader create/free cycles: fds back to %d each time (%d segment files "
           "of the open dataset)\n",
           open_fds(), hdmlp_dataset_segment_count(ds));
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    CHECK(open_fds() == fds_none, "%d fds open after dataset_close, %d before open", open_fds(),
          fds_none);
    if (open_fds() != fds_none) {
        show_fds();
    }
    free(rss);
    free(fds);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: %s soak [EPOCHS] | budget [--strict] | ssd-enospc | emfile\n",
                argv[0]);
        return 2;
    }
    REQUIRE(testds_mkdtemp("soak", base_dir, sizeof(base_dir)) == 0, "mkdtemp");
    int rc;
    if (strcmp(argv[1], "soak") == 0) {
        const long e = argc > 2 ? strtol(argv[2], NULL, 10) : 20;
        rc = cmd_soak(e >= 3 ? (uint64_t)e : 3);
    } else if (strcmp(argv[1], "budget") == 0) {
        rc = cmd_budget(argc > 2 && strcmp(argv[2], "--strict") == 0);
    } else if (strcmp(argv[1], "ssd-enospc") == 0) {
        rc = cmd_ssd_enospc();
    } else if (strcmp(argv[1], "emfile") == 0) {
        rc = cmd_emfile();
    } else {
        fprintf(stderr, "soak: unknown command %s\n", argv[1]);
        rc = 2;
    }
    testds_rm_rf(base_dir);
    if (rc == 0) {
        printf("soak %s: PASS\n", argv[1]);
    }
    return rc;
}
