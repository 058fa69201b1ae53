/*
 * libFuzzer target: archive ingestion (packer/pack_scan_archive.c + pack_spill.c) of
 * hostile archives.
 *
 * Each input is written to SANDBOX/in and scanned by pack_scan_archive() as `hdmlp-pack
 * ARCHIVE` does, spilling member bytes into SANDBOX/tmp (the temporary output directory).
 * The scan runs with SANDBOX/cwd as the working directory, so a member name used as a
 * relative path ("x", "../x") would land in the sandbox. Checks:
 *   - nothing is written outside the temporary directory: afterwards SANDBOX holds exactly
 *     in, tmp and cwd, cwd is empty, and tmp is empty (the spill file is unlinked at once);
 *   - keys are stored verbatim: a second, independent libarchive pass over the same file
 *     lists the members; on success every regular member and hard link is an item, in
 *     archive order, with its stored name as the key byte for byte, the label its first
 *     component after leading "/" and "./" (packer.h), and its bytes in the spill file
 *     equal to the member's data (a hard link: its target's), then the symbolic link
 *     members that resolved, each with its own name and the bytes of a member; on failure
 *     a known code with a message, and the items added before it are a subsequence of the
 *     members, in order (a prefix, except that hard links are resolved after the stream).
 * Each input is scanned twice: as above, then as a WebDataset shard (--webdataset: key
 * groups, pack_wds.c) with every check but the member-by-member one.
 * A decompression bomb is stopped through the cancel callback once the spill passes 64 MiB
 * or 100k items (HDMLP_E_INTERRUPTED, the path a user's Ctrl-C takes).
 *
 * Built with -DFUZZ_GEN_CORPUS instead of -fsanitize=fuzzer, main() writes the seed corpus
 * (tar, pax, gnutar, cpio, zip, 7z, gz/zstd/xz-compressed tar; with directories, symlinks,
 * hard links, "../" and "/" names) into the directory given as argv[1] (see run.sh
 * --gen-corpus). Built with neither, it is a plain object for tests/fuzz/fuzz_replay.c.
 */
#include "fuzz_items.h"
#include "fuzz_sandbox.h"
#include "pack_internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPILL_CAP (64ull << 20)
#define ITEM_CAP 100000u
#define BLOCK (1u << 20) /* as pack_scan_archive.c */

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_archive: invariant violated: %s (last error: %s)\n", what,
                hdmlp_last_error());
        abort();
    }
}

/* ---- the sandbox ------------------------------------------------------------------------ */

static char fx_root[4096];
static char fx_in[4200], fx_tmp[4200], fx_cwd[4200];

static void fx_init(void)
{
    if (fx_root[0]) {
        return;
    }
    const char *const dir = fuzz_sandbox("archive");
    check(dir != NULL, "mkdtemp");
    snprintf(fx_root, sizeof(fx_root), "%s", dir);
    snprintf(fx_in, sizeof(fx_in), "%s/in", fx_root);
    snprintf(fx_tmp, sizeof(fx_tmp), "%s/tmp", fx_root);
    snprintf(fx_cwd, sizeof(fx_cwd), "%s/cwd", fx_root);
    check(mkdir(fx_tmp, 0755) == 0 && mkdir(fx_cwd, 0755) == 0, "mkdir");
}

/* Entries of dir except "." and ".."; names[] gets up to 8 of them. */
static int list_dir(const char *dir, char names[8][256])
{
    DIR *const d = opendir(dir);
    check(d != NULL, "opendir");
    int n = 0;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        if (n < 8) {
            snprintf(names[n], 256, "%s", de->d_name);
        }
        n++;
    }
    closedir(d);
    return n;
}

static void check_sandbox(void)
{
    char names[8][256];
    const int n = list_dir(fx_root, names);
    int in = 0, tmp = 0, cwd = 0;
    for (int i = 0; i < n && i < 8; i++) {
        in += strcmp(names[i], "in") == 0;
        tmp += strcmp(names[i], "tmp") == 0;
        cwd += strcmp(names[i], "cwd") == 0;
    }
    check(n == 3 && in && tmp && cwd, "something was written into the sandbox");
    check(list_dir(fx_cwd, names) == 0, "something was written into the working directory");
    check(list_dir(fx_tmp, names) == 0, "a file remains in the temporary directory");
}

/* ---- the scan --------------------------------------------------------------------------- */

static int bomb_cancel(void *arg)
{
    const pack_ctx *const ctx = arg;
    if (ctx->n_items > ITEM_CAP) {
        return 1;
    }
    struct stat st;
    return ctx->spill_fd >= 0 && fstat(ctx->spill_fd, &st) == 0 &&
           (uint64_t)st.st_size > SPILL_CAP;
}

static int known_code(int rc)
{
    return rc < 0 && strcmp(hdmlp_err_name(rc), "HDMLP_E_UNKNOWN") != 0;
}

/* The label packer.h promises for a member name. */
static void expected_label(const char *name, size_t len, const char **lab, size_t *lab_len)
{
    size_t i = 0;
    while (i < len) {
        if (name[i] == '/') {
            i++;
        } else if (i + 1 < len && name[i] == '.' && name[i + 1] == '/') {
            i += 2;
        } else {
            break;
        }
    }
    const char *const slash = memchr(name + i, '/', len - i);
    if (!slash) {
        *lab = ".";
        *lab_len = 1;
    } else {
        *lab = name + i;
        *lab_len = (size_t)(slash - (name + i));
    }
}

static struct archive *reader(void)
{
    /* the formats and filters pack_scan_archive.c enables */
    struct archive *const a = archive_read_new();
    check(a != NULL, "archive_read_new");
    archive_read_support_filter_all(a);
    archive_read_support_format_tar(a);
    archive_read_support_format_gnutar(a);
    archive_read_support_format_cpio(a);
    archive_read_support_format_zip(a);
    archive_read_support_format_7zip(a);
    archive_read_support_format_rar(a);
    archive_read_support_format_rar5(a);
    archive_read_support_format_iso9660(a);
    archive_read_support_format_ar(a);
    archive_read_support_format_empty(a);
    return a;
}

/* The items read back (fuzz_items.h), in scan order. */
static pack_item *fx_items;
static pack_buf fx_keys;

static const char *item_key(const pack_ctx *ctx, const pack_item *it)
{
    (void)ctx;
    return it->key_len ? (const char *)fx_keys.p + it->key_off : "";
}

/* Compares the member's data (read from a) with the spill bytes of item `it`. */
static void check_data(struct archive *a, const pack_ctx *ctx, const pack_item *it)
{
    static uint8_t buf[BLOCK], spill[BLOCK];
    uint64_t off = 0;
    for (;;) {
        const la_ssize_t r = archive_read_data(a, buf, sizeof(buf));
        if (r == ARCHIVE_WARN) {
            continue;
        }
        check(r >= 0, "second pass cannot read a member the scanner read");
        if (r == 0) {
            break;
        }
        check(off + (uint64_t)r <= it->size, "member longer than its item");
        check(pread(ctx->spill_fd, spill, (size_t)r, (off_t)(it->src + off)) == r,
              "spill short");
        check(memcmp(buf, spill, (size_t)r) == 0, "spill bytes differ from the member");
        off += (uint64_t)r;
    }
    check(off == it->size, "member shorter than its item");
}

/* Reads and discards the current member's data; false on a read error. */
static bool drain(struct archive *a)
{
    static uint8_t buf[BLOCK];
    for (;;) {
        const la_ssize_t r = archive_read_data(a, buf, sizeof(buf));
        if (r == 0) {
            return true;
        }
        if (r < 0 && r != ARCHIVE_WARN) {
            return false;
        }
    }
}

/* The second pass: members in order, compared with the items (all of them on success, a
 * subsequence on failure). */
#define MAX_SYMLINKS 4096

static void second_pass(const pack_ctx *ctx, int ok)
{
    struct archive *const a = reader();
    uint64_t k = 0;                      /* next item */
    static char *symlinks[MAX_SYMLINKS]; /* symbolic link members' names */
    size_t n_sym = 0;
    if (archive_read_open_filename(a, fx_in, BLOCK) != ARCHIVE_OK) {
        check(!ok, "second pass cannot open what the scanner read");
        check(ctx->n_items == 0, "items from an archive that does not open");
        archive_read_free(a);
        return;
    }
    for (;;) {
        struct archive_entry *e;
        const int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF || (r != ARCHIVE_OK && r != ARCHIVE_WARN)) {
            check(!ok || r == ARCHIVE_EOF, "second pass failed where the scanner did not");
            break;
        }
        const char *name = archive_entry_pathname(e);
        if (!name) {
            name = archive_entry_pathname_utf8(e);
        }
        if (!name) {
            check(!ok, "a member without a name was accepted");
            break;
        }
        const char *const link = archive_entry_hardlink(e);
        const int is_link =
            link && !(archive_entry_size_is_set(e) && archive_entry_size(e) > 0);
        const mode_t type = archive_entry_filetype(e);
        if (!is_link && type == AE_IFLNK && n_sym < MAX_SYMLINKS) {
            symlinks[n_sym++] = strdup(name);
        }
        if (!is_link && type != AE_IFREG) {
            continue; /* directories, symlinks and special members carry no data */
        }
        if (k == ctx->n_items) {
            check(!ok, "a member is missing from the items");
            break;
        }
        const pack_item *const it = &fx_items[k];
        const size_t len = strlen(name);
        const int same = it->key_len == len && memcmp(item_key(ctx, it), name, len) == 0;
        if (!ok && !same) {
            /* on failure the items are a subsequence of the members: hard links are
             * resolved after the stream, so one that fails leaves later members' items */
            if (!is_link && !drain(a)) {
                break;
            }
            continue;
        }
        k++;
        check(same, "key is not the member name verbatim");
        const char *lab;
        size_t lab_len;
        expected_label(name, len, &lab, &lab_len);
        check(it->label < ctx->labels.n && ctx->labels.len[it->label] == lab_len &&
                  memcmp(ctx->labels.names.p + ctx->labels.off[it->label], lab, lab_len) == 0,
              "label is not the member's first component");
        if (!ok) {
            /* read (not skip) the data as the scanner did: libarchive may skip differently */
            if (!is_link && !drain(a)) {
                break;
            }
            continue;
        }
        check(it->src + it->size <= ctx->spill_size, "item beyond the spill");
        if (is_link) {
            /* the bytes of the last earlier item named `link` */
            const size_t ll = strlen(link);
            const pack_item *t = NULL;
            for (uint64_t j = k - 1; j > 0 && !t; j--) {
                const pack_item *const c = &fx_items[j - 1];
                if (c->key_len == ll && memcmp(item_key(ctx, c), link, ll) == 0) {
                    t = c;
                }
            }
            check(t != NULL && t->src == it->src && t->size == it->size,
                  "hard link does not refer to its target");
        } else {
            check_data(a, ctx, it);
        }
    }
    /* then symbolic link members resolved to a member: their own name, a member's bytes */
    for (; ok && k < ctx->n_items; k++) {
        const pack_item *const it = &fx_items[k];
        int named = 0;
        for (size_t i = 0; i < n_sym && !named; i++) {
            named = symlinks[i] != NULL && strlen(symlinks[i]) == it->key_len &&
                    memcmp(symlinks[i], item_key(ctx, it), it->key_len) == 0;
        }
        check(named || n_sym == MAX_SYMLINKS, "an item that is neither member nor symlink");
        int target = 0;
        for (uint64_t j = 0; j < k && !target; j++) {
            target = fx_items[j].src == it->src && fx_items[j].size == it->size;
        }
        check(target, "a symbolic link item without the bytes of a member");
    }
    check(k == ctx->n_items, "more items than members");
    for (size_t i = 0; i < n_sym; i++) {
        free(symlinks[i]);
    }
    archive_read_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One scan of SANDBOX/in; `wds`: as a WebDataset shard (--webdataset), where items are the
 * key groups' images, not the members, so the second pass's member-by-member comparison
 * does not apply: the other checks do. */
static void scan_once(int wds)
{
    pack_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    pack_opts o;
    pack_opts_init(&o);
    o.cancel = bomb_cancel;
    o.cb_arg = &ctx;
    o.webdataset = wds;
    ctx.labels.numeric = wds;
    static char no_root[1];
    pack_src src = {.kind = PACK_SRC_ARCHIVE, .arg = fx_in, .root = no_root, .root_len = 0};
    ctx.o = &o;
    ctx.srcs = &src;
    ctx.n_srcs = 1;
    ctx.spill_fd = -1;
    ctx.tmpdir = fx_tmp;
    hd_clear_error();
    /* work in SANDBOX/cwd during the scan only (the fuzzer's own paths may be relative) */
    const int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    check(here >= 0 && chdir(fx_cwd) == 0, "chdir into the sandbox");
    const int rc = pack_scan_archive(&ctx, 0);
    check(fchdir(here) == 0 && close(here) == 0, "chdir back");
    check(fuzz_load_items(&ctx, &fx_items, &fx_keys) == HDMLP_OK, "items read back");

    check(rc == HDMLP_OK || known_code(rc), "return code");
    check(rc == HDMLP_OK || hdmlp_last_error()[0] != '\0', "error without detail");
    check(rc != HDMLP_OK || ctx.n_items > 0, "success without samples");
    check_sandbox();
    if (rc != HDMLP_E_INTERRUPTED && !wds) {
        second_pass(&ctx, rc == HDMLP_OK);
    }
    if (rc == HDMLP_OK) {
        uint64_t raw = 0;
        for (uint64_t i = 0; i < ctx.n_items; i++) {
            raw += fx_items[i].size;
        }
        check(raw == ctx.raw_bytes, "raw byte total");
        /* what pack_run does next with the items */
        check(pack_labels_finish(&ctx.labels) == HDMLP_OK, "labels finish");
        pack_order order;
        pack_order_init(&order, 1, ctx.n_items);
        check(pack_sort_items(&ctx, &order, NULL, NULL) == HDMLP_OK, "sort");
        pack_packed_free(&ctx.packed);
    }
    if (ctx.spill_fd >= 0) {
        close(ctx.spill_fd);
    }
    hd_free(fx_items);
    fx_items = NULL;
    pack_buf_free(&fx_keys);
    pack_items_free(&ctx);
    pack_labels_free(&ctx.labels);
    pack_fields_free(&ctx.fields);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fx_init();
    const int fd = open(fx_in, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    check(fd >= 0, "open input");
    check(size == 0 || write(fd, data, size) == (ssize_t)size, "write input");
    check(close(fd) == 0, "close input");
    scan_once(0);
    scan_once(1);
    return 0;
}

#ifdef FUZZ_GEN_CORPUS
/* ---- seed corpus: small archives written with libarchive -------------------------------- */

typedef struct seed_member {
    const char *name;
    mode_t type;      /* AE_IFREG, AE_IFDIR, AE_IFLNK; 0 = hard link to `target` */
    const char *body; /* regular: content; symlink/hard link: target */
} seed_member;

static void write_seed(const char *dir, const char *file, int format, int filter,
                       const seed_member *m, size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    struct archive *const a = archive_write_new();
    check(a != NULL, "archive_write_new");
    check((format == ARCHIVE_FORMAT_AR_GNU ? archive_write_set_format_ar_svr4(a)
                                           : archive_write_set_format(a, format)) == ARCHIVE_OK,
          "set format");
    check(archive_write_set_bytes_in_last_block(a, 1) == ARCHIVE_OK, "no padding");
    if (filter >= 0) {
        check(archive_write_add_filter(a, filter) == ARCHIVE_OK, "add filter");
    }
    check(archive_write_open_filename(a, path) == ARCHIVE_OK, "open seed");
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *const e = archive_entry_new();
        archive_entry_set_pathname(e, m[i].name);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_mtime(e, 1700000000, 0);
        size_t len = 0;
        if (m[i].type == 0) {
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_hardlink(e, m[i].body);
            archive_entry_set_size(e, 0);
        } else if (m[i].type == AE_IFLNK) {
            archive_entry_set_filetype(e, AE_IFLNK);
            archive_entry_set_symlink(e, m[i].body);
        } else {
            archive_entry_set_filetype(e, m[i].type);
            len = m[i].type == AE_IFREG ? strlen(m[i].body) : 0;
            archive_entry_set_size(e, (la_int64_t)len);
        }
        check(archive_write_header(a, e) == ARCHIVE_OK, archive_error_string(a));
        if (len) {
            check(archive_write_data(a, m[i].body, len) == (la_ssize_t)len, "write data");
        }
        archive_entry_free(e);
    }
    check(archive_write_close(a) == ARCHIVE_OK && archive_write_free(a) == ARCHIVE_OK,
          "close seed");
}

int main(int argc, char **argv)
{
    check(argc == 2, "usage: gen DIR");
    const char *const d = argv[1];
    static const seed_member classes[] = {
        {"cat/", AE_IFDIR, NULL},        {"cat/1.txt", AE_IFREG, "meow meow meow"},
        {"dog/2.txt", AE_IFREG, "woof"}, {"root.txt", AE_IFREG, "in the root"},
        {"empty/", AE_IFDIR, NULL},
    };
    static const seed_member hostile[] = {
        {"../escape/x", AE_IFREG, "dot-dot"},        {"/etc/abs", AE_IFREG, "absolute"},
        {"./././a/b", AE_IFREG, "dot-slash"},        {"//double//slash", AE_IFREG, "slashes"},
        {"link", AE_IFLNK, "/etc/passwd"},           {"hard", 0, "/etc/abs"},
        {"a/\xff\xfe-bytes", AE_IFREG, "not utf-8"},
    };
    static const seed_member links[] = {
        {"x/data", AE_IFREG, "shared bytes"},
        {"y/alias", 0, "x/data"},
        {"z/missing", 0, "nowhere"},
    };
    /* symbolic links: resolved (relative, chained, forward, through a linked directory),
     * or skipped (absolute, above the root, a directory, a loop) */
    static const seed_member symlinks[] = {
        {"cat/l1", AE_IFLNK, "a"},         {"cat/a", AE_IFREG, "bytes of a"},
        {"dog/l2", AE_IFLNK, "../cat/l1"}, {"dog/dir", AE_IFLNK, "../cat"},
        {"dog/via", AE_IFLNK, "dir/a"},    {"abs", AE_IFLNK, "/etc/passwd"},
        {"up", AE_IFLNK, "../../x"},       {"cat/loop1", AE_IFLNK, "loop2"},
        {"cat/loop2", AE_IFLNK, "loop1"},  {"cat/self", AE_IFLNK, "."},
    };
    /* a WebDataset shard: key groups with an image, a .cls and other fields */
    static const seed_member shard[] = {
        {"s/000.cls", AE_IFREG, "3\n"},     {"s/000.jpg", AE_IFREG, "\xff\xd8jpeg bytes"},
        {"s/000.txt", AE_IFREG, "caption"}, {"s/001.json", AE_IFREG, "{}"},
        {"s/001.PNG", AE_IFREG, "png"},     {"s/001.cls", AE_IFREG, " 0 "},
        {"s/002.cls", AE_IFREG, "12"},      {"s/002.seg.png", AE_IFREG, "x"},
        {"s/002.webp", AE_IFREG, "y"},
    };
    write_seed(d, "wds-shard", ARCHIVE_FORMAT_TAR_USTAR, -1, shard, 9);
    write_seed(d, "ustar", ARCHIVE_FORMAT_TAR_USTAR, -1, classes, 5);
    write_seed(d, "tar-symlinks", ARCHIVE_FORMAT_TAR_GNUTAR, -1, symlinks, 10);
    write_seed(d, "pax-hostile", ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, -1, hostile, 6);
    write_seed(d, "gnutar-hostile", ARCHIVE_FORMAT_TAR_GNUTAR, -1, hostile, 7);
    write_seed(d, "gnutar-links", ARCHIVE_FORMAT_TAR_GNUTAR, -1, links, 2);
    write_seed(d, "tar-bad-link", ARCHIVE_FORMAT_TAR_USTAR, -1, links, 3);
    write_seed(d, "cpio", ARCHIVE_FORMAT_CPIO_SVR4_NOCRC, -1, classes, 5);
    write_seed(d, "zip", ARCHIVE_FORMAT_ZIP, -1, classes, 5);
    write_seed(d, "zip-hostile", ARCHIVE_FORMAT_ZIP, -1, hostile, 5);
    write_seed(d, "7z", ARCHIVE_FORMAT_7ZIP, -1, classes, 4);
    write_seed(d, "tar.gz", ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_GZIP, classes, 5);
    write_seed(d, "tar.zst", ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_ZSTD, hostile, 4);
    write_seed(d, "tar.xz", ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_XZ, classes, 3);
    write_seed(d, "ar", ARCHIVE_FORMAT_AR_GNU, -1, classes + 3, 1);
    return 0;
}
#endif
