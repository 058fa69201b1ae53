/* A sample's record of an open dataset (see ds_record.h). */
#include "support/ds_record.h"

#include "loader_dataset.h"

#include <criterion/criterion.h>

void ds_record(const hdmlp_dataset *ds, uint64_t i, fmt_sample *out)
{
    cr_assert_eq(ds_sample_record(ds, i, out), HDMLP_OK, "%s", hdmlp_last_error());
}

const fmt_index *ds_record_index(const hdmlp_dataset *ds) { return &ds->ix; }
