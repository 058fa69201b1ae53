/*
 * Storage probe tests, a throttled disk: the probe sees an IOPS and a bandwidth limit set
 * through cgroup v1 blkio (skipped where it is not writable). Part of the test_probe
 * binary.
 */
#include "hdmlp.h"
#include "loader_probe.h"
#include "support/probe_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* ---- a throttled disk (cgroup v1 blkio) ---------------------------------------------- */

#define BLKIO "/sys/fs/cgroup/blkio"

static int write_str(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return -1;
    }
    const int ok = fputs(s, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* "MAJ:MIN" of the whole disk holding dir (a partition maps to its disk), or -1. */
static int disk_of(const char *dir, char *buf, size_t cap)
{
    struct stat st;
    if (stat(dir, &st) != 0 || major(st.st_dev) == 0) {
        return -1;
    }
    char sys[128];
    snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/partition", major(st.st_dev),
             minor(st.st_dev));
    if (access(sys, F_OK) == 0) {
        snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/../dev", major(st.st_dev),
                 minor(st.st_dev));
        FILE *f = fopen(sys, "r");
        if (f == NULL || fgets(buf, (int)cap, f) == NULL) {
            if (f != NULL) {
                fclose(f);
            }
            return -1;
        }
        fclose(f);
        buf[strcspn(buf, "\n")] = '\0';
        return 0;
    }
    snprintf(buf, cap, "%u:%u", major(st.st_dev), minor(st.st_dev));
    return 0;
}

/* Moves this test process into a new blkio group with `rule` (e.g. read_iops_device =
 * 150) on dir's disk; skips the test where that is not possible. */
static void throttle_enter(const char *dir, const char *file, uint64_t value, char *cg,
                           size_t cap)
{
    char dev[64];
    if (disk_of(dir, dev, sizeof(dev)) != 0) {
        cr_skip_test("no block device behind %s", dir);
    }
    snprintf(cg, cap, BLKIO "/hdmlp-probe-%d", (int)getpid());
    if (mkdir(cg, 0755) != 0 && errno != EEXIST) {
        cr_skip_test("cgroup v1 blkio not writable: %s", strerror(errno));
    }
    char path[600], line[128];
    snprintf(path, sizeof(path), "%s/blkio.throttle.%s", cg, file);
    snprintf(line, sizeof(line), "%s %llu\n", dev, (unsigned long long)value);
    if (write_str(path, line) != 0) {
        rmdir(cg);
        cr_skip_test("cannot set %s to %s", path, line);
    }
    snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
    snprintf(line, sizeof(line), "%d\n", (int)getpid());
    if (write_str(path, line) != 0) {
        rmdir(cg);
        cr_skip_test("cannot join %s", cg);
    }
    cr_log_info("throttle %s: %s %llu", cg, file, (unsigned long long)value);
}

static void throttle_leave(const char *cg)
{
    char line[32];
    snprintf(line, sizeof(line), "%d\n", (int)getpid());
    cr_assert_eq(write_str(BLKIO "/cgroup.procs", line), 0);
    cr_assert_eq(rmdir(cg), 0, "rmdir %s: %s", cg, strerror(errno));
}

typedef struct timed_probe {
    int rc;
    char err[512];
    probe_limits lim;
    probe_result r;
    double wall;
} timed_probe;

/* Probes dir without asserting (a throttled test must leave its group first); lim NULL =
 * defaults. */
static timed_probe probe_dir_timed(const char *dir, const probe_limits *lim)
{
    timed_probe p;
    probe_limits_default(&p.lim);
    if (lim != NULL) {
        p.lim = *lim;
    }
    const double t0 = now_s();
    p.rc = probe_directory(dir, &p.lim, &p.r);
    p.wall = now_s() - t0;
    snprintf(p.err, sizeof(p.err), "%s", hdmlp_last_error());
    return p;
}

static probe_result probe_dir_check(const timed_probe *p, const char *what)
{
    cr_assert_eq(p->rc, HDMLP_OK, "%s", p->err);
    check_sane(&p->r, &p->lim, p->wall);
    cr_assert_eq(p->r.cached_guess, 0, "%s", p->r.text);
    fprintf(stderr, "probe (%s): %s; median 4 KiB %.1f us\n", what, p->r.text,
            p->r.small_median_us);
    return p->r;
}

Test(probe, sees_an_iops_throttle, .timeout = 60)
{
    char dir[512], cg[256];
    cr_assert_eq(testds_mkdtemp("probe-iops", dir, sizeof(dir)), 0);
    const timed_probe b = probe_dir_timed(dir, NULL);
    const probe_result base = probe_dir_check(&b, "unthrottled");
    throttle_enter(dir, "read_iops_device", 150, cg, sizeof(cg));
    const timed_probe t = probe_dir_timed(dir, NULL);
    throttle_leave(cg);
    const probe_result r = probe_dir_check(&t, "150 IOPS");
    cr_assert_eq(testds_rm_rf(dir), 0);
    if (!base.direct) {
        cr_skip_test("no O_DIRECT: the throttle cannot be told from the page cache");
    }
    /* 150 IOPS: one operation every 6.7 ms (the group's first burst lowers the mean). */
    cr_assert(r.op_us > 3000.0 && r.op_us < 12000.0, "op %.0f us under 150 IOPS", r.op_us);
}

Test(probe, sees_a_bandwidth_throttle, .timeout = 60)
{
    char dir[512], cg[256];
    cr_assert_eq(testds_mkdtemp("probe-bps", dir, sizeof(dir)), 0);
    const timed_probe b = probe_dir_timed(dir, NULL);
    const probe_result base = probe_dir_check(&b, "unthrottled");
    /* A longer probe too: blk-throttle lets a fresh 100 ms slice's worth (10 MB) through
     * at once, which weighs on the default probe's ~20 MiB of sequential reads. */
    probe_limits longer;
    probe_limits_default(&longer);
    longer.max_seconds = 3.0;
    longer.max_bytes = UINT64_C(256) << 20;
    longer.large_reads = 64;
    longer.scratch_bytes = UINT64_C(160) << 20;
    throttle_enter(dir, "read_bps_device", 100000000, cg, sizeof(cg));
    const timed_probe t = probe_dir_timed(dir, NULL);
    const timed_probe tl = probe_dir_timed(dir, &longer);
    throttle_leave(cg);
    const probe_result r = probe_dir_check(&t, "100 MB/s");
    const probe_result rl = probe_dir_check(&tl, "100 MB/s, 3 s / 256 MiB limits");
    cr_assert_eq(testds_rm_rf(dir), 0);
    if (!base.direct) {
        cr_skip_test("no O_DIRECT: the throttle cannot be told from the page cache");
    }
    cr_assert_lt(r.bytes_per_s, 300e6, "%.0f MB/s under 100 MB/s", r.bytes_per_s / 1e6);
    cr_assert_lt(r.bytes_per_s, 0.5 * base.bytes_per_s);
    cr_assert(rl.bytes_per_s > 60e6 && rl.bytes_per_s < 150e6, "%.0f MB/s under 100 MB/s",
              rl.bytes_per_s / 1e6);
}
