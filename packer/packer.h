/*
 * packer/ — the packing library behind hdmlp-pack. Internal (not installed).
 *
 * pack_run() scans the inputs, shuffles the samples globally, groups them into chunks of
 * K samples, compresses and checksums them on worker threads and writes a dataset
 * directory atomically (FORMAT.md, "Writing protocol"). Memory is O(labels + chunks) plus
 * bounded buffers, whatever the number of samples: per-sample metadata (key, label, size,
 * source reference) is sorted in runs of o->sort_run_bytes; when there is more than one
 * run, they go to unlinked files in the temporary directory and are merged there into
 * buckets of packed positions (~40 bytes and the key per sample, twice, temporarily,
 * besides an archive's spilled bytes), read back a bucket at a time; sample bytes stream
 * through a bounded pipeline. (Exception: an archive with symbolic link members holds
 * every member's name while its links are resolved.)
 *
 * Inputs
 *   PACK_INPUT_PATH naming a directory: every subdirectory of the root is a label; every
 *     regular file below it (any depth) is a sample of that label, keyed by its path
 *     relative to the root ("cat/001.jpg"). Regular files directly in the root get the
 *     label ".". Entries are visited in bytewise-sorted order at each level; nothing is
 *     skipped silently (hidden files are samples). Symlinks are followed, to files and to
 *     directories (keys are the paths through the link); a symlink to a directory that is
 *     the link's own ancestor (a loop) is skipped, counted (PACK_SKIP_LINK_LOOP) and warned
 *     about. A dangling or unresolvable (ELOOP) symlink, an unreadable entry or a special
 *     file (fifo, socket, device) is an error naming it. A directory reached twice
 *     without a symlink (bind mount loop) is an error. Empty class directories still
 *     define their label (the summary names labels without samples).
 *   PACK_INPUT_PATH naming a regular file: an archive recognised by libarchive from its
 *     content (tar in any of its dialects, cpio, zip, 7z; compressed with gzip, bzip2,
 *     xz, lzma, lz4, zstd or compress). Each regular member is a sample keyed by its
 *     stored name, bytes as-is (names such as "/etc/x" or "../x" are only keys and are
 *     never used as paths). Its label is the first component of the name after leading
 *     "/" and "./" components; members in the root get the label ".". Hard links refer
 *     to the bytes of their target member. A symlink member is resolved, as a path
 *     relative to its own directory inside the archive (through other symlink members,
 *     at most 40 of them), to the regular member it names and is a sample with that
 *     member's bytes, keyed by its own name; a symlink naming nothing in the archive (an
 *     absolute target, one above the archive's root, or a missing member), a directory,
 *     or itself through a loop is skipped, and so is a special member: each is counted by
 *     reason in the summary (pack_skip_reason) and the first few are warned about.
 *     Directory members carry no data and only define labels. The archive is streamed
 *     once into an unlinked spill file inside the temporary output directory
 *     (so packing an archive needs its unpacked size in free space there, temporarily).
 *   PACK_INPUT_LIST: a text file of lines "PATH<TAB>LABEL" (exactly one TAB; a trailing
 *     CR is ignored). Relative paths are relative to the list file's directory ("-"
 *     reads standard input, relative to the working directory). Blank lines and lines
 *     whose first byte is '#' are skipped; a malformed line is an error naming FILE:LINE.
 *     The key is the PATH column as written.
 *   Nested datasets: a directory holding an `index` file that starts with the index magic
 *     or a `segment-N` file that starts with the chunk magic (FORMAT.md), and archive
 *     members so named and starting so, are an hdmlp dataset. With PACK_NESTED_REFUSE
 *     (default) an input that is or contains one is an error naming it; PACK_NESTED_SKIP
 *     leaves them out (counted: PACK_SKIP_DATASET); PACK_NESTED_PACK packs their files as
 *     ordinary samples. List inputs name files explicitly and are not checked. Whatever
 *     the setting, OUT itself (when it exists, with force: PACK_SKIP_OUTPUT) and the
 *     temporary directory beside it (silently) are never packed when inside an input.
 *   Several inputs merge. Label names are the union over all inputs, numbered in
 *   bytewise-sorted order, except that "." (root files/members) is always label 0 when
 *   present. Keys need not be unique.
 *
 * Order and reproducibility
 *   Samples are sorted by (input position, key bytes, scan order), then shuffled: packed
 *   position p holds sorted sample sigma(p), sigma a bijection of [0, N) keyed by
 *   fmt_rng(seed, stream 0): for N ≤ 4096 the Fisher-Yates shuffle of 0..N-1 (the order
 *   every N had before the streaming packer), above it a Feistel network with cycle
 *   walking (format/fmt_perm.c), evaluated per position. The dataset id is XXH3-64 over (seed
 *   u64, K u32, N u64, then per sample in sorted order: key length u32, key bytes, label
 *   u32, raw size u64), all little-endian. The same inputs, options and `created` give
 *   byte-identical output, whatever the thread count and sort_run_bytes.
 *
 * Image preparation (image_max_side > 0)
 *   A sample whose bytes are a JPEG or PNG with a longer side above image_max_side is
 *   decoded, shrunk to image_max_side on its longer side (aspect kept, area average) and
 *   stored re-encoded as JPEG at image_quality (4:2:0; grey JPEGs stay grey; PNG alpha is
 *   dropped). Its key is unchanged; its raw length is the new JPEG's. Everything else is
 *   stored as given. An image over the limit that cannot be decoded (corrupt, CMYK, too
 *   large) is kept as it is and a warning names it: the loader's corrupt-sample handling
 *   deals with it at training time. The dataset id covers the input sizes. Re-encoding
 *   depends only on the sample's bytes, so output stays reproducible.
 *
 * Threads: pack_run() runs on the calling thread plus `threads` workers and one prefetch
 * thread. progress and message callbacks run on the calling thread; cancel may be called
 * from any of the library's threads, concurrently.
 */
#ifndef HDMLP_PACKER_H
#define HDMLP_PACKER_H

#include <stddef.h>
#include <stdint.h>

typedef enum pack_compress {
    PACK_COMPRESS_AUTO = 0, /* zstd except for media recognised by magic bytes */
    PACK_COMPRESS_NONE = 1, /* every sample codec 0 */
    PACK_COMPRESS_ZSTD = 2  /* try zstd on every sample */
} pack_compress;

typedef enum pack_input_kind {
    PACK_INPUT_PATH = 0,    /* directory or archive, detected */
    PACK_INPUT_LIST = 1,    /* list file */
    PACK_INPUT_MANIFEST = 2 /* JSONL or CSV manifest (.csv): a sample a row, a field a column */
} pack_input_kind;

typedef enum pack_nested {
    PACK_NESTED_REFUSE = 0, /* an input that is or contains an hdmlp dataset is an error */
    PACK_NESTED_SKIP = 1,   /* such datasets are left out, counted (PACK_SKIP_DATASET) */
    PACK_NESTED_PACK = 2    /* their files are packed as ordinary samples */
} pack_nested;

typedef struct pack_input {
    pack_input_kind kind;
    const char *path;
} pack_input;

typedef enum pack_phase {
    PACK_PHASE_SCAN = 0,  /* samples_done/bytes_done count what was found so far */
    PACK_PHASE_DICT = 1,  /* training the dictionary */
    PACK_PHASE_WRITE = 2, /* samples/bytes written out of the totals */
    PACK_PHASE_INDEX = 3  /* writing the index and committing */
} pack_phase;

typedef struct pack_progress {
    pack_phase phase;
    uint64_t samples_done;
    uint64_t samples_total; /* 0 while unknown */
    uint64_t bytes_done;    /* raw bytes */
    uint64_t bytes_total;   /* 0 while unknown */
} pack_progress;

/* Why an entry of an input was left out (pack_summary.skipped). Warnings name the first
 * few of each reason per input. */
typedef enum pack_skip_reason {
    PACK_SKIP_LINK_MISSING = 0, /* archive symlinks naming no member (absolute, above the
                                   archive's root, or absent) */
    PACK_SKIP_LINK_DIR = 1,     /* archive symlinks naming a directory */
    PACK_SKIP_LINK_LOOP = 2,    /* symlink loops: archive symlinks, directory symlinks to an
                                   ancestor */
    PACK_SKIP_SPECIAL = 3,      /* archive members that are fifos, devices or sockets */
    PACK_SKIP_DATASET = 4,      /* hdmlp datasets (PACK_NESTED_SKIP): directories, or the
                                   dataset files of an archive */
    PACK_SKIP_OUTPUT = 5,       /* OUT (replaced with force), found inside an input */
    PACK_SKIP_N = 6
} pack_skip_reason;

/* A short plural phrase for a reason ("symbolic links naming no member of the archive");
 * "?" for an unknown one. Static storage. */
const char *pack_skip_reason_text(int reason);

#define PACK_EMPTY_LABEL_NAMES 512
#define PACK_FIELDS_TEXT 1024

typedef struct pack_summary {
    uint64_t samples;
    uint64_t chunks;
    uint32_t segments;
    uint32_t labels;
    uint32_t chunk_size;
    uint64_t raw_bytes;
    uint64_t stored_bytes;
    uint64_t file_bytes; /* bytes of all files written (segments with padding + index) */
    uint64_t seed;
    uint64_t dataset_id;
    uint64_t dict_bytes;
    uint64_t codec_count[3]; /* samples stored with codec 0, 1, 2 */
    uint64_t images_resized; /* image preparation: images re-encoded, */
    uint64_t image_bytes_in; /* their bytes before and after, */
    uint64_t image_bytes_out;
    uint64_t images_kept;          /* images over the limit kept as they were (warned about) */
    uint64_t skipped[PACK_SKIP_N]; /* entries left out, by pack_skip_reason */
    uint32_t empty_labels;         /* labels with no sample (empty class directories...) */
    /* their names, ", "-separated, bytes outside printable ASCII as \xNN, cut with "..."
     * when longer than the buffer; "" if none */
    char empty_label_names[PACK_EMPTY_LABEL_NAMES];
    /* Samples with fields: each field in the dataset's order, its type and how many samples
     * have it ("caption text 43/50, image image 50/50, label int64 label"), cut with "..."
     * when longer; "" for a dataset of one value and a label. */
    char fields[PACK_FIELDS_TEXT];
    double seconds; /* wall time of pack_run */
} pack_summary;

/* chunk_size PACK_CHUNK_AUTO: K from the samples' mean raw size, so that a chunk holds about
 * PACK_CHUNK_TARGET bytes: ceil(target / mean), at least PACK_CHUNK_MIN_AUTO (what sizes
 * ImageNet-like samples get: 64) and at most N / 256 when that is larger (at least 256
 * chunks), at most 2^20. Tiny samples get large chunks, so what a reader holds per chunk
 * (a 96-byte record, a K-bit mask) is a fraction of a bit a sample. */
#define PACK_CHUNK_AUTO 0u
#define PACK_CHUNK_MIN_AUTO 64u
#define PACK_CHUNK_TARGET (1ull << 20)
#define PACK_DEFAULT_SEGMENT_SIZE (1ull << 30)
#define PACK_DEFAULT_LEVEL 3
#define PACK_MAX_THREADS 256u

typedef struct pack_opts {
    uint32_t chunk_size; /* K, 1..2^20, or PACK_CHUNK_AUTO (the default) */
    uint64_t seed;       /* shuffle seed (stored in the index) */
    pack_compress compress;
    int level;             /* zstd level 1..22 for ZSTD and AUTO */
    int dict;              /* train and use a dictionary (not with NONE) */
    unsigned threads;      /* worker threads, 1..PACK_MAX_THREADS */
    int force;             /* replace an existing OUT (see pack_run) */
    uint64_t segment_size; /* new segment when the next chunk would exceed it; 0 = one
                              chunk per segment; a chunk larger than this gets its own */
    int has_created;       /* use `created` as the index creation time, else time(NULL) */
    uint64_t created;
    uint32_t image_max_side; /* > 0: JPEG/PNG samples whose longer side exceeds it are
                                re-encoded as JPEG (pack_image.h); 0 = off (default) */
    int image_quality;       /* JPEG quality 1..100 of re-encoded images (default 90) */
    pack_nested nested;      /* hdmlp datasets inside inputs (default PACK_NESTED_REFUSE) */
    int webdataset;          /* archive inputs are WebDataset shards (pack_wds.c): a sample
                                is a key's members, labelled by its .cls member, each other
                                member a field's value; only archive inputs then */
    /* Samples with fields (WebDataset shards, manifests):
     *   label_field:    manifests' label column (NULL: "label"); a manifest without it has
     *                   no label (rows all have one or none do);
     *   file_fields:    comma-separated manifest columns holding paths of files whose bytes
     *                   are the value (NULL: "image");
     *   require_fields: comma-separated fields every sample must have (NULL: none; others
     *                   may be absent, which the index records). */
    const char *label_field;
    const char *file_fields;
    const char *require_fields;
    uint64_t sort_run_bytes; /* for tests: bytes of item records and keys sorted in memory
                                at a time (more are merged from runs on disk); 0 = the
                                default (64 MiB). Changes memory and time, not output. */
    void (*progress)(void *arg, const pack_progress *p); /* optional; often, cheap */
    void (*message)(void *arg, const char *msg);         /* optional; warnings */
    int (*cancel)(void *arg); /* optional; nonzero = stop with HDMLP_E_INTERRUPTED */
    void *cb_arg;
} pack_opts;

/* Fills *o with the defaults (K 64, auto compression at level 3, 1 thread, 1 GiB
 * segments, seed 0, no image preparation (quality 90 when enabled), no callbacks). */
void pack_opts_init(pack_opts *o);

/* Packs inputs[0..n_inputs) into the dataset directory `out`, atomically: everything is
 * written under `.NAME.tmp-XXXXXX` beside `out` and renamed at the end; on failure the
 * temporary directory is removed and `out` is untouched. If `out` exists: without
 * o->force, HDMLP_E_EXISTS; with it, `out` is replaced only if it is a non-directory, an
 * empty directory or a directory holding nothing but `index`, `tables`, `keys` and
 * `segment-*` files (else HDMLP_E_EXISTS): it is atomically exchanged with the new
 * dataset, then removed.
 * Returns 0 and fills *sum (may be NULL), or a negative HDMLP_E_* code with detail in
 * hdmlp_last_error() naming the file, member or line at fault. */
int pack_run(const pack_opts *o, const pack_input *inputs, size_t n_inputs, const char *out,
             pack_summary *sum);

#endif /* HDMLP_PACKER_H */
