/* hdmlp-pack --info's image statistics: types, bytes and sides read from the headers of
 * the first samples in packed order (the packer's global shuffle makes them a uniform
 * random sample). Public API plus the header probe of pack_image.h. */
#include "hdmlp.h"
#include "pack_cli.h"
#include "pack_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INFO_IMAGE_SAMPLES 2000u

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* v[0..n) sorted in place; percentile by nearest rank. */
static uint64_t pct(const uint64_t *v, size_t n, unsigned p)
{
    size_t r = (size_t)(((unsigned long long)p * n + 99) / 100);
    return v[r > 0 ? r - 1 : 0];
}

static double mean(const uint64_t *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)v[i];
    }
    return n ? s / (double)n : 0.0;
}

void pack_info_images(hdmlp_dataset *ds)
{
    const uint64_t total = hdmlp_dataset_sample_count(ds);
    const size_t m = total < INFO_IMAGE_SAMPLES ? (size_t)total : INFO_IMAGE_SAMPLES;
    uint64_t *const bytes = calloc(m ? m : 1, sizeof(uint64_t));
    uint64_t *const longer = calloc(m ? m : 1, sizeof(uint64_t));
    uint64_t *const shorter = calloc(m ? m : 1, sizeof(uint64_t));
    size_t cap = 1u << 20;
    unsigned char *buf = malloc(cap);
    if (!bytes || !longer || !shorter || !buf) {
        printf("images        (out of memory)\n");
        goto out;
    }
    uint64_t types[3] = {0, 0, 0}, no_header = 0, unreadable = 0;
    size_t k = 0;
    /* Samples with fields: their first image field (none: no images line). */
    uint32_t image_field = UINT32_MAX;
    for (uint32_t f = 0; hdmlp_dataset_field_records(ds) && f < hdmlp_dataset_field_count(ds);
         f++) {
        hdmlp_field_info in;
        if (hdmlp_dataset_field(ds, f, &in) == HDMLP_OK && in.type == HDMLP_FIELD_IMAGE) {
            image_field = f;
            break;
        }
    }
    if (hdmlp_dataset_field_records(ds) && image_field == UINT32_MAX) {
        goto out;
    }
    for (size_t i = 0; i < m; i++) {
        hdmlp_sample_info si;
        size_t size = 0;
        if (hdmlp_dataset_sample_info(ds, i, &si) != HDMLP_OK || si.raw_size > SIZE_MAX) {
            unreadable++;
            continue;
        }
        if (si.raw_size > cap) {
            unsigned char *const nb = realloc(buf, (size_t)si.raw_size);
            if (!nb) {
                unreadable++;
                continue;
            }
            buf = nb;
            cap = (size_t)si.raw_size;
        }
        if (hdmlp_dataset_read_sample(ds, i, buf, cap, &size) != HDMLP_OK) {
            unreadable++;
            continue;
        }
        const unsigned char *img = buf;
        if (image_field != UINT32_MAX) {
            hdmlp_field_value v;
            if (hdmlp_sample_field(buf, size, image_field, &v) != HDMLP_OK || !v.present) {
                continue;
            }
            img = v.data;
            size = (size_t)v.size;
        }
        pack_image_info info;
        const pack_image_type t = pack_image_probe(img, size, &info);
        types[t]++;
        if (t == PACK_IMAGE_OTHER) {
            continue;
        }
        if (info.width == 0) {
            no_header++;
            continue;
        }
        bytes[k] = size;
        longer[k] = info.width > info.height ? info.width : info.height;
        shorter[k] = info.width > info.height ? info.height : info.width;
        k++;
    }
    printf("images        %s%zu of %llu samples read: jpeg %llu, png %llu, other %llu",
           m < total ? "first " : "", m, (unsigned long long)total,
           (unsigned long long)types[PACK_IMAGE_JPEG],
           (unsigned long long)types[PACK_IMAGE_PNG],
           (unsigned long long)types[PACK_IMAGE_OTHER]);
    if (no_header) {
        printf(", unreadable image header %llu", (unsigned long long)no_header);
    }
    if (unreadable) {
        printf(", unreadable sample %llu", (unsigned long long)unreadable);
    }
    putchar('\n');
    if (k == 0) {
        goto out;
    }
    qsort(bytes, k, sizeof(uint64_t), cmp_u64);
    qsort(longer, k, sizeof(uint64_t), cmp_u64);
    qsort(shorter, k, sizeof(uint64_t), cmp_u64);
    printf(
        "image bytes   mean %.1f KiB; p10 %.1f, p50 %.1f, p90 %.1f, p99 %.1f, max %.1f KiB\n",
        mean(bytes, k) / 1024, (double)pct(bytes, k, 10) / 1024,
        (double)pct(bytes, k, 50) / 1024, (double)pct(bytes, k, 90) / 1024,
        (double)pct(bytes, k, 99) / 1024, (double)bytes[k - 1] / 1024);
    printf("image longer  mean %.0f px; p10 %llu, p50 %llu, p90 %llu, max %llu\n",
           mean(longer, k), (unsigned long long)pct(longer, k, 10),
           (unsigned long long)pct(longer, k, 50), (unsigned long long)pct(longer, k, 90),
           (unsigned long long)longer[k - 1]);
    printf("image shorter mean %.0f px; p10 %llu, p50 %llu, p90 %llu, max %llu\n",
           mean(shorter, k), (unsigned long long)pct(shorter, k, 10),
           (unsigned long long)pct(shorter, k, 50), (unsigned long long)pct(shorter, k, 90),
           (unsigned long long)shorter[k - 1]);
out:
    free(bytes);
    free(longer);
    free(shorter);
    free(buf);
}
