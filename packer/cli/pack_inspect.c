/* hdmlp-pack --info / --verify / --extract: through the public API (hdmlp.h) only. */
#include "hdmlp.h"
#include "pack_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fail(const char *path, int code)
{
    const char *const detail = hdmlp_last_error();
    if (*detail && strstr(detail, path)) {
        fprintf(stderr, PACK_CLI_NAME ": %s\n", detail);
    } else {
        fprintf(stderr, PACK_CLI_NAME ": %s: %s\n", path,
                *detail ? detail : hdmlp_strerror(code));
    }
    return 1;
}

static int open_ds(const char *path, hdmlp_dataset **ds)
{
    const int rc = hdmlp_dataset_open(path, ds);
    if (rc != HDMLP_OK) {
        return fail(path, rc);
    }
    return 0;
}

/* Prints bytes that may hold anything: printable ASCII as-is, the rest as \xNN. */
static void put_escaped(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            fputc(c, f);
        } else {
            fprintf(f, "\\x%02x", c);
        }
    }
}

/* The fields: name, type (ndarray: dtype and shape), flags, samples that have it and its
 * bytes; how samples are delivered. 0, or 1 after naming the error. */
static int info_fields(hdmlp_dataset *ds)
{
    static const char *const types[] = {"bytes",   "text",    "json",    "int64",
                                        "float32", "float64", "ndarray", "image"};
    static const char *const dtypes[] = {"",      "uint8",   "int8",    "uint16",
                                         "int16", "uint32",  "int32",   "uint64",
                                         "int64", "float16", "float32", "float64"};
    const uint32_t nf = hdmlp_dataset_field_count(ds);
    hdmlp_field_stats *st = calloc(nf ? nf : 1, sizeof(*st));
    if (st == NULL || hdmlp_dataset_field_stats(ds, st, nf) != HDMLP_OK) {
        fprintf(stderr, PACK_CLI_NAME ": fields: %s\n",
                st == NULL ? "out of memory" : hdmlp_last_error());
        free(st);
        return 1;
    }
    printf("fields        %u, samples delivered as %s\n", nf,
           hdmlp_dataset_field_records(ds) ? "field records" : "their bytes");
    for (uint32_t f = 0; f < nf; f++) {
        hdmlp_field_info in;
        hdmlp_dataset_field(ds, f, &in);
        char h[32];
        printf("  %-12.*s  %-8s", (int)in.name_size, in.name,
               in.type < 8 ? types[in.type] : "unknown");
        if (in.type == HDMLP_FIELD_NDARRAY) {
            printf(" %s[", in.dtype < 12 ? dtypes[in.dtype] : "?");
            for (uint32_t d = 0; d < in.ndim; d++) {
                printf(in.shape[d] ? "%s%u" : "%s*", d ? "," : "", in.shape[d]);
            }
            printf("]");
        }
        printf("%s%s  %llu samples, %s raw\n", in.is_label ? "  label" : "",
               in.required ? "  required" : "", (unsigned long long)st[f].present,
               pack_human_bytes(st[f].raw_bytes, h, sizeof(h)));
    }
    free(st);
    return 0;
}

int pack_cmd_info(const char *path)
{
    hdmlp_dataset *ds;
    if (open_ds(path, &ds)) {
        return 1;
    }
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    const uint32_t n_labels = hdmlp_dataset_label_count(ds);
    uint64_t *const per_label = calloc(n_labels ? n_labels : 1, sizeof(uint64_t));
    if (!per_label) {
        hdmlp_dataset_close(ds);
        fprintf(stderr, PACK_CLI_NAME ": out of memory\n");
        return 1;
    }
    uint64_t codecs[4] = {0, 0, 0, 0}; /* none, zstd, zstd+dict, field records */
    for (uint64_t i = 0; i < n; i++) {
        hdmlp_sample_info si;
        if (hdmlp_dataset_sample_info(ds, i, &si) == HDMLP_OK) {
            per_label[si.label < n_labels ? si.label : 0]++;
            codecs[si.codec < 3 ? si.codec : 3]++;
        }
    }
    const uint64_t raw = hdmlp_dataset_raw_bytes(ds);
    const uint64_t stored = hdmlp_dataset_stored_bytes(ds);
    char h1[32], h2[32];
    printf("dataset       %s\n", path);
    printf("samples       %llu\n", (unsigned long long)n);
    printf("chunk size    %u\n", hdmlp_dataset_chunk_size(ds));
    printf("chunks        %llu\n", (unsigned long long)hdmlp_dataset_chunk_count(ds));
    printf("segments      %u\n", hdmlp_dataset_segment_count(ds));
    printf("raw bytes     %llu (%s)\n", (unsigned long long)raw,
           pack_human_bytes(raw, h1, sizeof(h1)));
    printf("stored bytes  %llu (%s), ratio %.3f\n", (unsigned long long)stored,
           pack_human_bytes(stored, h2, sizeof(h2)),
           stored ? (double)raw / (double)stored : 1.0);
    if (codecs[3] != 0) {
        printf("codecs        per value (%llu samples with fields)\n",
               (unsigned long long)codecs[3]);
    } else {
        printf("codecs        none %llu, zstd %llu, zstd+dict %llu\n",
               (unsigned long long)codecs[0], (unsigned long long)codecs[1],
               (unsigned long long)codecs[2]);
    }
    printf("dictionary    %llu bytes\n", (unsigned long long)hdmlp_dataset_dict_size(ds));
    printf("seed          %llu\n", (unsigned long long)hdmlp_dataset_seed(ds));
    {
        const uint64_t created = hdmlp_dataset_created(ds);
        char when[64] = "?";
        const time_t t = (time_t)created;
        struct tm tm;
        if (gmtime_r(&t, &tm)) {
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        }
        printf("created       %s (%llu)\n", when, (unsigned long long)created);
    }
    pack_info_images(ds);
    if (info_fields(ds) != 0) {
        free(per_label);
        hdmlp_dataset_close(ds);
        return 1;
    }
    printf("labels        %u\n", n_labels);
    for (uint32_t l = 0; l < n_labels; l++) {
        size_t len = 0;
        const char *const name = hdmlp_dataset_label_name(ds, l, &len);
        printf("  %6u  %12llu  ", l, (unsigned long long)per_label[l]);
        put_escaped(stdout, name ? name : "", name ? len : 0);
        putchar('\n');
    }
    free(per_label);
    hdmlp_dataset_close(ds);
    if (fflush(stdout) != 0) {
        fprintf(stderr, PACK_CLI_NAME ": cannot write to standard output: %s\n",
                strerror(errno));
        return 1;
    }
    return 0;
}

static void verify_progress(void *arg, uint64_t done, uint64_t total)
{
    pack_bar_verify(arg, done, total);
}

int pack_cmd_verify(const char *path, int progress)
{
    hdmlp_dataset *ds;
    if (open_ds(path, &ds)) {
        return 1;
    }
    pack_bar bar;
    pack_bar_init(&bar, progress);
    const int rc = hdmlp_dataset_verify(ds, verify_progress, &bar);
    pack_bar_clear(&bar);
    int ret = 0;
    if (rc != HDMLP_OK) {
        ret = fail(path, rc);
    } else {
        printf("OK\n");
    }
    hdmlp_dataset_close(ds);
    return ret;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        const ssize_t r = write(fd, p, n);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Finds the sample: a decimal string is a sample index, anything else a key. */
static int find_sample(hdmlp_dataset *ds, const char *path, const char *what, uint64_t *index)
{
    const size_t len = strlen(what);
    const int decimal = len > 0 && strspn(what, "0123456789") == len;
    if (!decimal) {
        if (hdmlp_dataset_find_key(ds, what, len, index) != HDMLP_OK) {
            fprintf(stderr, PACK_CLI_NAME ": %s: no sample with key '%s'\n", path, what);
            return 1;
        }
        return 0;
    }
    errno = 0;
    char *end;
    const unsigned long long v = strtoull(what, &end, 10);
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    if (errno != 0 || *end != '\0' || v >= n) {
        fprintf(stderr, PACK_CLI_NAME ": %s: sample index %s out of range (%llu samples)\n",
                path, what, (unsigned long long)n);
        return 1;
    }
    *index = v;
    return 0;
}

/* An ndarray value (each varying dim's size as u64, then the elements) as an .npy file
 * (format 1.0: C order, little-endian) into buf (cap bytes, at least 128): its header's
 * length, the elements following the value's sizes at *elems (*n_elems bytes). 0 when the
 * value does not fill its shape. */
static size_t npy_header(const hdmlp_field_info *in, const unsigned char *v, size_t size,
                         char *buf, size_t cap, const unsigned char **elems, size_t *n_elems)
{
    static const char *const descr[] = {"",    "|u1", "|i1", "<u2", "<i2", "<u4",
                                        "<i4", "<u8", "<i8", "<f2", "<f4", "<f8"};
    static const unsigned item[] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 4, 8};
    if (in->dtype == 0 || in->dtype >= sizeof(item) / sizeof(item[0]) || in->ndim > 4) {
        return 0;
    }
    char shape[128] = "";
    size_t at = 0, sl = 0;
    uint64_t count = 1;
    for (uint32_t d = 0; d < in->ndim; d++) {
        uint64_t dim = in->shape[d];
        if (dim == 0) {
            if (size - at < 8) {
                return 0;
            }
            dim = 0;
            for (int b = 7; b >= 0; b--) {
                dim = dim << 8 | v[at + (size_t)b];
            }
            at += 8;
        }
        count = dim != 0 && count > UINT64_MAX / dim ? UINT64_MAX : count * dim;
        sl +=
            (size_t)snprintf(shape + sl, sizeof(shape) - sl, "%llu%s", (unsigned long long)dim,
                             in->ndim == 1      ? ","
                             : d + 1 < in->ndim ? ", "
                                                : "");
    }
    if (count > (size - at) / item[in->dtype] || count * item[in->dtype] != size - at) {
        return 0;
    }
    int hl =
        snprintf(buf + 10, cap - 10, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                 descr[in->dtype], shape);
    while ((10 + (size_t)hl + 1) % 64 != 0) {
        buf[10 + hl++] = ' ';
    }
    buf[10 + hl++] = '\n';
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(hl & 0xFF);
    buf[9] = (char)(hl >> 8);
    *elems = v + at;
    *n_elems = size - at;
    return 10 + (size_t)hl;
}

/* A sample with fields (its field record at buf): each present field into OUT.NAME (a
 * stored value's bytes; an ndarray as an .npy file; an int64 or float as decimal text and a
 * newline), naming each file on standard output. 0, or 1 after naming the error. */
static int extract_fields(hdmlp_dataset *ds, const char *path, const unsigned char *buf,
                          size_t size, const char *out)
{
    if (out == NULL) {
        fprintf(stderr,
                PACK_CLI_NAME ": %s: samples have fields: --extract writes each into "
                              "PREFIX.FIELD, give -o PREFIX\n",
                path);
        return 1;
    }
    for (uint32_t f = 0; f < hdmlp_dataset_field_count(ds); f++) {
        hdmlp_field_info in;
        hdmlp_field_value v;
        if (hdmlp_dataset_field(ds, f, &in) != HDMLP_OK ||
            hdmlp_sample_field(buf, size, f, &v) != HDMLP_OK) {
            fprintf(stderr, PACK_CLI_NAME ": %s: field %u: %s\n", path, f, hdmlp_last_error());
            return 1;
        }
        if (!v.present) {
            continue;
        }
        char name[4096], text[64];
        snprintf(name, sizeof(name), "%s.%.*s", out, (int)in.name_size, in.name);
        const void *data = v.data;
        size_t len = (size_t)v.size, head_len = 0;
        char head[256];
        if (in.type == HDMLP_FIELD_NDARRAY) {
            const unsigned char *elems = NULL;
            head_len =
                npy_header(&in, v.data, (size_t)v.size, head, sizeof(head), &elems, &len);
            if (head_len == 0) {
                fprintf(stderr,
                        PACK_CLI_NAME ": %s: field %.*s: an ndarray value of %llu bytes that "
                                      "its shape does not fill\n",
                        path, (int)in.name_size, in.name, (unsigned long long)v.size);
                return 1;
            }
            data = elems;
        } else if (in.type == HDMLP_FIELD_INT64) {
            len = (size_t)snprintf(text, sizeof(text), "%lld\n", (long long)v.i64);
            data = text;
        } else if (in.type == HDMLP_FIELD_FLOAT32 || in.type == HDMLP_FIELD_FLOAT64) {
            len = (size_t)snprintf(text, sizeof(text), "%.17g\n", v.f64);
            data = text;
        }
        const int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd < 0 || write_all(fd, (const unsigned char *)head, head_len) != 0 ||
            write_all(fd, data, len) != 0 || close(fd) != 0) {
            fprintf(stderr, PACK_CLI_NAME ": cannot write %s: %s\n", name, strerror(errno));
            return 1;
        }
        printf("%s\n", name);
    }
    return 0;
}

int pack_cmd_extract(const char *path, const char *what, const char *out_file)
{
    hdmlp_dataset *ds;
    if (open_ds(path, &ds)) {
        return 1;
    }
    uint64_t index = 0;
    hdmlp_sample_info si;
    if (find_sample(ds, path, what, &index) != 0) {
        hdmlp_dataset_close(ds);
        return 1;
    }
    int rc = hdmlp_dataset_sample_info(ds, index, &si);
    if (rc != HDMLP_OK || si.raw_size > SIZE_MAX) {
        hdmlp_dataset_close(ds);
        return fail(path, rc);
    }
    unsigned char *const buf = malloc(si.raw_size ? (size_t)si.raw_size : 1);
    if (!buf) {
        hdmlp_dataset_close(ds);
        fprintf(stderr, PACK_CLI_NAME ": out of memory (%llu bytes)\n",
                (unsigned long long)si.raw_size);
        return 1;
    }
    size_t size = 0;
    rc = hdmlp_dataset_read_sample(ds, index, buf, (size_t)si.raw_size, &size);
    int ret = 0;
    if (rc != HDMLP_OK) {
        ret = fail(path, rc);
    } else if (hdmlp_dataset_field_records(ds)) {
        ret = extract_fields(ds, path, buf, size, out_file);
    } else {
        const int fd = out_file ? open(out_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)
                                : STDOUT_FILENO;
        if (fd < 0 || write_all(fd, buf, size) != 0 || (out_file && close(fd) != 0)) {
            fprintf(stderr, PACK_CLI_NAME ": cannot write %s: %s\n",
                    out_file ? out_file : "standard output", strerror(errno));
            ret = 1;
        }
    }
    free(buf);
    hdmlp_dataset_close(ds);
    return ret;
}
