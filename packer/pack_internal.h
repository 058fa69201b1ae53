/*
 * Shared internals of the packing library (not for the CLI).
 *
 * Layering: a file calls only files on lower layers (.ci/check_layers.py fails on a call
 * circle, from the objects' symbols). Lower layers report through the caller's callbacks in
 * pack_opts, passed down, never by calling the driver.
 *   5 CLI         pack_main.c → pack_inspect.c (→ pack_image.c's probe), pack_progress.c,
 *                 pack_run() (packer.h)
 *   4 driver      pack_run.c: scan → sort → shuffle → dictionary → chunks → index → commit
 *   3 stages      pack_scan_dir.c, pack_scan_list.c, pack_scan_archive.c (→ pack_spill.c,
 *                 pack_wds.c: WebDataset groups), pack_scan_manifest.c (JSONL and CSV;
 *                 → pack_text.c, pack_spill.c), both → pack_fields.c (samples with fields),
 *                 pack_sort.c (the merge of the sorted runs; → pack_packed.c),
 *                 pack_write.c (→ pack_codec.c, pack_image.c, pack_segment.c,
 *                 pack_source.c, pack_packed.c),
 *                 pack_outdir.c
 *   2 services    pack_codec.c (→ pack_source.c, pack_packed.c), pack_image.c (image
 *                 preparation), pack_fields.c (→ pack_npy.c, pack_text.c), pack_spill.c,
 *                 pack_source.c, pack_segment.c,
 *                 pack_packed.c (items in packed order; → format/fmt_perm.c, the shuffle)
 *   1 base        pack_items.c (buffers, items, labels; → pack_tmpfile.c, unlinked
 *                 temporary files), pack_notify.c (cancel, progress, warnings through
 *                 pack_opts); format/ and the hd_* helpers of libhdmlp
 *
 * Memory: O(labels + chunks) plus bounded buffers, whatever N. Scanners add every item (a
 * fixed-size record) and its key to a run in memory; a run that reaches its budget
 * (o->sort_run_bytes) is sorted and appended to run files, unlinked temporary files
 * (pack_tmpfile.c); pack_sort_items merges the runs and distributes the items, in sorted
 * order, to buckets of consecutive packed positions on disk (pack_packed.c), or, when
 * everything fit in one run, keeps that run sorted in memory; the chunk writer and the
 * dictionary read the items in packed order, a bucket at a time.
 */
#ifndef HDMLP_PACK_INTERNAL_H
#define HDMLP_PACK_INTERNAL_H

#include "fmt_perm.h"
#include "format.h"
#include "pack_image.h"
#include "packer.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- growable byte buffer (pack_items.c) ------------------------------------------------ */
typedef struct pack_buf {
    uint8_t *p;
    size_t len;
    size_t cap;
} pack_buf;

int pack_buf_reserve(pack_buf *b, size_t extra);
int pack_buf_append(pack_buf *b, const void *data, size_t n);
void pack_buf_free(pack_buf *b);

/* ---- temporary files (pack_tmpfile.c) ------------------------------------------------- */
/* A file in the temporary output directory, unlinked as soon as it is created (nothing is
 * left behind whatever happens), appended to through a buffer and read back with pread.
 * Errors name it as DIR/NAME. */
typedef struct pack_tmp {
    int fd;       /* open while path is set */
    char *path;   /* DIR/NAME, for messages; NULL: not created (a zeroed pack_tmp) */
    uint64_t end; /* bytes appended (written + buffered) */
    uint8_t *buf; /* appends not yet written */
    size_t len, cap;
} pack_tmp;

/* Creates DIR/NAME (O_EXCL), unlinks it and sets an append buffer of buf_cap bytes. */
int pack_tmp_create(pack_tmp *f, const char *dir, const char *name, size_t buf_cap);
int pack_tmp_append(pack_tmp *f, const void *p, size_t n);
/* Writes what is buffered (reads see only written bytes). */
int pack_tmp_flush(pack_tmp *f);
/* Flushes and frees the append buffer; the file stays open for reading. */
int pack_tmp_seal(pack_tmp *f);
/* Reads n bytes at off (which must be written: flush first); thread-safe. */
int pack_tmp_read(const pack_tmp *f, void *dst, size_t n, uint64_t off);
/* Closes (the file disappears) and frees; f may be zeroed or closed already. */
void pack_tmp_close(pack_tmp *f);

/* A sequential reader of bytes [off, end) of a written temporary file, through a buffer. */
typedef struct pack_tmp_cursor {
    const pack_tmp *f;
    uint64_t off, end; /* next byte to fetch from the file; end of the range */
    uint8_t *buf;
    size_t len, pos, cap;
} pack_tmp_cursor;

int pack_cursor_open(pack_tmp_cursor *c, const pack_tmp *f, uint64_t off, uint64_t end,
                     size_t buf_cap);
/* Copies the next n bytes to dst (HDMLP_E_IO naming the file if the range ends first). */
int pack_cursor_read(pack_tmp_cursor *c, void *dst, size_t n);
void pack_cursor_close(pack_tmp_cursor *c);

/* ---- one sample's metadata (40 bytes, the record of the items files) ------------------- */
typedef struct pack_item {
    uint64_t key_off; /* into the keys (buffer or file) beside the records */
    uint64_t size;    /* raw bytes */
    uint64_t src;     /* archive inputs: offset of the bytes in the spill file */
    uint64_t seq;     /* scan sequence: ties of (input, key) keep it */
    uint32_t label;   /* provisional id while scanning; final id once sorted */
    uint16_t key_len;
    uint16_t input; /* index into ctx->inputs */
} pack_item;

#define PACK_ITEM_LEN sizeof(pack_item)

/* ---- label names (pack_items.c) --------------------------------------------------------- */
typedef struct pack_labels {
    pack_buf names;   /* name bytes back to back */
    uint64_t *off;    /* per provisional id */
    uint32_t *len;    /* per provisional id */
    uint32_t n, cap;  /* ids */
    uint32_t *table;  /* open addressing: id + 1, 0 = empty */
    uint32_t tab_cap; /* power of two */
    uint32_t *remap;  /* provisional id → final id (after finish) */
    uint32_t *order;  /* final id → provisional id (after finish) */
    uint8_t *used;    /* per provisional id: a sample has it (pack_add_item) */
    int numeric;      /* names are class numbers (WebDataset's .cls): numeric order, and
                         every number up to the largest a label (pack_labels_finish) */
} pack_labels;

int pack_labels_intern(pack_labels *lt, const void *name, size_t len, uint32_t *id);
/* Sorts names bytewise (numeric: adds the missing numbers below the largest, then by
 * value) and fills remap/order. */
int pack_labels_finish(pack_labels *lt);
void pack_labels_free(pack_labels *lt);

/* ---- inputs and the packing context ---------------------------------------------------- */
enum pack_src_kind {
    PACK_SRC_DIR = 0,
    PACK_SRC_ARCHIVE = 1, /* its samples' bytes in the spill file */
    PACK_SRC_LIST = 2,
    PACK_SRC_MANIFEST = 3 /* its samples' bytes in the spill file */
};

/* Items in packed order on disk (pack_packed.c): bucket b holds packed positions
 * [b × per, (b + 1) × per), its records and keys as blocks in items.packed and
 * keys.packed (blocks[2b], blocks[2b + 1]: arrays of pack_block), each record's seq its
 * packed position and key_off its key's offset among its bucket's keys. */
typedef struct pack_block {
    uint64_t off, len;
} pack_block;

typedef struct pack_packed {
    uint64_t per; /* positions per bucket, a multiple of K */
    uint64_t n_buckets;
    pack_tmp items, keys;
    pack_buf *blocks; /* 2 per bucket */
    /* while written: per bucket, records and keys not yet appended, and its key bytes */
    pack_buf *wbuf; /* 2 per bucket */
    uint64_t *key_bytes;
    size_t wbuf_cap;
} pack_packed;

/* A sorted run in the run files: records [first, first + n) of items.run, its keys bytes
 * [key0, key1) of keys.run. */
typedef struct pack_disk_run {
    uint64_t first, n;
    uint64_t key0, key1;
} pack_disk_run;

typedef struct pack_src {
    int kind;
    const char *arg; /* as given (for messages) */
    char *root;      /* DIR: the directory; LIST: directory relative paths start from */
    size_t root_len;
} pack_src;

/* ---- samples with fields: the types the context holds (pack_fields.c below) ----------- */
/* Fields a sample may have besides its label, and values a sample may hold. */
#define PACK_MAX_FIELDS 64u
/* The longest field name. */
#define PACK_FIELD_NAME_MAX 63u

/* How a field's values are spilled (each field has one). */
typedef enum pack_form {
    PACK_FORM_FILE = 0, /* a file's or archive member's bytes; the type is its extension's */
    PACK_FORM_JSON = 1, /* a JSON value's text as it stands in a JSONL manifest */
    PACK_FORM_CELL = 2  /* a CSV cell, unquoted */
} pack_form;

/* What a JSON or CSV field's values were (pack_fields.seen bits); the type follows at
 * pack_fields_finish: all integers int64, all numbers float64, all strings (CSV: any cell
 * not a number) text, anything else (JSON) JSON. */
#define PACK_SEEN_INT 1u    /* an integer (in int64's range) */
#define PACK_SEEN_REAL 2u   /* another number */
#define PACK_SEEN_STRING 4u /* a JSON string; a CSV cell that is no number */
#define PACK_SEEN_OTHER 8u  /* JSON: an object, array, true or false */

/* The fields an input's samples have (WebDataset members by extension, manifest columns by
 * name): in order of first sight (a field id is its index), each with its form, type (an
 * ndarray's dtype, ndim and shape: a dim that differs between samples is 0), and the samples
 * that have it. The label is apart: its name (label_name, "" when the dataset has none).
 * After scanning (pack_fields_finish), the dataset's fields: every name in name order with
 * the label's among them; `plain` when that is one value stored as it is and the label (each
 * sample is then that value's bytes, as without fields). */
typedef struct pack_fields {
    pack_buf names;
    uint32_t off[PACK_MAX_FIELDS], len[PACK_MAX_FIELDS];
    uint8_t form[PACK_MAX_FIELDS]; /* enum pack_form */
    uint8_t type[PACK_MAX_FIELDS]; /* enum fmt_field_type (JSON and CELL: from finish on) */
    uint8_t seen[PACK_MAX_FIELDS]; /* JSON and CELL: PACK_SEEN_* */
    uint8_t dtype[PACK_MAX_FIELDS], ndim[PACK_MAX_FIELDS];
    uint32_t shape[PACK_MAX_FIELDS][FMT_MAX_NDIM];
    uint64_t count[PACK_MAX_FIELDS];
    uint32_t n;
    char label_name[PACK_FIELD_NAME_MAX + 1];
    uint32_t final_of[PACK_MAX_FIELDS]; /* field id -> the dataset's field number */
    uint32_t n_final, label_final;      /* label_final FMT_NO_FIELD without a label */
    int plain;
} pack_fields;

/* A sample's values as spilled: the field id and size of each. */
typedef struct pack_field_val {
    uint32_t field;
    uint64_t size;
} pack_field_val;

/* A WebDataset shard's open group: its key, its members' values (spilled back to back from
 * first_src), its label. */
typedef struct pack_wds {
    pack_buf key;
    int open, has_label;
    uint32_t label;
    uint64_t first_src, bytes;
    uint32_t n_vals;
    pack_field_val vals[PACK_MAX_FIELDS];
} pack_wds;

/* A sample's spilled bytes end with this trailer: n × (u32 field id, u32 size) in the order
 * the values precede it, then u32 n and u32 PACK_FIELDS_TRAILER_MAGIC. */
#define PACK_FIELDS_TRAILER_MAGIC 0x54574448u /* "HDWT" */

typedef struct pack_ctx {
    const pack_opts *o;
    pack_src *srcs;
    size_t n_srcs;
    /* Items while scanning (pack_add_item): the current run in memory, records in scan
     * order with key_off into run_keys, until its records and keys reach run_budget bytes;
     * then it is sorted and appended to the run files. */
    pack_buf run_recs, run_keys;
    uint64_t run_budget; /* o->sort_run_bytes, or PACK_DEFAULT_SORT_RUN */
    pack_tmp runs_items, runs_keys;
    pack_disk_run *runs;
    uint64_t n_runs, cap_runs;
    uint64_t key_bytes; /* of every item (sizes the buckets) */
    /* Sorted items (pack_sort_items): in memory when they were one run (sorted_ids[i] =
     * the record of run_recs at sorted position i), else in packed order on disk. */
    uint64_t *sorted_ids;
    pack_packed packed;
    const fmt_perm *order; /* the packed order (pack_order), from pack_sort_items on */
    int sorted;
    uint64_t n_items;
    uint64_t n_seq; /* next scan sequence number */
    pack_labels labels;
    pack_fields fields;          /* pack_has_fields: the fields seen */
    uint32_t manifests;          /* manifest inputs */
    uint32_t labelled_manifests; /* of them, with a label column */
    int label_names_numeric;     /* manifests: every label so far a class number */
    uint64_t raw_bytes;
    char *tmpdir; /* temporary output directory */
    dev_t tmp_dev;
    ino_t tmp_ino;
    int spill_fd; /* -1 until an archive input needs it */
    uint64_t spill_size;
    uint64_t last_progress_items; /* scan progress throttle */
    uint64_t last_progress_bytes;
    int has_out; /* OUT existed before the run (it is replaced): its identity */
    dev_t out_dev;
    ino_t out_ino;
    uint64_t skipped[PACK_SKIP_N];     /* entries left out, by reason (pack_skip) */
    uint32_t skip_warned[PACK_SKIP_N]; /* warnings given for the current input */
    uint32_t empty_labels;             /* after scanning: labels without samples */
    char empty_label_names[PACK_EMPTY_LABEL_NAMES];
} pack_ctx;

/* Whether samples have fields (WebDataset shards, manifests): their bytes are values and a
 * trailer (pack_fields.c). */
static inline bool pack_has_fields(const pack_ctx *ctx)
{
    return ctx->o->webdataset || ctx->manifests > 0;
}
/* Whether an input's samples are read from the spill file. */
static inline bool pack_src_spilled(int kind)
{
    return kind == PACK_SRC_ARCHIVE || kind == PACK_SRC_MANIFEST;
}

/* Adds one item and its key (copied) to the current run, with the next scan sequence
 * number; a full run is sorted and written to the run files (created in ctx->tmpdir on
 * first use). Checks key length and the 4 GiB keys limit; `what` names the sample in
 * errors. */
int pack_add_item(pack_ctx *ctx, uint32_t input, const void *key, size_t key_len,
                  uint32_t label, uint64_t size, uint64_t src, const char *what);
/* The same with a scan sequence number taken earlier (ctx->n_seq++), for an item whose
 * place in the scan order is known before its data (archive hard links). */
int pack_add_item_seq(pack_ctx *ctx, uint64_t seq, uint32_t input, const void *key,
                      size_t key_len, uint32_t label, uint64_t size, uint64_t src,
                      const char *what);
/* Calls fn for every item added so far (provisional labels), in no particular order. fn
 * must not add items. */
typedef int (*pack_item_fn)(void *arg, const pack_item *it, const uint8_t *key);
int pack_items_each(pack_ctx *ctx, pack_item_fn fn, void *arg);
/* Sorts the current run and appends it to the run files (a no-op when it is empty). */
int pack_items_spill_run(pack_ctx *ctx);
/* Compares items by (input, key bytes, scan sequence): a total order. */
int pack_item_cmp(const pack_item *x, const uint8_t *kx, const pack_item *y, const uint8_t *ky);
/* *ids (hd_free) = the current run's record numbers in pack_item_cmp order. */
int pack_items_sort_run(const pack_ctx *ctx, uint64_t **ids);
/* Frees the items' runs (buffers, files) and the sorted run kept in memory (not ctx->packed:
 * pack_packed_free). */
void pack_items_free(pack_ctx *ctx);
/* Nested datasets: the first bytes a file of a dataset directory starts with (FORMAT.md),
 * by its base name: the index magic for "index", the chunk magic for "segment-DIGITS";
 * NULL for any other name. PACK_DATASET_MAGIC_LEN bytes. */
#define PACK_DATASET_MAGIC_LEN 8
const char *pack_dataset_magic(const char *base, size_t len);
/* Stable merge sort of ids v[0..n) with a comparator; tmp holds n / 2 + 1 ids. */
typedef int (*pack_cmp_fn)(const void *ctx, uint64_t a, uint64_t b);
void pack_merge_sort(uint64_t *v, uint64_t *tmp, uint64_t n, pack_cmp_fn cmp, const void *c);

/* ---- samples with fields (pack_fields.c) ------------------------------------------------- */
struct pack_spill_writer;
/* The type a file's extension names: image extensions (jpg, jpeg, png, webp, ppm, pgm, pbm,
 * bmp, gif, tif, tiff) image, txt and text text, json JSON, npy ndarray, any other bytes. */
uint8_t pack_fields_ext_type(const char *ext, size_t ext_len);
/* The field name[0..len) of `form` (PACK_FORM_FILE: of `type`), registered on first sight:
 * *id. HDMLP_E_INVAL naming the field when the name is empty, longer than
 * PACK_FIELD_NAME_MAX or the label's, or the field held another form or type before;
 * HDMLP_E_RANGE past PACK_MAX_FIELDS. These functions name the field, not the input: the
 * caller adds where (hd_err_wrap), on failure only. */
int pack_fields_id(pack_fields *f, const char *name, size_t len, pack_form form, uint8_t type,
                   uint32_t *id);
/* Notes a value of field id (size bytes; head[0..head_len) its first ones: a JSON or CSV
 * value's whole text, an .npy file's header): what JSON and CSV values were, an ndarray's
 * dtype, dims and shape. HDMLP_E_INVAL (or _UNSUPPORTED) naming the field for an
 * .npy file that is malformed, not C-ordered little-endian numbers of up to FMT_MAX_NDIM
 * dims, or of another dtype or number of dims than the field's earlier ones. */
int pack_fields_note(pack_fields *f, uint32_t id, const uint8_t *head, size_t head_len,
                     uint64_t size);
/* ---- .npy files (pack_npy.c) ---------------------------------------------------------- */
/* Bytes of an .npy file's start that hold its header (a longer header is refused). */
#define PACK_NPY_HEAD_MAX 4096u
/* An .npy file's header (b[0..n) of a file of `size` bytes). */
typedef struct pack_npy {
    uint8_t dtype, ndim;
    uint32_t itemsize;
    uint32_t shape[FMT_MAX_NDIM];
    uint64_t data_off;
} pack_npy;
/* HDMLP_E_INVAL (or _UNSUPPORTED) naming what is wrong: no magic, a header longer than n,
 * not C order, not little-endian numbers of 1-8 bytes, more than FMT_MAX_NDIM dims, data
 * bytes other than the shape says. */
int pack_npy_parse(const uint8_t *b, size_t n, uint64_t size, pack_npy *out);

/* ---- JSON and UTF-8 text (pack_text.c) ------------------------------------------------- */
/* Each scanner takes [p, e) and returns where what it scanned ends, or NULL when it is not
 * one: whitespace (never NULL); a string (p at its '"'; past the closing quote); a value
 * (nested at most 64 deep). Strings are checked (escapes, no control bytes), not decoded. */
const uint8_t *pack_json_ws(const uint8_t *p, const uint8_t *e);
const uint8_t *pack_json_string(const uint8_t *p, const uint8_t *e);
const uint8_t *pack_json_value(const uint8_t *p, const uint8_t *e);
/* s[0..n), the inside of a JSON string, unescaped into out (room for n): its length, or
 * SIZE_MAX when an escape is malformed. A lone surrogate escape becomes U+FFFD. */
size_t pack_json_unescape(const uint8_t *s, size_t n, uint8_t *out);
/* The offset of the first byte of s[0..n) that is not well-formed UTF-8, or n. */
size_t pack_utf8_bad(const uint8_t *s, size_t n);
/* HDMLP_E_INVAL naming the field when a field of `list` (comma-separated names; NULL or ""
 * for none) has no value among v[0..n). */
int pack_fields_check_required(const pack_fields *f, const char *list, const pack_field_val *v,
                               uint32_t n);
/* Appends n values' trailer (PACK_FIELDS_TRAILER_MAGIC) to the spill. */
int pack_fields_put_trailer(struct pack_spill_writer *spill, const pack_field_val *v,
                            uint32_t n);
/* Sample bytes as spilled (buf, len: values then trailer): its values' field ids and sizes
 * in order into vals (at most PACK_MAX_FIELDS), *n of them. HDMLP_E_CORRUPT when the
 * trailer does not describe buf. */
int pack_fields_parse(const uint8_t *buf, uint64_t len, pack_field_val *vals, uint32_t *n);
/* After scanning: the types of JSON and CSV fields, the dataset's field order, `plain`. */
void pack_fields_finish(pack_fields *f);
/* Room a value's stored form may take beyond its spilled size (an ndarray's dims). */
#define PACK_FIELD_VALUE_EXTRA (8u * FMT_MAX_NDIM)
/* Value v (n bytes as spilled) of field id as the dataset stores it: a scalar's record in
 * *scalar (*out_len 0), else its bytes at out (room for n + PACK_FIELD_VALUE_EXTRA), *out_len
 * of them. HDMLP_E_INVAL naming the field for a value that does not parse. */
int pack_fields_value(const pack_fields *f, uint32_t id, const uint8_t *v, uint64_t n,
                      uint8_t *out, uint64_t *out_len, fmt_value *scalar);
/* Frees the names (safe on a zeroed one). */
void pack_fields_free(pack_fields *f);

/* ---- WebDataset shards (pack_wds.c) ------------------------------------------------------ */
/* The largest class number a .cls member may hold: every number up to the largest one
 * found is a label. */
#define PACK_WDS_LABEL_MAX 16777215u

/* A member name's key (name[0..*key_len): up to the first '.' of its last component) and
 * extension (after that '.'; empty without one). */
void pack_wds_split(const char *name, size_t len, size_t *key_len, const char **ext,
                    size_t *ext_len);
/* Whether an extension is the label's (.cls, case-insensitive). */
bool pack_wds_is_label(const char *ext, size_t ext_len);
/* A member of the shard at `path`, in shard order: first pack_wds_begin, which emits the open
 * group's sample when the member has another key (pack_wds_finish); then a .cls member's
 * bytes (pack_wds_label), or any other's value as spilled at src (pack_wds_value: its field
 * is its extension, registered in ctx->fields; head[0..head_len) its first bytes). Errors
 * name the shard, the sample or member. */
int pack_wds_begin(pack_ctx *ctx, uint32_t input, const char *path, pack_wds *w,
                   struct pack_spill_writer *spill, const char *name, size_t len);
int pack_wds_label(pack_ctx *ctx, const char *path, pack_wds *w, const char *name, size_t len,
                   const uint8_t *bytes, size_t n);
int pack_wds_value(pack_ctx *ctx, const char *path, pack_wds *w, const char *name, size_t len,
                   uint64_t size, uint64_t src, const uint8_t *head, size_t head_len);
/* Emits the open group as a sample keyed by its key: its values and their trailer
 * (appended to the spill) as the item's bytes. HDMLP_E_INVAL naming it when it has no .cls
 * member or no other member. */
int pack_wds_finish(pack_ctx *ctx, uint32_t input, const char *path, pack_wds *w,
                    struct pack_spill_writer *spill);
void pack_wds_free(pack_wds *w);

/* ---- the packed order ------------------------------------------------------------------ */
/* Packed position p holds sorted item pack_order_at(p): format/fmt_perm.h's seeded
 * bijection of [0, n) with stream 0 (at or below FMT_PERM_TABLE_MAX items the Fisher-Yates
 * shuffle every packer used; above, the Feistel network the loader's epochs use too),
 * evaluated per position in O(1) memory. */
typedef fmt_perm pack_order;

static inline void pack_order_init(pack_order *o, uint64_t seed, uint64_t n)
{
    fmt_perm_init(o, seed, 0, n);
}
/* The sorted item at packed position p (< n). */
static inline uint64_t pack_order_at(const pack_order *o, uint64_t p)
{
    return fmt_perm_at(o, p);
}
/* The packed position of sorted item i (< n). */
static inline uint64_t pack_order_pos(const pack_order *o, uint64_t i)
{
    return fmt_perm_pos(o, i);
}

/* ---- sorting the items (pack_sort.c) ---------------------------------------------------- */
/* Called for each item in sorted order: id = its sorted position, pos = its packed
 * position, label final. */
typedef int (*pack_sorted_fn)(void *arg, uint64_t id, uint64_t pos, const pack_item *it,
                              const uint8_t *key);
#define PACK_DEFAULT_SORT_RUN (64ull << 20)
/* Sorts the items by (input, key bytes, scan sequence), with final label ids (labels
 * finished), calling fn (may be NULL) for each in sorted order; then ctx->sorted is set,
 * ctx->order = order, and pack_packed_at serves them by packed position. One run (nothing
 * written yet): sorted in memory and kept there. Several: the last one written too, all
 * merged, each item appended to its bucket (pack_packed_add), the run files dropped. */
int pack_sort_items(pack_ctx *ctx, const pack_order *order, pack_sorted_fn fn, void *arg);

/* Cancellation, progress and warnings, through the caller's pack_opts (pack_notify.c). */
bool pack_cancelled(const pack_opts *o);
void pack_report(const pack_opts *o, pack_phase phase, uint64_t samples_done,
                 uint64_t samples_total, uint64_t bytes_done, uint64_t bytes_total);
void pack_warn(const pack_opts *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Counts one entry left out for `reason`; the first few of each reason per input are
 * warned about with the message fmt... (then once "further ... not named"). */
void pack_skip(pack_ctx *ctx, pack_skip_reason reason, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Scan progress: reports every 1024 items or 16 MiB; `pending` = bytes of an item being
 * read that is not yet added. */
void pack_scan_tick(pack_ctx *ctx, uint64_t pending);

/* ---- scanners --------------------------------------------------------------------------- */
int pack_scan_dir(pack_ctx *ctx, uint32_t input);
int pack_scan_archive(pack_ctx *ctx, uint32_t input);
int pack_scan_list(pack_ctx *ctx, uint32_t input);
/* A JSONL or CSV manifest (pack_scan_manifest.c; its kind by the .csv extension). */
int pack_scan_manifest(pack_ctx *ctx, uint32_t input);

/* ---- items in packed order (pack_packed.c) ------------------------------------------------
 */
/* Writing the buckets (ctx->n_items items, K = k, buckets sized for `budget` bytes held by
 * two readers at once): begin, add each item with its packed position, end. */
int pack_packed_begin(pack_ctx *ctx, uint32_t k, uint64_t budget);
int pack_packed_add(pack_ctx *ctx, uint64_t pos, const pack_item *it, const uint8_t *key);
int pack_packed_end(pack_ctx *ctx);
void pack_packed_free(pack_packed *pk);

/* Reads items by packed position, a bucket at a time (cheapest in increasing positions).
 * One reader per thread. */
typedef struct pack_packed_reader {
    const pack_ctx *ctx;
    uint64_t bucket; /* loaded, UINT64_MAX if none */
    uint64_t first;  /* its first position */
    pack_item *recs; /* by position - first */
    uint64_t cap;
    pack_buf keys;
    pack_buf stage;
} pack_packed_reader;

void pack_packed_reader_init(pack_packed_reader *r, const pack_ctx *ctx);
/* The item at packed position p (< n_items; sorted items) and its key, valid until the
 * next call. */
int pack_packed_at(pack_packed_reader *r, uint64_t p, pack_item *it, const uint8_t **key);
void pack_packed_reader_free(pack_packed_reader *r);

/* ---- spill file (pack_spill.c) ---------------------------------------------------------- */
typedef struct pack_spill_writer {
    int fd;
    const char *path; /* for messages */
    uint8_t *buf;
    size_t len, cap;
    uint64_t pos; /* file offset of buf[0] */
} pack_spill_writer;

/* Creates (and immediately unlinks) the spill file in ctx->tmpdir if needed, and starts
 * appending at ctx->spill_size. */
int pack_spill_open(pack_ctx *ctx, pack_spill_writer *w);
/* Space to append into (flushing when full); then advance w->len by what was used. The
 * logical end of the spill is w->pos + w->len. */
int pack_spill_reserve(pack_spill_writer *w, uint8_t **p, size_t *avail);
/* Appends data[0..n) (through pack_spill_reserve). */
int pack_spill_append(pack_spill_writer *w, const void *data, size_t n);
/* Flushes; updates ctx->spill_size. Frees the buffer either way. */
int pack_spill_close(pack_ctx *ctx, pack_spill_writer *w, int ok);

/* ---- reading sample bytes (pack_source.c) ---------------------------------------------- */
typedef struct pack_reader {
    const pack_ctx *ctx;
    char *path;
    size_t path_cap;
} pack_reader;

void pack_reader_init(pack_reader *r, const pack_ctx *ctx);
void pack_reader_free(pack_reader *r);
/* Full path of a file-backed item (DIR/LIST) with key `key` in r->path; NULL on
 * allocation failure. */
const char *pack_reader_path(pack_reader *r, const pack_item *it, const uint8_t *key);
/* Reads the first `len` (≤ it->size) bytes of item `it` (key `key`) into dst. With len ==
 * it->size the source must still have exactly it->size bytes ("changed during packing"). */
int pack_read_item(pack_reader *r, const pack_item *it, const uint8_t *key, uint8_t *dst,
                   uint64_t len);
/* Asks the kernel to start reading item `it` (its first `len` bytes). Best effort; key is
 * not needed (may be NULL) for archive inputs. */
void pack_prefetch_item(pack_reader *r, const pack_item *it, const uint8_t *key, uint64_t len);

/* ---- compression decisions (pack_codec.c) ---------------------------------------------- */
/* Nonzero if the bytes start like an already-compressed format (JPEG, PNG, ...). */
int pack_is_compressed_media(const uint8_t *p, size_t n);
/* Trains a dictionary from the first samples in packed order (items sorted). *dict
 * (hd_free) is NULL with *dict_len 0 when there is too little data (a warning says so). */
int pack_train_dict(pack_ctx *ctx, uint8_t **dict, size_t *dict_len);

/* ---- segment writer (pack_segment.c) --------------------------------------------------- */
typedef struct pack_segw {
    int dirfd;
    const char *dir;
    uint64_t limit; /* 0 = one chunk per segment */
    int fd;         /* current segment, -1 if none */
    uint64_t size;  /* bytes written to the current segment */
    uint64_t synced;
    uint64_t waited;
    fmt_segment *segs;
    uint32_t n_segs, cap_segs;
    uint64_t file_bytes;
    int deferred; /* closed segments await the final syncfs */
} pack_segw;

void pack_segw_init(pack_segw *w, int dirfd, const char *dir, uint64_t limit);
/* Appends a chunk: buf holds `len` bytes followed by zero padding up to
 * fmt_align_up(len). Fills rec->segment and rec->offset. */
int pack_segw_append(pack_segw *w, const uint8_t *buf, uint64_t len, fmt_chunk *rec);
/* Fsyncs and closes the last segment. */
int pack_segw_finish(pack_segw *w);
void pack_segw_free(pack_segw *w);

/* ---- version 2's tables and keys files (pack_tables.c) ----------------------------------- */
/* The fields the packer writes: the sample's bytes, then its label. */
#define PACK_FIELDS 2u
#define PACK_FIELD_DATA 0u
#define PACK_FIELD_LABEL 1u

typedef struct pack_tablew {
    const char *dir;
    int fd[2];         /* DIR/tables, DIR/keys */
    pack_buf buf[2];   /* appended, not yet written */
    uint64_t bytes[2]; /* file sizes so far (keys: with the padding to 8) */
} pack_tablew;

/* Creates DIR/tables and DIR/keys in dirfd (dir names it in messages), each with its
 * header (the dataset's id). */
int pack_tablew_open(pack_tablew *w, int dirfd, const char *dir, uint64_t dataset_id);
/* Appends chunk rec's table and key block (its n samples: records s, whose key_off and
 * key_len give their keys in `keys`; their value records nf a sample in vals for a dataset
 * of fields, else NULL: a data and a label field from s) and fills rec's table, keys,
 * raw_bytes and max_raw fields. */
int pack_tablew_chunk(pack_tablew *w, const fmt_sample *s, const uint8_t *vals, uint32_t nf,
                      const uint8_t *keys, uint32_t n, fmt_chunk *rec);
/* Writes what is buffered, fsyncs and closes both files. */
int pack_tablew_finish(pack_tablew *w);
void pack_tablew_free(pack_tablew *w);

/* ---- chunk pipeline (pack_write.c) ----------------------------------------------------- */
typedef struct pack_write_args {
    pack_ctx *ctx; /* items sorted */
    uint64_t n;
    uint64_t dataset_id;
    const uint8_t *dict;
    size_t dict_len;
    const uint64_t *chunk_raw; /* C: raw bytes of each chunk's samples (as scanned) */
    fmt_chunk *chunks;         /* C records, filled here */
    pack_segw *segw;
    pack_tablew *tablew;     /* version 2's tables and keys, appended with each chunk */
    pack_image_totals img;   /* out: what image preparation did */
    uint64_t raw_bytes;      /* out: raw bytes stored (after image preparation) */
    uint64_t stored_bytes;   /* out */
    uint64_t codec_count[3]; /* out: samples by codec */
} pack_write_args;

int pack_write_chunks(pack_write_args *a);

/* ---- output directory (pack_outdir.c) -------------------------------------------------- */
/* Checks `out` (exists / --force rules) and creates the temporary directory beside it.
 * *tmpdir is owned by the caller (hd_free). */
int pack_outdir_begin(const char *out, int force, char **tmpdir, int *tmp_fd);
/* Writes `index` into the temporary directory and fsyncs it and the directory. */
int pack_outdir_write_index(int tmp_fd, const char *tmpdir, const uint8_t *buf, size_t len);
/* Renames the temporary directory to `out` (exchanging with and then removing an old
 * `out` when o->force is set; a failure to remove the old one is only a warning). */
int pack_outdir_commit(const pack_opts *o, const char *tmpdir, const char *out);
/* Removes the temporary directory and its files (best effort). */
void pack_outdir_abort(const char *tmpdir);

#endif /* HDMLP_PACK_INTERNAL_H */
