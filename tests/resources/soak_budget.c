/*
 * rel_soak budget: the memory budget with 1, 4 and 16 I/O threads, each in a fresh child
 * process (see soak.c).
 */
#include "resources/soak.h"

#include <malloc.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- budget ----------------------------------------------------------------------------- */

typedef struct budget_run {
    uint32_t threads;
    hdmlp_engine engine;
    int one_arena; /* mallopt(M_ARENA_MAX, 1) */
    int ram_auto;  /* RAM chunk cache AUTO on a dataset that fits the budget */
} budget_run;

static int budget_child(const char *dir, const budget_run *r, uint64_t memory, int strict)
{
    if (r->one_arena) {
#ifdef M_ARENA_MAX
        mallopt(M_ARENA_MAX, 1); /* before any thread exists */
#endif
    }
    hdmlp_dataset *ds = NULL;
    REQUIRE(hdmlp_dataset_open(dir, &ds) == HDMLP_OK, "open: %s", hdmlp_last_error());
    hdmlp_config *const cfg = config(memory, r->threads, 2);
    REQUIRE(hdmlp_config_set_engine(cfg, r->engine) == HDMLP_OK, "engine");
    if (r->ram_auto) {
        REQUIRE(hdmlp_config_set_ram_cache(cfg, HDMLP_RAM_CACHE_AUTO) == HDMLP_OK, "ram");
    }
    if (reset_hwm() != 0) {
        printf("budget: cannot reset VmHWM (/proc/self/clear_refs); RSS not checked\n");
    }
    const uint64_t base = rss_bytes();
    hdmlp_stats st;
    const int rc = run_all(ds, cfg, &st);
    const uint64_t peak = hwm_bytes();
    CHECK(rc == HDMLP_END, "threads %u: %s: %s", r->threads, hdmlp_err_name(rc),
          hdmlp_last_error());
    const double growth = ((double)peak - (double)base) / MIB;
    const double over = growth - (double)st.memory_budget / MIB;
    printf("budget: threads %2u engine %-5s arenas %-7s ram cache %-4s budget %5.2f MiB, "
           "peak accounted %5.2f MiB (%5.1f %%), %5llu chunk loads; RSS peak growth %6.2f "
           "MiB = budget %+6.2f MiB\n",
           r->threads, r->engine == HDMLP_ENGINE_PREAD ? "pread" : "auto",
           r->one_arena ? "1" : "default", r->ram_auto ? "auto" : "off",
           (double)st.memory_budget / MIB, (double)st.peak_memory_bytes / MIB,
           100.0 * (double)st.peak_memory_bytes / (double)st.memory_budget,
           (unsigned long long)st.chunk_loads, growth, over);
    CHECK(st.peak_memory_bytes <= st.memory_budget, "threads %u: peak %llu > budget %llu",
          r->threads, (unsigned long long)st.peak_memory_bytes,
          (unsigned long long)st.memory_budget);
    CHECK(!r->ram_auto || st.ram_cached_chunks == hdmlp_dataset_chunk_count(ds),
          "the RAM cache holds %llu of %llu chunks", (unsigned long long)st.ram_cached_chunks,
          (unsigned long long)hdmlp_dataset_chunk_count(ds));
    if (!SOAK_SANITIZED && peak > 0 && (r->one_arena || strict)) {
        CHECK(over <= (double)SOAK_RSS_OVERHEAD / MIB,
              "threads %u: RSS grew %.2f MiB over the budget (allowed %.0f MiB)", r->threads,
              over, (double)SOAK_RSS_OVERHEAD / MIB);
    }
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    return failures ? 1 : 0;
}

int cmd_budget(int strict)
{
    /* ~46 MiB raw, 24 MiB stored (zstd); and one of ~1.5 MiB stored for the RAM cache */
    static const testds_spec spec = {6000, 32, 16, 73, 1024, 15360, 1, 0, 10, 0};
    static const testds_spec small = {600, 16, 4, 74, 1024, 8192, 1, 0, 10, 0};
    char dir[4200], small_dir[4200];
    make_dataset("budget", &spec, dir, sizeof(dir));
    make_dataset("budget-cached", &small, small_dir, sizeof(small_dir));
    static const budget_run runs[] = {
        {1, HDMLP_ENGINE_AUTO, 1, 0},   {4, HDMLP_ENGINE_AUTO, 1, 0},
        {16, HDMLP_ENGINE_AUTO, 1, 0},  {16, HDMLP_ENGINE_PREAD, 1, 0},
        {16, HDMLP_ENGINE_AUTO, 1, 1},  {1, HDMLP_ENGINE_AUTO, 0, 0},
        {4, HDMLP_ENGINE_AUTO, 0, 0},   {16, HDMLP_ENGINE_AUTO, 0, 0},
        {16, HDMLP_ENGINE_PREAD, 0, 0}, {16, HDMLP_ENGINE_AUTO, 0, 1}};
    printf("budget: RSS allowance over the budget: %.0f MiB with one malloc arena%s%s\n",
           (double)SOAK_RSS_OVERHEAD / MIB, strict ? " and with default arenas" : "",
           SOAK_SANITIZED ? " (sanitizer build: reported, not checked)" : "");
    fflush(stdout);
    int status = 0;
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        const pid_t pid = fork();
        REQUIRE(pid >= 0, "fork");
        if (pid == 0) {
            const int r =
                budget_child(runs[i].ram_auto ? small_dir : dir, &runs[i], 8u << 20, strict);
            fflush(stdout);
            fflush(stderr);
            _exit(r);
        }
        int ws = 0;
        REQUIRE(waitpid(pid, &ws, 0) == pid, "waitpid");
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            fprintf(stderr, "budget: threads %u: child failed (status 0x%x)\n", runs[i].threads,
                    ws);
            status = 1;
        }
    }
    return status;
}
