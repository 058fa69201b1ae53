/* List inputs: lines "PATH<TAB>LABEL". */
#include "pack_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ' && s[i] != '\t') {
            return 0;
        }
    }
    return 1;
}

typedef struct list_scan {
    pack_ctx *ctx;
    uint32_t input;
    const pack_src *src;
    pack_buf path; /* full path of the current entry, NUL-terminated */
} list_scan;

static int add_line(list_scan *s, char *line, size_t n, uint64_t lineno)
{
    const char *const file = s->src->arg;
    const char *const tab = memchr(line, '\t', n);
    if (!tab || memchr(tab + 1, '\t', n - (size_t)(tab + 1 - line)) || tab == line ||
        tab + 1 == line + n || memchr(line, '\0', n)) {
        return hd_err(HDMLP_E_INVAL,
                      "%s:%llu: malformed line (expected PATH<TAB>LABEL with one TAB)", file,
                      (unsigned long long)lineno);
    }
    const size_t path_len = (size_t)(tab - line);
    const char *const label = tab + 1;
    const size_t label_len = n - path_len - 1;
    if (path_len > FMT_MAX_KEY_LEN) {
        return hd_err(HDMLP_E_RANGE, "%s:%llu: path longer than %u bytes", file,
                      (unsigned long long)lineno, FMT_MAX_KEY_LEN);
    }
    s->path.len = 0;
    int rc = HDMLP_OK;
    if (line[0] != '/') {
        rc = pack_buf_append(&s->path, s->src->root, s->src->root_len);
    }
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(&s->path, line, path_len);
    }
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(&s->path, "", 1);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    const char *const full = (const char *)s->path.p;
    struct stat st;
    if (stat(full, &st) != 0) {
        return hd_err(hd_errno_code(errno), "%s:%llu: cannot stat %s: %s", file,
                      (unsigned long long)lineno, full, strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        return hd_err(HDMLP_E_UNSUPPORTED, "%s:%llu: %s is not a regular file", file,
                      (unsigned long long)lineno, full);
    }
    if (faccessat(AT_FDCWD, full, R_OK, AT_EACCESS) != 0) {
        return hd_err(hd_errno_code(errno), "%s:%llu: cannot read %s: %s", file,
                      (unsigned long long)lineno, full, strerror(errno));
    }
    uint32_t id;
    rc = pack_labels_intern(&s->ctx->labels, label, label_len, &id);
    if (rc == HDMLP_OK) {
        rc = pack_add_item(s->ctx, s->input, line, path_len, id, (uint64_t)st.st_size, 0, full);
    }
    return rc;
}

int pack_scan_list(pack_ctx *ctx, uint32_t input)
{
    list_scan s = {.ctx = ctx, .input = input, .src = &ctx->srcs[input]};
    const char *const file = s.src->arg;
    const int use_stdin = strcmp(file, "-") == 0;
    FILE *const f = use_stdin ? stdin : fopen(file, "r");
    if (!f) {
        return hd_err(hd_errno_code(errno), "cannot open list %s: %s", file, strerror(errno));
    }
    const uint64_t first = ctx->n_items;
    char *line = NULL;
    size_t cap = 0;
    uint64_t lineno = 0;
    int rc = HDMLP_OK;
    for (;;) {
        errno = 0;
        const ssize_t r = getline(&line, &cap, f);
        if (r < 0) {
            if (ferror(f)) {
                rc = hd_err(HDMLP_E_IO, "cannot read list %s: %s", file, strerror(errno));
            } else if (errno == ENOMEM) {
                rc = hd_err(HDMLP_E_NOMEM, "out of memory reading %s", file);
            }
            break;
        }
        lineno++;
        size_t n = (size_t)r;
        if (n > 0 && line[n - 1] == '\n') {
            n--;
        }
        if (n > 0 && line[n - 1] == '\r') {
            n--;
        }
        if (is_blank(line, n) || line[0] == '#') {
            continue;
        }
        rc = add_line(&s, line, n, lineno);
        if (rc != HDMLP_OK) {
            break;
        }
        pack_scan_tick(ctx, 0);
        if (pack_cancelled(ctx->o)) {
            rc = hd_err(HDMLP_E_INTERRUPTED, "interrupted");
            break;
        }
    }
    free(line); /* allocated by getline */
    if (!use_stdin) {
        fclose(f);
    }
    pack_buf_free(&s.path);
    if (rc == HDMLP_OK && ctx->n_items == first) {
        rc = hd_err(HDMLP_E_NOTFOUND, "no samples found in %s", file);
    }
    return rc;
}
