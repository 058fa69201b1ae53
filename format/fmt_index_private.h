/* Shared by the index's files (fmt_index.c, fmt_index2.c, fmt_table2.c): checked arithmetic
 * and version 2's parts of decoding and encoding. Internal to format/. */
#ifndef HDMLP_FMT_INDEX_PRIVATE_H
#define HDMLP_FMT_INDEX_PRIVATE_H

#include "format.h"

typedef unsigned long long ull;

/* Overflow-checked arithmetic: true on overflow. */
static inline bool add_ovf(uint64_t a, uint64_t b, uint64_t *out)
{
    *out = a + b;
    return *out < a;
}

static inline bool mul_ovf(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a) {
        return true;
    }
    *out = a * b;
    return false;
}

static inline bool align8_ovf(uint64_t v, uint64_t *out)
{
    if (v > UINT64_MAX - 7) {
        return true;
    }
    *out = (v + 7) & ~(uint64_t)7;
    return false;
}

bool fmt_all_zero(const uint8_t *p, uint64_t n);

/* Running totals of version 2's chunk records, checked in chunk order. */
typedef struct fmt_chunk2_sums {
    uint64_t table_end; /* where the next chunk's table must start */
    uint64_t keys_end;  /* where the next chunk's key block may start (8-aligned) */
    uint64_t raw;       /* raw bytes so far */
} fmt_chunk2_sums;

/* Version 2's fields (names, types, flags; the label field) and its data field (out). */
int fmt_index2_check_fields(const fmt_index *ix, bool strict, uint32_t *data_field);
/* Version 2's checks of chunk record c beyond placement (its table and key block follow the
 * previous chunk's, its sizes are possible); sums advances. */
int fmt_index2_check_chunk(const fmt_index *ix, bool strict, uint64_t c, fmt_chunk2_sums *sums);
/* Totals after the last chunk: the tables' and keys' sizes, the raw bytes. */
int fmt_index2_check_totals(const fmt_index *ix, const fmt_chunk2_sums *sums);
void fmt_index2_put_chunk(uint8_t r[FMT_CHUNK_REC2_LEN], const fmt_chunk *ch);
void fmt_index2_put_field(uint8_t r[FMT_FIELD_REC_LEN], const fmt_field *f);

#endif
