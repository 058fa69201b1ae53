/* Sample metadata: items spilled as they are scanned, label names, a stable merge sort. */
#include "pack_internal.h"

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

#define SPILL_ITEMS_BUF (1u << 20)
#define SPILL_KEYS_BUF (1u << 20)

int pack_add_item_seq(pack_ctx *ctx, uint64_t seq, uint32_t input, const void *key,
                      size_t key_len, uint32_t label, uint64_t size, uint64_t src,
                      const char *what)
{
    if (key_len > FMT_MAX_KEY_LEN) {
        return hd_err(HDMLP_E_RANGE, "name longer than %u bytes (%zu): %.200s...",
                      FMT_MAX_KEY_LEN, key_len, what);
    }
    if (ctx->keys_f.end + key_len > UINT32_MAX) {
        return hd_err(HDMLP_E_RANGE, "%s: sample names exceed 4 GiB in total", what);
    }
    int rc = HDMLP_OK;
    if (!ctx->items_f.path) {
        rc = pack_tmp_create(&ctx->items_f, ctx->tmpdir, "items.spill", SPILL_ITEMS_BUF);
        if (rc == HDMLP_OK) {
            rc = pack_tmp_create(&ctx->keys_f, ctx->tmpdir, "keys.spill", SPILL_KEYS_BUF);
        }
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    pack_item it;
    memset(&it, 0, sizeof(it));
    it.key_off = ctx->keys_f.end;
    it.key_len = (uint16_t)key_len;
    it.input = (uint16_t)input;
    it.label = label;
    it.size = size;
    it.src = src;
    it.seq = seq;
    rc = pack_tmp_append(&ctx->items_f, &it, PACK_ITEM_LEN);
    if (rc == HDMLP_OK) {
        rc = pack_tmp_append(&ctx->keys_f, key, key_len);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    if (label < ctx->labels.n) {
        ctx->labels.used[label] = 1;
    }
    ctx->n_items++;
    ctx->raw_bytes += size;
    return HDMLP_OK;
}

int pack_add_item(pack_ctx *ctx, uint32_t input, const void *key, size_t key_len,
                  uint32_t label, uint64_t size, uint64_t src, const char *what)
{
    return pack_add_item_seq(ctx, ctx->n_seq++, input, key, key_len, label, size, src, what);
}

int pack_items_flush(pack_ctx *ctx)
{
    if (!ctx->items_f.path) {
        return HDMLP_OK;
    }
    const int rc = pack_tmp_flush(&ctx->items_f);
    return rc == HDMLP_OK ? pack_tmp_flush(&ctx->keys_f) : rc;
}

int pack_item_get(const pack_ctx *ctx, uint64_t id, pack_item *it)
{
    return pack_tmp_read(&ctx->items_f, it, PACK_ITEM_LEN, id * PACK_ITEM_LEN);
}

int pack_item_key(const pack_ctx *ctx, const pack_item *it, pack_buf *key)
{
    key->len = 0;
    int rc = pack_buf_reserve(key, (size_t)it->key_len + 1);
    if (rc == HDMLP_OK && it->key_len > 0) {
        rc = pack_tmp_read(&ctx->keys_f, key->p, it->key_len, it->key_off);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    key->len = it->key_len;
    key->p[key->len] = '\0';
    return HDMLP_OK;
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

int pack_labels_finish(pack_labels *lt)
{
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
