/* Writes a test dataset with fields (testds_write_fields: data, label, caption, score) for
 * the Python tests: mkds_fields DIR N K SEED. Exit 0, or 1 naming the error. */
#include "support/testds.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: mkds_fields DIR N K SEED\n");
        return 2;
    }
    const testds_spec spec = {.n_samples = strtoull(argv[2], NULL, 10),
                              .chunk_size = (uint32_t)strtoul(argv[3], NULL, 10),
                              .seed = strtoull(argv[4], NULL, 10),
                              .min_size = 0,
                              .max_size = 40,
                              .compress = 1,
                              .n_labels = 4,
                              .version = 2};
    if (testds_write_fields(argv[1], &spec) != HDMLP_OK) {
        fprintf(stderr, "mkds_fields: %s\n", hdmlp_last_error());
        return 1;
    }
    return 0;
}
