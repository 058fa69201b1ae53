/*
 * Forecast (planner) time at ImageNet scale: 1,281,167 samples with an ImageNet-like size
 * spread (mean ~110 KiB), K = 64, 90 epochs, memory 25 % of the dataset. The dataset is
 * metadata only: a real index and sparse segment files of the right sizes, so nothing but
 * the index takes disk space.
 *
 *   bench_forecast [N] [EPOCHS] [K] [MEMORY_FRACTION] [WORLD]
 */
#include "format.h"
#include "hdmlp.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Lognormal sizes with mean ~110 KiB (sigma 0.7), deterministic. */
static uint64_t size_of(uint64_t i)
{
    uint64_t x = i * 0x9e3779b97f4a7c15ull + 1;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    const double u1 = ((double)(x >> 11) + 0.5) / 9007199254740992.0;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 32;
    const double u2 = ((double)(x >> 11) + 0.5) / 9007199254740992.0;
    const double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    const double mu = log(110.0 * 1024) - 0.7 * 0.7 / 2;
    return (uint64_t)exp(mu + 0.7 * z) + 1;
}

static int write_dataset(const char *dir, uint64_t n, uint32_t k)
{
    const uint64_t c = (n + k - 1) / k;
    fmt_sample *s = calloc(n, sizeof(*s));
    fmt_chunk *ch = calloc(c, sizeof(*ch));
    uint64_t seg = 0;
    for (uint64_t ci = 0; ci < c; ci++) {
        uint64_t off = FMT_CHUNK_HEADER_LEN;
        for (uint64_t i = ci * k; i < (ci + 1) * k && i < n; i++) {
            s[i].offset = off;
            s[i].stored_len = s[i].raw_len = size_of(i);
            off += s[i].stored_len;
        }
        ch[ci] = (fmt_chunk){.offset = seg,
                             .length = off,
                             .n_samples = (uint32_t)((ci + 1) * k <= n ? k : n - ci * k)};
        seg += fmt_align_up(off);
    }
    const fmt_segment sg = {seg, c};
    const fmt_label label = {0, 1};
    fmt_index_build b;
    memset(&b, 0, sizeof(b));
    b.h.dataset_id = 1;
    b.h.chunk_size = k;
    b.samples = s;
    b.n_samples = n;
    b.chunks = ch;
    b.n_chunks = c;
    b.segments = &sg;
    b.n_segments = 1;
    b.labels = &label;
    b.n_labels = 1;
    b.strings = (const uint8_t *)"x";
    b.strings_len = 1;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = fmt_index_encode(&b, &buf, &len);
    free(s);
    free(ch);
    if (rc != HDMLP_OK) {
        return rc;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/index", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    rc = fd >= 0 && write(fd, buf, len) == (ssize_t)len ? HDMLP_OK : HDMLP_E_IO;
    close(fd);
    hd_free(buf);
    snprintf(path, sizeof(path), "%s/segment-000000", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)seg) != 0) {
        rc = HDMLP_E_IO;
    }
    close(fd);
    return rc;
}

int main(int argc, char **argv)
{
    const uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1281167;
    const uint64_t epochs = argc > 2 ? strtoull(argv[2], NULL, 10) : 90;
    const uint32_t k = argc > 3 ? (uint32_t)atoi(argv[3]) : 64;
    const double frac = argc > 4 ? atof(argv[4]) : 0.25;
    const uint32_t world = argc > 5 ? (uint32_t)atoi(argv[5]) : 1;
    char dir[] = "/tmp/hdmlp-forecast-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    double t0 = now_s();
    if (write_dataset(dir, n, k) != HDMLP_OK) {
        fprintf(stderr, "bench_forecast: cannot write the dataset: %s\n", hdmlp_last_error());
        return 1;
    }
    hdmlp_dataset *ds = NULL;
    if (hdmlp_dataset_open(dir, &ds) != HDMLP_OK) {
        fprintf(stderr, "bench_forecast: %s\n", hdmlp_last_error());
        return 1;
    }
    const double t_make = now_s() - t0;
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, (uint64_t)((double)hdmlp_dataset_raw_bytes(ds) * frac));
    hdmlp_config_set_epochs(cfg, epochs);
    hdmlp_config_set_batch_size(cfg, 256);
    if (world > 1) {
        const char *peers[64];
        for (uint32_t r = 0; r < world && r < 64; r++) {
            peers[r] = "127.0.0.1:1";
        }
        hdmlp_config_set_rank(cfg, 0, world);
        hdmlp_config_set_peers(cfg, peers, world);
    }
    hdmlp_stats st;
    t0 = now_s();
    const int rc = hdmlp_loader_forecast(ds, cfg, &st, sizeof st, NULL, NULL, NULL);
    const double t = now_s() - t0;
    if (rc != HDMLP_OK) {
        fprintf(stderr, "bench_forecast: %s\n", hdmlp_last_error());
        return 1;
    }
    const double c = (double)hdmlp_dataset_chunk_count(ds);
    printf("{\"samples\": %llu, \"chunk_size\": %u, \"epochs\": %llu, \"world\": %u, "
           "\"memory_fraction\": %.2f, \"abstract_chunks\": %llu, \"chunk_loads\": %llu, "
           "\"loads_per_chunk_per_epoch\": %.3f, \"requests_per_s\": %.0f, "
           "\"forecast_seconds\": %.2f, \"setup_seconds\": %.2f}\n",
           (unsigned long long)n, k, (unsigned long long)epochs, world, frac,
           (unsigned long long)st.abstract_chunks, (unsigned long long)st.chunk_loads,
           (double)st.chunk_loads / c / (double)epochs * world, (double)n * (double)epochs / t,
           t, t_make);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    char path[4096];
    snprintf(path, sizeof(path), "%s/index", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/segment-000000", dir);
    unlink(path);
    rmdir(dir);
    return 0;
}
