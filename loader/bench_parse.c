/* Strict parsers for hdmlp-bench's option values (see bench_parse.h). */
#include "bench_parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

int bench_parse_u64(const char *s, uint64_t *out)
{
    char *end = NULL;

    if (s == NULL || !isdigit((unsigned char)s[0])) {
        return -1;
    }
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* Parses the leading number of s (digits, optional fraction); *end gets the rest. */
static int leading_number(const char *s, double *out, char **end)
{
    if (s == NULL || !(isdigit((unsigned char)s[0]) || s[0] == '.')) {
        return -1;
    }
    errno = 0;
    const double v = strtod(s, end);
    if (errno != 0 || *end == s || !isfinite(v) || v < 0) {
        return -1;
    }
    *out = v;
    return 0;
}

int bench_parse_double(const char *s, double *out)
{
    char *end = NULL;
    double v = 0;

    if (leading_number(s, &v, &end) != 0 || *end != '\0') {
        return -1;
    }
    *out = v;
    return 0;
}

static const struct {
    const char *suffix;
    double factor;
} units[] = {
    {"", 1.0},
    {"b", 1.0},
    {"k", 1024.0},
    {"kib", 1024.0},
    {"kb", 1e3},
    {"m", 1048576.0},
    {"mib", 1048576.0},
    {"mb", 1e6},
    {"g", 1073741824.0},
    {"gib", 1073741824.0},
    {"gb", 1e9},
    {"t", 1099511627776.0},
    {"tib", 1099511627776.0},
    {"tb", 1e12},
};

int bench_parse_size(const char *s, int allow_percent, uint64_t *out, int *percent, double *pct)
{
    char *end = NULL;
    double v = 0;

    if (leading_number(s, &v, &end) != 0) {
        return -1;
    }
    if (end[0] == '%' && end[1] == '\0') {
        if (!allow_percent || v <= 0) {
            return -1;
        }
        *percent = 1;
        *pct = v;
        *out = 0;
        return 0;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].suffix) == 0) {
            const double bytes = floor(v * units[i].factor);
            if (bytes > 9223372036854775808.0) {
                return -1;
            }
            *percent = 0;
            *out = (uint64_t)bytes;
            return 0;
        }
    }
    return -1;
}
