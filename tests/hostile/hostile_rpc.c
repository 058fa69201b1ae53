/*
 * Hostile peers (plain C): a real 2-rank exchange over the gRPC transport on loopback (two
 * loaders made by hdmlp_loader_create with peers, in this process) while an attacker
 * process (forked before this one initialises gRPC, so that RSS here is the servers' and
 * loaders' alone) floods rank 0's server with raw gRPC C-core calls to /hdmlp.Peer/Deliver,
 * one channel per kind with INFLIGHT calls in flight:
 *   wrong token  well-formed Envelopes (REQUEST / SAMPLE) carrying another job's token
 *   malformed    random bytes, and hand-made protobuf that lies (SAMPLE size != data
 *                length, unknown kind, missing fields, more than RPC_MAX_MSGS messages)
 *   oversized    64 MiB + 64 KiB (above the server's receive limit)
 *   rank range   the right token, ranks out of range (from >= world, from == receiver,
 *                to != receiver)
 * Phases: (1) the exchange alone (samples/s, RSS); (2) the exchange under the three small
 * kinds, then under oversized calls, each flood up to HDMLP_HOSTILE_SECONDS: hostile calls
 * sent and rejected per second, the exchange's samples/s during the flood, the server
 * process's RSS before, peak, at the end and after the run; (3) a token holder: REQUESTs
 * with absurd epoch/position/group/slot/credit (the exchange must still complete exactly
 * once), then SAMPLEs with an index out of range, which rank 0 must refuse with
 * HDMLP_E_PEER naming rank and sample (its run stops; nothing crashes or is delivered
 * wrong).
 * Every delivered sample is checked byte for byte (testds_fill) and exactly once per epoch
 * across both ranks. Exits 1 on a broken promise: a wrong or duplicated sample, a failed
 * legitimate run, a hostile call answered OK, RSS growth above HOSTILE_RSS_LIMIT.
 *
 * Environment: HDMLP_HOSTILE_SECONDS (flood length, default 4), HDMLP_HOSTILE_BIG_INFLIGHT
 * (oversized calls in flight, default 2), HDMLP_TEST_TMP.
 */
#include "hostile/hostile_rpc.h"

#include "hdmlp.h"
#include "support/testds.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- RSS sampler ------------------------------------------------------------------------ */

typedef struct sampler {
    atomic_int stop;
    uint64_t peak;
    pthread_t th;
} sampler;

static void *sample_main(void *arg)
{
    sampler *s = arg;
    while (!atomic_load(&s->stop)) {
        const uint64_t r = rss_bytes();
        if (r > s->peak) {
            s->peak = r;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void sampler_start(sampler *s)
{
    memset(s, 0, sizeof(*s));
    atomic_init(&s->stop, 0);
    s->peak = rss_bytes();
    pthread_create(&s->th, NULL, sample_main, s);
}

static uint64_t sampler_stop(sampler *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    return s->peak;
}

#define MIB(x) ((double)(x) / 1048576.0)

/* Returns freed heap memory to the system, so that RSS shows what is still held. */
static void trim(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

static uint64_t delivered(exchange *x)
{
    return atomic_load(&x->runs[0].delivered) + atomic_load(&x->runs[1].delivered);
}

static int all_done(exchange *x)
{
    return atomic_load(&x->runs[0].done) && atomic_load(&x->runs[1].done);
}

/* The exchange runs while `kinds` flood rank 0 for up to secs seconds (or until the run
 * ends). Prints the hostile rates, the exchange's samples/s during the flood and RSS; the
 * run then completes (unflooded) and is checked. Returns the exchange's rate. */
static double flooded_run(flood *f, hdmlp_dataset *ds, uint64_t epochs, double secs,
                          const int *kinds, int n_kinds, const char *what, int expect_complete,
                          exchange *x)
{
    if (exchange_create(x, ds, epochs, 5000) != 0) {
        failures++;
        return 0;
    }
    const uint64_t rss0 = rss_bytes();
    sampler smp;
    sampler_start(&smp);
    flood_start(f, x->eps[0], kinds, n_kinds);
    /* let the attackers connect and load the server before the exchange starts */
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    exchange_start(x);
    const uint64_t t0 = now_ns();
    while (!all_done(x) && (double)(now_ns() - t0) / 1e9 < secs) {
        ts.tv_nsec = 10 * 1000000L;
        nanosleep(&ts, NULL);
    }
    const uint64_t got = delivered(x);
    const double window = (double)(now_ns() - t0) / 1e9;
    const uint64_t rss1 = rss_bytes();
    flood_stop(f);
    const uint64_t peak = sampler_stop(&smp);
    exchange_finish(x, what, expect_complete);
    trim();
    const uint64_t rss2 = rss_bytes();
    uint64_t sent, rejected;
    printf("  flood %.2f s:\n", f->secs);
    flood_report(f, kinds, n_kinds, &sent, &rejected);
    const double rate = (double)got / window;
    printf("  => %s: hostile %.0f calls/s sent, %.0f/s rejected; exchange %.0f samples/s "
           "during the flood; server-process RSS %.1f MiB before, peak %.1f (+%.1f MiB), "
           "%.1f at the end of the flood, %.1f after the run (loaders freed, heap trimmed)\n",
           what, (double)sent / f->secs, (double)rejected / f->secs, rate, MIB(rss0), MIB(peak),
           MIB(peak - rss0), MIB(rss1), MIB(rss2));
    /* gRPC core buffers an oversized call whole before rejecting it (a known limit of the
     * transport): with oversized calls in flight the growth is bounded by those buffers and
     * is released when the flood stops. Everything else must stay within the small limit. */
    int big = 0;
    for (int k = 0; k < n_kinds; k++) {
        big |= kinds[k] == A_BIG;
    }
    const uint64_t limit =
        HOSTILE_RSS_LIMIT + (big ? (uint64_t)f->big_inflight * 6 * (65ull << 20) : 0);
    CHECK(peak - rss0 < limit, "%s: RSS grew by %.1f MiB (limit %.0f)", what, MIB(peak - rss0),
          MIB(limit));
    /* Afterwards at most one retained buffer per oversized call in flight remains cached. */
    const uint64_t after =
        HOSTILE_RSS_LIMIT + (big ? (uint64_t)f->big_inflight * (65ull << 20) : 0);
    CHECK(rss2 < rss0 + after, "%s: RSS stayed %.1f MiB above where it started", what,
          MIB(rss2 - rss0));
    return rate;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *env = getenv("HDMLP_HOSTILE_SECONDS");
    const double secs = env != NULL && *env != '\0' ? strtod(env, NULL) : 4.0;
    char dir[512];
    if (testds_mkdtemp("hostile", dir, sizeof(dir)) != 0 ||
        testds_write(dir, &spec) != HDMLP_OK) {
        printf("dataset: %s\n", hdmlp_last_error());
        return 1;
    }
    hdmlp_dataset *ds = NULL;
    if (hdmlp_dataset_open(dir, &ds) != HDMLP_OK) {
        printf("open: %s\n", hdmlp_last_error());
        return 1;
    }
    flood f;
    memset(&f, 0, sizeof(f));
    env = getenv("HDMLP_HOSTILE_BIG_INFLIGHT");
    f.big_inflight = env != NULL && *env != '\0' ? atoi(env) : BIG_INFLIGHT;
    if (f.big_inflight < 1 || f.big_inflight > INFLIGHT) {
        f.big_inflight = BIG_INFLIGHT;
    }
    if (flood_init(&f) != 0) {
        printf("cannot start the attacker process\n");
        return 1;
    }
    printf("hostile_rpc: %llu samples (%.1f MiB raw), 2 ranks over gRPC on loopback (token "
           "%#llx); an attacker process floods rank 0, one channel per attack kind with %d "
           "calls in flight (%d oversized); floods of up to %.0f s (HDMLP_HOSTILE_SECONDS)\n",
           (unsigned long long)spec.n_samples, MIB(hdmlp_dataset_raw_bytes(ds)),
           (unsigned long long)TOKEN, INFLIGHT, f.big_inflight, secs);

    /* 1. baseline */
    exchange x;
    if (exchange_create(&x, ds, 10, 5000) != 0) {
        return 1;
    }
    const uint64_t base_rss0 = rss_bytes();
    sampler smp;
    sampler_start(&smp);
    exchange_start(&x);
    const double base_rate = exchange_finish(&x, "baseline (no flood)", 1);
    const uint64_t base_peak = sampler_stop(&smp);
    printf("  baseline RSS %.1f MiB before, peak %.1f (+%.1f MiB)\n", MIB(base_rss0),
           MIB(base_peak), MIB(base_peak - base_rss0));

    /* enough epochs to outlast the flood at the unflooded rate */
    uint64_t epochs = (uint64_t)(secs * base_rate / (double)spec.n_samples) + 2;
    if (epochs > 400) {
        epochs = 400;
    }
    /* 2. floods without the token */
    static const int small[] = {A_TOKEN, A_MALFORMED, A_RANKS};
    static const int big[] = {A_BIG};
    const double r_small =
        flooded_run(&f, ds, epochs, secs, small, 3, "small hostile calls", 1, &x);
    for (int j = 0; j < 3; j++) {
        CHECK(f.t[small[j]].ok == 0, "%s: %llu calls answered OK", attack_names[small[j]],
              (unsigned long long)f.t[small[j]].ok);
        CHECK(f.t[small[j]].rejected > 0, "%s: nothing rejected", attack_names[small[j]]);
    }
    const double r_big = flooded_run(&f, ds, epochs, secs, big, 1, "oversized calls", 1, &x);
    CHECK(f.t[A_BIG].ok == 0, "oversized: %llu calls answered OK",
          (unsigned long long)f.t[A_BIG].ok);
    CHECK(f.t[A_BIG].rejected > 0, "oversized: nothing rejected");

    /* 3. the token holder */
    static const int loc_req[] = {A_LOC_REQUEST};
    flooded_run(&f, ds, epochs, secs, loc_req, 1, "token holder: out-of-range REQUESTs", 1, &x);
    static const int loc_sample[] = {A_LOC_SAMPLE};
    if (exchange_create(&x, ds, 2, 2000) != 0) {
        return 1;
    }
    flood_start(&f, x.eps[0], loc_sample, 1);
    exchange_start(&x);
    exchange_finish(&x, "token holder: out-of-range SAMPLEs", 0);
    flood_stop(&f);
    uint64_t sent, rejected;
    flood_report(&f, loc_sample, 1, &sent, &rejected);
    printf("  rank 0: %s: %s\n  rank 1: %s: %s\n", hdmlp_err_name(x.runs[0].rc), x.runs[0].err,
           hdmlp_err_name(x.runs[1].rc), x.runs[1].err);
    CHECK(x.runs[0].rc == HDMLP_E_PEER && strstr(x.runs[0].err, "sample") != NULL &&
              strstr(x.runs[0].err, "rank 1") != NULL,
          "rank 0 must refuse an out-of-range SAMPLE with HDMLP_E_PEER naming it");

    printf("summary: exchange alone %.0f samples/s; with small hostile calls %.0f (%.0f %%); "
           "with oversized calls %.0f (%.0f %%)\n",
           base_rate, r_small, 100.0 * r_small / base_rate, r_big, 100.0 * r_big / base_rate);
    flood_exit(&f);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
    printf("hostile_rpc: %s\n", failures == 0 ? "all promises held" : "FAILED");
    return failures == 0 ? 0 : 1;
}
