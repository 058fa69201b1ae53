/*
 * Chunk sources: the reader every source uses, the read of a plan's ranges through an I/O
 * engine (dataset and SSD sources), and the dataset's two sources, its local segment files
 * and its store's segment objects, one of which chunk_source_dataset picks once. The tier
 * sources are in loader_chunksrc_tier.c.
 */
#include "loader_chunksrc_private.h"

#include "format.h"

#include <stdio.h>

/* ---- readers ----------------------------------------------------------------------------- */

int chunksrc_reader_new(const chunk_source *s, io_engine *io, int own, chunk_reader **out)
{
    chunk_reader *const r = hd_calloc(1, sizeof(*r));
    if (r == NULL) {
        if (own) {
            io_engine_free(io);
        }
        return hd_err(HDMLP_E_NOMEM, "loader: out of memory");
    }
    r->src = s;
    r->io = io;
    r->own_io = own ? io : NULL;
    r->fd = -1;
    *out = r;
    return HDMLP_OK;
}

int chunk_reader_create(const chunk_source *s, io_engine *files, chunk_reader **out)
{
    *out = NULL;
    return s->ops->reader_create(s, files, out);
}

void chunk_reader_free(chunk_reader *r)
{
    if (r == NULL) {
        return;
    }
    io_engine_free(r->own_io);
    hd_free(r->reads);
    hd_free(r);
}

const chunk_source *chunk_reader_source(const chunk_reader *r) { return r->src; }

int chunk_find(chunk_reader *r, uint64_t chunk, const refill_plan *p)
{
    return r->src->ops->find(r, chunk, p);
}

int chunk_read(chunk_reader *r, uint64_t chunk, const refill_plan *p, uint8_t *buf,
               chunk_bytes *out)
{
    return r->src->ops->read(r, chunk, p, buf, out);
}

/* ---- a plan's ranges through the engine -------------------------------------------------- */

int chunksrc_read_ranges(chunk_reader *r, uint64_t chunk, const refill_plan *p, uint8_t *buf,
                         const char *where)
{
    const fmt_index *const ix = &r->src->ds->ix;
    fmt_chunk ch;
    fmt_index_chunk(ix, chunk, &ch);
    if (r->reads_cap < p->n_ranges) {
        io_read *const reads = hd_realloc(r->reads, p->n_ranges * sizeof(io_read));
        if (reads == NULL) {
            return hd_err(HDMLP_E_NOMEM, "loader: out of memory");
        }
        r->reads = reads;
        r->reads_cap = p->n_ranges;
    }
    for (uint32_t i = 0; i < p->n_ranges; i++) {
        r->reads[i] = (io_read){.fd = r->fd,
                                .offset = p->ranges[i].seg_off - ch.offset + r->base,
                                .len = p->ranges[i].len,
                                .dst = buf + p->ranges[i].buf_off,
                                .object = r->object};
    }
    int rc = io_engine_read(r->io, r->reads, p->n_ranges);
    if (rc != HDMLP_OK) {
        hd_err_wrap(rc, "%s, chunk %llu: ", where, (unsigned long long)chunk);
        return rc;
    }
    for (uint32_t i = 0; i < p->n_ranges; i++) {
        /* Direct reads may stop short inside the final alignment padding only. */
        const uint64_t end = p->ranges[i].seg_off - ch.offset + (uint64_t)r->reads[i].result;
        if ((uint64_t)r->reads[i].result < p->ranges[i].len && end < ch.length) {
            return hd_err(HDMLP_E_CORRUPT,
                          "%s, chunk %llu: file truncated (read %lld of %llu bytes at %llu)",
                          where, (unsigned long long)chunk, (long long)r->reads[i].result,
                          (unsigned long long)p->ranges[i].len,
                          (unsigned long long)r->reads[i].offset);
        }
    }
    if (p->whole) {
        rc = fmt_chunk_header_check(ix, chunk, buf, p->buf_len);
        if (rc != HDMLP_OK) {
            hd_err_wrap(rc, "%s: ", where);
        }
    }
    return rc;
}

/* ---- the dataset's segments -------------------------------------------------------------- */

static void dataset_name(const chunk_source *s, const refill_plan *p, char *buf, size_t cap)
{
    ds_segment_path(s->ds, p->segment, buf, cap);
}

static int dataset_read(chunk_reader *r, uint64_t chunk, const refill_plan *p, uint8_t *buf,
                        chunk_bytes *out)
{
    char where[512];
    dataset_name(r->src, p, where, sizeof(where));
    *out = (chunk_bytes){buf, 0};
    return chunksrc_read_ranges(r, chunk, p, buf, where);
}

/* Local segment files through the thread's engine (the segment's fd, opened on first use). */
static int local_reader_create(const chunk_source *s, io_engine *files, chunk_reader **out)
{
    return chunksrc_reader_new(s, files, 0, out);
}

static int local_find(chunk_reader *r, uint64_t chunk, const refill_plan *p)
{
    const int fd = ds_segment_fd(r->src->ds, p->segment, r->src->direct);
    if (fd < 0) {
        return fd; /* the code; the detail names the file */
    }
    fmt_chunk ch;
    fmt_index_chunk(&r->src->ds->ix, chunk, &ch);
    r->fd = fd;
    r->base = ch.offset;
    return HDMLP_OK;
}

static const chunk_source_ops local_ops = {
    .reader_create = local_reader_create,
    .find = local_find,
    .read = dataset_read,
    .name = dataset_name,
    .drop = NULL,
};

/* A remote dataset's segment objects through the reader's own store engine. */
static int remote_reader_create(const chunk_source *s, io_engine *files, chunk_reader **out)
{
    (void)files;
    io_engine *e = NULL;
    const int rc = io_engine_create_store(s->ds->store, 64, &e);
    if (rc != HDMLP_OK) {
        return rc;
    }
    return chunksrc_reader_new(s, e, 1, out);
}

static int remote_find(chunk_reader *r, uint64_t chunk, const refill_plan *p)
{
    fmt_chunk ch;
    fmt_index_chunk(&r->src->ds->ix, chunk, &ch);
    snprintf(r->object, sizeof(r->object), FMT_SEGMENT_NAME_FMT, p->segment);
    r->fd = -1;
    r->base = ch.offset;
    return HDMLP_OK;
}

static const chunk_source_ops remote_ops = {
    .reader_create = remote_reader_create,
    .find = remote_find,
    .read = dataset_read,
    .name = dataset_name,
    .drop = NULL,
};

void chunk_source_dataset(chunk_source *s, hdmlp_dataset *ds, int direct,
                          struct cost_clock *clock)
{
    *s = (chunk_source){.ops = ds->store != NULL ? &remote_ops : &local_ops,
                        .counter = TIER_SOURCE,
                        .clock = clock,
                        .ds = ds,
                        .direct = direct};
}
