/*
 * Loader property tests (DESIGN.md §4): over random parameters drawn from fixed, printed
 * seeds — N from 1 to 10^5, K in {1, 3, 64, 100}, budgets from the smallest the loader
 * accepts (one abstract chunk) to more than the dataset, several epochs, batch sizes,
 * drop_last, both policies, every refill mode, compressed or not — check:
 *   - every epoch delivers every sample exactly once, with the right bytes and label;
 *   - batches carry epochs 0, 1, 2, ..., have the configured size except the last of an
 *     epoch (dropped with drop_last), and HDMLP_END follows the last epoch, repeatedly;
 *   - every abstract-memory slot is empty at the end of an epoch;
 *   - the stats add up, and the peak accounted memory never exceeds the budget;
 *   - the delivery order is identical for identical inputs (whatever the thread count and
 *     I/O engine) and differs for another seed.
 * A failing case prints its parameters; rerun it alone with the printed case seed.
 */
#include "hdmlp.h"
#include "loader.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#ifndef SLOW_BUILD
#define SLOW_BUILD 0
#endif

/* Random cases per property test (fewer under sanitizers, which run ~5-20x slower). */
#define N_CASES (SLOW_BUILD ? 8 : 30)
/* Cap on samples delivered per case (N × epochs), to bound the suite's run time. */
#define MAX_DELIVERED (SLOW_BUILD ? 60000u : 250000u)

/* ---- parameter generator: SplitMix64, independent of the library's own PRNG -------- */

static uint64_t mix_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t mix_below(uint64_t *x, uint64_t n) { return n == 0 ? 0 : mix_next(x) % n; }

static double mix_unit(uint64_t *x) { return (double)(mix_next(x) >> 11) / 9007199254740992.0; }

/* ---- one case ------------------------------------------------------------------------ */

typedef struct lcase {
    uint64_t case_seed; /* seed the case was drawn from (0 for hand-written cases) */
    testds_spec ds;
    int budget_kind; /* 0: the minimum accepted; 1: log-uniform in between; 2: > dataset */
    double budget_pos;
    uint32_t batch;
    uint64_t epochs;
    int drop_last;
    hdmlp_policy policy;
    hdmlp_refill refill;
    hdmlp_engine engine;
    uint32_t threads;
    uint64_t lookahead;
    uint64_t seed;
    int hold_prev; /* hold each batch until the next one is delivered (a training loop) */
} lcase;

static const char *policy_name(hdmlp_policy p)
{
    return p == HDMLP_POLICY_RANDOM ? "random" : "fill-rate";
}

static const char *refill_name(hdmlp_refill r)
{
    return r == HDMLP_REFILL_WHOLE ? "whole" : r == HDMLP_REFILL_RANGES ? "ranges" : "auto";
}

static const char *engine_name(hdmlp_engine e)
{
    return e == HDMLP_ENGINE_PREAD ? "pread" : e == HDMLP_ENGINE_IO_URING ? "io_uring" : "auto";
}

static void describe(const lcase *c, uint64_t budget, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "case_seed=%#" PRIx64 " N=%" PRIu64 " K=%u cps=%u ds_seed=%" PRIu64
             " sizes=%u..%u compress=%d dict=%d labels=%u budget=%" PRIu64
             " batch=%u epochs=%" PRIu64 " drop_last=%d policy=%s refill=%s engine=%s"
             " threads=%u lookahead=%" PRIu64 " seed=%" PRIu64,
             c->case_seed, c->ds.n_samples, c->ds.chunk_size, c->ds.chunks_per_segment,
             c->ds.seed, c->ds.min_size, c->ds.max_size, c->ds.compress, c->ds.dict,
             c->ds.n_labels, budget, c->batch, c->epochs, c->drop_last, policy_name(c->policy),
             refill_name(c->refill), engine_name(c->engine), c->threads, c->lookahead, c->seed);
}

/* Default case: a small dataset, moderate budget, one epoch. */
static lcase base_case(void)
{
    lcase c;
    memset(&c, 0, sizeof(c));
    c.ds.n_samples = 500;
    c.ds.chunk_size = 10;
    c.ds.chunks_per_segment = 8;
    c.ds.seed = 11;
    c.ds.min_size = 1;
    c.ds.max_size = 64;
    c.ds.n_labels = 5;
    c.budget_kind = 1;
    c.budget_pos = 0.3;
    c.batch = 16;
    c.epochs = 1;
    c.policy = HDMLP_POLICY_FILL_RATE;
    c.refill = HDMLP_REFILL_AUTO;
    c.engine = HDMLP_ENGINE_PREAD;
    c.threads = 2;
    c.lookahead = 0;
    c.seed = 1;
    return c;
}

/* Draws a case from `case_seed`. */
static lcase random_case(uint64_t case_seed)
{
    static const uint32_t ks[] = {1, 3, 64, 100};
    uint64_t x = case_seed;
    lcase c = base_case();
    c.case_seed = case_seed;
    const uint32_t k = ks[mix_below(&x, 4)];
    /* At most ~3000 chunks: every chunk takes at least 4 KiB on disk. */
    uint64_t n_max = (uint64_t)k * 3000;
    if (n_max > 100000) {
        n_max = 100000;
    }
    uint64_t n;
    switch (mix_below(&x, 6)) {
    case 0:
        n = 1 + mix_below(&x, k < 3 ? 3 : k + 1); /* 1..K, a single (maybe short) chunk */
        break;
    case 1:
        n = (uint64_t)k * (1 + mix_below(&x, 5)) + (mix_below(&x, 2) ? 1 : 0);
        break;
    default: /* log-uniform over 1..n_max */
        n = (uint64_t)exp(mix_unit(&x) * log((double)n_max)) + 1;
        break;
    }
    if (n > n_max) {
        n = n_max;
    }
    c.ds.n_samples = n;
    c.ds.chunk_size = k;
    const uint64_t chunks = (n + k - 1) / k;
    const uint32_t cps[] = {0, 1, 7};
    c.ds.chunks_per_segment = cps[mix_below(&x, 3)];
    if (c.ds.chunks_per_segment == 1 && chunks > 300) {
        c.ds.chunks_per_segment = 16;
    }
    c.ds.seed = mix_next(&x);
    static const uint32_t mins[] = {0, 1, 16};
    static const uint32_t maxs[] = {1, 64, 300, 3000};
    c.ds.min_size = mins[mix_below(&x, 3)];
    c.ds.max_size = maxs[mix_below(&x, 4)];
    /* Keep the dataset under ~8 MB of raw bytes. */
    while (c.ds.max_size > 1 && (uint64_t)c.ds.max_size * n > 8000000) {
        c.ds.max_size /= 2;
    }
    if (c.ds.max_size < c.ds.min_size) {
        c.ds.max_size = c.ds.min_size;
    }
    c.ds.compress = (int)mix_below(&x, 2);
    c.ds.dict = c.ds.compress && n >= 200 && mix_below(&x, 3) == 0;
    c.ds.n_labels = 1 + (uint32_t)mix_below(&x, 10);
    const uint64_t bk = mix_below(&x, 8);
    c.budget_kind = bk < 2 ? 0 : bk < 6 ? 1 : 2;
    c.budget_pos = mix_unit(&x);
    static const uint32_t batches[] = {1, 7, 32, 100, 1000};
    c.batch = batches[mix_below(&x, 5)];
    if (mix_below(&x, 6) == 0) {
        c.batch = (uint32_t)(n < (1u << 20) ? n : 1u << 20) + (uint32_t)mix_below(&x, 2);
    }
    c.epochs = 1 + mix_below(&x, 3);
    while (c.epochs > 1 && n * c.epochs > MAX_DELIVERED) {
        c.epochs--;
    }
    c.drop_last = (int)mix_below(&x, 2);
    c.policy = mix_below(&x, 2) ? HDMLP_POLICY_RANDOM : HDMLP_POLICY_FILL_RATE;
    const hdmlp_refill refills[] = {HDMLP_REFILL_AUTO, HDMLP_REFILL_WHOLE, HDMLP_REFILL_RANGES};
    c.refill = refills[mix_below(&x, 3)];
    const hdmlp_engine engines[] = {HDMLP_ENGINE_AUTO, HDMLP_ENGINE_PREAD,
                                    HDMLP_ENGINE_IO_URING};
    c.engine = engines[mix_below(&x, 3)];
    c.threads = 1 + (uint32_t)mix_below(&x, 3);
    const uint64_t lookaheads[] = {0, 1, 16};
    c.lookahead = lookaheads[mix_below(&x, 3)];
    c.seed = mix_next(&x);
    return c;
}

/* ---- fixtures: temporary dataset directories, removed after each test -------------- */

#define MAX_DIRS 64
static char tmp_dirs[MAX_DIRS][512];
static int n_tmp_dirs;

static void remove_tmp_dirs(void)
{
    for (int i = 0; i < n_tmp_dirs; i++) {
        testds_rm_rf(tmp_dirs[i]);
    }
    n_tmp_dirs = 0;
}

TestSuite(loader_props, .fini = remove_tmp_dirs);

/* Writes the case's dataset into a fresh directory and opens it. */
static hdmlp_dataset *make_dataset(const testds_spec *spec, char *dir, size_t cap)
{
    cr_assert(n_tmp_dirs < MAX_DIRS, "too many temporary datasets in one test");
    cr_assert_eq(testds_mkdtemp("loader-props", dir, cap), 0, "mkdtemp failed");
    snprintf(tmp_dirs[n_tmp_dirs++], sizeof(tmp_dirs[0]), "%s", dir);
    int rc = testds_write(dir, spec);
    cr_assert_eq(rc, HDMLP_OK, "testds_write N=%" PRIu64 " K=%u: %s: %s", spec->n_samples,
                 spec->chunk_size, hdmlp_err_name(rc), hdmlp_last_error());
    hdmlp_dataset *ds = NULL;
    rc = hdmlp_dataset_open(dir, &ds);
    cr_assert_eq(rc, HDMLP_OK, "open %s: %s: %s", dir, hdmlp_err_name(rc), hdmlp_last_error());
    return ds;
}

static hdmlp_config *make_config(const lcase *c, uint64_t budget, hdmlp_engine engine)
{
    hdmlp_config *cfg = NULL;
    cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_memory(cfg, budget), HDMLP_OK, "memory %" PRIu64, budget);
    cr_assert_eq(hdmlp_config_set_batch_size(cfg, c->batch), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_seed(cfg, c->seed), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_epochs(cfg, c->epochs), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_drop_last(cfg, c->drop_last), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_threads(cfg, c->threads), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_engine(cfg, engine), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_lookahead(cfg, c->lookahead), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_policy(cfg, c->policy), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_refill(cfg, c->refill), HDMLP_OK);
    /* Tiers change read modes and sources; they have their own tests (test_tiers.c). */
    cr_assert_eq(hdmlp_config_set_ram_cache(cfg, 0), HDMLP_OK);
    return cfg;
}

/* Creates a loader; io_uring falls back to pread where the kernel lacks it (the engine
 * actually used is stored in *engine). Returns the status of hdmlp_loader_create. */
static int try_create(hdmlp_dataset *ds, const lcase *c, uint64_t budget, hdmlp_engine *engine,
                      hdmlp_loader **out)
{
    hdmlp_config *cfg = make_config(c, budget, *engine);
    int rc = hdmlp_loader_create(ds, cfg, out);
    if (rc == HDMLP_E_UNSUPPORTED && *engine == HDMLP_ENGINE_IO_URING) {
        cr_log_warn("io_uring unsupported here (%s); using pread", hdmlp_last_error());
        *engine = HDMLP_ENGINE_PREAD;
        hdmlp_config_free(cfg);
        cfg = make_config(c, budget, *engine);
        rc = hdmlp_loader_create(ds, cfg, out);
    }
    hdmlp_config_free(cfg);
    if (rc != HDMLP_OK) {
        cr_assert_null(*out, "*out must be NULL when create fails");
    }
    return rc;
}

/* The smallest budget hdmlp_loader_create accepts for this case (everything else equal):
 * grows until accepted, then bisects. Anything but HDMLP_E_RANGE below it is a failure. */
static uint64_t find_min_budget(hdmlp_dataset *ds, const lcase *c)
{
    uint64_t lo = 4095; /* the setter's own minimum is 4096 */
    uint64_t hi = 4096;
    for (;;) {
        hdmlp_engine e = c->engine;
        hdmlp_loader *ld = NULL;
        const int rc = try_create(ds, c, hi, &e, &ld);
        if (rc == HDMLP_OK) {
            hdmlp_loader_free(ld);
            break;
        }
        cr_assert_eq(rc, HDMLP_E_RANGE,
                     "budget %" PRIu64 ": expected OK or E_RANGE, got %s: %s", hi,
                     hdmlp_err_name(rc), hdmlp_last_error());
        lo = hi;
        cr_assert(hi < (1ull << 40), "no budget up to 1 TiB accepted");
        hi *= 2;
    }
    while (hi - lo > 1) {
        const uint64_t mid = lo + (hi - lo) / 2;
        hdmlp_engine e = c->engine;
        hdmlp_loader *ld = NULL;
        const int rc = try_create(ds, c, mid, &e, &ld);
        if (rc == HDMLP_OK) {
            hdmlp_loader_free(ld);
            hi = mid;
        } else {
            cr_assert_eq(rc, HDMLP_E_RANGE, "budget %" PRIu64 ": got %s: %s", mid,
                         hdmlp_err_name(rc), hdmlp_last_error());
            lo = mid;
        }
    }
    return hi;
}

/* The case's budget: the minimum the loader accepts, log-uniform between it and "more
 * than the dataset", or more than the dataset: the minimum (which covers the loader's
 * fixed reserve for read buffers and batches) plus twice the raw and stored bytes. */
static uint64_t case_budget(hdmlp_dataset *ds, const lcase *c)
{
    const uint64_t lo = find_min_budget(ds, c);
    const uint64_t big =
        lo + 2 * (hdmlp_dataset_raw_bytes(ds) + hdmlp_dataset_stored_bytes(ds)) + (1u << 20);
    if (c->budget_kind == 0) {
        return lo;
    }
    if (c->budget_kind == 2) {
        return big;
    }
    return (uint64_t)exp(log((double)lo) +
                         c->budget_pos * (log((double)big) - log((double)lo)));
}

/* ---- running a loader to the end, recording everything ----------------------------- */

static char poison_byte;
#define POISON_BATCH ((hdmlp_batch *)&poison_byte)

typedef struct run_out {
    uint64_t n;    /* samples in the dataset */
    uint64_t *seq; /* delivered indices, in order */
    uint64_t n_seq, cap_seq;
    uint32_t *bsize; /* per batch: size, epoch */
    uint64_t *bepoch;
    uint64_t n_batches, cap_batches;
    uint64_t bytes_delivered;
    uint64_t stored_delivered;
    uint64_t bad_views; /* views with a wrong size, label or content */
    char first_bad[320];
    uint64_t slot_checks;    /* epoch boundaries where the slot hook was read */
    uint64_t slots_boundary; /* max slots occupied at those boundaries */
    uint64_t ahead_boundary; /* max requests planned into the next epoch at a boundary */
    uint64_t slots_end;      /* slots occupied after HDMLP_END */
    int rc;                  /* status that ended the run (HDMLP_END expected) */
    char rc_detail[512];
    int rc_again;       /* status of one more hdmlp_loader_next after it */
    int again_out_null; /* whether that call left *out NULL */
    int end_out_null;   /* whether the ending call left *out NULL */
    hdmlp_stats st;
    uint64_t budget;
    hdmlp_engine engine;
} run_out;

static void run_free(run_out *r)
{
    free(r->seq);
    free(r->bsize);
    free(r->bepoch);
    memset(r, 0, sizeof(*r));
}

/* Checks one view against the dataset's metadata and testds's deterministic content. */
static int view_ok(hdmlp_dataset *ds, const testds_spec *spec, const hdmlp_sample_view *v,
                   uint8_t *scratch, char *why, size_t cap)
{
    hdmlp_sample_info info;
    if (v->index >= spec->n_samples ||
        hdmlp_dataset_sample_info(ds, v->index, &info) != HDMLP_OK) {
        snprintf(why, cap, "index %" PRIu64 " out of range", v->index);
        return 0;
    }
    if (v->size != info.raw_size || v->size != testds_size(spec, v->index)) {
        snprintf(why, cap, "sample %" PRIu64 ": size %" PRIu64 ", expected %" PRIu64, v->index,
                 v->size, info.raw_size);
        return 0;
    }
    if (v->label != info.label || v->label != v->index % spec->n_labels) {
        snprintf(why, cap, "sample %" PRIu64 ": label %u, expected %u", v->index, v->label,
                 info.label);
        return 0;
    }
    if (v->size > 0) {
        testds_fill(v->index, spec->seed, scratch, v->size);
        if (v->data == NULL || memcmp(v->data, scratch, v->size) != 0) {
            snprintf(why, cap, "sample %" PRIu64 ": bytes differ from testds_fill", v->index);
            return 0;
        }
    }
    return 1;
}

static void push_seq(run_out *r, uint64_t x)
{
    if (r->n_seq == r->cap_seq) {
        r->cap_seq = r->cap_seq ? 2 * r->cap_seq : 1024;
        r->seq = realloc(r->seq, r->cap_seq * sizeof(*r->seq));
        cr_assert_not_null(r->seq);
    }
    r->seq[r->n_seq++] = x;
}

static void push_batch(run_out *r, uint32_t size, uint64_t epoch)
{
    if (r->n_batches == r->cap_batches) {
        r->cap_batches = r->cap_batches ? 2 * r->cap_batches : 64;
        r->bsize = realloc(r->bsize, r->cap_batches * sizeof(*r->bsize));
        r->bepoch = realloc(r->bepoch, r->cap_batches * sizeof(*r->bepoch));
        cr_assert(r->bsize != NULL && r->bepoch != NULL);
    }
    r->bsize[r->n_batches] = size;
    r->bepoch[r->n_batches] = epoch;
    r->n_batches++;
}

/* Samples a full epoch delivers. */
static uint64_t per_epoch(uint64_t n, uint32_t batch, int drop_last)
{
    return drop_last ? n - n % batch : n;
}

/* Runs the case's loader to HDMLP_END (or an error) with the given budget, engine and
 * thread count. Releases each batch before asking for the next. When check_boundaries is
 * set (lookahead 1, drop_last off), reads the slot hook after each epoch's last batch. */
static void run_loader(hdmlp_dataset *ds, const lcase *c, uint64_t budget, hdmlp_engine engine,
                       int check_boundaries, run_out *r)
{
    memset(r, 0, sizeof(*r));
    r->n = c->ds.n_samples;
    r->budget = budget;
    r->engine = engine;
    hdmlp_loader *ld = NULL;
    int rc = try_create(ds, c, budget, &r->engine, &ld);
    cr_assert_eq(rc, HDMLP_OK, "create: %s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    uint8_t *scratch = malloc(c->ds.max_size + 1);
    cr_assert_not_null(scratch);
    const uint64_t full = per_epoch(c->ds.n_samples, c->batch, c->drop_last);
    uint64_t in_epoch = 0;
    uint64_t cur_epoch = 0;
    hdmlp_batch *held = NULL;
    for (;;) {
        hdmlp_batch *b = POISON_BATCH; /* must be overwritten */
        rc = hdmlp_loader_next(ld, &b);
        if (rc != HDMLP_OK) {
            r->end_out_null = b == NULL;
            snprintf(r->rc_detail, sizeof(r->rc_detail), "%s", hdmlp_last_error());
            break;
        }
        cr_assert_not_null(b, "next returned OK without a batch");
        const size_t n = hdmlp_batch_size(b);
        const uint64_t e = hdmlp_batch_epoch(b);
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        cr_assert(n == 0 || v != NULL, "batch of %zu samples without views", n);
        push_batch(r, (uint32_t)n, e);
        for (size_t i = 0; i < n; i++) {
            push_seq(r, v[i].index);
            r->bytes_delivered += v[i].size;
            hdmlp_sample_info info;
            if (hdmlp_dataset_sample_info(ds, v[i].index, &info) == HDMLP_OK) {
                r->stored_delivered += info.stored_size;
            }
            char why[256];
            if (!view_ok(ds, &c->ds, &v[i], scratch, why, sizeof(why))) {
                if (r->bad_views++ == 0) {
                    snprintf(r->first_bad, sizeof(r->first_bad), "epoch %" PRIu64 ": %s", e,
                             why);
                }
            }
        }
        if (c->hold_prev) {
            hdmlp_batch_release(held);
            held = b;
        } else {
            hdmlp_batch_release(b);
        }
        if (e != cur_epoch) {
            cur_epoch = e;
            in_epoch = 0;
        }
        in_epoch += n;
        if (check_boundaries && in_epoch == full) {
            const uint64_t occ = loader_slots_occupied(ld);
            hdmlp_stats st;
            cr_assert_eq(hdmlp_loader_stats(ld, &st), HDMLP_OK);
            const uint64_t ahead = st.requests - c->ds.n_samples * (e + 1);
            r->slot_checks++;
            if (occ > r->slots_boundary) {
                r->slots_boundary = occ;
            }
            if (ahead > r->ahead_boundary) {
                r->ahead_boundary = ahead;
            }
        }
    }
    hdmlp_batch_release(held);
    r->rc = rc;
    r->slots_end = loader_slots_occupied(ld);
    hdmlp_batch *b = POISON_BATCH;
    r->rc_again = hdmlp_loader_next(ld, &b);
    r->again_out_null = b == NULL;
    cr_assert_eq(hdmlp_loader_stats(ld, &r->st), HDMLP_OK);
    hdmlp_loader_free(ld);
    free(scratch);
}

/* ---- checkers (pure: they see only the recorded run) -------------------------------- */

/* Exactly-once: each epoch (a run of batches with the same epoch number) holds every
 * sample of 0..n-1 at most once, and exactly `expect` distinct samples. Returns 1 or
 * writes the first violation into why. */
static int check_exactly_once(const run_out *r, uint64_t expect, uint64_t epochs, char *why,
                              size_t cap)
{
    uint8_t *seen = calloc(r->n ? r->n : 1, 1);
    cr_assert_not_null(seen);
    uint64_t pos = 0;
    uint64_t epoch_count = 0;
    int ok = 1;
    for (uint64_t b = 0; b < r->n_batches && ok;) {
        const uint64_t e = r->bepoch[b];
        memset(seen, 0, r->n ? r->n : 1);
        uint64_t got = 0;
        for (; b < r->n_batches && r->bepoch[b] == e; b++) {
            for (uint32_t i = 0; i < r->bsize[b]; i++) {
                const uint64_t x = r->seq[pos++];
                if (x >= r->n) {
                    snprintf(why, cap, "epoch %" PRIu64 ": index %" PRIu64 " >= N", e, x);
                    ok = 0;
                    break;
                }
                if (seen[x]) {
                    snprintf(why, cap, "epoch %" PRIu64 ": sample %" PRIu64 " delivered twice",
                             e, x);
                    ok = 0;
                    break;
                }
                seen[x] = 1;
                got++;
            }
            if (!ok) {
                break;
            }
        }
        if (ok && got != expect) {
            uint64_t missing = 0;
            while (missing < r->n && seen[missing]) {
                missing++;
            }
            snprintf(why, cap,
                     "epoch %" PRIu64 ": %" PRIu64 " distinct samples, expected %" PRIu64
                     " (first missing: %" PRIu64 ")",
                     e, got, expect, missing);
            ok = 0;
        }
        epoch_count++;
    }
    if (ok && expect > 0 && epoch_count != epochs) {
        snprintf(why, cap, "%" PRIu64 " epochs delivered, expected %" PRIu64, epoch_count,
                 epochs);
        ok = 0;
    }
    free(seen);
    return ok;
}

/* Batch structure: epochs 0, 1, 2, ... in order; every batch of an epoch has `batch`
 * samples except the last, which has the remainder (never with drop_last). */
static int check_batches(const run_out *r, uint32_t batch, int drop_last, uint64_t epochs,
                         char *why, size_t cap)
{
    const uint64_t full = per_epoch(r->n, batch, drop_last);
    const uint64_t per = (full + batch - 1) / batch; /* batches per epoch */
    if (r->n_batches != per * epochs) {
        snprintf(why, cap, "%" PRIu64 " batches, expected %" PRIu64 " per epoch x %" PRIu64,
                 r->n_batches, per, epochs);
        return 0;
    }
    for (uint64_t b = 0; b < r->n_batches; b++) {
        const uint64_t e = b / per;
        const uint64_t j = b % per;
        const uint64_t want = j + 1 < per ? batch : full - (per - 1) * batch;
        if (r->bepoch[b] != e) {
            snprintf(why, cap, "batch %" PRIu64 ": epoch %" PRIu64 ", expected %" PRIu64, b,
                     r->bepoch[b], e);
            return 0;
        }
        if (r->bsize[b] != want) {
            snprintf(why, cap,
                     "batch %" PRIu64 " (epoch %" PRIu64 "): %u samples, expected %" PRIu64, b,
                     e, r->bsize[b], want);
            return 0;
        }
    }
    return 1;
}

/* ---- the checkers can fail ----------------------------------------------------------- */

static void fake_run(run_out *r, uint64_t n, const uint64_t *seq, uint64_t len, uint32_t batch)
{
    memset(r, 0, sizeof(*r));
    r->n = n;
    for (uint64_t i = 0; i < len; i++) {
        push_seq(r, seq[i]);
    }
    for (uint64_t e = 0, i = 0; i < len; e++) {
        uint64_t in = 0;
        while (in < n && i < len) {
            uint32_t m = (uint32_t)(n - in < batch ? n - in : batch);
            if (m > len - i) {
                m = (uint32_t)(len - i);
            }
            push_batch(r, m, e);
            in += m;
            i += m;
        }
    }
}

Test(loader_props, checker_flags_duplicates_and_gaps)
{
    char why[256];
    run_out r;
    const uint64_t good[] = {3, 1, 0, 2, 4, 2, 0, 4, 1, 3};
    fake_run(&r, 5, good, 10, 2);
    cr_expect(check_exactly_once(&r, 5, 2, why, sizeof(why)), "good sequence flagged: %s", why);
    cr_expect(check_batches(&r, 2, 0, 2, why, sizeof(why)), "good batches flagged: %s", why);
    cr_expect_not(check_batches(&r, 2, 1, 2, why, sizeof(why)), "short batch not flagged");
    run_free(&r);

    const uint64_t dup[] = {3, 1, 0, 3, 4, 2, 0, 4, 1, 3};
    fake_run(&r, 5, dup, 10, 2);
    cr_expect_not(check_exactly_once(&r, 5, 2, why, sizeof(why)), "duplicate not flagged");
    cr_expect(strstr(why, "twice") != NULL, "%s", why);
    run_free(&r);

    const uint64_t missing[] = {3, 1, 0, 2, 4, 2, 0, 4, 1};
    fake_run(&r, 5, missing, 9, 2);
    cr_expect_not(check_exactly_once(&r, 5, 2, why, sizeof(why)), "gap not flagged");
    run_free(&r);

    const uint64_t out_of_range[] = {3, 1, 0, 5, 4};
    fake_run(&r, 5, out_of_range, 5, 2);
    cr_expect_not(check_exactly_once(&r, 5, 1, why, sizeof(why)), "index >= N not flagged");
    run_free(&r);

    const uint64_t one_epoch[] = {3, 1, 0, 2, 4};
    fake_run(&r, 5, one_epoch, 5, 2);
    cr_expect_not(check_exactly_once(&r, 5, 2, why, sizeof(why)), "lost epoch not flagged");
    run_free(&r);
}

Test(loader_props, view_checker_flags_wrong_bytes_and_labels, .timeout = 30)
{
    lcase c = base_case();
    c.ds.n_samples = 20;
    c.ds.min_size = 8;
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
    uint8_t buf[64], scratch[64];
    char why[256];
    const uint64_t i = 7;
    const size_t len = testds_size(&c.ds, i);
    testds_fill(i, c.ds.seed, buf, len);
    hdmlp_sample_view v = {buf, len, i, (uint32_t)(i % c.ds.n_labels), 0};
    cr_expect(view_ok(ds, &c.ds, &v, scratch, why, sizeof(why)), "good view flagged: %s", why);
    buf[len / 2] ^= 1;
    cr_expect_not(view_ok(ds, &c.ds, &v, scratch, why, sizeof(why)), "flipped byte missed");
    buf[len / 2] ^= 1;
    v.label++;
    cr_expect_not(view_ok(ds, &c.ds, &v, scratch, why, sizeof(why)), "wrong label missed");
    v.label--;
    v.index = 8;
    cr_expect_not(view_ok(ds, &c.ds, &v, scratch, why, sizeof(why)), "wrong index missed");
    hdmlp_dataset_close(ds);
}

/* ---- properties ----------------------------------------------------------------------- */

/* Hand-written edge cases, checked before the random ones by every property test. */
static int edge_case(int i, lcase *c)
{
    *c = base_case();
    switch (i) {
    case 0: /* a single sample */
        c->ds.n_samples = 1;
        c->ds.chunk_size = 1;
        c->epochs = 3;
        c->budget_kind = 0;
        return 1;
    case 1: /* one short chunk, K = 100 */
        c->ds.n_samples = 1;
        c->ds.chunk_size = 100;
        c->epochs = 2;
        c->batch = 32;
        return 1;
    case 2: /* N = K + 1: a full chunk and a one-sample chunk, smallest budget */
        c->ds.n_samples = 65;
        c->ds.chunk_size = 64;
        c->budget_kind = 0;
        c->epochs = 3;
        c->batch = 7;
        return 1;
    case 3: /* K = 3, smallest budget: one abstract chunk over every chunk */
        c->ds.n_samples = 301;
        c->ds.chunk_size = 3;
        c->ds.chunks_per_segment = 1;
        c->budget_kind = 0;
        c->epochs = 2;
        c->batch = 10;
        c->drop_last = 1;
        return 1;
    case 4: /* N = 10^5, K = 64, a quarter-ish budget, compressed */
        c->ds.n_samples = SLOW_BUILD ? 20000 : 100000;
        c->ds.chunk_size = 64;
        c->ds.chunks_per_segment = 0;
        c->ds.min_size = 1;
        c->ds.max_size = 40;
        c->ds.compress = 1;
        c->budget_kind = 1;
        c->budget_pos = 0.25;
        c->batch = 256;
        c->epochs = SLOW_BUILD ? 1 : 2;
        c->refill = HDMLP_REFILL_RANGES;
        return 1;
    case 5: /* budget beyond the dataset, K = 1 */
        c->ds.n_samples = 777;
        c->ds.chunk_size = 1;
        c->ds.chunks_per_segment = 0;
        c->budget_kind = 2;
        c->epochs = 2;
        c->policy = HDMLP_POLICY_RANDOM;
        c->refill = HDMLP_REFILL_WHOLE;
        return 1;
    default:
        return 0;
    }
}

/* Case i of a property test: the edge cases, then random cases from `seed` + i. */
static int nth_case(uint64_t seed, int i, lcase *c)
{
    if (edge_case(i, c)) {
        return 1;
    }
    int n_edge = 0;
    lcase tmp;
    while (edge_case(n_edge, &tmp)) {
        n_edge++;
    }
    if (i - n_edge >= N_CASES) {
        return 0;
    }
    *c = random_case(seed + (uint64_t)(i - n_edge));
    return 1;
}

Test(loader_props, every_epoch_delivers_every_sample_once, .timeout = 240)
{
    const uint64_t seed = 0x5eed0001;
    cr_log_info("exactly-once: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        char dir[512], desc[768], why[256];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: run ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        cr_assert_eq(r.bad_views, 0, "%s: %" PRIu64 " bad views; first: %s", desc, r.bad_views,
                     r.first_bad);
        const uint64_t expect = per_epoch(c.ds.n_samples, c.batch, c.drop_last);
        cr_assert(check_exactly_once(&r, expect, c.epochs, why, sizeof(why)), "%s: %s", desc,
                  why);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

Test(loader_props, batches_number_epochs_and_end_repeats, .timeout = 240)
{
    const uint64_t seed = 0x5eed0002;
    cr_log_info("batches: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        char dir[512], desc[768], why[256];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        cr_assert(r.end_out_null, "%s: HDMLP_END without *out = NULL", desc);
        cr_assert_eq(r.rc_again, HDMLP_END, "%s: next after END gave %s", desc,
                     hdmlp_err_name(r.rc_again));
        cr_assert(r.again_out_null, "%s: second HDMLP_END without *out = NULL", desc);
        cr_assert(check_batches(&r, c.batch, c.drop_last, c.epochs, why, sizeof(why)), "%s: %s",
                  desc, why);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

Test(loader_props, slots_empty_after_last_epoch, .timeout = 240)
{
    const uint64_t seed = 0x5eed0003;
    cr_log_info("slots after END: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        char dir[512], desc[768];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        cr_assert_eq(r.slots_end, 0, "%s: %" PRIu64 " slots still valid after HDMLP_END", desc,
                     r.slots_end);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

Test(loader_props, slots_empty_between_epochs, .timeout = 240)
{
    /* The slot hook reports the scheduler's state at its planning frontier. With lookahead
     * 1, once an epoch's last batch is out the scheduler has decided at most one request of
     * the next epoch. If every slot was empty at the epoch's end, that request is a miss
     * that fills at most K - 1 other slots, so the hook reads at most K - 1 (0 for K = 1);
     * a slot left over from the finished epoch pushes it higher (or makes the scheduler
     * fail the next epoch with HDMLP_E_STATE). The exact "0 slots" check is after
     * HDMLP_END (slots_empty_after_last_epoch), where nothing more is planned.
     * drop_last is off so each epoch's last batch is delivered. */
    const uint64_t seed = 0x5eed0004;
    cr_log_info("slots between epochs: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        c.lookahead = 1;
        c.drop_last = 0;
        if (c.epochs < 2 && c.ds.n_samples * 2 <= MAX_DELIVERED) {
            c.epochs = 2;
        }
        char dir[512], desc[768];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 1, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        cr_assert_eq(r.slot_checks, c.epochs, "%s: %" PRIu64 " epoch ends seen", desc,
                     r.slot_checks);
        cr_assert_leq(r.ahead_boundary, 1,
                      "%s: %" PRIu64 " requests planned ahead with lookahead 1", desc,
                      r.ahead_boundary);
        cr_assert_leq(r.slots_boundary, c.ds.chunk_size - 1,
                      "%s: %" PRIu64 " slots valid after an epoch's last batch: more than one "
                      "refill of the next epoch holds",
                      desc, r.slots_boundary);
        cr_assert_eq(r.slots_end, 0, "%s: %" PRIu64 " slots valid after HDMLP_END", desc,
                     r.slots_end);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

Test(loader_props, stats_add_up, .timeout = 240)
{
    const uint64_t seed = 0x5eed0005;
    cr_log_info("stats: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        char dir[512], desc[768];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        const hdmlp_stats *s = &r.st;
        const uint64_t n = c.ds.n_samples;
        const uint64_t chunks = hdmlp_dataset_chunk_count(ds);
        cr_expect_eq(s->samples, r.n_seq, "%s: samples %" PRIu64 " != delivered %" PRIu64, desc,
                     s->samples, r.n_seq);
        cr_expect_eq(s->batches, r.n_batches, "%s: batches %" PRIu64 " != %" PRIu64, desc,
                     s->batches, r.n_batches);
        cr_expect_eq(s->epochs, c.epochs, "%s: epochs %" PRIu64, desc, s->epochs);
        /* Dropped remainders are still requested: every sample is requested every epoch. */
        cr_expect_eq(s->requests, n * c.epochs, "%s: requests %" PRIu64 " != N x epochs", desc,
                     s->requests);
        cr_expect_eq(s->hits + s->misses, s->requests,
                     "%s: hits %" PRIu64 " + misses %" PRIu64 " != requests %" PRIu64, desc,
                     s->hits, s->misses, s->requests);
        cr_expect_eq(s->samples_filled, n * c.epochs,
                     "%s: samples_filled %" PRIu64 " != N x epochs (each filled once)", desc,
                     s->samples_filled);
        cr_expect_eq(s->bytes_delivered, r.bytes_delivered,
                     "%s: bytes_delivered %" PRIu64 " != sum of view sizes %" PRIu64, desc,
                     s->bytes_delivered, r.bytes_delivered);
        cr_expect_eq(s->stored_bytes_delivered, r.stored_delivered,
                     "%s: stored_bytes_delivered %" PRIu64 " != %" PRIu64, desc,
                     s->stored_bytes_delivered, r.stored_delivered);
        cr_expect_geq(s->chunk_loads, chunks * c.epochs,
                      "%s: chunk_loads %" PRIu64 " < chunks %" PRIu64 " x epochs", desc,
                      s->chunk_loads, chunks);
        cr_expect_eq(s->whole_refills + s->ranged_refills, s->chunk_loads,
                     "%s: whole %" PRIu64 " + ranged %" PRIu64 " != loads %" PRIu64, desc,
                     s->whole_refills, s->ranged_refills, s->chunk_loads);
        if (c.refill == HDMLP_REFILL_WHOLE) {
            cr_expect_eq(s->ranged_refills, 0, "%s: ranged refills in whole mode", desc);
        }
        if (c.refill == HDMLP_REFILL_RANGES) {
            cr_expect_eq(s->whole_refills, 0, "%s: whole refills in ranges mode", desc);
        }
        uint64_t hist = 0;
        for (int j = 0; j < 11; j++) {
            hist += s->fill_hist[j];
        }
        cr_expect_eq(hist, s->chunk_loads, "%s: fill_hist sums to %" PRIu64 ", loads %" PRIu64,
                     desc, hist, s->chunk_loads);
        cr_expect_geq(s->read_ops, s->chunk_loads, "%s: read_ops %" PRIu64 " < loads", desc,
                      s->read_ops);
        cr_expect_geq(s->bytes_read, s->stored_bytes_delivered,
                      "%s: bytes_read %" PRIu64 " < stored bytes delivered", desc,
                      s->bytes_read);
        cr_expect_eq(s->memory_budget, budget, "%s: memory_budget %" PRIu64, desc,
                     s->memory_budget);
        cr_expect(s->abstract_chunks >= 1 && s->abstract_chunks <= chunks,
                  "%s: A = %" PRIu64 " outside 1..%" PRIu64, desc, s->abstract_chunks, chunks);
        cr_expect_eq(s->chunk_groups, s->abstract_chunks, "%s: groups != A", desc);
        if (c.budget_kind == 2) {
            cr_expect_eq(s->abstract_chunks, chunks,
                         "%s: budget beyond the dataset but A = %" PRIu64, desc,
                         s->abstract_chunks);
        }
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

Test(loader_props, peak_memory_within_budget, .timeout = 240)
{
    const uint64_t seed = 0x5eed0006;
    cr_log_info("budget: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        /* Bias towards tight budgets, where the bound bites. */
        if (i % 2 == 0) {
            c.budget_kind = 0;
        }
        char dir[512], desc[768];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: ended with %s: %s", desc, hdmlp_err_name(r.rc),
                     r.rc_detail);
        if (r.st.bytes_read > 0) {
            cr_assert_gt(r.st.peak_memory_bytes, 0,
                         "%s: %" PRIu64 " bytes read, none accounted", desc, r.st.bytes_read);
        }
        cr_assert_leq(r.st.peak_memory_bytes, budget, "%s: peak %" PRIu64 " > budget %" PRIu64,
                      desc, r.st.peak_memory_bytes, budget);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

Test(loader_props, holding_one_batch_progresses_at_smallest_budget, .timeout = 240)
{
    /* A training loop keeps the batch it works on while asking for the next. At the
     * smallest budget the loader accepts, that must still run to the end (no HDMLP_E_NOMEM,
     * no hang) within the budget. */
    const uint64_t seed = 0x5eed0009;
    cr_log_info("hold one batch: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        c.budget_kind = 0;
        c.hold_prev = 1;
        char dir[512], desc[768], why[256];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out r;
        run_loader(ds, &c, budget, c.engine, 0, &r);
        cr_assert_eq(r.rc, HDMLP_END, "%s: holding one batch: %s: %s", desc,
                     hdmlp_err_name(r.rc), r.rc_detail);
        cr_assert_eq(r.bad_views, 0, "%s: %s", desc, r.first_bad);
        const uint64_t expect = per_epoch(c.ds.n_samples, c.batch, c.drop_last);
        cr_assert(check_exactly_once(&r, expect, c.epochs, why, sizeof(why)), "%s: %s", desc,
                  why);
        cr_assert_leq(r.st.peak_memory_bytes, budget, "%s: peak %" PRIu64, desc,
                      r.st.peak_memory_bytes);
        run_free(&r);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

static int same_run(const run_out *a, const run_out *b, char *why, size_t cap)
{
    if (a->n_seq != b->n_seq || a->n_batches != b->n_batches) {
        snprintf(why, cap, "%" PRIu64 "/%" PRIu64 " samples/batches vs %" PRIu64 "/%" PRIu64,
                 a->n_seq, a->n_batches, b->n_seq, b->n_batches);
        return 0;
    }
    for (uint64_t i = 0; i < a->n_seq; i++) {
        if (a->seq[i] != b->seq[i]) {
            snprintf(why, cap, "position %" PRIu64 ": sample %" PRIu64 " vs %" PRIu64, i,
                     a->seq[i], b->seq[i]);
            return 0;
        }
    }
    for (uint64_t i = 0; i < a->n_batches; i++) {
        if (a->bsize[i] != b->bsize[i] || a->bepoch[i] != b->bepoch[i]) {
            snprintf(why, cap, "batch %" PRIu64 " differs", i);
            return 0;
        }
    }
    return 1;
}

Test(loader_props, same_inputs_same_order_across_threads_and_engines, .timeout = 240)
{
    const uint64_t seed = 0x5eed0007;
    cr_log_info("determinism: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        if (c.ds.n_samples * c.epochs > MAX_DELIVERED / 2) {
            c.epochs = 1;
        }
        char dir[512], desc[768], why[256];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        /* Budgets are sized for the most threads used below: more I/O threads need more
         * read buffers, but never change the order. */
        c.threads = 3;
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out a, b, d;
        c.threads = 1;
        run_loader(ds, &c, budget, HDMLP_ENGINE_PREAD, 0, &a);
        c.threads = 3;
        run_loader(ds, &c, budget, HDMLP_ENGINE_IO_URING, 0, &b);
        c.threads = 2;
        run_loader(ds, &c, budget, HDMLP_ENGINE_PREAD, 0, &d);
        cr_assert_eq(a.rc, HDMLP_END, "%s: %s: %s", desc, hdmlp_err_name(a.rc), a.rc_detail);
        cr_assert_eq(b.rc, HDMLP_END, "%s: %s: %s", desc, hdmlp_err_name(b.rc), b.rc_detail);
        cr_assert_eq(d.rc, HDMLP_END, "%s: %s: %s", desc, hdmlp_err_name(d.rc), d.rc_detail);
        cr_assert(same_run(&a, &b, why, sizeof(why)), "%s: pread/1 thread vs %s/3 threads: %s",
                  desc, engine_name(b.engine), why);
        cr_assert(same_run(&a, &d, why, sizeof(why)), "%s: 1 vs 2 pread threads: %s", desc,
                  why);
        cr_assert_eq(a.st.chunk_loads, b.st.chunk_loads, "%s: loads differ", desc);
        cr_assert_eq(a.st.hits, b.st.hits, "%s: hits differ", desc);
        run_free(&a);
        run_free(&b);
        run_free(&d);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}

/* Fraction of positions where two orders agree. */
static double agreement(const uint64_t *a, const uint64_t *b, uint64_t n)
{
    uint64_t same = 0;
    for (uint64_t i = 0; i < n; i++) {
        same += a[i] == b[i];
    }
    return n ? (double)same / (double)n : 1.0;
}

Test(loader_props, other_seed_or_epoch_other_order, .timeout = 240)
{
    /* For a true permutation of N ≥ 50 the chance that two independent orders agree at
     * more than half the positions is below 10^-20 (the count of fixed points of a random
     * permutation is ~Poisson(1)); the orders must differ that much. */
    const uint64_t seed = 0x5eed0008;
    cr_log_info("seed changes order: case seeds %#" PRIx64 " + i", seed);
    lcase c;
    for (int i = 0; nth_case(seed, i, &c); i++) {
        if (c.ds.n_samples < 50) {
            continue;
        }
        c.drop_last = 0;
        c.epochs = c.ds.n_samples * 2 <= MAX_DELIVERED ? 2 : 1;
        char dir[512], desc[768];
        hdmlp_dataset *ds = make_dataset(&c.ds, dir, sizeof(dir));
        const uint64_t budget = case_budget(ds, &c);
        describe(&c, budget, desc, sizeof(desc));
        cr_log_info("case %d: %s", i, desc);
        run_out a, b;
        run_loader(ds, &c, budget, c.engine, 0, &a);
        c.seed ^= 0x9e3779b97f4a7c15ull;
        run_loader(ds, &c, budget, c.engine, 0, &b);
        cr_assert_eq(a.rc, HDMLP_END, "%s: %s", desc, a.rc_detail);
        cr_assert_eq(b.rc, HDMLP_END, "%s: %s", desc, b.rc_detail);
        cr_assert_eq(a.n_seq, b.n_seq, "%s", desc);
        const uint64_t n = c.ds.n_samples;
        const double ab = agreement(a.seq, b.seq, n);
        cr_assert_lt(ab, 0.5,
                     "%s: seeds %" PRIu64 " and %" PRIu64 " agree at %.0f%% of epoch 0", desc,
                     c.seed ^ 0x9e3779b97f4a7c15ull, c.seed, 100 * ab);
        if (c.epochs >= 2) {
            const double e01 = agreement(a.seq, a.seq + n, n);
            cr_assert_lt(e01, 0.5, "%s: epochs 0 and 1 agree at %.0f%%", desc, 100 * e01);
        }
        run_free(&a);
        run_free(&b);
        hdmlp_dataset_close(ds);
        remove_tmp_dirs();
    }
}
