/*
 * Chunk sources (loader_chunksrc.c, loader_chunksrc_tier.c, loader_io_store.c): the
 * dataset's segments read through a store engine from a real HTTP server (nginx on
 * 127.0.0.1) give the bytes the local files give, for whole chunks and sample ranges; a
 * missing object or segment file is named with the chunk; an SSD cache file that fails
 * verification is reported, dropped and absent after; the RAM tier lends its chunk, is
 * absent without one, and makes a reader wait while the chunk's first load runs. Plans are
 * made here by hand from the index (every sample's stored range, or every other one).
 * Tests needing nginx skip where it is missing.
 */
#include "format.h"
#include "hd_base.h"
#include "loader_chunksrc.h"
#include "loader_tier.h"
#include "support/ds_record.h"
#include "support/objstore_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A dataset's index, through an open dataset (its records from the chunks' tables). */
typedef struct test_index {
    hdmlp_dataset *ds;
    fmt_index ix; /* a copy of ds's view, valid while ds is open */
} test_index;

static void index_load(const char *dir, test_index *t)
{
    cr_assert_eq(hdmlp_dataset_open(dir, &t->ds), HDMLP_OK, "%s", hdmlp_last_error());
    t->ix = *ds_record_index(t->ds);
}

/* Sample i's record, from its chunk's table. */
static void record(const test_index *ti, uint64_t i, fmt_sample *rec)
{
    ds_record(ti->ds, i, rec);
}

/* The largest whole chunk, aligned: a buffer any plan fits. */
static uint64_t max_chunk(const fmt_index *ix)
{
    uint64_t max = 0;
    for (uint64_t c = 0; c < ix->h.n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        max = fmt_align_up(ch.length) > max ? fmt_align_up(ch.length) : max;
    }
    return max;
}

/* A plan of chunk c built by hand: whole, or the stored ranges of every `step`-th sample
 * (one range each, laid out back to back). */
typedef struct test_plan {
    refill_plan p;
    refill_range ranges[64];
    uint64_t pos[64];
    uint64_t index[64]; /* the samples the plan reads (ranges plans) */
    uint32_t n;
} test_plan;

static void plan_whole(const fmt_index *ix, uint64_t c, test_plan *t)
{
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    memset(t, 0, sizeof(*t));
    t->ranges[0] = (refill_range){ch.offset, ch.length, 0};
    t->p = (refill_plan){.segment = ch.segment,
                         .whole = 1,
                         .n_ranges = 1,
                         .requests = 1,
                         .ranges = t->ranges,
                         .buf_len = ch.length};
}

static void plan_ranges(const test_index *ti, uint64_t c, uint32_t step, test_plan *t)
{
    const fmt_index *ix = &ti->ix;
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    memset(t, 0, sizeof(*t));
    uint64_t at = 0;
    for (uint32_t slot = 0; slot < ch.n_samples && t->n < 64; slot += step) {
        const uint64_t i = c * ix->h.chunk_size + slot;
        fmt_sample rec;
        record(ti, i, &rec);
        t->ranges[t->n] = (refill_range){ch.offset + rec.offset, rec.stored_len, at};
        t->pos[t->n] = at;
        t->index[t->n] = i;
        at += rec.stored_len;
        t->n++;
    }
    t->p = (refill_plan){.segment = ch.segment,
                         .whole = 0,
                         .n_ranges = t->n,
                         .requests = t->n,
                         .ranges = t->ranges,
                         .buf_len = at,
                         .sample_pos = t->pos};
}

/* Every sample a read of plan t (ranges) left in b decodes to its bytes. */
static void check_samples(const test_index *ti, const test_plan *t, const chunk_bytes *b,
                          uint64_t seed)
{
    fmt_decoder *d = NULL;
    cr_assert_eq(fmt_decoder_create(&ti->ix, &d), HDMLP_OK);
    for (uint32_t k = 0; k < t->n; k++) {
        fmt_sample rec;
        record(ti, t->index[k], &rec);
        uint8_t *got = malloc(rec.raw_len + 1), *want = malloc(rec.raw_len + 1);
        const uint64_t pos = b->whole_chunk ? rec.offset : t->pos[k];
        cr_assert_eq(fmt_sample_decode(d, t->index[k], &rec, b->base + pos, got, rec.raw_len),
                     HDMLP_OK, "sample %llu: %s", (unsigned long long)t->index[k],
                     hdmlp_last_error());
        testds_fill(t->index[k], seed, want, rec.raw_len);
        cr_assert_eq(memcmp(got, want, rec.raw_len), 0, "sample %llu differs",
                     (unsigned long long)t->index[k]);
        free(got);
        free(want);
    }
    fmt_decoder_free(d);
}

/* Find and read of plan t through r into buf. */
static int find_read(chunk_reader *r, uint64_t c, const test_plan *t, uint8_t *buf,
                     chunk_bytes *out)
{
    const int rc = chunk_find(r, c, &t->p);
    return rc != HDMLP_OK ? rc : chunk_read(r, c, &t->p, buf, out);
}

Test(chunksrc, remote_segments_read_through_a_store_engine_as_local_files_do, .timeout = 120)
{
    objstore_server s = {0};
    int tls = 0;
    objstore_start_nginx(&s, &tls);
    char url[128], dir[700];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    snprintf(dir, sizeof(dir), "%s/bucket/ds", s.dir);
    hdmlp_dataset *rds = NULL, *lds = NULL;
    cr_assert_eq(hdmlp_dataset_open(url, &rds), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_open(dir, &lds), HDMLP_OK, "%s", hdmlp_last_error());
    test_index ti;
    index_load(dir, &ti);
    chunk_source remote, local;
    chunk_source_dataset(&remote, rds, 0, NULL);
    chunk_source_dataset(&local, lds, 0, NULL);
    cr_assert_eq(remote.counter, TIER_SOURCE);
    cr_assert_null(remote.ops->drop, "the dataset's bytes are served as they are");
    io_engine *files = NULL;
    cr_assert_eq(io_engine_create(HDMLP_ENGINE_PREAD, 8, &files), HDMLP_OK);
    chunk_reader *rr = NULL, *lr = NULL;
    cr_assert_eq(chunk_reader_create(&remote, NULL, &rr), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(chunk_reader_create(&local, files, &lr), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(chunk_reader_source(rr), &remote);
    const uint64_t max = max_chunk(&ti.ix);
    uint8_t *rb = malloc(max), *lb = malloc(max);
    uint64_t reads = 0;
    for (uint64_t c = 0; c < ti.ix.h.n_chunks; c += 3) {
        for (int shape = 0; shape < 3; shape++) {
            test_plan t;
            if (shape == 0) {
                plan_whole(&ti.ix, c, &t);
            } else {
                plan_ranges(&ti, c, (uint32_t)shape, &t);
            }
            memset(rb, 0xa5, max);
            chunk_bytes rbytes, lbytes;
            cr_assert_eq(find_read(rr, c, &t, rb, &rbytes), HDMLP_OK, "chunk %llu: %s",
                         (unsigned long long)c, hdmlp_last_error());
            cr_assert_eq(find_read(lr, c, &t, lb, &lbytes), HDMLP_OK, "chunk %llu: %s",
                         (unsigned long long)c, hdmlp_last_error());
            cr_assert_eq(rbytes.base, rb, "read into the caller's buffer");
            cr_assert_eq(rbytes.whole_chunk, 0, "in the plan's layout");
            cr_assert_eq(memcmp(rb, lb, t.p.buf_len), 0, "chunk %llu shape %d: bytes differ",
                         (unsigned long long)c, shape);
            if (shape > 0) {
                check_samples(&ti, &t, &rbytes, objstore_spec.seed);
            }
            reads++;
        }
    }
    printf("chunk sources: %llu plans read remote and local, bytes equal\n",
           (unsigned long long)reads);
    /* The segment's name for messages is its URL. */
    test_plan t;
    plan_whole(&ti.ix, 0, &t);
    char name[512];
    remote.ops->name(&remote, &t.p, name, sizeof(name));
    cr_assert(strstr(name, url) != NULL && strstr(name, "segment-000000") != NULL, "%s", name);
    chunk_reader_free(rr);
    chunk_reader_free(lr);
    io_engine_free(files);
    free(rb);
    free(lb);
    hdmlp_dataset_close(ti.ds);
    hdmlp_dataset_close(rds);
    hdmlp_dataset_close(lds);
    objstore_stop(&s);
}

Test(chunksrc, missing_segment_object_or_file_is_named_with_the_chunk, .timeout = 60)
{
    objstore_server s = {0};
    int tls = 0;
    objstore_start_nginx(&s, &tls);
    char url[128], dir[700], seg[800];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    snprintf(dir, sizeof(dir), "%s/bucket/ds", s.dir);
    hdmlp_dataset *rds = NULL, *lds = NULL;
    cr_assert_eq(hdmlp_dataset_open(url, &rds), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_open(dir, &lds), HDMLP_OK, "%s", hdmlp_last_error());
    test_index ti;
    index_load(dir, &ti);
    /* Chunk 1 lives in segment 0, which goes away after both datasets opened. */
    fmt_chunk ch;
    fmt_index_chunk(&ti.ix, 1, &ch);
    snprintf(seg, sizeof(seg), "%s/" FMT_SEGMENT_NAME_FMT, dir, ch.segment);
    cr_assert_eq(unlink(seg), 0, "%s: %s", seg, strerror(errno));
    chunk_source remote, local;
    chunk_source_dataset(&remote, rds, 0, NULL);
    chunk_source_dataset(&local, lds, 0, NULL);
    io_engine *files = NULL;
    cr_assert_eq(io_engine_create(HDMLP_ENGINE_PREAD, 8, &files), HDMLP_OK);
    chunk_reader *rr = NULL, *lr = NULL;
    cr_assert_eq(chunk_reader_create(&remote, NULL, &rr), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(chunk_reader_create(&local, files, &lr), HDMLP_OK, "%s", hdmlp_last_error());
    uint8_t *buf = malloc(max_chunk(&ti.ix));
    test_plan t;
    plan_ranges(&ti, 1, 2, &t);
    chunk_bytes b;
    /* Remote: found (an object name), then the read fails naming the URL and the chunk. */
    cr_assert_eq(chunk_find(rr, 1, &t.p), HDMLP_OK);
    int rc = chunk_read(rr, 1, &t.p, buf, &b);
    const char *e = hdmlp_last_error();
    cr_assert_eq(rc, HDMLP_E_NOTFOUND, "%s: %s", hdmlp_err_name(rc), e);
    cr_assert(strstr(e, url) != NULL && strstr(e, "segment-000000, chunk 1: ") != NULL, "%s",
              e);
    /* Local: the file does not open, so find fails (nothing is read), naming the file. */
    rc = chunk_find(lr, 1, &t.p);
    e = hdmlp_last_error();
    cr_assert_eq(rc, HDMLP_E_NOTFOUND, "%s: %s", hdmlp_err_name(rc), e);
    cr_assert(strstr(e, seg) != NULL, "%s", e);
    chunk_reader_free(rr);
    chunk_reader_free(lr);
    io_engine_free(files);
    free(buf);
    hdmlp_dataset_close(ti.ds);
    hdmlp_dataset_close(rds);
    hdmlp_dataset_close(lds);
    objstore_stop(&s);
}

/* A local dataset (the object-store spec: 75 chunks of 8 samples) and its index. */
static hdmlp_dataset *local_dataset(char *dir, size_t cap, test_index *ti)
{
    cr_assert_eq(testds_mkdtemp("chunksrc", dir, cap), 0);
    cr_assert_eq(testds_write(dir, &objstore_spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    index_load(dir, ti);
    return ds;
}

/* A tier placing every chunk in RAM (ssd_dir NULL) or on the SSD directory. */
static tier *all_in(const fmt_index *ix, const char *ssd_dir)
{
    const uint64_t c = ix->h.n_chunks;
    uint64_t *loads = malloc(c * sizeof(uint64_t)), *first = malloc(c * sizeof(uint64_t));
    for (uint64_t i = 0; i < c; i++) {
        loads[i] = 2;
        first[i] = i;
    }
    const tier_params tp = {ssd_dir == NULL ? UINT64_MAX / 2 : 0, ssd_dir,
                            ssd_dir == NULL ? 0 : UINT64_MAX / 2, ix->h.dataset_id, 0};
    tier *t = NULL;
    cr_assert_eq(tier_create(ix, &tp, loads, first, &t), HDMLP_OK, "%s", hdmlp_last_error());
    free(loads);
    free(first);
    return t;
}

Test(chunksrc, ssd_cache_file_found_bad_is_reported_dropped_and_absent_after, .timeout = 60)
{
    char dir[512], ssd[600], file[800];
    test_index ti;
    hdmlp_dataset *ds = local_dataset(dir, sizeof(dir), &ti);
    snprintf(ssd, sizeof(ssd), "%s/ssd", dir);
    tier *t = all_in(&ti.ix, ssd);
    chunk_source data, cache;
    chunk_source_dataset(&data, ds, 0, NULL);
    chunk_source_ssd(&cache, ds, t, NULL);
    cr_assert_eq(cache.counter, TIER_SSD);
    cr_assert_not_null(cache.ops->drop, "a bad cache file is dropped, not served");
    io_engine *files = NULL;
    cr_assert_eq(io_engine_create(HDMLP_ENGINE_PREAD, 8, &files), HDMLP_OK);
    chunk_reader *dr = NULL, *cr = NULL;
    cr_assert_eq(chunk_reader_create(&data, files, &dr), HDMLP_OK);
    cr_assert_eq(chunk_reader_create(&cache, files, &cr), HDMLP_OK);
    const uint64_t c = 5, max = max_chunk(&ti.ix);
    uint8_t *buf = calloc(1, max), *got = malloc(max);
    test_plan whole;
    plan_whole(&ti.ix, c, &whole);
    /* Not staged: absent. */
    cr_assert_eq(chunk_find(cr, c, &whole.p), CHUNK_ABSENT);
    /* Staged from the dataset's verified whole read, with its padding (as the stager does). */
    chunk_bytes b;
    cr_assert_eq(find_read(dr, c, &whole, buf, &b), HDMLP_OK, "%s", hdmlp_last_error());
    fmt_chunk ch;
    fmt_index_chunk(&ti.ix, c, &ch);
    cr_assert_eq(tier_ssd_store(t, c, buf, fmt_align_up(ch.length)), 1, "%s",
                 hdmlp_last_error());
    /* Read from the file at offset 0: the same bytes, whole or as sample ranges. */
    cr_assert_eq(find_read(cr, c, &whole, got, &b), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(memcmp(got, buf, ch.length), 0);
    test_plan ranges;
    plan_ranges(&ti, c, 3, &ranges);
    cr_assert_eq(find_read(cr, c, &ranges, got, &b), HDMLP_OK, "%s", hdmlp_last_error());
    check_samples(&ti, &ranges, &b, objstore_spec.seed);
    /* A flipped header byte: the whole read fails verification, naming the cache. */
    snprintf(file, sizeof(file), "%s/hdmlp-%016llx-chunk-%llu", ssd,
             (unsigned long long)ti.ix.h.dataset_id, (unsigned long long)c);
    FILE *f = fopen(file, "r+b");
    cr_assert_not_null(f, "%s: %s", file, strerror(errno));
    fseek(f, 9, SEEK_SET);
    const int byte = fgetc(f);
    fseek(f, 9, SEEK_SET);
    fputc(byte ^ 0x10, f);
    fclose(f);
    cr_assert_eq(chunk_find(cr, c, &whole.p), HDMLP_OK);
    const int rc = chunk_read(cr, c, &whole.p, got, &b);
    cr_assert_eq(rc, HDMLP_E_CORRUPT, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "SSD chunk cache") != NULL, "%s", hdmlp_last_error());
    /* Dropped: the file is gone, the chunk is placed on the source and the cache is absent. */
    cache.ops->drop(&cache, c);
    cr_assert_neq(access(file, F_OK), 0, "the bad cache file is still there");
    cr_assert_eq(tier_placement(t, c), TIER_SOURCE);
    cr_assert_eq(chunk_find(cr, c, &whole.p), CHUNK_ABSENT);
    chunk_reader_free(dr);
    chunk_reader_free(cr);
    io_engine_free(files);
    tier_free(t);
    free(buf);
    free(got);
    hdmlp_dataset_close(ti.ds);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

typedef struct waiter {
    chunk_reader *r;
    const refill_plan *p;
    uint64_t chunk;
    int rc;
    int done;
    pthread_mutex_t lock;
} waiter;

static void *wait_find(void *arg)
{
    waiter *w = arg;
    const int rc = chunk_find(w->r, w->chunk, w->p);
    pthread_mutex_lock(&w->lock);
    w->rc = rc;
    w->done = 1;
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static int waiter_done(waiter *w)
{
    pthread_mutex_lock(&w->lock);
    const int d = w->done;
    pthread_mutex_unlock(&w->lock);
    return d;
}

Test(chunksrc, ram_tier_lends_its_chunk_and_waits_for_a_first_load, .timeout = 60)
{
    char dir[512];
    test_index ti;
    hdmlp_dataset *ds = local_dataset(dir, sizeof(dir), &ti);
    tier *t = all_in(&ti.ix, NULL);
    chunk_source data, ram;
    chunk_source_dataset(&data, ds, 0, NULL);
    chunk_source_ram(&ram, ds, t);
    cr_assert_eq(ram.counter, TIER_RAM);
    cr_assert_null(ram.clock, "lending is not timed");
    io_engine *files = NULL;
    cr_assert_eq(io_engine_create(HDMLP_ENGINE_PREAD, 8, &files), HDMLP_OK);
    chunk_reader *dr = NULL, *rr = NULL, *rr2 = NULL;
    cr_assert_eq(chunk_reader_create(&data, files, &dr), HDMLP_OK);
    cr_assert_eq(chunk_reader_create(&ram, NULL, &rr), HDMLP_OK);
    cr_assert_eq(chunk_reader_create(&ram, NULL, &rr2), HDMLP_OK);
    const uint64_t c = 7;
    test_plan ranges;
    plan_ranges(&ti, c, 2, &ranges);
    /* Nothing cached and no first load planned: absent at once. */
    cr_assert_eq(chunk_find(rr, c, &ranges.p), CHUNK_ABSENT);
    /* A first load planned: a reader waits until it has filled the cache. */
    cr_assert_eq(tier_first_plan(t, c), 1);
    waiter w = {.r = rr2, .p = &ranges.p, .chunk = c, .lock = PTHREAD_MUTEX_INITIALIZER};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, wait_find, &w), 0);
    nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
    cr_assert_eq(waiter_done(&w), 0, "find returned while the first load was running");
    fmt_chunk ch;
    fmt_index_chunk(&ti.ix, c, &ch);
    test_plan whole;
    plan_whole(&ti.ix, c, &whole);
    uint8_t *copy = hd_map_alloc(ch.length);
    chunk_bytes b;
    cr_assert_eq(find_read(dr, c, &whole, copy, &b), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(tier_ram_put(t, c, copy, ch.length), 1);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_eq(w.rc, HDMLP_OK);
    /* Lent whole, not copied: the samples are at their index offsets. */
    uint8_t unused[8];
    cr_assert_eq(chunk_read(rr2, c, &ranges.p, unused, &b), HDMLP_OK);
    cr_assert_eq(b.base, copy);
    cr_assert_eq(b.whole_chunk, 1);
    check_samples(&ti, &ranges, &b, objstore_spec.seed);
    char name[64];
    ram.ops->name(&ram, &ranges.p, name, sizeof(name));
    cr_assert_str_eq(name, "RAM chunk cache");
    cr_assert_null(ram.ops->drop);
    chunk_reader_free(dr);
    chunk_reader_free(rr);
    chunk_reader_free(rr2);
    io_engine_free(files);
    tier_free(t); /* frees the cached chunk */
    hdmlp_dataset_close(ti.ds);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}
