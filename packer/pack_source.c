/* Reading a sample's raw bytes from its source: a file (directory and list inputs, random
 * access in packed order) or the spill file (archive inputs). */
#include "pack_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_STEP (8u << 20) /* poll for cancellation between steps of big reads */

void pack_reader_init(pack_reader *r, const pack_ctx *ctx)
{
    r->ctx = ctx;
    r->path = NULL;
    r->path_cap = 0;
}

void pack_reader_free(pack_reader *r)
{
    hd_free(r->path);
    r->path = NULL;
    r->path_cap = 0;
}

const char *pack_reader_path(pack_reader *r, const pack_item *it, const uint8_t *key)
{
    const pack_src *const src = &r->ctx->srcs[it->input];
    const int absolute = src->kind == PACK_SRC_LIST && it->key_len > 0 && key[0] == '/';
    const size_t root_len = absolute ? 0 : src->root_len;
    const size_t need = root_len + it->key_len + 1;
    if (need > r->path_cap) {
        char *const p = hd_realloc(r->path, need);
        if (!p) {
            return NULL;
        }
        r->path = p;
        r->path_cap = need;
    }
    memcpy(r->path, src->root, root_len);
    memcpy(r->path + root_len, key, it->key_len);
    r->path[root_len + it->key_len] = '\0';
    return r->path;
}

/* Returns 0, an errno value, or -1 when cancelled (detail set). */
static int read_fully(int fd, uint8_t *dst, uint64_t len, uint64_t off, const pack_opts *o,
                      uint64_t *got)
{
    uint64_t done = 0;
    while (done < len) {
        const uint64_t want = len - done < READ_STEP ? len - done : READ_STEP;
        const ssize_t r = pread(fd, dst + done, (size_t)want, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            *got = done;
            return errno;
        }
        if (r == 0) {
            break;
        }
        done += (uint64_t)r;
        if (done < len && pack_cancelled(o)) {
            *got = done;
            hd_err(HDMLP_E_INTERRUPTED, "interrupted");
            return -1;
        }
    }
    *got = done;
    return 0;
}

int pack_read_item(pack_reader *r, const pack_item *it, const uint8_t *key, uint8_t *dst,
                   uint64_t len)
{
    const pack_ctx *const ctx = r->ctx;
    uint64_t got = 0;
    if (pack_src_spilled(ctx->srcs[it->input].kind)) {
        const int e = read_fully(ctx->spill_fd, dst, len, it->src, ctx->o, &got);
        if (e < 0) {
            return HDMLP_E_INTERRUPTED;
        }
        if (e > 0 || got != len) {
            return hd_err(HDMLP_E_IO,
                          "cannot read back member %.*s of %s from the spill "
                          "file: %s",
                          (int)it->key_len, (const char *)key, ctx->srcs[it->input].arg,
                          e > 0 ? strerror(e) : "short read");
        }
        return HDMLP_OK;
    }
    const char *const path = pack_reader_path(r, it, key);
    if (!path) {
        return hd_err(HDMLP_E_NOMEM, "out of memory");
    }
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return hd_err(hd_errno_code(errno), "cannot open %s: %s", path, strerror(errno));
    }
    struct stat st;
    int rc = HDMLP_OK;
    if (fstat(fd, &st) != 0) {
        rc = hd_err(HDMLP_E_IO, "cannot stat %s: %s", path, strerror(errno));
    } else if ((uint64_t)st.st_size != it->size || !S_ISREG(st.st_mode)) {
        rc = hd_err(HDMLP_E_IO, "%s changed during packing (was %llu bytes, now %llu)", path,
                    (unsigned long long)it->size, (unsigned long long)st.st_size);
    } else {
        const int e = read_fully(fd, dst, len, 0, ctx->o, &got);
        if (e < 0) {
            rc = HDMLP_E_INTERRUPTED;
        } else if (e > 0) {
            rc = hd_err(hd_errno_code(e), "cannot read %s: %s", path, strerror(e));
        } else if (got != len) {
            rc = hd_err(HDMLP_E_IO, "%s changed during packing (shorter than %llu bytes)", path,
                        (unsigned long long)len);
        }
    }
    close(fd);
    return rc;
}

void pack_prefetch_item(pack_reader *r, const pack_item *it, const uint8_t *key, uint64_t len)
{
    const pack_ctx *const ctx = r->ctx;
    if (len == 0) {
        return;
    }
    if (pack_src_spilled(ctx->srcs[it->input].kind)) {
        (void)posix_fadvise(ctx->spill_fd, (off_t)it->src, (off_t)len, POSIX_FADV_WILLNEED);
        return;
    }
    const char *const path = pack_reader_path(r, it, key);
    if (!path) {
        return;
    }
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return; /* the real read reports it */
    }
    (void)posix_fadvise(fd, 0, (off_t)len, POSIX_FADV_WILLNEED);
    close(fd);
}
