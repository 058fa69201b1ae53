/*
 * The fuzz targets' view of the items a scanner added: the packer keeps them in runs
 * (pack_add_item); this copies them all into memory, in scan order (by sequence number),
 * each item's key_off indexing keys->p.
 */
#ifndef HDMLP_FUZZ_ITEMS_H
#define HDMLP_FUZZ_ITEMS_H

#include "pack_internal.h"

#include <stdlib.h>

static int fuzz_seq_cmp(const void *a, const void *b)
{
    const pack_item *const x = a, *const y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

typedef struct fuzz_items {
    pack_buf recs;
    pack_buf *keys;
} fuzz_items;

static int fuzz_item(void *arg, const pack_item *it, const uint8_t *key)
{
    fuzz_items *const f = arg;
    pack_item c = *it;
    c.key_off = f->keys->len;
    int rc = pack_buf_append(f->keys, key, it->key_len);
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(&f->recs, &c, sizeof(c));
    }
    return rc;
}

/* *items (hd_free) holds ctx->n_items records; keys (pack_buf_free) the key bytes. */
static inline int fuzz_load_items(pack_ctx *ctx, pack_item **items, pack_buf *keys)
{
    fuzz_items f = {{0}, keys};
    keys->len = 0;
    int rc = pack_buf_reserve(keys, 1);
    if (rc == HDMLP_OK) {
        rc = pack_buf_reserve(&f.recs, sizeof(pack_item));
    }
    if (rc == HDMLP_OK) {
        rc = pack_items_each(ctx, fuzz_item, &f);
    }
    *items = (pack_item *)f.recs.p;
    if (rc == HDMLP_OK && f.recs.len / sizeof(pack_item) != ctx->n_items) {
        rc = HDMLP_E_IO; /* the runs lost an item */
    }
    qsort(*items, f.recs.len / sizeof(pack_item), sizeof(pack_item), fuzz_seq_cmp);
    return rc;
}

#endif
