/* Version-2 datasets (format 2.0: sample tables in DIR/tables, key blocks in DIR/keys) read
 * through the dataset: every sample's bytes, sample_info's labels and keys, find_key,
 * verify, the table source (ds_table: records, range, raw_top_sum), keys held until close,
 * threads sharing one handle, and a loader draining epochs; datasets by tests/support/
 * testds.c (as hdmlp-pack writes them). Part of the test_dataset binary; corruptions:
 * test_dataset_v2_corrupt.c. */
#include "loader_dataset.h"
#include "support/dataset_fixture.h"
#include "support/objstore_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes spec into g_dir as a version-2 dataset (its parameters logged) and opens it. */
static hdmlp_dataset *write_open_v2(const testds_spec *spec)
{
    cr_log_info("version-2 dataset seed %llu: N=%llu K=%u per-segment=%u sizes %u..%u "
                "compress=%d dict=%d",
                (unsigned long long)spec->seed, (unsigned long long)spec->n_samples,
                spec->chunk_size, spec->chunks_per_segment, spec->min_size, spec->max_size,
                spec->compress, spec->dict);
    testds_spec v2 = *spec;
    v2.version = 2;
    cr_assert_eq(testds_write(g_dir, &v2), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds = open_ok();
    cr_assert_eq(ds->ix.h.major, 2);
    cr_assert_gt(ds->tables.scratch, 0, "version-2 tables are read into a buffer");
    return ds;
}

/* sample_info of every sample: label, sizes, codec, key; find_key of every key. */
static void check_infos(hdmlp_dataset *ds, const testds_spec *spec)
{
    for (uint64_t i = 0; i < spec->n_samples; i++) {
        hdmlp_sample_info in;
        memset(&in, 0xa5, sizeof(in));
        cr_assert_eq(hdmlp_dataset_sample_info(ds, i, &in), HDMLP_OK, "sample %llu: %s",
                     (unsigned long long)i, hdmlp_last_error());
        char key[32];
        const int klen = snprintf(key, sizeof(key), "sample-%llu", (unsigned long long)i);
        cr_assert_eq(in.index, i);
        cr_assert_eq(in.chunk, i / spec->chunk_size);
        cr_assert_eq(in.slot, i % spec->chunk_size);
        cr_assert_eq(in.label, i % spec->n_labels);
        cr_assert_eq(in.raw_size, testds_size(spec, i));
        cr_assert_eq(in.codec, spec->compress ? (spec->dict ? 2u : 1u) : 0u, "sample %llu",
                     (unsigned long long)i);
        if (!spec->compress) {
            cr_assert_eq(in.stored_size, in.raw_size);
        }
        cr_assert_eq(in.key_size, (uint32_t)klen);
        cr_assert_eq(memcmp(in.key, key, (size_t)klen), 0, "sample %llu: key %.*s",
                     (unsigned long long)i, (int)in.key_size, in.key);
        uint64_t idx = UINT64_MAX;
        cr_assert_eq(hdmlp_dataset_find_key(ds, key, (size_t)klen, &idx), HDMLP_OK, "%s: %s",
                     key, hdmlp_last_error());
        cr_assert_eq(idx, i);
    }
    hdmlp_sample_info in;
    cr_assert_eq(hdmlp_dataset_sample_info(ds, spec->n_samples, &in), HDMLP_E_RANGE);
}

static void count_progress(void *arg, uint64_t done, uint64_t total)
{
    uint64_t *calls = arg;
    cr_assert_eq(done, calls[0] + 1);
    calls[0]++;
    calls[1] = total;
}

/* Every read path of a version-2 dataset against what was written. */
static void check_v2(const testds_spec *spec)
{
    hdmlp_dataset *ds = write_open_v2(spec);
    cr_assert_eq(hdmlp_dataset_sample_count(ds), spec->n_samples);
    cr_assert_eq(hdmlp_dataset_label_count(ds), spec->n_labels);
    check_all_samples(ds, spec);
    check_infos(ds, spec);
    uint64_t calls[2] = {0, 0};
    cr_assert_eq(hdmlp_dataset_verify(ds, count_progress, calls), HDMLP_OK, "%s",
                 hdmlp_last_error());
    cr_assert_eq(calls[0], hdmlp_dataset_chunk_count(ds));
    cr_assert_eq(calls[1], hdmlp_dataset_chunk_count(ds));
    hdmlp_dataset_close(ds);
}

Test(dataset, v2_reads_raw_samples_last_chunk_short)
{
    const testds_spec spec = {.n_samples = 30,
                              .chunk_size = 4,
                              .chunks_per_segment = 3,
                              .seed = 201,
                              .min_size = 0,
                              .max_size = 300,
                              .n_labels = 3};
    check_v2(&spec); /* 8 chunks in 3 segments, the last chunk of 2, empty samples */
}

Test(dataset, v2_reads_zstd_samples)
{
    const testds_spec spec = {.n_samples = 64,
                              .chunk_size = 8,
                              .seed = 202,
                              .min_size = 50,
                              .max_size = 2000,
                              .compress = 1,
                              .n_labels = 5};
    check_v2(&spec);
}

Test(dataset, v2_reads_dictionary_samples)
{
    const testds_spec spec = {.n_samples = 40,
                              .chunk_size = 16,
                              .chunks_per_segment = 1,
                              .seed = 203,
                              .min_size = 0,
                              .max_size = 700,
                              .compress = 1,
                              .dict = 1,
                              .n_labels = 2};
    check_v2(&spec);
}

Test(dataset, v2_reads_one_sample_chunks_and_one_short_chunk)
{
    const testds_spec one = {
        .n_samples = 5, .chunk_size = 1, .seed = 204, .max_size = 20, .n_labels = 1};
    check_v2(&one);
    const testds_spec short_one = {
        .n_samples = 7, .chunk_size = 64, .seed = 205, .max_size = 20, .n_labels = 4};
    check_v2(&short_one);
}

Test(dataset, v2_find_key_misses)
{
    const testds_spec spec = {
        .n_samples = 100, .chunk_size = 16, .seed = 206, .max_size = 20, .n_labels = 2};
    hdmlp_dataset *ds = write_open_v2(&spec);
    uint64_t idx = 0;
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-100", 10, &idx), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "sample-100"), "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-", 7, &idx), HDMLP_E_NOTFOUND,
                 "a prefix is not a match");
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-41\0", 10, &idx), HDMLP_E_NOTFOUND);
    cr_assert_eq(hdmlp_dataset_find_key(ds, "", 0, &idx), HDMLP_E_NOTFOUND);
    cr_assert_eq(hdmlp_dataset_find_key(ds, NULL, 3, &idx), HDMLP_E_INVAL);
    /* Out of order: the chunk's key cursor restarts. */
    hdmlp_sample_info a, b;
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 37, &a), HDMLP_OK);
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 33, &b), HDMLP_OK);
    cr_assert_eq(memcmp(a.key, "sample-37", 9), 0);
    cr_assert_eq(memcmp(b.key, "sample-33", 9), 0);
    hdmlp_dataset_close(ds);
}

/* A key handed out stays valid (and the same bytes) while the dataset is open, whatever is
 * read in between: the keys file is held once. */
Test(dataset, v2_keys_stay_valid_until_close)
{
    const testds_spec spec = {
        .n_samples = 90, .chunk_size = 8, .seed = 207, .max_size = 64, .n_labels = 3};
    hdmlp_dataset *ds = write_open_v2(&spec);
    hdmlp_sample_info first;
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 3, &first), HDMLP_OK, "%s", hdmlp_last_error());
    check_all_samples(ds, &spec);
    check_infos(ds, &spec);
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_sample_info again;
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 3, &again), HDMLP_OK);
    cr_assert_eq(again.key, first.key, "the same bytes, held once");
    cr_assert_eq(first.key_size, 8);
    cr_assert_eq(memcmp(first.key, "sample-3", 8), 0);
    hdmlp_dataset_close(ds);
}

/* ds_table: chunk c's expanded records against the chunk records and the samples; range;
 * a buffer too small; raw_top_sum from the chunk records. */
Test(dataset, v2_tables_expand_chunk_records)
{
    const testds_spec spec = {.n_samples = 30,
                              .chunk_size = 4,
                              .seed = 208,
                              .min_size = 0,
                              .max_size = 90,
                              .compress = 1,
                              .n_labels = 3};
    hdmlp_dataset *ds = write_open_v2(&spec);
    const fmt_index *ix = &ds->ix;
    cr_assert_eq(ds->tables.scratch, fmt_table2_scratch(ix));
    cr_assert_null(ds_tables_mapped(ds).drop,
                   "tables under FMT_TABLE_MAP_MIN are read, not mapped");
    uint8_t *buf = malloc(ds->tables.scratch);
    uint64_t seen = 0;
    for (uint64_t c = 0; c < ix->h.n_chunks; c++) {
        fmt_table t;
        cr_assert_eq(ds_table(ds, c, buf, ds->tables.scratch, &t), HDMLP_OK, "%s",
                     hdmlp_last_error());
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        cr_assert_eq(t.chunk, c);
        cr_assert_eq(t.first, c * 4);
        cr_assert_eq(t.n, ch.n_samples);
        cr_assert_eq(t.n, c + 1 < ix->h.n_chunks ? 4u : 2u);
        uint64_t off = FMT_CHUNK_HEADER_LEN;
        for (uint32_t j = 0; j < t.n; j++) {
            fmt_sample s, r;
            fmt_table_sample(&t, j, &s);
            cr_assert_eq(s.offset, off, "chunk %llu slot %u", (unsigned long long)c, j);
            cr_assert_eq(s.raw_len, testds_size(&spec, t.first + j));
            cr_assert_eq(s.label, (t.first + j) % 3);
            cr_assert_eq(s.sum32, 1, "version 2's checksums are 32-bit");
            cr_assert_eq(s.key_len, 0, "keys come from DIR/keys");
            cr_assert_eq(ds_sample_record(ds, t.first + j, &r), HDMLP_OK);
            cr_assert(r.offset == s.offset && r.stored_len == s.stored_len &&
                      r.raw_len == s.raw_len && r.checksum == s.checksum &&
                      r.codec == s.codec && r.label == s.label && r.sum32 == s.sum32);
            off += s.stored_len;
            seen++;
        }
        cr_assert_eq(off, ch.length, "the samples fill the chunk");
    }
    cr_assert_eq(seen, spec.n_samples);
    fmt_table t;
    cr_assert_eq(ds_table(ds, 8, buf, ds->tables.scratch, &t), HDMLP_E_RANGE);
    cr_assert(strstr(hdmlp_last_error(), "out of range (8 chunks)"), "%s", hdmlp_last_error());
    cr_assert_eq(ds_table(ds, UINT64_MAX, buf, ds->tables.scratch, &t), HDMLP_E_RANGE);
    cr_assert_eq(ds_table(ds, 0, NULL, 0, &t), HDMLP_E_INVAL, "a version-2 get needs a buffer");
    cr_assert_eq(ds_table(ds, 0, buf, ds->tables.scratch - 1, &t), HDMLP_E_INVAL);
    fmt_sample s;
    cr_assert_eq(ds_sample_record(ds, 30, &s), HDMLP_E_RANGE);
    const uint64_t ms[] = {1, 3, 17, 29, 30, 1000};
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        cr_assert_eq(ds->tables.raw_top_sum(ds->tables.ctx, ms[i]),
                     fmt_index2_raw_top_sum(ix, ms[i]));
    }
    cr_assert_eq(ds->tables.raw_top_sum(ds->tables.ctx, 30), hdmlp_dataset_raw_bytes(ds));
    free(buf);
    hdmlp_dataset_close(ds);
}

/* ---- threads sharing one handle ---------------------------------------------------------- */

typedef struct reader_arg {
    hdmlp_dataset *ds;
    const testds_spec *spec;
    uint64_t start;
    int failures;
    char error[256]; /* the first failure's detail */
} reader_arg;

static void *reader(void *arg)
{
    reader_arg *a = arg;
    const uint64_t n = a->spec->n_samples;
    uint8_t *want = malloc(a->spec->max_size + 1), *got = malloc(a->spec->max_size + 1);
    for (uint64_t k = 0; k < 2 * n; k++) {
        const uint64_t i = (a->start + k * 7) % n;
        hdmlp_sample_info in;
        char key[32];
        const int klen = snprintf(key, sizeof(key), "sample-%llu", (unsigned long long)i);
        size_t size = 0;
        if (hdmlp_dataset_sample_info(a->ds, i, &in) != HDMLP_OK ||
            in.key_size != (uint32_t)klen || memcmp(in.key, key, (size_t)klen) != 0 ||
            in.label != i % a->spec->n_labels ||
            hdmlp_dataset_read_sample(a->ds, i, got, a->spec->max_size + 1, &size) !=
                HDMLP_OK ||
            size != testds_size(a->spec, i)) {
            if (a->failures++ == 0) {
                snprintf(a->error, sizeof(a->error), "sample %llu: %s", (unsigned long long)i,
                         hdmlp_last_error());
            }
            continue;
        }
        testds_fill(i, a->spec->seed, want, size);
        a->failures += memcmp(want, got, size) != 0;
    }
    free(want);
    free(got);
    return NULL;
}

/* Four threads read samples, infos and keys from one handle at once, the keys file loaded
 * by whichever asks first. */
/* Mappings of DIR/tables in this process (lines of /proc/self/maps naming it). */
static int tables_mappings(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, path) != NULL;
    }
    fclose(f);
    return n;
}

/* The planning source (ds_tables_mapped): the same records as the read one, each buffer
 * mapping only the table it views (a new get unmaps the last, drop unmaps it), and a
 * damaged table's error naming the file and chunk. */
Test(dataset, v2_mapped_tables_match_and_unmap)
{
    /* 2,048 samples a chunk of 2 fields (32 bytes a sample): tables of 64 KiB, mapped. */
    const testds_spec spec = {.n_samples = 5000,
                              .chunk_size = 2048,
                              .seed = 211,
                              .min_size = 0,
                              .max_size = 40,
                              .compress = 1,
                              .n_labels = 4};
    hdmlp_dataset *ds = write_open_v2(&spec);
    const fmt_index *ix = &ds->ix;
    const fmt_tables m = ds_tables_mapped(ds);
    cr_assert_not_null(m.drop, "a local version-2 dataset's planning maps its tables");
    char path[PATH_CAP];
    path_of(path, FMT_TABLES_NAME);
    uint8_t *a = calloc(1, m.scratch), *b = calloc(1, m.scratch);
    uint8_t *rd = malloc(ds->tables.scratch);
    for (uint64_t c = 0; c < ix->h.n_chunks; c++) {
        fmt_table t, r;
        cr_assert_eq(fmt_tables_get(&m, c, c % 2 ? a : b, m.scratch, &t), HDMLP_OK, "%s",
                     hdmlp_last_error());
        cr_assert_eq(ds_table(ds, c, rd, ds->tables.scratch, &r), HDMLP_OK);
        cr_assert_eq(t.n, r.n);
        for (uint32_t j = 0; j < t.n; j++) {
            uint8_t x[FMT_SAMPLE_REC_LEN], y[FMT_SAMPLE_REC_LEN];
            cr_assert_eq(memcmp(fmt_table_record(&t, j, x), fmt_table_record(&r, j, y),
                                FMT_SAMPLE_REC_LEN),
                         0, "chunk %llu slot %u", (unsigned long long)c, j);
        }
        cr_assert_eq(tables_mappings(path), c == 0 ? 1 : 2, "chunk %llu",
                     (unsigned long long)c);
    }
    m.drop(m.ctx, a);
    cr_assert_eq(tables_mappings(path), 1);
    m.drop(m.ctx, a); /* twice: nothing left to drop */
    m.drop(m.ctx, b);
    cr_assert_eq(tables_mappings(path), 0);
    fmt_table t;
    cr_assert_eq(fmt_tables_get(&m, ix->h.n_chunks, a, m.scratch, &t), HDMLP_E_RANGE);
    cr_assert_eq(fmt_tables_get(&m, 0, a, m.scratch - 1, &t), HDMLP_E_INVAL);
    free(rd);
    fmt_chunk ch;
    fmt_index_chunk(ix, 1, &ch);
    hdmlp_dataset_close(ds);

    /* A damaged table (a byte of chunk 1's) fails its get, naming the file and chunk. */
    uint8_t *file;
    size_t len;
    cr_assert_eq(testds_read_file(path, &file, &len), 0, "%s", path);
    file[ch.table_offset + 5] ^= 0x20;
    cr_assert_eq(testds_write_file(path, file, len), 0);
    free(file);
    ds = open_ok();
    const fmt_tables m2 = ds_tables_mapped(ds);
    cr_assert_eq(fmt_tables_get(&m2, 1, a, m2.scratch, &t), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), path) != NULL &&
                  strstr(hdmlp_last_error(), "sample table of chunk 1: checksum mismatch"),
              "%s", hdmlp_last_error());
    cr_assert_eq(fmt_tables_get(&m2, 0, a, m2.scratch, &t), HDMLP_OK, "%s", hdmlp_last_error());
    m2.drop(m2.ctx, a);
    cr_assert_eq(tables_mappings(path), 0);
    free(a);
    free(b);
    hdmlp_dataset_close(ds);
}

Test(dataset, v2_threads_share_one_handle, .timeout = 60)
{
    const testds_spec spec = {.n_samples = 200,
                              .chunk_size = 8,
                              .chunks_per_segment = 5,
                              .seed = 209,
                              .min_size = 0,
                              .max_size = 400,
                              .compress = 1,
                              .n_labels = 7};
    hdmlp_dataset *ds = write_open_v2(&spec);
    pthread_t th[4];
    reader_arg args[4];
    for (int t = 0; t < 4; t++) {
        args[t] = (reader_arg){.ds = ds, .spec = &spec, .start = (uint64_t)t * 51};
        cr_assert_eq(pthread_create(&th[t], NULL, reader, &args[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        cr_assert_eq(args[t].failures, 0, "thread %d: %d failures, the first %s", t,
                     args[t].failures, args[t].error);
    }
    hdmlp_dataset_close(ds);
}

/* A loader over a version-2 dataset: two epochs, every sample once each, the bytes right,
 * its memory half the dataset's (objstore_drain's checks). */
Test(dataset, v2_loader_drains_epochs, .timeout = 120)
{
    static const testds_spec spec = {.n_samples = 300,
                                     .chunk_size = 8,
                                     .chunks_per_segment = 6,
                                     .seed = 210,
                                     .min_size = 100,
                                     .max_size = 3000,
                                     .compress = 1,
                                     .n_labels = 4};
    hdmlp_dataset *ds = write_open_v2(&spec);
    objstore_cur = &spec;
    objstore_mem_div = 2;
    free(objstore_drain(ds, HDMLP_REFILL_AUTO, 2, NULL));
    objstore_cur = &objstore_spec;
    objstore_mem_div = 4;
    hdmlp_dataset_close(ds);
}

/* ---- version 1 unchanged ----------------------------------------------------------------- */

Test(dataset, v1_reads_as_before)
{
    const testds_spec spec = {.n_samples = 50,
                              .chunk_size = 8,
                              .seed = 211,
                              .min_size = 0,
                              .max_size = 200,
                              .compress = 1,
                              .n_labels = 3,
                              .version = 1};
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    cr_assert_eq(ds->ix.h.major, 1);
    cr_assert_eq(ds->tables.scratch, 0, "version 1: views into the index");
    check_all_samples(ds, &spec);
    check_infos(ds, &spec);
    hdmlp_sample_info in;
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 9, &in), HDMLP_OK);
    fmt_sample s;
    fmt_index_sample(&ds->ix, 9, &s);
    cr_assert_eq((const uint8_t *)in.key, ds->ix.strings + s.key_off, "a key in the index");
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
}
