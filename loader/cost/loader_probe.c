/* Storage probe: per-operation cost and bandwidth from a short, bounded burst of reads
 * (mechanism only; see loader_probe.h for the method and the bounds). */
#include "loader_probe.h"
#include "loader_probe_measure.h"
#include "loader_probe_remote.h"

#include "fmt_rng.h"
#include "loader_dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef unsigned long long ull;

#define PROBE_DEFAULT_SECONDS 0.5
#define PROBE_DEFAULT_BYTES (UINT64_C(64) << 20)
#define PROBE_DEFAULT_SMALL 256u
#define PROBE_DEFAULT_LARGE 8u
#define PROBE_DEFAULT_LARGE_LEN (UINT64_C(4) << 20)
#define PROBE_DEFAULT_SCRATCH (UINT64_C(32) << 20)
#define PROBE_DEFAULT_SEED UINT64_C(0x9e0be5eed)
#define PROBE_MAX_SMALL 65536u
#define PROBE_MAX_LEN (UINT64_C(1) << 30)
#define PROBE_MAX_SEGMENTS 64u
#define PROBE_WRITE_LEN (UINT64_C(1) << 20)

void probe_limits_default(probe_limits *lim)
{
    memset(lim, 0, sizeof(*lim));
    lim->max_seconds = PROBE_DEFAULT_SECONDS;
    lim->max_bytes = PROBE_DEFAULT_BYTES;
    lim->small_reads = PROBE_DEFAULT_SMALL;
    lim->large_reads = PROBE_DEFAULT_LARGE;
    lim->large_len = PROBE_DEFAULT_LARGE_LEN;
    lim->scratch_bytes = PROBE_DEFAULT_SCRATCH;
    lim->seed = PROBE_DEFAULT_SEED;
}

/* Checks lim (NULL = defaults) and fills in its zero fields. */
static int limits_resolve(const probe_limits *lim, probe_limits *r)
{
    if (lim == NULL) {
        probe_limits_default(r);
        return HDMLP_OK;
    }
    *r = *lim;
    if (!(r->max_seconds > 0.0) || !(r->max_seconds <= 60.0)) {
        return hd_err(HDMLP_E_INVAL, "probe: time limit %g s is outside (0, 60]",
                      r->max_seconds);
    }
    if (r->max_bytes < PROBE_MIN_FILE) {
        return hd_err(HDMLP_E_INVAL, "probe: byte limit %llu is below %llu", (ull)r->max_bytes,
                      (ull)PROBE_MIN_FILE);
    }
    if (r->small_reads == 0) {
        r->small_reads = PROBE_DEFAULT_SMALL;
    }
    if (r->large_reads == 0) {
        r->large_reads = PROBE_DEFAULT_LARGE;
    }
    if (r->large_len == 0) {
        r->large_len = PROBE_DEFAULT_LARGE_LEN;
    }
    if (r->scratch_bytes == 0) {
        r->scratch_bytes = PROBE_DEFAULT_SCRATCH;
    }
    if (r->small_reads > PROBE_MAX_SMALL || r->large_reads > PROBE_MAX_LARGE) {
        return hd_err(HDMLP_E_INVAL, "probe: %u small / %u large reads exceed %u / %u",
                      r->small_reads, r->large_reads, PROBE_MAX_SMALL, PROBE_MAX_LARGE);
    }
    if (r->large_len > PROBE_MAX_LEN || r->scratch_bytes > 64 * PROBE_MAX_LEN) {
        return hd_err(HDMLP_E_INVAL, "probe: read length %llu or scratch size %llu too large",
                      (ull)r->large_len, (ull)r->scratch_bytes);
    }
    r->large_len = probe_align_down(r->large_len + PROBE_SMALL_LEN - 1);
    r->scratch_bytes = probe_align_down(r->scratch_bytes + PROBE_SMALL_LEN - 1);
    if (r->scratch_bytes < PROBE_MIN_FILE) {
        return hd_err(HDMLP_E_INVAL, "probe: scratch size %llu is below %llu",
                      (ull)r->scratch_bytes, (ull)PROBE_MIN_FILE);
    }
    return HDMLP_OK;
}

int probe_storage(const probe_target *t, const probe_limits *lim, probe_result *out)
{
    const uint64_t t0 = probe_now_ns();
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "probe: out is NULL");
    }
    memset(out, 0, sizeof(*out));
    if (t == NULL || t->n == 0 || t->fds == NULL || t->sizes == NULL || t->name == NULL) {
        return hd_err(HDMLP_E_INVAL, "probe: the target needs a name and at least one file");
    }
    probe_limits r;
    const int rc = limits_resolve(lim, &r);
    if (rc != HDMLP_OK) {
        return rc;
    }
    return probe_measure(t, &r, t0, out);
}

/* ---- datasets ------------------------------------------------------------------------ */

int probe_dataset(hdmlp_dataset *ds, int direct, const probe_limits *lim, probe_result *out)
{
    const uint64_t t0 = probe_now_ns();
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "probe: out is NULL");
    }
    memset(out, 0, sizeof(*out));
    if (ds == NULL || (direct != 0 && direct != 1)) {
        return hd_err(HDMLP_E_INVAL, "probe: a dataset and direct 0 or 1 are required");
    }
    probe_limits r;
    int rc = limits_resolve(lim, &r);
    if (rc != HDMLP_OK) {
        return rc;
    }
    if (ds->store != NULL) {
        return probe_remote(ds, &r, t0, out); /* an object store: range GETs */
    }
    const uint32_t n_seg = ds->ix.h.n_segments;
    if (n_seg == 0) {
        return hd_err(HDMLP_E_RANGE, "probe: %s: no segment files to measure", ds->path);
    }
    /* Segments spread evenly over the dataset, the largest one always among them. */
    const uint32_t m = n_seg < PROBE_MAX_SEGMENTS ? n_seg : PROBE_MAX_SEGMENTS;
    uint32_t seg[PROBE_MAX_SEGMENTS];
    uint32_t largest = 0;
    uint64_t largest_size = 0;
    for (uint32_t s = 0; s < n_seg; s++) {
        fmt_segment fs;
        fmt_index_segment(&ds->ix, s, &fs);
        if (fs.size > largest_size) {
            largest_size = fs.size;
            largest = s;
        }
    }
    int have_largest = 0;
    for (uint32_t k = 0; k < m; k++) {
        seg[k] = (uint32_t)((uint64_t)k * n_seg / m);
        have_largest |= seg[k] == largest;
    }
    if (!have_largest) {
        seg[m - 1] = largest;
    }
    int fds[PROBE_MAX_SEGMENTS];
    uint64_t sizes[PROBE_MAX_SEGMENTS];
    char *names[PROBE_MAX_SEGMENTS];
    for (uint32_t k = 0; k < m; k++) {
        fds[k] = -1;
        names[k] = NULL;
    }
    int try_direct = 1;
    for (uint32_t k = 0; k < m && rc == HDMLP_OK; k++) {
        fmt_segment fs;
        fmt_index_segment(&ds->ix, seg[k], &fs);
        sizes[k] = fs.size;
        names[k] = hd_malloc(PROBE_NAME_MAX);
        if (names[k] == NULL) {
            rc = hd_err(HDMLP_E_NOMEM, "probe: out of memory");
            break;
        }
        ds_segment_path(ds, seg[k], names[k], PROBE_NAME_MAX);
        fds[k] = try_direct ? open(names[k], O_RDONLY | O_CLOEXEC | O_DIRECT) : -1;
        if (fds[k] < 0 && try_direct && errno == EINVAL) {
            if (direct) {
                rc = hd_err(HDMLP_E_UNSUPPORTED,
                            "%s: O_DIRECT is not supported by this file system", names[k]);
                break;
            }
            try_direct = 0;
        }
        if (fds[k] < 0 && !try_direct) {
            fds[k] = open(names[k], O_RDONLY | O_CLOEXEC);
        }
        if (fds[k] < 0) {
            const int err = errno;
            rc = hd_err(hd_errno_code(err), "%s: open: %s", names[k], strerror(err));
        }
    }
    if (rc == HDMLP_OK) {
        const probe_target t = {fds, sizes, (const char *const *)names, m, ds->path};
        rc = probe_measure(&t, &r, t0, out);
    }
    for (uint32_t k = 0; k < m; k++) {
        if (fds[k] >= 0) {
            close(fds[k]);
        }
        hd_free(names[k]);
    }
    return rc;
}

/* ---- directories --------------------------------------------------------------------- */

/* Fills a scratch file of `size` bytes with pseudo-random data (no holes, nothing a file
 * system could compress or deduplicate) and makes it durable. */
static int scratch_fill(int fd, int direct, uint64_t size, uint64_t seed, const char *dir)
{
    uint8_t *buf = hd_map_alloc(PROBE_WRITE_LEN);
    if (buf == NULL) {
        return hd_err(HDMLP_E_NOMEM, "probe: cannot map a write buffer");
    }
    fmt_rng rng;
    fmt_rng_seed(&rng, seed, 1);
    for (uint64_t k = 0; k < PROBE_WRITE_LEN; k += 8) {
        fmt_st64(buf + k, fmt_rng_next(&rng));
    }
    int rc = HDMLP_OK;
    for (uint64_t off = 0; off < size && rc == HDMLP_OK;) {
        const uint64_t len = size - off < PROBE_WRITE_LEN ? size - off : PROBE_WRITE_LEN;
        for (uint64_t k = 0; k < len; k += PROBE_SMALL_LEN) {
            fmt_st64(buf + k, off + k); /* every page differs */
        }
        for (uint64_t done = 0; done < len;) {
            const ssize_t w = pwrite(fd, buf + done, (size_t)(len - done), (off_t)(off + done));
            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w <= 0) {
                const int err = w < 0 ? errno : ENOSPC;
                rc = hd_err(hd_errno_code(err) == HDMLP_E_NOSPC ? HDMLP_E_NOSPC : HDMLP_E_IO,
                            "probe: %s: cannot write a %llu-byte scratch file: %s", dir,
                            (ull)size, strerror(err));
                break;
            }
            done += (uint64_t)w;
        }
        off += len;
    }
    hd_map_free(buf, PROBE_WRITE_LEN);
    if (rc == HDMLP_OK && fsync(fd) != 0) {
        const int err = errno;
        rc = hd_err(HDMLP_E_IO, "probe: %s: fsync of the scratch file: %s", dir, strerror(err));
    }
    if (rc == HDMLP_OK && !direct) {
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    return rc;
}

int probe_directory(const char *dir, const probe_limits *lim, probe_result *out)
{
    const uint64_t t0 = probe_now_ns();
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "probe: out is NULL");
    }
    memset(out, 0, sizeof(*out));
    if (dir == NULL || dir[0] == '\0') {
        return hd_err(HDMLP_E_INVAL, "probe: no directory given");
    }
    probe_limits r;
    int rc = limits_resolve(lim, &r);
    if (rc != HDMLP_OK) {
        return rc;
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        const int err = errno;
        return hd_err(hd_errno_code(err), "probe: %s: %s", dir, strerror(err));
    }
    if (!S_ISDIR(st.st_mode)) {
        return hd_err(HDMLP_E_NOTFOUND, "probe: %s: not a directory", dir);
    }
    char path[PROBE_NAME_MAX];
    const int n = snprintf(path, sizeof(path), "%s/.hdmlp-probe-XXXXXX", dir);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        return hd_err(HDMLP_E_INVAL, "probe: directory name too long: %s", dir);
    }
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        const int code = hd_errno_code(err);
        return hd_err(code == HDMLP_E_NOSPC || code == HDMLP_E_NOTFOUND ? code : HDMLP_E_IO,
                      "probe: %s: cannot create a scratch file: %s", dir, strerror(err));
    }
    const int dfd = open(path, O_RDWR | O_CLOEXEC | O_DIRECT);
    /* The name goes at once: nothing is left behind whatever happens next. */
    if (unlink(path) != 0) {
        const int err = errno;
        if (dfd >= 0) {
            close(dfd);
        }
        close(fd);
        return hd_err(HDMLP_E_IO, "probe: %s: cannot remove the scratch file: %s", path,
                      strerror(err));
    }
    int direct = 0;
    if (dfd >= 0) {
        close(fd);
        fd = dfd;
        direct = 1;
    }
    rc = scratch_fill(fd, direct, r.scratch_bytes, r.seed, dir);
    if (rc == HDMLP_OK) {
        const uint64_t size = r.scratch_bytes;
        const char *const name = dir;
        const probe_target t = {&fd, &size, &name, 1, dir};
        rc = probe_measure(&t, &r, t0, out);
    }
    close(fd);
    return rc;
}
