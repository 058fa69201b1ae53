/* pack_run(): scan → sort → shuffle → (dictionary) → chunks → index → commit. */
#include "fmt_rng.h"
#include "pack_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

void pack_opts_init(pack_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->chunk_size = PACK_CHUNK_AUTO;
    o->compress = PACK_COMPRESS_AUTO;
    o->level = PACK_DEFAULT_LEVEL;
    o->threads = 1;
    o->segment_size = PACK_DEFAULT_SEGMENT_SIZE;
    o->image_quality = PACK_IMAGE_DEFAULT_QUALITY;
}

/* PACK_CHUNK_AUTO's K for n samples of raw bytes in all (packer.h). */
static uint32_t auto_chunk_size(uint64_t n, uint64_t raw)
{
    const uint64_t mean = n > 0 && raw / n > 0 ? raw / n : 1;
    const uint64_t most = n / 256 > PACK_CHUNK_MIN_AUTO ? n / 256 : PACK_CHUNK_MIN_AUTO;
    uint64_t k = (PACK_CHUNK_TARGET + mean - 1) / mean;
    k = k < PACK_CHUNK_MIN_AUTO ? PACK_CHUNK_MIN_AUTO : k;
    k = k > most ? most : k;
    return (uint32_t)(k > FMT_MAX_CHUNK_SIZE ? FMT_MAX_CHUNK_SIZE : k);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int check_opts(const pack_opts *o, size_t n_inputs, const char *out)
{
    if (o->chunk_size > FMT_MAX_CHUNK_SIZE) {
        return hd_err(HDMLP_E_INVAL, "chunk size must be 1..%u (or auto)", FMT_MAX_CHUNK_SIZE);
    }
    if (o->threads == 0 || o->threads > PACK_MAX_THREADS) {
        return hd_err(HDMLP_E_INVAL, "threads must be 1..%u", PACK_MAX_THREADS);
    }
    if (o->compress != PACK_COMPRESS_NONE && (o->level < 1 || o->level > 22)) {
        return hd_err(HDMLP_E_INVAL, "zstd level must be 1..22");
    }
    if (o->compress != PACK_COMPRESS_NONE && o->compress != PACK_COMPRESS_AUTO &&
        o->compress != PACK_COMPRESS_ZSTD) {
        return hd_err(HDMLP_E_INVAL, "unknown compression mode");
    }
    if (o->dict && o->compress == PACK_COMPRESS_NONE) {
        return hd_err(HDMLP_E_INVAL, "a dictionary needs compression");
    }
    if (o->nested != PACK_NESTED_REFUSE && o->nested != PACK_NESTED_SKIP &&
        o->nested != PACK_NESTED_PACK) {
        return hd_err(HDMLP_E_INVAL, "unknown nested dataset mode");
    }
    if (o->image_max_side > 65535 || o->image_quality < 1 || o->image_quality > 100) {
        return hd_err(HDMLP_E_INVAL, "image max side must be 0..65535 and quality 1..100");
    }
    if (n_inputs == 0 || n_inputs > UINT16_MAX) {
        return hd_err(HDMLP_E_INVAL, "need 1..%u inputs", UINT16_MAX);
    }
    if (!out || !*out) {
        return hd_err(HDMLP_E_INVAL, "no output directory");
    }
    return HDMLP_OK;
}

/* root + '/' unless it already ends with one ("" stays ""). */
static int set_root(pack_src *s, const char *dir, size_t len)
{
    const int slash = len > 0 && dir[len - 1] != '/';
    s->root = hd_malloc(len + 2);
    if (!s->root) {
        return hd_err(HDMLP_E_NOMEM, "out of memory");
    }
    memcpy(s->root, dir, len);
    if (slash) {
        s->root[len] = '/';
    }
    s->root_len = len + (size_t)slash;
    s->root[s->root_len] = '\0';
    return HDMLP_OK;
}

static int setup_srcs(pack_ctx *ctx, const pack_input *inputs, size_t n)
{
    ctx->srcs = hd_calloc(n, sizeof(pack_src));
    if (!ctx->srcs) {
        return hd_err(HDMLP_E_NOMEM, "out of memory");
    }
    ctx->n_srcs = n;
    for (size_t i = 0; i < n; i++) {
        pack_src *const s = &ctx->srcs[i];
        const char *const path = inputs[i].path;
        s->arg = path;
        int rc;
        if (ctx->o->webdataset && inputs[i].kind == PACK_INPUT_LIST) {
            return hd_err(HDMLP_E_INVAL,
                          "%s: a list input with --webdataset (which takes WebDataset "
                          "shards: archives)",
                          path);
        }
        if ((inputs[i].kind == PACK_INPUT_MANIFEST) !=
                (inputs[0].kind == PACK_INPUT_MANIFEST) ||
            (inputs[i].kind == PACK_INPUT_MANIFEST && ctx->o->webdataset)) {
            return hd_err(HDMLP_E_INVAL,
                          "%s: manifests are packed on their own (not with %s inputs)", path,
                          ctx->o->webdataset ? "WebDataset" : "folder, archive or list");
        }
        if (inputs[i].kind == PACK_INPUT_MANIFEST) {
            s->kind = PACK_SRC_MANIFEST;
            ctx->manifests++;
            const char *const slash = strrchr(path, '/');
            rc = slash ? set_root(s, path, (size_t)(slash - path) + 1) : set_root(s, "", 0);
        } else if (inputs[i].kind == PACK_INPUT_LIST) {
            s->kind = PACK_SRC_LIST;
            const char *const slash = strrchr(path, '/');
            if (strcmp(path, "-") == 0 || !slash) {
                rc = set_root(s, "", 0);
            } else {
                rc = set_root(s, path, (size_t)(slash - path) + 1);
            }
        } else {
            struct stat st;
            if (stat(path, &st) != 0) {
                return hd_err(hd_errno_code(errno), "cannot access %s: %s", path,
                              strerror(errno));
            }
            if (S_ISDIR(st.st_mode) && ctx->o->webdataset) {
                return hd_err(HDMLP_E_INVAL,
                              "%s: a directory input with --webdataset (which takes WebDataset "
                              "shards: archives)",
                              path);
            }
            if (S_ISDIR(st.st_mode)) {
                s->kind = PACK_SRC_DIR;
                rc = set_root(s, path, strlen(path));
            } else if (S_ISREG(st.st_mode)) {
                s->kind = PACK_SRC_ARCHIVE;
                rc = set_root(s, "", 0);
            } else {
                return hd_err(HDMLP_E_UNSUPPORTED,
                              "%s: not a directory or an archive (use --list for lists)", path);
            }
        }
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    return HDMLP_OK;
}

/* Appends name to the ", "-separated list in buf (cap bytes), escaped as --info prints
 * names; a list that does not fit ends with "...". */
static void list_name(char *buf, size_t cap, const uint8_t *name, size_t len)
{
    static const char more[] = "...";
    const size_t at = strlen(buf);
    if (at >= 3 && strcmp(buf + at - 3, more) == 0) {
        return; /* full */
    }
    char tmp[PACK_EMPTY_LABEL_NAMES];
    size_t n = 0;
    for (size_t i = 0; i < len && n + 5 < sizeof(tmp); i++) {
        const uint8_t c = name[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            tmp[n++] = (char)c;
        } else {
            n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, "\\x%02x", c);
        }
    }
    const size_t sep = at > 0 ? 2 : 0;
    /* keep room for ", ..." and the NUL */
    const char *const add = at + sep + n + 2 + sizeof(more) <= cap ? tmp : more;
    const size_t add_len = add == tmp ? n : sizeof(more) - 1;
    if (sep) {
        memcpy(buf + at, ", ", 2);
    }
    memcpy(buf + at + sep, add, add_len);
    buf[at + sep + add_len] = '\0';
}

/* Counts the labels without samples (class directories holding none, or only skipped
 * entries) and names them in ctx->empty_label_names. */
static void find_empty_labels(pack_ctx *ctx)
{
    const pack_labels *const lt = &ctx->labels;
    ctx->empty_labels = 0;
    ctx->empty_label_names[0] = '\0';
    for (uint32_t l = 0; l < lt->n; l++) {
        const uint32_t id = lt->order[l];
        if (!lt->used[id]) {
            ctx->empty_labels++;
            list_name(ctx->empty_label_names, sizeof(ctx->empty_label_names),
                      lt->names.p + lt->off[id], lt->len[id]);
        }
    }
}

static int scan_all(pack_ctx *ctx)
{
    for (size_t i = 0; i < ctx->n_srcs; i++) {
        memset(ctx->skip_warned, 0, sizeof(ctx->skip_warned));
        int rc;
        switch (ctx->srcs[i].kind) {
        case PACK_SRC_DIR:
            rc = pack_scan_dir(ctx, (uint32_t)i);
            break;
        case PACK_SRC_ARCHIVE:
            rc = pack_scan_archive(ctx, (uint32_t)i);
            break;
        case PACK_SRC_MANIFEST:
            rc = pack_scan_manifest(ctx, (uint32_t)i);
            break;
        default:
            rc = pack_scan_list(ctx, (uint32_t)i);
            break;
        }
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    pack_report(ctx->o, PACK_PHASE_SCAN, ctx->n_items, ctx->n_items, ctx->raw_bytes,
                ctx->raw_bytes);
    if (ctx->manifests > 0) {
        const char *const col = ctx->o->label_field ? ctx->o->label_field : "label";
        if (ctx->labelled_manifests != 0 && ctx->labelled_manifests != ctx->manifests) {
            return hd_err(HDMLP_E_INVAL,
                          "%u of %u manifests have the label column %s (all or none must)",
                          ctx->labelled_manifests, ctx->manifests, col);
        }
        snprintf(ctx->fields.label_name, sizeof(ctx->fields.label_name), "%s",
                 ctx->labelled_manifests > 0 ? col : "");
        ctx->labels.numeric = ctx->label_names_numeric; /* class numbers in number order */
    }
    const int rc = pack_labels_finish(&ctx->labels); /* the sort applies the final ids */
    if (rc != HDMLP_OK) {
        return rc;
    }
    if (pack_has_fields(ctx)) {
        pack_fields_finish(&ctx->fields);
        if (!ctx->fields.plain && ctx->o->image_max_side > 0) {
            return hd_err(HDMLP_E_UNSUPPORTED,
                          "--image-max-side with samples of several fields (%u besides the "
                          "label): images among other fields are stored as they are",
                          ctx->fields.n);
        }
    }
    find_empty_labels(ctx);
    return HDMLP_OK;
}

/* What the driver gathers from the sorted items as the sort hands them over: the dataset
 * id and each chunk's raw bytes.
 *
 * The dataset id is XXH3-64 over (seed u64, K u32, N u64, then per sample in sorted order:
 * key length u32, key bytes, label u32, raw size u64). Sorted order, not packed order (as
 * before the streaming packer): the packed order is a function of (seed, N) over the
 * sorted order, so the id covers it all the same, and sorted order is the one the items
 * come in sequentially; packed order would take two random reads per sample more. */
typedef struct sorted_pass {
    XXH3_state_t st;
    uint32_t k;
    uint64_t *chunk_raw;
} sorted_pass;

static int sorted_item(void *arg, uint64_t id, uint64_t pos, const pack_item *it,
                       const uint8_t *key)
{
    (void)id;
    sorted_pass *const sp = arg;
    uint8_t b[12];
    fmt_st32(b, it->key_len);
    XXH3_64bits_update(&sp->st, b, 4);
    XXH3_64bits_update(&sp->st, key, it->key_len);
    fmt_st32(b, it->label);
    fmt_st64(b + 4, it->size);
    XXH3_64bits_update(&sp->st, b, 12);
    sp->chunk_raw[pos / sp->k] += it->size;
    return HDMLP_OK;
}

/* Everything pack_run allocates, so one cleanup path frees it. */
typedef struct run_state {
    pack_ctx ctx;
    int tmp_fd;
    pack_order *order;
    uint64_t *chunk_raw;
    uint8_t *dict;
    size_t dict_len;
    fmt_chunk *chunks;
    fmt_label *labels;
    pack_segw segw;
    pack_tablew tablew;
    pack_buf strings; /* the index's: label names, then field names */
    uint64_t dataset_id;
    pack_image_totals img;
    uint64_t stored_bytes;
    uint64_t codec_count[3];
    uint8_t *index;
    size_t index_len;
} run_state;

static void run_free(run_state *r)
{
    pack_ctx *const ctx = &r->ctx;
    for (size_t i = 0; i < ctx->n_srcs; i++) {
        hd_free(ctx->srcs[i].root);
    }
    hd_free(ctx->srcs);
    pack_items_free(ctx);
    pack_packed_free(&ctx->packed);
    pack_labels_free(&ctx->labels);
    pack_fields_free(&ctx->fields);
    if (ctx->spill_fd >= 0) {
        close(ctx->spill_fd);
    }
    if (r->tmp_fd >= 0) {
        close(r->tmp_fd);
    }
    hd_free(ctx->tmpdir);
    hd_free(r->order);
    hd_free(r->chunk_raw);
    hd_free(r->dict);
    hd_free(r->chunks);
    hd_free(r->labels);
    pack_segw_free(&r->segw);
    pack_tablew_free(&r->tablew);
    pack_buf_free(&r->strings);
    hd_free(r->index);
}

/* Sorts, shuffles, trains the dictionary and writes the segments. */
static int write_data(run_state *r)
{
    pack_ctx *const ctx = &r->ctx;
    const pack_opts *const o = ctx->o;
    const uint64_t n = ctx->n_items;
    const uint64_t n_chunks = (n + o->chunk_size - 1) / o->chunk_size;
    r->order = hd_malloc(sizeof(pack_order));
    r->chunk_raw = hd_calloc((size_t)n_chunks, sizeof(uint64_t));
    r->chunks = hd_calloc((size_t)n_chunks, sizeof(fmt_chunk));
    if (!r->order || !r->chunk_raw || !r->chunks) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for %llu chunks",
                      (unsigned long long)n_chunks);
    }
    pack_order_init(r->order, o->seed, n);
    sorted_pass sp = {.k = o->chunk_size, .chunk_raw = r->chunk_raw};
    XXH3_INITSTATE(&sp.st);
    XXH3_64bits_reset(&sp.st);
    uint8_t b[20];
    fmt_st64(b, o->seed);
    fmt_st32(b + 8, o->chunk_size);
    fmt_st64(b + 12, n);
    XXH3_64bits_update(&sp.st, b, 20);
    int rc = pack_sort_items(ctx, r->order, sorted_item, &sp);
    if (rc != HDMLP_OK) {
        return rc;
    }
    r->dataset_id = XXH3_64bits_digest(&sp.st);
    if (o->dict) {
        rc = pack_train_dict(ctx, &r->dict, &r->dict_len);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    pack_segw_init(&r->segw, r->tmp_fd, ctx->tmpdir, o->segment_size);
    rc = pack_tablew_open(&r->tablew, r->tmp_fd, ctx->tmpdir, r->dataset_id);
    if (rc != HDMLP_OK) {
        return rc;
    }
    pack_write_args a = {
        .ctx = ctx,
        .n = n,
        .dataset_id = r->dataset_id,
        .dict = r->dict,
        .dict_len = r->dict_len,
        .chunk_raw = r->chunk_raw,
        .chunks = r->chunks,
        .segw = &r->segw,
        .tablew = &r->tablew,
    };
    pack_report(o, PACK_PHASE_WRITE, 0, n, 0, ctx->raw_bytes);
    rc = pack_write_chunks(&a);
    r->img = a.img;
    r->stored_bytes = a.stored_bytes;
    memcpy(r->codec_count, a.codec_count, sizeof(r->codec_count));
    if (rc == HDMLP_OK) {
        rc = pack_segw_finish(&r->segw);
    }
    if (rc == HDMLP_OK) {
        rc = pack_tablew_finish(&r->tablew);
    }
    return rc;
}

/* The summary's list of fields (pack_summary.fields): each one's name, type and samples. */
static void summary_fields(pack_summary *sum, const fmt_field *fields, uint32_t nf,
                           uint32_t label_field, const char *const *name,
                           const uint32_t *name_len, uint64_t n, const pack_fields *wf)
{
    char *const out = sum->fields;
    const size_t cap = sizeof(sum->fields);
    out[0] = '\0';
    size_t at = 0;
    for (uint32_t f = 0; fields != NULL && f < nf && at < cap; f++) {
        uint64_t have = n;
        for (uint32_t i = 0; i < wf->n; i++) {
            have = wf->final_of[i] == f ? wf->count[i] : have;
        }
        char what[64];
        if (f == label_field) {
            snprintf(what, sizeof(what), "label");
        } else {
            snprintf(what, sizeof(what), "%llu/%llu", (unsigned long long)have,
                     (unsigned long long)n);
        }
        const int k =
            snprintf(out + at, cap - at, "%s%.*s %s%s%s %s", f ? ", " : "", (int)name_len[f],
                     name[f], fmt_field_type_name(fields[f].type), fields[f].dtype ? " " : "",
                     fmt_dtype_name(fields[f].dtype), what);
        at = k < 0 || (size_t)k >= cap - at ? cap : at + (size_t)k;
    }
    if (at >= cap) {
        memcpy(out + cap - 4, "...", 4);
    }
}
static int build_index(run_state *r, pack_summary *sum)
{
    pack_ctx *const ctx = &r->ctx;
    const pack_opts *const o = ctx->o;
    const uint64_t n = ctx->n_items;
    /* The items are in the dataset now. */
    pack_items_free(ctx);
    pack_packed_free(&ctx->packed);
    hd_free(r->chunk_raw);
    r->chunk_raw = NULL;
    const pack_labels *const lt = &ctx->labels;
    r->labels = hd_calloc(lt->n, sizeof(fmt_label));
    if (!r->labels) {
        return hd_err(HDMLP_E_NOMEM, "out of memory");
    }
    /* Keys went to DIR/keys with their chunks; the index's strings are the label names and
     * the field names. */
    for (uint32_t l = 0; l < lt->n; l++) {
        const uint32_t id = lt->order[l];
        if (r->strings.len + lt->len[id] > UINT32_MAX) {
            return hd_err(HDMLP_E_RANGE, "label names exceed 4 GiB in total");
        }
        r->labels[l].name_off = (uint32_t)r->strings.len;
        r->labels[l].name_len = lt->len[id];
        const int rc = pack_buf_append(&r->strings, lt->names.p + lt->off[id], lt->len[id]);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    /* The fields: the sample's bytes (an image when images are prepared), its label; or,
     * samples with fields, theirs in name order with the label's among them (if any), each
     * required when every sample has it. */
    fmt_field fields[PACK_MAX_FIELDS + 1];
    memset(fields, 0, sizeof(fields));
    const pack_fields *const wf = &ctx->fields;
    const int fielded = pack_has_fields(ctx) && !wf->plain;
    const uint32_t nf = fielded ? wf->n_final : PACK_FIELDS;
    const uint32_t label_field = fielded ? wf->label_final : PACK_FIELD_LABEL;
    const char *name[PACK_MAX_FIELDS + 1] = {"data", "label"};
    uint32_t name_len[PACK_MAX_FIELDS + 1] = {4, 5};
    fields[PACK_FIELD_DATA].type = o->image_max_side > 0 ? FMT_FIELD_IMAGE : FMT_FIELD_BYTES;
    fields[PACK_FIELD_DATA].flags = FMT_FIELD_REQUIRED;
    for (uint32_t i = 0; fielded && i < wf->n; i++) {
        const uint32_t f = wf->final_of[i];
        name[f] = (const char *)wf->names.p + wf->off[i];
        name_len[f] = wf->len[i];
        fields[f].type = wf->type[i];
        fields[f].flags = wf->count[i] == n ? FMT_FIELD_REQUIRED : 0;
        if (wf->type[i] == FMT_FIELD_NDARRAY) {
            fields[f].dtype = wf->dtype[i];
            fields[f].ndim = wf->ndim[i];
            memcpy(fields[f].shape, wf->shape[i], sizeof(fields[f].shape));
        }
    }
    if (label_field != FMT_NO_FIELD) {
        name[label_field] = fielded ? wf->label_name : "label";
        name_len[label_field] = (uint32_t)strlen(name[label_field]);
        fields[label_field].type = FMT_FIELD_INT64;
        fields[label_field].flags = FMT_FIELD_REQUIRED | FMT_FIELD_LABEL;
    }
    for (uint32_t f = 0; f < nf; f++) {
        fields[f].name_off = (uint32_t)r->strings.len;
        fields[f].name_len = name_len[f];
        const int rc = pack_buf_append(&r->strings, name[f], name_len[f]);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    const uint64_t stored = r->stored_bytes;
    memcpy(sum->codec_count, r->codec_count, sizeof(sum->codec_count));
    fmt_index_build b;
    memset(&b, 0, sizeof(b));
    b.h.dataset_id = r->dataset_id;
    b.h.chunk_size = o->chunk_size;
    b.h.pack_seed = o->seed;
    b.h.created = o->has_created ? o->created : (uint64_t)time(NULL);
    b.h.raw_bytes = ctx->raw_bytes;
    b.h.stored_bytes = stored;
    b.version = 2;
    b.n_samples = n;
    b.fields = fields;
    b.n_fields = nf;
    b.h.label_field = label_field;
    b.h.tables_bytes = r->tablew.bytes[0];
    b.h.keys_bytes = r->tablew.bytes[1];
    b.chunks = r->chunks;
    b.n_chunks = (n + o->chunk_size - 1) / o->chunk_size;
    b.segments = r->segw.segs;
    b.n_segments = r->segw.n_segs;
    b.labels = r->labels;
    b.n_labels = lt->n;
    b.strings = r->strings.p;
    b.strings_len = r->strings.len;
    b.dict = r->dict;
    b.dict_len = r->dict_len;
    const int rc = fmt_index_encode(&b, &r->index, &r->index_len);
    if (rc != HDMLP_OK) {
        return hd_err_wrap(rc, "encoding the index: ");
    }
    summary_fields(sum, fielded ? fields : NULL, nf, label_field, name, name_len, n, wf);
    sum->samples = n;
    sum->chunks = b.n_chunks;
    sum->segments = b.n_segments;
    sum->labels = lt->n;
    sum->chunk_size = o->chunk_size;
    sum->raw_bytes = ctx->raw_bytes;
    sum->stored_bytes = stored;
    sum->seed = o->seed;
    sum->dataset_id = r->dataset_id;
    sum->dict_bytes = r->dict_len;
    sum->images_resized = r->img.resized;
    sum->image_bytes_in = r->img.bytes_in;
    sum->image_bytes_out = r->img.bytes_out;
    sum->images_kept = r->img.kept;
    sum->file_bytes =
        r->segw.file_bytes + r->tablew.bytes[0] + r->tablew.bytes[1] + r->index_len;
    memcpy(sum->skipped, ctx->skipped, sizeof(sum->skipped));
    sum->empty_labels = ctx->empty_labels;
    memcpy(sum->empty_label_names, ctx->empty_label_names, sizeof(sum->empty_label_names));
    return HDMLP_OK;
}

int pack_run(const pack_opts *o, const pack_input *inputs, size_t n_inputs, const char *out,
             pack_summary *sum)
{
    const double t0 = now_s();
    pack_summary local;
    memset(&local, 0, sizeof(local));
    int rc = check_opts(o, n_inputs, out);
    if (rc != HDMLP_OK) {
        return rc;
    }
    run_state r;
    memset(&r, 0, sizeof(r));
    pack_opts resolved = *o; /* the chunk size resolved once the scan knows the samples */
    r.ctx.o = &resolved;
    r.ctx.run_budget = o->sort_run_bytes;
    r.ctx.spill_fd = -1;
    r.ctx.labels.numeric = o->webdataset; /* .cls class numbers */
    r.ctx.label_names_numeric = 1;
    if (o->webdataset) {
        memcpy(r.ctx.fields.label_name, "cls", 4);
    }
    r.tmp_fd = -1;
    r.segw.fd = -1;
    r.tablew.fd[0] = r.tablew.fd[1] = -1;
    rc = setup_srcs(&r.ctx, inputs, n_inputs);
    struct stat out_st;
    if (rc == HDMLP_OK && stat(out, &out_st) == 0) {
        r.ctx.has_out = 1; /* replaced with force: never packed into itself */
        r.ctx.out_dev = out_st.st_dev;
        r.ctx.out_ino = out_st.st_ino;
    }
    if (rc == HDMLP_OK) {
        rc = pack_outdir_begin(out, o->force, &r.ctx.tmpdir, &r.tmp_fd);
    }
    if (rc == HDMLP_OK) {
        struct stat st;
        if (fstat(r.tmp_fd, &st) == 0) {
            r.ctx.tmp_dev = st.st_dev;
            r.ctx.tmp_ino = st.st_ino;
        }
        rc = scan_all(&r.ctx);
    }
    if (rc == HDMLP_OK && resolved.chunk_size == PACK_CHUNK_AUTO) {
        resolved.chunk_size = auto_chunk_size(r.ctx.n_items, r.ctx.raw_bytes);
    }
    if (rc == HDMLP_OK) {
        rc = write_data(&r);
    }
    if (rc == HDMLP_OK) {
        pack_report(o, PACK_PHASE_INDEX, r.ctx.n_items, r.ctx.n_items, r.ctx.raw_bytes,
                    r.ctx.raw_bytes);
        rc = build_index(&r, &local);
    }
    if (rc == HDMLP_OK) {
        hd_free(r.chunks); /* the encoded index holds everything now */
        r.chunks = NULL;
        rc = pack_outdir_write_index(r.tmp_fd, r.ctx.tmpdir, r.index, r.index_len);
    }
    if (rc == HDMLP_OK && r.ctx.spill_fd >= 0) {
        close(r.ctx.spill_fd); /* already unlinked */
        r.ctx.spill_fd = -1;
    }
    if (rc == HDMLP_OK) {
        rc = pack_outdir_commit(o, r.ctx.tmpdir, out);
    }
    if (rc != HDMLP_OK && r.ctx.tmpdir) {
        pack_outdir_abort(r.ctx.tmpdir);
    }
    run_free(&r);
    if (rc == HDMLP_OK && sum) {
        local.seconds = now_s() - t0;
        *sum = local;
    }
    return rc;
}
