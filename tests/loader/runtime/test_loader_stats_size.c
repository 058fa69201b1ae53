/*
 * hdmlp_stats can grow: hdmlp_loader_stats and hdmlp_loader_forecast fill exactly the size
 * the caller was compiled with. An older program (simulated by a struct that stops early,
 * as hdmlp.h did before its later fields were appended) gets its prefix and nothing past
 * it is written; a newer program (a struct with fields this library does not know) gets
 * them zeroed, and nothing past its size either.
 */
#include "support/loader_fixture.h"

#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#define CANARY 0xa5

/* hdmlp_stats as an older hdmlp.h declared it: the same leading fields, fewer of them. */
typedef struct old_stats {
    uint64_t samples;
    uint64_t batches;
    uint64_t epochs;
    uint64_t requests;
    uint64_t hits;
    uint64_t misses;
    uint64_t chunk_loads;
    uint64_t read_ops;
    uint64_t bytes_read;
    uint64_t bytes_delivered;
    uint64_t stored_bytes_delivered;
    uint64_t samples_filled;
    uint64_t whole_refills;
    uint64_t ranged_refills;
    uint64_t peak_memory_bytes;
    uint64_t memory_budget;
    uint64_t stall_ns;
    uint64_t fill_hist[11];
    uint64_t abstract_chunks;
} old_stats;

/* An older caller's struct with bytes right after it. */
typedef struct old_frame {
    old_stats st;
    unsigned char after[64];
} old_frame;

/* hdmlp_stats as a newer hdmlp.h may declare it: today's fields, then more. */
typedef struct new_stats {
    hdmlp_stats st;
    uint64_t later[5];
} new_stats;

typedef struct new_frame {
    new_stats st;
    unsigned char after[64];
} new_frame;

static void expect_canary(const unsigned char *p, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(p[i], CANARY, "%s: byte %zu past the caller's size was written", what, i);
    }
}

/* The old fields of *o match today's *full. */
static void expect_prefix(const old_stats *o, const hdmlp_stats *full)
{
    cr_expect_eq(o->samples, full->samples);
    cr_expect_eq(o->batches, full->batches);
    cr_expect_eq(o->epochs, full->epochs);
    cr_expect_eq(o->chunk_loads, full->chunk_loads);
    cr_expect_eq(o->bytes_delivered, full->bytes_delivered);
    cr_expect_eq(o->memory_budget, full->memory_budget);
    cr_expect_eq(memcmp(o->fill_hist, full->fill_hist, sizeof o->fill_hist), 0);
    cr_expect_eq(o->abstract_chunks, full->abstract_chunks);
    cr_expect_eq(memcmp(o, full, sizeof *o), 0, "the old struct is today's prefix");
}

/* A loader over the small dataset run to the end of its two epochs (its counters then
 * stay as they are). */
static hdmlp_loader *finished_loader(hdmlp_dataset **ds)
{
    testds_spec spec = small_spec();
    char dir[512];
    *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_loader *ld = new_loader(*ds, new_config(ROOMY, 16, 2));
    hdmlp_batch *b = NULL;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        hdmlp_batch_release(b);
    }
    cr_assert_eq(rc, HDMLP_END, "%s", hdmlp_last_error());
    return ld;
}

Test(loader_api, stats_for_an_older_caller_fill_its_prefix_only, .timeout = 30)
{
    hdmlp_dataset *ds = NULL;
    hdmlp_loader *ld = finished_loader(&ds);
    hdmlp_stats full;
    cr_assert_eq(hdmlp_loader_stats(ld, &full, HDMLP_STATS_SIZE), HDMLP_OK);
    cr_assert_gt(full.samples, 0);

    old_frame f;
    memset(&f, CANARY, sizeof f);
    cr_assert_eq(hdmlp_loader_stats(ld, (hdmlp_stats *)(void *)&f.st, sizeof f.st), HDMLP_OK);
    expect_prefix(&f.st, &full);
    expect_canary(f.after, sizeof f.after, "old struct");

    /* A size that ends inside a field: exactly that many bytes. */
    unsigned char raw[offsetof(hdmlp_stats, memory_budget) + 3 + 16];
    const size_t cut = offsetof(hdmlp_stats, memory_budget) + 3;
    memset(raw, CANARY, sizeof raw);
    cr_assert_eq(hdmlp_loader_stats(ld, (hdmlp_stats *)(void *)raw, cut), HDMLP_OK);
    cr_expect_eq(memcmp(raw, &full, cut), 0);
    expect_canary(raw + cut, sizeof raw - cut, "cut struct");

    cr_expect_eq(hdmlp_loader_stats(ld, (hdmlp_stats *)(void *)&f.st, 0), HDMLP_E_INVAL);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, stats_for_a_newer_caller_zero_the_unknown_fields, .timeout = 30)
{
    hdmlp_dataset *ds = NULL;
    hdmlp_loader *ld = finished_loader(&ds);
    hdmlp_stats full;
    cr_assert_eq(hdmlp_loader_stats(ld, &full, sizeof full), HDMLP_OK);

    new_frame f;
    memset(&f, CANARY, sizeof f);
    cr_assert_eq(hdmlp_loader_stats(ld, &f.st.st, sizeof f.st), HDMLP_OK);
    cr_expect_eq(memcmp(&f.st.st, &full, sizeof full), 0, "today's fields as today's caller");
    for (size_t i = 0; i < sizeof f.st.later / sizeof f.st.later[0]; i++) {
        cr_expect_eq(f.st.later[i], 0, "field %zu after today's struct not zeroed", i);
    }
    expect_canary(f.after, sizeof f.after, "new struct");
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
}

Test(loader_api, forecast_fills_the_callers_size, .timeout = 30)
{
    testds_spec spec = small_spec();
    char dir[512];
    hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
    hdmlp_config *cfg = new_config(ROOMY, 16, 2);
    hdmlp_stats full;
    cr_assert_eq(hdmlp_loader_forecast(ds, cfg, &full, sizeof full, NULL, NULL, NULL), HDMLP_OK,
                 "%s", hdmlp_last_error());
    cr_assert_gt(full.samples, 0);

    old_frame o;
    memset(&o, CANARY, sizeof o);
    cr_assert_eq(hdmlp_loader_forecast(ds, cfg, (hdmlp_stats *)(void *)&o.st, sizeof o.st, NULL,
                                       NULL, NULL),
                 HDMLP_OK);
    expect_prefix(&o.st, &full);
    expect_canary(o.after, sizeof o.after, "old struct");

    new_frame n;
    memset(&n, CANARY, sizeof n);
    cr_assert_eq(hdmlp_loader_forecast(ds, cfg, &n.st.st, sizeof n.st, NULL, NULL, NULL),
                 HDMLP_OK);
    /* The page cache's room is read anew by each forecast (it moves with the machine). */
    n.st.st.page_cache_room = full.page_cache_room;
    cr_expect_eq(memcmp(&n.st.st, &full, sizeof full), 0);
    for (size_t i = 0; i < sizeof n.st.later / sizeof n.st.later[0]; i++) {
        cr_expect_eq(n.st.later[i], 0, "field %zu after today's struct not zeroed", i);
    }
    expect_canary(n.after, sizeof n.after, "new struct");

    cr_expect_eq(hdmlp_loader_forecast(ds, cfg, &full, 0, NULL, NULL, NULL), HDMLP_E_INVAL);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
}
