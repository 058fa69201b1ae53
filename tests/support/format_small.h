/*
 * A small index built in memory, for the format/ tests (test_format*.c, one Criterion
 * binary).
 */
#ifndef HDMLP_TEST_FORMAT_SMALL_H
#define HDMLP_TEST_FORMAT_SMALL_H

#include "format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* N = 10, K = 3 → chunks of 3, 3, 3, 1; two segments (chunks 0-1 and 2-3); three labels;
 * codecs cycle 0, 1, 2 (the index does not look inside frames). */
#define SMALL_N 10u
#define SMALL_K 3u
#define SMALL_C 4u
#define SMALL_S 2u
#define SMALL_L 3u
#define SMALL_ID 0x1122334455667788ull

typedef struct small {
    fmt_sample samples[SMALL_N];
    fmt_chunk chunks[SMALL_C];
    fmt_segment segments[SMALL_S];
    fmt_label labels[SMALL_L];
    uint8_t strings[256];
    uint8_t dict[40];
    fmt_index_build b;
} small;

/* The small index in version 2: fields "data" (bytes, required) and "label" (int64,
 * required, the label); DIR/tables and DIR/keys as buffers. Sample checksums are the low
 * 32 bits of small's. */
typedef struct small2 {
    small sm;
    fmt_field fields[2];
    uint8_t tables[FMT_FILE_HEADER_LEN + SMALL_N * 2 * FMT_VALUE_REC_LEN];
    uint8_t keys[FMT_FILE_HEADER_LEN + SMALL_C * 64];
    size_t keys_len;
} small2;

void small2_init(small2 *v, bool with_dict);
/* Encodes v's index (hd_malloc'd, *len bytes) and decodes it into ix; fails the test on
 * error. */
uint8_t *small2_encode(small2 *v, size_t *len, fmt_index *ix);

/* Fills sm with the small index (codecs cycle 0, 1 without the dictionary). */
void small_init(small *sm, bool with_dict);
/* Encodes the small index (malloc'd, *len bytes) and decodes it into ix; fails the test on
 * error. */
uint8_t *small_encode(bool with_dict, size_t *len, fmt_index *ix);

#endif
