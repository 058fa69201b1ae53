/* Randomness figures of a delivered order (see bench_random.h). */
#include "bench_random.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct bench_random {
    uint64_t n;
    uint32_t k;
    uint64_t chunks;
    uint32_t *count; /* per chunk: samples delivered this epoch */
    uint64_t *sum;   /* per chunk: sum of their positions */
    uint32_t *prev;  /* per sample: position + 1 in the previous epoch, 0 = not received */
    uint32_t *cur;   /* the same for the current epoch */
    uint64_t epoch;
    uint64_t prev_epoch;
    int started;
    int have_prev;
    int overflow; /* an epoch longer than 2^32 - 2 positions: correlation not kept */
    uint64_t pos; /* next position in the current epoch */
    double dist_sum;
    uint64_t pairs;
    bench_random_fig fig;
};

double bench_random_distance(const bench_random_fig *f)
{
    return f->dist_norm > 0 ? f->dist_sum / f->dist_norm : NAN;
}

double bench_random_correlation(const bench_random_fig *f)
{
    return f->corr_n > 0 ? f->corr_sum / (double)f->corr_n : NAN;
}

void bench_random_fig_add(bench_random_fig *to, const bench_random_fig *from)
{
    to->dist_sum += from->dist_sum;
    to->dist_norm += from->dist_norm;
    to->corr_sum += from->corr_sum;
    to->corr_n += from->corr_n;
}

bench_random *bench_random_create(uint64_t n, uint32_t k)
{
    if (k == 0 || n == 0 || n > SIZE_MAX / sizeof(uint64_t)) {
        return NULL;
    }
    bench_random *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    r->n = n;
    r->k = k;
    r->chunks = (n + k - 1) / k;
    r->count = calloc((size_t)r->chunks, sizeof(uint32_t));
    r->sum = calloc((size_t)r->chunks, sizeof(uint64_t));
    r->prev = calloc((size_t)n, sizeof(uint32_t));
    r->cur = calloc((size_t)n, sizeof(uint32_t));
    if (r->count == NULL || r->sum == NULL || r->prev == NULL || r->cur == NULL) {
        bench_random_free(r);
        return NULL;
    }
    return r;
}

void bench_random_free(bench_random *r)
{
    if (r != NULL) {
        free(r->count);
        free(r->sum);
        free(r->prev);
        free(r->cur);
        free(r);
    }
}

/* Pearson r of (prev, cur) over samples present in both; NAN if undefined. Two passes. */
static double correlation(const uint32_t *a, const uint32_t *b, uint64_t n)
{
    double sx = 0, sy = 0;
    uint64_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (a[i] != 0 && b[i] != 0) {
            sx += a[i];
            sy += b[i];
            m++;
        }
    }
    if (m < 2) {
        return NAN;
    }
    const double mx = sx / (double)m;
    const double my = sy / (double)m;
    double cxy = 0, cxx = 0, cyy = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (a[i] != 0 && b[i] != 0) {
            const double dx = a[i] - mx;
            const double dy = b[i] - my;
            cxy += dx * dy;
            cxx += dx * dx;
            cyy += dy * dy;
        }
    }
    if (cxx <= 0 || cyy <= 0) {
        return NAN;
    }
    return cxy / sqrt(cxx * cyy);
}

static void end_epoch(bench_random *r)
{
    if (!r->started) {
        return;
    }
    const uint64_t len = r->pos;
    if (r->pairs > 0) {
        r->fig.dist_sum += r->dist_sum;
        r->fig.dist_norm += (double)r->pairs * ((double)len + 1.0) / 3.0;
    }
    if (!r->overflow && r->have_prev && r->prev_epoch + 1 == r->epoch) {
        const double c = correlation(r->prev, r->cur, r->n);
        if (!isnan(c)) {
            r->fig.corr_sum += c;
            r->fig.corr_n++;
        }
    }
    uint32_t *t = r->prev;
    r->prev = r->cur;
    r->cur = t;
    memset(r->cur, 0, (size_t)r->n * sizeof(uint32_t));
    memset(r->count, 0, (size_t)r->chunks * sizeof(uint32_t));
    memset(r->sum, 0, (size_t)r->chunks * sizeof(uint64_t));
    r->have_prev = !r->overflow;
    r->overflow = 0;
    r->prev_epoch = r->epoch;
    r->started = 0;
    r->pos = 0;
    r->dist_sum = 0;
    r->pairs = 0;
}

void bench_random_add(bench_random *r, uint64_t epoch, uint64_t index)
{
    if (r->started && epoch != r->epoch) {
        end_epoch(r);
    }
    if (!r->started) {
        r->started = 1;
        r->epoch = epoch;
    }
    const uint64_t p = r->pos++;
    if (index >= r->n) {
        return; /* not a sample of this dataset: the caller's bug, not counted */
    }
    const uint64_t c = index / r->k;
    /* Earlier positions of this chunk are all < p: sum of p - q over them. */
    r->dist_sum += (double)(r->count[c] * p - r->sum[c]);
    r->pairs += r->count[c];
    r->count[c]++;
    r->sum[c] += p;
    if (p + 1 >= UINT32_MAX) {
        r->overflow = 1;
    } else {
        r->cur[index] = (uint32_t)(p + 1);
    }
}

bench_random_fig bench_random_finish(bench_random *r)
{
    end_epoch(r);
    return r->fig;
}
