/*
 * libFuzzer target: the packer's list-file parser (packer/pack_scan_list.c) on arbitrary
 * bytes.
 *
 * Each input is written as a list file into a sandbox directory that also holds a few real
 * files ("a", "b c", "dir/x", "sym" -> a, "dangling" -> nowhere, an empty "e"), so that
 * relative paths in the fuzzed lines can succeed. pack_scan_list() then scans it exactly as
 * `hdmlp-pack --list` does. An independent reading of the same bytes (the rules in
 * packer/packer.h: lines "PATH<TAB>LABEL", one TAB, trailing CR ignored, blank and '#'
 * lines skipped) must agree with what was scanned:
 *   - success: one item per non-skipped line, in order, key = the PATH column byte for
 *     byte, label = the LABEL column, size = the file's size; the label table holds exactly
 *     the distinct LABEL columns; labels finish and the deterministic sort is a permutation;
 *   - failure: a known negative code with a message, and the items added before the failing
 *     line are a prefix of the expected ones; a malformed line is named FILE:LINE.
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
        fprintf(stderr, "fuzz_list: invariant violated: %s (last error: %s)\n", what,
                hdmlp_last_error());
        abort();
    }
}

/* ---- the sandbox ------------------------------------------------------------------------ */

static char fx_root[4096]; /* sandbox directory, with a trailing '/' */
static char fx_list[4200]; /* the list file inside it */

static void fx_file(const char *name, const char *content)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s%s", fx_root, name);
    FILE *const f = fopen(path, "wb");
    check(f != NULL && fputs(content, f) >= 0 && fclose(f) == 0, "fixture file");
}

static void fx_init(void)
{
    if (fx_root[0]) {
        return;
    }
    const char *const dir = fuzz_sandbox("list");
    check(dir != NULL, "mkdtemp");
    snprintf(fx_root, sizeof(fx_root), "%s/", dir);
    snprintf(fx_list, sizeof(fx_list), "%slist", fx_root);
    fx_file("a", "alpha");
    fx_file("b c", "bravo charlie");
    fx_file("e", "");
    char path[4200];
    snprintf(path, sizeof(path), "%sdir", fx_root);
    check(mkdir(path, 0755) == 0, "mkdir");
    fx_file("dir/x", "x-ray!");
    snprintf(path, sizeof(path), "%ssym", fx_root);
    check(symlink("a", path) == 0, "symlink");
    snprintf(path, sizeof(path), "%sdangling", fx_root);
    check(symlink("nowhere", path) == 0, "symlink");
}

/* ---- the independent reading ------------------------------------------------------------ */

typedef struct exp_line {
    const uint8_t *path, *label;
    size_t path_len, label_len;
    uint64_t lineno;
    int wellformed; /* exactly one TAB, both columns non-empty, no NUL */
} exp_line;

/* Splits data into the lines the scanner must consider (skipped ones left out). Returns the
 * count; lines[] has room for n + 1 entries. */
static size_t expected_lines(const uint8_t *data, size_t n, exp_line *lines)
{
    size_t count = 0;
    uint64_t lineno = 0;
    size_t i = 0;
    while (i < n) {
        const uint8_t *const nl = memchr(data + i, '\n', n - i);
        const size_t end = nl ? (size_t)(nl - data) : n;
        const uint8_t *const line = data + i;
        size_t len = end - i;
        i = nl ? end + 1 : n;
        lineno++;
        if (len > 0 && line[len - 1] == '\r') {
            len--;
        }
        int blank = 1;
        for (size_t j = 0; j < len; j++) {
            if (line[j] != ' ' && line[j] != '\t') {
                blank = 0;
                break;
            }
        }
        if (blank || line[0] == '#') {
            continue;
        }
        exp_line *const e = &lines[count++];
        e->lineno = lineno;
        size_t tabs = 0, tab = 0;
        int nul = 0;
        for (size_t j = 0; j < len; j++) {
            if (line[j] == '\t') {
                if (tabs++ == 0) {
                    tab = j;
                }
            } else if (line[j] == '\0') {
                nul = 1;
            }
        }
        e->wellformed = tabs == 1 && tab > 0 && tab + 1 < len && !nul;
        e->path = line;
        e->path_len = tabs ? tab : len;
        e->label = tabs ? line + tab + 1 : line + len;
        e->label_len = tabs ? len - tab - 1 : 0;
    }
    return count;
}

static int known_code(int rc)
{
    return rc < 0 && strcmp(hdmlp_err_name(rc), "HDMLP_E_UNKNOWN") != 0;
}

/* ---- the target ------------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The sort hands over every item once: their scan sequence numbers are 0..n-1. */
static int sorted_seen(void *arg, uint64_t id, uint64_t pos, const pack_item *it,
                       const uint8_t *key)
{
    (void)id;
    (void)pos;
    (void)key;
    uint8_t *const seen = arg;
    check(!seen[it->seq], "sort is not a permutation");
    seen[it->seq] = 1;
    return HDMLP_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fx_init();
    const int fd = open(fx_list, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    check(fd >= 0, "open list");
    check(size == 0 || write(fd, data, size) == (ssize_t)size, "write list");
    check(close(fd) == 0, "close list");

    pack_opts o;
    pack_opts_init(&o);
    pack_src src = {.kind = PACK_SRC_LIST, .arg = fx_list, .root = fx_root};
    src.root_len = strlen(fx_root);
    pack_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.o = &o;
    ctx.srcs = &src;
    ctx.n_srcs = 1;
    ctx.spill_fd = -1;
    ctx.tmpdir = fx_root; /* the item spill files: unlinked at once */
    hd_clear_error();
    const int rc = pack_scan_list(&ctx, 0);
    pack_item *items = NULL;
    pack_buf keys = {0};
    check(fuzz_load_items(&ctx, &items, &keys) == HDMLP_OK, "items read back");

    /* +1: a final line without '\n' */
    exp_line *const lines = malloc((size / 2 + 2) * sizeof(exp_line));
    check(lines != NULL, "malloc");
    const size_t n_lines = expected_lines(data, size, lines);

    check(rc == HDMLP_OK || known_code(rc), "return code");
    check(ctx.n_items <= n_lines, "more items than lines");
    for (uint64_t i = 0; i < ctx.n_items; i++) {
        const pack_item *const it = &items[i];
        const exp_line *const e = &lines[i];
        check(e->wellformed, "item from a malformed line");
        check(it->input == 0 && it->src == 0, "item fields");
        check(it->key_len == e->path_len &&
                  memcmp(keys.p + it->key_off, e->path, e->path_len) == 0,
              "key is not the PATH column verbatim");
        check(it->label < ctx.labels.n, "label id");
        check(ctx.labels.len[it->label] == e->label_len &&
                  memcmp(ctx.labels.names.p + ctx.labels.off[it->label], e->label,
                         e->label_len) == 0,
              "label is not the LABEL column");
    }
    if (rc == HDMLP_OK) {
        check(n_lines > 0 && ctx.n_items == n_lines, "every line is an item");
        /* the label table holds exactly the distinct LABEL columns */
        for (uint32_t l = 0; l < ctx.labels.n; l++) {
            int used = 0;
            for (uint64_t i = 0; i < ctx.n_items && !used; i++) {
                used = items[i].label == l;
            }
            check(used, "label without a sample");
            for (uint32_t m = l + 1; m < ctx.labels.n; m++) {
                check(ctx.labels.len[l] != ctx.labels.len[m] ||
                          memcmp(ctx.labels.names.p + ctx.labels.off[l],
                                 ctx.labels.names.p + ctx.labels.off[m],
                                 ctx.labels.len[l]) != 0,
                      "duplicate label");
            }
        }
        check(pack_labels_finish(&ctx.labels) == HDMLP_OK, "labels finish");
        uint8_t *const seen = calloc((size_t)ctx.n_items, 1);
        check(seen != NULL, "malloc");
        pack_order order;
        pack_order_init(&order, 1, ctx.n_items);
        check(pack_sort_items(&ctx, &order, sorted_seen, seen) == HDMLP_OK, "sort");
        pack_packed_free(&ctx.packed);
        for (uint64_t i = 0; i < ctx.n_items; i++) {
            check(seen[i], "sort is not a permutation");
        }
        free(seen);
    } else {
        check(hdmlp_last_error()[0] != '\0', "error without detail");
        if (strncmp(hdmlp_last_error(), "no samples found in ", 20) == 0) {
            check(rc == HDMLP_E_NOTFOUND && n_lines == 0, "no samples in a list with lines");
        }
        if (ctx.n_items < n_lines && !lines[ctx.n_items].wellformed) {
            /* the first line not taken is malformed: the error names it */
            char where[64];
            snprintf(where, sizeof(where),
                     "list:%llu: ", (unsigned long long)lines[ctx.n_items].lineno);
            check(rc == HDMLP_E_INVAL && strstr(hdmlp_last_error(), where) != NULL,
                  "malformed line not named FILE:LINE");
        }
    }
    free(lines);
    hd_free(items);
    pack_buf_free(&keys);
    pack_items_free(&ctx);
    pack_labels_free(&ctx.labels);
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
    write_seed(argv[1], "simple", "a\tcat\ndir/x\tdog\n");
    write_seed(argv[1], "crlf-comments", "# comment\r\n\r\na\tcat\r\n  \t \nb c\tcat\r\n");
    write_seed(argv[1], "no-final-newline", "e\tempty\nsym\tlink");
    write_seed(argv[1], "dup-keys-labels", "a\tx\na\ty\ndir/x\tx\n./a\t.\ndir/../a\tz z\n");
    write_seed(argv[1], "absolute", "/proc/self/exe\tbin\n");
    write_seed(argv[1], "malformed-two-tabs", "a\tcat\na\tb\tc\n");
    write_seed(argv[1], "malformed-no-label", "a\tcat\nb c\t\n");
    write_seed(argv[1], "not-a-file", "dir\tcat\n");
    write_seed(argv[1], "dangling", "dangling\tcat\n");
    write_seed(argv[1], "missing", "no such file\tcat\n");
    write_seed(argv[1], "only-comments", "# a\n#\tb\n\n");
    return 0;
}
#endif
