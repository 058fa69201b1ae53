/* JSON and UTF-8 text for manifests (pack_scan_manifest.c) and the values taken from them
 * (pack_fields.c): a validating JSON scanner that finds where a value ends without building
 * anything, JSON string unescaping, and a UTF-8 check (RFC 8259, RFC 3629). */
#include "pack_internal.h"

#include <ctype.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

const uint8_t *pack_json_ws(const uint8_t *p, const uint8_t *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) {
        p++;
    }
    return p;
}

const uint8_t *pack_json_string(const uint8_t *p, const uint8_t *e)
{
    for (p++; p < e; p++) {
        if (*p == '"') {
            return p + 1;
        }
        if (*p < 0x20) {
            return NULL;
        }
        if (*p == '\\') {
            if (++p >= e) {
                return NULL;
            }
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++) {
                    if (p + i >= e || !strchr("0123456789abcdefABCDEF", p[i]) || p[i] == 0) {
                        return NULL;
                    }
                }
                p += 4;
            } else if (!strchr("\"\\/bfnrt", *p) || *p == 0) {
                return NULL;
            }
        }
    }
    return NULL;
}

static const uint8_t *digits(const uint8_t *p, const uint8_t *e)
{
    const uint8_t *const s = p;
    while (p < e && *p >= '0' && *p <= '9') {
        p++;
    }
    return p > s ? p : NULL;
}

static const uint8_t *j_number(const uint8_t *p, const uint8_t *e)
{
    if (p < e && *p == '-') {
        p++;
    }
    if (p < e && *p == '0') {
        p++;
    } else if (!(p = digits(p, e))) {
        return NULL;
    }
    if (p < e && *p == '.' && !(p = digits(p + 1, e))) {
        return NULL;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) {
            p++;
        }
        p = digits(p, e);
    }
    return p;
}

static const uint8_t *j_value(const uint8_t *p, const uint8_t *e, int depth)
{
    if (p >= e || depth > JSON_MAX_DEPTH) {
        return NULL;
    }
    static const char *const lit[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        const size_t l = strlen(lit[i]);
        if ((size_t)(e - p) >= l && memcmp(p, lit[i], l) == 0) {
            return p + l;
        }
    }
    if (*p == '"') {
        return pack_json_string(p, e);
    }
    if (*p != '{' && *p != '[') {
        return j_number(p, e);
    }
    const uint8_t close = *p == '{' ? '}' : ']';
    const int obj = *p == '{';
    p = pack_json_ws(p + 1, e);
    if (p < e && *p == close) {
        return p + 1;
    }
    for (;;) {
        if (obj) {
            if (p >= e || *p != '"' || !(p = pack_json_string(p, e))) {
                return NULL;
            }
            p = pack_json_ws(p, e);
            if (p >= e || *p != ':') {
                return NULL;
            }
            p = pack_json_ws(p + 1, e);
        }
        if (!(p = j_value(p, e, depth + 1))) {
            return NULL;
        }
        p = pack_json_ws(p, e);
        if (p < e && *p == close) {
            return p + 1;
        }
        if (p >= e || *p != ',') {
            return NULL;
        }
        p = pack_json_ws(p + 1, e);
    }
}

const uint8_t *pack_json_value(const uint8_t *p, const uint8_t *e) { return j_value(p, e, 0); }

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

size_t pack_utf8_bad(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const uint8_t c = s[i];
        const size_t len = c < 0x80             ? 1
                           : (c & 0xE0) == 0xC0 ? 2
                           : (c & 0xF0) == 0xE0 ? 3
                           : (c & 0xF8) == 0xF0 ? 4
                                                : 0;
        if (len == 0 || len > n - i || (len == 2 && c < 0xC2) || (len == 4 && c > 0xF4)) {
            return i;
        }
        uint32_t u = len == 1 ? c : c & (0x7F >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return i;
            }
            u = u << 6 | (s[i + k] & 0x3F);
        }
        if ((len == 3 && (u < 0x800 || (u >= 0xD800 && u <= 0xDFFF))) ||
            (len == 4 && (u < 0x10000 || u > 0x10FFFF))) {
            return i;
        }
        i += len;
    }
    return n;
}
