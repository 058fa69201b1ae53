/* image_batches.c: one epoch of ready-to-train image batches (224 × 224 RandomResizedCrop
 * + flip, uint8 NHWC) decoded on the loader's threads, and what the pipeline measured.
 * Optional: the I/O threads and decode threads (0 = the automatic split, the default). */
#include <hdmlp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    hdmlp_dataset *ds = NULL;
    hdmlp_config *cfg = NULL;
    hdmlp_image_config *ic = NULL;
    hdmlp_loader *ld = NULL;
    hdmlp_batch *batch = NULL;
    hdmlp_stats st;
    uint64_t images = 0, label_sum = 0;
    struct timespec t0, t1;
    int rc;

    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: %s DATASET_DIR [IO_THREADS DECODE_THREADS]\n", argv[0]);
        return 2;
    }
    const unsigned io = argc == 4 ? (unsigned)strtoul(argv[2], NULL, 10) : 2;
    const unsigned decode = argc == 4 ? (unsigned)strtoul(argv[3], NULL, 10) : 0;
    if ((rc = hdmlp_dataset_open(argv[1], &ds)) == HDMLP_OK &&
        (rc = hdmlp_config_create(&cfg)) == HDMLP_OK &&
        (rc = hdmlp_config_set_memory(cfg, 512u << 20)) == HDMLP_OK &&
        (rc = hdmlp_config_set_batch_size(cfg, 64)) == HDMLP_OK &&
        (rc = hdmlp_config_set_threads(cfg, io)) == HDMLP_OK &&
        (rc = hdmlp_image_config_create(&ic)) == HDMLP_OK &&
        (rc = hdmlp_image_config_set_size(ic, 224, 224)) == HDMLP_OK &&
        (rc = hdmlp_image_config_set_decode_threads(ic, decode)) == HDMLP_OK &&
        (rc = hdmlp_config_set_image(cfg, ic)) == HDMLP_OK && /* copied */
        (rc = hdmlp_loader_create(ds, cfg, &ld)) == HDMLP_OK) {
        timespec_get(&t0, TIME_UTC);
        while ((rc = hdmlp_loader_next(ld, &batch)) == HDMLP_OK) {
            hdmlp_image_batch img;
            if ((rc = hdmlp_batch_image(batch, &img)) != HDMLP_OK) {
                break;
            }
            /* img.data: img.n × 224 × 224 × 3 bytes, contiguous, ready for a tensor */
            for (uint32_t i = 0; i < img.n; i++) {
                label_sum += img.labels[i];
            }
            images += img.n;
            hdmlp_batch_release(batch);
        }
        timespec_get(&t1, TIME_UTC);
    }
    if (rc != HDMLP_END) {
        fprintf(stderr, "%s: %s\n", hdmlp_strerror(rc), hdmlp_last_error());
    } else {
        const double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        hdmlp_loader_stats(ld, &st, sizeof st);
        printf("%llu images in %.2f s (%.0f/s), label sum %llu; decoded %llu, failed %llu; "
               "threads: %llu I/O, %llu decode (%llu moves)\n",
               (unsigned long long)images, s, s > 0 ? images / s : 0.0,
               (unsigned long long)label_sum, (unsigned long long)st.images_decoded,
               (unsigned long long)st.decode_failures, (unsigned long long)st.io_threads_active,
               (unsigned long long)st.decode_threads_active,
               (unsigned long long)st.balance_moves);
    }
    hdmlp_loader_free(ld);
    hdmlp_image_config_free(ic);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    return rc == HDMLP_END ? 0 : 1;
}
