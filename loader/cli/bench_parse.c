/* Strict parsers for hdmlp-bench's option values (see bench_parse.h). */
#include "bench_parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

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

int bench_parse_double(const char *s, double *out)
{
    char *end = NULL;

    if (s == NULL || !(isdigit((unsigned char)s[0]) || s[0] == '.')) {
        return -1;
    }
    errno = 0;
    const double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0) {
        return -1;
    }
    *out = v;
    return 0;
}
