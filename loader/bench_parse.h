/* Strict parsers for hdmlp-bench's option values. */
#ifndef HDMLP_BENCH_PARSE_H
#define HDMLP_BENCH_PARSE_H

#include <stdint.h>

/* Decimal unsigned integer, the whole string, no sign. Returns 0 on success, -1 if not. */
int bench_parse_u64(const char *s, uint64_t *out);
/* Finite decimal number >= 0, the whole string. Returns 0 on success, -1 if not. */
int bench_parse_double(const char *s, double *out);
/*
 * A size: a number >= 0 (decimals allowed) with an optional suffix, as dd(1) reads them:
 * K, M, G, T (also KiB, MiB, GiB, TiB) are powers of 1024; KB, MB, GB, TB powers of 1000;
 * B or none is bytes. Case-insensitive. With allow_percent, "P%" sets *percent = 1 and
 * *out = 0 and *pct = P (0 < P); otherwise *percent = 0 and *out is the byte count
 * (rounded down, at most 2^63). Returns 0 on success, -1 if malformed or out of range.
 */
int bench_parse_size(const char *s, int allow_percent, uint64_t *out, int *percent,
                     double *pct);

#endif
