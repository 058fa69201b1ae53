/* Archive inputs (libarchive): streamed once, in archive order, into the spill file;
 * hard link members resolved to the earlier members they name, and symbolic link members
 * to the members they name, once the stream has ended.
 *
 * Memory: items and keys go to the packer's runs (pack_add_item: bounded, then on disk) as
 * members are read; what stays in memory is O(directory members + links): their names, and
 * each hard link until it is resolved by one pass over the items (pack_items_each). Only an
 * archive with symbolic link members gathers a table of every member's name (the links
 * resolve through any of them, by path); that table is O(members) while the links are
 * resolved. WebDataset shards (o->webdataset) go through add_wds_member and pack_wds.c. */
#include "pack_internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ARCHIVE_BLOCK (1u << 20)
#define MAX_WARNINGS 5
#define MAX_LINK_HOPS 40 /* symbolic links followed resolving one (Linux's limit) */

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

/* A member by its normalised name (no "", "." or leading "/" components; ".." applied). */
enum { NAME_FILE = 0, NAME_DIR = 1, NAME_LINK = 2 };
typedef struct arc_name {
    const uint8_t *p; /* set once the stream has ended (text no longer grows) */
    uint64_t off;     /* into arc_scan.text */
    uint64_t len;
    uint64_t ref; /* NAME_LINK: index into arc_scan.links */
    uint64_t seq; /* scan sequence (order in the archive): the last of equal names counts */
    uint64_t size, src; /* NAME_FILE: the item's bytes */
    int kind;
} arc_name;

/* A hard link member (its data is an earlier member's), resolved after the stream to the
 * last earlier item of this input whose key is its target. Strings in arc_scan.htext. */
typedef struct arc_hard {
    uint64_t seq; /* its place in the scan order, taken at its header */
    uint64_t name_off, name_len;
    uint64_t link_off, link_len;
    uint32_t label;
    int found;          /* a target: */
    uint64_t found_seq; /* its sequence number, */
    uint64_t size, src; /* its bytes */
} arc_hard;

/* A symbolic link member: its name as stored and its target, into arc_scan.text. */
typedef struct arc_link {
    uint64_t name_off, name_len;
    uint64_t target_off, target_len;
} arc_link;

typedef struct arc_scan {
    pack_ctx *ctx;
    uint32_t input;
    const char *path;
    struct archive *a;
    pack_spill_writer w;
    uint64_t first_item;
    int warnings;
    pack_buf text; /* normalised names, link names and targets */
    arc_name *names;
    uint64_t n_names, cap_names;
    arc_link *links;
    uint64_t n_links, cap_links;
    pack_buf htext; /* hard links' names and targets, NUL after each */
    arc_hard *hards;
    uint64_t n_hards, cap_hards;
    pack_wds wds; /* WebDataset shards (o->webdataset): the open group */
} arc_scan;

/* Appends the normalised form of name[0..len) to b; *len_out = its length. */
static int norm_append(pack_buf *b, const char *name, size_t len, uint64_t *len_out)
{
    const size_t start = b->len;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && name[j] != '/') {
            j++;
        }
        const size_t n = j - i;
        const char *const c = name + i;
        i = j + 1;
        if (n == 0 || (n == 1 && c[0] == '.')) {
            continue;
        }
        const size_t have = b->len - start;
        if (n == 2 && c[0] == '.' && c[1] == '.' && have > 0 &&
            !(have >= 2 && b->p[b->len - 1] == '.' && b->p[b->len - 2] == '.' &&
              (have == 2 || b->p[b->len - 3] == '/'))) {
            while (b->len > start && b->p[b->len - 1] != '/') {
                b->len--;
            }
            if (b->len > start) {
                b->len--; /* the '/' */
            }
            continue;
        }
        if (have > 0 && pack_buf_append(b, "/", 1) != HDMLP_OK) {
            return HDMLP_E_NOMEM;
        }
        if (pack_buf_append(b, c, n) != HDMLP_OK) {
            return HDMLP_E_NOMEM;
        }
    }
    *len_out = b->len - start;
    return HDMLP_OK;
}

/* Records a member's name for resolving symbolic links later. */
static int note_name(arc_scan *s, const char *name, size_t len, int kind, uint64_t ref,
                     uint64_t seq)
{
    if (s->n_names == s->cap_names) {
        const uint64_t cap = s->cap_names ? s->cap_names * 2 : 256;
        arc_name *const v = hd_realloc(s->names, (size_t)cap * sizeof(arc_name));
        if (!v) {
            return hd_err(HDMLP_E_NOMEM, "out of memory reading %s", s->path);
        }
        s->names = v;
        s->cap_names = cap;
    }
    arc_name *const e = &s->names[s->n_names];
    e->off = s->text.len;
    e->kind = kind;
    e->ref = ref;
    e->seq = seq;
    e->size = e->src = 0;
    if (norm_append(&s->text, name, len, &e->len) != HDMLP_OK) {
        return hd_err(HDMLP_E_NOMEM, "out of memory reading %s", s->path);
    }
    s->n_names++;
    return HDMLP_OK;
}

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

/* Copies the member's data to the spill file; head[0..*head_len) = its first bytes (up to
 * head_cap). */
static int copy_member(arc_scan *s, const char *name, uint64_t *size, uint8_t *head,
                       size_t head_cap, size_t *head_len)
{
    uint64_t n = 0;
    *head_len = 0;
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
        if (*head_len < head_cap) {
            size_t k = head_cap - *head_len;
            k = k < (size_t)r ? k : (size_t)r;
            memcpy(head + *head_len, p, k);
            *head_len += k;
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

/* Whether the member (name, first bytes) is a file of an hdmlp dataset. */
static const char *dataset_file(const char *name, size_t len, const uint8_t *head,
                                size_t head_len)
{
    size_t b = len;
    while (b > 0 && name[b - 1] != '/') {
        b--;
    }
    const char *const magic = pack_dataset_magic(name + b, len - b);
    if (magic && head_len == PACK_DATASET_MAGIC_LEN && memcmp(head, magic, head_len) == 0) {
        return name + b;
    }
    return NULL;
}

static int add_link(arc_scan *s, const char *name, size_t len, const char *target)
{
    if (s->n_links == s->cap_links) {
        const uint64_t cap = s->cap_links ? s->cap_links * 2 : 64;
        arc_link *const v = hd_realloc(s->links, (size_t)cap * sizeof(arc_link));
        if (!v) {
            return hd_err(HDMLP_E_NOMEM, "out of memory reading %s", s->path);
        }
        s->links = v;
        s->cap_links = cap;
    }
    arc_link *const l = &s->links[s->n_links];
    const size_t tlen = target ? strlen(target) : 0;
    l->name_off = s->text.len;
    l->name_len = len;
    l->target_off = s->text.len + len + 1;
    l->target_len = tlen;
    /* NUL after each: they are printed with %s */
    if (pack_buf_append(&s->text, name, len) != HDMLP_OK ||
        pack_buf_append(&s->text, "", 1) != HDMLP_OK ||
        pack_buf_append(&s->text, target ? target : "", tlen) != HDMLP_OK ||
        pack_buf_append(&s->text, "", 1) != HDMLP_OK) {
        return hd_err(HDMLP_E_NOMEM, "out of memory reading %s", s->path);
    }
    s->n_links++;
    return note_name(s, name, len, NAME_LINK, s->n_links - 1, s->ctx->n_seq++);
}

/* A top-level directory member defines its label even when it holds no samples, as an
 * empty class directory does for directory inputs. */
static int add_dir(arc_scan *s, const char *name, size_t len)
{
    int rc = note_name(s, name, len, NAME_DIR, 0, s->ctx->n_seq++);
    if (rc != HDMLP_OK) {
        return rc;
    }
    size_t n = len;
    while (n > 0 && name[n - 1] == '/') {
        n--;
    }
    const char *lab;
    size_t lab_len;
    uint32_t label;
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

/* Adds an item for member `name` with the bytes at src, labelled by `name`. */
static int add_file(arc_scan *s, const char *name, size_t len, uint64_t size, uint64_t src)
{
    const char *lab;
    size_t lab_len;
    uint32_t label;
    member_label(name, len, &lab, &lab_len);
    int rc = pack_labels_intern(&s->ctx->labels, lab, lab_len, &label);
    if (rc == HDMLP_OK) {
        rc = pack_add_item(s->ctx, s->input, name, len, label, size, src, name);
    }
    return rc;
}

/* Notes hard link member `name` (to `link`) for resolve_hards, with its place in the scan
 * order and its label. */
static int add_hard(arc_scan *s, const char *name, size_t len, const char *link)
{
    if (s->n_hards == s->cap_hards) {
        const uint64_t cap = s->cap_hards ? s->cap_hards * 2 : 64;
        arc_hard *const v = hd_realloc(s->hards, (size_t)cap * sizeof(arc_hard));
        if (!v) {
            return hd_err(HDMLP_E_NOMEM, "out of memory reading %s", s->path);
        }
        s->hards = v;
        s->cap_hards = cap;
    }
    arc_hard *const h = &s->hards[s->n_hards];
    memset(h, 0, sizeof(*h));
    const char *lab;
    size_t lab_len;
    member_label(name, len, &lab, &lab_len);
    int rc = pack_labels_intern(&s->ctx->labels, lab, lab_len, &h->label);
    if (rc != HDMLP_OK) {
        return rc;
    }
    h->seq = s->ctx->n_seq++;
    h->name_off = s->htext.len;
    h->name_len = len;
    h->link_len = strlen(link);
    h->link_off = s->htext.len + len + 1;
    if (pack_buf_append(&s->htext, name, len) != HDMLP_OK ||
        pack_buf_append(&s->htext, "", 1) != HDMLP_OK ||
        pack_buf_append(&s->htext, link, (size_t)h->link_len) != HDMLP_OK ||
        pack_buf_append(&s->htext, "", 1) != HDMLP_OK) {
        return hd_err(HDMLP_E_NOMEM, "out of memory reading %s", s->path);
    }
    s->n_hards++;
    return HDMLP_OK;
}

/* A .cls member's bytes (a class number: at most 32 bytes) into buf, *n of them. */
static int read_small(arc_scan *s, const char *name, uint8_t *buf, size_t cap, size_t *n)
{
    *n = 0;
    for (;;) {
        uint8_t tmp[64];
        const la_ssize_t r = archive_read_data(s->a, tmp, sizeof(tmp));
        if (r == 0) {
            return HDMLP_OK;
        }
        if (r == ARCHIVE_WARN) {
            arc_warn(s, archive_error_string(s->a));
            continue;
        }
        if (r < 0) {
            return hd_err(HDMLP_E_IO, "%s: cannot read member %s: %s", s->path, name,
                          archive_error_string(s->a));
        }
        if (*n + (size_t)r > cap) {
            return hd_err(HDMLP_E_INVAL,
                          "%s: member %s: not a class number (more than %zu bytes)", s->path,
                          name, cap);
        }
        memcpy(buf + *n, tmp, (size_t)r);
        *n += (size_t)r;
    }
}

/* A member of a WebDataset shard: regular files only, grouped by key (pack_wds.c); a .cls
 * member's bytes are read here, any other's go to the spill as a value of its field. */
static int add_wds_member(arc_scan *s, struct archive_entry *e, const char *name, size_t len)
{
    const mode_t type = archive_entry_filetype(e);
    if (type == AE_IFDIR) {
        return HDMLP_OK; /* directories carry no sample and no label */
    }
    if (type != AE_IFREG || archive_entry_hardlink(e) != NULL) {
        return hd_err(HDMLP_E_INVAL,
                      "%s: member %s is not a regular file (a link or special file): "
                      "WebDataset shards hold files only",
                      s->path, name);
    }
    /* The group first: a member of another key emits the open one, whose values and
     * trailer then precede this member's bytes in the spill. */
    int rc = pack_wds_begin(s->ctx, s->input, s->path, &s->wds, &s->w, name, len);
    if (rc != HDMLP_OK) {
        return rc;
    }
    size_t key_len, ext_len;
    const char *ext;
    pack_wds_split(name, len, &key_len, &ext, &ext_len);
    if (pack_wds_is_label(ext, ext_len)) {
        uint8_t buf[32];
        size_t n = 0;
        rc = read_small(s, name, buf, sizeof(buf), &n);
        return rc != HDMLP_OK ? rc
                              : pack_wds_label(s->ctx, s->path, &s->wds, name, len, buf, n);
    }
    const uint64_t src = s->w.pos + s->w.len;
    uint64_t size = 0;
    uint8_t head[PACK_NPY_HEAD_MAX]; /* an .npy member's header */
    size_t head_len = 0;
    rc = copy_member(s, name, &size, head, sizeof(head), &head_len);
    if (rc == HDMLP_OK) {
        rc = pack_wds_value(s->ctx, s->path, &s->wds, name, len, size, src, head, head_len);
        pack_scan_tick(s->ctx, 0);
    }
    return rc;
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
    if (s->ctx->o->webdataset) {
        return add_wds_member(s, e, name, len);
    }
    const char *const link = archive_entry_hardlink(e);
    const mode_t type = archive_entry_filetype(e);
    int rc;
    if (link && !(archive_entry_size_is_set(e) && archive_entry_size(e) > 0)) {
        return add_hard(s, name, len, link);
    }
    if (type == AE_IFDIR) {
        return add_dir(s, name, len);
    }
    if (type == AE_IFLNK) {
        return add_link(s, name, len, archive_entry_symlink(e));
    }
    if (type != AE_IFREG) {
        pack_skip(s->ctx, PACK_SKIP_SPECIAL, "%s: skipping member %s (special file)", s->path,
                  name);
        return HDMLP_OK;
    }
    /* Copy the name with its NUL (it is printed with %s, and an empty name must still
     * give a buffer): libarchive's buffer does not outlive the data reads. */
    pack_buf key = {0};
    rc = pack_buf_append(&key, name, len + 1);
    if (rc != HDMLP_OK) {
        return rc;
    }
    const char *const kname = (const char *)key.p;
    const uint64_t src = s->w.pos + s->w.len;
    uint64_t size = 0;
    uint8_t head[PACK_DATASET_MAGIC_LEN];
    size_t head_len = 0;
    rc = copy_member(s, kname, &size, head, sizeof(head), &head_len);
    const char *const ds_file = rc == HDMLP_OK && s->ctx->o->nested != PACK_NESTED_PACK
                                    ? dataset_file(kname, len, head, head_len)
                                    : NULL;
    if (ds_file && s->ctx->o->nested == PACK_NESTED_SKIP) {
        pack_skip(s->ctx, PACK_SKIP_DATASET,
                  "%s: member %s, a file of an hdmlp dataset, left out", s->path, kname);
    } else if (ds_file) {
        rc = hd_err(HDMLP_E_INVAL,
                    "%s: member %s is the %s file of an hdmlp dataset, which would be packed "
                    "as a sample: pass --skip-nested to leave such members out or "
                    "--allow-nested to pack them",
                    s->path, kname, ds_file[0] == 'i' ? "index" : "segment");
    } else if (rc == HDMLP_OK) {
        rc = add_file(s, kname, len, size, src);
        pack_scan_tick(s->ctx, 0);
    }
    pack_buf_free(&key);
    return rc;
}

/* ---- hard link members, once the stream has ended ----------------------------------- */

static int bytes_cmp(const uint8_t *a, uint64_t al, const uint8_t *b, uint64_t bl);

static int hard_link_cmp(const void *c, uint64_t a, uint64_t b)
{
    const arc_scan *const s = c;
    const arc_hard *const x = &s->hards[a], *const y = &s->hards[b];
    return bytes_cmp(s->htext.p + x->link_off, x->link_len, s->htext.p + y->link_off,
                     y->link_len);
}

static int hard_name_cmp(const void *c, uint64_t a, uint64_t b)
{
    const arc_scan *const s = c;
    const arc_hard *const x = &s->hards[a], *const y = &s->hards[b];
    return bytes_cmp(s->htext.p + x->name_off, x->name_len, s->htext.p + y->name_off,
                     y->name_len);
}

/* First index of ids (sorted by the string at `field` of each hard link) whose string is ≥
 * (p, n); field 0: the target, 1: the name. */
static uint64_t hard_lower(const arc_scan *s, const uint64_t *ids, uint64_t n_ids, int field,
                           const uint8_t *p, uint64_t n)
{
    uint64_t lo = 0, hi = n_ids;
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        const arc_hard *const h = &s->hards[ids[mid]];
        const uint64_t off = field ? h->name_off : h->link_off;
        const uint64_t len = field ? h->name_len : h->link_len;
        if (bytes_cmp(s->htext.p + off, len, p, n) < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

typedef struct hard_pass {
    arc_scan *s;
    const uint64_t *by_link;
} hard_pass;

/* An item of this input is a candidate for the hard links to its key after it: the last
 * such (by scan sequence) counts. */
static int hard_candidate(void *arg, const pack_item *it, const uint8_t *key)
{
    const hard_pass *const hp = arg;
    arc_scan *const s = hp->s;
    if (it->input != s->input) {
        return HDMLP_OK;
    }
    for (uint64_t j = hard_lower(s, hp->by_link, s->n_hards, 0, key, it->key_len);
         j < s->n_hards; j++) {
        arc_hard *const h = &s->hards[hp->by_link[j]];
        if (bytes_cmp(s->htext.p + h->link_off, h->link_len, key, it->key_len) != 0) {
            break;
        }
        if (it->seq < h->seq && (!h->found || it->seq > h->found_seq)) {
            h->found = 1;
            h->found_seq = it->seq;
            h->size = it->size;
            h->src = it->src;
        }
    }
    return HDMLP_OK;
}

/* Each hard link gets the bytes of the last item of this input before it (in the scan
 * order) whose key is its target: a regular member, found in one pass over the items, or
 * an earlier hard link. Then they become items, in their places in the order. */
static int resolve_hards(arc_scan *s)
{
    const uint64_t nh = s->n_hards;
    if (nh == 0) {
        return HDMLP_OK;
    }
    pack_ctx *const ctx = s->ctx;
    uint64_t *const by_link = hd_malloc((size_t)(nh + nh / 2 + 1) * sizeof(uint64_t));
    uint64_t *const by_name = hd_malloc((size_t)(nh + nh / 2 + 1) * sizeof(uint64_t));
    int rc = by_link && by_name && pack_buf_reserve(&s->htext, 1) == HDMLP_OK
                 ? HDMLP_OK
                 : hd_err(HDMLP_E_NOMEM, "out of memory reading %s", s->path);
    if (rc == HDMLP_OK) {
        for (uint64_t i = 0; i < nh; i++) {
            by_link[i] = by_name[i] = i;
        }
        pack_merge_sort(by_link, by_link + nh, nh, hard_link_cmp, s);
        pack_merge_sort(by_name, by_name + nh, nh, hard_name_cmp, s);
        hard_pass hp = {.s = s, .by_link = by_link};
        rc = pack_items_each(ctx, hard_candidate, &hp);
    }
    /* in scan order (the order they were noted), so earlier hard links are resolved */
    for (uint64_t i = 0; i < nh && rc == HDMLP_OK; i++) {
        arc_hard *const h = &s->hards[i];
        const uint8_t *const link = s->htext.p + h->link_off;
        for (uint64_t j = hard_lower(s, by_name, nh, 1, link, h->link_len); j < nh; j++) {
            const arc_hard *const o = &s->hards[by_name[j]];
            if (bytes_cmp(s->htext.p + o->name_off, o->name_len, link, h->link_len) != 0) {
                break;
            }
            if (o->seq < h->seq && o->found && (!h->found || o->seq > h->found_seq)) {
                h->found = 1;
                h->found_seq = o->seq;
                h->size = o->size;
                h->src = o->src;
            }
        }
        const char *const name = (const char *)s->htext.p + h->name_off;
        if (!h->found) {
            rc = hd_err(HDMLP_E_CORRUPT,
                        "%s: member %s is a hard link to %s, which is not "
                        "an earlier regular member",
                        s->path, name, (const char *)link);
            break;
        }
        rc = pack_add_item_seq(ctx, h->seq, s->input, name, (size_t)h->name_len, h->label,
                               h->size, h->src, name);
    }
    hd_free(by_link);
    hd_free(by_name);
    return rc;
}

/* ---- symbolic link members, once every member is known ------------------------------- */

static int bytes_cmp(const uint8_t *a, uint64_t al, const uint8_t *b, uint64_t bl)
{
    const int r = memcmp(a, b, (size_t)(al < bl ? al : bl));
    return r != 0 ? r : al < bl ? -1 : al > bl ? 1 : 0;
}

static int name_cmp(const void *pa, const void *pb)
{
    const arc_name *const a = pa;
    const arc_name *const b = pb;
    const int r = bytes_cmp(a->p, a->len, b->p, b->len);
    return r != 0 ? r : a->seq < b->seq ? -1 : a->seq > b->seq ? 1 : 0;
}

/* Index of the first name ≥ (p, n) in the sorted table. */
static uint64_t lower_bound(const arc_scan *s, const uint8_t *p, uint64_t n)
{
    uint64_t lo = 0, hi = s->n_names;
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (bytes_cmp(s->names[mid].p, s->names[mid].len, p, n) < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* What the path in cur is: the last member of that name, or NULL with *is_dir set when
 * members lie below it. */
static const arc_name *lookup(const arc_scan *s, pack_buf *cur, int *is_dir)
{
    const uint8_t *const p = cur->p;
    const uint64_t n = cur->len;
    const arc_name *found = NULL;
    for (uint64_t i = lower_bound(s, p, n);
         i < s->n_names && bytes_cmp(s->names[i].p, s->names[i].len, p, n) == 0; i++) {
        found = &s->names[i]; /* sorted by sequence among equals: the last counts */
    }
    *is_dir = 0;
    if (!found) {
        /* the first name ≥ "cur/" starts with it if any does ('/' sorts before letters but
         * after '!'...: "cur!x" lies between "cur" and "cur/x") */
        cur->p[cur->len] = '/'; /* pack_buf_append left room: see resolve */
        const uint64_t i = lower_bound(s, cur->p, n + 1);
        *is_dir = i < s->n_names && s->names[i].len > n &&
                  memcmp(s->names[i].p, cur->p, (size_t)n + 1) == 0;
    }
    return found;
}

enum { LINK_RESOLVED = -1 };

/* Resolves link l like the kernel would in the unpacked tree (relative to the link's own
 * directory; through other links; ".." never above the root). Returns LINK_RESOLVED with
 * *item (the index of the member's name in the sorted table), or the pack_skip_reason. cur and
 * rest are scratch buffers. */
static int resolve(const arc_scan *s, const arc_link *l, pack_buf *cur, pack_buf *rest,
                   uint64_t *item)
{
    cur->len = 0;
    rest->len = 0;
    uint64_t n;
    if (norm_append(cur, (const char *)s->text.p + l->name_off, (size_t)l->name_len, &n) !=
            HDMLP_OK ||
        pack_buf_append(rest, s->text.p + l->target_off, (size_t)l->target_len) != HDMLP_OK) {
        return hd_err(HDMLP_E_NOMEM, "out of memory resolving links in %s", s->path);
    }
    while (cur->len > 0 && cur->p[cur->len - 1] != '/') {
        cur->len--; /* the link's directory */
    }
    if (cur->len > 0) {
        cur->len--;
    }
    unsigned hops = 0;
    size_t pos = 0;
    int is_dir = 1;
    if (rest->len == 0) {
        return PACK_SKIP_LINK_MISSING;
    }
    while (pos < rest->len) {
        if (pos == 0 && rest->p[0] == '/') {
            return PACK_SKIP_LINK_MISSING; /* absolute: outside the archive */
        }
        size_t end = pos;
        while (end < rest->len && rest->p[end] != '/') {
            end++;
        }
        const uint8_t *const c = rest->p + pos;
        const size_t cn = end - pos;
        pos = end < rest->len ? end + 1 : end;
        if (cn == 0 || (cn == 1 && c[0] == '.')) {
            continue;
        }
        if (cn == 2 && c[0] == '.' && c[1] == '.') {
            if (cur->len == 0) {
                return PACK_SKIP_LINK_MISSING; /* above the archive's root */
            }
            while (cur->len > 0 && cur->p[cur->len - 1] != '/') {
                cur->len--;
            }
            if (cur->len > 0) {
                cur->len--;
            }
            is_dir = 1;
            continue;
        }
        const size_t parent = cur->len;
        if ((cur->len > 0 && pack_buf_append(cur, "/", 1) != HDMLP_OK) ||
            pack_buf_append(cur, c, cn) != HDMLP_OK || pack_buf_reserve(cur, 1) != HDMLP_OK) {
            return hd_err(HDMLP_E_NOMEM, "out of memory resolving links in %s", s->path);
        }
        const arc_name *const e = lookup(s, cur, &is_dir);
        if (e && e->kind == NAME_LINK) {
            if (++hops > MAX_LINK_HOPS) {
                return PACK_SKIP_LINK_LOOP;
            }
            /* rest = the link's target, then what was left of rest */
            const arc_link *const t = &s->links[e->ref];
            pack_buf next = {0};
            if (pack_buf_append(&next, s->text.p + t->target_off, (size_t)t->target_len) !=
                    HDMLP_OK ||
                pack_buf_append(&next, "/", 1) != HDMLP_OK ||
                pack_buf_append(&next, rest->p + pos, rest->len - pos) != HDMLP_OK) {
                pack_buf_free(&next);
                return hd_err(HDMLP_E_NOMEM, "out of memory resolving links in %s", s->path);
            }
            pack_buf_free(rest);
            *rest = next;
            cur->len = parent;
            pos = 0;
            if (t->target_len == 0) {
                return PACK_SKIP_LINK_MISSING;
            }
            continue;
        }
        if (e && e->kind == NAME_FILE) {
            for (size_t i = pos; i < rest->len; i++) {
                if (rest->p[i] != '/') {
                    return PACK_SKIP_LINK_MISSING; /* a file used as a directory */
                }
            }
            *item = (uint64_t)(e - s->names); /* its bytes are in the table */
            return LINK_RESOLVED;
        }
        if (!e && !is_dir) {
            return PACK_SKIP_LINK_MISSING;
        }
        is_dir = 1; /* a directory member, or members below it */
    }
    return PACK_SKIP_LINK_DIR;
}

/* Notes the name and bytes of an item of this input (a regular member or a hard link):
 * gathered only when symbolic links need them. */
static int note_item(void *arg, const pack_item *it, const uint8_t *key)
{
    arc_scan *const s = arg;
    if (it->input != s->input) {
        return HDMLP_OK;
    }
    const int rc = note_name(s, (const char *)key, it->key_len, NAME_FILE, 0, it->seq);
    if (rc == HDMLP_OK) {
        s->names[s->n_names - 1].size = it->size;
        s->names[s->n_names - 1].src = it->src;
    }
    return rc;
}

static int resolve_links(arc_scan *s)
{
    if (s->n_links == 0) {
        return HDMLP_OK;
    }
    const int rc0 = pack_items_each(s->ctx, note_item, s);
    if (rc0 != HDMLP_OK) {
        return rc0;
    }
    if (pack_buf_reserve(&s->text, 1) != HDMLP_OK) { /* text.p exists even if all empty */
        return hd_err(HDMLP_E_NOMEM, "out of memory resolving links in %s", s->path);
    }
    for (uint64_t i = 0; i < s->n_names; i++) {
        s->names[i].p = s->text.p + s->names[i].off;
    }
    qsort(s->names, (size_t)s->n_names, sizeof(arc_name), name_cmp);
    pack_buf cur = {0}, rest = {0};
    int rc = HDMLP_OK;
    for (uint64_t i = 0; i < s->n_links && rc == HDMLP_OK; i++) {
        const arc_link *const l = &s->links[i];
        const char *const name = (const char *)s->text.p + l->name_off;
        const char *const target = (const char *)s->text.p + l->target_off;
        uint64_t id = 0;
        const int r = resolve(s, l, &cur, &rest, &id);
        if (r == LINK_RESOLVED) {
            const uint64_t size = s->names[id].size, src = s->names[id].src;
            const char *lab;
            size_t lab_len;
            uint32_t label;
            member_label(name, (size_t)l->name_len, &lab, &lab_len);
            rc = pack_labels_intern(&s->ctx->labels, lab, lab_len, &label);
            if (rc == HDMLP_OK) {
                rc = pack_add_item(s->ctx, s->input, name, (size_t)l->name_len, label, size,
                                   src, name);
            }
        } else if (r < 0) {
            rc = r;
        } else {
            static const char *const why[PACK_SKIP_N] = {
                [PACK_SKIP_LINK_MISSING] = "names no member of the archive",
                [PACK_SKIP_LINK_DIR] = "names a directory",
                [PACK_SKIP_LINK_LOOP] = "is a loop of symbolic links",
            };
            pack_skip(s->ctx, (pack_skip_reason)r,
                      "%s: skipping symbolic link member %s -> %s (%s)", s->path, name, target,
                      why[r]);
        }
    }
    pack_buf_free(&cur);
    pack_buf_free(&rest);
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
    if (rc == HDMLP_OK) { /* the shard's last sample */
        rc = pack_wds_finish(ctx, input, s.path, &s.wds, &s.w);
    }
    pack_wds_free(&s.wds);
    const int rc2 = pack_spill_close(ctx, &s.w, rc == HDMLP_OK);
    if (rc == HDMLP_OK) {
        rc = rc2;
    }
    archive_read_free(s.a);
    if (rc == HDMLP_OK) {
        rc = resolve_hards(&s);
    }
    if (rc == HDMLP_OK) {
        rc = resolve_links(&s);
    }
    pack_buf_free(&s.text);
    hd_free(s.names);
    hd_free(s.links);
    pack_buf_free(&s.htext);
    hd_free(s.hards);
    if (rc == HDMLP_OK && ctx->n_items == s.first_item) {
        rc = hd_err(HDMLP_E_NOTFOUND, "no samples found in %s", s.path);
    }
    return rc;
}
