/*
 * Storage probe tests (loader_probe.c): figures are positive and finite, time and byte
 * limits hold, tiny targets and unreadable files give clear errors, and RAM-backed storage
 * is flagged. The rest of the test_probe binary: directory and dataset probes
 * (test_probe_targets.c: the directory probe leaves nothing behind) and a throttled disk
 * (test_probe_throttle.c: cgroup v1 blkio; skipped where it is not writable); fixtures in
 * support/probe_fixture.h. Temporary files live in $HDMLP_TEST_TMP (fallback /tmp). The
 * probe's seed is fixed and printed.
 */
#include "format.h"
#include "hdmlp.h"
#include "loader_probe.h"
#include "support/probe_fixture.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
