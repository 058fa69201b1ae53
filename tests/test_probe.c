/*
 * Storage probe tests (loader_probe.c): figures are positive and finite, time and byte
 * limits hold, tiny targets and unreadable files give clear errors, the directory probe
 * leaves nothing behind, RAM-backed storage is flagged, and the probe sees a throttled disk
 * (cgroup v1 blkio; skipped where it is not writable). Temporary files live in
 * $HDMLP_TEST_TMP (fallback /tmp). The probe's seed is fixed and printed.
 */
#include "format.h"
#include "hdmlp.h"
#include "loader_probe.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define SLACK_S 0.25 /* one read past the limit, plus scheduling noise */

static const char *tmp_dir(void)
{
    const char *const d = getenv("HDMLP_TEST_TMP");
    return d != NULL && d[0] != '\0' ? d : "/tmp";
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct tfile {
    int fd;
    int direct; /* fd is O_DIRECT */
    uint64_t size;
} tfile;

/* A temp file of `size` bytes (distinct non-zero pages), durable, already unlinked, opened
 * read-only (`flags`: O_DIRECT where wanted and allowed, or O_WRONLY for a bad fd). */
static tfile tfile_make(const char *dir, uint64_t size, int flags)
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

static probe_target target_of(const tfile *t, const char *const *name)
{
    return (probe_target){&t->fd, &t->size, name, 1, name[0]};
}

static void check_sane(const probe_result *r, const probe_limits *lim, double wall)
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
static probe_result probe_file(const tfile *t, const probe_limits *lim)
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

Test(probe, temp_file_within_default_limits, .timeout = 60)
{
    const tfile t = tfile_make(tmp_dir(), 48 * MIB, O_DIRECT);
    probe_limits lim;
    probe_limits_default(&lim);
    const probe_result r = probe_file(&t, &lim);
    cr_assert_eq(r.direct, t.direct);
    cr_assert_leq(r.small_reads, lim.small_reads);
    cr_assert_leq(r.large_reads, lim.large_reads);
    cr_assert_leq(r.large_len, lim.large_len);
    close(t.fd);
}

Test(probe, byte_limit_is_never_exceeded, .timeout = 60)
{
    const tfile t = tfile_make(tmp_dir(), 48 * MIB, O_DIRECT);
    probe_limits lim;
    probe_limits_default(&lim);
    const uint64_t caps[] = {PROBE_MIN_FILE, MIB, 3 * MIB + 12345, 10 * MIB};
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        lim.max_bytes = caps[i];
        const probe_result r = probe_file(&t, &lim);
        cr_assert_leq(r.bytes, caps[i]);
    }
    close(t.fd);
}

Test(probe, time_limit_is_honoured, .timeout = 60)
{
    const tfile t = tfile_make(tmp_dir(), 48 * MIB, O_DIRECT);
    probe_limits lim;
    probe_limits_default(&lim);
    lim.small_reads = 65536; /* far more than fit in the time */
    lim.large_reads = 64;
    lim.max_bytes = UINT64_C(1) << 40;
    const double limits[] = {0.005, 0.03, 0.1};
    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        lim.max_seconds = limits[i];
        const probe_result r = probe_file(&t, &lim);
        cr_assert_lt(r.small_reads, lim.small_reads, "the time limit stopped nothing");
    }
    close(t.fd);
}

Test(probe, buffered_fd_is_reported, .timeout = 60)
{
    const tfile t = tfile_make(tmp_dir(), 8 * MIB, 0);
    probe_limits lim;
    probe_limits_default(&lim);
    const probe_result r = probe_file(&t, &lim);
    cr_assert_eq(r.direct, 0);
    cr_log_info("buffered: cached_guess %d (0 expected on a disk file system)", r.cached_guess);
    close(t.fd);
}

Test(probe, ram_backed_file_is_flagged_as_cached, .timeout = 60)
{
    struct stat st;
    if (stat("/dev/shm", &st) != 0 || !S_ISDIR(st.st_mode)) {
        cr_skip_test("no /dev/shm");
    }
    const int flags[] = {0, O_DIRECT};
    for (size_t i = 0; i < 2; i++) {
        const tfile t = tfile_make("/dev/shm", 4 * MIB, flags[i]);
        probe_limits lim;
        probe_limits_default(&lim);
        const probe_result r = probe_file(&t, &lim);
        cr_assert_eq(r.cached_guess, 1, "tmpfs not flagged: %s", r.text);
        close(t.fd);
    }
}

/* Not the owner, no write permission: mincore() reports every page resident, which the
 * probe must notice instead of flagging a direct probe of a disk file as cached. A child
 * drops to user nobody to probe a root-owned, world-readable file. */
Test(probe, unowned_file_is_not_flagged_as_cached, .timeout = 60)
{
    if (geteuid() != 0) {
        cr_skip_test("needs root to switch to another user");
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/test_probe.XXXXXX", tmp_dir());
    const int wfd = mkstemp(path);
    cr_assert_geq(wfd, 0);
    cr_assert_eq(fchmod(wfd, 0644), 0);
    cr_assert_eq(ftruncate(wfd, 0), 0);
    uint8_t page[4096];
    for (uint64_t off = 0; off < 4 * MIB; off += sizeof(page)) {
        memset(page, 0x5a, sizeof(page));
        fmt_st64(page, off);
        cr_assert_eq(pwrite(wfd, page, sizeof(page), (off_t)off), (ssize_t)sizeof(page));
    }
    fsync(wfd);
    close(wfd);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) {
            _exit(10);
        }
        const int fd = open(path, O_RDONLY | O_DIRECT);
        if (fd < 0) {
            _exit(errno == EINVAL ? 11 : 12); /* no O_DIRECT / cannot reach the file */
        }
        const uint64_t size = 4 * MIB;
        const probe_target tg = {&fd, &size, NULL, 1, "unowned"};
        probe_result r;
        if (probe_storage(&tg, NULL, &r) != HDMLP_OK) {
            _exit(13);
        }
        fprintf(stderr, "probe (as nobody): %s\n", r.text);
        _exit(r.cached_guess ? 1 : 0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    unlink(path);
    cr_assert(WIFEXITED(status), "child died");
    if (WEXITSTATUS(status) >= 10 && WEXITSTATUS(status) <= 12) {
        cr_skip_test("cannot probe as nobody here (child status %d)", WEXITSTATUS(status));
    }
    cr_assert_eq(WEXITSTATUS(status), 0, "status %d (1: flagged as cached)",
                 WEXITSTATUS(status));
}

/* Empty and tiny targets are not measured: HDMLP_E_RANGE naming the target, so the caller
 * keeps its configured figures. */
Test(probe, empty_and_tiny_files_give_range_error, .timeout = 30)
{
    const uint64_t sizes[] = {0, 4096, 100 * 1024, PROBE_MIN_FILE - 4096};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        const tfile t = tfile_make(tmp_dir(), sizes[i], O_DIRECT);
        const char *const name[] = {"tiny-file"};
        const probe_target tg = target_of(&t, name);
        probe_result r;
        const int rc = probe_storage(&tg, NULL, &r);
        cr_assert_eq(rc, HDMLP_E_RANGE, "size %llu: %s", (unsigned long long)sizes[i],
                     hdmlp_err_name(rc));
        cr_assert_not_null(strstr(hdmlp_last_error(), "tiny-file"), "%s", hdmlp_last_error());
        cr_assert_eq(r.bytes, 0);
        cr_assert_eq(r.bytes_per_s, 0.0);
        close(t.fd);
    }
    /* The smallest measurable file works. */
    const tfile t = tfile_make(tmp_dir(), PROBE_MIN_FILE, O_DIRECT);
    probe_limits lim;
    probe_limits_default(&lim);
    probe_file(&t, &lim);
    close(t.fd);
}

Test(probe, unreadable_fd_gives_io_error_naming_it, .timeout = 30)
{
    const tfile t = tfile_make(tmp_dir(), 2 * MIB, O_WRONLY);
    const char *const name[] = {"write-only-file"};
    const probe_target tg = target_of(&t, name);
    probe_result r;
    const int rc = probe_storage(&tg, NULL, &r);
    cr_assert_eq(rc, HDMLP_E_IO, "%s", hdmlp_err_name(rc));
    cr_assert_not_null(strstr(hdmlp_last_error(), "write-only-file"), "%s", hdmlp_last_error());
    cr_log_info("%s", hdmlp_last_error());
    close(t.fd);
}

Test(probe, closed_fd_gives_io_error_naming_it, .timeout = 30)
{
    const int fd = -1;
    const uint64_t size = 2 * MIB;
    const probe_target tg = {&fd, &size, NULL, 1, "closed-target"};
    probe_result r;
    const int rc = probe_storage(&tg, NULL, &r);
    cr_assert_eq(rc, HDMLP_E_IO, "%s", hdmlp_err_name(rc));
    cr_assert_not_null(strstr(hdmlp_last_error(), "closed-target[0]"), "%s",
                       hdmlp_last_error());
}

Test(probe, file_shorter_than_its_size_gives_io_error, .timeout = 30)
{
    tfile t = tfile_make(tmp_dir(), 1 * MIB, O_DIRECT);
    t.size = 64 * MIB; /* most offsets are past the real end */
    const char *const name[] = {"short-file"};
    const probe_target tg = target_of(&t, name);
    probe_result r;
    const int rc = probe_storage(&tg, NULL, &r);
    cr_assert_eq(rc, HDMLP_E_IO, "%s", hdmlp_err_name(rc));
    cr_assert_not_null(strstr(hdmlp_last_error(), "short-file"), "%s", hdmlp_last_error());
    cr_assert_not_null(strstr(hdmlp_last_error(), "end of file"), "%s", hdmlp_last_error());
    close(t.fd);
}

Test(probe, bad_arguments_and_limits_are_rejected, .timeout = 30)
{
    const tfile t = tfile_make(tmp_dir(), 1 * MIB, O_DIRECT);
    const char *const name[] = {"f"};
    const probe_target tg = target_of(&t, name);
    probe_result r;
    cr_assert_eq(probe_storage(&tg, NULL, NULL), HDMLP_E_INVAL);
    cr_assert_eq(probe_storage(NULL, NULL, &r), HDMLP_E_INVAL);
    probe_target empty = tg;
    empty.n = 0;
    cr_assert_eq(probe_storage(&empty, NULL, &r), HDMLP_E_INVAL);
    probe_limits lim;
    probe_limits_default(&lim);
    lim.max_seconds = 0.0;
    cr_assert_eq(probe_storage(&tg, &lim, &r), HDMLP_E_INVAL);
    lim.max_seconds = NAN;
    cr_assert_eq(probe_storage(&tg, &lim, &r), HDMLP_E_INVAL);
    probe_limits_default(&lim);
    lim.max_bytes = PROBE_MIN_FILE - 1;
    cr_assert_eq(probe_storage(&tg, &lim, &r), HDMLP_E_INVAL);
    probe_limits_default(&lim);
    lim.large_reads = 1000;
    cr_assert_eq(probe_storage(&tg, &lim, &r), HDMLP_E_INVAL);
    cr_assert_eq(probe_directory(NULL, NULL, &r), HDMLP_E_INVAL);
    cr_assert_eq(probe_dataset(NULL, 0, NULL, &r), HDMLP_E_INVAL);
    /* Zero fields take the defaults. */
    memset(&lim, 0, sizeof(lim));
    lim.max_seconds = 0.5;
    lim.max_bytes = 64 * MIB;
    cr_assert_eq(probe_storage(&tg, &lim, &r), HDMLP_OK, "%s", hdmlp_last_error());
    close(t.fd);
}

static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "opendir(%s): %s", dir, strerror(errno));
    int n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            n++;
        }
    }
    closedir(d);
    return n;
}

Test(probe, directory_probe_leaves_nothing_behind, .timeout = 60)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("probe-dir", dir, sizeof(dir)), 0);
    probe_limits lim;
    probe_limits_default(&lim);
    probe_result r;
    const double t0 = now_s();
    const int rc = probe_directory(dir, &lim, &r);
    const double wall = now_s() - t0;
    cr_assert_eq(rc, HDMLP_OK, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    check_sane(&r, &lim, wall);
    cr_assert_not_null(strstr(r.text, dir));
    cr_assert_eq(dir_entries(dir), 0, "the scratch file is left in %s", dir);
    cr_log_info("%s", r.text);
    /* A failed probe leaves nothing either: the scratch file cannot fit the time, but the
     * byte limit is tiny and the file is still removed. */
    lim.max_seconds = 0.001;
    lim.max_bytes = PROBE_MIN_FILE;
    lim.scratch_bytes = PROBE_MIN_FILE;
    cr_assert_eq(probe_directory(dir, &lim, &r), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(dir_entries(dir), 0);
    cr_assert_eq(testds_rm_rf(dir), 0);
}

Test(probe, directory_errors, .timeout = 30)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("probe-err", dir, sizeof(dir)), 0);
    char missing[600];
    snprintf(missing, sizeof(missing), "%s/missing", dir);
    probe_result r;
    int rc = probe_directory(missing, NULL, &r);
    cr_assert_eq(rc, HDMLP_E_NOTFOUND, "%s", hdmlp_err_name(rc));
    cr_assert_not_null(strstr(hdmlp_last_error(), missing), "%s", hdmlp_last_error());
    cr_assert_eq(testds_write_file(missing, "x", 1), 0);
    rc = probe_directory(missing, NULL, &r);
    cr_assert_eq(rc, HDMLP_E_NOTFOUND, "%s", hdmlp_err_name(rc));
    cr_assert_not_null(strstr(hdmlp_last_error(), "not a directory"), "%s", hdmlp_last_error());
    cr_assert_eq(dir_entries(dir), 1);
    cr_assert_eq(testds_rm_rf(dir), 0);
}

static hdmlp_dataset *dataset_make(const char *tag, uint32_t chunks_per_segment, char *dir,
                                   size_t cap)
{
    cr_assert_eq(testds_mkdtemp(tag, dir, cap), 0);
    const testds_spec spec = {3000, 16, chunks_per_segment, 77, 500, 1500, 0, 0, 3};
    cr_assert_eq(testds_write(dir, &spec), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    return ds;
}

Test(probe, dataset_probe, .timeout = 60)
{
    char dir[512];
    hdmlp_dataset *ds = dataset_make("probe-ds", 0, dir, sizeof(dir));
    probe_limits lim;
    probe_limits_default(&lim);
    for (int direct = 0; direct < 2; direct++) {
        probe_result r;
        const double t0 = now_s();
        const int rc = probe_dataset(ds, direct, &lim, &r);
        const double wall = now_s() - t0;
        cr_assert_eq(rc, HDMLP_OK, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
        check_sane(&r, &lim, wall);
        cr_assert_eq(strncmp(r.text, dir, strlen(dir)), 0, "%s", r.text);
        cr_log_info("direct=%d: %s", direct, r.text);
    }
    /* The dataset still reads (the probe only read and dropped cache pages). */
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    cr_assert_eq(testds_rm_rf(dir), 0);
}

Test(probe, dataset_of_small_segments_gives_range_error, .timeout = 60)
{
    char dir[512];
    hdmlp_dataset *ds = dataset_make("probe-small", 1, dir, sizeof(dir)); /* ~16 KiB each */
    probe_result r;
    const int rc = probe_dataset(ds, 0, NULL, &r);
    cr_assert_eq(rc, HDMLP_E_RANGE, "%s", hdmlp_err_name(rc));
    cr_assert_not_null(strstr(hdmlp_last_error(), dir), "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    cr_assert_eq(testds_rm_rf(dir), 0);
}

Test(probe, dataset_missing_segment_names_it, .timeout = 60)
{
    char dir[512];
    hdmlp_dataset *ds = dataset_make("probe-miss", 0, dir, sizeof(dir));
    char seg[600];
    snprintf(seg, sizeof(seg), "%s/segment-000000", dir);
    cr_assert_eq(unlink(seg), 0);
    probe_result r;
    const int rc = probe_dataset(ds, 0, NULL, &r);
    cr_assert_eq(rc, HDMLP_E_NOTFOUND, "%s", hdmlp_err_name(rc));
    cr_assert_not_null(strstr(hdmlp_last_error(), seg), "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    cr_assert_eq(testds_rm_rf(dir), 0);
}

/* This machine's disk: figures printed (stderr) for the record. */
Test(probe, this_machine, .timeout = 60)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("probe-disk", dir, sizeof(dir)), 0);
    probe_limits lim;
    probe_limits_default(&lim);
    for (int i = 0; i < 3; i++) {
        probe_result r;
        lim.seed = (uint64_t)i + 1;
        const int rc = probe_directory(dir, &lim, &r);
        cr_assert_eq(rc, HDMLP_OK, "%s", hdmlp_last_error());
        fprintf(stderr, "probe (disk, seed %d): %s; median 4 KiB %.1f us\n", i + 1, r.text,
                r.small_median_us);
    }
    cr_assert_eq(testds_rm_rf(dir), 0);
}

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
