/* Archive inputs (libarchive): streamed once, in archive order, into the spill file. */
#include "pack_internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <string.h>

#define ARCHIVE_BLOCK (1u << 20)
#define MAX_WARNINGS 5

/* The label of a member: its first path component after leading "/" and "./"
 * components; "." for members in the root. */
static void member_label(const char *name, size_t len, const char **lab, size_t *lab_len)
{
    size_t i = 0;
    for (;;) {
        while (i < len && name[i] == '/') {
            i++;
        }
        if (i + 1 < len && name[i] == '.' && name[i + 1] == '/') {
            i += 2;
            continue;
        }
        break;
    }
    const char *const slash = memchr(name + i, '/', len - i);
    if (!slash) {
        *lab = ".";
        *lab_len = 1;
        return;
    }
    *lab = name + i;
    *lab_len = (size_t)(slash - (name + i));
}

static struct archive *archive_open(void)
{
    struct archive *const a = archive_read_new();
    if (!a) {
        return NULL;
    }
    archive_read_support_filter_all(a);
    /* Formats that only describe files elsewhere (mtree) are deliberately not enabled:
     * member names must never be used as paths. */
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

/* Finds the last item of this input whose key is `name` (hard link target). */
static const pack_item *find_member(const pack_ctx *ctx, uint64_t first, uint32_t input,
                                    const char *name, size_t len)
{
    for (uint64_t i = ctx->n_items; i > first; i--) {
        const pack_item *const it = &ctx->items[i - 1];
        if (it->input == input && it->key_len == len &&
            memcmp(ctx->keys.p + it->key_off, name, len) == 0) {
            return it;
        }
    }
    return NULL;
}

typedef struct arc_scan {
    pack_ctx *ctx;
    uint32_t input;
    const char *path;
    struct archive *a;
    pack_spill_writer w;
    uint64_t first_item;
    int warnings;
} arc_scan;

static void arc_warn(arc_scan *s, const char *what)
{
    if (what && strstr(what, "can't be converted")) {
        return; /* names are kept as raw bytes anyway */
    }
    if (s->warnings < MAX_WARNINGS) {
        pack_warn(s->ctx->o, "%s: %s", s->path, what);
    } else if (s->warnings == MAX_WARNINGS) {
        pack_warn(s->ctx->o, "%s: further warnings suppressed", s->path);
    }
    s->warnings++;
}

static int copy_member(arc_scan *s, const char *name, uint64_t *size)
{
    uint64_t n = 0;
    for (;;) {
        uint8_t *p;
        size_t avail;
        int rc = pack_spill_reserve(&s->w, &p, &avail);
        if (rc != HDMLP_OK) {
            return rc;
        }
        if (avail > ARCHIVE_BLOCK) {
            avail = ARCHIVE_BLOCK;
        }
        const la_ssize_t r = archive_read_data(s->a, p, avail);
        if (r == 0) {
            break;
        }
        if (r < 0) {
            if (r == ARCHIVE_WARN) {
                arc_warn(s, archive_error_string(s->a));
                continue;
            }
            return hd_err(HDMLP_E_IO, "%s: cannot read member %s: %s", s->path, name,
                          archive_error_string(s->a));
        }
        s->w.len += (size_t)r;
        n += (uint64_t)r;
        if (pack_cancelled(s->ctx->o)) {
            return hd_err(HDMLP_E_INTERRUPTED, "interrupted");
        }
        pack_scan_tick(s->ctx, n);
    }
    *size = n;
    return HDMLP_OK;
}

static int add_member(arc_scan *s, struct archive_entry *e)
{
    const char *name = archive_entry_pathname(e);
    if (!name) {
        name = archive_entry_pathname_utf8(e);
    }
    if (!name) {
        return hd_err(HDMLP_E_CORRUPT, "%s: member without a usable name", s->path);
    }
    const size_t len = strlen(name);
    const char *const link = archive_entry_hardlink(e);
    const mode_t type = archive_entry_filetype(e);
    int rc;
    const char *lab;
    size_t lab_len;
    uint32_t label;
    if (link && !(archive_entry_size_is_set(e) && archive_entry_size(e) > 0)) {
        const pack_item *const t =
            find_member(s->ctx, s->first_item, s->input, link, strlen(link));
        if (!t) {
            return hd_err(HDMLP_E_CORRUPT,
                          "%s: member %s is a hard link to %s, which is not "
                          "an earlier regular member",
                          s->path, name, link);
        }
        const uint64_t size = t->size, src = t->src;
        member_label(name, len, &lab, &lab_len);
        rc = pack_labels_intern(&s->ctx->labels, lab, lab_len, &label);
        if (rc == HDMLP_OK) {
            rc = pack_add_item(s->ctx, s->input, name, len, label, size, src, name);
        }
        return rc;
    }
    if (type == AE_IFDIR) {
        /* A top-level directory defines its label even when it holds no samples, as an
         * empty class directory does for directory inputs. */
        size_t n = len;
        while (n > 0 && name[n - 1] == '/') {
            n--;
        }
        member_label(name, n, &lab, &lab_len);
        if (lab_len == 1 && lab[0] == '.') {
            /* the name had no '/' after normalising: it is the top directory itself */
            size_t i = 0;
            while (i < n &&
                   (name[i] == '/' || (name[i] == '.' && i + 1 < n && name[i + 1] == '/'))) {
                i += name[i] == '/' ? 1 : 2;
            }
            lab = name + i;
            lab_len = n - i;
            if (lab_len == 0 || (lab_len == 1 && lab[0] == '.')) {
                return HDMLP_OK; /* the root */
            }
        }
        return pack_labels_intern(&s->ctx->labels, lab, lab_len, &label);
    }
    if (type != AE_IFREG) {
        const char *const what = type == AE_IFLNK ? "symbolic link" : "special file";
        if (s->warnings < MAX_WARNINGS) {
            pack_warn(s->ctx->o, "%s: skipping member %s (%s)", s->path, name, what);
        } else if (s->warnings == MAX_WARNINGS) {
            pack_warn(s->ctx->o, "%s: further warnings suppressed", s->path);
        }
        s->warnings++;
        return HDMLP_OK;
    }
    /* Copy the name with its NUL (it is printed with %s, and an empty name must still
     * give a buffer): libarchive's buffer does not outlive the data reads. */
    pack_buf key = {0};
    rc = pack_buf_append(&key, name, len + 1);
    if (rc != HDMLP_OK) {
        return rc;
    }
    const uint64_t src = s->w.pos + s->w.len;
    uint64_t size = 0;
    rc = copy_member(s, (const char *)key.p, &size);
    if (rc == HDMLP_OK) {
        member_label((const char *)key.p, len, &lab, &lab_len);
        rc = pack_labels_intern(&s->ctx->labels, lab, lab_len, &label);
    }
    if (rc == HDMLP_OK) {
        rc = pack_add_item(s->ctx, s->input, key.p, len, label, size, src, (const char *)key.p);
        pack_scan_tick(s->ctx, 0);
    }
    pack_buf_free(&key);
    return rc;
}

int pack_scan_archive(pack_ctx *ctx, uint32_t input)
{
    arc_scan s = {.ctx = ctx, .input = input, .path = ctx->srcs[input].arg};
    s.first_item = ctx->n_items;
    s.a = archive_open();
    if (!s.a) {
        return hd_err(HDMLP_E_NOMEM, "out of memory opening %s", s.path);
    }
    int rc = HDMLP_OK;
    if (archive_read_open_filename(s.a, s.path, ARCHIVE_BLOCK) != ARCHIVE_OK) {
        if (archive_errno(s.a) == EILSEQ) { /* libarchive's ARCHIVE_ERRNO_FILE_FORMAT */
            rc = hd_err(HDMLP_E_UNSUPPORTED,
                        "%s: not a directory or a recognised archive (tar, tar.gz, tar.zst, "
                        "zip, 7z, cpio, ...)",
                        s.path);
        } else {
            rc = hd_err(HDMLP_E_IO, "cannot open %s: %s", s.path, archive_error_string(s.a));
        }
        archive_read_free(s.a);
        return rc;
    }
    rc = pack_spill_open(ctx, &s.w);
    for (uint64_t n_headers = 0; rc == HDMLP_OK; n_headers++) {
        struct archive_entry *e;
        const int r = archive_read_next_header(s.a, &e);
        if (r == ARCHIVE_EOF) {
            break;
        }
        if (r == ARCHIVE_WARN) {
            arc_warn(&s, archive_error_string(s.a));
        } else if (r != ARCHIVE_OK) {
            if (n_headers == 0) {
                rc = hd_err(HDMLP_E_UNSUPPORTED,
                            "%s: not a directory or a recognised archive (%s)", s.path,
                            archive_error_string(s.a));
            } else {
                rc = hd_err(HDMLP_E_CORRUPT, "%s: %s", s.path, archive_error_string(s.a));
            }
            break;
        }
        rc = add_member(&s, e);
        if (rc == HDMLP_OK && pack_cancelled(ctx->o)) {
            rc = hd_err(HDMLP_E_INTERRUPTED, "interrupted");
        }
    }
    const int rc2 = pack_spill_close(ctx, &s.w, rc == HDMLP_OK);
    if (rc == HDMLP_OK) {
        rc = rc2;
    }
    archive_read_free(s.a);
    if (rc == HDMLP_OK && ctx->n_items == s.first_item) {
        rc = hd_err(HDMLP_E_NOTFOUND, "no samples found in %s", s.path);
    }
    return rc;
}
