/* .npy files (NumPy's format 1.0-3.0) as ndarray values: the header's dtype, order and
 * shape (pack_fields.c turns the file into the dataset's ndarray layout). */
#include "pack_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
