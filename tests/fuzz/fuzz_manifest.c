/*
 * libFuzzer target: the packer's manifest parsers (packer/pack_scan_manifest.c: JSONL and
 * CSV) and the value conversions behind them (packer/pack_fields.c: .npy headers, JSON
 * strings, numbers) on arbitrary bytes.
 *
 * The input's first byte picks the form (even: JSONL, odd: CSV); the rest is written as
 * SANDBOX/m.jsonl or SANDBOX/m.csv beside a few files a path column may name ("a.png", a
 * valid "v.npy" of float32 rows, "w.npy" of int16, a "bad.npy" that is none, a directory
 * "dir"). pack_scan_manifest() scans it as `hdmlp-pack --manifest --file-fields image,arr`
 * does. Checks:
 *   - a known code; a failure has a message;
 *   - after a scan that succeeds (a failed one's spill is not flushed: the pack stops),
 *     every item is a sample with fields: its spilled bytes end with a trailer naming
 *     registered fields, once each, whose sizes add up; pack_fields_finish types every
 *     field and every value converts (pack_fields_value): what the scan accepted, the
 *     writer stores.
 * The whole input also goes through pack_npy_parse and pack_json_unescape, which must not
 * read or write outside their buffers (ASan).
 *
 * Built with -DFUZZ_GEN_CORPUS instead of -fsanitize=fuzzer, main() writes the seed corpus
 * into the directory given as argv[1] (see run.sh --gen-corpus). Built with neither, it is
 * a plain object for tests/fuzz/fuzz_replay.c (the regression replay under ctest).
 */
#include "fuzz_items.h"
#include "fuzz_sandbox.h"
#include "pack_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_manifest: invariant violated: %s (last error: %s)\n", what,
                hdmlp_last_error());
        abort();
    }
}

/* ---- the sandbox ------------------------------------------------------------------------ */

static char fx_root[4096]; /* with a trailing '/' */

static void fx_file(const char *name, const void *content, size_t n)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s%s", fx_root, name);
    FILE *const f = fopen(path, "wb");
    check(f != NULL && fwrite(content, 1, n, f) == n && fclose(f) == 0, "fixture file");
}

/* An .npy file of a C-ordered little-endian array: descr, shape text and data bytes. */
static void fx_npy(const char *name, const char *descr, const char *shape, size_t data)
{
    char head[128];
    int hl = snprintf(head, sizeof(head),
                      "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    while ((10 + hl + 1) % 64 != 0) {
        head[hl++] = ' ';
    }
    head[hl++] = '\n';
    uint8_t buf[512] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)hl, 0};
    memcpy(buf + 10, head, (size_t)hl);
    for (size_t i = 0; i < data; i++) {
        buf[10 + hl + i] = (uint8_t)i;
    }
    fx_file(name, buf, 10 + (size_t)hl + data);
}

static void fx_init(void)
{
    if (fx_root[0]) {
        return;
    }
    const char *const dir = fuzz_sandbox("manifest");
    check(dir != NULL, "mkdtemp");
    snprintf(fx_root, sizeof(fx_root), "%s/", dir);
    fx_file("a.png", "\x89PNG not really", 15);
    fx_npy("v.npy", "<f4", "(2, 3)", 24);
    fx_npy("w.npy", "<i2", "(4,)", 8);
    fx_file("bad.npy", "\x93NUMPY\x01\x00\xff\xff{", 11);
    char sub[4200];
    snprintf(sub, sizeof(sub), "%sdir", fx_root);
    check(mkdir(sub, 0755) == 0, "mkdir");
}

static int known_code(int rc)
{
    return rc < 0 && strcmp(hdmlp_err_name(rc), "HDMLP_E_UNKNOWN") != 0;
}

/* ---- the target ------------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Item it's spilled bytes: a trailer naming registered fields, and every value stored as the
 * writer would (after pack_fields_finish). */
static void check_item(const pack_ctx *ctx, const pack_item *it)
{
    uint8_t *buf = malloc(it->size ? (size_t)it->size : 1);
    check(buf != NULL, "malloc");
    check(pread(ctx->spill_fd, buf, (size_t)it->size, (off_t)it->src) == (ssize_t)it->size,
          "spill read");
    pack_field_val v[PACK_MAX_FIELDS];
    uint32_t n = 0;
    check(pack_fields_parse(buf, it->size, v, &n) == HDMLP_OK, "trailer");
    check(n > 0, "a sample without values");
    uint64_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        check(v[i].field < ctx->fields.n, "value of an unregistered field");
        for (uint32_t j = 0; j < i; j++) {
            check(v[j].field != v[i].field, "two values of one field");
        }
        uint8_t *out = malloc((size_t)v[i].size + PACK_FIELD_VALUE_EXTRA);
        check(out != NULL, "malloc");
        uint64_t len = 0;
        fmt_value scalar;
        check(pack_fields_value(&ctx->fields, v[i].field, buf + at, v[i].size, out, &len,
                                &scalar) == HDMLP_OK,
              "a value the scan accepted does not convert");
        check(len <= v[i].size + PACK_FIELD_VALUE_EXTRA, "converted value overruns");
        free(out);
        at += v[i].size;
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fx_init();
    /* the raw converters on the whole input */
    pack_npy npy;
    (void)pack_npy_parse(data, size, size, &npy);
    uint8_t *un = malloc(size ? size : 1);
    check(un != NULL, "malloc");
    const size_t ul = pack_json_unescape(data, size, un);
    check(ul == SIZE_MAX || ul <= size, "unescape grew");
    free(un);

    const int csv = size > 0 && (data[0] & 1);
    char path[4200];
    snprintf(path, sizeof(path), "%sm.%s", fx_root, csv ? "csv" : "jsonl");
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    check(fd >= 0, "open manifest");
    check(size <= 1 || write(fd, data + 1, size - 1) == (ssize_t)(size - 1), "write manifest");
    check(close(fd) == 0, "close manifest");

    pack_opts o;
    pack_opts_init(&o);
    o.file_fields = "image,arr";
    pack_src src = {.kind = PACK_SRC_MANIFEST, .arg = path, .root = fx_root};
    src.root_len = strlen(fx_root);
    pack_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.o = &o;
    ctx.srcs = &src;
    ctx.n_srcs = 1;
    ctx.spill_fd = -1;
    ctx.tmpdir = fx_root;
    ctx.manifests = 1;
    ctx.label_names_numeric = 1;
    hd_clear_error();
    const int rc = pack_scan_manifest(&ctx, 0);
    check(rc == HDMLP_OK || known_code(rc), "return code");
    check(rc == HDMLP_OK || hdmlp_last_error()[0] != '\0', "error without detail");
    pack_item *items = NULL;
    pack_buf keys = {0};
    check(fuzz_load_items(&ctx, &items, &keys) == HDMLP_OK, "items read back");
    if (rc == HDMLP_OK) {
        check(ctx.n_items > 0, "success without samples");
        snprintf(ctx.fields.label_name, sizeof(ctx.fields.label_name), "%s",
                 ctx.labelled_manifests ? "label" : "");
        pack_fields_finish(&ctx.fields);
    }
    for (uint64_t i = 0; rc == HDMLP_OK && i < ctx.n_items; i++) {
        check(items[i].input == 0, "item input");
        check_item(&ctx, &items[i]);
    }
    hd_free(items);
    pack_buf_free(&keys);
    if (ctx.spill_fd >= 0) {
        close(ctx.spill_fd);
    }
    pack_items_free(&ctx);
    pack_labels_free(&ctx.labels);
    pack_fields_free(&ctx.fields);
    return 0;
}

#ifdef FUZZ_GEN_CORPUS
static void write_seed(const char *dir, const char *name, const char *body)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *const f = fopen(path, "wb");
    check(f != NULL && fputs(body, f) >= 0 && fclose(f) == 0, "write seed");
}

int main(int argc, char **argv)
{
    check(argc == 2, "usage: gen DIR");
    write_seed(
        argv[1], "jsonl",
        "J{\"__key__\": \"k1\", \"image\": \"a.png\", \"label\": 3, \"caption\": "
        "\"caf\\u00e9 \\\"x\\\"\", \"meta\": {\"a\": [1, 2.5, null, true]}, \"s\": -1.5e3, "
        "\"arr\": \"v.npy\"}\n"
        "{\"image\": \"a.png\", \"label\": 0, \"caption\": null, \"s\": 7, \"arr\": "
        "\"v.npy\", \"meta\": []}\n# comment\n\n");
    write_seed(
        argv[1], "jsonl-errors",
        "J{\"image\": \"a.png\", \"label\": 1}\n{\"image\": \"bad.npy\", \"label\": 2,}\n"
        "{\"arr\": \"w.npy\", \"label\": 1}\n{\"image\": \"dir\"}\n");
    write_seed(
        argv[1], "jsonl-surrogates",
        "J{\"t\": \"\\ud83d\\ude00 \\ud800\", \"label\": \"x\"}\n{\"t\": \"\\u0041\"}\n");
    write_seed(argv[1], "csv",
               "Cimage,caption,label,n,x\na.png,\"a, \"\"quoted\"\"\nline\",cat,1,2.5\n"
               "a.png,,dog,3,-4\n");
    write_seed(argv[1], "csv-errors", "Cimage,label\na.png,cat,extra\n\"open quote,dog\n");
    return 0;
}
#endif
