/* The spill file: archive members' bytes back to back, read back later in packed order.
 * It lives in the temporary output directory and is unlinked as soon as it is created,
 * so it disappears with the last descriptor whatever happens. */
#include "pack_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define SPILL_BUF (4u << 20)
#define SPILL_NAME "spill"

int pack_spill_open(pack_ctx *ctx, pack_spill_writer *w)
{
    memset(w, 0, sizeof(*w));
    w->fd = -1;
    if (ctx->spill_fd < 0) {
        pack_buf path = {0};
        if (pack_buf_append(&path, ctx->tmpdir, strlen(ctx->tmpdir)) != HDMLP_OK ||
            pack_buf_append(&path, "/" SPILL_NAME, sizeof("/" SPILL_NAME)) != HDMLP_OK) {
            pack_buf_free(&path);
            return HDMLP_E_NOMEM;
        }
        const char *const p = (const char *)path.p;
        const int fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            const int rc =
                hd_err(hd_errno_code(errno), "cannot create %s: %s", p, strerror(errno));
            pack_buf_free(&path);
            return rc;
        }
        unlink(p);
        pack_buf_free(&path);
        ctx->spill_fd = fd;
        ctx->spill_size = 0;
    }
    w->fd = ctx->spill_fd;
    w->path = ctx->tmpdir;
    w->pos = ctx->spill_size;
    w->cap = SPILL_BUF;
    w->buf = hd_malloc(w->cap);
    if (!w->buf) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for the spill buffer");
    }
    return HDMLP_OK;
}

static int spill_flush(pack_spill_writer *w)
{
    size_t done = 0;
    while (done < w->len) {
        const ssize_t r = pwrite(w->fd, w->buf + done, w->len - done, (off_t)(w->pos + done));
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return hd_err(hd_errno_code(errno), "cannot write %s/" SPILL_NAME ": %s", w->path,
                          strerror(errno));
        }
        done += (size_t)r;
    }
    w->pos += w->len;
    w->len = 0;
    return HDMLP_OK;
}

int pack_spill_reserve(pack_spill_writer *w, uint8_t **p, size_t *avail)
{
    if (w->len == w->cap) {
        const int rc = spill_flush(w);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    *p = w->buf + w->len;
    *avail = w->cap - w->len;
    return HDMLP_OK;
}

int pack_spill_append(pack_spill_writer *w, const void *data, size_t n)
{
    const uint8_t *const b = data;
    for (size_t done = 0; done < n;) {
        uint8_t *p;
        size_t avail;
        const int rc = pack_spill_reserve(w, &p, &avail);
        if (rc != HDMLP_OK) {
            return rc;
        }
        const size_t k = avail < n - done ? avail : n - done;
        memcpy(p, b + done, k);
        w->len += k;
        done += k;
    }
    return HDMLP_OK;
}

int pack_spill_close(pack_ctx *ctx, pack_spill_writer *w, int ok)
{
    int rc = HDMLP_OK;
    if (ok && w->buf) {
        rc = spill_flush(w);
        if (rc == HDMLP_OK) {
            ctx->spill_size = w->pos;
        }
    }
    hd_free(w->buf);
    w->buf = NULL;
    return rc;
}
