/* Sample tables (format.h: fmt_table, fmt_tables; loader_dataset.h: ds_table) of version-1
 * datasets (version 2's: test_dataset_v2.c): chunk c's records as the dataset's table source
 * gives them, against the index's own records; the last, short chunk; chunk numbers and
 * samples out of range. Same test_dataset binary. */
#include "loader_dataset.h"
#include "support/dataset_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The same record, field by field (fmt_sample has padding, which memcmp would compare). */
static bool same_sample(const fmt_sample *a, const fmt_sample *b)
{
    return a->offset == b->offset && a->stored_len == b->stored_len &&
           a->raw_len == b->raw_len && a->checksum == b->checksum && a->key_off == b->key_off &&
           a->key_len == b->key_len && a->codec == b->codec && a->label == b->label &&
           a->sum32 == b->sum32;
}

/* Every chunk's table of spec's dataset equals the index's records, slot by slot. */
static void check_tables(const testds_spec *spec)
{
    write_ds(spec);
    hdmlp_dataset *ds = open_ok();
    const fmt_index *ix = &ds->ix;
    const uint32_t k = spec->chunk_size;
    const uint64_t n = spec->n_samples;
    const uint64_t c_count = (n + k - 1) / k;
    cr_assert_eq(ix->h.n_chunks, c_count);
    cr_assert_eq(ds->tables.scratch, 0, "version 1 tables are views: no buffer needed");
    uint64_t seen = 0;
    for (uint64_t c = 0; c < c_count; c++) {
        fmt_table t;
        memset(&t, 0xa5, sizeof(t));
        cr_assert_eq(ds_table(ds, c, NULL, 0, &t), HDMLP_OK, "%s", hdmlp_last_error());
        const uint32_t want = c + 1 < c_count ? k : (uint32_t)(n - (c_count - 1) * k);
        cr_assert_eq(t.n, want, "chunk %llu of %llu: %u records, want %u",
                     (unsigned long long)c, (unsigned long long)c_count, t.n, want);
        cr_assert_eq(t.chunk, c);
        cr_assert_eq(t.first, c * k);
        cr_assert_eq(t.rec, ix->samples + c * k * FMT_SAMPLE_REC_LEN, "a view into the index");
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        cr_assert_eq(t.n, ch.n_samples);
        for (uint32_t j = 0; j < t.n; j++) {
            fmt_sample a, b, r;
            fmt_table_sample(&t, j, &a);
            fmt_index_sample(ix, c * k + j, &b);
            cr_assert(same_sample(&a, &b), "chunk %llu slot %u", (unsigned long long)c, j);
            cr_assert_eq(fmt_table_offset(&t, j), b.offset);
            cr_assert_eq(fmt_table_stored_len(&t, j), b.stored_len);
            cr_assert_eq(fmt_table_raw_len(&t, j), b.raw_len);
            cr_assert_eq(b.raw_len, testds_size(spec, c * k + j));
            cr_assert_eq(ds_sample_record(ds, c * k + j, &r), HDMLP_OK);
            cr_assert(same_sample(&r, &b));
            seen++;
        }
    }
    cr_assert_eq(seen, n, "the tables cover every sample once");
    hdmlp_dataset_close(ds);
}

Test(dataset, tables_equal_index_records_last_chunk_short)
{
    const testds_spec spec = {.n_samples = 30,
                              .chunk_size = 4,
                              .seed = 11,
                              .min_size = 0,
                              .max_size = 90,
                              .compress = 1,
                              .n_labels = 3,
                              .version = 1};
    check_tables(&spec); /* 8 chunks, the last of 2 */
}

Test(dataset, tables_equal_index_records_last_chunk_full)
{
    const testds_spec spec = {.n_samples = 32,
                              .chunk_size = 4,
                              .chunks_per_segment = 3,
                              .seed = 12,
                              .max_size = 40,
                              .n_labels = 1,
                              .version = 1};
    check_tables(&spec);
}

Test(dataset, tables_of_one_sample_chunks)
{
    const testds_spec spec = {.n_samples = 5,
                              .chunk_size = 1,
                              .seed = 13,
                              .max_size = 20,
                              .n_labels = 1,
                              .version = 1};
    check_tables(&spec);
}

Test(dataset, tables_of_one_chunk_shorter_than_k)
{
    const testds_spec spec = {.n_samples = 7,
                              .chunk_size = 64,
                              .seed = 14,
                              .max_size = 20,
                              .n_labels = 1,
                              .version = 1};
    check_tables(&spec);
}

Test(dataset, tables_refuse_chunks_and_samples_out_of_range)
{
    const testds_spec spec = {.n_samples = 30,
                              .chunk_size = 4,
                              .seed = 15,
                              .max_size = 30,
                              .n_labels = 1,
                              .version = 1};
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    fmt_table t;
    cr_assert_eq(ds_table(ds, 7, NULL, 0, &t), HDMLP_OK);
    const uint64_t bad[] = {8, 9, UINT64_MAX / 4, UINT64_MAX};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(ds_table(ds, bad[i], NULL, 0, &t), HDMLP_E_RANGE);
        cr_assert(strstr(hdmlp_last_error(), "out of range (8 chunks)"), "%s",
                  hdmlp_last_error());
        cr_assert_eq(fmt_index_table(&ds->ix, bad[i], &t), HDMLP_E_RANGE);
    }
    fmt_sample s;
    cr_assert_eq(ds_sample_record(ds, 29, &s), HDMLP_OK);
    cr_assert_eq(ds_sample_record(ds, 30, &s), HDMLP_E_RANGE, "slot 2 of the short last chunk");
    cr_assert_eq(ds_sample_record(ds, 32, &s), HDMLP_E_RANGE);
    cr_assert_eq(ds_sample_record(ds, UINT64_MAX, &s), HDMLP_E_RANGE);
    hdmlp_dataset_close(ds);
}

static int cmp_desc(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

Test(dataset, tables_sum_of_the_largest_raw_sizes)
{
    const testds_spec spec = {.n_samples = 200,
                              .chunk_size = 16,
                              .seed = 16,
                              .min_size = 0,
                              .max_size = 500,
                              .n_labels = 1,
                              .version = 1};
    write_ds(&spec);
    hdmlp_dataset *ds = open_ok();
    uint64_t sizes[200];
    for (uint64_t i = 0; i < 200; i++) {
        sizes[i] = testds_size(&spec, i);
    }
    qsort(sizes, 200, sizeof(uint64_t), cmp_desc);
    const uint64_t ms[] = {1, 2, 3, 17, 199, 200, 201, 100000};
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        uint64_t want = 0;
        for (uint64_t j = 0; j < ms[i] && j < 200; j++) {
            want += sizes[j];
        }
        cr_assert_eq(ds->tables.raw_top_sum(ds->tables.ctx, ms[i]), want, "m = %llu",
                     (unsigned long long)ms[i]);
    }
    hdmlp_dataset_close(ds);
}
