/* Minimal JSON writer for hdmlp-bench (see bench_json.h). */
#include "bench_json.h"

#include <inttypes.h>
#include <math.h>

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\') {
            fputc('\\', f);
            fputc(*p, f);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", (unsigned)*p);
        } else {
            fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void put_key(bench_json *j, const char *key)
{
    if (!j->first[j->depth]) {
        fputs(", ", j->f);
    }
    j->first[j->depth] = 0;
    put_string(j->f, key);
    fputs(": ", j->f);
}

static void put_double(FILE *f, double v)
{
    if (isfinite(v)) {
        fprintf(f, "%.10g", v);
    } else {
        fputs("null", f);
    }
}

static void push(bench_json *j)
{
    if (j->depth + 1 < BENCH_JSON_DEPTH) {
        j->depth++;
    }
    j->first[j->depth] = 1;
}

void bench_json_begin(bench_json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->first[0] = 1;
    fputc('{', f);
}

void bench_json_object(bench_json *j, const char *key)
{
    put_key(j, key);
    fputc('{', j->f);
    push(j);
}

void bench_json_end(bench_json *j)
{
    fputc('}', j->f);
    if (j->depth == 0) {
        fputc('\n', j->f);
    } else {
        j->depth--;
    }
}

void bench_json_array(bench_json *j, const char *key)
{
    put_key(j, key);
    fputc('[', j->f);
    push(j);
}

void bench_json_element(bench_json *j)
{
    if (!j->first[j->depth]) {
        fputs(", ", j->f);
    }
    j->first[j->depth] = 0;
    fputc('{', j->f);
    push(j);
}

void bench_json_array_end(bench_json *j)
{
    fputc(']', j->f);
    if (j->depth > 0) {
        j->depth--;
    }
}

void bench_json_u64(bench_json *j, const char *key, uint64_t v)
{
    put_key(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void bench_json_double(bench_json *j, const char *key, double v)
{
    put_key(j, key);
    put_double(j->f, v);
}

void bench_json_bool(bench_json *j, const char *key, int v)
{
    put_key(j, key);
    fputs(v ? "true" : "false", j->f);
}

void bench_json_string(bench_json *j, const char *key, const char *s)
{
    put_key(j, key);
    if (s == NULL) {
        fputs("null", j->f);
    } else {
        put_string(j->f, s);
    }
}

void bench_json_u64_array(bench_json *j, const char *key, const uint64_t *v, size_t n)
{
    put_key(j, key);
    fputc('[', j->f);
    for (size_t i = 0; i < n; i++) {
        fprintf(j->f, i == 0 ? "%" PRIu64 : ", %" PRIu64, v[i]);
    }
    fputc(']', j->f);
}

void bench_json_double_array(bench_json *j, const char *key, const double *v, size_t n)
{
    put_key(j, key);
    fputc('[', j->f);
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            fputs(", ", j->f);
        }
        put_double(j->f, v[i]);
    }
    fputc(']', j->f);
}
