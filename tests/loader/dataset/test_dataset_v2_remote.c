/* Version-2 datasets in object storage (tests/objstore/objstore_server.py, S3 on 127.0.0.1;
 * skips without python3): hdmlp_dataset_upload puts DIR/tables and DIR/keys too, the copy
 * reads as the local one (samples, keys, verify, a loader's order; its tables read a range a
 * get), and the store's tables and keys objects are checked: a flipped key byte, a truncated
 * tables object, a missing keys object. Part of the test_dataset binary. */
#include "loader_dataset.h"
#include "support/dataset_fixture.h"
#include "support/objstore_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const testds_spec remote_spec = {.n_samples = 300,
                                        .chunk_size = 8,
                                        .chunks_per_segment = 10,
                                        .seed = 401,
                                        .min_size = 100,
                                        .max_size = 3000,
                                        .compress = 1,
                                        .n_labels = 4};

static void on_upload(void *arg, uint64_t done, uint64_t total)
{
    uint64_t *last = arg;
    cr_assert_geq(done, last[0]);
    last[0] = done;
    last[1] = total;
}

/* Bytes of every file in dir. */
static uint64_t dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    uint64_t total = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[PATH_CAP + 300];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            total += (uint64_t)st.st_size;
        }
    }
    closedir(d);
    return total;
}

/* The store's copy of name equals the local file. */
static void same_file(const objstore_server *s, const char *name)
{
    char a[PATH_CAP], b[700];
    path_of(a, name);
    snprintf(b, sizeof(b), "%s/bucket/v2/%s", s->dir, name);
    uint8_t *x = NULL, *y = NULL;
    size_t lx = 0, ly = 0;
    cr_assert_eq(testds_read_file(a, &x, &lx), 0, "%s", a);
    cr_assert_eq(testds_read_file(b, &y, &ly), 0, "%s not uploaded", b);
    cr_assert(lx == ly && memcmp(x, y, lx) == 0, "%s: the uploaded copy differs", name);
    free(x);
    free(y);
}

/* XORs byte `at` of the store's copy of name with mask. */
static void flip_remote(const objstore_server *s, const char *name, uint64_t at, uint8_t mask)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/bucket/v2/%s", s->dir, name);
    uint8_t *buf;
    size_t len;
    cr_assert_eq(testds_read_file(path, &buf, &len), 0, "%s", path);
    buf[at] ^= mask;
    cr_assert_eq(testds_write_file(path, buf, len), 0);
    free(buf);
}

static hdmlp_dataset *open_remote(hdmlp_source_config *c)
{
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/v2", c, &ds), HDMLP_OK, "%s",
                 hdmlp_last_error());
    return ds;
}

Test(dataset, v2_remote_upload_read_and_damage, .timeout = 180)
{
    objstore_cur = &remote_spec; /* the server's own bucket/ds: another copy */
    objstore_mem_div = 2;
    objstore_server s = {0};
    const char *const args[] = {"--s3", NULL};
    objstore_start_py(&s, args);
    cr_assert_eq(testds_write(g_dir, &remote_spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_source_config *c = objstore_s3_config(&s, "hdmlp/test/secret");
    uint64_t seen[2] = {0, 0};
    cr_assert_eq(hdmlp_dataset_upload(g_dir, "s3://bucket/v2", c, on_upload, seen), HDMLP_OK,
                 "%s", hdmlp_last_error());
    const uint64_t total = dir_bytes(g_dir);
    cr_assert_eq(seen[1], total, "the total counts tables and keys: %llu of %llu",
                 (unsigned long long)seen[1], (unsigned long long)total);
    cr_assert_eq(seen[0], total);
    same_file(&s, FMT_TABLES_NAME);
    same_file(&s, FMT_KEYS_NAME);
    same_file(&s, FMT_INDEX_NAME);

    /* The copy reads as the local dataset. */
    hdmlp_dataset *ds = open_remote(c);
    cr_assert_eq(ds->ix.h.major, 2);
    cr_assert_eq(ds->tables.scratch, fmt_table2_scratch(&ds->ix),
                 "a remote copy reads a table a get (range reads), holding none");
    check_all_samples(ds, &remote_spec);
    for (uint64_t i = 0; i < remote_spec.n_samples; i += 7) {
        hdmlp_sample_info in;
        char key[32];
        const int klen = snprintf(key, sizeof(key), "sample-%llu", (unsigned long long)i);
        cr_assert_eq(hdmlp_dataset_sample_info(ds, i, &in), HDMLP_OK, "%s", hdmlp_last_error());
        cr_assert_eq(in.label, i % remote_spec.n_labels);
        cr_assert_eq(in.key_size, (uint32_t)klen);
        cr_assert_eq(memcmp(in.key, key, (size_t)klen), 0);
        uint64_t idx = UINT64_MAX;
        cr_assert_eq(hdmlp_dataset_find_key(ds, key, (size_t)klen, &idx), HDMLP_OK);
        cr_assert_eq(idx, i);
    }
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK, "%s", hdmlp_last_error());
    uint64_t *remote = objstore_drain(ds, HDMLP_REFILL_AUTO, 4, NULL);
    hdmlp_dataset_close(ds);
    ds = open_ok();
    uint64_t *local = objstore_drain(ds, HDMLP_REFILL_AUTO, 2, NULL);
    hdmlp_dataset_close(ds);
    cr_assert_eq(memcmp(remote, local, 2 * remote_spec.n_samples * sizeof(uint64_t)), 0,
                 "the remote order differs from the local one");
    free(remote);
    free(local);

    /* A flipped key byte in the store's keys object: found when keys are first used. */
    ds = open_ok();
    fmt_chunk ch;
    fmt_index_chunk(&ds->ix, 5, &ch);
    hdmlp_dataset_close(ds);
    flip_remote(&s, FMT_KEYS_NAME, ch.keys_offset + 4u * ch.n_samples, 0x04);
    ds = open_remote(c);
    uint64_t idx = 0;
    cr_assert_eq(hdmlp_dataset_find_key(ds, "sample-299", 10, &idx), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "s3://bucket/v2/keys: key block of chunk 5"), "%s",
              hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "key block of chunk 5"), "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    flip_remote(&s, FMT_KEYS_NAME, ch.keys_offset + 4u * ch.n_samples, 0x04);

    /* A flipped table byte: that chunk's reads fail. */
    flip_remote(&s, FMT_TABLES_NAME, ch.table_offset + 1, 0x01);
    ds = open_remote(c);
    uint8_t *buf = malloc(remote_spec.max_size);
    size_t size = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 5 * 8 + 1, buf, remote_spec.max_size, &size),
                 HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "s3://bucket/v2/tables: sample table of chunk 5"),
              "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 0, buf, remote_spec.max_size, &size), HDMLP_OK,
                 "%s", hdmlp_last_error());
    free(buf);
    hdmlp_dataset_close(ds);
    flip_remote(&s, FMT_TABLES_NAME, ch.table_offset + 1, 0x01);

    /* A truncated tables object, a missing keys object: open fails naming them. */
    char path[700];
    snprintf(path, sizeof(path), "%s/bucket/v2/%s", s.dir, FMT_TABLES_NAME);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(truncate(path, st.st_size - 16), 0);
    ds = (hdmlp_dataset *)1;
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/v2", c, &ds), HDMLP_E_CORRUPT);
    cr_assert_null(ds);
    cr_assert(strstr(hdmlp_last_error(), "s3://bucket/v2/tables: object has"), "%s",
              hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "(truncated)"), "%s", hdmlp_last_error());
    snprintf(path, sizeof(path), "%s/bucket/v2/%s", s.dir, FMT_KEYS_NAME);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(hdmlp_dataset_upload(g_dir, "s3://bucket/v2", c, NULL, NULL), HDMLP_OK, "%s",
                 hdmlp_last_error());
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/v2", c, &ds), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "/bucket/v2/keys"), "%s", hdmlp_last_error());
    hdmlp_source_config_free(c);
    objstore_stop(&s);
    objstore_cur = &objstore_spec;
    objstore_mem_div = 4;
}
