/* Sample metadata: items gathered in runs as they are scanned (a full run sorted and
 * written to the run files), label names, a stable merge sort. */
#include "pack_internal.h"

#include <stdio.h>
#include <string.h>

int pack_buf_reserve(pack_buf *b, size_t extra)
{
    if (extra <= b->cap - b->len) {
        return HDMLP_OK;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2) {
            return hd_err(HDMLP_E_NOMEM, "buffer of %zu bytes too large", b->len + extra);
        }
        cap *= 2;
    }
    uint8_t *const p = hd_realloc(b->p, cap);
    if (!p) {
        return hd_err(HDMLP_E_NOMEM, "out of memory (%zu bytes)", cap);
    }
    b->p = p;
    b->cap = cap;
    return HDMLP_OK;
}

int pack_buf_append(pack_buf *b, const void *data, size_t n)
{
    const int rc = pack_buf_reserve(b, n);
    if (rc != HDMLP_OK) {
        return rc;
    }
    if (n) {
        memcpy(b->p + b->len, data, n);
    }
    b->len += n;
    return HDMLP_OK;
}

void pack_buf_free(pack_buf *b)
{
    hd_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

const char *pack_dataset_magic(const char *base, size_t len)
{
    static const char index_name[] = FMT_INDEX_NAME;
    if (len == sizeof(index_name) - 1 && memcmp(base, index_name, len) == 0) {
        return "HDMLPIDX";
    }
    if (len == sizeof(FMT_TABLES_NAME) - 1 && memcmp(base, FMT_TABLES_NAME, len) == 0) {
        return FMT_TABLES_MAGIC;
    }
    if (len == sizeof(FMT_KEYS_NAME) - 1 && memcmp(base, FMT_KEYS_NAME, len) == 0) {
        return FMT_KEYS_MAGIC;
    }
    if (len <= 8 || memcmp(base, "segment-", 8) != 0) {
        return NULL;
    }
    for (size_t i = 8; i < len; i++) {
        if (base[i] < '0' || base[i] > '9') {
            return NULL;
        }
    }
    return "HDMLPCHK";
}

#define RUN_FILE_BUF (1u << 20)
#define RUN_READ_BUF (1u << 20)

int pack_item_cmp(const pack_item *x, const uint8_t *kx, const pack_item *y, const uint8_t *ky)
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

/* The design this implements (issue 27) appended every item to spill files while scanning
 * and cut the runs out of them afterwards. The scan's own buffer is the run instead: that
 * saves writing and reading every item once more, and a dataset whose items fit in one run
 * writes none at all (it is sorted in memory and stays there, pack_sort.c). */
int pack_add_item_seq(pack_ctx *ctx, uint64_t seq, uint32_t input, const void *key,
                      size_t key_len, uint32_t label, uint64_t size, uint64_t src,
                      const char *what)
{
    if (key_len > FMT_MAX_KEY_LEN) {
        return hd_err(HDMLP_E_RANGE, "name longer than %u bytes (%zu): %.200s...",
                      FMT_MAX_KEY_LEN, key_len, what);
    }
    pack_item it;
    memset(&it, 0, sizeof(it));
    it.key_off = ctx->run_keys.len;
    it.key_len = (uint16_t)key_len;
    it.input = (uint16_t)input;
    it.label = label;
    it.size = size;
    it.src = src;
    it.seq = seq;
    /* keys.p exists even when every key is empty: run_keys.p + key_off is used throughout */
    int rc = pack_buf_reserve(&ctx->run_keys, key_len + 1);
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(&ctx->run_keys, key, key_len);
    }
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(&ctx->run_recs, &it, PACK_ITEM_LEN);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    if (label < ctx->labels.n) {
        ctx->labels.used[label] = 1;
    }
    ctx->n_items++;
    ctx->key_bytes += key_len;
    ctx->raw_bytes += size;
    const uint64_t budget = ctx->run_budget ? ctx->run_budget : PACK_DEFAULT_SORT_RUN;
    if (ctx->run_recs.len + ctx->run_keys.len >= budget) {
        return pack_items_spill_run(ctx);
    }
    return HDMLP_OK;
}

int pack_add_item(pack_ctx *ctx, uint32_t input, const void *key, size_t key_len,
                  uint32_t label, uint64_t size, uint64_t src, const char *what)
{
    return pack_add_item_seq(ctx, ctx->n_seq++, input, key, key_len, label, size, src, what);
}

static int run_cmp(const void *c, uint64_t a, uint64_t b)
{
    const pack_ctx *const ctx = c;
    const pack_item *const x = (const pack_item *)ctx->run_recs.p + a;
    const pack_item *const y = (const pack_item *)ctx->run_recs.p + b;
    return pack_item_cmp(x, ctx->run_keys.p + x->key_off, y, ctx->run_keys.p + y->key_off);
}

int pack_items_sort_run(const pack_ctx *ctx, uint64_t **ids)
{
    const uint64_t n = ctx->run_recs.len / PACK_ITEM_LEN;
    *ids = hd_malloc((size_t)(n + n / 2 + 1) * sizeof(uint64_t));
    if (!*ids) {
        return hd_err(HDMLP_E_NOMEM, "out of memory sorting %llu samples",
                      (unsigned long long)n);
    }
    for (uint64_t i = 0; i < n; i++) {
        (*ids)[i] = i;
    }
    pack_merge_sort(*ids, *ids + n, n, run_cmp, ctx);
    return HDMLP_OK;
}

int pack_items_spill_run(pack_ctx *ctx)
{
    const uint64_t n = ctx->run_recs.len / PACK_ITEM_LEN;
    if (n == 0) {
        return HDMLP_OK;
    }
    int rc = HDMLP_OK;
    if (!ctx->runs_items.path) {
        rc = pack_tmp_create(&ctx->runs_items, ctx->tmpdir, "items.run", RUN_FILE_BUF);
        if (rc == HDMLP_OK) {
            rc = pack_tmp_create(&ctx->runs_keys, ctx->tmpdir, "keys.run", RUN_FILE_BUF);
        }
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    if (ctx->n_runs == ctx->cap_runs) {
        const uint64_t cap = ctx->cap_runs ? ctx->cap_runs * 2 : 16;
        pack_disk_run *const v = hd_realloc(ctx->runs, (size_t)cap * sizeof(pack_disk_run));
        if (!v) {
            return hd_err(HDMLP_E_NOMEM, "out of memory sorting");
        }
        ctx->runs = v;
        ctx->cap_runs = cap;
    }
    uint64_t *ids = NULL;
    rc = pack_items_sort_run(ctx, &ids);
    if (rc != HDMLP_OK) {
        return rc;
    }
    pack_disk_run *const r = &ctx->runs[ctx->n_runs++];
    r->first = ctx->runs_items.end / PACK_ITEM_LEN;
    r->n = n;
    r->key0 = ctx->runs_keys.end;
    for (uint64_t i = 0; i < n && rc == HDMLP_OK; i++) {
        pack_item it = ((const pack_item *)ctx->run_recs.p)[ids[i]];
        const uint8_t *const key = ctx->run_keys.p + it.key_off;
        it.key_off = ctx->runs_keys.end;
        rc = pack_tmp_append(&ctx->runs_items, &it, PACK_ITEM_LEN);
        if (rc == HDMLP_OK) {
            rc = pack_tmp_append(&ctx->runs_keys, key, it.key_len);
        }
    }
    r->key1 = ctx->runs_keys.end;
    hd_free(ids);
    ctx->run_recs.len = 0;
    ctx->run_keys.len = 0;
    return rc;
}

int pack_items_each(pack_ctx *ctx, pack_item_fn fn, void *arg)
{
    int rc = HDMLP_OK;
    const uint64_t n = ctx->run_recs.len / PACK_ITEM_LEN;
    for (uint64_t i = 0; i < n && rc == HDMLP_OK; i++) {
        const pack_item *const it = (const pack_item *)ctx->run_recs.p + i;
        rc = fn(arg, it, ctx->run_keys.p + it->key_off);
    }
    const uint64_t on_disk = ctx->runs_items.end / PACK_ITEM_LEN;
    const uint64_t keys_end = ctx->runs_keys.end;
    if (rc != HDMLP_OK || on_disk == 0) {
        return rc;
    }
    rc = pack_tmp_flush(&ctx->runs_items);
    if (rc == HDMLP_OK) {
        rc = pack_tmp_flush(&ctx->runs_keys);
    }
    pack_tmp_cursor ci, ck;
    memset(&ci, 0, sizeof(ci));
    memset(&ck, 0, sizeof(ck));
    pack_buf key = {0};
    if (rc == HDMLP_OK) {
        rc = pack_cursor_open(&ci, &ctx->runs_items, 0, on_disk * PACK_ITEM_LEN, RUN_READ_BUF);
    }
    if (rc == HDMLP_OK) {
        rc = pack_cursor_open(&ck, &ctx->runs_keys, 0, keys_end, RUN_READ_BUF);
    }
    for (uint64_t i = 0; i < on_disk && rc == HDMLP_OK; i++) {
        pack_item it;
        rc = pack_cursor_read(&ci, &it, PACK_ITEM_LEN);
        if (rc == HDMLP_OK) {
            rc = pack_buf_reserve(&key, (size_t)it.key_len + 1);
        }
        if (rc == HDMLP_OK) {
            rc = pack_cursor_read(&ck, key.p, it.key_len);
        }
        if (rc == HDMLP_OK) {
            rc = fn(arg, &it, key.p);
        }
    }
    pack_cursor_close(&ci);
    pack_cursor_close(&ck);
    pack_buf_free(&key);
    return rc;
}

void pack_items_free(pack_ctx *ctx)
{
    pack_buf_free(&ctx->run_recs);
    pack_buf_free(&ctx->run_keys);
    pack_tmp_close(&ctx->runs_items);
    pack_tmp_close(&ctx->runs_keys);
    hd_free(ctx->runs);
    ctx->runs = NULL;
    ctx->n_runs = ctx->cap_runs = 0;
    hd_free(ctx->sorted_ids);
    ctx->sorted_ids = NULL;
}

/* ---- labels ----------------------------------------------------------------------------- */

static int is_root_label(const pack_labels *lt, uint32_t id)
{
    return lt->len[id] == 1 && lt->names.p[lt->off[id]] == '.';
}

/* The label "." (root files) first, then bytewise order. */
static int label_cmp(const pack_labels *lt, uint32_t a, uint32_t b)
{
    const int ra = is_root_label(lt, a), rb = is_root_label(lt, b);
    if (ra || rb) {
        return rb - ra;
    }
    const size_t la = lt->len[a], lb = lt->len[b];
    if (lt->numeric && la != lb) { /* canonical decimal numbers: the shorter is smaller */
        return la < lb ? -1 : 1;
    }
    const int c = memcmp(lt->names.p + lt->off[a], lt->names.p + lt->off[b], la < lb ? la : lb);
    if (c != 0) {
        return c;
    }
    return la < lb ? -1 : la > lb ? 1 : 0;
}

static int labels_grow_table(pack_labels *lt)
{
    const uint32_t cap = lt->tab_cap ? lt->tab_cap * 2 : 64;
    uint32_t *const t = hd_calloc(cap, sizeof(uint32_t));
    if (!t) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for labels");
    }
    for (uint32_t id = 0; id < lt->n; id++) {
        uint64_t h = fmt_checksum(lt->names.p + lt->off[id], lt->len[id]);
        while (t[h & (cap - 1)]) {
            h++;
        }
        t[h & (cap - 1)] = id + 1;
    }
    hd_free(lt->table);
    lt->table = t;
    lt->tab_cap = cap;
    return HDMLP_OK;
}

int pack_labels_intern(pack_labels *lt, const void *name, size_t len, uint32_t *id)
{
    if (len > UINT32_MAX) {
        return hd_err(HDMLP_E_RANGE, "label name too long");
    }
    if ((uint64_t)(lt->n + 1) * 2 > lt->tab_cap) {
        const int rc = labels_grow_table(lt);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    uint64_t h = fmt_checksum(name, len);
    for (;;) {
        const uint32_t e = lt->table[h & (lt->tab_cap - 1)];
        if (e == 0) {
            break;
        }
        if (lt->len[e - 1] == len && memcmp(lt->names.p + lt->off[e - 1], name, len) == 0) {
            *id = e - 1;
            return HDMLP_OK;
        }
        h++;
    }
    if (lt->n == UINT32_MAX - 1) {
        return hd_err(HDMLP_E_RANGE, "too many labels");
    }
    if (lt->n == lt->cap) {
        const uint32_t cap = lt->cap ? lt->cap * 2 : 16;
        uint64_t *const off = hd_realloc(lt->off, (size_t)cap * sizeof(uint64_t));
        if (!off) {
            return hd_err(HDMLP_E_NOMEM, "out of memory for labels");
        }
        lt->off = off;
        uint32_t *const ln = hd_realloc(lt->len, (size_t)cap * sizeof(uint32_t));
        if (!ln) {
            return hd_err(HDMLP_E_NOMEM, "out of memory for labels");
        }
        lt->len = ln;
        uint8_t *const used = hd_realloc(lt->used, cap);
        if (!used) {
            return hd_err(HDMLP_E_NOMEM, "out of memory for labels");
        }
        memset(used + lt->cap, 0, cap - lt->cap);
        lt->used = used;
        lt->cap = cap;
    }
    lt->off[lt->n] = lt->names.len;
    lt->len[lt->n] = (uint32_t)len;
    const int rc = pack_buf_append(&lt->names, name, len);
    if (rc != HDMLP_OK) {
        return rc;
    }
    lt->table[h & (lt->tab_cap - 1)] = lt->n + 1;
    *id = lt->n++;
    return HDMLP_OK;
}

/* ---- stable merge sort of u64 ids with a context comparator --------------------------- */

void pack_merge_sort(uint64_t *v, uint64_t *tmp, uint64_t n, pack_cmp_fn cmp, const void *c)
{
    if (n < 16) {
        for (uint64_t i = 1; i < n; i++) {
            const uint64_t x = v[i];
            uint64_t j = i;
            while (j > 0 && cmp(c, v[j - 1], x) > 0) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
        return;
    }
    const uint64_t h = n / 2;
    pack_merge_sort(v, tmp, h, cmp, c);
    pack_merge_sort(v + h, tmp, n - h, cmp, c);
    if (cmp(c, v[h - 1], v[h]) <= 0) {
        return;
    }
    memcpy(tmp, v, h * sizeof(uint64_t));
    uint64_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        if (cmp(c, v[j], tmp[i]) < 0) {
            v[k++] = v[j++];
        } else {
            v[k++] = tmp[i++];
        }
    }
    while (i < h) {
        v[k++] = tmp[i++];
    }
}

static int label_id_cmp(const void *c, uint64_t a, uint64_t b)
{
    return label_cmp(c, (uint32_t)a, (uint32_t)b);
}

/* The largest class number among the names (numeric labels; names are canonical). */
static uint64_t labels_largest(const pack_labels *lt)
{
    uint64_t top = 0;
    for (uint32_t i = 0; i < lt->n; i++) {
        uint64_t v = 0;
        for (uint32_t k = 0; k < lt->len[i]; k++) {
            v = v * 10 + (uint64_t)(lt->names.p[lt->off[i] + k] - '0');
        }
        top = v > top ? v : top;
    }
    return top;
}

int pack_labels_finish(pack_labels *lt)
{
    if (lt->numeric && lt->n > 0) { /* every class number up to the largest is a label */
        const uint64_t top = labels_largest(lt);
        for (uint64_t v = 0; v <= top; v++) {
            char text[24];
            const int tl = snprintf(text, sizeof(text), "%llu", (unsigned long long)v);
            uint32_t id;
            const int rc = pack_labels_intern(lt, text, (size_t)tl, &id);
            if (rc != HDMLP_OK) {
                return rc;
            }
        }
    }
    uint64_t *const ids = hd_malloc((size_t)lt->n * sizeof(uint64_t) * 2);
    lt->remap = hd_malloc((size_t)lt->n * sizeof(uint32_t));
    lt->order = hd_malloc((size_t)lt->n * sizeof(uint32_t));
    if (!ids || !lt->remap || !lt->order) {
        hd_free(ids);
        return hd_err(HDMLP_E_NOMEM, "out of memory for labels");
    }
    for (uint32_t i = 0; i < lt->n; i++) {
        ids[i] = i;
    }
    pack_merge_sort(ids, ids + lt->n, lt->n, label_id_cmp, lt);
    for (uint32_t i = 0; i < lt->n; i++) {
        lt->order[i] = (uint32_t)ids[i];
        lt->remap[ids[i]] = i;
    }
    hd_free(ids);
    return HDMLP_OK;
}

void pack_labels_free(pack_labels *lt)
{
    pack_buf_free(&lt->names);
    hd_free(lt->off);
    hd_free(lt->len);
    hd_free(lt->table);
    hd_free(lt->remap);
    hd_free(lt->order);
    hd_free(lt->used);
    memset(lt, 0, sizeof(*lt));
}
