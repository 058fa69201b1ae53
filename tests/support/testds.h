/*
 * Test-dataset writer: small deterministic packed datasets written with the format/
 * functions, for format, dataset and loader tests, and testds_drain, which records what a
 * loader delivers. Not part of the library.
 */
#ifndef HDMLP_TESTDS_H
#define HDMLP_TESTDS_H

#include "hdmlp.h"

#include <stddef.h>
#include <stdint.h>

typedef struct testds_spec {
    uint64_t n_samples;          /* N ≥ 1 */
    uint32_t chunk_size;         /* K, 1..2^20 */
    uint32_t chunks_per_segment; /* 0 = every chunk in one segment */
    uint64_t seed;               /* sizes, contents, dataset id and pack seed derive from it */
    uint32_t min_size, max_size; /* raw sample sizes, inclusive (0-byte samples allowed) */
    int compress;                /* 0 = codec 0 (raw); 1 = zstd level 1 (codec 1) */
    int dict;                    /* with compress: train a zstd dictionary (codec 2) */
    uint32_t n_labels;           /* L ≥ 1; sample i has label i % L, named "class-%u" */
    uint32_t version;            /* format major: 1, or 2 (0: what hdmlp-pack writes) */
} testds_spec;

/* Sample i's caption (testds_write_fields) into buf (at least 40 bytes); its length, or 0
 * when sample i has none. */
size_t testds_caption(uint64_t i, char *buf);

/* Content of sample i: deterministic in (i, seed), compressible, differs between samples. */
void testds_fill(uint64_t i, uint64_t seed, void *buf, size_t len);
/* Raw size of sample i under spec: uniform in [min_size, max_size], deterministic; when
 * min_size is 0, every sample i with i % 16 == 5 is empty. */
size_t testds_size(const testds_spec *spec, uint64_t i);
/* Dataset id testds_write gives a dataset with this seed. */
uint64_t testds_dataset_id(uint64_t seed);

/* Writes a dataset into dir (created if missing; existing files are overwritten): segment
 * files (version 2: with DIR/tables and DIR/keys) then the index. Keys are "sample-%llu".
 * Returns HDMLP_OK or an HDMLP_E_* code with detail in hdmlp_last_error(). */
int testds_write(const char *dir, const testds_spec *spec);
/* As testds_write, version 2, with two more fields after "data" and "label": "caption"
 * (text, stored uncompressed, absent when i % 7 == 3: testds_caption) and "score" (float64
 * inline, i / 2). Its samples are delivered as field records. */
int testds_write_fields(const char *dir, const testds_spec *spec);

/* Makes a fresh directory "<base>/<tag>-XXXXXX" where base is $HDMLP_TEST_TMP or /tmp. */
int testds_mkdtemp(const char *tag, char *buf, size_t cap);
/* Removes dir and everything below it (no error if it does not exist). 0 or -1. */
int testds_rm_rf(const char *dir);

/* Whole-file helpers (malloc'd buffer; 0 or -1). */
int testds_read_file(const char *path, uint8_t **buf, size_t *len);
int testds_write_file(const char *path, const void *buf, size_t len);
/* Recomputes an index buffer's trailing checksum after a deliberate edit. */
void testds_reseal_index(uint8_t *buf, size_t len);

/* What a loader delivered, in order: sample index idx[i] of epoch ep[i], i < n (both
 * arrays malloc'd with room for cap). Start from all zeros. */
typedef struct testds_seq {
    uint64_t *idx, *ep;
    uint64_t n, cap;
} testds_seq;

/* Appends every sample ld delivers to s, releasing each batch, until hdmlp_loader_next
 * returns something other than HDMLP_OK, and returns that code (HDMLP_END after the last
 * epoch). When s cannot grow it stops with HDMLP_E_NOMEM and detail in hdmlp_last_error().
 * Runs on the calling thread; ld stays the caller's. */
int testds_drain(hdmlp_loader *ld, testds_seq *s);
/* Frees s's arrays and zeroes it (NULL accepted). */
void testds_seq_free(testds_seq *s);

#endif
