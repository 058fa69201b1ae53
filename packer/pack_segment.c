/* Segment files: chunks appended 4096-aligned, rolled over at the size limit, written
 * back early (so the final fsync is short and dirty memory stays bounded), fsynced on
 * close. */
#include "pack_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WRITEBACK_STEP (16u << 20)

void pack_segw_init(pack_segw *w, int dirfd, const char *dir, uint64_t limit)
{
    memset(w, 0, sizeof(*w));
    w->dirfd = dirfd;
    w->dir = dir;
    w->limit = limit;
    w->fd = -1;
}

static int seg_err(const pack_segw *w, const char *what, int err)
{
    return hd_err(hd_errno_code(err), "cannot %s %s/" FMT_SEGMENT_NAME_FMT ": %s", what, w->dir,
                  w->n_segs - 1, strerror(err));
}

/* Starts writeback of what was written since the last call and waits for the step
 * before, so at most ~2 steps are dirty. */
static void writeback(pack_segw *w, int all)
{
#ifdef HDMLP_HAVE_SYNC_FILE_RANGE
    if (w->size - w->synced >= WRITEBACK_STEP || (all && w->size > w->synced)) {
        (void)sync_file_range(w->fd, (off_t)w->synced, (off_t)(w->size - w->synced),
                              SYNC_FILE_RANGE_WRITE);
        if (w->synced > w->waited) {
            (void)sync_file_range(w->fd, (off_t)w->waited, (off_t)(w->synced - w->waited),
                                  SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                      SYNC_FILE_RANGE_WAIT_AFTER);
            w->waited = w->synced;
        }
        w->synced = w->size;
    }
#else
    (void)w;
    (void)all;
#endif
}

/* Segments beyond the first FSYNC_EACH are not fsynced one by one (one file per chunk
 * makes that thousands of journal commits): their writeback is started when they are
 * closed and one syncfs() at the end makes them all durable before the index is written. */
#define FSYNC_EACH 16u

static int seg_close(pack_segw *w)
{
    if (w->fd < 0) {
        return HDMLP_OK;
    }
    int rc = HDMLP_OK;
#ifdef HDMLP_HAVE_SYNCFS
    const int defer = w->n_segs > FSYNC_EACH;
#else
    const int defer = 0;
#endif
    if (defer) {
        w->deferred = 1;
    } else if (fsync(w->fd) != 0) {
        rc = seg_err(w, "fsync", errno);
    }
    if (close(w->fd) != 0 && rc == HDMLP_OK) {
        rc = seg_err(w, "close", errno);
    }
    w->fd = -1;
    return rc;
}

static int seg_open(pack_segw *w)
{
    if (w->n_segs == UINT32_MAX || w->n_segs >= 1000000u) {
        return hd_err(HDMLP_E_RANGE, "too many segment files (at most 1000000); use a "
                                     "larger segment size");
    }
    if (w->n_segs == w->cap_segs) {
        const uint32_t cap = w->cap_segs ? w->cap_segs * 2 : 16;
        fmt_segment *const s = hd_realloc(w->segs, cap * sizeof(fmt_segment));
        if (!s) {
            return hd_err(HDMLP_E_NOMEM, "out of memory for segments");
        }
        w->segs = s;
        w->cap_segs = cap;
    }
    char name[32];
    snprintf(name, sizeof(name), FMT_SEGMENT_NAME_FMT, w->n_segs);
    w->segs[w->n_segs].size = 0;
    w->segs[w->n_segs].n_chunks = 0;
    w->n_segs++;
    w->fd = openat(w->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (w->fd < 0) {
        return seg_err(w, "create", errno);
    }
    w->size = w->synced = w->waited = 0;
    return HDMLP_OK;
}

int pack_segw_append(pack_segw *w, const uint8_t *buf, uint64_t len, fmt_chunk *rec)
{
    const uint64_t padded = fmt_align_up(len);
    int rc = HDMLP_OK;
    if (w->fd >= 0 && (w->limit == 0 || w->size + padded > w->limit)) {
        writeback(w, 1);
        rc = seg_close(w);
    }
    if (rc == HDMLP_OK && w->fd < 0) {
        rc = seg_open(w);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    uint64_t done = 0;
    while (done < padded) {
        const ssize_t r = write(w->fd, buf + done, (size_t)(padded - done));
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return seg_err(w, "write", errno);
        }
        done += (uint64_t)r;
    }
    rec->segment = w->n_segs - 1;
    rec->offset = w->size;
    w->size += padded;
    w->file_bytes += padded;
    fmt_segment *const s = &w->segs[w->n_segs - 1];
    s->size = w->size;
    s->n_chunks++;
    writeback(w, 0);
    return HDMLP_OK;
}

int pack_segw_finish(pack_segw *w)
{
    if (w->fd >= 0) {
        writeback(w, 1);
    }
    int rc = seg_close(w);
#ifdef HDMLP_HAVE_SYNCFS
    if (rc == HDMLP_OK && w->deferred && syncfs(w->dirfd) != 0) {
        rc = hd_err(hd_errno_code(errno), "cannot sync the segments in %s: %s", w->dir,
                    strerror(errno));
    }
#endif
    return rc;
}

void pack_segw_free(pack_segw *w)
{
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    hd_free(w->segs);
    w->segs = NULL;
}
