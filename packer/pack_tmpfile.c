/* Temporary files of the packer: created in the temporary output directory and unlinked at
 * once (they disappear with their descriptor whatever happens), appended to through a
 * buffer, read back with pread (from any thread) or through a sequential cursor. Below
 * pack_items.c: it calls nothing of the packer's. */
#include "pack_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int pack_tmp_create(pack_tmp *f, const char *dir, const char *name, size_t buf_cap)
{
    memset(f, 0, sizeof(*f));
    f->fd = -1;
    const size_t len = strlen(dir) + 1 + strlen(name) + 1;
    f->path = hd_malloc(len);
    if (!f->path) {
        return hd_err(HDMLP_E_NOMEM, "out of memory");
    }
    snprintf(f->path, len, "%s/%s", dir, name);
    f->fd = open(f->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (f->fd < 0) {
        const int rc =
            hd_err(hd_errno_code(errno), "cannot create %s: %s", f->path, strerror(errno));
        pack_tmp_close(f);
        return rc;
    }
    unlink(f->path);
    f->cap = buf_cap;
    f->buf = hd_malloc(buf_cap);
    if (!f->buf) {
        pack_tmp_close(f);
        return hd_err(HDMLP_E_NOMEM, "out of memory for the buffer of %s/%s", dir, name);
    }
    return HDMLP_OK;
}

int pack_tmp_flush(pack_tmp *f)
{
    const uint64_t at = f->end - f->len;
    size_t done = 0;
    while (done < f->len) {
        const ssize_t r = pwrite(f->fd, f->buf + done, f->len - done, (off_t)(at + done));
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return hd_err(hd_errno_code(errno), "cannot write %s: %s", f->path,
                          strerror(errno));
        }
        done += (size_t)r;
    }
    f->len = 0;
    return HDMLP_OK;
}

int pack_tmp_append(pack_tmp *f, const void *p, size_t n)
{
    const uint8_t *src = p;
    while (n > 0) {
        if (f->len == f->cap) {
            const int rc = pack_tmp_flush(f);
            if (rc != HDMLP_OK) {
                return rc;
            }
        }
        const size_t k = n < f->cap - f->len ? n : f->cap - f->len;
        memcpy(f->buf + f->len, src, k);
        f->len += k;
        f->end += k;
        src += k;
        n -= k;
    }
    return HDMLP_OK;
}

int pack_tmp_seal(pack_tmp *f)
{
    const int rc = f->buf ? pack_tmp_flush(f) : HDMLP_OK;
    hd_free(f->buf);
    f->buf = NULL;
    f->cap = 0;
    return rc;
}

int pack_tmp_read(const pack_tmp *f, void *dst, size_t n, uint64_t off)
{
    size_t done = 0;
    while (done < n) {
        const ssize_t r = pread(f->fd, (uint8_t *)dst + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return hd_err(HDMLP_E_IO, "cannot read back %s: %s", f->path,
                          r < 0 ? strerror(errno) : "short read");
        }
        done += (size_t)r;
    }
    return HDMLP_OK;
}

void pack_tmp_close(pack_tmp *f)
{
    if (f->path && f->fd >= 0) { /* a zeroed pack_tmp (fd 0) owns nothing */
        close(f->fd);
    }
    hd_free(f->buf);
    hd_free(f->path);
    memset(f, 0, sizeof(*f));
    f->fd = -1;
}

int pack_cursor_open(pack_tmp_cursor *c, const pack_tmp *f, uint64_t off, uint64_t end,
                     size_t buf_cap)
{
    memset(c, 0, sizeof(*c));
    c->f = f;
    c->off = off;
    c->end = end;
    c->cap = buf_cap;
    c->buf = hd_malloc(buf_cap);
    if (!c->buf) {
        return hd_err(HDMLP_E_NOMEM, "out of memory reading %s", f->path);
    }
    return HDMLP_OK;
}

int pack_cursor_read(pack_tmp_cursor *c, void *dst, size_t n)
{
    uint8_t *out = dst;
    while (n > 0) {
        if (c->pos == c->len) {
            const uint64_t left = c->end - c->off;
            if (left == 0) {
                return hd_err(HDMLP_E_IO, "cannot read back %s: shorter than written",
                              c->f->path);
            }
            const size_t want = left < c->cap ? (size_t)left : c->cap;
            const int rc = pack_tmp_read(c->f, c->buf, want, c->off);
            if (rc != HDMLP_OK) {
                return rc;
            }
            c->off += want;
            c->len = want;
            c->pos = 0;
        }
        const size_t k = n < c->len - c->pos ? n : c->len - c->pos;
        memcpy(out, c->buf + c->pos, k);
        c->pos += k;
        out += k;
        n -= k;
    }
    return HDMLP_OK;
}

void pack_cursor_close(pack_tmp_cursor *c)
{
    hd_free(c->buf);
    memset(c, 0, sizeof(*c));
}
