/*
 * Version-2 test datasets (format 2.0: fields, per-chunk sample tables in DIR/tables, key
 * blocks in DIR/keys) written with the format/ functions, for the dataset tests. The same
 * samples as tests/support/testds.h gives a spec (sizes testds_size, bytes testds_fill,
 * keys "sample-%llu", label i % L named "class-%u"), so the fixtures that check a version-1
 * dataset's bytes check these too. Not part of the library.
 */
#ifndef HDMLP_TESTDS2_H
#define HDMLP_TESTDS2_H

#include "support/testds.h"

#include <stdint.h>

typedef struct testds2_opts {
    /* Also a third field, "caption" (text, optional, absent from every sample): two stored
     * fields, which the loader does not read yet. */
    int extra_field;
} testds2_opts;

/* Writes spec as a version-2 dataset into dir (created if missing): segments, DIR/tables,
 * DIR/keys, then the index. Fields: "data" (bytes, required: the sample's bytes, stored as
 * spec says) and "label" (int64, required, the label field: inline). opts may be NULL.
 * HDMLP_OK or an HDMLP_E_* code with detail in hdmlp_last_error(). */
int testds2_write(const char *dir, const testds_spec *spec, const testds2_opts *opts);

#endif
