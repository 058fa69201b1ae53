/*
 * Version 2's table source (format.h: fmt_tables), chosen at open by the index's version: a
 * get gives chunk c's sample table as a view (fmt_table2_view: checked whole the first
 * time, its sums every time) with its offsets in the caller's buffer. A local dataset
 * preads the table into the caller's buffer (one fd shared by every thread); for a
 * loader's planning, which reads a table a miss, it maps each table alone and views it in
 * place (ds_tables_mapped: no copy; a buffer keeps only its own table's pages mapped).
 * A remote dataset reads a table a get with a range read of the tables object.
 */
#include "loader_dataset_private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Chunk c in range and a buffer of the source's size. */
/* A held table's get needs a buffer for its offsets only. */
static size_t t2_held_scratch(const fmt_index *ix)
{
    return (size_t)ix->h.chunk_size * sizeof(uint64_t);
}

static int t2_check_args(const ds_private *p, uint64_t c, const void *buf, size_t cap,
                         size_t need)
{
    const fmt_index *ix = &p->pub.ix;
    if (c >= ix->h.n_chunks) {
        return hd_err(HDMLP_E_RANGE, "sample table of chunk %llu: out of range (%llu chunks)",
                      (ull)c, (ull)ix->h.n_chunks);
    }
    if (buf == NULL || cap < need) {
        return hd_err(HDMLP_E_INVAL,
                      "sample table of chunk %llu: a buffer of %zu bytes, the source needs %zu",
                      (ull)c, buf == NULL ? (size_t)0 : cap, need);
    }
    return HDMLP_OK;
}

/* Chunk c's table as read (raw) as a view, its offsets in off: checked whole the first time
 * (then marked in table_ok), its sums every time. */
static int t2_view(const ds_private *p, uint64_t c, const uint8_t *raw, uint64_t *off,
                   fmt_table *out)
{
    const int checked = atomic_load_explicit(&p->table_ok[c], memory_order_relaxed);
    const int rc = fmt_table2_view(&p->pub.ix, c, raw, off, checked, out);
    if (rc != HDMLP_OK) {
        char path[DS_PATH_MAX];
        ds_file_path(&p->pub, FMT_TABLES_NAME, path, sizeof(path));
        return hd_err_wrap(rc, "%s: ", path);
    }
    if (!checked) {
        atomic_store_explicit(&p->table_ok[c], 1, memory_order_relaxed);
    }
    return HDMLP_OK;
}

/* Reads len bytes of DIR/tables at off into buf: a local file's pread (EINTR and short reads
 * retried; HDMLP_E_CORRUPT at an early end of file) or a remote object's range read; an
 * error names the file or URL and `what`. */
static int t2_pread(const ds_private *p, uint8_t *buf, uint64_t len, uint64_t off,
                    const char *what)
{
    char path[DS_PATH_MAX];
    ds_file_path(&p->pub, FMT_TABLES_NAME, path, sizeof(path));
    if (p->pub.store != NULL) {
        hdmlp_dataset *ds = (hdmlp_dataset *)(uintptr_t)&p->pub;
        const int rc = ds_remote_read_object(ds, FMT_TABLES_NAME, buf, len, off);
        return rc == HDMLP_OK ? rc : hd_err_wrap(rc, "%s (%s): ", what, path);
    }
    return ds_fd_read(p->tables_fd, buf, len, off, path, what);
}

/* Reads chunk c's table (a local file's pread, a remote object's range read) into buf's
 * start (fmt_table2_scratch's layout); *off where its K offsets go, after it. */
static int t2_read_table(const ds_private *p, uint64_t c, void *buf, size_t cap, uint64_t **off)
{
    const fmt_index *ix = &p->pub.ix;
    const int rc = t2_check_args(p, c, buf, cap, fmt_table2_scratch(ix));
    if (rc != HDMLP_OK) {
        return rc;
    }
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    *off = (uint64_t *)(void *)((uint8_t *)buf +
                                (size_t)ix->h.chunk_size * ix->h.n_fields * FMT_VALUE_REC_LEN);
    char what[64];
    snprintf(what, sizeof(what), "sample table of chunk %llu", (ull)c);
    return t2_pread(p, buf, fmt_table2_len(ix, &ch), ch.table_offset, what);
}

/* A get that reads the table into buf; the view points into buf. */
static int t2_get_read(void *ctx, uint64_t c, void *buf, size_t cap, fmt_table *out)
{
    const ds_private *p = ctx;
    uint64_t *off;
    const int rc = t2_read_table(p, c, buf, cap, &off);
    return rc != HDMLP_OK ? rc : t2_view(p, c, buf, off, out);
}

static uint64_t t2_raw_top_sum(void *ctx, uint64_t m)
{
    const ds_private *p = ctx;
    return fmt_index2_raw_top_sum(&p->pub.ix, m);
}

/* A mapped get's buffer: this header (a tag that marks it as written, then the mapping of
 * the table it views: address and length), then the view's offsets. */
#define T2_MAP_TAG 0x50414d3254444d48ull /* "HMDT2MAP" */
#define T2_MAP_HEAD 24u

static size_t t2_map_scratch(const fmt_index *ix) { return T2_MAP_HEAD + t2_held_scratch(ix); }

/* Unmaps the table buf views, if it views one. */
static void t2_map_drop(void *ctx, void *buf)
{
    (void)ctx;
    uint64_t head[3];
    memcpy(head, buf, sizeof(head));
    if (head[0] == T2_MAP_TAG) {
        munmap((void *)(uintptr_t)head[1], (size_t)head[2]);
        memset(buf, 0, sizeof(head));
    }
}

/* A mapped get: the table buf viewed before is unmapped, chunk c's table mapped alone (its
 * pages and no neighbour's, which a mapping of the whole file would gather as the kernel
 * maps pages around each fault), populated at once (no faults while viewing), and viewed
 * in place, its offsets after buf's header. */
static int t2_get_mapped(void *ctx, uint64_t c, void *buf, size_t cap, fmt_table *out)
{
    const ds_private *p = ctx;
    const fmt_index *ix = &p->pub.ix;
    const int rc = t2_check_args(p, c, buf, cap, t2_map_scratch(ix));
    if (rc != HDMLP_OK) {
        return rc;
    }
    t2_map_drop(ctx, buf);
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    const uint64_t start = ch.table_offset / page * page;
    const uint64_t len = ch.table_offset - start + fmt_table2_len(ix, &ch);
    void *map = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED | MAP_POPULATE, p->tables_fd,
                     (off_t)start);
    if (map == MAP_FAILED) {
        const int err = errno;
        char path[DS_PATH_MAX];
        ds_file_path(&p->pub, FMT_TABLES_NAME, path, sizeof(path));
        return hd_err(hd_errno_code(err), "%s: mapping the sample table of chunk %llu: %s",
                      path, (ull)c, strerror(err));
    }
    const uint64_t head[3] = {T2_MAP_TAG, (uint64_t)(uintptr_t)map, len};
    memcpy(buf, head, sizeof(head));
    return t2_view(p, c, (const uint8_t *)map + (ch.table_offset - start),
                   (uint64_t *)(void *)((uint8_t *)buf + T2_MAP_HEAD), out);
}

fmt_tables ds_tables_mapped(const hdmlp_dataset *ds)
{
    const ds_private *p = ds_priv(ds);
    const uint64_t largest =
        (uint64_t)ds->ix.h.chunk_size * ds->ix.h.n_fields * FMT_VALUE_REC_LEN;
    if (ds->ix.h.major != 2 || p->tables_fd < 0 || largest < FMT_TABLE_MAP_MIN) {
        return ds->tables;
    }
    return (fmt_tables){.get = t2_get_mapped,
                        .raw_top_sum = t2_raw_top_sum,
                        .ctx = (void *)(uintptr_t)p,
                        .scratch = t2_map_scratch(&ds->ix),
                        .drop = t2_map_drop};
}

/* Planning's view of chunk c's table at raw: once a checked view took its block offsets
 * (and the table still counts as checked: verify's recheck makes the next get view it
 * whole), a sizes view with them (format.h: blk, no offsets summed); before, where block
 * offsets are kept, a checked view (its K offsets at off) whose blocks the first such
 * thread keeps; where they are not, a sizes view alone. */
static int t2_plan_view(ds_private *p, uint64_t c, const uint8_t *raw, uint64_t *off,
                        fmt_table *out)
{
    const fmt_index *ix = &p->pub.ix;
    if (p->blocks == NULL ||
        (atomic_load_explicit(&p->blocks_state[c], memory_order_acquire) == 2 &&
         atomic_load_explicit(&p->table_ok[c], memory_order_relaxed))) {
        fmt_table2_view_of(ix, c, raw, NULL, out);
        out->blk = p->blocks != NULL ? p->blocks + c * p->bpc : NULL;
        return HDMLP_OK;
    }
    const int rc = t2_view(p, c, raw, off, out);
    unsigned char none = 0;
    if (rc == HDMLP_OK && atomic_compare_exchange_strong(&p->blocks_state[c], &none, 1)) {
        fmt_table2_blocks(out, p->blocks + c * p->bpc);
        atomic_store_explicit(&p->blocks_state[c], 2, memory_order_release);
    }
    return rc;
}

/* A planning get that reads the table (a pread into buf: its pages stay the page cache's,
 * nothing is mapped, so no TLB flush reaches the other threads' CPUs, as letting go of a
 * mapping's pages would), its offsets after it. */
static int t2_get_plan_read(void *ctx, uint64_t c, void *buf, size_t cap, fmt_table *out)
{
    ds_private *const p = ctx;
    uint64_t *off;
    const int rc = t2_read_table(p, c, buf, cap, &off);
    return rc != HDMLP_OK ? rc : t2_plan_view(p, c, buf, off, out);
}

/* A planning get of held tables (buf: K offsets where block offsets are kept). */
static int t2_get_plan_held(void *ctx, uint64_t c, void *buf, size_t cap, fmt_table *out)
{
    ds_private *const p = ctx;
    const fmt_index *ix = &p->pub.ix;
    const int rc = t2_check_args(p, c, buf, cap, t2_held_scratch(ix));
    if (rc != HDMLP_OK) {
        return rc;
    }
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    return t2_plan_view(p, c, p->tables_held + ch.table_offset, buf, out);
}

static int t2_get_held(void *ctx, uint64_t c, void *buf, size_t cap, fmt_table *out);

/* Keeps block offsets for the tables (hold_lock held), unless a chunk is 4 GiB or longer
 * (block offsets are 32-bit): then records come from whole views. */
static int t2_keep_blocks(ds_private *p)
{
    const fmt_index *ix = &p->pub.ix;
    if (p->blocks != NULL) {
        return HDMLP_OK;
    }
    for (uint64_t c = 0; c < ix->h.n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        if (ch.length > UINT32_MAX) {
            return HDMLP_OK;
        }
    }
    const uint32_t bpc = (ix->h.chunk_size + FMT_TABLE_BLOCK - 1) / FMT_TABLE_BLOCK;
    const size_t nc = ix->h.n_chunks ? (size_t)ix->h.n_chunks : 1;
    p->blocks_state = hd_calloc(nc, sizeof(atomic_uchar));
    p->blocks = hd_malloc(nc * bpc * sizeof(uint32_t));
    if (p->blocks == NULL || p->blocks_state == NULL) {
        hd_free(p->blocks);
        hd_free(p->blocks_state);
        p->blocks = NULL;
        p->blocks_state = NULL;
        return hd_err(HDMLP_E_NOMEM, "%s: out of memory for the block offsets of %llu chunks",
                      p->pub.path, (ull)ix->h.n_chunks);
    }
    p->bpc = bpc;
    return HDMLP_OK;
}

int ds_tables_plan(hdmlp_dataset *ds, int held, int blocks, fmt_tables *plan, fmt_tables *views)
{
    ds_private *const p = ds_priv(ds);
    const fmt_index *ix = &ds->ix;
    if (ix->h.major != 2 || (!held && p->tables_fd < 0)) {
        *plan = *views = ds->tables;
        return HDMLP_OK;
    }
    int rc = HDMLP_OK;
    pthread_mutex_lock(&p->hold_lock);
    if (held && p->tables_held == NULL) {
        rc = hd_err(HDMLP_E_STATE,
                    "%s: planning's view of held tables asked before holding them", ds->path);
    } else if (blocks) {
        rc = t2_keep_blocks(p);
    }
    pthread_mutex_unlock(&p->hold_lock);
    if (rc == HDMLP_OK) {
        *plan = (fmt_tables){.get = held ? t2_get_plan_held : t2_get_plan_read,
                             .raw_top_sum = t2_raw_top_sum,
                             .ctx = p,
                             .scratch = held ? t2_held_scratch(ix) : fmt_table2_scratch(ix)};
        *views = (fmt_tables){.get = held ? t2_get_held : t2_get_read,
                              .raw_top_sum = t2_raw_top_sum,
                              .ctx = p,
                              .scratch = held ? t2_held_scratch(ix) : fmt_table2_scratch(ix)};
    }
    return rc;
}

/* A get of tables held whole (for a loader's budget or a forecast: ds_tables_hold):
 * a view into them, its offsets in buf (t2_held_scratch bytes). */
static int t2_get_held(void *ctx, uint64_t c, void *buf, size_t cap, fmt_table *out)
{
    const ds_private *p = ctx;
    const int rc = t2_check_args(p, c, buf, cap, t2_held_scratch(&p->pub.ix));
    if (rc != HDMLP_OK) {
        return rc;
    }
    fmt_chunk ch;
    fmt_index_chunk(&p->pub.ix, c, &ch);
    return t2_view(p, c, p->tables_held + ch.table_offset, buf, out);
}

/* Opens DIR/tables of a local dataset into p->tables_fd and checks its size. */
static int t2_open_local(ds_private *p)
{
    const fmt_index *ix = &p->pub.ix;
    char path[DS_PATH_MAX];
    ds_file_path(&p->pub, FMT_TABLES_NAME, path, sizeof(path));
    p->tables_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (p->tables_fd < 0) {
        const int err = errno;
        if (err == ENOENT) {
            return hd_err(HDMLP_E_NOTFOUND,
                          "%s: tables file missing (a version-2 dataset's sample tables)",
                          path);
        }
        return hd_err(hd_errno_code(err), "%s: open: %s", path, strerror(err));
    }
    struct stat st;
    if (fstat(p->tables_fd, &st) != 0) {
        const int err = errno;
        return hd_err(hd_errno_code(err), "%s: stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        return hd_err(HDMLP_E_CORRUPT, "%s: tables file is not a regular file", path);
    }
    if ((uint64_t)st.st_size != ix->h.tables_bytes) {
        return hd_err(HDMLP_E_CORRUPT,
                      "%s: tables file has %llu bytes, the index says %llu (%s)", path,
                      (ull)st.st_size, (ull)ix->h.tables_bytes,
                      (uint64_t)st.st_size < ix->h.tables_bytes ? "truncated" : "wrong file");
    }
    uint8_t hdr[FMT_FILE_HEADER_LEN];
    if (pread(p->tables_fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
        return hd_err(HDMLP_E_IO, "%s: cannot read its header", path);
    }
    const int rc = fmt_file_header_check(ix, path, FMT_TABLES_MAGIC, hdr, sizeof(hdr));
    if (rc != HDMLP_OK) {
        return rc;
    }
    /* Tables are read whole, a chunk at a time, in the schedule's order: no readahead. */
    (void)posix_fadvise(p->tables_fd, 0, 0, POSIX_FADV_RANDOM);
    return HDMLP_OK;
}

int ds_tables2_open(ds_private *p)
{
    hdmlp_dataset *ds = &p->pub;
    const fmt_index *ix = &ds->ix;
    p->table_ok = hd_calloc(ix->h.n_chunks ? (size_t)ix->h.n_chunks : 1, sizeof(atomic_uchar));
    if (p->table_ok == NULL) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for the tables of %llu chunks",
                      (ull)ix->h.n_chunks);
    }
    int rc;
    if (ds->store != NULL) {
        /* A remote copy's tables are read as a local file's are: a range a get (the
         * object's size and header checked here), held whole only where a loader's budget
         * or a forecast holds them (ds_tables_hold). */
        const char *const name = FMT_TABLES_NAME;
        uint8_t hdr[FMT_FILE_HEADER_LEN];
        rc = ds_remote_check_sizes(ds, &name, &ix->h.tables_bytes, 1);
        if (rc == HDMLP_OK) {
            rc = t2_pread(p, hdr, sizeof(hdr), 0, "its header");
        }
        if (rc == HDMLP_OK) {
            char url[DS_PATH_MAX];
            ds_file_path(ds, FMT_TABLES_NAME, url, sizeof(url));
            rc = fmt_file_header_check(ix, url, FMT_TABLES_MAGIC, hdr, sizeof(hdr));
        }
    } else {
        rc = t2_open_local(p);
    }
    if (rc == HDMLP_OK) {
        rc = ds_keys2_open(p);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    ds->tables = (fmt_tables){.get = t2_get_read,
                              .raw_top_sum = t2_raw_top_sum,
                              .ctx = p,
                              .scratch = fmt_table2_scratch(ix)};
    return HDMLP_OK;
}

void ds_tables2_close(ds_private *p)
{
    if (p->tables_fd >= 0) {
        close(p->tables_fd);
        p->tables_fd = -1;
    }
    hd_free(p->tables_held);
    p->tables_held = NULL;
    hd_free(p->offsets_held);
    p->offsets_held = NULL;
    hd_free(p->table_ok);
    p->table_ok = NULL;
    hd_free(p->blocks);
    p->blocks = NULL;
    hd_free(p->blocks_state);
    p->blocks_state = NULL;
    hd_free(p->rec_buf);
    p->rec_buf = NULL;
    ds_keys2_close(p);
}

/* Asks for huge pages over the whole 2 MiB pages of [p, p + len) (where the kernel grants
 * them on request): held tables are read at scattered samples every miss, and with 4 KiB
 * pages most such reads also miss the TLB (a forecast at 4 M samples spends a sixth of its
 * time there). Advice only: a refusal changes nothing. */
static void t2_huge(void *p, uint64_t len)
{
    const uintptr_t huge = (uintptr_t)2 << 20;
    const uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    const uintptr_t hi = ((uintptr_t)p + (uintptr_t)len) & ~(huge - 1);
    if (p != NULL && hi > lo) {
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
}

/* Views every table of the whole tables file at `whole` (each checked as its first get
 * would be): offsets into off's first K entries, or, `each`, chunk c's at off + c × K. */
static int t2_view_all(const ds_private *p, const uint8_t *whole, uint64_t *off, bool each)
{
    const fmt_index *ix = &p->pub.ix;
    int rc = HDMLP_OK;
    for (uint64_t c = 0; rc == HDMLP_OK && c < ix->h.n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        fmt_table t;
        rc =
            t2_view(p, c, whole + ch.table_offset, each ? off + c * ix->h.chunk_size : off, &t);
    }
    return rc;
}

int ds_tables_hold(hdmlp_dataset *ds, fmt_tables *out)
{
    ds_private *const p = ds_priv(ds);
    const fmt_index *ix = &ds->ix;
    if (ix->h.major != 2) {
        *out = ds->tables;
        return HDMLP_OK;
    }
    const uint64_t len = ix->h.tables_bytes;
    int rc = HDMLP_OK;
    pthread_mutex_lock(&p->hold_lock);
    if (p->tables_held == NULL) {
        /* The whole file in one read, each table then checked once from memory. */
        uint8_t *whole = len <= SIZE_MAX ? hd_malloc((size_t)len) : NULL;
        uint64_t *off = hd_malloc((size_t)ix->h.chunk_size * sizeof(uint64_t));
        t2_huge(whole, len);
        rc = whole != NULL && off != NULL
                 ? t2_pread(p, whole, len, 0, "the sample tables, read whole")
                 : hd_err(HDMLP_E_NOMEM, "%s: cannot hold %llu bytes of sample tables",
                          ds->path, (ull)len);
        if (rc == HDMLP_OK) {
            rc = t2_view_all(p, whole, off, false);
        }
        hd_free(off);
        if (rc == HDMLP_OK) {
            p->tables_held = whole;
        } else {
            hd_free(whole);
        }
    }
    pthread_mutex_unlock(&p->hold_lock);
    if (rc == HDMLP_OK) {
        *out = (fmt_tables){.get = t2_get_held,
                            .raw_top_sum = t2_raw_top_sum,
                            .ctx = p,
                            .scratch = t2_held_scratch(ix)};
    }
    return rc;
}

/* A get of held tables with held offsets: a view, nothing to sum (buf unused). */
static int t2_get_held_offsets(void *ctx, uint64_t c, void *buf, size_t cap, fmt_table *out)
{
    (void)buf;
    (void)cap;
    const ds_private *p = ctx;
    const fmt_index *ix = &p->pub.ix;
    if (c >= ix->h.n_chunks) {
        return hd_err(HDMLP_E_RANGE, "sample table of chunk %llu: out of range (%llu chunks)",
                      (ull)c, (ull)ix->h.n_chunks);
    }
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    fmt_table2_view_of(ix, c, p->tables_held + ch.table_offset,
                       p->offsets_held + c * ix->h.chunk_size, out);
    return HDMLP_OK;
}

int ds_tables_hold_offsets(hdmlp_dataset *ds, fmt_tables *out)
{
    ds_private *const p = ds_priv(ds);
    const fmt_index *ix = &ds->ix;
    int rc = ds_tables_hold(ds, out);
    if (rc != HDMLP_OK || ix->h.major != 2) {
        return rc;
    }
    pthread_mutex_lock(&p->hold_lock);
    if (p->offsets_held == NULL) {
        const uint64_t n = ix->h.n_samples;
        uint64_t *off = n <= SIZE_MAX / sizeof(uint64_t)
                            ? hd_malloc((size_t)(n ? n : 1) * sizeof(uint64_t))
                            : NULL;
        t2_huge(off, n * sizeof(uint64_t));
        rc = off != NULL ? HDMLP_OK
                         : hd_err(HDMLP_E_NOMEM, "%s: cannot hold the offsets of %llu samples",
                                  ds->path, (ull)n);
        if (rc == HDMLP_OK) {
            rc = t2_view_all(p, p->tables_held, off, true);
        }
        if (rc == HDMLP_OK) {
            p->offsets_held = off;
        } else {
            hd_free(off);
        }
    }
    pthread_mutex_unlock(&p->hold_lock);
    if (rc == HDMLP_OK) {
        *out = (fmt_tables){
            .get = t2_get_held_offsets, .raw_top_sum = t2_raw_top_sum, .ctx = p, .scratch = 0};
    }
    return rc;
}

void ds_table_recheck(const hdmlp_dataset *ds, uint64_t c)
{
    const ds_private *p = ds_priv(ds);
    if (p->table_ok != NULL && c < ds->ix.h.n_chunks) {
        atomic_store_explicit(&p->table_ok[c], 0, memory_order_relaxed);
    }
}
