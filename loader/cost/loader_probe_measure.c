/* The probe's reads, page-cache checks and fit (loader_probe.h describes the method). */
#include "loader_probe_measure.h"

#include "fmt_rng.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef unsigned long long ull;

static void file_name(const probe_target *t, uint32_t i, char *buf, size_t cap)
{
    if (t->names != NULL && t->names[i] != NULL) {
        snprintf(buf, cap, "%s", t->names[i]);
    } else {
        snprintf(buf, cap, "%s[%u]", t->name, i);
    }
}

/* Reads exactly len bytes of file i at off (retrying EINTR and short reads). */
static int read_full(const probe_target *t, uint32_t i, uint8_t *buf, uint64_t len,
                     uint64_t off)
{
    uint64_t done = 0;
    while (done < len) {
        const ssize_t r =
            pread(t->fds[i], buf + done, (size_t)(len - done), (off_t)(off + done));
        if (r > 0) {
            done += (uint64_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR) {
            continue;
        }
        const int err = r < 0 ? errno : 0;
        char name[PROBE_NAME_MAX];
        file_name(t, i, name, sizeof(name));
        if (r == 0) {
            return hd_err(HDMLP_E_IO,
                          "probe: %s: unexpected end of file at offset %llu (given size %llu)",
                          name, (ull)(off + done), (ull)t->sizes[i]);
        }
        return hd_err(HDMLP_E_IO, "probe: %s: read of %llu bytes at offset %llu failed: %s",
                      name, (ull)len, (ull)off, strerror(err));
    }
    return HDMLP_OK;
}

/* 1 if any page of [off, off + len) of fd is in the page cache, 0 if none, -1 if it cannot
 * be told (the file cannot be mapped). */
static int resident(int fd, uint64_t off, uint64_t len)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    const uint64_t start = off - off % page;
    const uint64_t span = off + len - start;
    if (span > SIZE_MAX) {
        return -1;
    }
    void *map = mmap(NULL, (size_t)span, PROT_READ, MAP_SHARED, fd, (off_t)start);
    if (map == MAP_FAILED) {
        return -1;
    }
    int found = 0;
    unsigned char vec[256];
    for (uint64_t p = 0; p < span && !found; p += page * sizeof(vec)) {
        const uint64_t piece = span - p < page * sizeof(vec) ? span - p : page * sizeof(vec);
        if (mincore((uint8_t *)map + p, (size_t)piece, vec) != 0) {
            found = -1;
            break;
        }
        for (uint64_t k = 0; k < (piece + page - 1) / page; k++) {
            if (vec[k] & 1) {
                found = 1;
                break;
            }
        }
    }
    munmap(map, (size_t)span);
    return found;
}

/* 1 if mincore() tells the truth about fd's page cache, 0 if not, -1 if it cannot be told.
 * Linux reveals page-cache state only for files the caller owns or could open for writing
 * and otherwise reports every page resident; a page past the end of the file, which can
 * never be cached, shows which. */
static int mincore_honest(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 0) {
        return -1;
    }
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    const uint64_t past = ((uint64_t)st.st_size + page - 1) / page * page + page;
    void *map = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, (off_t)past);
    if (map == MAP_FAILED) {
        return -1;
    }
    unsigned char v = 0;
    const int rc = mincore(map, (size_t)page, &v);
    munmap(map, (size_t)page);
    return rc != 0 ? -1 : (v & 1) == 0;
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

typedef struct probe_plan {
    fmt_rng rng;
    uint64_t pages;    /* whole 4 KiB pages over all files */
    uint8_t *buffered; /* per file: 1 if its fd is not O_DIRECT */
    int8_t *honest;    /* per file: mincore_honest, 2 = not asked yet */
    uint64_t *small_ns;
    uint32_t n_small;      /* allowed, then made */
    uint32_t small_cached; /* buffered small reads of pages found in the page cache */
    int unknown;           /* residency of a buffered page could not be checked */
    uint32_t big;          /* file of the sequential reads */
    uint64_t large_start;  /* their first offset */
    uint64_t large_total;  /* planned bytes */
    uint64_t large_len[PROBE_MAX_LARGE];
    uint64_t large_ns[PROBE_MAX_LARGE];
    uint32_t n_large; /* planned, then made */
} probe_plan;

/* Plans the sequential reads (from a random aligned start in the largest file, sizes
 * doubling up to large_len) and sets up the draw of small-read offsets. */
static int plan_reads(const probe_target *t, const probe_limits *lim, probe_plan *p)
{
    uint64_t best = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        const uint64_t sz = probe_align_down(t->sizes[i]);
        p->pages += sz / PROBE_SMALL_LEN;
        if (sz > best) {
            best = sz;
            p->big = i;
        }
    }
    if (best < PROBE_MIN_FILE) {
        return hd_err(HDMLP_E_RANGE,
                      "probe: %s: too little data to measure (largest file %llu bytes, need "
                      "%llu)",
                      t->name, (ull)best, (ull)PROBE_MIN_FILE);
    }
    fmt_rng_seed(&p->rng, lim->seed, 0);
    p->n_small = lim->small_reads;
    p->small_ns = hd_calloc(p->n_small, sizeof(uint64_t));
    if (p->small_ns == NULL) {
        return hd_err(HDMLP_E_NOMEM, "probe: out of memory for %u reads", p->n_small);
    }
    uint64_t len = PROBE_MIN_FILE < lim->large_len ? PROBE_MIN_FILE : lim->large_len;
    while (p->n_large < lim->large_reads && p->large_total < best) {
        const uint64_t l = best - p->large_total < len ? best - p->large_total : len;
        p->large_len[p->n_large++] = l;
        p->large_total += l;
        len = len * 2 < lim->large_len ? len * 2 : lim->large_len;
    }
    const uint64_t slack = (best - p->large_total) / PROBE_SMALL_LEN;
    p->large_start = PROBE_SMALL_LEN * fmt_rng_below(&p->rng, slack + 1);
    return HDMLP_OK;
}

/* resident() for file i, or -1 where mincore would not tell the truth. */
static int file_resident(const probe_target *t, probe_plan *p, uint32_t i, uint64_t off,
                         uint64_t len)
{
    if (p->honest[i] == 2) {
        p->honest[i] = (int8_t)mincore_honest(t->fds[i]);
    }
    return p->honest[i] == 1 ? resident(t->fds[i], off, len) : -1;
}

/* Drops [off, off + len) of fd from the page cache: dirty pages are written back first
 * (their content is unchanged), as DONTNEED cannot drop pages under writeback. */
static void drop_range(int fd, uint64_t off, uint64_t len)
{
    (void)sync_file_range(fd, (off_t)off, (off_t)len,
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                              SYNC_FILE_RANGE_WAIT_AFTER);
    (void)posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
}

/* Drops the sequential range from the page cache (widened to 2 MiB boundaries, so that
 * large folios straddling its ends go too) and tells whether any of it stayed: 1 yes (a
 * RAM-backed file system, or pages pinned by a mapping), 0 no, -1 cannot tell. */
static int drop_large(const probe_target *t, probe_plan *p)
{
    const uint64_t huge = UINT64_C(2) << 20;
    const uint64_t lo = p->large_start - p->large_start % huge;
    const uint64_t hi = p->large_start + p->large_total + huge - 1;
    drop_range(t->fds[p->big], lo, hi - hi % huge - lo);
    return file_resident(t, p, p->big, p->large_start, p->large_total);
}

/* Draws the next small read: a page uniform over all files' whole pages. For a buffered
 * fd the page is dropped from the page cache and, if it stays resident, another is drawn
 * (a few times): the offsets least likely to be served from memory. */
static void draw_small(const probe_target *t, probe_plan *p, uint32_t *file, uint64_t *off)
{
    for (int attempt = 0;; attempt++) {
        uint64_t page = fmt_rng_below(&p->rng, p->pages);
        uint32_t i = 0;
        while (page >= probe_align_down(t->sizes[i]) / PROBE_SMALL_LEN) {
            page -= probe_align_down(t->sizes[i]) / PROBE_SMALL_LEN;
            i++;
        }
        *file = i;
        *off = page * PROBE_SMALL_LEN;
        if (!p->buffered[i]) {
            return; /* O_DIRECT: the storage is read whatever the cache holds */
        }
        drop_range(t->fds[i], *off, PROBE_SMALL_LEN);
        const int res = file_resident(t, p, i, *off, PROBE_SMALL_LEN);
        if (res < 0) {
            p->unknown = 1;
            return;
        }
        if (res == 0) {
            return;
        }
        if (attempt == 3) {
            p->small_cached++;
            return;
        }
    }
}

/* The measurement: small reads, then sequential reads, within lim and the deadline. The
 * first of each is always made. */
static int measure(const probe_target *t, const probe_limits *lim, uint64_t deadline,
                   probe_plan *p, uint8_t *buf, uint64_t *bytes)
{
    const uint64_t start = probe_now_ns();
    const uint64_t left = deadline > start ? deadline - start : 0;
    const uint64_t small_end = start + (uint64_t)((double)left * PROBE_SMALL_SHARE);
    const uint64_t small_cap = lim->max_bytes - p->large_len[0];
    uint32_t made = 0;
    for (; made < p->n_small; made++) {
        if (made > 0 && (probe_now_ns() >= small_end || *bytes + PROBE_SMALL_LEN > small_cap)) {
            break;
        }
        uint32_t file;
        uint64_t off;
        draw_small(t, p, &file, &off);
        const uint64_t t1 = probe_now_ns();
        const int rc = read_full(t, file, buf, PROBE_SMALL_LEN, off);
        if (rc != HDMLP_OK) {
            return rc;
        }
        p->small_ns[made] = probe_now_ns() - t1;
        *bytes += PROBE_SMALL_LEN;
    }
    p->n_small = made;
    uint64_t off = p->large_start;
    made = 0;
    for (; made < p->n_large; made++) {
        uint64_t len = p->large_len[made];
        if (*bytes + len > lim->max_bytes) {
            len = probe_align_down(lim->max_bytes - *bytes);
        }
        const uint64_t t1 = probe_now_ns();
        if (made > 0) {
            const double predicted =
                (double)p->large_ns[made - 1] * (double)len / (double)p->large_len[made - 1];
            if (len < p->large_len[0] || (double)t1 + predicted > (double)deadline) {
                break;
            }
        }
        const int rc = read_full(t, p->big, buf, len, off);
        if (rc != HDMLP_OK) {
            return rc;
        }
        p->large_ns[made] = probe_now_ns() - t1;
        p->large_len[made] = len;
        *bytes += len;
        off += len;
    }
    p->n_large = made;
    return HDMLP_OK;
}

/* Turns the timings into the cost model. The per-operation cost uses the mean small-read
 * time, not the median: the model prices a sum of operations, and throttled or queued
 * storage (e.g. a token bucket letting bursts through) shows its cost only on average. */
static void fit(probe_plan *p, probe_result *out)
{
    double sum = 0.0;
    for (uint32_t k = 0; k < p->n_small; k++) {
        sum += (double)p->small_ns[k];
    }
    const double ts = sum / p->n_small;
    qsort(p->small_ns, p->n_small, sizeof(uint64_t), cmp_u64);
    const uint32_t h = p->n_small / 2;
    const double median = p->n_small % 2 ? (double)p->small_ns[h]
                                         : 0.5 * (double)(p->small_ns[h - 1] + p->small_ns[h]);
    uint64_t top = 0;
    for (uint32_t j = 0; j < p->n_large; j++) {
        top = p->large_len[j] > top ? p->large_len[j] : top;
    }
    /* A large read is one operation: take the typical (median) one out of its time. */
    double num = 0.0, den = 0.0, top_b = 0.0, top_t = 0.0;
    for (uint32_t j = 0; j < p->n_large; j++) {
        if (2 * p->large_len[j] >= top) {
            top_b += (double)p->large_len[j];
            top_t += (double)p->large_ns[j];
            num += (double)(p->large_len[j] - PROBE_SMALL_LEN);
            den += (double)p->large_ns[j] - median;
        }
    }
    /* Where the operation part dominates the large reads (they are short, or storage
     * serves bursts), the difference is noise: plain bytes over time, a lower bound. */
    const double bw =
        den > 0.25 * top_t && num > 0.0 ? num / den * 1e9 : top_b / fmax(top_t, 1.0) * 1e9;
    const double op_ns = ts - (double)PROBE_SMALL_LEN / bw * 1e9;
    out->small_mean_us = ts / 1000.0;
    out->small_median_us = median / 1000.0;
    out->bytes_per_s = bw;
    out->op_us = op_ns > 0.0 ? op_ns / 1000.0 : 0.0;
    out->small_reads = p->n_small;
    out->large_reads = p->n_large;
    out->large_len = top;
}

int probe_measure(const probe_target *t, const probe_limits *lim, uint64_t t0,
                  probe_result *out)
{
    probe_plan p;
    memset(&p, 0, sizeof(p));
    p.buffered = hd_calloc(t->n, 1);
    p.honest = hd_malloc(t->n);
    if (p.buffered == NULL || p.honest == NULL) {
        hd_free(p.buffered);
        hd_free(p.honest);
        return hd_err(HDMLP_E_NOMEM, "probe: out of memory for %u files", t->n);
    }
    int direct = 1, rc = HDMLP_OK;
    for (uint32_t i = 0; i < t->n && rc == HDMLP_OK; i++) {
        const int fl = fcntl(t->fds[i], F_GETFL);
        if (fl < 0) {
            const int err = errno;
            char name[PROBE_NAME_MAX];
            file_name(t, i, name, sizeof(name));
            rc = hd_err(HDMLP_E_IO, "probe: %s: not an open file: %s", name, strerror(err));
            break;
        }
        p.buffered[i] = (fl & O_DIRECT) == 0;
        p.honest[i] = 2;
        direct &= !p.buffered[i];
    }
    if (rc == HDMLP_OK) {
        rc = plan_reads(t, lim, &p);
    }
    uint8_t *buf = NULL;
    size_t buf_len = 0;
    if (rc == HDMLP_OK) {
        for (uint32_t j = 0; j < p.n_large; j++) {
            buf_len = p.large_len[j] > buf_len ? (size_t)p.large_len[j] : buf_len;
        }
        buf = hd_map_alloc(buf_len);
        if (buf == NULL) {
            rc = hd_err(HDMLP_E_NOMEM, "probe: cannot map a %zu-byte read buffer", buf_len);
        }
    }
    uint64_t bytes = 0;
    int large_res = 0;
    if (rc == HDMLP_OK) {
        large_res = drop_large(t, &p);
        const uint64_t deadline = t0 + (uint64_t)(lim->max_seconds * 1e9);
        rc = measure(t, lim, deadline, &p, buf, &bytes);
    }
    if (rc == HDMLP_OK) {
        fit(&p, out);
        out->bytes = bytes;
        out->direct = direct;
        out->cached_guess =
            large_res == 1 || p.small_cached > 0 || (!direct && (large_res < 0 || p.unknown));
        out->seconds = (double)(probe_now_ns() - t0) / 1e9;
        snprintf(out->text, sizeof(out->text),
                 "%s: %.1f us/op (4 KiB mean %.1f, median %.1f us), %.0f MB/s (%s%s; %u x 4 "
                 "KiB + %u sequential up to %llu KiB, %.1f MiB in %.3f s)",
                 t->name, out->op_us, out->small_mean_us, out->small_median_us,
                 out->bytes_per_s / 1e6, direct ? "direct" : "buffered",
                 out->cached_guess ? ", may be cached" : "", out->small_reads, out->large_reads,
                 (ull)(out->large_len >> 10), (double)bytes / (1024.0 * 1024.0), out->seconds);
    }
    if (buf != NULL) {
        hd_map_free(buf, buf_len);
    }
    hd_free(p.small_ns);
    hd_free(p.buffered);
    hd_free(p.honest);
    return rc;
}
