/* Directory inputs: sorted bytewise traversal, class subdirectories become labels;
 * symlinks followed (loops left out and counted), nested datasets refused or left out. */
#include "pack_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { ENT_FILE = 1, ENT_DIR = 2, ENT_SKIP = 3 };

typedef struct dir_ent {
    const char *name; /* set once the listing is complete */
    size_t name_off;
    size_t name_len;
    uint64_t size;
    int type;
    int link;  /* reached through a symbolic link */
    dev_t dev; /* of the directory (ENT_DIR) */
    ino_t ino;
} dir_ent;

/* Ancestor directories of the one being listed, to detect loops (bind mounts). */
typedef struct dir_anc {
    dev_t dev;
    ino_t ino;
    const struct dir_anc *up;
} dir_anc;

typedef struct dir_scan {
    pack_ctx *ctx;
    uint32_t input;
    pack_buf path; /* NUL-terminated full path of the current entry */
    size_t root_len;
} dir_scan;

static const char *type_name(mode_t m)
{
    if (S_ISFIFO(m)) {
        return "a fifo";
    }
    if (S_ISSOCK(m)) {
        return "a socket";
    }
    if (S_ISCHR(m)) {
        return "a character device";
    }
    if (S_ISBLK(m)) {
        return "a block device";
    }
    return "of an unknown type";
}

/* path = current dir path; appends "/name" (or "name" after a trailing '/'). Returns the
 * length to restore. */
static int path_push(pack_buf *path, const char *name, size_t len, size_t *restore)
{
    *restore = path->len;
    path->len--; /* drop the NUL */
    if (path->len == 0 || path->p[path->len - 1] != '/') {
        if (pack_buf_append(path, "/", 1) != HDMLP_OK) {
            return HDMLP_E_NOMEM;
        }
    }
    if (pack_buf_append(path, name, len) != HDMLP_OK ||
        pack_buf_append(path, "", 1) != HDMLP_OK) {
        return HDMLP_E_NOMEM;
    }
    return HDMLP_OK;
}

static void path_pop(pack_buf *path, size_t restore)
{
    path->len = restore;
    path->p[restore - 1] = '\0';
}

/* Classifies one directory entry relative to dirfd; path holds its full name. */
static int classify(dir_scan *s, int dfd, const char *name, dir_ent *e)
{
    const char *const full = (const char *)s->path.p;
    pack_ctx *const ctx = s->ctx;
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return hd_err(hd_errno_code(errno), "cannot stat %s: %s", full, strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
        if (fstatat(dfd, name, &st, 0) != 0) {
            const int err = errno;
            if (err == ENOENT) {
                return hd_err(HDMLP_E_NOTFOUND, "%s: dangling symbolic link", full);
            }
            if (err == ELOOP) {
                return hd_err(HDMLP_E_IO, "%s: symbolic link loop", full);
            }
            return hd_err(hd_errno_code(err), "cannot follow symbolic link %s: %s", full,
                          strerror(err));
        }
        e->link = 1;
    }
    if (ctx->has_out && st.st_dev == ctx->out_dev && st.st_ino == ctx->out_ino) {
        pack_skip(ctx, PACK_SKIP_OUTPUT,
                  "%s: the output being replaced, inside the input (left out)", full);
        e->type = ENT_SKIP;
        return HDMLP_OK;
    }
    if (S_ISDIR(st.st_mode)) {
        e->type = ENT_DIR;
        e->dev = st.st_dev;
        e->ino = st.st_ino;
        if (st.st_dev == ctx->tmp_dev && st.st_ino == ctx->tmp_ino) {
            e->type = ENT_SKIP; /* our own temporary output directory: not the user's */
        }
        return HDMLP_OK;
    }
    if (!S_ISREG(st.st_mode)) {
        return hd_err(HDMLP_E_UNSUPPORTED, "%s: is %s, not a regular file or directory", full,
                      type_name(st.st_mode));
    }
    if (faccessat(dfd, name, R_OK, AT_EACCESS) != 0) {
        return hd_err(hd_errno_code(errno), "cannot read %s: %s", full, strerror(errno));
    }
    e->type = ENT_FILE;
    e->size = (uint64_t)st.st_size;
    return HDMLP_OK;
}

static int ent_cmp(const void *a, const void *b)
{
    const dir_ent *const x = a;
    const dir_ent *const y = b;
    return strcmp(x->name, y->name); /* compares as unsigned char: bytewise */
}

/* Reads the names of the directory open as dirfd, sorted bytewise. */
static int list_dir(dir_scan *s, int dfd, pack_buf *names, dir_ent **ents, size_t *n_ents)
{
    DIR *const d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return hd_err(hd_errno_code(errno), "cannot read directory %s: %s",
                      (const char *)s->path.p, strerror(errno));
    }
    size_t n = 0, cap = 0;
    dir_ent *v = NULL;
    int rc = HDMLP_OK;
    for (;;) {
        errno = 0;
        const struct dirent *const de = readdir(d);
        if (!de) {
            if (errno != 0) {
                rc = hd_err(hd_errno_code(errno), "cannot read directory %s: %s",
                            (const char *)s->path.p, strerror(errno));
            }
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            dir_ent *const nv = hd_realloc(v, cap * sizeof(dir_ent));
            if (!nv) {
                rc = hd_err(HDMLP_E_NOMEM, "out of memory listing %s", (const char *)s->path.p);
                break;
            }
            v = nv;
        }
        const size_t len = strlen(de->d_name);
        v[n].name_off = names->len;
        v[n].name_len = len;
        v[n].type = 0;
        v[n].size = 0;
        v[n].link = 0;
        rc = pack_buf_append(names, de->d_name, len + 1);
        if (rc != HDMLP_OK) {
            break;
        }
        n++;
    }
    for (size_t i = 0; rc == HDMLP_OK && i < n; i++) {
        v[i].name = (const char *)names->p + v[i].name_off;
    }
    if (rc == HDMLP_OK && n > 1) {
        qsort(v, n, sizeof(dir_ent), ent_cmp);
    }
    for (size_t i = 0; rc == HDMLP_OK && i < n; i++) {
        size_t restore;
        const char *const name = v[i].name;
        rc = path_push(&s->path, name, v[i].name_len, &restore);
        if (rc == HDMLP_OK) {
            rc = classify(s, dirfd(d), name, &v[i]);
            path_pop(&s->path, restore);
        }
        if (rc == HDMLP_OK && pack_cancelled(s->ctx->o)) {
            rc = hd_err(HDMLP_E_INTERRUPTED, "interrupted");
        }
    }
    closedir(d);
    if (rc != HDMLP_OK) {
        hd_free(v);
        return rc;
    }
    *ents = v;
    *n_ents = n;
    return HDMLP_OK;
}

/* The directory a scan_level visits: its label (depth ≥ 1), or the name of the label it
 * defines (a class directory, interned once it is known not to be a dataset). */
typedef struct dir_visit {
    int depth;
    int follow; /* reached through a symbolic link */
    uint32_t label;
    const char *label_name; /* NULL: `label` is set */
    size_t label_len;
} dir_visit;

static int scan_level(dir_scan *s, const dir_anc *up, const dir_visit *v);

static int open_dir(dir_scan *s, const dir_anc *up, const dir_visit *v, int *fd, dir_anc *self)
{
    const char *const full = (const char *)s->path.p;
    const int nofollow = v->depth > 0 && !v->follow ? O_NOFOLLOW : 0;
    *fd = open(full, O_RDONLY | O_DIRECTORY | O_CLOEXEC | nofollow);
    if (*fd < 0) {
        return hd_err(hd_errno_code(errno), "cannot open directory %s: %s", full,
                      strerror(errno));
    }
    struct stat st;
    if (fstat(*fd, &st) != 0) {
        close(*fd);
        return hd_err(HDMLP_E_IO, "cannot stat %s: %s", full, strerror(errno));
    }
    for (const dir_anc *a = up; a; a = a->up) {
        if (a->dev == st.st_dev && a->ino == st.st_ino) {
            close(*fd);
            return hd_err(HDMLP_E_IO, "%s: directory loop (same directory as an ancestor)",
                          full);
        }
    }
    self->dev = st.st_dev;
    self->ino = st.st_ino;
    self->up = up;
    return HDMLP_OK;
}

/* Whether the regular file at s->path starts with `magic` (errors: no; reading it later
 * reports them). */
static int starts_with(const dir_scan *s, const char *magic)
{
    const int fd = open((const char *)s->path.p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return 0;
    }
    char head[PACK_DATASET_MAGIC_LEN];
    const ssize_t r = pread(fd, head, sizeof(head), 0);
    close(fd);
    return r == (ssize_t)sizeof(head) && memcmp(head, magic, sizeof(head)) == 0;
}

/* Sets *found to the entry that makes the directory at s->path an hdmlp dataset (its index
 * or a segment file), or NULL. */
static int find_dataset_file(dir_scan *s, const dir_ent *ents, size_t n, const dir_ent **found)
{
    *found = NULL;
    for (size_t i = 0; i < n && !*found; i++) {
        const dir_ent *const e = &ents[i];
        const char *const magic =
            e->type == ENT_FILE ? pack_dataset_magic(e->name, e->name_len) : NULL;
        if (!magic) {
            continue;
        }
        size_t restore;
        const int rc = path_push(&s->path, e->name, e->name_len, &restore);
        if (rc != HDMLP_OK) {
            return rc;
        }
        if (starts_with(s, magic)) {
            *found = e;
        }
        path_pop(&s->path, restore);
    }
    return HDMLP_OK;
}

/* A directory holding a dataset: an error (PACK_NESTED_REFUSE) or left out (SKIP). */
static int nested_dataset(dir_scan *s, const dir_visit *v, const dir_ent *file)
{
    const char *const full = (const char *)s->path.p;
    const char *const input = s->ctx->srcs[s->input].arg;
    if (s->ctx->o->nested == PACK_NESTED_SKIP) {
        pack_skip(s->ctx, PACK_SKIP_DATASET, "%s: an hdmlp dataset (it holds %s), left out",
                  full, file->name);
        return HDMLP_OK;
    }
    if (v->depth == 0) {
        return hd_err(HDMLP_E_INVAL,
                      "%s is an hdmlp dataset (it holds %s), not a folder of samples: give it "
                      "to the loader as it is (--allow-nested packs its files as samples)",
                      input, file->name);
    }
    return hd_err(HDMLP_E_INVAL,
                  "%s is an hdmlp dataset (it holds %s) inside the input %s: its files would "
                  "be packed as samples. Move it out of the input, or pass --skip-nested to "
                  "leave it out or --allow-nested to pack its files",
                  full, file->name, input);
}

/* Whether directory entry e (a symlink to a directory) leads back to an ancestor. */
static int is_loop(const dir_ent *e, const dir_anc *self)
{
    for (const dir_anc *a = self; a; a = a->up) {
        if (a->dev == e->dev && a->ino == e->ino) {
            return 1;
        }
    }
    return 0;
}

static int scan_entries(dir_scan *s, const dir_anc *self, const dir_visit *v,
                        const dir_ent *ents, size_t n)
{
    int rc = HDMLP_OK;
    for (size_t i = 0; rc == HDMLP_OK && i < n; i++) {
        const dir_ent *const e = &ents[i];
        if (e->type == ENT_SKIP) {
            continue;
        }
        const char *const name = e->name;
        size_t restore;
        rc = path_push(&s->path, name, e->name_len, &restore);
        if (rc != HDMLP_OK) {
            break;
        }
        const char *const full = (const char *)s->path.p;
        if (e->type == ENT_DIR && e->link && is_loop(e, self)) {
            pack_skip(s->ctx, PACK_SKIP_LINK_LOOP,
                      "%s: symbolic link to a directory it is inside of, a loop (not followed)",
                      full);
        } else if (e->type == ENT_DIR) {
            const dir_visit sub = {
                .depth = v->depth + 1,
                .follow = e->link,
                .label = v->label,
                .label_name = v->depth == 0 ? name : NULL,
                .label_len = e->name_len,
            };
            rc = scan_level(s, self, &sub);
        } else {
            uint32_t lab = v->label;
            if (v->depth == 0) {
                rc = pack_labels_intern(&s->ctx->labels, ".", 1, &lab);
            }
            if (rc == HDMLP_OK) {
                rc = pack_add_item(s->ctx, s->input, full + s->root_len,
                                   s->path.len - 1 - s->root_len, lab, e->size, 0, full);
            }
            pack_scan_tick(s->ctx, 0);
        }
        path_pop(&s->path, restore);
    }
    return rc;
}

static int scan_level(dir_scan *s, const dir_anc *up, const dir_visit *v)
{
    int dfd;
    dir_anc self;
    int rc = open_dir(s, up, v, &dfd, &self);
    if (rc != HDMLP_OK) {
        return rc;
    }
    pack_buf names = {0};
    dir_ent *ents = NULL;
    size_t n = 0;
    rc = list_dir(s, dfd, &names, &ents, &n);
    const dir_ent *dataset_file = NULL;
    if (rc == HDMLP_OK && s->ctx->o->nested != PACK_NESTED_PACK) {
        rc = find_dataset_file(s, ents, n, &dataset_file);
    }
    if (rc == HDMLP_OK && dataset_file) {
        rc = nested_dataset(s, v, dataset_file);
    } else if (rc == HDMLP_OK) {
        dir_visit here = *v;
        if (v->label_name) {
            rc = pack_labels_intern(&s->ctx->labels, v->label_name, v->label_len, &here.label);
            here.label_name = NULL;
        }
        if (rc == HDMLP_OK) {
            rc = scan_entries(s, &self, &here, ents, n);
        }
    }
    hd_free(ents);
    pack_buf_free(&names);
    return rc;
}

int pack_scan_dir(pack_ctx *ctx, uint32_t input)
{
    const pack_src *const src = &ctx->srcs[input];
    dir_scan s = {.ctx = ctx, .input = input};
    int rc = pack_buf_append(&s.path, src->root, src->root_len);
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(&s.path, "", 1);
    }
    s.root_len = src->root_len; /* root ends with '/' */
    const uint64_t before = ctx->n_items;
    if (rc == HDMLP_OK) {
        const dir_visit root = {0, 0, 0, NULL, 0};
        rc = scan_level(&s, NULL, &root);
    }
    pack_buf_free(&s.path);
    if (rc == HDMLP_OK && ctx->n_items == before) {
        rc = hd_err(HDMLP_E_NOTFOUND, "no samples found in %s", src->arg);
    }
    return rc;
}
