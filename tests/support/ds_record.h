/*
 * A sample's record of an open dataset, from its chunk's table (both format versions), for
 * tests whose module is below the dataset (the chunk sources).
 */
#ifndef HDMLP_TEST_DS_RECORD_H
#define HDMLP_TEST_DS_RECORD_H

#include "format.h"
#include "hdmlp.h"

/* Sample i's record (ds_sample_record); fails the test on error. */
void ds_record(const hdmlp_dataset *ds, uint64_t i, fmt_sample *out);
/* The dataset's decoded index (valid while ds is open). */
const fmt_index *ds_record_index(const hdmlp_dataset *ds);

#endif
