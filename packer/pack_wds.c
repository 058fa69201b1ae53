/* WebDataset shards (pack_options.webdataset): an archive's adjacent members sharing a key
 * (the member name up to the first '.' of its last component; the rest, lowercased, is the
 * extension naming the field) form one sample keyed by it. Its label is the decimal class
 * number in its .cls member; every other member is a value of the field its extension names
 * (text for .txt, JSON for .json, bytes as they are for others), image extensions (.jpg,
 * .png, ...) all the field "image". A group's values are spilled back to back and
 * followed by a trailer naming each value's field and size, so the writer finds them in
 * the item's bytes. What is held is the open group only, and the fields seen. */
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
        return PACK_WDS_BYTES;
    }
    for (size_t i = 0; i < ext_len; i++) {
        e[i] = (char)tolower((unsigned char)ext[i]);
    }
    e[ext_len] = '\0';
    if (strcmp(e, "cls") == 0) {
        return PACK_WDS_LABEL;
    }
    if (strcmp(e, "txt") == 0 || strcmp(e, "text") == 0) {
        return PACK_WDS_TEXT;
    }
    if (strcmp(e, "json") == 0) {
        return PACK_WDS_JSON;
    }
    for (size_t i = 0; i < sizeof(image_ext) / sizeof(image_ext[0]); i++) {
        if (strcmp(e, image_ext[i]) == 0) {
            return PACK_WDS_IMAGE;
        }
    }
    return PACK_WDS_BYTES;
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

/* The field id of extension ext (lowercased), registered on first sight. */
static int field_id(pack_ctx *ctx, const char *path, const char *name, const char *ext,
                    size_t ext_len, uint32_t *id)
{
    pack_wds_fields *f = &ctx->wds_fields;
    char e[64];
    if (ext_len == 0 || ext_len >= sizeof(e)) {
        return hd_err(HDMLP_E_INVAL,
                      "%s: member %s: %s (a field is named by the member's extension, 1 to "
                      "%zu bytes)",
                      path, name, ext_len == 0 ? "no extension" : "extension too long",
                      sizeof(e) - 1);
    }
    for (size_t i = 0; i < ext_len; i++) {
        e[i] = (char)tolower((unsigned char)ext[i]);
    }
    /* Image extensions (.jpg, .png, ...: shards mix them) are one field, "image". */
    const pack_wds_field kind = pack_wds_field_of(e, ext_len);
    if (kind == PACK_WDS_IMAGE) {
        memcpy(e, "image", 5);
        ext_len = 5;
    }
    for (uint32_t i = 0; i < f->n; i++) {
        if (f->len[i] == ext_len && memcmp(f->names.p + f->off[i], e, ext_len) == 0) {
            *id = i;
            return HDMLP_OK;
        }
    }
    if (f->n == PACK_WDS_MAX_FIELDS) {
        return hd_err(HDMLP_E_RANGE, "%s: member %s: more than %u fields (extensions)", path,
                      name, PACK_WDS_MAX_FIELDS);
    }
    static const uint8_t types[] = {[PACK_WDS_IMAGE] = FMT_FIELD_IMAGE,
                                    [PACK_WDS_TEXT] = FMT_FIELD_TEXT,
                                    [PACK_WDS_JSON] = FMT_FIELD_JSON,
                                    [PACK_WDS_BYTES] = FMT_FIELD_BYTES};
    f->off[f->n] = (uint32_t)f->names.len;
    f->len[f->n] = (uint32_t)ext_len;
    f->type[f->n] = types[kind];
    *id = f->n++;
    return pack_buf_append(&f->names, e, ext_len);
}

int pack_wds_value(pack_ctx *ctx, const char *path, pack_wds *w, const char *name, size_t len,
                   uint64_t size, uint64_t src)
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
            const pack_wds_fields *f = &ctx->wds_fields;
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
    w->vals[w->n_vals++] = (pack_wds_val){id, size};
    w->bytes += size;
    return HDMLP_OK;
}

/* Appends the open group's trailer to the spill. */
static int put_trailer(struct pack_spill_writer *spill, const pack_wds *w)
{
    uint8_t t[PACK_WDS_MAX_FIELDS * 8 + 8];
    size_t n = 0;
    for (uint32_t i = 0; i < w->n_vals; i++, n += 8) {
        fmt_st32(t + n, w->vals[i].field);
        fmt_st32(t + n + 4, (uint32_t)w->vals[i].size);
    }
    fmt_st32(t + n, w->n_vals);
    fmt_st32(t + n + 4, PACK_WDS_TRAILER_MAGIC);
    n += 8;
    for (size_t done = 0; done < n;) {
        uint8_t *p;
        size_t avail;
        const int rc = pack_spill_reserve(spill, &p, &avail);
        if (rc != HDMLP_OK) {
            return rc;
        }
        const size_t k = avail < n - done ? avail : n - done;
        memcpy(p, t + done, k);
        spill->len += k;
        done += k;
    }
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
            ctx->wds_fields.count[w->vals[i].field]++;
        }
        rc = put_trailer(spill, w);
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

/* Field ids in name order (the label's "cls" among them). */
static int by_name(const char *a, size_t al, const char *b, size_t bl)
{
    const int c = memcmp(a, b, al < bl ? al : bl);
    return c != 0 ? c : (al > bl) - (al < bl);
}

void pack_wds_fields_finish(pack_wds_fields *f)
{
    /* final position of field i: the fields before it by name, and "cls" if before it */
    for (uint32_t i = 0; i < f->n; i++) {
        const char *ni = (const char *)f->names.p + f->off[i];
        uint32_t pos = by_name("cls", 3, ni, f->len[i]) < 0;
        for (uint32_t j = 0; j < f->n; j++) {
            pos += by_name((const char *)f->names.p + f->off[j], f->len[j], ni, f->len[i]) < 0;
        }
        f->final_of[i] = pos;
    }
    f->label_final = 0;
    for (uint32_t j = 0; j < f->n; j++) {
        f->label_final +=
            by_name((const char *)f->names.p + f->off[j], f->len[j], "cls", 3) < 0;
    }
    f->n_final = f->n + 1;
    f->plain = f->n == 1;
}

int pack_wds_parse(const uint8_t *buf, uint64_t len, pack_wds_val *vals, uint32_t *n)
{
    *n = 0;
    if (len < 8 || fmt_ld32(buf + len - 4) != PACK_WDS_TRAILER_MAGIC) {
        return hd_err(HDMLP_E_CORRUPT,
                      "WebDataset sample: no trailer in its %llu spilled bytes",
                      (unsigned long long)len);
    }
    const uint32_t count = fmt_ld32(buf + len - 8);
    if (count == 0 || count > PACK_WDS_MAX_FIELDS || len < 8 + (uint64_t)count * 8) {
        return hd_err(HDMLP_E_CORRUPT, "WebDataset sample: a trailer of %u values", count);
    }
    const uint8_t *t = buf + len - 8 - (uint64_t)count * 8;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < count; i++) {
        vals[i] = (pack_wds_val){fmt_ld32(t + 8 * i), fmt_ld32(t + 8 * i + 4)};
        sum += vals[i].size;
    }
    if (sum != len - 8 - (uint64_t)count * 8) {
        return hd_err(HDMLP_E_CORRUPT, "WebDataset sample: values of %llu bytes in %llu",
                      (unsigned long long)sum, (unsigned long long)(len - 8 - count * 8ull));
    }
    *n = count;
    return HDMLP_OK;
}

void pack_wds_fields_free(pack_wds_fields *f)
{
    pack_buf_free(&f->names);
    memset(f, 0, sizeof(*f));
}

void pack_wds_free(pack_wds *w)
{
    pack_buf_free(&w->key);
    memset(w, 0, sizeof(*w));
}
