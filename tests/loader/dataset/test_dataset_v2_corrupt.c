/* Version-2 datasets damaged on disk: a flipped byte in DIR/tables (verify and reading that
 * chunk fail, other chunks read), in DIR/keys (find_key, sample_info and verify fail, the
 * samples read), tables and keys files truncated, grown or missing (open fails), and
 * values that do not fit their field. Each failure names the file and the chunk. Part of the
 * test_dataset binary. */
#include "loader_dataset.h"
#include "support/dataset_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const testds_spec spec2 = {.n_samples = 40,
                                  .chunk_size = 8,
                                  .chunks_per_segment = 2,
                                  .seed = 301,
                                  .min_size = 10,
                                  .max_size = 120,
                                  .compress = 0,
                                  .n_labels = 3};

/* Chunk c's record of the dataset in g_dir. */
static fmt_chunk chunk_of(uint64_t c)
{
    hdmlp_dataset *ds = open_ok();
    fmt_chunk ch;
    fmt_index_chunk(&ds->ix, c, &ch);
    hdmlp_dataset_close(ds);
    return ch;
}

/* XORs byte `at` of g_dir/name with mask. */
static void flip(const char *name, uint64_t at, uint8_t mask)
{
    char path[PATH_CAP];
    path_of(path, name);
    uint8_t *buf;
    size_t len;
    cr_assert_eq(testds_read_file(path, &buf, &len), 0, "%s", path);
    cr_assert_lt(at, len);
    buf[at] ^= mask;
    cr_assert_eq(testds_write_file(path, buf, len), 0);
    free(buf);
}

/* g_dir/name resized to len bytes (zeros when grown). */
static void resize(const char *name, off_t len)
{
    char path[PATH_CAP];
    path_of(path, name);
    cr_assert_eq(truncate(path, len), 0, "%s", path);
}

static void assert_error_has(const char *a, const char *b)
{
    cr_assert(strstr(hdmlp_last_error(), a) != NULL, "\"%s\" not in: %s", a,
              hdmlp_last_error());
    if (b != NULL) {
        cr_assert(strstr(hdmlp_last_error(), b) != NULL, "\"%s\" not in: %s", b,
                  hdmlp_last_error());
    }
}

Test(dataset, v2_table_byte_flip_fails_that_chunk)
{
    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    const fmt_chunk ch = chunk_of(2);
    flip(FMT_TABLES_NAME, ch.table_offset + 16 + 3, 0x10); /* sample 16's label value */
    hdmlp_dataset *ds = open_ok();                         /* tables are checked when read */
    char path[PATH_CAP];
    path_of(path, FMT_TABLES_NAME);
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_E_CORRUPT);
    assert_error_has(path, "sample table of chunk 2: checksum mismatch");
    uint8_t buf[200];
    size_t size = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 17, buf, sizeof(buf), &size), HDMLP_E_CORRUPT);
    assert_error_has(path, "chunk 2");
    hdmlp_sample_info in;
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 16, &in), HDMLP_E_CORRUPT);
    assert_error_has(path, "chunk 2");
    /* The other chunks read. */
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 15, buf, sizeof(buf), &size), HDMLP_OK, "%s",
                 hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 24, buf, sizeof(buf), &size), HDMLP_OK);
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 39, &in), HDMLP_OK);
    uint64_t idx = 0;
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-17", 9, &idx), HDMLP_OK,
                 "keys are not in the tables");
    cr_assert_eq(idx, 17);
    hdmlp_dataset_close(ds);
}

/* Every byte of one chunk's table, flipped, is caught by verify (its checksum). */
Test(dataset, v2_table_every_byte_flip_caught_by_verify)
{
    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    const fmt_chunk ch = chunk_of(4);
    const uint64_t len = ch.n_samples * 2ull * FMT_VALUE_REC_LEN;
    for (uint64_t b = 0; b < len; b++) {
        flip(FMT_TABLES_NAME, ch.table_offset + b, 0x01);
        hdmlp_dataset *ds = open_ok();
        cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_E_CORRUPT, "byte %llu",
                     (unsigned long long)b);
        assert_error_has("sample table of chunk 4", NULL);
        hdmlp_dataset_close(ds);
        flip(FMT_TABLES_NAME, ch.table_offset + b, 0x01);
    }
    hdmlp_dataset *ds = open_ok();
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
}

Test(dataset, v2_key_byte_flip_fails_keys_not_samples)
{
    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    const fmt_chunk ch = chunk_of(1);
    flip(FMT_KEYS_NAME, ch.keys_offset + 4u * ch.n_samples + 2, 0x20); /* in sample 8's key */
    hdmlp_dataset *ds = open_ok();
    char path[PATH_CAP];
    path_of(path, FMT_KEYS_NAME);
    uint64_t idx = 0;
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-3", 8, &idx), HDMLP_OK, "chunk 0 is fine");
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-30", 9, &idx), HDMLP_E_CORRUPT,
                 "the walk meets chunk 1's block");
    assert_error_has(path, "key block of chunk 1: checksum mismatch");
    hdmlp_sample_info in;
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 9, &in), HDMLP_E_CORRUPT);
    assert_error_has(path, "key block of chunk 1");
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 17, &in), HDMLP_OK);
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_E_CORRUPT);
    assert_error_has(path, "key block of chunk 1");
    uint8_t buf[200];
    size_t size = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 9, buf, sizeof(buf), &size), HDMLP_OK,
                 "samples do not need keys: %s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
}

/* A key length changed and the block's checksum made to match again: the lengths no longer
 * add up to the block. */
Test(dataset, v2_key_lengths_must_add_up)
{
    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    const fmt_chunk ch = chunk_of(3);
    flip(FMT_KEYS_NAME, ch.keys_offset, 0x01); /* sample 24's key length: 9 -> 8 */
    char path[PATH_CAP];
    path_of(path, FMT_KEYS_NAME);
    uint8_t *keys;
    size_t klen;
    cr_assert_eq(testds_read_file(path, &keys, &klen), 0);
    const uint64_t sum = fmt_checksum(keys + ch.keys_offset, (size_t)ch.keys_length);
    free(keys);
    /* The new checksum into chunk 3's record (offset 64 of the 96-byte record). */
    hdmlp_dataset *ds = open_ok();
    const uint64_t rec = (uint64_t)(ds->ix.chunks - ds->ix.base) + 3 * FMT_CHUNK_REC2_LEN + 64;
    hdmlp_dataset_close(ds);
    path_of(path, FMT_INDEX_NAME);
    uint8_t *ib;
    size_t ilen;
    cr_assert_eq(testds_read_file(path, &ib, &ilen), 0);
    fmt_st64(ib + rec, sum);
    testds_reseal_index(ib, ilen);
    cr_assert_eq(testds_write_file(path, ib, ilen), 0);
    free(ib);
    ds = open_ok();
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_E_CORRUPT);
    assert_error_has("key block of chunk 3: lengths add up to", NULL);
    hdmlp_dataset_close(ds);
}

Test(dataset, v2_tables_file_truncated_or_grown)
{
    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    const off_t len = FMT_FILE_HEADER_LEN + 40 * 2 * FMT_VALUE_REC_LEN;
    char path[PATH_CAP], want[PATH_CAP + 100];
    path_of(path, FMT_TABLES_NAME);
    resize(FMT_TABLES_NAME, len - 1);
    hdmlp_dataset *ds = (hdmlp_dataset *)1;
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_CORRUPT);
    cr_assert_null(ds);
    snprintf(want, sizeof(want),
             "%s: tables file has %lld bytes, the index says %lld (truncated)", path,
             (long long)len - 1, (long long)len);
    assert_error_has(want, NULL);
    resize(FMT_TABLES_NAME, len + 8);
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_CORRUPT);
    assert_error_has(path, "(wrong file)");
    resize(FMT_TABLES_NAME, 0);
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_CORRUPT);
    assert_error_has(path, "has 0 bytes");
}

/* A tables or keys file of the right size but another dataset's (its header's id), or with
 * no header: named at open (tables) or at the first key (keys). */
Test(dataset, v2_tables_or_keys_of_another_dataset)
{
    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    char path[PATH_CAP];
    uint8_t hdr[FMT_FILE_HEADER_LEN];
    path_of(path, FMT_TABLES_NAME);
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fmt_file_header_encode(hdr, FMT_TABLES_MAGIC, testds_dataset_id(spec2.seed) + 1);
    cr_assert_eq(fwrite(hdr, 1, sizeof(hdr), f), sizeof(hdr));
    fclose(f);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_CORRUPT);
    assert_error_has(path, "a file of another dataset");
    f = fopen(path, "r+b");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite("NOTMAGIC", 1, 8, f), 8);
    fclose(f);
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_CORRUPT);
    assert_error_has(path, "no HDMLPTBL header");

    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    path_of(path, FMT_KEYS_NAME);
    f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fmt_file_header_encode(hdr, FMT_KEYS_MAGIC, testds_dataset_id(spec2.seed) + 1);
    cr_assert_eq(fwrite(hdr, 1, sizeof(hdr), f), sizeof(hdr));
    fclose(f);
    ds = open_ok();
    hdmlp_sample_info info;
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 3, &info), HDMLP_E_CORRUPT);
    assert_error_has(path, "a file of another dataset");
    hdmlp_dataset_close(ds);
}

Test(dataset, v2_keys_file_truncated)
{
    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    char path[PATH_CAP];
    path_of(path, FMT_KEYS_NAME);
    resize(FMT_KEYS_NAME, 100);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_CORRUPT);
    assert_error_has(path, "keys file has 100 bytes");
    cr_assert_null(ds);
}

Test(dataset, v2_missing_tables_or_keys_file)
{
    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    char path[PATH_CAP];
    path_of(path, FMT_KEYS_NAME);
    cr_assert_eq(unlink(path), 0);
    hdmlp_dataset *ds = (hdmlp_dataset *)1;
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_NOTFOUND);
    cr_assert_null(ds);
    assert_error_has(path, "keys file missing");
    path_of(path, FMT_TABLES_NAME);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(hdmlp_dataset_open(g_dir, &ds), HDMLP_E_NOTFOUND);
    assert_error_has(path, "tables file missing");
}

/* The keys file replaced after open (same size) is caught when first used: it is read then,
 * and each block checked before its first use. */
Test(dataset, v2_keys_checked_on_first_use)
{
    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds = open_ok();
    const fmt_chunk ch = chunk_of(0);
    flip(FMT_KEYS_NAME, ch.keys_offset + 4u * ch.n_samples, 0x01);
    hdmlp_sample_info in;
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 0, &in), HDMLP_E_CORRUPT);
    assert_error_has("key block of chunk 0", NULL);
    cr_assert_eq(hdmlp_dataset_sample_info(ds, 8, &in), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
}

/* Re-encodes g_dir's index with its label field turned into a required text field: a
 * dataset of two stored fields (its tables are not rewritten: open must refuse it first). */
static void label_as_text(void)
{
    char path[PATH_CAP];
    path_of(path, FMT_INDEX_NAME);
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(testds_read_file(path, &buf, &len), 0);
    fmt_index ix;
    cr_assert_eq(fmt_index_decode(buf, len, &ix), HDMLP_OK, "%s", hdmlp_last_error());
    fmt_field fields[2];
    fmt_chunk *chunks = calloc(ix.h.n_chunks, sizeof(*chunks));
    fmt_segment *segs = calloc(ix.h.n_segments, sizeof(*segs));
    fmt_label *labels = calloc(ix.h.n_labels, sizeof(*labels));
    cr_assert(chunks && segs && labels);
    for (uint32_t f = 0; f < 2; f++) {
        fmt_index_field(&ix, f, &fields[f]);
    }
    fields[1].type = FMT_FIELD_TEXT;
    fields[1].flags = FMT_FIELD_REQUIRED;
    for (uint64_t c = 0; c < ix.h.n_chunks; c++) {
        fmt_index_chunk(&ix, c, &chunks[c]);
    }
    for (uint32_t i = 0; i < ix.h.n_segments; i++) {
        fmt_index_segment(&ix, i, &segs[i]);
    }
    for (uint32_t l = 0; l < ix.h.n_labels; l++) {
        fmt_index_label(&ix, l, &labels[l]);
    }
    fmt_index_build b = {.h = ix.h,
                         .version = 2,
                         .n_samples = ix.h.n_samples,
                         .fields = fields,
                         .n_fields = 2,
                         .chunks = chunks,
                         .n_chunks = ix.h.n_chunks,
                         .segments = segs,
                         .n_segments = ix.h.n_segments,
                         .labels = labels,
                         .n_labels = ix.h.n_labels,
                         .strings = ix.strings,
                         .strings_len = ix.strings_len,
                         .dict = ix.dict,
                         .dict_len = ix.dict_len};
    b.h.label_field = FMT_NO_FIELD;
    uint8_t *out = NULL;
    size_t out_len = 0;
    cr_assert_eq(fmt_index_encode(&b, &out, &out_len), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(testds_write_file(path, out, out_len), 0);
    hd_free(out);
    free(chunks);
    free(segs);
    free(labels);
    free(buf);
}

/* The label field re-declared as text: the dataset opens (two stored fields are read as
 * field records), and the first read of a table refuses the label's inline values by chunk,
 * sample and field. */
Test(dataset, v2_values_that_do_not_fit_their_field_are_refused_by_field)
{
    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    label_as_text();
    hdmlp_dataset *ds = open_ok();
    cr_assert_eq(hdmlp_dataset_field_records(ds), 1);
    uint8_t buf[512];
    size_t size = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 3, buf, sizeof(buf), &size), HDMLP_E_CORRUPT);
    assert_error_has("sample table of chunk 0: sample 0, field 1 (label): inline value in a "
                     "field that is not a scalar",
                     g_dir);
    hdmlp_dataset_close(ds);
}

/* A table is checked whole on its first read after open, later reads check only its sums:
 * verify checks every table whole again, so a byte that changes after the first read and
 * only the table's checksum catches (a value's checksum) is still found by verify. */
Test(dataset, v2_verify_rechecks_tables_already_read)
{
    cr_assert_eq(testds_write(g_dir, &spec2), HDMLP_OK, "%s", hdmlp_last_error());
    const fmt_chunk ch = chunk_of(2);
    hdmlp_dataset *ds = open_ok();
    check_all_samples(ds, &spec2);                    /* every table read and checked once */
    flip(FMT_TABLES_NAME, ch.table_offset + 8, 0x01); /* sample 16's value checksum */
    fmt_sample s;
    cr_assert_eq(ds_sample_record(ds, 17, &s), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_E_CORRUPT);
    assert_error_has("sample table of chunk 2: checksum mismatch", NULL);
    hdmlp_dataset_close(ds);
}

/* A loader's planning reads each table once checked whole, then only what a miss needs: a
 * table damaged after the first epoch (every chunk's first stored length) fails the next
 * epoch's reads of its chunks with the chunk named, whether planning sums the records from
 * the tables' block offsets (1 MiB) or the I/O threads read them from whole views (100 KB,
 * whose sixteenth cannot hold the block offsets); nothing is delivered wrong. */
Test(dataset, v2_table_damaged_after_a_loaders_first_epoch, .timeout = 60)
{
    const testds_spec spec = {.n_samples = 20000,
                              .chunk_size = 8,
                              .seed = 78,
                              .min_size = 1,
                              .max_size = 16,
                              .n_labels = 5,
                              .version = 2};
    const uint64_t budgets[] = {1u << 20, 100000};
    for (size_t i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++) {
        cr_assert_eq(testds_write(g_dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
        hdmlp_dataset *ds = open_ok();
        hdmlp_config *cfg = NULL;
        cr_assert_eq(hdmlp_config_create(&cfg), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_memory(cfg, budgets[i]), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_batch_size(cfg, 16), HDMLP_OK);
        cr_assert_eq(hdmlp_config_set_epochs(cfg, 2), HDMLP_OK);
        hdmlp_loader *ld = NULL;
        cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
        hdmlp_config_free(cfg);
        hdmlp_batch *b = NULL;
        int rc;
        while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK && hdmlp_batch_epoch(b) == 0) {
            hdmlp_batch_release(b);
        }
        cr_assert_eq(rc, HDMLP_OK, "%s", hdmlp_last_error());
        hdmlp_batch_release(b);
        char path[PATH_CAP];
        path_of(path, FMT_TABLES_NAME);
        uint8_t *buf;
        size_t len;
        cr_assert_eq(testds_read_file(path, &buf, &len), 0, "%s", path);
        for (uint64_t c = 0; c < ds->ix.h.n_chunks; c++) {
            fmt_chunk ch;
            fmt_index_chunk(&ds->ix, c, &ch);
            uint8_t *r = buf + ch.table_offset + ds->ix.data_field * FMT_VALUE_REC_LEN;
            fmt_st32(r, fmt_ld32(r) + (1u << 30));
        }
        cr_assert_eq(testds_write_file(path, buf, len), 0);
        free(buf);
        while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
            hdmlp_batch_release(b);
        }
        cr_assert_eq(rc, HDMLP_E_CORRUPT, "budget %llu: %s: %s", (unsigned long long)budgets[i],
                     hdmlp_err_name(rc), hdmlp_last_error());
        assert_error_has("sample table of chunk", NULL);
        hdmlp_loader_free(ld);
        hdmlp_dataset_close(ds);
    }
}
