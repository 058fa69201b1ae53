/* Sizes as text: the grammar of hdmlp-bench's, hdmlp-pack's and the Python module's size
 * arguments. Not part of libhdmlp or its API: loader_units.c needs libc only and is
 * compiled into each program that reads sizes. */
#ifndef HDMLP_LOADER_UNITS_H
#define HDMLP_LOADER_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Parses `text` into *bytes: optional blanks, a number >= 0 (decimal digits with an optional
 * fraction and exponent: "2", "1.5", ".5", "4e9"), optional blanks, a unit, optional blanks.
 * Units, in any case: none or B (bytes); K, M, G, T or KiB, MiB, GiB, TiB (powers of 1024);
 * KB, MB, GB, TB (powers of 1000). Or the number and "%": P% (P > 0) is P percent of
 * `percent_of`. The result is rounded down to whole bytes and must be below 2^64 (and so
 * must P / 100). `percent` is NULL or receives P for a percentage and 0 for a plain size.
 * percent_of 0 with percent NULL refuses percentages; with percent set, a percentage is
 * accepted and *bytes is P% of percent_of (0 if that is 0: a caller that learns the total
 * later applies *percent itself). Returns 0, or -1 with a message naming the text (not a
 * number, unknown unit, 0%, too large) in err (NUL-terminated, at most errlen bytes; err
 * may be NULL), leaving *bytes and *percent as they were. Independent of the locale;
 * thread-safe; text is only read. */
int units_parse_size(const char *text, uint64_t percent_of, uint64_t *bytes, double *percent,
                     char *err, size_t errlen);

#endif
