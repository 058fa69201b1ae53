/* iterate.c: one epoch over a packed dataset in random order, within a memory budget. */
#include <hdmlp.h>
#include <stdio.h>
#include <time.h>

int main(int argc, char **argv)
{
    hdmlp_dataset *ds = NULL;
    hdmlp_config *cfg = NULL;
    hdmlp_loader *ld = NULL;
    hdmlp_batch *batch = NULL;
    uint64_t samples = 0, bytes = 0;
    struct timespec t0, t1;
    int rc;

    if (argc != 2) {
        fprintf(stderr, "usage: %s DATASET_DIR\n", argv[0]);
        return 2;
    }
    if ((rc = hdmlp_dataset_open(argv[1], &ds)) == HDMLP_OK &&
        (rc = hdmlp_config_create(&cfg)) == HDMLP_OK &&
        (rc = hdmlp_config_set_memory(cfg, 256u << 20)) == HDMLP_OK && /* 256 MiB */
        (rc = hdmlp_config_set_batch_size(cfg, 64)) == HDMLP_OK &&
        (rc = hdmlp_loader_create(ds, cfg, &ld)) == HDMLP_OK) {
        timespec_get(&t0, TIME_UTC);
        while ((rc = hdmlp_loader_next(ld, &batch)) == HDMLP_OK) {
            const hdmlp_sample_view *views = hdmlp_batch_samples(batch);
            for (size_t i = 0; i < hdmlp_batch_size(batch); i++) {
                bytes += views[i].size; /* views[i].data: the sample's bytes */
            }
            samples += hdmlp_batch_size(batch);
            hdmlp_batch_release(batch);
        }
        timespec_get(&t1, TIME_UTC);
    }
    if (rc == HDMLP_END) {
        const double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        printf("%llu samples, %llu bytes, %.0f samples/s\n", (unsigned long long)samples,
               (unsigned long long)bytes, s > 0 ? (double)samples / s : 0.0);
    } else {
        fprintf(stderr, "iterate: %s: %s\n", hdmlp_strerror(rc), hdmlp_last_error());
    }
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    return rc == HDMLP_END ? 0 : 1;
}
