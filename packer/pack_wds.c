/* WebDataset shards (pack_options.webdataset): an archive's adjacent members sharing a key
 * (the member name up to the first '.' of its last component; the rest, lowercased, is the
 * extension naming the field) form one sample keyed by it. Its label is the decimal class
 * number in its .cls member; every other member is a value of the field its extension names
 * (text for .txt, JSON for .json, an ndarray for .npy, bytes as they are for others), image
 * extensions (.jpg, .png, ...) all the field "image" (pack_fields.c). A group's values are
 * spilled back to back and followed by a trailer naming each value's field and size, so the
 * writer finds them in the item's bytes. What is held is the open group only, and the fields
 * seen. */
#include "pack_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

void pack_wds_split(const char *name, size_t len, size_t *key_len, const char **ext,
                    size_t *ext_len)
{
    size_t base = len;
    while (base > 0 && name[base - 1] != '/') {
        base--;
    }
    const char *const dot = memchr(name + base, '.', len - base);
    *key_len = dot ? (size_t)(dot - name) : len;
    *ext = dot ? dot + 1 : name + len;
    *ext_len = dot ? len - (size_t)(dot + 1 - name) : 0;
}

bool pack_wds_is_label(const char *ext, size_t ext_len)
{
    return ext_len == 3 && tolower((unsigned char)ext[0]) == 'c' &&
           tolower((unsigned char)ext[1]) == 'l' && tolower((unsigned char)ext[2]) == 's';
}

int pack_wds_begin(pack_ctx *ctx, uint32_t input, const char *path, pack_wds *w,
                   struct pack_spill_writer *spill, const char *name, size_t len)
{
    size_t kl, ext_len;
    const char *ext;
    pack_wds_split(name, len, &kl, &ext, &ext_len);
    if (w->open && w->key.len == kl && (kl == 0 || memcmp(w->key.p, name, kl) == 0)) {
        return HDMLP_OK;
    }
    int rc = pack_wds_finish(ctx, input, path, w, spill);
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(&w->key, name, kl);
        w->open = 1;
    }
    return rc;
}

int pack_wds_label(pack_ctx *ctx, const char *path, pack_wds *w, const char *name, size_t len,
                   const uint8_t *bytes, size_t n)
{
    if (w->has_label) {
        return hd_err(HDMLP_E_INVAL, "%s: sample %.*s has two .cls members", path,
                      (int)w->key.len, w->key.p != NULL ? (const char *)w->key.p : "");
    }
    size_t i = 0, j = n;
    while (i < j && isspace(bytes[i])) {
        i++;
    }
    while (j > i && isspace(bytes[j - 1])) {
        j--;
    }
    uint64_t v = 0;
    size_t k = i;
    for (; k < j && isdigit(bytes[k]) && v <= PACK_WDS_LABEL_MAX; k++) {
        v = v * 10 + (uint64_t)(bytes[k] - '0');
    }
    if (i == j || k != j || v > PACK_WDS_LABEL_MAX) {
        return hd_err(HDMLP_E_INVAL,
                      "%s: member %.*s: not a class number (a decimal integer 0..%u)", path,
                      (int)len, name, PACK_WDS_LABEL_MAX);
    }
    char text[16];
    const int tl = snprintf(text, sizeof(text), "%llu", (unsigned long long)v);
    const int rc = pack_labels_intern(&ctx->labels, text, (size_t)tl, &w->label);
    w->has_label = rc == HDMLP_OK;
    return rc;
}

/* The field id of extension ext (lowercased), registered on first sight: image extensions
 * (.jpg, .png, ...: shards mix them) are one field, "image". */
static int field_id(pack_ctx *ctx, const char *path, const char *name, const char *ext,
                    size_t ext_len, uint32_t *id)
{
    char e[PACK_FIELD_NAME_MAX + 1];
    if (ext_len == 0 || ext_len >= sizeof(e)) {
        return hd_err(HDMLP_E_INVAL,
                      "%s: member %s: %s (a field is named by the member's extension, 1 to %u "
                      "bytes)",
                      path, name, ext_len == 0 ? "no extension" : "extension too long",
                      PACK_FIELD_NAME_MAX);
    }
    for (size_t i = 0; i < ext_len; i++) {
        e[i] = (char)tolower((unsigned char)ext[i]);
    }
    const uint8_t type = pack_fields_ext_type(e, ext_len);
    if (type == FMT_FIELD_IMAGE) {
        memcpy(e, "image", 5);
        ext_len = 5;
    }
    const int rc = pack_fields_id(&ctx->fields, e, ext_len, PACK_FORM_FILE, type, id);
    return rc == HDMLP_OK ? rc : hd_err_wrap(rc, "%s: member %s: ", path, name);
}

int pack_wds_value(pack_ctx *ctx, const char *path, pack_wds *w, const char *name, size_t len,
                   uint64_t size, uint64_t src, const uint8_t *head, size_t head_len)
{
    size_t kl, ext_len;
    const char *ext;
    pack_wds_split(name, len, &kl, &ext, &ext_len);
    uint32_t id = 0;
    int rc = field_id(ctx, path, name, ext, ext_len, &id);
    if (rc != HDMLP_OK) {
        return rc;
    }
    for (uint32_t i = 0; i < w->n_vals; i++) {
        if (w->vals[i].field == id) {
            const pack_fields *f = &ctx->fields;
            return hd_err(HDMLP_E_INVAL,
                          "%s: sample %.*s has two %.*s members (the second: %.*s)", path,
                          (int)kl, name, (int)f->len[id], (const char *)f->names.p + f->off[id],
                          (int)len, name);
        }
    }
    if (w->n_vals == 0) {
        w->first_src = src;
    } else if (src != w->first_src + w->bytes) {
        return hd_err(HDMLP_E_STATE, "%s: member %s was not spilled after its sample's", path,
                      name);
    }
    rc = pack_fields_note(&ctx->fields, id, head, head_len, size);
    if (rc != HDMLP_OK) {
        return hd_err_wrap(rc, "%s: member %.*s: ", path, (int)len, name);
    }
    w->vals[w->n_vals++] = (pack_field_val){id, size};
    w->bytes += size;
    return HDMLP_OK;
}

int pack_wds_finish(pack_ctx *ctx, uint32_t input, const char *path, pack_wds *w,
                    struct pack_spill_writer *spill)
{
    if (!w->open) {
        return HDMLP_OK;
    }
    const char *const key = w->key.p != NULL ? (const char *)w->key.p : ""; /* "" key */
    const int key_len = (int)w->key.len;
    int rc = HDMLP_OK;
    if (w->n_vals == 0) {
        rc = hd_err(HDMLP_E_INVAL,
                    "%s: sample %.*s has no member besides its .cls (an image, text, ...)",
                    path, key_len, key);
    } else if (!w->has_label) {
        rc = hd_err(HDMLP_E_INVAL, "%s: sample %.*s has no .cls member (its class number)",
                    path, key_len, key);
    } else {
        for (uint32_t i = 0; i < w->n_vals; i++) {
            if (w->vals[i].size > UINT32_MAX) {
                return hd_err(HDMLP_E_RANGE,
                              "%s: sample %.*s: a member of %llu bytes (at most "
                              "4 GiB - 1)",
                              path, key_len, key, (unsigned long long)w->vals[i].size);
            }
            ctx->fields.count[w->vals[i].field]++;
        }
        rc = pack_fields_check_required(&ctx->fields, ctx->o->require_fields, w->vals,
                                        w->n_vals);
        if (rc != HDMLP_OK) {
            rc = hd_err_wrap(rc, "%s: sample %.*s: ", path, key_len, key);
        } else {
            rc = pack_fields_put_trailer(spill, w->vals, w->n_vals);
        }
        if (rc == HDMLP_OK) {
            rc = pack_add_item(ctx, input, key, w->key.len, w->label,
                               w->bytes + (uint64_t)w->n_vals * 8 + 8, w->first_src, key);
        }
    }
    w->open = w->has_label = 0;
    w->n_vals = 0;
    w->bytes = 0;
    w->key.len = 0;
    return rc;
}

void pack_wds_free(pack_wds *w)
{
    pack_buf_free(&w->key);
    memset(w, 0, sizeof(*w));
}
