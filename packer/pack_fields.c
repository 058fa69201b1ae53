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

int pack_fields_id(pack_fields *f, const char *where, const char *name, size_t len,
                   pack_form form, uint8_t type, uint32_t *id)
{
    if (len == 0 || len > PACK_FIELD_NAME_MAX) {
        return hd_err(HDMLP_E_INVAL, "%s: field name of %zu bytes (1 to %u)", where, len,
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
                HDMLP_E_INVAL, "%s: field %.*s holds %s of type %s here, %s of type %s before",
                where, (int)len, name, form_name(form),
                form == PACK_FORM_FILE ? fmt_field_type_name(type) : "?", form_name(f->form[i]),
                f->form[i] == PACK_FORM_FILE ? fmt_field_type_name(f->type[i]) : "?");
        }
        *id = i;
        return HDMLP_OK;
    }
    if (f->label_name[0] != '\0' && strlen(f->label_name) == len &&
        memcmp(f->label_name, name, len) == 0) {
        return hd_err(HDMLP_E_INVAL, "%s: a value of field %.*s, the label's name", where,
                      (int)len, name);
    }
    if (f->n == PACK_MAX_FIELDS) {
        return hd_err(HDMLP_E_RANGE, "%s: more than %u fields (%.*s would be one more)", where,
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

/* ---- .npy headers ------------------------------------------------------------------------ */

/* A Python literal's value after `'key':` in an .npy header dict, or NULL. */
static const char *npy_key(const char *h, size_t n, const char *key)
{
    const size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 2 < n; i++) {
        if ((h[i] == '\'' || h[i] == '"') && memcmp(h + i + 1, key, kl) == 0 &&
            h[i + 1 + kl] == h[i]) {
            size_t j = i + kl + 2;
            while (j < n && (h[j] == ' ' || h[j] == ':')) {
                j++;
            }
            return j < n ? h + j : NULL;
        }
    }
    return NULL;
}

static const struct {
    char kind;
    uint8_t size, dtype;
} npy_types[] = {{'u', 1, FMT_DTYPE_U8},  {'b', 1, FMT_DTYPE_U8},  {'i', 1, FMT_DTYPE_I8},
                 {'u', 2, FMT_DTYPE_U16}, {'i', 2, FMT_DTYPE_I16}, {'u', 4, FMT_DTYPE_U32},
                 {'i', 4, FMT_DTYPE_I32}, {'u', 8, FMT_DTYPE_U64}, {'i', 8, FMT_DTYPE_I64},
                 {'f', 2, FMT_DTYPE_F16}, {'f', 4, FMT_DTYPE_F32}, {'f', 8, FMT_DTYPE_F64}};

int pack_npy_parse(const uint8_t *b, size_t n, uint64_t size, pack_npy *out)
{
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    memset(out, 0, sizeof(*out));
    if (n < 10 || memcmp(b, magic, 6) != 0 || b[6] < 1 || b[6] > 3) {
        return hd_err(HDMLP_E_INVAL, "not an .npy file (no \\x93NUMPY magic of version 1-3)");
    }
    const size_t at = b[6] == 1 ? 10 : 12;
    const uint64_t hl = b[6] == 1 ? fmt_ld16(b + 8) : (n >= 12 ? fmt_ld32(b + 8) : UINT64_MAX);
    if (hl > n - at) {
        return hd_err(HDMLP_E_INVAL, "an .npy header of %llu bytes (at most %zu read)",
                      (unsigned long long)hl, n < at ? 0 : n - at);
    }
    const char *const h = (const char *)b + at;
    const char *descr = npy_key(h, hl, "descr");
    const char *fortran = npy_key(h, hl, "fortran_order");
    const char *shape = npy_key(h, hl, "shape");
    if (!descr || !fortran || !shape || (*descr != '\'' && *descr != '"') || *shape != '(') {
        return hd_err(HDMLP_E_INVAL, "an .npy header without descr, fortran_order and shape");
    }
    if (strncmp(fortran, "False", 5) != 0) {
        return hd_err(HDMLP_E_UNSUPPORTED,
                      "a Fortran-order .npy array (save it C-ordered: np.ascontiguousarray)");
    }
    const char order = descr[1], kind = descr[2];
    char *end = NULL;
    const unsigned long isz = strtoul(descr + 3, &end, 10);
    if (end == NULL || *end != descr[0]) {
        return hd_err(HDMLP_E_UNSUPPORTED, "an .npy dtype %.12s (a plain number type)", descr);
    }
    out->dtype = 0;
    for (size_t i = 0; i < sizeof(npy_types) / sizeof(npy_types[0]); i++) {
        if (npy_types[i].kind == kind && npy_types[i].size == isz) {
            out->dtype = npy_types[i].dtype;
        }
    }
    if (out->dtype == 0 || !(order == '<' || order == '|' || order == '=' || isz == 1)) {
        return hd_err(
            HDMLP_E_UNSUPPORTED,
            "an .npy dtype %.*s (little-endian bool, int, uint or float of 1-8 bytes)",
            (int)(end - descr - 1), descr + 1);
    }
    out->itemsize = (uint32_t)isz;
    out->ndim = 0;
    uint64_t elems = 1;
    const char *p = shape + 1;
    for (;;) {
        while (*p == ' ' || *p == ',') {
            p++;
        }
        if (*p == ')') {
            break;
        }
        if (!isdigit((unsigned char)*p) || out->ndim == FMT_MAX_NDIM) {
            return hd_err(HDMLP_E_UNSUPPORTED, "an .npy shape %s (up to %u dims)",
                          out->ndim == FMT_MAX_NDIM ? "of more dims" : "unreadable",
                          FMT_MAX_NDIM);
        }
        errno = 0;
        const unsigned long long d = strtoull(p, &end, 10);
        if (errno != 0 || d > UINT32_MAX) {
            return hd_err(HDMLP_E_UNSUPPORTED, "an .npy dim over 2^32 - 1");
        }
        out->shape[out->ndim++] = (uint32_t)d;
        elems = d != 0 && elems > UINT64_MAX / d ? UINT64_MAX : elems * d;
        p = end;
    }
    out->data_off = at + hl;
    const uint64_t data = size - out->data_off;
    if (size < out->data_off || elems > data / isz || elems * isz != data) {
        return hd_err(
            HDMLP_E_INVAL, "an .npy array of %llu data bytes, its shape says %llu",
            (unsigned long long)(size < out->data_off ? 0 : data),
            (unsigned long long)(elems > UINT64_MAX / isz ? UINT64_MAX : elems * isz));
    }
    return HDMLP_OK;
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

int pack_fields_note(pack_fields *f, uint32_t id, const char *where, const uint8_t *head,
                     size_t head_len, uint64_t size)
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
        return hd_err_wrap(rc, "%s: field %.*s: ", where, (int)f->len[id], name);
    }
    if (f->count[id] == 0 && f->dtype[id] == 0) {
        f->dtype[id] = a.dtype;
        f->ndim[id] = a.ndim;
        memcpy(f->shape[id], a.shape, sizeof(a.shape));
        return HDMLP_OK;
    }
    if (a.dtype != f->dtype[id] || a.ndim != f->ndim[id]) {
        return hd_err(HDMLP_E_INVAL,
                      "%s: field %.*s: an array of dtype %s and %u dims, earlier ones %s and "
                      "%u (a field's arrays share dtype and number of dims)",
                      where, (int)f->len[id], name, fmt_dtype_name(a.dtype), a.ndim,
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
                               uint32_t n, const char *where)
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
            return hd_err(HDMLP_E_INVAL, "%s: no value of the required field %.*s", where,
                          (int)l, p);
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
    len += 8;
    for (size_t done = 0; done < len;) {
        uint8_t *p;
        size_t avail;
        const int rc = pack_spill_reserve(spill, &p, &avail);
        if (rc != HDMLP_OK) {
            return rc;
        }
        const size_t k = avail < len - done ? avail : len - done;
        memcpy(p, t + done, k);
        spill->len += k;
        done += k;
    }
    return HDMLP_OK;
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

static int hex4(const uint8_t *p, uint32_t *u)
{
    *u = 0;
    for (int i = 0; i < 4; i++) {
        const int c = p[i];
        const int d = isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
        if (d < 0) {
            return 0;
        }
        *u = *u * 16 + (uint32_t)d;
    }
    return 1;
}

size_t pack_json_unescape(const uint8_t *s, size_t n, uint8_t *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            out[o++] = s[i];
            continue;
        }
        if (++i >= n) {
            return SIZE_MAX;
        }
        uint32_t u;
        switch (s[i]) {
        case '"':
            out[o++] = '"';
            continue;
        case '\\':
            out[o++] = '\\';
            continue;
        case '/':
            out[o++] = '/';
            continue;
        case 'b':
            out[o++] = '\b';
            continue;
        case 'f':
            out[o++] = '\f';
            continue;
        case 'n':
            out[o++] = '\n';
            continue;
        case 'r':
            out[o++] = '\r';
            continue;
        case 't':
            out[o++] = '\t';
            continue;
        case 'u':
            break;
        default:
            return SIZE_MAX;
        }
        if (i + 5 > n || !hex4(s + i + 1, &u)) {
            return SIZE_MAX;
        }
        i += 4;
        uint32_t lo;
        if (u >= 0xD800 && u < 0xDC00 && i + 7 <= n && s[i + 1] == '\\' && s[i + 2] == 'u' &&
            hex4(s + i + 3, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00); /* a surrogate pair */
            i += 6;
        } else if (u >= 0xD800 && u <= 0xDFFF) {
            u = 0xFFFD; /* a lone surrogate: the replacement character, as UTF-8 has none */
        }
        if (u < 0x80) {
            out[o++] = (uint8_t)u;
        } else if (u < 0x800) {
            out[o++] = (uint8_t)(0xC0 | u >> 6);
            out[o++] = (uint8_t)(0x80 | (u & 0x3F));
        } else if (u < 0x10000) {
            out[o++] = (uint8_t)(0xE0 | u >> 12);
            out[o++] = (uint8_t)(0x80 | ((u >> 6) & 0x3F));
            out[o++] = (uint8_t)(0x80 | (u & 0x3F));
        } else {
            out[o++] = (uint8_t)(0xF0 | u >> 18);
            out[o++] = (uint8_t)(0x80 | ((u >> 12) & 0x3F));
            out[o++] = (uint8_t)(0x80 | ((u >> 6) & 0x3F));
            out[o++] = (uint8_t)(0x80 | (u & 0x3F));
        }
    }
    return o;
}

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
