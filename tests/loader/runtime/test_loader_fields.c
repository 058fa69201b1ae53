/* Samples with fields: a dataset with a caption (text, sometimes absent) and a score (an
 * inline float64) beside its bytes and label describes its fields and delivers each sample
 * as a field record, from hdmlp_dataset_read_sample and from loaders whatever the budget
 * (records from block offsets, from the I/O threads, from held tables): every field of every
 * sample as written, every sample once an epoch. */
#include "hdmlp.h"
#include "support/loader_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh directory in dir holding spec written with fields, opened. */
static hdmlp_dataset *make_fields(const testds_spec *spec, char *dir, size_t cap)
{
    cr_assert_eq(testds_mkdtemp("fields", dir, cap), 0);
    cr_assert_eq(testds_write_fields(dir, spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    return ds;
}

static testds_spec fields_spec(uint64_t n, uint32_t k)
{
    testds_spec s = small_spec();
    s.n_samples = n;
    s.chunk_size = k;
    s.chunks_per_segment = 0;
    s.seed = 91;
    s.min_size = 0;
    s.max_size = 40;
    s.compress = 1;
    s.n_labels = 4;
    s.version = 2;
    return s;
}

/* Sample `index`'s field record (data, size) holds what the writer gave it. */
static void expect_fields(const testds_spec *spec, uint64_t index, uint32_t label,
                          const void *data, uint64_t size)
{
    hdmlp_field_value v;
    cr_assert_eq(hdmlp_sample_field(data, size, 0, &v), HDMLP_OK, "%s", hdmlp_last_error());
    const size_t n = testds_size(spec, index);
    uint8_t *want = malloc(n + 1);
    testds_fill(index, spec->seed, want, n);
    cr_assert(v.present && v.type == HDMLP_FIELD_BYTES && v.size == n &&
                  (n == 0 || memcmp(v.data, want, n) == 0),
              "sample %" PRIu64 ": data", index);
    free(want);
    cr_assert_eq(hdmlp_sample_field(data, size, 1, &v), HDMLP_OK);
    cr_assert(v.present && v.type == HDMLP_FIELD_INT64 && v.i64 == (int64_t)label &&
                  label == index % spec->n_labels,
              "sample %" PRIu64 ": label %" PRId64, index, v.i64);
    char caption[40];
    const size_t len = testds_caption(index, caption);
    cr_assert_eq(hdmlp_sample_field(data, size, 2, &v), HDMLP_OK);
    cr_assert_eq(v.present, len != 0, "sample %" PRIu64 ": caption present", index);
    cr_assert(v.size == len && (len == 0 || memcmp(v.data, caption, len) == 0),
              "sample %" PRIu64 ": caption", index);
    cr_assert(len == 0 || ((uintptr_t)v.data - (uintptr_t)data) % 8 == 0);
    cr_assert_eq(hdmlp_sample_field(data, size, 3, &v), HDMLP_OK);
    cr_assert(v.present && v.type == HDMLP_FIELD_FLOAT64 && v.f64 == (double)index / 2,
              "sample %" PRIu64 ": score %g", index, v.f64);
    cr_assert_eq(hdmlp_sample_field(data, size, 4, &v), HDMLP_E_RANGE);
}

Test(loader_fields, the_dataset_describes_its_fields)
{
    const testds_spec spec = fields_spec(300, 16);
    char dir[512];
    hdmlp_dataset *ds = make_fields(&spec, dir, sizeof(dir));
    cr_assert_eq(hdmlp_dataset_field_count(ds), 4);
    cr_assert_eq(hdmlp_dataset_field_records(ds), 1);
    static const char *const names[4] = {"data", "label", "caption", "score"};
    static const uint32_t types[4] = {HDMLP_FIELD_BYTES, HDMLP_FIELD_INT64, HDMLP_FIELD_TEXT,
                                      HDMLP_FIELD_FLOAT64};
    for (uint32_t f = 0; f < 4; f++) {
        hdmlp_field_info in;
        cr_assert_eq(hdmlp_dataset_field(ds, f, &in), HDMLP_OK);
        cr_assert(in.name_size == strlen(names[f]) &&
                  memcmp(in.name, names[f], in.name_size) == 0);
        cr_assert_eq(in.type, types[f]);
        cr_assert_eq(in.is_label, f == 1);
        cr_assert_eq(in.required, f != 2);
        uint32_t at = 99;
        cr_assert_eq(hdmlp_dataset_field_index(ds, names[f], strlen(names[f]), &at), HDMLP_OK);
        cr_assert_eq(at, f);
    }
    /* Per field: samples that have it, raw and stored bytes (the tables' value records). */
    hdmlp_field_stats st[4];
    cr_assert_eq(hdmlp_dataset_field_stats(ds, st, 4), HDMLP_OK, "%s", hdmlp_last_error());
    uint64_t data_raw = 0, captions = 0, caption_raw = 0;
    for (uint64_t i = 0; i < spec.n_samples; i++) {
        char text[40];
        const size_t len = testds_caption(i, text);
        data_raw += testds_size(&spec, i);
        captions += len != 0;
        caption_raw += len;
    }
    cr_expect(st[0].present == spec.n_samples && st[0].raw_bytes == data_raw);
    cr_expect(st[1].present == spec.n_samples && st[1].raw_bytes == 8 * spec.n_samples &&
              st[1].stored_bytes == 0);
    cr_expect(st[2].present == captions && st[2].raw_bytes == caption_raw &&
              st[2].stored_bytes == caption_raw);
    cr_expect(st[3].present == spec.n_samples);
    cr_expect_eq(st[0].raw_bytes + st[2].raw_bytes, hdmlp_dataset_raw_bytes(ds));
    hdmlp_field_info in;
    cr_assert_eq(hdmlp_dataset_field(ds, 4, &in), HDMLP_E_RANGE);
    uint32_t at;
    cr_assert_eq(hdmlp_dataset_field_index(ds, "boxes", 5, &at), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "boxes"), "%s", hdmlp_last_error());
    /* Random access: the same field record a loader delivers. */
    for (uint64_t i = 0; i < spec.n_samples; i += 7) {
        hdmlp_sample_info info;
        cr_assert_eq(hdmlp_dataset_sample_info(ds, i, &info), HDMLP_OK);
        cr_assert_eq(info.codec, 255);
        uint8_t buf[512];
        size_t size = 0;
        cr_assert_eq(hdmlp_dataset_read_sample(ds, i, buf, sizeof(buf), &size), HDMLP_OK, "%s",
                     hdmlp_last_error());
        cr_assert_eq(size, info.raw_size);
        expect_fields(&spec, i, info.label, buf, size);
    }
    /* Bytes that are not a field record are refused. */
    hdmlp_field_value v;
    const uint8_t junk[24] = {1, 2, 3};
    cr_assert_eq(hdmlp_sample_field(junk, sizeof(junk), 0, &v), HDMLP_E_INVAL);
    uint8_t buf[512];
    size_t size = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 1, buf, sizeof(buf), &size), HDMLP_OK);
    cr_assert_eq(hdmlp_sample_field(buf, 12, 0, &v), HDMLP_E_INVAL, "a cut record");
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

/* A version-1 dataset and a version-2 one of bytes and a label keep delivering bytes. */
Test(loader_fields, bytes_and_a_label_are_delivered_as_bytes)
{
    for (uint32_t version = 1; version <= 2; version++) {
        testds_spec spec = fields_spec(100, 8);
        spec.version = version;
        char dir[512];
        hdmlp_dataset *ds = make_dataset(&spec, dir, sizeof(dir));
        cr_assert_eq(hdmlp_dataset_field_records(ds), 0);
        cr_assert_eq(hdmlp_dataset_field_count(ds), 2);
        hdmlp_field_info in;
        cr_assert_eq(hdmlp_dataset_field(ds, 1, &in), HDMLP_OK);
        cr_assert(in.is_label && in.name_size == 5 && memcmp(in.name, "label", 5) == 0);
        hdmlp_dataset_close(ds);
        testds_rm_rf(dir);
    }
}

Test(loader_fields, loaders_deliver_field_records, .timeout = 120)
{
    const testds_spec spec = fields_spec(6000, 40);
    char dir[512];
    hdmlp_dataset *ds = make_fields(&spec, dir, sizeof(dir));
    /* Block offsets kept (the records summed by planning), not kept (the I/O threads read
     * them), the tables held. */
    const uint64_t budgets[] = {200000, 40000, 8u << 20};
    for (size_t b = 0; b < sizeof(budgets) / sizeof(budgets[0]); b++) {
        hdmlp_config *cfg = new_config(budgets[b], 16, 2);
        cr_assert_eq(hdmlp_config_set_memory_raise(cfg, 1), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_threads(cfg, 3), HDMLP_OK);
        hdmlp_loader *ld = new_loader(ds, cfg);
        uint8_t *seen = calloc(spec.n_samples * 2, 1);
        hdmlp_batch *batch = NULL;
        uint64_t total = 0;
        int rc;
        while ((rc = hdmlp_loader_next(ld, &batch)) == HDMLP_OK) {
            const hdmlp_sample_view *v = hdmlp_batch_samples(batch);
            for (size_t i = 0; i < hdmlp_batch_size(batch); i++) {
                expect_fields(&spec, v[i].index, v[i].label, v[i].data, v[i].size);
                uint8_t *at = &seen[hdmlp_batch_epoch(batch) * spec.n_samples + v[i].index];
                cr_assert_eq(*at, 0);
                *at = 1;
                total++;
            }
            hdmlp_batch_release(batch);
        }
        cr_assert_eq(rc, HDMLP_END, "budget %" PRIu64 ": %s", budgets[b], hdmlp_last_error());
        cr_assert_eq(total, 2 * spec.n_samples);
        free(seen);
        hdmlp_loader_free(ld);
    }
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

/* Delivers the rest of the run (up to `stop` batches; 0: all) from ld into order[*n...],
 * checking every field record. */
static void drain(const testds_spec *spec, hdmlp_loader *ld, uint64_t *order, uint64_t *n,
                  uint64_t stop)
{
    hdmlp_batch *batch = NULL;
    uint64_t batches = 0;
    int rc;
    while ((stop == 0 || batches < stop) && (rc = hdmlp_loader_next(ld, &batch)) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(batch);
        for (size_t i = 0; i < hdmlp_batch_size(batch); i++) {
            expect_fields(spec, v[i].index, v[i].label, v[i].data, v[i].size);
            order[(*n)++] = hdmlp_batch_epoch(batch) * spec->n_samples + v[i].index;
        }
        hdmlp_batch_release(batch);
        batches++;
    }
    cr_assert(stop != 0 || rc == HDMLP_END, "%s", hdmlp_last_error());
}

/* Field records through the chunk tiers (a RAM cache and an SSD cache, read back by a second
 * run: the same order as the first, every sample once an epoch) and an exact resume (the
 * same samples, fields and order as one uninterrupted run). */
Test(loader_fields, fields_go_through_tiers_and_resume, .timeout = 120)
{
    const testds_spec spec = fields_spec(2000, 40);
    char dir[512], ssd[600];
    hdmlp_dataset *ds = make_fields(&spec, dir, sizeof(dir));
    snprintf(ssd, sizeof(ssd), "%.500s.ssd", dir);
    uint64_t *want = calloc(2 * spec.n_samples, sizeof(uint64_t));
    uint64_t *got = calloc(2 * spec.n_samples, sizeof(uint64_t));
    uint64_t *tiered = calloc(2 * spec.n_samples, sizeof(uint64_t));
    uint64_t n_want = 0, n_tiered = 0;
    for (int run = 0; run < 3; run++) { /* plain; RAM + SSD (filling); SSD again (reading) */
        hdmlp_config *cfg = new_config(300000, 16, 2);
        cr_assert_eq(hdmlp_config_set_memory_raise(cfg, 1), HDMLP_OK);
        if (run > 0) {
            cr_assert_eq(hdmlp_config_set_ram_cache(cfg, 100000), HDMLP_OK);
            cr_assert_eq(hdmlp_config_set_ssd_cache(cfg, ssd, 64u << 20), HDMLP_OK);
        }
        hdmlp_loader *ld = new_loader(ds, cfg);
        uint64_t n = 0;
        uint64_t *order = run == 0 ? want : run == 1 ? tiered : got;
        drain(&spec, ld, order, &n, 0);
        hdmlp_stats st;
        cr_assert_eq(hdmlp_loader_stats(ld, &st, sizeof(st)), HDMLP_OK);
        hdmlp_loader_free(ld);
        cr_assert_eq(n, 2 * spec.n_samples);
        uint8_t *seen = calloc(2 * spec.n_samples, 1);
        for (uint64_t i = 0; i < n; i++) {
            cr_assert_eq(seen[order[i]], 0, "run %d: a sample twice in an epoch", run);
            seen[order[i]] = 1;
        }
        free(seen);
        if (run == 0) {
            n_want = n;
        } else if (run == 1) {
            n_tiered = n;
        } else {
            cr_expect_gt(st.ssd_cache_bytes + st.ram_cache_bytes, 0, "no chunk from a tier");
            cr_assert(n == n_tiered && memcmp(got, tiered, n * sizeof(uint64_t)) == 0,
                      "the SSD cache's run has another order");
        }
    }
    /* Stop after 37 batches, save, resume in a new loader. */
    hdmlp_config *cfg = new_config(300000, 16, 2);
    cr_assert_eq(hdmlp_config_set_memory_raise(cfg, 1), HDMLP_OK);
    hdmlp_loader *ld = new_loader(ds, cfg);
    uint64_t n = 0;
    drain(&spec, ld, got, &n, 37);
    uint8_t state[HDMLP_STATE_MAX];
    size_t len = 0;
    cr_assert_eq(hdmlp_loader_save_state(ld, state, sizeof(state), &len), HDMLP_OK);
    hdmlp_loader_free(ld);
    hdmlp_config *cfg2 = new_config(300000, 16, 2);
    cr_assert_eq(hdmlp_config_set_memory_raise(cfg2, 1), HDMLP_OK);
    cr_assert_eq(hdmlp_config_set_resume(cfg2, state, len), HDMLP_OK);
    ld = new_loader(ds, cfg2);
    drain(&spec, ld, got, &n, 0);
    hdmlp_loader_free(ld);
    cr_assert(n == n_want && memcmp(got, want, n * sizeof(uint64_t)) == 0,
              "resumed: another order");
    free(want);
    free(got);
    free(tiered);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
    testds_rm_rf(ssd);
}

/* A flipped byte of a caption is found by verify and by reading the sample, naming the
 * field; the other samples read. */
Test(loader_fields, a_damaged_value_is_named_by_its_field)
{
    const testds_spec spec = fields_spec(64, 16);
    char dir[512];
    hdmlp_dataset *ds = make_fields(&spec, dir, sizeof(dir));
    hdmlp_dataset_close(ds);
    char path[600];
    snprintf(path, sizeof(path), "%s/segment-000000", dir);
    uint8_t *seg;
    size_t len;
    cr_assert_eq(testds_read_file(path, &seg, &len), 0);
    const char needle[] = "caption of sample 15";
    uint8_t *at = memmem(seg, len, needle, sizeof(needle) - 1);
    cr_assert_not_null(at);
    at[0] ^= 0x20;
    cr_assert_eq(testds_write_file(path, seg, len), 0);
    free(seg);
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK);
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "sample 15, field 2: checksum mismatch"), "%s",
              hdmlp_last_error());
    uint8_t buf[512];
    size_t size = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 15, buf, sizeof(buf), &size), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "field 2"), "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 14, buf, sizeof(buf), &size), HDMLP_OK);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
}

/* The image pipeline on field records decodes one field: the dataset's one image field, or
 * the one named. Without an image field, a field of another type, a field that is not
 * there, or a name on a dataset without fields, create fails naming it; a field of bytes
 * that are no images gives corrupt samples named by sample (the plumbing: the images proper
 * are tests/python/test_fields.py's). */
static int create_with_image_field(hdmlp_dataset *ds, const char *field)
{
    hdmlp_config *cfg = new_config(1u << 20, 16, 1);
    hdmlp_image_config *ic = NULL;
    cr_assert_eq(hdmlp_image_config_create(&ic), HDMLP_OK);
    cr_assert_eq(hdmlp_image_config_set_size(ic, 8, 8), HDMLP_OK);
    if (field != NULL) {
        cr_assert_eq(hdmlp_image_config_set_field(ic, field), HDMLP_OK);
    }
    cr_assert_eq(hdmlp_config_set_image(cfg, ic), HDMLP_OK);
    hdmlp_loader *ld = NULL;
    int rc = hdmlp_loader_create(ds, cfg, &ld);
    if (rc == HDMLP_OK) {
        hdmlp_batch *b = NULL;
        rc = hdmlp_loader_next(ld, &b);
        cr_assert_null(b);
        hdmlp_loader_free(ld);
    } else {
        cr_assert_null(ld);
    }
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    return rc;
}

Test(loader_fields, the_image_pipeline_decodes_the_field_named)
{
    const testds_spec spec = fields_spec(64, 16);
    char dir[512];
    hdmlp_dataset *ds = make_fields(&spec, dir, sizeof(dir));
    cr_assert_eq(create_with_image_field(ds, NULL), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "0 fields of type image"), "%s", hdmlp_last_error());
    cr_assert_eq(create_with_image_field(ds, "caption"), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "image field caption: of type text"), "%s",
              hdmlp_last_error());
    cr_assert_eq(create_with_image_field(ds, "boxes"), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "image field boxes: the dataset has no such field"),
              "%s", hdmlp_last_error());
    cr_assert_eq(create_with_image_field(ds, "data"), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "image: sample "), "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
    testds_spec plain = fields_spec(64, 16);
    hdmlp_dataset *pds = NULL;
    char pdir[600];
    snprintf(pdir, sizeof(pdir), "%.500s.plain", dir);
    cr_assert_eq(testds_write(pdir, &plain), HDMLP_OK);
    cr_assert_eq(hdmlp_dataset_open(pdir, &pds), HDMLP_OK);
    cr_assert_eq(create_with_image_field(pds, "data"), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "not field records"), "%s", hdmlp_last_error());
    hdmlp_dataset_close(pds);
    testds_rm_rf(pdir);
}
