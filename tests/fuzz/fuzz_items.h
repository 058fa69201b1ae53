/*
 * The fuzz targets' view of the items a scanner added: the packer spills them to files
 * (pack_add_item); this reads them all back into memory, in scan order (by sequence
 * number), with the keys file whole so that each item's key_off indexes keys->p.
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

/* *items (free()) holds ctx->n_items records; keys (pack_buf_free) the key bytes. */
static inline int fuzz_load_items(pack_ctx *ctx, pack_item **items, pack_buf *keys)
{
    *items = malloc((size_t)(ctx->n_items ? ctx->n_items : 1) * sizeof(pack_item));
    keys->len = 0;
    if (!*items || pack_buf_reserve(keys, (size_t)ctx->keys_f.end + 1) != HDMLP_OK) {
        return HDMLP_E_NOMEM;
    }
    int rc = pack_items_flush(ctx);
    for (uint64_t i = 0; i < ctx->n_items && rc == HDMLP_OK; i++) {
        rc = pack_item_get(ctx, i, &(*items)[i]);
    }
    if (rc == HDMLP_OK && ctx->keys_f.end > 0) {
        rc = pack_tmp_read(&ctx->keys_f, keys->p, (size_t)ctx->keys_f.end, 0);
    }
    keys->len = (size_t)ctx->keys_f.end;
    qsort(*items, (size_t)ctx->n_items, sizeof(pack_item), fuzz_seq_cmp);
    return rc;
}

#endif
