/* Sorting the spilled items by (input, key bytes, scan sequence), the order the packed
 * order is defined over, in bounded memory: an external merge sort.
 *
 * Runs: records and keys are read sequentially from the scan spill files until a run's
 * budget (o->sort_run_bytes of records and keys) is reached, sorted in memory (stable
 * merge sort of ids) and written, records then keys, to one run file pair (items.run,
 * keys.run; runs back to back). When the first run holds every item it is written straight
 * to the sorted files: no run files, no merge pass. Merge: one pass over all runs at once,
 * a binary heap of their heads, each run read through its own cursors of budget / (2 ×
 * runs) bytes (at least MERGE_MIN_BUF), into the sorted files (items.sorted,
 * keys.sorted). Every item's scan sequence number is distinct, so the order is total and
 * the result does not depend on how the items were split into runs. */
#include "pack_internal.h"

#include <string.h>

#define SPILL_READ_BUF (1u << 20)
#define OUT_BUF (1u << 20)
#define MERGE_MIN_BUF (16u << 10)
#define MERGE_MAX_BUF (4u << 20)
#define CANCEL_EVERY 65536u

static int item_cmp(const pack_item *x, const uint8_t *kx, const pack_item *y,
                    const uint8_t *ky)
{
    if (x->input != y->input) {
        return x->input < y->input ? -1 : 1;
    }
    const size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    const int r = n ? memcmp(kx, ky, n) : 0;
    if (r != 0) {
        return r;
    }
    if (x->key_len != y->key_len) {
        return x->key_len < y->key_len ? -1 : 1;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq ? 1 : 0;
}

/* One run in memory. */
typedef struct mem_run {
    pack_buf recs; /* pack_item, key_off into keys */
    pack_buf keys;
    uint64_t *ids; /* m + m / 2 + 1 */
    uint64_t ids_cap;
} mem_run;

static int mem_cmp(const void *c, uint64_t a, uint64_t b)
{
    const mem_run *const r = c;
    const pack_item *const x = (const pack_item *)r->recs.p + a;
    const pack_item *const y = (const pack_item *)r->recs.p + b;
    return item_cmp(x, r->keys.p + x->key_off, y, r->keys.p + y->key_off);
}

/* A run on disk: records [first, first + n) of items.run, keys [key0, key1) of keys.run. */
typedef struct disk_run {
    uint64_t first, n;
    uint64_t key0, key1;
} disk_run;

typedef struct sorter {
    pack_ctx *ctx;
    pack_sorted_fn fn;
    void *arg;
    uint64_t budget;
    pack_tmp run_items, run_keys;
    disk_run *runs;
    uint64_t n_runs, cap_runs;
    pack_tmp out_items, out_keys;
    uint64_t out_n;
} sorter;

/* Appends an item (and its key) to the sorted files and hands it to fn. */
static int emit(sorter *s, const pack_item *src, const uint8_t *key)
{
    pack_item it = *src;
    it.key_off = s->out_keys.end;
    int rc = pack_tmp_append(&s->out_items, &it, PACK_ITEM_LEN);
    if (rc == HDMLP_OK) {
        rc = pack_tmp_append(&s->out_keys, key, it.key_len);
    }
    if (rc == HDMLP_OK && s->fn) {
        rc = s->fn(s->arg, s->out_n, &it, key);
    }
    s->out_n++;
    if (rc == HDMLP_OK && s->out_n % CANCEL_EVERY == 0 && pack_cancelled(s->ctx->o)) {
        rc = hd_err(HDMLP_E_INTERRUPTED, "interrupted");
    }
    return rc;
}

static int open_out(sorter *s)
{
    int rc = pack_tmp_create(&s->out_items, s->ctx->tmpdir, "items.sorted", OUT_BUF);
    if (rc == HDMLP_OK) {
        rc = pack_tmp_create(&s->out_keys, s->ctx->tmpdir, "keys.sorted", OUT_BUF);
    }
    return rc;
}

/* Reads the next run (up to the budget) from the spill cursors; labels become final. */
static int fill_run(sorter *s, mem_run *m, pack_tmp_cursor *ci, pack_tmp_cursor *ck,
                    uint64_t *read)
{
    const pack_labels *const lt = &s->ctx->labels;
    m->recs.len = 0;
    m->keys.len = 0;
    while (*read < s->ctx->n_items &&
           (m->recs.len == 0 || m->recs.len + m->keys.len < s->budget)) {
        pack_item it;
        int rc = pack_cursor_read(ci, &it, PACK_ITEM_LEN);
        if (rc == HDMLP_OK) {
            rc = pack_buf_reserve(&m->keys, (size_t)it.key_len + 1); /* keys.p exists */
        }
        if (rc == HDMLP_OK) {
            rc = pack_cursor_read(ck, m->keys.p + m->keys.len, it.key_len);
        }
        if (rc != HDMLP_OK) {
            return rc;
        }
        it.key_off = m->keys.len;
        m->keys.len += it.key_len;
        it.label = lt->remap[it.label];
        rc = pack_buf_append(&m->recs, &it, PACK_ITEM_LEN);
        if (rc != HDMLP_OK) {
            return rc;
        }
        (*read)++;
    }
    const uint64_t n = m->recs.len / PACK_ITEM_LEN;
    const uint64_t need = n + n / 2 + 1;
    if (need > m->ids_cap) {
        hd_free(m->ids);
        m->ids = hd_malloc((size_t)need * sizeof(uint64_t));
        m->ids_cap = m->ids ? need : 0;
        if (!m->ids) {
            return hd_err(HDMLP_E_NOMEM, "out of memory sorting %llu samples",
                          (unsigned long long)n);
        }
    }
    for (uint64_t i = 0; i < n; i++) {
        m->ids[i] = i;
    }
    pack_merge_sort(m->ids, m->ids + n, n, mem_cmp, m);
    return HDMLP_OK;
}

static int write_run(sorter *s, const mem_run *m)
{
    int rc = HDMLP_OK;
    if (!s->run_items.path) {
        rc = pack_tmp_create(&s->run_items, s->ctx->tmpdir, "items.run", OUT_BUF);
        if (rc == HDMLP_OK) {
            rc = pack_tmp_create(&s->run_keys, s->ctx->tmpdir, "keys.run", OUT_BUF);
        }
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    if (s->n_runs == s->cap_runs) {
        const uint64_t cap = s->cap_runs ? s->cap_runs * 2 : 16;
        disk_run *const v = hd_realloc(s->runs, (size_t)cap * sizeof(disk_run));
        if (!v) {
            return hd_err(HDMLP_E_NOMEM, "out of memory sorting");
        }
        s->runs = v;
        s->cap_runs = cap;
    }
    const uint64_t n = m->recs.len / PACK_ITEM_LEN;
    disk_run *const r = &s->runs[s->n_runs++];
    r->first = s->run_items.end / PACK_ITEM_LEN;
    r->n = n;
    r->key0 = s->run_keys.end;
    for (uint64_t i = 0; i < n && rc == HDMLP_OK; i++) {
        pack_item it = ((const pack_item *)m->recs.p)[m->ids[i]];
        const uint8_t *const key = m->keys.p + it.key_off;
        it.key_off = s->run_keys.end;
        rc = pack_tmp_append(&s->run_items, &it, PACK_ITEM_LEN);
        if (rc == HDMLP_OK) {
            rc = pack_tmp_append(&s->run_keys, key, it.key_len);
        }
    }
    r->key1 = s->run_keys.end;
    return rc;
}

/* ---- the merge ----------------------------------------------------------------------------
 */

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
        rc = pack_buf_reserve(&m->key, m->head.key_len ? m->head.key_len : 1);
    }
    if (rc == HDMLP_OK) {
        rc = pack_cursor_read(&m->ck, m->key.p, m->head.key_len);
    }
    m->left--;
    return rc;
}

static int src_less(const merge_src *a, const merge_src *b)
{
    return item_cmp(&a->head, a->key.p, &b->head, b->key.p) < 0;
}

static void sift_down(merge_src *srcs, uint32_t *heap, uint64_t n, uint64_t i)
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
    const uint64_t k = s->n_runs;
    merge_src *const srcs = hd_calloc((size_t)k, sizeof(merge_src));
    uint32_t *const heap = hd_malloc((size_t)k * sizeof(uint32_t));
    if (!srcs || !heap) {
        hd_free(srcs);
        hd_free(heap);
        return hd_err(HDMLP_E_NOMEM, "out of memory merging %llu runs", (unsigned long long)k);
    }
    uint64_t per = s->budget / (2 * k);
    per = per < MERGE_MIN_BUF ? MERGE_MIN_BUF : per > MERGE_MAX_BUF ? MERGE_MAX_BUF : per;
    int rc = pack_tmp_seal(&s->run_items);
    if (rc == HDMLP_OK) {
        rc = pack_tmp_seal(&s->run_keys);
    }
    uint64_t n_heap = 0;
    for (uint64_t r = 0; r < k && rc == HDMLP_OK; r++) {
        const disk_run *const d = &s->runs[r];
        merge_src *const m = &srcs[r];
        m->left = d->n;
        rc = pack_cursor_open(&m->ci, &s->run_items, d->first * PACK_ITEM_LEN,
                              (d->first + d->n) * PACK_ITEM_LEN, (size_t)per);
        if (rc == HDMLP_OK) {
            rc = pack_cursor_open(&m->ck, &s->run_keys, d->key0, d->key1, (size_t)per);
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

int pack_sort_items(pack_ctx *ctx, pack_sorted_fn fn, void *arg)
{
    sorter s;
    memset(&s, 0, sizeof(s));
    s.ctx = ctx;
    s.fn = fn;
    s.arg = arg;
    s.budget = ctx->o->sort_run_bytes ? ctx->o->sort_run_bytes : PACK_DEFAULT_SORT_RUN;
    mem_run m;
    memset(&m, 0, sizeof(m));
    pack_tmp_cursor ci, ck;
    memset(&ci, 0, sizeof(ci));
    memset(&ck, 0, sizeof(ck));
    int rc = pack_tmp_seal(&ctx->items_f);
    if (rc == HDMLP_OK) {
        rc = pack_tmp_seal(&ctx->keys_f);
    }
    if (rc == HDMLP_OK) {
        rc = pack_cursor_open(&ci, &ctx->items_f, 0, ctx->n_items * PACK_ITEM_LEN,
                              SPILL_READ_BUF);
    }
    if (rc == HDMLP_OK) {
        rc = pack_cursor_open(&ck, &ctx->keys_f, 0, ctx->keys_f.end, SPILL_READ_BUF);
    }
    uint64_t read = 0;
    while (rc == HDMLP_OK && read < ctx->n_items) {
        rc = fill_run(&s, &m, &ci, &ck, &read);
        if (rc == HDMLP_OK && pack_cancelled(ctx->o)) {
            rc = hd_err(HDMLP_E_INTERRUPTED, "interrupted");
        }
        if (rc == HDMLP_OK && read == ctx->n_items && s.n_runs == 0) {
            /* one run holds everything: straight to the sorted files */
            rc = open_out(&s);
            const uint64_t n = m.recs.len / PACK_ITEM_LEN;
            for (uint64_t i = 0; i < n && rc == HDMLP_OK; i++) {
                const pack_item *const it = (const pack_item *)m.recs.p + m.ids[i];
                rc = emit(&s, it, m.keys.p + it->key_off);
            }
        } else if (rc == HDMLP_OK) {
            rc = write_run(&s, &m);
        }
    }
    pack_cursor_close(&ci);
    pack_cursor_close(&ck);
    pack_buf_free(&m.recs);
    pack_buf_free(&m.keys);
    hd_free(m.ids);
    if (rc == HDMLP_OK && s.n_runs > 0) {
        pack_tmp_close(&ctx->items_f); /* the runs hold everything now */
        pack_tmp_close(&ctx->keys_f);
        rc = open_out(&s);
        if (rc == HDMLP_OK) {
            rc = merge_runs(&s);
        }
    }
    pack_tmp_close(&s.run_items);
    pack_tmp_close(&s.run_keys);
    hd_free(s.runs);
    if (rc == HDMLP_OK) {
        rc = pack_tmp_seal(&s.out_items);
    }
    if (rc == HDMLP_OK) {
        rc = pack_tmp_seal(&s.out_keys);
    }
    if (rc != HDMLP_OK) {
        pack_tmp_close(&s.out_items);
        pack_tmp_close(&s.out_keys);
        return rc;
    }
    pack_tmp_close(&ctx->items_f);
    pack_tmp_close(&ctx->keys_f);
    ctx->items_f = s.out_items;
    ctx->keys_f = s.out_keys;
    ctx->sorted = 1;
    return HDMLP_OK;
}
