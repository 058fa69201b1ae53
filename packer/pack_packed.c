/* Items in packed order on disk: the merge of the sorted runs hands every item, in sorted
 * order, to the bucket of its packed position (pack_order_pos), and the chunk writer and
 * the dictionary read them back by increasing position, one bucket in memory at a time.
 *
 * Why buckets and not a sorted items file read by position: packed position p holds sorted
 * item sigma(p), so reading a sorted file in packed order is one random pread of a record
 * (and one of its key) per sample, for every sample, into files of N × ~60 bytes. At 4 M
 * samples of 64 bytes from a .tar.zst that doubled the pack's time against the in-memory
 * packer (40 s against 19 s, three times the system time), reading nothing but page cache.
 * Distributing the sorted stream into buckets of consecutive positions costs the same
 * bytes written (each item once) and turns the reads into whole buckets read
 * sequentially.
 *
 * Layout: bucket b covers positions [b × per, (b + 1) × per), per a multiple of K so that
 * no chunk straddles two buckets, sized so that a bucket's records and keys take about a
 * quarter of the sort budget (the chunk writer's claimer and its prefetcher each hold one).
 * While writing, each bucket has a small buffer for its records and one for its keys; a
 * full buffer is appended to items.packed / keys.packed as a block, and the bucket's list
 * of blocks grows. A record's seq is its packed position, its key_off the offset of its key
 * among its bucket's keys. */
#include "pack_internal.h"

#include <string.h>

#define PACKED_FILE_BUF (1u << 20)
#define WBUF_MIN (4u << 10)
#define WBUF_MAX (64u << 10)

int pack_packed_begin(pack_ctx *ctx, uint32_t k, uint64_t budget)
{
    pack_packed *const pk = &ctx->packed;
    const uint64_t n = ctx->n_items;
    const uint64_t avg = PACK_ITEM_LEN + (ctx->key_bytes + n - 1) / (n ? n : 1);
    uint64_t per = budget / 4 / avg / k * k;
    per = per < k ? k : per;
    pk->per = per;
    pk->n_buckets = (n + per - 1) / per;
    uint64_t cap = budget / 4 / (pk->n_buckets ? pk->n_buckets : 1);
    pk->wbuf_cap = (size_t)(cap < WBUF_MIN ? WBUF_MIN : cap > WBUF_MAX ? WBUF_MAX : cap);
    pk->blocks = hd_calloc((size_t)pk->n_buckets * 2, sizeof(pack_buf));
    pk->wbuf = hd_calloc((size_t)pk->n_buckets * 2, sizeof(pack_buf));
    pk->key_bytes = hd_calloc((size_t)pk->n_buckets, sizeof(uint64_t));
    if (!pk->blocks || !pk->wbuf || !pk->key_bytes) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for %llu buckets",
                      (unsigned long long)pk->n_buckets);
    }
    int rc = pack_tmp_create(&pk->items, ctx->tmpdir, "items.packed", PACKED_FILE_BUF);
    if (rc == HDMLP_OK) {
        rc = pack_tmp_create(&pk->keys, ctx->tmpdir, "keys.packed", PACKED_FILE_BUF);
    }
    return rc;
}

/* Appends buffer i (2b: records, 2b + 1: keys) to its file as a block of its bucket. */
static int flush_wbuf(pack_packed *pk, uint64_t i)
{
    pack_buf *const w = &pk->wbuf[i];
    if (w->len == 0) {
        return HDMLP_OK;
    }
    pack_tmp *const f = i % 2 ? &pk->keys : &pk->items;
    const pack_block blk = {f->end, w->len};
    int rc = pack_tmp_append(f, w->p, w->len);
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(&pk->blocks[i], &blk, sizeof(blk));
    }
    w->len = 0;
    return rc;
}

static int wbuf_add(pack_packed *pk, uint64_t i, const void *p, size_t n)
{
    pack_buf *const w = &pk->wbuf[i];
    if (w->len + n > pk->wbuf_cap) {
        const int rc = flush_wbuf(pk, i);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    return pack_buf_append(w, p, n);
}

int pack_packed_add(pack_ctx *ctx, uint64_t pos, const pack_item *it, const uint8_t *key)
{
    pack_packed *const pk = &ctx->packed;
    const uint64_t b = pos / pk->per;
    pack_item rec = *it;
    rec.seq = pos;
    rec.key_off = pk->key_bytes[b];
    pk->key_bytes[b] += it->key_len;
    int rc = wbuf_add(pk, 2 * b, &rec, PACK_ITEM_LEN);
    if (rc == HDMLP_OK && it->key_len > 0) {
        rc = wbuf_add(pk, 2 * b + 1, key, it->key_len);
    }
    return rc;
}

int pack_packed_end(pack_ctx *ctx)
{
    pack_packed *const pk = &ctx->packed;
    int rc = HDMLP_OK;
    for (uint64_t i = 0; i < pk->n_buckets * 2 && rc == HDMLP_OK; i++) {
        rc = flush_wbuf(pk, i);
    }
    for (uint64_t i = 0; i < pk->n_buckets * 2; i++) {
        pack_buf_free(&pk->wbuf[i]);
    }
    hd_free(pk->wbuf);
    pk->wbuf = NULL;
    if (rc == HDMLP_OK) {
        rc = pack_tmp_seal(&pk->items);
    }
    if (rc == HDMLP_OK) {
        rc = pack_tmp_seal(&pk->keys);
    }
    return rc;
}

void pack_packed_free(pack_packed *pk)
{
    for (uint64_t i = 0; pk->blocks && i < pk->n_buckets * 2; i++) {
        pack_buf_free(&pk->blocks[i]);
    }
    for (uint64_t i = 0; pk->wbuf && i < pk->n_buckets * 2; i++) {
        pack_buf_free(&pk->wbuf[i]);
    }
    hd_free(pk->blocks);
    hd_free(pk->wbuf);
    hd_free(pk->key_bytes);
    pack_tmp_close(&pk->items);
    pack_tmp_close(&pk->keys);
    memset(pk, 0, sizeof(*pk));
}

/* ---- reading ------------------------------------------------------------------------------
 */

void pack_packed_reader_init(pack_packed_reader *r, const pack_ctx *ctx)
{
    memset(r, 0, sizeof(*r));
    r->ctx = ctx;
    r->bucket = UINT64_MAX;
}

void pack_packed_reader_free(pack_packed_reader *r)
{
    hd_free(r->recs);
    pack_buf_free(&r->keys);
    pack_buf_free(&r->stage);
    r->recs = NULL;
    r->bucket = UINT64_MAX;
}

/* Reads bucket b: its keys whole, its records block by block into their places. */
static int load_bucket(pack_packed_reader *r, uint64_t b)
{
    const pack_packed *const pk = &r->ctx->packed;
    const uint64_t first = b * pk->per;
    const uint64_t end = first + pk->per < r->ctx->n_items ? first + pk->per : r->ctx->n_items;
    r->bucket = UINT64_MAX;
    if (r->cap < pk->per) {
        hd_free(r->recs);
        r->recs = hd_malloc((size_t)pk->per * sizeof(pack_item));
        r->cap = r->recs ? pk->per : 0;
        if (!r->recs) {
            return hd_err(HDMLP_E_NOMEM, "out of memory reading %s", pk->items.path);
        }
    }
    const pack_buf *const kb = &pk->blocks[2 * b + 1];
    r->keys.len = 0;
    int rc = pack_buf_reserve(&r->keys, (size_t)pk->key_bytes[b] + 1);
    for (size_t i = 0; i < kb->len / sizeof(pack_block) && rc == HDMLP_OK; i++) {
        const pack_block *const blk = (const pack_block *)kb->p + i;
        rc = pack_tmp_read(&pk->keys, r->keys.p + r->keys.len, (size_t)blk->len, blk->off);
        r->keys.len += (size_t)blk->len;
    }
    const pack_buf *const ib = &pk->blocks[2 * b];
    uint64_t got = 0;
    for (size_t i = 0; i < ib->len / sizeof(pack_block) && rc == HDMLP_OK; i++) {
        const pack_block *const blk = (const pack_block *)ib->p + i;
        r->stage.len = 0;
        rc = pack_buf_reserve(&r->stage, (size_t)blk->len);
        if (rc == HDMLP_OK) {
            rc = pack_tmp_read(&pk->items, r->stage.p, (size_t)blk->len, blk->off);
        }
        for (uint64_t j = 0; j < blk->len / PACK_ITEM_LEN && rc == HDMLP_OK; j++) {
            pack_item it;
            memcpy(&it, r->stage.p + j * PACK_ITEM_LEN, PACK_ITEM_LEN);
            if (it.seq < first || it.seq >= end || it.key_off + it.key_len > r->keys.len) {
                rc = hd_err(HDMLP_E_IO, "cannot read back %s: a record out of place",
                            pk->items.path);
                break;
            }
            r->recs[it.seq - first] = it;
            got++;
        }
    }
    if (rc == HDMLP_OK && got != end - first) {
        rc = hd_err(HDMLP_E_IO, "cannot read back %s: bucket %llu holds %llu of %llu records",
                    pk->items.path, (unsigned long long)b, (unsigned long long)got,
                    (unsigned long long)(end - first));
    }
    if (rc == HDMLP_OK) {
        r->bucket = b;
        r->first = first;
    }
    return rc;
}

int pack_packed_at(pack_packed_reader *r, uint64_t p, pack_item *it, const uint8_t **key)
{
    const pack_ctx *const ctx = r->ctx;
    if (ctx->sorted_ids) { /* one run, in memory */
        *it =
            ((const pack_item *)ctx->run_recs.p)[ctx->sorted_ids[pack_order_at(ctx->order, p)]];
        *key = ctx->run_keys.p + it->key_off;
        return HDMLP_OK;
    }
    const uint64_t b = p / ctx->packed.per;
    if (b != r->bucket) {
        const int rc = load_bucket(r, b);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    *it = r->recs[p - r->first];
    *key = r->keys.p + it->key_off;
    return HDMLP_OK;
}
