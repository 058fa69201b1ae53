/* WebDataset shards (pack_options.webdataset): an archive's adjacent members sharing a key
 * (the member name up to the first '.' of its last component; the rest, lowercased, is the
 * extension naming the field) form one sample, whose bytes are its image member and whose
 * label is the decimal class number in its .cls member. Members of other fields (.txt,
 * .json, .npy, ...) are counted as left out (PACK_SKIP_FIELD): a sample carries one data
 * field in this version. What is held is the open group only. */
#include "pack_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const image_ext[] = {"jpg", "jpeg", "png", "webp", "ppm", "pgm",
                                        "pbm", "bmp",  "gif", "tif",  "tiff"};

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

pack_wds_field pack_wds_field_of(const char *ext, size_t ext_len)
{
    char e[8];
    if (ext_len == 0 || ext_len >= sizeof(e)) {
        return PACK_WDS_OTHER;
    }
    for (size_t i = 0; i < ext_len; i++) {
        e[i] = (char)tolower((unsigned char)ext[i]);
    }
    e[ext_len] = '\0';
    if (strcmp(e, "cls") == 0) {
        return PACK_WDS_LABEL;
    }
    for (size_t i = 0; i < sizeof(image_ext) / sizeof(image_ext[0]); i++) {
        if (strcmp(e, image_ext[i]) == 0) {
            return PACK_WDS_IMAGE;
        }
    }
    return PACK_WDS_OTHER;
}

/* Makes the key of member name[0..len) the open group (*key_len its length), after
 * emitting the one before if another. */
static int wds_group(pack_ctx *ctx, uint32_t input, const char *path, pack_wds *w,
                     const char *name, size_t len, size_t *key_len)
{
    size_t ext_len;
    const char *ext;
    pack_wds_split(name, len, key_len, &ext, &ext_len);
    const size_t kl = *key_len;
    if (w->open && w->key.len == kl && (kl == 0 || memcmp(w->key.p, name, kl) == 0)) {
        return HDMLP_OK;
    }
    int rc = pack_wds_finish(ctx, input, path, w);
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(&w->key, name, kl);
        w->open = 1;
    }
    return rc;
}

int pack_wds_image(pack_ctx *ctx, uint32_t input, const char *path, pack_wds *w,
                   const char *name, size_t len, uint64_t size, uint64_t src)
{
    size_t key_len;
    int rc = wds_group(ctx, input, path, w, name, len, &key_len);
    if (rc != HDMLP_OK) {
        return rc;
    }
    if (w->has_image) {
        return hd_err(HDMLP_E_INVAL,
                      "%s: sample %.*s has two image members (%s and %.*s): a sample has "
                      "one data field",
                      path, (int)key_len, name, (const char *)w->image_name.p, (int)len, name);
    }
    w->image_name.len = 0;
    rc = pack_buf_append(&w->image_name, name, len);
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(&w->image_name, "", 1);
    }
    w->has_image = 1;
    w->image_size = size;
    w->image_src = src;
    return rc;
}

int pack_wds_label(pack_ctx *ctx, uint32_t input, const char *path, pack_wds *w,
                   const char *name, size_t len, const uint8_t *bytes, size_t n)
{
    size_t key_len;
    int rc = wds_group(ctx, input, path, w, name, len, &key_len);
    if (rc != HDMLP_OK) {
        return rc;
    }
    if (w->has_label) {
        return hd_err(HDMLP_E_INVAL, "%s: sample %.*s has two .cls members", path, (int)key_len,
                      name);
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
    rc = pack_labels_intern(&ctx->labels, text, (size_t)tl, &w->label);
    w->has_label = rc == HDMLP_OK;
    return rc;
}

int pack_wds_other(pack_ctx *ctx, uint32_t input, const char *path, pack_wds *w,
                   const char *name, size_t len)
{
    size_t key_len;
    const int rc = wds_group(ctx, input, path, w, name, len, &key_len);
    if (rc == HDMLP_OK) {
        /* the extension: after the '.' that ends the key, when there is one */
        const char *const ext = name + key_len + (key_len < len);
        const size_t ext_len = len - key_len - (key_len < len);
        pack_skip(ctx, PACK_SKIP_FIELD,
                  "%s: member %s left out (field .%.*s: a sample has one "
                  "data field in this version)",
                  path, name, (int)ext_len, ext);
    }
    return rc;
}

int pack_wds_finish(pack_ctx *ctx, uint32_t input, const char *path, pack_wds *w)
{
    if (!w->open) {
        return HDMLP_OK;
    }
    const char *const key = w->key.p != NULL ? (const char *)w->key.p : ""; /* "" key */
    const int key_len = (int)w->key.len;
    int rc = HDMLP_OK;
    if (!w->has_image) {
        rc = hd_err(HDMLP_E_INVAL,
                    "%s: sample %.*s has no image member (.jpg, .jpeg, .png, .webp, ...)", path,
                    key_len, key);
    } else if (!w->has_label) {
        rc = hd_err(HDMLP_E_INVAL, "%s: sample %.*s has no .cls member (its class number)",
                    path, key_len, key);
    } else {
        rc = pack_add_item(ctx, input, key, w->key.len, w->label, w->image_size, w->image_src,
                           (const char *)w->image_name.p);
    }
    w->open = w->has_image = w->has_label = 0;
    w->key.len = 0;
    return rc;
}

void pack_wds_free(pack_wds *w)
{
    pack_buf_free(&w->key);
    pack_buf_free(&w->image_name);
    memset(w, 0, sizeof(*w));
}
