/*
 * Fixtures of the storage probe tests (see probe_fixture.h).
 */
#include "support/probe_fixture.h"

#include "format.h"
#include "hdmlp.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *tmp_dir(void)
{
    const char *const d = getenv("HDMLP_TEST_TMP");
    return d != NULL && d[0] != '\0' ? d : "/tmp";
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

tfile tfile_make(const char *dir, uint64_t size, int flags)
{
    char path[512];
    mkdir(dir, 0755);
    snprintf(path, sizeof(path), "%s/test_probe.XXXXXX", dir);
    const int wfd = mkstemp(path);
    cr_assert_geq(wfd, 0, "mkstemp(%s): %s", path, strerror(errno));
    uint8_t *page = malloc(65536);
    cr_assert_not_null(page);
    memset(page, 0xa5, 65536);
    for (uint64_t off = 0; off < size;) {
        const uint64_t len = size - off < 65536 ? size - off : 65536;
        fmt_st64(page, off);
        const ssize_t w = pwrite(wfd, page, (size_t)len, (off_t)off);
        cr_assert_gt(w, 0, "write: %s", strerror(errno));
        off += (uint64_t)w;
    }
    free(page);
    fsync(wfd);
    close(wfd);
    tfile t = {-1, 0, size};
    if (flags & O_DIRECT) {
        t.fd = open(path, O_RDONLY | O_DIRECT);
        t.direct = t.fd >= 0;
    }
    if (t.fd < 0) {
        t.fd = open(path, (flags & O_WRONLY) ? O_WRONLY : O_RDONLY);
    }
    unlink(path);
    cr_assert_geq(t.fd, 0, "open(%s): %s", path, strerror(errno));
    return t;
}

probe_target target_of(const tfile *t, const char *const *name)
{
    return (probe_target){&t->fd, &t->size, name, 1, name[0]};
}

void check_sane(const probe_result *r, const probe_limits *lim, double wall)
{
    cr_assert(r->op_us >= 0.0 && isfinite(r->op_us), "op_us %g", r->op_us);
    cr_assert(r->bytes_per_s > 0.0 && isfinite(r->bytes_per_s), "bandwidth %g", r->bytes_per_s);
    cr_assert(r->small_median_us > 0.0 && isfinite(r->small_median_us));
    cr_assert_geq(r->small_reads, 1);
    cr_assert_geq(r->large_reads, 1);
    cr_assert_gt(r->bytes, 0);
    cr_assert_leq(r->bytes, lim->max_bytes, "read %llu bytes, limit %llu",
                  (unsigned long long)r->bytes, (unsigned long long)lim->max_bytes);
    cr_assert_leq(r->seconds, lim->max_seconds + SLACK_S, "took %.3f s, limit %.3f s",
                  r->seconds, lim->max_seconds);
    cr_assert_leq(r->seconds, wall + 1e-3, "reported %.4f s, measured %.4f s", r->seconds,
                  wall);
    cr_assert_leq(wall, lim->max_seconds + SLACK_S, "took %.3f s (outside), limit %.3f s", wall,
                  lim->max_seconds);
    cr_assert_neq(r->text[0], '\0');
}

/* Probes a file with lim, checks the bounds and prints the figures. */
probe_result probe_file(const tfile *t, const probe_limits *lim)
{
    const char *const name[] = {"temp file"};
    const probe_target tg = target_of(t, name);
    probe_result r;
    const double t0 = now_s();
    const int rc = probe_storage(&tg, lim, &r);
    const double wall = now_s() - t0;
    cr_assert_eq(rc, HDMLP_OK, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    check_sane(&r, lim, wall);
    cr_log_info("seed %#llx: %s", (unsigned long long)lim->seed, r.text);
    return r;
}
