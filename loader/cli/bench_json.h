/*
 * Minimal JSON writer for hdmlp-bench: one object on one line, written to a FILE.
 * Not thread-safe; one writer per object. Nesting depth at most BENCH_JSON_DEPTH.
 */
#ifndef HDMLP_BENCH_JSON_H
#define HDMLP_BENCH_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_JSON_DEPTH 8

typedef struct bench_json {
    FILE *f;
    int depth;
    int first[BENCH_JSON_DEPTH]; /* no member written yet at this depth */
} bench_json;

/* Writes "{" and starts the top-level object. */
void bench_json_begin(bench_json *j, FILE *f);
/* Starts a nested object member `key` (ends with bench_json_end). */
void bench_json_object(bench_json *j, const char *key);
/* Ends the innermost object; after the top level also writes a newline. */
void bench_json_end(bench_json *j);
/* Starts an array member `key` whose elements are objects (bench_json_element), and ends
 * it (after the last element's bench_json_end). */
void bench_json_array(bench_json *j, const char *key);
void bench_json_element(bench_json *j);
void bench_json_array_end(bench_json *j);

void bench_json_u64(bench_json *j, const char *key, uint64_t v);
/* Non-finite values are written as null. */
void bench_json_double(bench_json *j, const char *key, double v);
void bench_json_bool(bench_json *j, const char *key, int v);
/* NULL is written as null; other bytes are escaped as JSON requires. */
void bench_json_string(bench_json *j, const char *key, const char *s);
void bench_json_u64_array(bench_json *j, const char *key, const uint64_t *v, size_t n);
void bench_json_double_array(bench_json *j, const char *key, const double *v, size_t n);

#endif
