/*
 * I/O engine tests (loader_io.c, loader_io_uring.c). Every behaviour runs on both engines;
 * io_uring tests skip when the kernel (or the build) lacks io_uring. Temporary files live
 * in $HDMLP_TEST_TMP (fallback /tmp). Seeds are fixed and printed.
 */
#include "fmt_rng.h"
#include "format.h"
#include "loader_io.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SEED UINT64_C(0x10e9617e5eed)
#define ALIGN 4096u

typedef struct tfile {
    int fd;
    int dfd;       /* O_DIRECT descriptor, -1 when the filesystem refused it */
    int dfd_err;   /* errno of that refusal */
    uint8_t *data; /* the file's bytes */
    uint64_t size;
} tfile;

static const char *tmp_dir(void)
{
    const char *const d = getenv("HDMLP_TEST_TMP");
    return d != NULL && d[0] != '\0' ? d : "/tmp";
}

/* Creates a temp file of `size` pseudo-random bytes (seed printed), opened read-only with
 * and without O_DIRECT, and already unlinked (nothing is left behind by a failed test). */
static void tfile_make(tfile *t, uint64_t size, uint64_t stream)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/test_io.XXXXXX", tmp_dir());
    const int wfd = mkstemp(path);
    cr_assert_geq(wfd, 0, "mkstemp(%s): %s", path, strerror(errno));
    t->size = size;
    t->data = malloc(size ? size : 1);
    cr_assert_not_null(t->data);
    fmt_rng rng;
    fmt_rng_seed(&rng, SEED, stream);
    cr_log_info("temp file %s: %llu bytes, seed %#llx stream %llu", path,
                (unsigned long long)size, (unsigned long long)SEED, (unsigned long long)stream);
    for (uint64_t i = 0; i < size; i++) {
        t->data[i] = (uint8_t)fmt_rng_next(&rng);
    }
    uint64_t off = 0;
    while (off < size) {
        const ssize_t w = write(wfd, t->data + off, size - off);
        cr_assert_gt(w, 0, "write: %s", strerror(errno));
        off += (uint64_t)w;
    }
    close(wfd);
    t->fd = open(path, O_RDONLY);
    t->dfd = open(path, O_RDONLY | O_DIRECT);
    t->dfd_err = errno;
    unlink(path);
    cr_assert_geq(t->fd, 0);
}

static void tfile_drop(tfile *t)
{
    close(t->fd);
    if (t->dfd >= 0) {
        close(t->dfd);
    }
    free(t->data);
}

/* Creates an engine of `kind`; skips the test when io_uring is unavailable. */
static io_engine *engine_make(hdmlp_engine kind, unsigned depth)
{
    io_engine *e = NULL;
    const int rc = io_engine_create(kind, depth, &e);
    if (kind == HDMLP_ENGINE_IO_URING && rc == HDMLP_E_UNSUPPORTED) {
        cr_skip_test("io_uring unavailable: %s", hdmlp_last_error());
    }
    cr_assert_eq(rc, HDMLP_OK, "io_engine_create: %s", hdmlp_last_error());
    cr_assert_not_null(e);
    return e;
}

/* Expected result of reading [off, off+len) of t. */
static int64_t expect_len(const tfile *t, uint64_t off, uint64_t len)
{
    if (off >= t->size) {
        return 0;
    }
    return (int64_t)(t->size - off < len ? t->size - off : len);
}

static void check_read(const tfile *t, const io_read *r)
{
    const int64_t want = expect_len(t, r->offset, r->len);
    cr_assert_eq(r->result, want, "read of %llu at %llu: result %lld, want %lld",
                 (unsigned long long)r->len, (unsigned long long)r->offset,
                 (long long)r->result, (long long)want);
    if (want > 0) {
        cr_assert(memcmp(r->dst, t->data + r->offset, (size_t)want) == 0,
                  "bytes of read at %llu differ", (unsigned long long)r->offset);
    }
}

/* Random reads (offsets, lengths, batch sizes from the seeded RNG) into one arena. */
static void random_reads(hdmlp_engine kind, unsigned depth, unsigned total, uint64_t stream)
{
    tfile t;
    tfile_make(&t, (4u << 20) + 123, stream);
    io_engine *const e = engine_make(kind, depth);
    enum { MAXN = 64, MAXLEN = 256 * 1024 };
    io_read reads[MAXN];
    uint8_t *const arena = malloc((size_t)MAXN * MAXLEN);
    cr_assert_not_null(arena);
    fmt_rng rng;
    fmt_rng_seed(&rng, SEED, stream + 1000);
    unsigned done = 0;
    while (done < total) {
        const unsigned n = (unsigned)fmt_rng_below(&rng, MAXN) + 1;
        for (unsigned i = 0; i < n; i++) {
            const uint64_t len = fmt_rng_below(&rng, MAXLEN) + 1;
            reads[i] = (io_read){.fd = t.fd,
                                 .offset = fmt_rng_below(&rng, t.size - len + 1),
                                 .len = len,
                                 .dst = arena + (size_t)i * MAXLEN,
                                 .result = -1};
        }
        cr_assert_eq(io_engine_read(e, reads, n), HDMLP_OK, "%s", hdmlp_last_error());
        for (unsigned i = 0; i < n; i++) {
            check_read(&t, &reads[i]);
        }
        done += n;
    }
    free(arena);
    io_engine_free(e);
    tfile_drop(&t);
}

static void body_random_reads(hdmlp_engine kind) { random_reads(kind, 16, 600, 1); }

static void body_crossing_eof_is_short(hdmlp_engine kind)
{
    tfile t;
    tfile_make(&t, 100000, 2);
    io_engine *const e = engine_make(kind, 4);
    uint8_t a[8192], b[65536];
    io_read reads[2] = {
        {.fd = t.fd, .offset = t.size - 1000, .len = sizeof(a), .dst = a},
        {.fd = t.fd, .offset = t.size - 1, .len = sizeof(b), .dst = b},
    };
    cr_assert_eq(io_engine_read(e, reads, 2), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(reads[0].result, 1000);
    cr_assert_eq(reads[1].result, 1);
    check_read(&t, &reads[0]);
    check_read(&t, &reads[1]);
    io_engine_free(e);
    tfile_drop(&t);
}

static void body_past_eof_is_zero(hdmlp_engine kind)
{
    tfile t;
    tfile_make(&t, 5000, 3);
    io_engine *const e = engine_make(kind, 4);
    uint8_t a[100], b[100];
    io_read reads[2] = {
        {.fd = t.fd, .offset = t.size, .len = sizeof(a), .dst = a, .result = -1},
        {.fd = t.fd, .offset = t.size + 1234567, .len = sizeof(b), .dst = b, .result = -1},
    };
    cr_assert_eq(io_engine_read(e, reads, 2), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(reads[0].result, 0);
    cr_assert_eq(reads[1].result, 0);
    io_engine_free(e);
    tfile_drop(&t);
}

static void body_more_than_depth(hdmlp_engine kind)
{
    tfile t;
    tfile_make(&t, 1u << 20, 4);
    io_engine *const e = engine_make(kind, 4);
    enum { N = 100, LEN = 5000 };
    io_read reads[N];
    uint8_t *const buf = malloc((size_t)N * LEN);
    cr_assert_not_null(buf);
    for (unsigned i = 0; i < N; i++) {
        /* Descending offsets, the last ones crossing the end of file. */
        reads[i] = (io_read){.fd = t.fd,
                             .offset = t.size - 2000 - (uint64_t)(N - 1 - i) * 9973,
                             .len = LEN,
                             .dst = buf + (size_t)i * LEN,
                             .result = -1};
    }
    cr_assert_eq(io_engine_read(e, reads, N), HDMLP_OK, "%s", hdmlp_last_error());
    for (unsigned i = 0; i < N; i++) {
        check_read(&t, &reads[i]);
    }
    free(buf);
    io_engine_free(e);
    tfile_drop(&t);
}

static void body_empty(hdmlp_engine kind)
{
    tfile t;
    tfile_make(&t, 4096, 5);
    io_engine *const e = engine_make(kind, 2);
    cr_assert_eq(io_engine_read(e, NULL, 0), HDMLP_OK);
    uint8_t a[16];
    io_read r = {.fd = t.fd, .offset = 10, .len = 0, .dst = a, .result = -1};
    cr_assert_eq(io_engine_read(e, &r, 1), HDMLP_OK);
    cr_assert_eq(r.result, 0);
    cr_assert_eq(io_engine_ops(e), 0, "zero-length reads need no operation");
    io_engine_free(e);
    tfile_drop(&t);
}

static void body_bad_fd(hdmlp_engine kind)
{
    tfile t;
    tfile_make(&t, 8192, 6);
    io_engine *const e = engine_make(kind, 4);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    close(p[1]);
    close(p[0]); /* p[0] is now a closed descriptor */
    uint8_t a[4096], b[4096], c[4096];
    io_read reads[3] = {
        {.fd = t.fd, .offset = 0, .len = sizeof(a), .dst = a},
        {.fd = p[0], .offset = 4096, .len = sizeof(b), .dst = b},
        {.fd = -1, .offset = 0, .len = sizeof(c), .dst = c},
    };
    const int rc = io_engine_read(e, reads, 3);
    cr_assert_eq(rc, HDMLP_E_IO, "got %s", hdmlp_err_name(rc));
    check_read(&t, &reads[0]); /* the good read still completes */
    cr_assert_eq(reads[1].result, -EBADF);
    cr_assert_eq(reads[2].result, -EBADF);
    const char *const msg = hdmlp_last_error();
    cr_assert(strstr(msg, "read of 4096 bytes at offset 4096 failed") != NULL, "detail: %s",
              msg);
    cr_assert(strstr(msg, strerror(EBADF)) != NULL, "detail: %s", msg);
    cr_assert(strstr(msg, "1 more") != NULL, "detail: %s", msg);
    io_engine_free(e);
    tfile_drop(&t);
}

static void body_ops_counted(hdmlp_engine kind)
{
    tfile t;
    tfile_make(&t, 1u << 20, 7);
    io_engine *const e = engine_make(kind, 8);
    cr_assert_eq(io_engine_ops(e), 0);
    enum { N = 10 };
    uint8_t buf[N][4096];
    io_read reads[N];
    for (unsigned i = 0; i < N; i++) {
        reads[i] =
            (io_read){.fd = t.fd, .offset = (uint64_t)i * 50000, .len = 4096, .dst = buf[i]};
    }
    cr_assert_eq(io_engine_read(e, reads, N), HDMLP_OK, "%s", hdmlp_last_error());
    const uint64_t ops = io_engine_ops(e);
    if (kind == HDMLP_ENGINE_PREAD) {
        cr_assert_eq(ops, N, "ops %llu", (unsigned long long)ops);
    } else {
        cr_assert_geq(ops, N, "ops %llu", (unsigned long long)ops); /* ≥ one per read */
    }
    /* A read crossing the end of file takes a second operation to see end of file. */
    reads[0].offset = t.size - 100;
    cr_assert_eq(io_engine_read(e, reads, 1), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(reads[0].result, 100);
    cr_assert_geq(io_engine_ops(e), ops + 2);
    if (kind == HDMLP_ENGINE_PREAD) {
        cr_assert_eq(io_engine_ops(e), ops + 2);
    }
    io_engine_free(e);
    tfile_drop(&t);
}

/* t's O_DIRECT descriptor; skips when the filesystem refuses O_DIRECT (e.g. old tmpfs). */
static int open_direct(const tfile *t)
{
    if (t->dfd < 0 && t->dfd_err == EINVAL) {
        cr_skip_test("O_DIRECT not supported on %s", tmp_dir());
    }
    cr_assert_geq(t->dfd, 0, "open O_DIRECT: %s", strerror(t->dfd_err));
    return t->dfd;
}

static void body_direct(hdmlp_engine kind)
{
    tfile t;
    tfile_make(&t, (1u << 20) + 1000, 8); /* ends off a 4 KiB boundary */
    const int fd = open_direct(&t);
    io_engine *const e = engine_make(kind, 4);
    enum { N = 9 };
    uint8_t *const buf = hd_aligned_alloc(ALIGN, (size_t)N * 65536);
    cr_assert_not_null(buf);
    io_read reads[N];
    for (unsigned i = 0; i < N; i++) {
        const uint64_t off = (uint64_t)ALIGN * ((i * 37u) % 240u);
        reads[i] = (io_read){.fd = fd,
                             .offset = off,
                             .len = 65536,
                             .dst = buf + (size_t)i * 65536,
                             .result = -1};
    }
    /* The last two cross the unaligned end of file. */
    reads[N - 2].offset = t.size - 1000 - 3 * ALIGN;
    reads[N - 1].offset = t.size - 1000;
    cr_assert_eq(io_engine_read(e, reads, N), HDMLP_OK, "%s", hdmlp_last_error());
    for (unsigned i = 0; i < N; i++) {
        check_read(&t, &reads[i]);
    }
    cr_assert_eq(reads[N - 1].result, 1000);
    hd_free(buf);
    io_engine_free(e);
    tfile_drop(&t);
}

static void body_direct_misaligned(hdmlp_engine kind)
{
    tfile t;
    tfile_make(&t, 1u << 20, 9);
    const int fd = open_direct(&t);
    io_engine *const e = engine_make(kind, 4);
    uint8_t *const buf = hd_aligned_alloc(ALIGN, 2 * ALIGN);
    cr_assert_not_null(buf);
    io_read r = {.fd = fd, .offset = 1, .len = ALIGN, .dst = buf + 1};
    const int rc = io_engine_read(e, &r, 1);
    if (rc == HDMLP_OK) {
        cr_skip_test("filesystem at %s accepts misaligned O_DIRECT reads", tmp_dir());
    }
    cr_assert_eq(rc, HDMLP_E_INVAL, "got %s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert_eq(r.result, -EINVAL);
    const char *const msg = hdmlp_last_error();
    cr_assert(strstr(msg, "O_DIRECT read misaligned or unsupported by the filesystem") != NULL,
              "detail: %s", msg);
    hd_free(buf);
    io_engine_free(e);
    tfile_drop(&t);
}

/* One read larger than 2 GiB of a sparse file: split into several operations. */
static void body_huge_read(hdmlp_engine kind)
{
    const uint64_t size = (UINT64_C(2) << 30) + (3u << 20) + 5;
    const uint64_t marks[] = {0,
                              (UINT64_C(1) << 30) - 3, /* spans the 1 GiB op boundary */
                              (UINT64_C(1) << 30) + 64,
                              (UINT64_C(2) << 30) - 1,
                              (UINT64_C(2) << 30) + (1u << 20),
                              size - 8};
    enum { NMARKS = sizeof(marks) / sizeof(marks[0]) };
    char path[512];
    snprintf(path, sizeof(path), "%s/test_io_huge.XXXXXX", tmp_dir());
    const int wfd = mkstemp(path);
    cr_assert_geq(wfd, 0);
    /* O_DIRECT where possible: holes then cost no page cache, and the read ends at an
     * unaligned end of file. */
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0) {
        fd = open(path, O_RDONLY);
    }
    unlink(path);
    cr_assert_geq(fd, 0, "open: %s", strerror(errno));
    cr_assert_eq(ftruncate(wfd, (off_t)size), 0, "ftruncate: %s", strerror(errno));
    for (unsigned i = 0; i < NMARKS; i++) {
        const uint8_t m[8] = {0xA5, (uint8_t)(i + 1), 0x5A, 7, 6, 5, 4, 3};
        cr_assert_eq(pwrite(wfd, m, sizeof(m), (off_t)marks[i]), (ssize_t)sizeof(m));
    }
    close(wfd);
    io_engine *const e = engine_make(kind, 2);
    const size_t cap = (size_t)((size | (ALIGN - 1)) + 1 + ALIGN);
    uint8_t *const buf = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    cr_assert_neq(buf, MAP_FAILED);
    madvise(buf, cap, MADV_HUGEPAGE); /* 512× fewer page faults where THP is available */
    io_read r = {.fd = fd, .offset = 0, .len = cap, .dst = buf};
    cr_assert_eq(io_engine_read(e, &r, 1), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(r.result, (int64_t)size);
    for (unsigned i = 0; i < NMARKS; i++) {
        const uint8_t m[8] = {0xA5, (uint8_t)(i + 1), 0x5A, 7, 6, 5, 4, 3};
        cr_assert(memcmp(buf + marks[i], m, sizeof(m)) == 0, "mark %u misplaced", i);
    }
    cr_assert_eq(buf[marks[1] - 1], 0);
    cr_assert_eq(buf[marks[4] - 1], 0);
    cr_assert_geq(io_engine_ops(e), 3, "a >2 GiB read takes several operations");
    munmap(buf, cap);
    io_engine_free(e);
    close(fd);
}

#define ENGINE_TEST(name, secs)                                                                \
    Test(io_pread, name, .timeout = (secs)) { body_##name(HDMLP_ENGINE_PREAD); }               \
    Test(io_uring, name, .timeout = (secs)) { body_##name(HDMLP_ENGINE_IO_URING); }

ENGINE_TEST(random_reads, 30)
ENGINE_TEST(crossing_eof_is_short, 10)
ENGINE_TEST(past_eof_is_zero, 10)
ENGINE_TEST(more_than_depth, 10)
ENGINE_TEST(empty, 10)
ENGINE_TEST(bad_fd, 10)
ENGINE_TEST(ops_counted, 10)
ENGINE_TEST(direct, 10)
ENGINE_TEST(direct_misaligned, 10)
ENGINE_TEST(huge_read, 50)

Test(io, engines_agree, .timeout = 30)
{
    tfile t;
    tfile_make(&t, (2u << 20) + 777, 10);
    io_engine *const p = engine_make(HDMLP_ENGINE_PREAD, 8);
    io_engine *const u = engine_make(HDMLP_ENGINE_IO_URING, 8);
    enum { N = 200, LEN = 20000 };
    io_read rp[N], ru[N];
    uint8_t *const bp = malloc((size_t)N * LEN);
    uint8_t *const bu = malloc((size_t)N * LEN);
    cr_assert(bp != NULL && bu != NULL);
    memset(bp, 0x11, (size_t)N * LEN);
    memset(bu, 0x11, (size_t)N * LEN);
    fmt_rng rng;
    fmt_rng_seed(&rng, SEED, 11);
    for (unsigned i = 0; i < N; i++) {
        const uint64_t off = fmt_rng_below(&rng, t.size + 1000);
        rp[i] = (io_read){.fd = t.fd, .offset = off, .len = LEN, .dst = bp + (size_t)i * LEN};
        ru[i] = (io_read){.fd = t.fd, .offset = off, .len = LEN, .dst = bu + (size_t)i * LEN};
    }
    cr_assert_eq(io_engine_read(p, rp, N), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(io_engine_read(u, ru, N), HDMLP_OK, "%s", hdmlp_last_error());
    for (unsigned i = 0; i < N; i++) {
        cr_assert_eq(rp[i].result, ru[i].result, "read %u", i);
    }
    cr_assert(memcmp(bp, bu, (size_t)N * LEN) == 0);
    free(bp);
    free(bu);
    io_engine_free(p);
    io_engine_free(u);
    tfile_drop(&t);
}

Test(io, create_rejects_bad_arguments, .timeout = 10)
{
    io_engine *e = (io_engine *)&e;
    cr_assert_eq(io_engine_create(HDMLP_ENGINE_PREAD, 0, &e), HDMLP_E_INVAL);
    cr_assert_null(e);
    cr_assert(strstr(hdmlp_last_error(), "depth") != NULL);
    e = (io_engine *)&e;
    cr_assert_eq(io_engine_create(HDMLP_ENGINE_AUTO, 1025, &e), HDMLP_E_INVAL);
    cr_assert_null(e);
    cr_assert_eq(io_engine_create((hdmlp_engine)7, 4, &e), HDMLP_E_INVAL);
    cr_assert_eq(io_engine_create(HDMLP_ENGINE_PREAD, 4, NULL), HDMLP_E_INVAL);
    cr_assert_eq(io_engine_create(HDMLP_ENGINE_PREAD, 1024, &e), HDMLP_OK);
    io_engine_free(e);
    io_engine_free(NULL);
}

Test(io, read_rejects_bad_arguments, .timeout = 10)
{
    io_engine *const e = engine_make(HDMLP_ENGINE_AUTO, 4);
    cr_assert_eq(io_engine_read(e, NULL, 3), HDMLP_E_INVAL);
    cr_assert_eq(io_engine_read(NULL, NULL, 0), HDMLP_E_INVAL);
    uint8_t a[16];
    io_read r[2] = {{.fd = 0, .offset = 0, .len = 16, .dst = a},
                    {.fd = 0, .offset = 0, .len = 16, .dst = NULL}};
    cr_assert_eq(io_engine_read(e, r, 2), HDMLP_E_INVAL);
    cr_assert_eq(r[1].result, -EINVAL);
    r[1] = (io_read){.fd = 0, .offset = UINT64_MAX - 8, .len = 16, .dst = a};
    cr_assert_eq(io_engine_read(e, r, 2), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "read 1") != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(io_engine_ops(e), 0, "nothing is read when an argument is bad");
    io_engine_free(e);
}

Test(io, names, .timeout = 10)
{
    io_engine *const p = engine_make(HDMLP_ENGINE_PREAD, 4);
    cr_assert_str_eq(io_engine_name(p), "pread");
    io_engine_free(p);
    io_engine *const a = engine_make(HDMLP_ENGINE_AUTO, 4);
    const char *const auto_name = io_engine_name(a);
    io_engine_free(a);
    io_engine *const u = engine_make(HDMLP_ENGINE_IO_URING, 4);
    cr_assert_str_eq(io_engine_name(u), "io_uring");
    cr_assert_str_eq(auto_name, "io_uring", "AUTO picks io_uring when the kernel has it");
    io_engine_free(u);
}

/* Makes io_uring_setup fail with `err` in this test's process (Criterion runs each test
 * in its own process), as on kernels without io_uring or with it disabled. */
static void deny_io_uring(int err)
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
    cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0, "%s", strerror(errno));
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        cr_skip_test("cannot install a seccomp filter: %s", strerror(errno));
    }
}

static void check_without_io_uring(int err)
{
    deny_io_uring(err);
    io_engine *e = (io_engine *)&e;
    const int rc = io_engine_create(HDMLP_ENGINE_IO_URING, 4, &e);
    cr_assert_eq(rc, HDMLP_E_UNSUPPORTED, "got %s", hdmlp_err_name(rc));
    cr_assert_null(e);
    cr_assert(strstr(hdmlp_last_error(), "io_uring") != NULL, "%s", hdmlp_last_error());
    cr_log_info("detail: %s", hdmlp_last_error());
    cr_assert_eq(io_engine_create(HDMLP_ENGINE_AUTO, 4, &e), HDMLP_OK);
    cr_assert_str_eq(io_engine_name(e), "pread", "AUTO falls back to pread");
    tfile t;
    tfile_make(&t, 10000, 12);
    uint8_t buf[3000];
    io_read r = {.fd = t.fd, .offset = 8000, .len = sizeof(buf), .dst = buf};
    cr_assert_eq(io_engine_read(e, &r, 1), HDMLP_OK, "%s", hdmlp_last_error());
    check_read(&t, &r);
    io_engine_free(e);
    tfile_drop(&t);
}

Test(io, kernel_without_io_uring, .timeout = 10) { check_without_io_uring(ENOSYS); }

Test(io, io_uring_forbidden, .timeout = 10) { check_without_io_uring(EPERM); }
