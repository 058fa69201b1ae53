/* The output directory and the writing protocol (FORMAT.md, "Writing protocol"):
 * everything goes to `.NAME.tmp-XXXXXX` beside OUT, the index last, then fsyncs and a
 * rename; an existing OUT (with --force) is atomically exchanged and then removed. */
#include "pack_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Splits `out` into parent directory and base name (trailing slashes ignored). */
static int split_out(const char *out, pack_buf *parent, pack_buf *base)
{
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') {
        n--;
    }
    size_t b = n;
    while (b > 0 && out[b - 1] != '/') {
        b--;
    }
    const size_t base_len = n - b;
    if (base_len == 0 || (base_len == 1 && out[b] == '.') ||
        (base_len == 2 && out[b] == '.' && out[b + 1] == '.')) {
        return hd_err(HDMLP_E_INVAL, "%s: not usable as an output directory name", out);
    }
    int rc;
    if (b == 0) {
        rc = pack_buf_append(parent, ".", 2);
    } else {
        size_t p = b; /* drop the slashes between parent and base, keep a lone "/" */
        while (p > 1 && out[p - 1] == '/') {
            p--;
        }
        rc = pack_buf_append(parent, out, p);
        if (rc == HDMLP_OK) {
            rc = pack_buf_append(parent, "", 1);
        }
    }
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(base, out + b, base_len);
    }
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(base, "", 1);
    }
    return rc;
}

/* Nonzero if `name` is a file a dataset directory may hold. */
static int dataset_entry(const char *name)
{
    if (strcmp(name, FMT_INDEX_NAME) == 0 || strcmp(name, FMT_TABLES_NAME) == 0 ||
        strcmp(name, FMT_KEYS_NAME) == 0) {
        return 1;
    }
    if (strncmp(name, "segment-", 8) != 0 || name[8] == '\0') {
        return 0;
    }
    for (const char *p = name + 8; *p; p++) {
        if (*p < '0' || *p > '9') {
            return 0;
        }
    }
    return 1;
}

/* Checks that a directory OUT may be replaced: it holds nothing but dataset files. */
static int check_replaceable(const char *out)
{
    DIR *const d = opendir(out);
    if (!d) {
        return hd_err(hd_errno_code(errno), "cannot read %s: %s", out, strerror(errno));
    }
    int rc = HDMLP_OK;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        if (!dataset_entry(de->d_name)) {
            rc = hd_err(HDMLP_E_EXISTS,
                        "refusing to replace %s: it holds %s, which is not part of an "
                        "hdmlp dataset",
                        out, de->d_name);
            break;
        }
    }
    closedir(d);
    return rc;
}

/* Like mkdtemp, but the directory gets 0777 minus the umask (it becomes the dataset). */
static int make_tmpdir(char *tmpl, const char *parent)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    char *const x = tmpl + strlen(tmpl) - 6;
    for (unsigned attempt = 0; attempt < 1000; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        const uint64_t v[4] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid(),
                               attempt};
        uint64_t h = fmt_checksum(v, sizeof(v));
        for (int i = 0; i < 6; i++) {
            x[i] = alphabet[h % 62];
            h /= 62;
        }
        if (mkdir(tmpl, 0777) == 0) {
            return HDMLP_OK;
        }
        if (errno != EEXIST) {
            break;
        }
    }
    return hd_err(hd_errno_code(errno), "cannot create a temporary directory in %s: %s", parent,
                  strerror(errno));
}

int pack_outdir_begin(const char *out, int force, char **tmpdir, int *tmp_fd)
{
    *tmpdir = NULL;
    *tmp_fd = -1;
    struct stat st;
    if (lstat(out, &st) == 0) {
        if (!force) {
            return hd_err(HDMLP_E_EXISTS, "%s already exists (use --force to replace it)", out);
        }
        if (S_ISDIR(st.st_mode)) {
            const int rc = check_replaceable(out);
            if (rc != HDMLP_OK) {
                return rc;
            }
        }
    } else if (errno != ENOENT) {
        return hd_err(hd_errno_code(errno), "cannot stat %s: %s", out, strerror(errno));
    }
    pack_buf parent = {0}, base = {0}, tmpl = {0};
    int rc = split_out(out, &parent, &base);
    if (rc == HDMLP_OK) {
        const size_t need = parent.len + base.len + 32;
        rc = pack_buf_reserve(&tmpl, need);
        if (rc == HDMLP_OK) {
            snprintf((char *)tmpl.p, need, "%s/.%s.tmp-XXXXXX", (const char *)parent.p,
                     (const char *)base.p);
        }
    }
    if (rc == HDMLP_OK) {
        rc = make_tmpdir((char *)tmpl.p, (const char *)parent.p);
    }
    if (rc == HDMLP_OK) {
        *tmp_fd = open((const char *)tmpl.p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (*tmp_fd < 0) {
            rc = hd_err(hd_errno_code(errno), "cannot open %s: %s", (const char *)tmpl.p,
                        strerror(errno));
            rmdir((const char *)tmpl.p);
        }
    }
    pack_buf_free(&parent);
    pack_buf_free(&base);
    if (rc != HDMLP_OK) {
        pack_buf_free(&tmpl);
        return rc;
    }
    *tmpdir = (char *)tmpl.p;
    return HDMLP_OK;
}

int pack_outdir_write_index(int tmp_fd, const char *tmpdir, const uint8_t *buf, size_t len)
{
    const int fd =
        openat(tmp_fd, FMT_INDEX_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        return hd_err(hd_errno_code(errno), "cannot create %s/" FMT_INDEX_NAME ": %s", tmpdir,
                      strerror(errno));
    }
    size_t done = 0;
    int rc = HDMLP_OK;
    while (done < len) {
        const ssize_t r = write(fd, buf + done, len - done);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            rc = hd_err(hd_errno_code(errno), "cannot write %s/" FMT_INDEX_NAME ": %s", tmpdir,
                        strerror(errno));
            break;
        }
        done += (size_t)r;
    }
    if (rc == HDMLP_OK && fsync(fd) != 0) {
        rc = hd_err(hd_errno_code(errno), "cannot fsync %s/" FMT_INDEX_NAME ": %s", tmpdir,
                    strerror(errno));
    }
    if (close(fd) != 0 && rc == HDMLP_OK) {
        rc = hd_err(hd_errno_code(errno), "cannot close %s/" FMT_INDEX_NAME ": %s", tmpdir,
                    strerror(errno));
    }
    if (rc == HDMLP_OK && fsync(tmp_fd) != 0) {
        rc = hd_err(hd_errno_code(errno), "cannot fsync %s: %s", tmpdir, strerror(errno));
    }
    return rc;
}

/* Removes a directory holding only plain files (ours), or a non-directory. */
static int remove_flat(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        return errno == ENOENT ? 0 : errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        return unlink(path) == 0 ? 0 : errno;
    }
    const int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    DIR *const d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        const int err = errno;
        if (dfd >= 0) {
            close(dfd);
        }
        return err;
    }
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            (void)unlinkat(dirfd(d), de->d_name, 0);
        }
    }
    closedir(d);
    return rmdir(path) == 0 ? 0 : errno;
}

void pack_outdir_abort(const char *tmpdir)
{
    if (tmpdir) {
        (void)remove_flat(tmpdir);
    }
}

static void fsync_parent(const char *out)
{
    pack_buf parent = {0}, base = {0};
    if (split_out(out, &parent, &base) == HDMLP_OK) {
        const int fd = open((const char *)parent.p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            (void)fsync(fd);
            close(fd);
        }
    }
    pack_buf_free(&parent);
    pack_buf_free(&base);
}

static int rename_noreplace(const char *from, const char *to)
{
#ifdef HDMLP_HAVE_RENAMEAT2
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) {
        return 0;
    }
    if (errno != EINVAL && errno != ENOSYS) {
        return errno;
    }
#endif
    struct stat st;
    if (lstat(to, &st) == 0) {
        return EEXIST;
    }
    return rename(from, to) == 0 ? 0 : errno;
}

int pack_outdir_commit(const pack_opts *o, const char *tmpdir, const char *out)
{
    struct stat st;
    int err = 0;
    if (!o->force || lstat(out, &st) != 0) {
        err = rename_noreplace(tmpdir, out);
        if (err == EEXIST || err == ENOTEMPTY) {
            return hd_err(HDMLP_E_EXISTS,
                          "%s appeared while packing (use --force to replace "
                          "it)",
                          out);
        }
        if (err) {
            return hd_err(hd_errno_code(err), "cannot rename %s to %s: %s", tmpdir, out,
                          strerror(err));
        }
        fsync_parent(out);
        return HDMLP_OK;
    }
    /* Replace: swap atomically where the kernel can, else rename the old one aside. */
    const char *old = tmpdir;
    pack_buf aside = {0};
#ifdef HDMLP_HAVE_RENAMEAT2
    err = renameat2(AT_FDCWD, tmpdir, AT_FDCWD, out, RENAME_EXCHANGE) == 0 ? 0 : errno;
#else
    err = EINVAL;
#endif
    if (err == EINVAL || err == ENOSYS) {
        const size_t n = strlen(tmpdir);
        err = pack_buf_append(&aside, tmpdir, n) == HDMLP_OK &&
                      pack_buf_append(&aside, ".old", 5) == HDMLP_OK
                  ? 0
                  : ENOMEM;
        if (!err) {
            old = (const char *)aside.p;
            err = rename(out, old) == 0 ? 0 : errno;
        }
        if (!err) {
            err = rename(tmpdir, out) == 0 ? 0 : errno;
            if (err) {
                (void)rename(old, out); /* put the old one back */
            }
        }
    }
    if (err) {
        pack_buf_free(&aside);
        return hd_err(hd_errno_code(err), "cannot replace %s: %s", out, strerror(err));
    }
    fsync_parent(out);
    err = remove_flat(old);
    if (err) {
        pack_warn(o, "replaced %s, but could not remove the old dataset now at %s: %s", out,
                  old, strerror(err));
    }
    pack_buf_free(&aside);
    return HDMLP_OK;
}
