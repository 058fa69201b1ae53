/*
 * Sizes as text ("256M", "1.5GiB", "500MB", "25%"): units_parse_size, the one grammar
 * hdmlp-bench, hdmlp-pack and the Python module read. Not part of libhdmlp (no size text
 * crosses its API): libc only, compiled into each program that reads sizes
 * (loader_units.h). Exact: the digits are scaled with integer arithmetic (no strtod, so no
 * locale and no rounding before the final floor), and every step is checked against 2^64.
 */
#include "loader_units.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Saturation of a written exponent: far beyond any value that fits, far below overflow. */
#define UNITS_EXP_MAX (1LL << 40)

/* A number as written: ni integer digits, then (after a '.') nf fraction digits, from
 * `digits`; its value is (all digits as one integer) * 10^(exp - nf). */
typedef struct size_number {
    const char *digits;
    long long ni;
    long long nf;
    long long exp;
} size_number;

static const struct {
    const char *name;
    uint64_t factor;
} units[] = {
    {"", 1},
    {"b", 1},
    {"k", 1ULL << 10},
    {"kib", 1ULL << 10},
    {"kb", 1000ULL},
    {"m", 1ULL << 20},
    {"mib", 1ULL << 20},
    {"mb", 1000000ULL},
    {"g", 1ULL << 30},
    {"gib", 1ULL << 30},
    {"gb", 1000000000ULL},
    {"t", 1ULL << 40},
    {"tib", 1ULL << 40},
    {"tb", 1000000000000ULL},
};

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int is_blank(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* Digit i of the number (the '.' skipped). */
static unsigned digit_at(const size_number *nb, long long i)
{
    return (unsigned)(nb->digits[i < nb->ni ? i : i + 1] - '0');
}

/* Reads "D[.D]" or ".D", then an optional exponent "e[+-]D"; returns the text after the
 * number, or NULL if s does not start with one. */
static const char *read_number(const char *s, size_number *nb)
{
    nb->digits = s;
    nb->ni = 0;
    nb->nf = 0;
    nb->exp = 0;
    while (is_digit(s[nb->ni])) {
        nb->ni++;
    }
    s += nb->ni;
    if (*s == '.') {
        s++;
        while (is_digit(s[nb->nf])) {
            nb->nf++;
        }
        s += nb->nf;
    }
    if (nb->ni + nb->nf == 0) {
        return NULL;
    }
    if (*s != 'e' && *s != 'E') {
        return s;
    }
    const int sign = s[1] == '+' || s[1] == '-';
    if (!is_digit(s[1 + sign])) {
        return s; /* "1e" or "1e+": no exponent; the 'e' is left for the unit */
    }
    const int negative = s[1] == '-';
    for (s += 1 + sign; is_digit(*s); s++) {
        if (nb->exp < UNITS_EXP_MAX) {
            nb->exp = nb->exp * 10 + (*s - '0');
        }
    }
    nb->exp = negative ? -nb->exp : nb->exp;
    return s;
}

/* floor((d * m + c) / 10) for a digit d and c < m, without overflow (the result is < m). */
static uint64_t times_digit(unsigned d, uint64_t m, uint64_t c)
{
    return d * (m / 10) + c / 10 + (d * (m % 10) + c % 10) / 10;
}

/* *out = floor(number * m * 10^shift); -1 if that is 2^64 or more. */
static int scale(const size_number *nb, uint64_t m, long long shift, uint64_t *out)
{
    const long long n = nb->ni + nb->nf;
    const long long point = nb->ni + nb->exp + shift; /* digits before the decimal point */
    uint64_t whole = 0;
    for (long long i = 0; i < point; i++) {
        const unsigned d = i < n ? digit_at(nb, i) : 0;
        if (whole > (UINT64_MAX - d) / 10) {
            return -1;
        }
        whole = whole * 10 + d;
        if (whole == 0 && i >= n) {
            break; /* only zeros left to append */
        }
    }
    if (whole != 0 && m > UINT64_MAX / whole) {
        return -1;
    }
    /* floor(fraction * m) by long multiplication from the last digit; the zeros between
     * the point and the first digit (point < 0) each divide by ten. */
    uint64_t frac = 0;
    for (long long i = n - 1; i >= (point > 0 ? point : 0); i--) {
        frac = times_digit(digit_at(nb, i), m, frac);
    }
    for (long long z = point; z < 0 && frac != 0; z++) {
        frac /= 10;
    }
    if (frac > UINT64_MAX - whole * m) {
        return -1;
    }
    *out = whole * m + frac;
    return 0;
}

/* The number as a double (to 19 significant digits). */
static double approximate(const size_number *nb)
{
    const long long n = nb->ni + nb->nf;
    long long i = 0;
    while (i < n && digit_at(nb, i) == 0) {
        i++;
    }
    uint64_t m = 0;
    long long used = 0;
    for (; i < n && used < 19; i++, used++) {
        m = m * 10 + digit_at(nb, i);
    }
    const long long e = nb->exp - nb->nf + (n - i);
    return e >= 0 ? (double)m * pow(10.0, (double)e) : (double)m / pow(10.0, (double)-e);
}

static int nonzero(const size_number *nb)
{
    for (long long i = 0; i < nb->ni + nb->nf; i++) {
        if (digit_at(nb, i) != 0) {
            return 1;
        }
    }
    return 0;
}

static int unit_is(const char *s, size_t len, const char *name)
{
    if (strlen(name) != len) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        if (ascii_lower(s[i]) != name[i]) {
            return 0;
        }
    }
    return 1;
}

/* Writes the message into err (if room) and returns -1. */
__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt,
                                                      ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int units_parse_size(const char *text, uint64_t percent_of, uint64_t *bytes, double *percent,
                     char *err, size_t errlen)
{
    if (text == NULL || bytes == NULL) {
        return fail(err, errlen, "size: text or bytes is NULL");
    }
    const char *s = text;
    while (is_blank(*s)) {
        s++;
    }
    size_number nb;
    s = read_number(s, &nb);
    if (s == NULL) {
        return fail(err, errlen, "size '%.200s': expected a number >= 0", text);
    }
    while (is_blank(*s)) {
        s++;
    }
    size_t len = strlen(s);
    while (len > 0 && is_blank(s[len - 1])) {
        len--;
    }
    uint64_t v = 0;
    if (len == 1 && s[0] == '%') {
        if (!nonzero(&nb)) {
            return fail(err, errlen, "size '%.200s': a percentage must be above 0", text);
        }
        if (percent_of == 0 && percent == NULL) {
            return fail(err, errlen, "size '%.200s': a percentage is not accepted here", text);
        }
        /* With percent_of 0 the check still bounds P (P / 100 below 2^64). */
        if (scale(&nb, percent_of != 0 ? percent_of : 1, -2, &v) != 0) {
            return fail(err, errlen, "size '%.200s': 2^64 bytes or more", text);
        }
        *bytes = percent_of != 0 ? v : 0;
        if (percent != NULL) {
            *percent = approximate(&nb);
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (unit_is(s, len, units[i].name)) {
            if (scale(&nb, units[i].factor, 0, &v) != 0) {
                return fail(err, errlen, "size '%.200s': 2^64 bytes or more", text);
            }
            *bytes = v;
            if (percent != NULL) {
                *percent = 0;
            }
            return 0;
        }
    }
    return fail(err, errlen,
                "size '%.200s': unknown unit '%.*s' (expected B, K, M, G, T, KiB, MiB, GiB, "
                "TiB, KB, MB, GB, TB or %%)",
                text, len > 40 ? 40 : (int)len, s);
}
