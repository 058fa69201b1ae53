/* Sorting the items by (input, key bytes, scan sequence), the order the packed order is
 * defined over, in bounded memory: the last stage of an external merge sort whose runs the
 * scan formed (pack_add_item: a run of o->sort_run_bytes of records and keys is sorted in
 * memory and written to the run files).
 *
 * No run written (every item fit in one): the run is sorted in memory and stays there;
 * nothing is written. Otherwise the last run is written too and all are merged in one
 * pass: a binary heap of their heads, each run read through its own cursors of budget /
 * (2 × runs) bytes (clamped to MERGE_MIN_BUF..MERGE_MAX_BUF); each item, in sorted order,
 * goes to the bucket of its packed position (pack_packed.c). Every item's scan sequence
 * number is distinct, so the order is total and the result does not depend on where runs
 * were cut.
 *
 * The design this implements (issue 27) wrote the merge's output to a sorted items file
 * read back by pread at sigma(p) for every packed position p; pack_packed.c says why the
 * output goes to buckets of packed positions instead. */
#include "pack_internal.h"

#include <string.h>

#define MERGE_MIN_BUF (16u << 10)
#define MERGE_MAX_BUF (4u << 20)
#define CANCEL_EVERY 65536u

typedef struct sorter {
    pack_ctx *ctx;
    const pack_order *order;
    pack_sorted_fn fn;
    void *arg;
    uint64_t out_n;
} sorter;

/* Hands the next item in sorted order, with its final label, to fn and to its bucket. */
static int emit(sorter *s, const pack_item *src, const uint8_t *key)
{
    pack_item it = *src;
    it.label = s->ctx->labels.remap[it.label];
    const uint64_t pos = pack_order_pos(s->order, s->out_n);
    int rc = s->fn ? s->fn(s->arg, s->out_n, pos, &it, key) : HDMLP_OK;
    if (rc == HDMLP_OK) {
        rc = pack_packed_add(s->ctx, pos, &it, key);
    }
    s->out_n++;
    if (rc == HDMLP_OK && s->out_n % CANCEL_EVERY == 0 && pack_cancelled(s->ctx->o)) {
        rc = hd_err(HDMLP_E_INTERRUPTED, "interrupted");
    }
    return rc;
}

typedef struct merge_src {
    pack_tmp_cursor ci, ck;
    uint64_t left; /* records not yet taken into head */
    pack_item head;
    pack_buf key; /* head's key */
} merge_src;

static int src_next(merge_src *m)
{
    int rc = pack_cursor_read(&m->ci, &m->head, PACK_ITEM_LEN);
    if (rc == HDMLP_OK) {
        rc = pack_buf_reserve(&m->key, (size_t)m->head.key_len + 1);
    }
    if (rc == HDMLP_OK) {
        rc = pack_cursor_read(&m->ck, m->key.p, m->head.key_len);
    }
    m->left--;
    return rc;
}

static int src_less(const merge_src *a, const merge_src *b)
{
    return pack_item_cmp(&a->head, a->key.p, &b->head, b->key.p) < 0;
}

static void sift_down(const merge_src *srcs, uint32_t *heap, uint64_t n, uint64_t i)
{
    for (;;) {
        const uint64_t l = 2 * i + 1, r = l + 1;
        uint64_t m = i;
        if (l < n && src_less(&srcs[heap[l]], &srcs[heap[m]])) {
            m = l;
        }
        if (r < n && src_less(&srcs[heap[r]], &srcs[heap[m]])) {
            m = r;
        }
        if (m == i) {
            return;
        }
        const uint32_t t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

static int merge_runs(sorter *s)
{
    pack_ctx *const ctx = s->ctx;
    const uint64_t k = ctx->n_runs;
    if (k > UINT32_MAX) {
        return hd_err(HDMLP_E_RANGE, "too many sort runs (%llu)", (unsigned long long)k);
    }
    merge_src *const srcs = hd_calloc((size_t)k, sizeof(merge_src));
    uint32_t *const heap = hd_malloc((size_t)k * sizeof(uint32_t));
    if (!srcs || !heap) {
        hd_free(srcs);
        hd_free(heap);
        return hd_err(HDMLP_E_NOMEM, "out of memory merging %llu runs", (unsigned long long)k);
    }
    const uint64_t budget = ctx->run_budget ? ctx->run_budget : PACK_DEFAULT_SORT_RUN;
    uint64_t per = budget / (2 * k);
    per = per < MERGE_MIN_BUF ? MERGE_MIN_BUF : per > MERGE_MAX_BUF ? MERGE_MAX_BUF : per;
    int rc = pack_tmp_seal(&ctx->runs_items);
    if (rc == HDMLP_OK) {
        rc = pack_tmp_seal(&ctx->runs_keys);
    }
    uint64_t n_heap = 0;
    for (uint64_t r = 0; r < k && rc == HDMLP_OK; r++) {
        const pack_disk_run *const d = &ctx->runs[r];
        merge_src *const m = &srcs[r];
        m->left = d->n;
        rc = pack_cursor_open(&m->ci, &ctx->runs_items, d->first * PACK_ITEM_LEN,
                              (d->first + d->n) * PACK_ITEM_LEN, (size_t)per);
        if (rc == HDMLP_OK) {
            rc = pack_cursor_open(&m->ck, &ctx->runs_keys, d->key0, d->key1, (size_t)per);
        }
        if (rc == HDMLP_OK && m->left > 0) {
            rc = src_next(m);
            heap[n_heap++] = (uint32_t)r;
        }
    }
    for (uint64_t i = n_heap / 2; rc == HDMLP_OK && i-- > 0;) {
        sift_down(srcs, heap, n_heap, i);
    }
    while (rc == HDMLP_OK && n_heap > 0) {
        merge_src *const m = &srcs[heap[0]];
        rc = emit(s, &m->head, m->key.p);
        if (rc != HDMLP_OK) {
            break;
        }
        if (m->left > 0) {
            rc = src_next(m);
        } else {
            heap[0] = heap[--n_heap];
        }
        sift_down(srcs, heap, n_heap, 0);
    }
    for (uint64_t r = 0; r < k; r++) {
        pack_cursor_close(&srcs[r].ci);
        pack_cursor_close(&srcs[r].ck);
        pack_buf_free(&srcs[r].key);
    }
    hd_free(srcs);
    hd_free(heap);
    return rc;
}

/* Every item fit in one run: sort it in memory, keep it there. */
static int sort_in_memory(pack_ctx *ctx, const pack_order *order, pack_sorted_fn fn, void *arg)
{
    pack_item *const recs = (pack_item *)ctx->run_recs.p;
    const uint64_t n = ctx->run_recs.len / PACK_ITEM_LEN;
    for (uint64_t i = 0; i < n; i++) {
        recs[i].label = ctx->labels.remap[recs[i].label];
    }
    uint64_t *ids = NULL;
    int rc = pack_items_sort_run(ctx, &ids);
    if (rc != HDMLP_OK) {
        return rc;
    }
    uint64_t *const fit = hd_realloc(ids, (size_t)(n ? n : 1) * sizeof(uint64_t));
    ctx->sorted_ids = fit ? fit : ids; /* (the merge sort's scratch half given back) */
    for (uint64_t i = 0; i < n && rc == HDMLP_OK && fn; i++) {
        const pack_item *const it = &recs[ctx->sorted_ids[i]];
        rc = fn(arg, i, pack_order_pos(order, i), it, ctx->run_keys.p + it->key_off);
        if (rc == HDMLP_OK && (i + 1) % CANCEL_EVERY == 0 && pack_cancelled(ctx->o)) {
            rc = hd_err(HDMLP_E_INTERRUPTED, "interrupted");
        }
    }
    return rc;
}

int pack_sort_items(pack_ctx *ctx, const pack_order *order, pack_sorted_fn fn, void *arg)
{
    int rc;
    ctx->order = order;
    if (ctx->n_runs == 0) {
        rc = sort_in_memory(ctx, order, fn, arg);
        ctx->sorted = rc == HDMLP_OK;
        return rc;
    }
    sorter s;
    memset(&s, 0, sizeof(s));
    s.ctx = ctx;
    s.order = order;
    s.fn = fn;
    s.arg = arg;
    rc = pack_items_spill_run(ctx);
    pack_buf_free(&ctx->run_recs);
    pack_buf_free(&ctx->run_keys);
    if (rc == HDMLP_OK && pack_cancelled(ctx->o)) {
        rc = hd_err(HDMLP_E_INTERRUPTED, "interrupted");
    }
    const uint64_t budget = ctx->run_budget ? ctx->run_budget : PACK_DEFAULT_SORT_RUN;
    if (rc == HDMLP_OK) {
        rc = pack_packed_begin(ctx, ctx->o->chunk_size, budget);
    }
    if (rc == HDMLP_OK) {
        rc = merge_runs(&s);
    }
    pack_tmp_close(&ctx->runs_items); /* the runs are merged (or failed): drop them */
    pack_tmp_close(&ctx->runs_keys);
    if (rc == HDMLP_OK) {
        rc = pack_packed_end(ctx);
    }
    ctx->sorted = rc == HDMLP_OK;
    return rc;
}
