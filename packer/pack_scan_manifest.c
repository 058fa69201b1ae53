/* Manifest inputs (PACK_INPUT_MANIFEST): one sample a row, one field a column.
 *   JSONL: one JSON object a line (blank lines and lines starting with '#' are skipped).
 *   CSV:   a header row of column names, then one row a sample (RFC 4180: ',' between
 *          cells, '"' quotes a cell, "" inside it is a '"', a quoted cell may span lines).
 * Columns: the label column (o->label_field, default "label") gives the class; "__key__"
 * the sample's key (default: FILE:LINE); the file columns (o->file_fields, default "image")
 * hold paths, relative to the manifest's directory unless absolute, whose bytes are the
 * value (its type by extension: pack_fields_ext_type); any other column is a value as it
 * stands: numbers become int64 or float64 fields, strings text, other JSON JSON
 * (pack_fields_finish). A JSON null or an empty CSV cell is an absent value. Values are
 * spilled with their trailer, as WebDataset groups are. */
#include "pack_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_COLUMN "__key__"

typedef struct man_scan {
    pack_ctx *ctx;
    uint32_t input;
    const pack_src *src;
    const char *file;
    int csv;
    pack_spill_writer w;
    pack_buf key, path, text, label, header; /* header: CSV column names, NUL-separated */
    uint32_t n_header;
    uint64_t line;
    int first_row, labelled;
    /* the open row */
    uint64_t first_src, bytes;
    uint32_t n_vals;
    pack_field_val vals[PACK_MAX_FIELDS];
    int has_key, has_label;
} man_scan;

static bool in_list(const char *list, const char *name, size_t len)
{
    for (const char *p = list; p != NULL && *p != '\0';) {
        const char *const comma = strchr(p, ',');
        const size_t l = comma ? (size_t)(comma - p) : strlen(p);
        if (l == len && memcmp(p, name, len) == 0) {
            return true;
        }
        p = comma ? comma + 1 : NULL;
    }
    return false;
}

static bool same(const char *a, const char *name, size_t len)
{
    return strlen(a) == len && memcmp(a, name, len) == 0;
}

/* ---- the open row ------------------------------------------------------------------------ */

static int row_err(man_scan *s, int code, const char *col, size_t col_len, const char *what)
{
    return hd_err(code, "%s:%llu: column %.*s: %s", s->file, (unsigned long long)s->line,
                  (int)col_len, col, what);
}

/* rc, named by the open row and column when it is an error (pack_fields.c's name only the
 * field). */
static int in_column(const man_scan *s, const char *col, size_t col_len, int rc)
{
    return rc == HDMLP_OK ? rc
                          : hd_err_wrap(rc, "%s:%llu: column %.*s: ", s->file,
                                        (unsigned long long)s->line, (int)col_len, col);
}

/* Spills the file at `path` (relative to the manifest's directory unless absolute): its
 * size in *size, its first bytes in head. */
static int spill_file(man_scan *s, const char *col, size_t col_len, const char *rel,
                      uint64_t *size, uint8_t *head, size_t *head_len)
{
    s->path.len = 0;
    int rc =
        rel[0] == '/' ? HDMLP_OK : pack_buf_append(&s->path, s->src->root, s->src->root_len);
    if (rc == HDMLP_OK) {
        rc = pack_buf_append(&s->path, rel, strlen(rel) + 1);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    const char *const full = (const char *)s->path.p;
    const int fd = open(full, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const int e = errno;
        if (fd >= 0) {
            close(fd);
        }
        char what[1024];
        snprintf(what, sizeof(what), "cannot read %s: %s", full,
                 fd >= 0 && e == 0 ? "not a regular file" : strerror(e));
        return row_err(s, fd >= 0 && e == 0 ? HDMLP_E_UNSUPPORTED : hd_errno_code(e), col,
                       col_len, what);
    }
    *size = *head_len = 0;
    for (;;) {
        uint8_t *p;
        size_t avail;
        rc = pack_spill_reserve(&s->w, &p, &avail);
        if (rc != HDMLP_OK) {
            break;
        }
        const ssize_t r = read(fd, p, avail);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            rc = hd_err(hd_errno_code(errno), "%s:%llu: cannot read %s: %s", s->file,
                        (unsigned long long)s->line, full, strerror(errno));
            break;
        }
        if (r == 0) {
            break;
        }
        const size_t k = PACK_NPY_HEAD_MAX - *head_len < (size_t)r
                             ? PACK_NPY_HEAD_MAX - *head_len
                             : (size_t)r;
        memcpy(head + *head_len, p, k);
        *head_len += k;
        s->w.len += (size_t)r;
        *size += (uint64_t)r;
        pack_scan_tick(s->ctx, *size);
    }
    close(fd);
    if (rc == HDMLP_OK && *size > UINT32_MAX) {
        rc = row_err(s, HDMLP_E_RANGE, col, col_len, "a file over 4 GiB - 1");
    }
    return rc;
}

/* One column's value of the open row: v[0..n) a JSON value's text or a CSV cell (JSON
 * strings still quoted). */
static int add_value(man_scan *s, const char *col, size_t col_len, const uint8_t *v, size_t n)
{
    pack_ctx *const ctx = s->ctx;
    const pack_opts *const o = ctx->o;
    const int quoted = !s->csv && n > 0 && v[0] == '"';
    if ((!s->csv && n == 4 && memcmp(v, "null", 4) == 0) || (s->csv && n == 0)) {
        return HDMLP_OK; /* absent */
    }
    const int is_key = same(KEY_COLUMN, col, col_len);
    const int is_label = same(o->label_field ? o->label_field : "label", col, col_len);
    const int is_file = in_list(o->file_fields ? o->file_fields : "image", col, col_len);
    s->text.len = 0;
    if (is_key || is_label || is_file) { /* their text: unquoted */
        const int number = v[0] == '-' || (v[0] >= '0' && v[0] <= '9'); /* JSON checked */
        if (!s->csv && !quoted && !(is_label && number)) {
            return row_err(s, HDMLP_E_INVAL, col, col_len,
                           is_label ? "a label must be a string or a number"
                                    : "must be a string");
        }
        int rc = pack_buf_reserve(&s->text, n + 1);
        if (rc != HDMLP_OK) {
            return rc;
        }
        s->text.len = quoted ? pack_json_unescape(v + 1, n - 2, s->text.p) : n;
        if (!quoted) {
            memcpy(s->text.p, v, n);
        }
        if (s->text.len == SIZE_MAX || s->text.len == 0 ||
            memchr(s->text.p, '\0', s->text.len)) {
            return row_err(s, HDMLP_E_INVAL, col, col_len,
                           s->text.len == 0 ? "an empty string" : "a string with a NUL byte");
        }
        s->text.p[s->text.len] = '\0';
    }
    if (is_key) {
        if (s->has_key) {
            return row_err(s, HDMLP_E_INVAL, col, col_len, "given twice");
        }
        s->has_key = 1;
        s->key.len = 0;
        return pack_buf_append(&s->key, s->text.p, s->text.len);
    }
    if (is_label) {
        if (s->has_label) {
            return row_err(s, HDMLP_E_INVAL, col, col_len, "given twice");
        }
        s->has_label = 1;
        s->label.len = 0;
        return pack_buf_append(&s->label, s->text.p, s->text.len);
    }
    const uint64_t src = s->w.pos + s->w.len;
    uint8_t head[PACK_NPY_HEAD_MAX];
    size_t head_len = 0;
    uint64_t size = n;
    uint32_t id = 0;
    int rc;
    if (is_file) {
        const char *const rel = (const char *)s->text.p;
        const char *const dot = strrchr(rel, '.');
        const char *const slash = strrchr(rel, '/');
        const uint8_t type = dot && (!slash || dot > slash)
                                 ? pack_fields_ext_type(dot + 1, strlen(dot + 1))
                                 : FMT_FIELD_BYTES;
        rc = in_column(s, col, col_len,
                       pack_fields_id(&ctx->fields, col, col_len, PACK_FORM_FILE, type, &id));
        if (rc == HDMLP_OK) {
            rc = spill_file(s, col, col_len, rel, &size, head, &head_len);
        }
        if (rc == HDMLP_OK) {
            rc = in_column(s, col, col_len,
                           pack_fields_note(&ctx->fields, id, head, head_len, size));
        }
    } else {
        const pack_form form = s->csv ? PACK_FORM_CELL : PACK_FORM_JSON;
        rc = in_column(s, col, col_len,
                       pack_fields_id(&ctx->fields, col, col_len, form, 0, &id));
        if (rc == HDMLP_OK) {
            rc = in_column(s, col, col_len, pack_fields_note(&ctx->fields, id, v, n, n));
        }
        if (rc == HDMLP_OK && n > UINT32_MAX) {
            rc = row_err(s, HDMLP_E_RANGE, col, col_len, "a value over 4 GiB - 1");
        }
        if (rc == HDMLP_OK) {
            rc = pack_spill_append(&s->w, v, n);
        }
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    for (uint32_t i = 0; i < s->n_vals; i++) {
        if (s->vals[i].field == id) {
            return row_err(s, HDMLP_E_INVAL, col, col_len, "given twice");
        }
    }
    if (s->n_vals == 0) {
        s->first_src = src;
    }
    s->vals[s->n_vals++] = (pack_field_val){id, size};
    s->bytes += size;
    return HDMLP_OK;
}

static void row_begin(man_scan *s)
{
    s->n_vals = 0;
    s->bytes = 0;
    s->has_key = s->has_label = 0;
}

/* Whether a label is a canonical class number (0, or digits without a leading 0). */
static bool class_number(const uint8_t *t, size_t n)
{
    if (n == 0 || n > 8 || (n > 1 && t[0] == '0')) {
        return false;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9') {
            return false;
        }
        v = v * 10 + (t[i] - '0');
    }
    return v <= PACK_WDS_LABEL_MAX;
}

static int row_end(man_scan *s)
{
    pack_ctx *const ctx = s->ctx;
    const char *const label_col = ctx->o->label_field ? ctx->o->label_field : "label";
    if (s->first_row) {
        s->labelled = s->has_label;
        s->first_row = 0;
    }
    if (s->labelled != s->has_label) {
        return hd_err(HDMLP_E_INVAL,
                      "%s:%llu: %s the label column %s, which the first row %s (every row "
                      "has a label or none does)",
                      s->file, (unsigned long long)s->line, s->has_label ? "has" : "lacks",
                      label_col, s->labelled ? "has" : "lacks");
    }
    char where[600];
    snprintf(where, sizeof(where), "%s:%llu", s->file, (unsigned long long)s->line);
    int rc =
        pack_fields_check_required(&ctx->fields, ctx->o->require_fields, s->vals, s->n_vals);
    if (rc != HDMLP_OK) {
        return hd_err_wrap(rc, "%s: ", where);
    }
    if (s->n_vals == 0) {
        return hd_err(HDMLP_E_INVAL, "%s:%llu: a sample without values", s->file,
                      (unsigned long long)s->line);
    }
    uint32_t label = 0;
    if (s->has_label) {
        ctx->label_names_numeric &= class_number(s->label.p, s->label.len);
        rc = pack_labels_intern(&ctx->labels, (const char *)s->label.p, s->label.len, &label);
    }
    if (rc == HDMLP_OK && !s->has_key) {
        const char *const base = strrchr(s->file, '/');
        char k[512];
        const int kl = snprintf(k, sizeof(k), "%s:%llu", base ? base + 1 : s->file,
                                (unsigned long long)s->line);
        s->key.len = 0;
        rc = pack_buf_append(&s->key, k, (size_t)kl < sizeof(k) ? (size_t)kl : sizeof(k) - 1);
    }
    for (uint32_t i = 0; rc == HDMLP_OK && i < s->n_vals; i++) {
        ctx->fields.count[s->vals[i].field]++;
    }
    if (rc == HDMLP_OK) {
        rc = pack_fields_put_trailer(&s->w, s->vals, s->n_vals);
    }
    if (rc == HDMLP_OK) {
        rc = pack_add_item(ctx, s->input, s->key.p ? (const char *)s->key.p : "", s->key.len,
                           label, s->bytes + (uint64_t)s->n_vals * 8 + 8, s->first_src, where);
    }
    pack_scan_tick(ctx, 0);
    return rc;
}

/* ---- JSONL ------------------------------------------------------------------------------- */

static int json_row(man_scan *s, const uint8_t *p, const uint8_t *e)
{
    const uint8_t *const start = p;
    p = pack_json_ws(p, e);
    if (p >= e || *p != '{') {
        return hd_err(HDMLP_E_INVAL, "%s:%llu: not a JSON object (one object a line)", s->file,
                      (unsigned long long)s->line);
    }
    row_begin(s);
    p = pack_json_ws(p + 1, e);
    if (p < e && *p == '}') {
        p++;
    } else {
        for (;;) {
            const uint8_t *const k = p;
            const uint8_t *v;
            if (p >= e || *p != '"' || !(p = pack_json_string(p, e))) {
                break;
            }
            int rc = pack_buf_reserve(&s->path, (size_t)(p - k));
            const size_t kl =
                rc == HDMLP_OK ? pack_json_unescape(k + 1, (size_t)(p - k - 2), s->path.p) : 0;
            if (rc != HDMLP_OK) {
                return rc;
            }
            if (kl == SIZE_MAX) {
                break;
            }
            char col[PACK_FIELD_NAME_MAX + 1];
            if (kl == 0 || kl > PACK_FIELD_NAME_MAX) {
                return hd_err(HDMLP_E_INVAL, "%s:%llu: a column name of %zu bytes (1 to %u)",
                              s->file, (unsigned long long)s->line, kl, PACK_FIELD_NAME_MAX);
            }
            memcpy(col, s->path.p, kl);
            p = pack_json_ws(p, e);
            if (p >= e || *p != ':') {
                break;
            }
            v = p = pack_json_ws(p + 1, e);
            if (!(p = pack_json_value(p, e))) {
                break;
            }
            rc = add_value(s, col, kl, v, (size_t)(p - v));
            if (rc != HDMLP_OK) {
                return rc;
            }
            p = pack_json_ws(p, e);
            if (p < e && *p == '}') {
                p++;
                break;
            }
            if (p >= e || *p != ',') {
                break;
            }
            p = pack_json_ws(p + 1, e);
        }
    }
    if (p > start && p[-1] == '}' && pack_json_ws(p, e) == e) {
        return row_end(s);
    }
    return hd_err(HDMLP_E_INVAL, "%s:%llu: malformed JSON at byte %zu of the line", s->file,
                  (unsigned long long)s->line, (size_t)(p != NULL ? p - start : 0) + 1);
}

/* ---- CSV --------------------------------------------------------------------------------- */

/* Splits the record r[0..n) into cells, unquoted in place, calling each(s, i, cell, len). */
static int csv_cells(man_scan *s, uint8_t *r, size_t n,
                     int (*each)(man_scan *, uint32_t, const uint8_t *, size_t))
{
    uint32_t i = 0;
    size_t p = 0;
    for (;;) {
        size_t o = p, start = p;
        if (p < n && r[p] == '"') {
            for (p++;; p++) {
                if (p >= n) {
                    return hd_err(HDMLP_E_INVAL, "%s:%llu: a quoted cell without its end",
                                  s->file, (unsigned long long)s->line);
                }
                if (r[p] == '"' && p + 1 < n && r[p + 1] == '"') {
                    r[o++] = '"';
                    p++;
                } else if (r[p] == '"') {
                    p++;
                    break;
                } else {
                    r[o++] = r[p];
                }
            }
            if (p < n && r[p] != ',') {
                return hd_err(HDMLP_E_INVAL, "%s:%llu: text after a quoted cell's end", s->file,
                              (unsigned long long)s->line);
            }
        } else {
            while (p < n && r[p] != ',') {
                p++;
            }
            o = p;
        }
        const int rc = each(s, i++, r + start, o - start);
        if (rc != HDMLP_OK) {
            return rc;
        }
        if (p >= n) {
            return HDMLP_OK;
        }
        p++; /* the ',' */
    }
}

static int header_cell(man_scan *s, uint32_t i, const uint8_t *c, size_t n)
{
    (void)i;
    if (n == 0 || n > PACK_FIELD_NAME_MAX) {
        return hd_err(HDMLP_E_INVAL, "%s:%llu: column %u's name has %zu bytes (1 to %u)",
                      s->file, (unsigned long long)s->line, s->n_header + 1, n,
                      PACK_FIELD_NAME_MAX);
    }
    s->n_header++;
    const int rc = pack_buf_append(&s->header, c, n);
    return rc == HDMLP_OK ? pack_buf_append(&s->header, "", 1) : rc;
}

static int row_cell(man_scan *s, uint32_t i, const uint8_t *c, size_t n)
{
    if (i >= s->n_header) {
        return hd_err(HDMLP_E_INVAL, "%s:%llu: more cells than the header's %u columns",
                      s->file, (unsigned long long)s->line, s->n_header);
    }
    const char *name = (const char *)s->header.p;
    for (uint32_t k = 0; k < i; k++) {
        name += strlen(name) + 1;
    }
    return add_value(s, name, strlen(name), c, n);
}

/* Whether r[0..n) ends inside a quoted cell (the record continues on the next line). */
static bool csv_open_quote(const uint8_t *r, size_t n)
{
    bool in = false;
    for (size_t i = 0; i < n; i++) {
        if (r[i] == '"') {
            in = !in;
        }
    }
    return in;
}

/* ---- the scan ---------------------------------------------------------------------------- */

static bool is_csv(const char *file)
{
    const size_t n = strlen(file);
    return n >= 4 && strcasecmp(file + n - 4, ".csv") == 0;
}

static int scan_lines(man_scan *s, FILE *f)
{
    char *line = NULL;
    size_t cap = 0;
    pack_buf rec = {0};
    uint64_t rec_line = 0;
    int rc = HDMLP_OK;
    for (;;) {
        errno = 0;
        const ssize_t r = getline(&line, &cap, f);
        if (r < 0) {
            if (ferror(f)) {
                rc =
                    hd_err(HDMLP_E_IO, "cannot read manifest %s: %s", s->file, strerror(errno));
            } else if (errno == ENOMEM) {
                rc = hd_err(HDMLP_E_NOMEM, "out of memory reading %s", s->file);
            } else if (rec.len > 0) {
                s->line = rec_line;
                rc = hd_err(HDMLP_E_INVAL, "%s:%llu: a quoted cell without its end", s->file,
                            (unsigned long long)rec_line);
            }
            break;
        }
        s->line++;
        size_t n = (size_t)r;
        const uint8_t *l = (const uint8_t *)line;
        if (s->line == 1 && n >= 3 && memcmp(l, "\xEF\xBB\xBF", 3) == 0) {
            l += 3; /* a UTF-8 byte order mark */
            n -= 3;
        }
        if (rec.len == 0) {
            rec_line = s->line;
        }
        rc = pack_buf_append(&rec, l, n);
        if (rc != HDMLP_OK) {
            break;
        }
        if (s->csv && csv_open_quote(rec.p, rec.len)) {
            continue; /* a quoted cell spans lines */
        }
        n = rec.len;
        while (n > 0 && (rec.p[n - 1] == '\n' || rec.p[n - 1] == '\r')) {
            n--;
        }
        const uint64_t here = s->line;
        s->line = rec_line;
        const size_t bad = pack_utf8_bad(rec.p, n);
        if (bad != n) {
            rc = hd_err(HDMLP_E_INVAL, "%s:%llu: not UTF-8 at byte %zu of the %s", s->file,
                        (unsigned long long)rec_line, bad + 1, s->csv ? "record" : "line");
            break;
        }
        bool blank = true;
        for (size_t i = 0; i < n && blank; i++) {
            blank = rec.p[i] == ' ' || rec.p[i] == '\t';
        }
        if (!blank && !(!s->csv && rec.p[0] == '#')) {
            if (s->csv && s->n_header == 0) {
                rc = csv_cells(s, rec.p, n, header_cell);
            } else if (s->csv) {
                row_begin(s);
                rc = csv_cells(s, rec.p, n, row_cell);
                rc = rc == HDMLP_OK ? row_end(s) : rc;
            } else {
                rc = json_row(s, rec.p, rec.p + n);
            }
        }
        s->line = here;
        rec.len = 0;
        if (rc != HDMLP_OK) {
            break;
        }
        if (pack_cancelled(s->ctx->o)) {
            rc = hd_err(HDMLP_E_INTERRUPTED, "interrupted");
            break;
        }
    }
    free(line); /* allocated by getline */
    pack_buf_free(&rec);
    return rc;
}

int pack_scan_manifest(pack_ctx *ctx, uint32_t input)
{
    man_scan s = {.ctx = ctx, .input = input, .src = &ctx->srcs[input], .first_row = 1};
    s.file = s.src->arg;
    s.csv = is_csv(s.file);
    FILE *const f = fopen(s.file, "r");
    if (!f) {
        return hd_err(hd_errno_code(errno), "cannot open manifest %s: %s", s.file,
                      strerror(errno));
    }
    const uint64_t first = ctx->n_items;
    int rc = pack_spill_open(ctx, &s.w);
    if (rc == HDMLP_OK) {
        rc = scan_lines(&s, f);
    }
    const int rc2 = pack_spill_close(ctx, &s.w, rc == HDMLP_OK);
    rc = rc != HDMLP_OK ? rc : rc2;
    fclose(f);
    if (rc == HDMLP_OK && ctx->n_items == first) {
        rc = hd_err(HDMLP_E_NOTFOUND, "no samples found in %s", s.file);
    }
    if (rc == HDMLP_OK && ctx->n_items > first) {
        ctx->labelled_manifests += (uint32_t)s.labelled;
    }
    pack_buf_free(&s.key);
    pack_buf_free(&s.path);
    pack_buf_free(&s.text);
    pack_buf_free(&s.label);
    pack_buf_free(&s.header);
    return rc;
}
