/* Samples with fields: the registry of the fields an input's samples have (WebDataset
 * members by extension, manifest columns by name), a sample's values as spilled (back to
 * back, then a trailer naming each one's field and size), and each value turned into what
 * the dataset stores (format/FORMAT.md): .npy files into ndarray values, JSON and CSV
 * numbers into inline scalars, JSON strings into their text. */
#include "pack_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const image_ext[] = {"jpg", "jpeg", "png", "webp", "ppm", "pgm",
                                        "pbm", "bmp",  "gif", "tif",  "tiff"};

uint8_t pack_fields_ext_type(const char *ext, size_t ext_len)
{
    char e[8];
    if (ext_len == 0 || ext_len >= sizeof(e)) {
        return FMT_FIELD_BYTES;
    }
    for (size_t i = 0; i < ext_len; i++) {
        e[i] = (char)tolower((unsigned char)ext[i]);
    }
    e[ext_len] = '\0';
    if (strcmp(e, "txt") == 0 || strcmp(e, "text") == 0) {
        return FMT_FIELD_TEXT;
    }
    if (strcmp(e, "json") == 0) {
        return FMT_FIELD_JSON;
    }
    if (strcmp(e, "npy") == 0) {
        return FMT_FIELD_NDARRAY;
    }
    for (size_t i = 0; i < sizeof(image_ext) / sizeof(image_ext[0]); i++) {
        if (strcmp(e, image_ext[i]) == 0) {
            return FMT_FIELD_IMAGE;
        }
    }
    return FMT_FIELD_BYTES;
}

static const char *form_name(uint8_t form)
{
    return form == PACK_FORM_JSON   ? "a JSONL column"
           : form == PACK_FORM_CELL ? "a CSV column"
                                    : "files";
}

int pack_fields_id(pack_fields *f, const char *name, size_t len, pack_form form, uint8_t type,
                   uint32_t *id)
{
    if (len == 0 || len > PACK_FIELD_NAME_MAX) {
        return hd_err(HDMLP_E_INVAL, "field name of %zu bytes (1 to %u)", len,
                      PACK_FIELD_NAME_MAX);
    }
    if (form != PACK_FORM_FILE) {
        type = FMT_FIELD_BYTES; /* decided at pack_fields_finish */
    }
    for (uint32_t i = 0; i < f->n; i++) {
        if (f->len[i] != len || memcmp(f->names.p + f->off[i], name, len) != 0) {
            continue;
        }
        if (f->form[i] != form || f->type[i] != type) {
            return hd_err(
                HDMLP_E_INVAL, "field %.*s holds %s of type %s here, %s of type %s before",
                (int)len, name, form_name(form),
                form == PACK_FORM_FILE ? fmt_field_type_name(type) : "?", form_name(f->form[i]),
                f->form[i] == PACK_FORM_FILE ? fmt_field_type_name(f->type[i]) : "?");
        }
        *id = i;
        return HDMLP_OK;
    }
    if (f->label_name[0] != '\0' && strlen(f->label_name) == len &&
        memcmp(f->label_name, name, len) == 0) {
        return hd_err(HDMLP_E_INVAL, "a value of field %.*s, the label's name", (int)len, name);
    }
    if (f->n == PACK_MAX_FIELDS) {
        return hd_err(HDMLP_E_RANGE, "more than %u fields (%.*s would be one more)",
                      PACK_MAX_FIELDS, (int)len, name);
    }
    const uint32_t i = f->n;
    f->off[i] = (uint32_t)f->names.len;
    f->len[i] = (uint32_t)len;
    f->form[i] = (uint8_t)form;
    f->type[i] = type;
    f->seen[i] = 0;
    f->dtype[i] = f->ndim[i] = 0;
    const int rc = pack_buf_append(&f->names, name, len);
    if (rc == HDMLP_OK) {
        *id = f->n++;
    }
    return rc;
}

/* ---- JSON and CSV values ----------------------------------------------------------------- */

/* PACK_SEEN_INT when s[0..n) is a decimal integer in int64's range (*v), PACK_SEEN_REAL
 * when another finite number (*d), else 0. */
static unsigned number_kind(const char *s, size_t n, int64_t *v, double *d)
{
    char buf[64];
    if (n == 0 || n >= sizeof(buf)) {
        return 0;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (isspace((unsigned char)buf[0])) {
        return 0;
    }
    char *end = NULL;
    errno = 0;
    const long long i = strtoll(buf, &end, 10);
    if (errno == 0 && *end == '\0') {
        *v = i;
        return PACK_SEEN_INT;
    }
    errno = 0;
    const double x = strtod(buf, &end);
    if (errno == 0 && *end == '\0' && isfinite(x) && !isalpha((unsigned char)buf[n - 1])) {
        *d = x;
        return PACK_SEEN_REAL;
    }
    return 0;
}

static unsigned value_kind(uint8_t form, const uint8_t *v, size_t n)
{
    int64_t i;
    double d;
    const unsigned num = number_kind((const char *)v, n, &i, &d);
    if (form == PACK_FORM_CELL) {
        return num != 0 ? num : PACK_SEEN_STRING;
    }
    if (n > 0 && v[0] == '"') {
        return PACK_SEEN_STRING;
    }
    return num != 0 ? num : PACK_SEEN_OTHER;
}

int pack_fields_note(pack_fields *f, uint32_t id, const uint8_t *head, size_t head_len,
                     uint64_t size)
{
    if (f->form[id] != PACK_FORM_FILE) {
        f->seen[id] |= (uint8_t)value_kind(f->form[id], head, head_len);
        return HDMLP_OK;
    }
    if (f->type[id] != FMT_FIELD_NDARRAY) {
        return HDMLP_OK;
    }
    const char *const name = (const char *)f->names.p + f->off[id];
    pack_npy a;
    const int rc = pack_npy_parse(head, head_len, size, &a);
    if (rc != HDMLP_OK) {
        return hd_err_wrap(rc, "field %.*s: ", (int)f->len[id], name);
    }
    if (f->count[id] == 0 && f->dtype[id] == 0) {
        f->dtype[id] = a.dtype;
        f->ndim[id] = a.ndim;
        memcpy(f->shape[id], a.shape, sizeof(a.shape));
        return HDMLP_OK;
    }
    if (a.dtype != f->dtype[id] || a.ndim != f->ndim[id]) {
        return hd_err(HDMLP_E_INVAL,
                      "field %.*s: an array of dtype %s and %u dims, earlier ones %s and "
                      "%u (a field's arrays share dtype and number of dims)",
                      (int)f->len[id], name, fmt_dtype_name(a.dtype), a.ndim,
                      fmt_dtype_name(f->dtype[id]), f->ndim[id]);
    }
    for (uint32_t d = 0; d < a.ndim; d++) {
        if (f->shape[id][d] != a.shape[d]) {
            f->shape[id][d] = 0; /* varies: each value leads with its size */
        }
    }
    return HDMLP_OK;
}

int pack_fields_check_required(const pack_fields *f, const char *list, const pack_field_val *v,
                               uint32_t n)
{
    for (const char *p = list; p != NULL && *p != '\0';) {
        const char *const comma = strchr(p, ',');
        const size_t l = comma ? (size_t)(comma - p) : strlen(p);
        bool found = false;
        for (uint32_t i = 0; i < n && !found; i++) {
            found =
                f->len[v[i].field] == l && memcmp(f->names.p + f->off[v[i].field], p, l) == 0;
        }
        if (!found) {
            return hd_err(HDMLP_E_INVAL, "no value of the required field %.*s", (int)l, p);
        }
        p = comma ? comma + 1 : NULL;
    }
    return HDMLP_OK;
}

/* ---- the spilled trailer ----------------------------------------------------------------- */

int pack_fields_put_trailer(pack_spill_writer *spill, const pack_field_val *v, uint32_t n)
{
    uint8_t t[PACK_MAX_FIELDS * 8 + 8];
    size_t len = 0;
    for (uint32_t i = 0; i < n; i++, len += 8) {
        fmt_st32(t + len, v[i].field);
        fmt_st32(t + len + 4, (uint32_t)v[i].size);
    }
    fmt_st32(t + len, n);
    fmt_st32(t + len + 4, PACK_FIELDS_TRAILER_MAGIC);
    return pack_spill_append(spill, t, len + 8);
}

int pack_fields_parse(const uint8_t *buf, uint64_t len, pack_field_val *vals, uint32_t *n)
{
    *n = 0;
    if (len < 8 || fmt_ld32(buf + len - 4) != PACK_FIELDS_TRAILER_MAGIC) {
        return hd_err(HDMLP_E_CORRUPT,
                      "sample with fields: no trailer in its %llu spilled bytes",
                      (unsigned long long)len);
    }
    const uint32_t count = fmt_ld32(buf + len - 8);
    if (count > PACK_MAX_FIELDS || len < 8 + (uint64_t)count * 8) {
        return hd_err(HDMLP_E_CORRUPT, "sample with fields: a trailer of %u values", count);
    }
    const uint8_t *t = buf + len - 8 - (uint64_t)count * 8;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < count; i++) {
        vals[i] = (pack_field_val){fmt_ld32(t + 8 * i), fmt_ld32(t + 8 * i + 4)};
        sum += vals[i].size;
    }
    if (sum != len - 8 - (uint64_t)count * 8) {
        return hd_err(HDMLP_E_CORRUPT, "sample with fields: values of %llu bytes in %llu",
                      (unsigned long long)sum, (unsigned long long)(len - 8 - count * 8ull));
    }
    *n = count;
    return HDMLP_OK;
}

/* ---- after scanning ---------------------------------------------------------------------- */

static int by_name(const char *a, size_t al, const char *b, size_t bl)
{
    const int c = memcmp(a, b, al < bl ? al : bl);
    return c != 0 ? c : (al > bl) - (al < bl);
}

void pack_fields_finish(pack_fields *f)
{
    for (uint32_t i = 0; i < f->n; i++) {
        const unsigned s = f->seen[i];
        if (f->form[i] == PACK_FORM_FILE) {
            continue;
        }
        if (s == PACK_SEEN_INT) {
            f->type[i] = FMT_FIELD_INT64;
        } else if (s != 0 && (s & ~(PACK_SEEN_INT | PACK_SEEN_REAL)) == 0) {
            f->type[i] = FMT_FIELD_FLOAT64;
        } else if (s == PACK_SEEN_STRING || f->form[i] == PACK_FORM_CELL) {
            f->type[i] = FMT_FIELD_TEXT;
        } else {
            f->type[i] = FMT_FIELD_JSON;
        }
    }
    const char *const label = f->label_name;
    const size_t ll = strlen(label);
    /* final position of field i: the fields before it by name, and the label if before it */
    for (uint32_t i = 0; i < f->n; i++) {
        const char *ni = (const char *)f->names.p + f->off[i];
        uint32_t pos = ll > 0 && by_name(label, ll, ni, f->len[i]) < 0;
        for (uint32_t j = 0; j < f->n; j++) {
            pos += by_name((const char *)f->names.p + f->off[j], f->len[j], ni, f->len[i]) < 0;
        }
        f->final_of[i] = pos;
    }
    f->label_final = FMT_NO_FIELD;
    if (ll > 0) {
        f->label_final = 0;
        for (uint32_t j = 0; j < f->n; j++) {
            f->label_final +=
                by_name((const char *)f->names.p + f->off[j], f->len[j], label, ll) < 0;
        }
    }
    f->n_final = f->n + (ll > 0);
    /* One value of bytes, text, JSON or an image and the label: each sample that value's
     * bytes, as datasets without fields store them. */
    f->plain =
        f->n == 1 && ll > 0 && f->form[0] == PACK_FORM_FILE && f->type[0] != FMT_FIELD_NDARRAY;
}

/* ---- a value as the dataset stores it ---------------------------------------------------- */

int pack_fields_value(const pack_fields *f, uint32_t id, const uint8_t *v, uint64_t n,
                      uint8_t *out, uint64_t *out_len, fmt_value *scalar)
{
    const char *const name = (const char *)f->names.p + f->off[id];
    const int nl = (int)f->len[id];
    *out_len = 0;
    const uint8_t type = f->type[id];
    if (fmt_field_scalar(type)) {
        int64_t i = 0;
        double d = 0;
        const unsigned k = number_kind((const char *)v, (size_t)n, &i, &d);
        if (k == 0) {
            return hd_err(HDMLP_E_INVAL, "field %.*s: %.*s is not a number", nl, name,
                          (int)(n < 40 ? n : 40), (const char *)v);
        }
        if (type == FMT_FIELD_FLOAT64) {
            const double x = k == PACK_SEEN_INT ? (double)i : d;
            uint64_t bits;
            memcpy(&bits, &x, sizeof(bits));
            i = (int64_t)bits;
        }
        *scalar = fmt_value_int64(i);
        return HDMLP_OK;
    }
    if (f->form[id] == PACK_FORM_JSON && type == FMT_FIELD_TEXT) {
        const size_t o = n >= 2 ? pack_json_unescape(v + 1, (size_t)n - 2, out) : SIZE_MAX;
        if (o == SIZE_MAX) {
            return hd_err(HDMLP_E_INVAL, "field %.*s: a malformed JSON string", nl, name);
        }
        *out_len = o;
        return HDMLP_OK;
    }
    if (type != FMT_FIELD_NDARRAY) {
        memcpy(out, v, (size_t)n);
        *out_len = n;
        return HDMLP_OK;
    }
    pack_npy a;
    const int rc = pack_npy_parse(v, (size_t)n, n, &a);
    if (rc != HDMLP_OK) {
        return hd_err_wrap(rc, "field %.*s: ", nl, name);
    }
    uint64_t o = 0;
    for (uint32_t d = 0; d < a.ndim; d++) {
        if (f->shape[id][d] == 0) {
            fmt_st64(out + o, a.shape[d]);
            o += 8;
        } else if (f->shape[id][d] != a.shape[d]) {
            return hd_err(HDMLP_E_STATE, "field %.*s: dim %u is %u, the field's %u", nl, name,
                          d, a.shape[d], f->shape[id][d]);
        }
    }
    memcpy(out + o, v + a.data_off, (size_t)(n - a.data_off));
    *out_len = o + n - a.data_off;
    return HDMLP_OK;
}

void pack_fields_free(pack_fields *f)
{
    pack_buf_free(&f->names);
    memset(f, 0, sizeof(*f));
}
