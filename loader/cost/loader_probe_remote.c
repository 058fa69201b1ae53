/*
 * The storage probe for a remote dataset: per-request cost and bandwidth of its object
 * store, measured with range GETs over one connection (one request at a time), for the
 * `auto` refill cost model. Bounded like the local probe: bytes, time (checked before each
 * request; the first small and the first large request are always made).
 */
#include "loader_probe_remote.h"

#include "loader_source.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef unsigned long long ull;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* splitmix64: offsets from the seed. */
static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* One timed range GET; seconds into *secs. */
static int timed_get(src_conn *c, uint32_t seg, uint64_t off, uint64_t len, uint8_t *buf,
                     double *secs)
{
    char name[32];
    snprintf(name, sizeof(name), FMT_SEGMENT_NAME_FMT, seg);
    const src_range r = {name, off, len, buf};
    const uint64_t t = now_ns();
    const int rc = src_conn_read(c, &r, 1);
    *secs = (double)(now_ns() - t) / 1e9;
    return rc;
}

int probe_remote(hdmlp_dataset *ds, const probe_limits *lim, uint64_t t0_ns, probe_result *out)
{
    memset(out, 0, sizeof(*out));
    const uint32_t n_seg = ds->ix.h.n_segments;
    uint32_t big = 0;
    uint64_t total = 0, big_size = 0;
    for (uint32_t s = 0; s < n_seg; s++) {
        fmt_segment seg;
        fmt_index_segment(&ds->ix, s, &seg);
        total += seg.size / PROBE_SMALL_LEN;
        if (seg.size > big_size) {
            big_size = seg.size;
            big = s;
        }
    }
    if (big_size < PROBE_MIN_FILE) {
        return hd_err(HDMLP_E_RANGE, "probe: %s: no segment of %llu bytes to measure", ds->path,
                      (ull)PROBE_MIN_FILE);
    }
    const uint64_t large_max = lim->large_len < big_size ? lim->large_len : big_size;
    uint8_t *buf = hd_malloc((size_t)large_max);
    double *small = hd_calloc(lim->small_reads, sizeof(double));
    src_conn *c = NULL;
    int rc = buf == NULL || small == NULL ? hd_err(HDMLP_E_NOMEM, "probe: out of memory")
                                          : src_conn_create(ds->store, 1, &c);
    const double limit_ns = lim->max_seconds * 1e9;
    uint64_t seed = lim->seed ^ UINT64_C(0x6f626a7374);
    /* Small reads: at most 40 % of the time, one at a time. */
    uint32_t ns = 0;
    while (rc == HDMLP_OK && ns < lim->small_reads &&
           out->bytes + PROBE_SMALL_LEN <= lim->max_bytes &&
           (ns == 0 || (double)(now_ns() - t0_ns) < 0.4 * limit_ns)) {
        uint64_t page = next_rand(&seed) % total;
        uint32_t s = 0;
        for (;; s++) {
            fmt_segment seg;
            fmt_index_segment(&ds->ix, s, &seg);
            if (page < seg.size / PROBE_SMALL_LEN) {
                break;
            }
            page -= seg.size / PROBE_SMALL_LEN;
        }
        rc = timed_get(c, s, page * PROBE_SMALL_LEN, PROBE_SMALL_LEN, buf, &small[ns]);
        out->bytes += PROBE_SMALL_LEN;
        ns += rc == HDMLP_OK;
    }
    /* Large reads of the largest segment, doubling from PROBE_MIN_FILE. */
    double lt[64];
    uint64_t ll[64];
    uint32_t nl = 0;
    for (uint64_t len = PROBE_MIN_FILE; rc == HDMLP_OK && nl < lim->large_reads && nl < 64;) {
        if (nl > 0 &&
            ((double)(now_ns() - t0_ns) >= limit_ns || out->bytes + len > lim->max_bytes)) {
            break;
        }
        const uint64_t off = (next_rand(&seed) % (big_size - len + 1)) & ~(uint64_t)4095;
        rc = timed_get(c, big, off, len, buf, &lt[nl]);
        out->bytes += len;
        ll[nl++] = len;
        if (len < large_max) {
            len = len * 2 < large_max ? len * 2 : large_max;
        }
    }
    src_conn_free(c);
    hd_free(buf);
    if (rc != HDMLP_OK) {
        hd_free(small);
        return hd_err_wrap(rc, "probe: %s: ", ds->path);
    }
    double mean = 0;
    for (uint32_t i = 0; i < ns; i++) {
        mean += small[i];
    }
    mean /= ns;
    qsort(small, ns, sizeof(double), cmp_double);
    const double median = small[ns / 2];
    hd_free(small);
    /* Bandwidth over the reads of the two largest sizes, each less one request's cost. */
    const uint64_t top = ll[nl - 1];
    double bytes = 0, secs = 0, plain_b = 0, plain_s = 0;
    for (uint32_t i = 0; i < nl; i++) {
        if (ll[i] * 2 >= top) {
            bytes += (double)(ll[i] - PROBE_SMALL_LEN);
            secs += lt[i] - median;
            plain_b += (double)ll[i];
            plain_s += lt[i];
        }
    }
    double bw = secs > 0.25 * plain_s ? bytes / secs : plain_b / plain_s;
    if (!(bw > 0) || !isfinite(bw)) {
        bw = plain_b / (plain_s > 0 ? plain_s : 1e-9);
    }
    double op = mean - (double)PROBE_SMALL_LEN / bw;
    out->op_us = op > 0 ? op * 1e6 : 0;
    out->bytes_per_s = bw;
    out->small_mean_us = mean * 1e6;
    out->small_median_us = median * 1e6;
    out->small_reads = ns;
    out->large_reads = nl;
    out->large_len = top;
    out->seconds = (double)(now_ns() - t0_ns) / 1e9;
    snprintf(out->text, sizeof(out->text),
             "%s: %.1f us/request (%u requests of 4 KiB, median %.1f us), %.0f MB/s (%u "
             "requests up to %llu KiB)",
             ds->path, out->op_us, ns, out->small_median_us, bw / 1e6, nl, (ull)(top >> 10));
    return HDMLP_OK;
}
