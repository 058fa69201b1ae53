/* Strict parsers for hdmlp-bench's option values. */
#ifndef HDMLP_BENCH_PARSE_H
#define HDMLP_BENCH_PARSE_H

#include <stdint.h>

/* Decimal unsigned integer, the whole string, no sign. Returns 0 on success, -1 if not. */
int bench_parse_u64(const char *s, uint64_t *out);
/* Finite decimal number >= 0, the whole string. Returns 0 on success, -1 if not. */
int bench_parse_double(const char *s, double *out);
/* Sizes ("256M", "25%") are read by units_parse_size (loader_units.h). */

#endif
