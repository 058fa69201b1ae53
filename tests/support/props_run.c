/*
 * Running the loader property tests' cases (see props_run.h).
 */
#include "support/props_run.h"

#include "loader.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIRS 64
static char tmp_dirs[MAX_DIRS][512];
static int n_tmp_dirs;

void remove_tmp_dirs(void)
{
    for (int i = 0; i < n_tmp_dirs; i++) {
        testds_rm_rf(tmp_dirs[i]);
    }
    n_tmp_dirs = 0;
}

TestSuite(loader_props, .fini = remove_tmp_dirs);

/* Writes the case's dataset into a fresh directory and opens it. */
hdmlp_dataset *make_dataset(const testds_spec *spec, char *dir, size_t cap)
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
uint64_t case_budget(hdmlp_dataset *ds, const lcase *c)
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

void run_free(run_out *r)
{
    free(r->seq);
    free(r->bsize);
    free(r->bepoch);
    memset(r, 0, sizeof(*r));
}

/* Checks one view against the dataset's metadata and testds's deterministic content. */
int view_ok(hdmlp_dataset *ds, const testds_spec *spec, const hdmlp_sample_view *v,
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

void push_seq(run_out *r, uint64_t x)
{
    if (r->n_seq == r->cap_seq) {
        r->cap_seq = r->cap_seq ? 2 * r->cap_seq : 1024;
        r->seq = realloc(r->seq, r->cap_seq * sizeof(*r->seq));
        cr_assert_not_null(r->seq);
    }
    r->seq[r->n_seq++] = x;
}

void push_batch(run_out *r, uint32_t size, uint64_t epoch)
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
uint64_t per_epoch(uint64_t n, uint32_t batch, int drop_last)
{
    return drop_last ? n - n % batch : n;
}

/* Runs the case's loader to HDMLP_END (or an error) with the given budget, engine and
 * thread count. Releases each batch before asking for the next. When check_boundaries is
 * set (lookahead 1, drop_last off), reads the slot hook after each epoch's last batch. */
void run_loader(hdmlp_dataset *ds, const lcase *c, uint64_t budget, hdmlp_engine engine,
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
            cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof st), HDMLP_OK);
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
    cr_assert_eq(hdmlp_loader_stats(ld, &r->st, sizeof r->st), HDMLP_OK);
    hdmlp_loader_free(ld);
    free(scratch);
}

/* ---- checkers (pure: they see only the recorded run) -------------------------------- */

/* Exactly-once: each epoch (a run of batches with the same epoch number) holds every
 * sample of 0..n-1 at most once, and exactly `expect` distinct samples. Returns 1 or
 * writes the first violation into why. */
int check_exactly_once(const run_out *r, uint64_t expect, uint64_t epochs, char *why,
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
int check_batches(const run_out *r, uint32_t batch, int drop_last, uint64_t epochs, char *why,
                  size_t cap)
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
