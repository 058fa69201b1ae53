/*
 * hdmlp — chunked datasets and a batched random-access loader for training.
 *
 * This is the only public header. It includes nothing but <stddef.h> and <stdint.h>.
 *
 * Conventions
 *   - Every function that can fail returns an int status: HDMLP_OK (0) or a negative
 *     HDMLP_E_* code. hdmlp_last_error() gives a detailed, thread-local message for the
 *     most recent failure on the calling thread.
 *   - Constructors hand objects out through a `**out` argument and set `*out = NULL` on
 *     failure. Destructors (_close, _free, _release) accept NULL.
 *   - The library never prints, exits or aborts.
 */
#ifndef HDMLP_H
#define HDMLP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(HDMLP_BUILDING) && defined(__GNUC__)
#define HDMLP_API __attribute__((visibility("default")))
#else
#define HDMLP_API
#endif

#define HDMLP_VERSION_MAJOR 0
#define HDMLP_VERSION_MINOR 1
#define HDMLP_VERSION_PATCH 0
#define HDMLP_VERSION_NUMBER                                                                   \
    (HDMLP_VERSION_MAJOR * 10000 + HDMLP_VERSION_MINOR * 100 + HDMLP_VERSION_PATCH)

/* Run-time version of the loaded library (compare with HDMLP_VERSION_NUMBER). */
HDMLP_API unsigned hdmlp_version_number(void);
HDMLP_API const char *hdmlp_version_string(void);

/* ---------------------------------------------------------------------------------------
 * Errors. Codes are pinned and never reused.
 * ------------------------------------------------------------------------------------- */
#define HDMLP_ERRNO_MAP(X)                                                                     \
    X(OK, 0, "success")                                                                        \
    X(END, 1, "end of data")                                                                   \
    X(E_INVAL, -1, "invalid argument")                                                         \
    X(E_NOMEM, -2, "out of memory")                                                            \
    X(E_IO, -3, "input/output error")                                                          \
    X(E_CORRUPT, -4, "corrupt data")                                                           \
    X(E_VERSION, -5, "unsupported format version")                                             \
    X(E_NOTFOUND, -6, "not found")                                                             \
    X(E_EXISTS, -7, "already exists")                                                          \
    X(E_NOSPC, -8, "no space left on device")                                                  \
    X(E_RANGE, -9, "value out of range")                                                       \
    X(E_UNSUPPORTED, -10, "operation not supported")                                           \
    X(E_PEER, -11, "peer failure")                                                             \
    X(E_STATE, -12, "invalid state for this call")                                             \
    X(E_INTERRUPTED, -13, "interrupted")                                                       \
    X(E_MFILE, -14, "too many open files")                                                     \
    X(E_TIMEOUT, -15, "timed out")

enum {
#define HDMLP_ENUM_ENTRY(name, value, msg) HDMLP_##name = (value),
    HDMLP_ERRNO_MAP(HDMLP_ENUM_ENTRY)
#undef HDMLP_ENUM_ENTRY
};

/* Static message for a code ("unknown error" for unknown codes). Thread-safe. */
HDMLP_API const char *hdmlp_strerror(int code);
/* Symbolic name of a code, e.g. "HDMLP_E_CORRUPT". Thread-safe. */
HDMLP_API const char *hdmlp_err_name(int code);
/* Detail of the last failure on the calling thread (never NULL; "" if none). The string
 * is owned by the library and valid until the next hdmlp call on this thread. */
HDMLP_API const char *hdmlp_last_error(void);

/* ---------------------------------------------------------------------------------------
 * Packed datasets (read side).
 *
 * A dataset is a directory holding `index` and segment files, written by hdmlp-pack.
 * Samples are numbered 0..N-1 in packed order; sample i lives in chunk i / K, slot i % K.
 * An open dataset is immutable and all functions below are safe to call concurrently
 * from any number of threads on the same handle.
 * ------------------------------------------------------------------------------------- */
typedef struct hdmlp_dataset hdmlp_dataset;

typedef struct hdmlp_sample_info {
    uint64_t index;       /* position in packed order */
    uint64_t chunk;       /* index / chunk_size */
    uint32_t slot;        /* index % chunk_size */
    uint32_t label;       /* < hdmlp_dataset_label_count() */
    uint64_t raw_size;    /* bytes after decompression */
    uint64_t stored_size; /* bytes on disk */
    uint32_t codec;       /* 0 none, 1 zstd, 2 zstd with the dataset dictionary; 255 a
                             sample with fields (each value has its own) */
    uint32_t key_size;    /* bytes in key (not NUL-terminated; may hold any bytes) */
    const char *key;      /* original name; owned by the dataset, valid until close */
} hdmlp_sample_info;

/* Opens the dataset in directory `path`, validating the index (checksum, version, every
 * offset and length). A URL (http://, https://, s3://) opens a dataset in object storage:
 * hdmlp_dataset_open_source() with a config from hdmlp_source_config_load_aws(). Returns
 * HDMLP_E_NOTFOUND, HDMLP_E_IO, HDMLP_E_CORRUPT or HDMLP_E_VERSION with detail in
 * hdmlp_last_error(). The caller owns *out. */
HDMLP_API int hdmlp_dataset_open(const char *path, hdmlp_dataset **out);
/* Closes the dataset. Every view and key pointer obtained from it becomes invalid. The
 * caller must ensure no other call on it is in progress and no loader still uses it. */
HDMLP_API void hdmlp_dataset_close(hdmlp_dataset *ds);

HDMLP_API uint64_t hdmlp_dataset_sample_count(const hdmlp_dataset *ds);
HDMLP_API uint32_t hdmlp_dataset_chunk_size(const hdmlp_dataset *ds);
HDMLP_API uint64_t hdmlp_dataset_chunk_count(const hdmlp_dataset *ds);
HDMLP_API uint32_t hdmlp_dataset_segment_count(const hdmlp_dataset *ds);
HDMLP_API uint32_t hdmlp_dataset_label_count(const hdmlp_dataset *ds);
/* Seed the packer shuffled with. */
HDMLP_API uint64_t hdmlp_dataset_seed(const hdmlp_dataset *ds);
/* Unix time the pack finished (or $SOURCE_DATE_EPOCH at packing). */
HDMLP_API uint64_t hdmlp_dataset_created(const hdmlp_dataset *ds);
/* Bytes of the zstd dictionary stored in the index (0 if none). */
HDMLP_API uint64_t hdmlp_dataset_dict_size(const hdmlp_dataset *ds);
/* Sum over samples of raw (decompressed) and stored bytes. */
HDMLP_API uint64_t hdmlp_dataset_raw_bytes(const hdmlp_dataset *ds);
HDMLP_API uint64_t hdmlp_dataset_stored_bytes(const hdmlp_dataset *ds);
/* Name of label `label` and its length in *size (names may hold any bytes; the pointer
 * is also NUL-terminated). Owned by the dataset, valid until close. NULL if out of range. */
HDMLP_API const char *hdmlp_dataset_label_name(const hdmlp_dataset *ds, uint32_t label,
                                               size_t *size);
/* Fills *info for sample `index`. HDMLP_E_RANGE if index >= sample count. */
HDMLP_API int hdmlp_dataset_sample_info(const hdmlp_dataset *ds, uint64_t index,
                                        hdmlp_sample_info *info);
/* ---- Fields ---------------------------------------------------------------------------
 * A sample's values are fields: named and typed (hdmlp_field_info). A dataset whose only
 * fields are one byte string (bytes, text, JSON, ndarray or image) and the label delivers
 * each sample as that value's bytes (as every version-1 dataset does: fields "data" and
 * "label"); raw_size is their length. Any other dataset (several stored values, scalars
 * besides the label) delivers each sample as a FIELD RECORD, raw_size its length:
 *   0   4  magic "HDSF"
 *   4   4  F, the dataset's field count
 *   8   16 × F entries, entry f: value (u64: a stored value's offset in the record, a
 *          multiple of 8; an inline scalar's 8 bytes; 0 when absent), length (u32: a
 *          stored value's bytes; 8 inline; 0 absent), state (u8: 0 absent, 1 stored,
 *          2 inline), type (u8: hdmlp_field_type), 2 bytes 0
 *   then the stored values in field order, each padded with zeros to a multiple of 8.
 * All little-endian. hdmlp_sample_field reads one field of it without copying. */
typedef enum hdmlp_field_type {
    HDMLP_FIELD_BYTES = 0,
    HDMLP_FIELD_TEXT = 1,    /* UTF-8 */
    HDMLP_FIELD_JSON = 2,    /* UTF-8 JSON */
    HDMLP_FIELD_INT64 = 3,   /* scalar, inline */
    HDMLP_FIELD_FLOAT32 = 4, /* scalar, inline */
    HDMLP_FIELD_FLOAT64 = 5, /* scalar, inline */
    HDMLP_FIELD_NDARRAY = 6, /* each varying dim's size (u64), then the elements, C order */
    HDMLP_FIELD_IMAGE = 7    /* encoded (JPEG, PNG, ...) */
} hdmlp_field_type;

typedef struct hdmlp_field_info {
    const char *name; /* not NUL-terminated; owned by the dataset, valid until close */
    uint32_t name_size;
    uint32_t type;     /* hdmlp_field_type */
    uint32_t dtype;    /* ndarray: 1 u8, 2 i8, 3 u16, 4 i16, 5 u32, 6 i32, 7 u64, 8 i64, 9 f16,
                          10 f32, 11 f64; else 0 */
    uint32_t ndim;     /* ndarray: 0..4 */
    uint32_t shape[4]; /* ndarray: each dim's size, 0 = varies per sample */
    uint32_t required; /* 1: every sample has it */
    uint32_t is_label; /* 1: the label field (hdmlp_sample_view.label) */
} hdmlp_field_info;

/* One field of a sample (hdmlp_sample_field): present 0 when the sample lacks it; a stored
 * value's bytes (data, size: zero-copy, valid while the sample's bytes are); an inline
 * scalar's value in i64 (int64) or f64 (float32 and float64), data its 8 bytes. */
typedef struct hdmlp_field_value {
    const void *data;
    uint64_t size;
    int64_t i64;
    double f64;
    uint32_t present;
    uint32_t type; /* hdmlp_field_type */
} hdmlp_field_value;

/* The dataset's fields: their count (version 1: 2, "data" and "label"), field f's
 * description (HDMLP_E_RANGE past the count), the field named name[0..name_size)
 * (HDMLP_E_NOTFOUND naming it), and whether samples are delivered as field records (1) or
 * as their one value's bytes (0). */
HDMLP_API uint32_t hdmlp_dataset_field_count(const hdmlp_dataset *ds);
HDMLP_API int hdmlp_dataset_field(const hdmlp_dataset *ds, uint32_t f, hdmlp_field_info *out);
HDMLP_API int hdmlp_dataset_field_index(const hdmlp_dataset *ds, const char *name,
                                        size_t name_size, uint32_t *f);
HDMLP_API int hdmlp_dataset_field_records(const hdmlp_dataset *ds);
/* Over every sample (reads every chunk's table once), for each field f < n_out (n_out the
 * field count, or fewer): how many samples have it, and their values' raw and stored bytes
 * (scalars: 8 raw, 0 stored). Version 1: both fields of every sample. The tables' read and
 * check errors. */
typedef struct hdmlp_field_stats {
    uint64_t present;
    uint64_t raw_bytes;
    uint64_t stored_bytes;
} hdmlp_field_stats;
HDMLP_API int hdmlp_dataset_field_stats(hdmlp_dataset *ds, hdmlp_field_stats *out,
                                        uint32_t n_out);
/* Field f of a sample delivered as a field record (data, size: a sample view's, or what
 * hdmlp_dataset_read_sample wrote), checked against the record's bounds: HDMLP_E_INVAL for
 * bytes that are not a field record, HDMLP_E_RANGE for f past its fields. */
HDMLP_API int hdmlp_sample_field(const void *data, uint64_t size, uint32_t f,
                                 hdmlp_field_value *out);

/* Finds the first sample whose key equals key[0..key_size). HDMLP_E_NOTFOUND if none.
 * Linear in the sample count. */
HDMLP_API int hdmlp_dataset_find_key(const hdmlp_dataset *ds, const char *key, size_t key_size,
                                     uint64_t *index);
/* Reads sample `index`: reads its stored bytes, verifies the checksum and decompresses
 * into buf (capacity buf_size, at least raw_size bytes; else HDMLP_E_RANGE and *size set
 * to the needed size). On success *size is the raw size. HDMLP_E_CORRUPT on a checksum
 * or decode failure, naming segment, chunk and sample. */
HDMLP_API int hdmlp_dataset_read_sample(hdmlp_dataset *ds, uint64_t index, void *buf,
                                        size_t buf_size, size_t *size);
/* Checks every chunk header and every sample checksum, in packed order. On the first
 * failure returns HDMLP_E_CORRUPT or HDMLP_E_IO with the chunk/sample named in
 * hdmlp_last_error(). `progress`, if not NULL, is called after each chunk. */
HDMLP_API int hdmlp_dataset_verify(hdmlp_dataset *ds,
                                   void (*progress)(void *arg, uint64_t chunks_done,
                                                    uint64_t chunks_total),
                                   void *arg);

/* ---------------------------------------------------------------------------------------
 * Datasets in object storage. hdmlp_dataset_open() also takes a URL:
 *   http://host[:port]/path/ and https://...  the directory's files by HTTP range GETs;
 *   s3://bucket/prefix                         S3 or an S3-compatible store, SigV4-signed.
 * A remote dataset reads its index at open (checked as a local one), checks every segment's
 * size, and serves reads with HTTP range requests: many in flight per I/O thread, kept-alive
 * connections, HTTP/2 where the server offers it. Failed requests (5xx, 429, timeouts,
 * dropped connections, short bodies) are retried with backoff a bounded number of times;
 * 403 and 404 fail at once naming the URL. Bytes are checked by the dataset's checksums as
 * for a local dataset: a wrong body is never delivered. The SSD tier caches remote chunks.
 * ------------------------------------------------------------------------------------- */
typedef struct hdmlp_source_config hdmlp_source_config;

/* A source configuration with defaults: no credentials (unsigned requests), region
 * us-east-1, AWS's endpoint, path-style addressing when an endpoint is set (auto), the
 * system CA store, timeouts connect 10 s / stall 10 s / request 120 s, 4 retries. A plain
 * value object: not thread-safe; may be freed once the dataset is open. */
HDMLP_API int hdmlp_source_config_create(hdmlp_source_config **out);
HDMLP_API void hdmlp_source_config_free(hdmlp_source_config *cfg);
/* Fills credentials, region and endpoint as AWS's tools do: AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION,
 * AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_CA_BUNDLE (the CA file) from the
 * environment, else from the profile AWS_PROFILE (default "default") of ~/.aws/credentials
 * and ~/.aws/config (or AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE). The one place the
 * library reads the environment; hdmlp_dataset_open() calls it for s3:// URLs. Missing
 * values leave the config as it was; HDMLP_E_INVAL for an access key without a secret. */
HDMLP_API int hdmlp_source_config_load_aws(hdmlp_source_config *cfg);
/* "http(s)://host[:port]" of an S3-compatible server (MinIO, Ceph, ...); NULL: AWS. */
HDMLP_API int hdmlp_source_config_set_endpoint(hdmlp_source_config *cfg, const char *url);
HDMLP_API int hdmlp_source_config_set_region(hdmlp_source_config *cfg, const char *region);
/* Both keys, or neither (NULL, NULL: unsigned requests); session_token may be NULL. The
 * strings are copied. */
HDMLP_API int hdmlp_source_config_set_credentials(hdmlp_source_config *cfg,
                                                  const char *access_key,
                                                  const char *secret_key,
                                                  const char *session_token);
/* 1: http://endpoint/bucket/key (MinIO-like servers); 0: http://bucket.endpoint/key;
 * -1: path style when an endpoint is set, and at AWS's for a bucket name that is not a DNS
 * label (dots, upper case: botocore's rule). */
HDMLP_API int hdmlp_source_config_set_path_style(hdmlp_source_config *cfg, int path_style);
/* PEM file of CA certificates for https (NULL: the system store). */
HDMLP_API int hdmlp_source_config_set_ca_file(hdmlp_source_config *cfg, const char *path);
/* connect_ms: connection set-up; stall_ms (>= 1000): the low-speed limit, a transfer moving
 * under 1 KiB/s over this long fails; request_ms: the deadline of a request from its first
 * attempt, retries included. A failure by timeout is retried like a 5xx. */
HDMLP_API int hdmlp_source_config_set_timeouts(hdmlp_source_config *cfg, uint32_t connect_ms,
                                               uint32_t stall_ms, uint32_t request_ms);
/* Further attempts after a retryable failure, 0..20 (backoff 50 ms doubling to 2 s). */
HDMLP_API int hdmlp_source_config_set_retries(hdmlp_source_config *cfg, uint32_t retries);
/* Uploads: objects larger than this go as multipart uploads in parts of this size
 * (5 MiB..5 GiB, S3's limits; default 64 MiB). */
HDMLP_API int hdmlp_source_config_set_part_size(hdmlp_source_config *cfg, uint64_t bytes);
/* Opens the dataset at `url` (http://, https:// or s3://) with cfg (NULL: defaults, no
 * credentials). Errors as hdmlp_dataset_open(), the URL in the detail; HDMLP_E_NOTFOUND
 * for a missing index or segment (404), HDMLP_E_IO for refused access (403), HDMLP_E_TIMEOUT
 * when the server does not answer within the limits. The config is copied. */
HDMLP_API int hdmlp_dataset_open_source(const char *url, const hdmlp_source_config *cfg,
                                        hdmlp_dataset **out);
/* Uploads the packed dataset in local directory `dir` to the s3:// URL `url` with cfg
 * (NULL: defaults, no credentials): deletes an index already there, PUTs every segment
 * (multipart above the part size, 4 parts in flight), then the index last, so a half-finished
 * upload never opens; then opens the store's copy to check it. `progress`, if not NULL, is
 * called after each object or wave of parts with the bytes sent so far and the total.
 * HDMLP_E_UNSUPPORTED for an http(s):// URL; errors as hdmlp_dataset_open_source(). A
 * failure before the index is written leaves no index at `url` (segments may remain); a
 * failed multipart upload is aborted. Blocks the caller. */
HDMLP_API int
hdmlp_dataset_upload(const char *dir, const char *url, const hdmlp_source_config *cfg,
                     void (*progress)(void *arg, uint64_t bytes_done, uint64_t bytes_total),
                     void *arg);

/* ---------------------------------------------------------------------------------------
 * Loader configuration. A config is a plain value object: not thread-safe, may be freed
 * as soon as hdmlp_loader_create() returns. Each setter checks its range and returns
 * HDMLP_E_INVAL (naming the parameter) without changing the config on failure.
 * ------------------------------------------------------------------------------------- */
typedef struct hdmlp_config hdmlp_config;

typedef enum hdmlp_engine {
    HDMLP_ENGINE_AUTO = 0, /* io_uring when the kernel supports it, else pread */
    HDMLP_ENGINE_PREAD = 1,
    HDMLP_ENGINE_IO_URING = 2
} hdmlp_engine;

/* How the strict order refills.
 *   auto (default): clairvoyant when the dataset's chunks are larger than one device
 *       request (a mean of more than 4 MiB stored: a miss can read part of a chunk), else
 *       fill-rate (a chunk is one request: reading it whole keeps the most). A function of
 *       the dataset only, so the order stays the same on any storage; resolved at create
 *       (stats policy).
 *   fill-rate: the Brand protocol's refill (the chunk filling most empty slots of
 *       its abstract chunk); a hit delivers the sample in the requested slot, which may be
 *       another chunk's, so a chunk's samples arrive a little closer together than in a
 *       permutation (same-chunk distance ~0.8 at 25 % memory). random: an ablation.
 *   clairvoyant: the order is known in advance, so a miss reads the window of its chunk
 *       (at most one device request) holding the most samples due soon and keeps them in
 *       any free slot until they are asked for; each sample is read once per epoch, and the
 *       delivered order is the epoch's uniformly random permutation itself. Fewer reads than
 *       fill-rate with large chunks on operation-bound storage; with small chunks it can read
 *       more (README, "Strict or one pass"). */
typedef enum hdmlp_policy {
    HDMLP_POLICY_FILL_RATE = 0,
    HDMLP_POLICY_RANDOM = 1,
    HDMLP_POLICY_CLAIRVOYANT = 2,
    HDMLP_POLICY_AUTO = 3
} hdmlp_policy;

typedef enum hdmlp_refill {
    HDMLP_REFILL_AUTO = 0,  /* choose per refill from the storage cost model (default) */
    HDMLP_REFILL_WHOLE = 1, /* read the whole chunk in one operation */
    HDMLP_REFILL_RANGES = 2 /* read only the byte ranges of the fillable samples */
} hdmlp_refill;

HDMLP_API int hdmlp_config_create(hdmlp_config **out);
HDMLP_API void hdmlp_config_free(hdmlp_config *cfg);
/* Memory budget for everything the loader holds: slots, samples planned ahead, in-flight
 * reads, batches, scratch. A ceiling, not a target: the loader plans at most one epoch ahead
 * of the consumer, so on a dataset smaller than the budget it holds about the dataset's
 * bytes (slots, the epoch ahead, batches), not the budget. Resident memory stays within
 * the budget plus about 64 MiB (thread stacks, malloc's per-thread arenas, decoder contexts)
 * and what grows with the dataset, not the budget (its index; the scheduler's state, about
 * 2 bits per sample; stats metadata_bytes and index_bytes report both). Each sample planned
 * is charged its bytes plus 192 for its record, and the slot tables (64 bytes a slot) are
 * part of the budget, so tiny samples stay within it too; sample buffers are the loader's own,
 * reused by any thread that calls hdmlp_loader_next (up to a tenth more than their bytes).
 * hdmlp_loader_create refuses (HDMLP_E_RANGE, naming both numbers) a budget above what this
 * process can get: the machine's memory (MemTotal), the limit of its memory cgroup (v1
 * memory.limit_in_bytes or v2 memory.max, ancestors included) or the address space left
 * under RLIMIT_AS / RLIMIT_DATA; and a budget below the least the dataset needs (naming
 * that least), unless hdmlp_config_set_memory_raise. The memory is returned to the system
 * when the loader is freed. At least 4096 bytes. Default 256 MiB. */
HDMLP_API int hdmlp_config_set_memory(hdmlp_config *cfg, uint64_t bytes);
/* With `on`, a budget below the least this dataset needs with the rest of the config (two
 * batches of its largest samples, two chunk read buffers, one abstract chunk, the image
 * pipeline's buffers...) is raised to that least instead of refused: for budgets given as a
 * share of the dataset (Python's memory='25%' turns it on), which on a small dataset can be
 * less than that. hdmlp_stats.memory_budget is then the budget in use and
 * memory_configured the one set. Default 0: the budget is a hard ceiling. */
HDMLP_API int hdmlp_config_set_memory_raise(hdmlp_config *cfg, int on);
/* Samples per batch, 1..2^20. Default 32. */
HDMLP_API int hdmlp_config_set_batch_size(hdmlp_config *cfg, uint32_t n);
/* Seed of the delivery order. Default 0. */
HDMLP_API int hdmlp_config_set_seed(hdmlp_config *cfg, uint64_t seed);
/* Epochs to deliver; 0 = unbounded. Default 1. */
HDMLP_API int hdmlp_config_set_epochs(hdmlp_config *cfg, uint64_t epochs);
/* First epoch to deliver (later epochs follow, up to the configured number). Epoch e's order
 * depends only on (seed, e), so this starts exactly where a run would be at epoch e.
 * Default 0; must be below epochs unless epochs is unbounded. */
HDMLP_API int hdmlp_config_set_start_epoch(hdmlp_config *cfg, uint64_t epoch);
/* Current values (e.g. after hdmlp_config_bootstrap_mpi). */
HDMLP_API uint32_t hdmlp_config_rank(const hdmlp_config *cfg);
HDMLP_API uint32_t hdmlp_config_world(const hdmlp_config *cfg);
HDMLP_API uint64_t hdmlp_config_seed(const hdmlp_config *cfg);
/* Drop the last, short batch of each epoch (its samples are still consumed). Default 0. */
HDMLP_API int hdmlp_config_set_drop_last(hdmlp_config *cfg, int drop_last);
/* This process's rank and the world size. rank < world. Default 0 of 1. */
HDMLP_API int hdmlp_config_set_rank(hdmlp_config *cfg, uint32_t rank, uint32_t world);
/* I/O worker threads, 1..64. Default 2. */
HDMLP_API int hdmlp_config_set_threads(hdmlp_config *cfg, uint32_t n);
HDMLP_API int hdmlp_config_set_engine(hdmlp_config *cfg, hdmlp_engine engine);
/* How segments are read: 1 = O_DIRECT (bypassing the page cache), 0 = buffered (through
 * the page cache, readahead off so each read fetches exactly its bytes), or
 * HDMLP_DIRECT_IO_AUTO (the default): O_DIRECT when this rank's share of the dataset is more
 * than half of the memory the page cache can use (MemAvailable, and the limit of the
 * process's memory cgroup less its other memory), buffered otherwise or when the file
 * system refuses O_DIRECT. The choice is in the stats (direct_io). */
#define HDMLP_DIRECT_IO_AUTO 2
HDMLP_API int hdmlp_config_set_direct_io(hdmlp_config *cfg, int on);
/* Most requests the scheduler may plan ahead of the consumer; 0 = as far as memory
 * allows. Never more than one epoch's (this rank's samples per epoch). Default 0. */
HDMLP_API int hdmlp_config_set_lookahead(hdmlp_config *cfg, uint64_t requests);
HDMLP_API int hdmlp_config_set_policy(hdmlp_config *cfg, hdmlp_policy policy);
HDMLP_API int hdmlp_config_set_refill(hdmlp_config *cfg, hdmlp_refill refill);
/* Storage cost model for HDMLP_REFILL_AUTO and range merging: cost of one read operation
 * in microseconds (0..10^7) and sequential bandwidth in bytes per second (> 0). Set this
 * way, the model is fixed: the loader does not learn (below). Defaults: 100 us and 1 GB/s,
 * as the start of the learnt model. */
HDMLP_API int hdmlp_config_set_storage_cost(hdmlp_config *cfg, double op_us,
                                            double bytes_per_s);
/* Cost learning (default 1): the loader fits the model to its own reads while it runs
 * (service time of each read against its operations and bytes, recent reads weighing most;
 * changes of the storage are followed within a few dozen reads) and plans every refill with
 * the current estimate; now and then, when the model cannot tell which plan is cheaper, it
 * reads a refill the other way to learn (at most ~2 % of the predicted read time). The
 * delivered order never depends on it: only which bytes are read. With 0 the configured
 * (or calibrated) figures are used as they are, and hdmlp_loader_forecast predicts bytes
 * and operations exactly; with learning, the forecast's bytes and operations use the
 * starting figures (loads, hits, misses and the order stay exact). */
HDMLP_API int hdmlp_config_set_cost_learning(hdmlp_config *cfg, int on);

/* What a corrupt or unreadable sample does: fail the loader (default: hdmlp_loader_next
 * returns HDMLP_E_CORRUPT / HDMLP_E_IO naming segment, chunk and sample from then on), or
 * skip it: the sample is left out of its batch (which is then shorter), counted in
 * skipped_samples and named by hdmlp_loader_last_skip(); it is never replaced. An epoch of
 * which every sample was skipped fails the loader with HDMLP_E_CORRUPT. */
typedef enum hdmlp_on_corrupt {
    HDMLP_CORRUPT_FAIL = 0,
    HDMLP_CORRUPT_SKIP = 1
} hdmlp_on_corrupt;
HDMLP_API int hdmlp_config_set_on_corrupt(hdmlp_config *cfg, hdmlp_on_corrupt action);
/* The delivery order (DESIGN.md §4, "The frontier"). Both deliver every sample exactly once
 * per epoch, equal batches across ranks, in an order that is a function of (dataset, seed,
 * config) only, so the forecast, tiers and exact resume hold for both.
 *   strict (default): a uniformly random permutation each epoch (the Brand protocol); a
 *       chunk is read several times per epoch when memory is a fraction of the dataset.
 *   pool: one pass. Each epoch the chunks' read units (below) are read in a fresh seeded
 *       random order, their samples join a pool held in the memory budget, and each
 *       delivered sample is a seeded uniform draw from the pool: every byte is read once
 *       per epoch, and samples read together are spread over about a pool's worth of
 *       positions (hdmlp-bench reports the randomness figures). */
typedef enum hdmlp_order { HDMLP_ORDER_STRICT = 0, HDMLP_ORDER_POOL = 1 } hdmlp_order;
HDMLP_API int hdmlp_config_set_order(hdmlp_config *cfg, hdmlp_order order);
/* The pool order's one knob: reads per chunk per epoch, r in 1..HDMLP_POOL_READS_MAX (a
 * read unit is then ceil(K / r) consecutive samples of a chunk, read as one byte range; r
 * at or above K reads sample by sample). More reads never mix less: r = 1 reads whole
 * chunks (about as random as shard streaming), larger r spreads a chunk's samples further
 * at the price of r device requests per chunk (the bytes read stay those of one pass).
 * 0 (the default) = auto: units as large as one request of the dataset's device takes
 * (its max_sectors_kb; 4 MiB for object storage and devices that do not say), so a read
 * costs one device operation, as a whole chunk at least does. Resolved at create (stats
 * pool_unit); the unit shapes the order, so set r to get one order on different storage. */
#define HDMLP_POOL_READS_MAX 65536u
HDMLP_API int hdmlp_config_set_pool_reads(hdmlp_config *cfg, uint32_t reads);
/* Former name of the pool order: 1 = HDMLP_ORDER_POOL, 0 = HDMLP_ORDER_STRICT. */
HDMLP_API int hdmlp_config_set_relaxed(hdmlp_config *cfg, int on);
/* Storage calibration for the `auto` refill mode: when on, hdmlp_loader_create measures
 * the per-operation cost and bandwidth of the dataset's storage (and of the SSD cache
 * directory) with a short probe — at most ~0.5 s and 64 MiB of reads — and uses them
 * instead of the defaults, as the start of the learnt model (a throttled or bursty device
 * can mislead a short probe; the reads correct it); hdmlp_config_set_storage_cost
 * overrides the measurement.
 * The measured values are in the stats. Default 0. */
HDMLP_API int hdmlp_config_set_calibrate(hdmlp_config *cfg, int on);

/* Chunk tiers (DESIGN.md §6). The chunks this rank loads most often (by a forecast of the
 * first two planned epochs) are kept in a RAM chunk cache of `bytes` (taken from the memory
 * budget, not added to it); HDMLP_RAM_CACHE_AUTO (the default) caches every chunk when the
 * budget holds the dataset's chunks (stored, 4 KiB-aligned) plus an eighth of that for
 * abstract memory plus the read buffers and two batches, and nothing otherwise (a dataset
 * that fits is then read from storage once per run); 0 disables. */
#define HDMLP_RAM_CACHE_AUTO UINT64_MAX
HDMLP_API int hdmlp_config_set_ram_cache(hdmlp_config *cfg, uint64_t bytes);
/* A local-SSD chunk cache: the next most-loaded chunks, up to `capacity` bytes, are copied
 * into `dir` in the background in order of first use, then read from there (verified by
 * checksum; a bad or missing file falls back to the dataset and is counted). Files are named
 * by dataset id and chunk, so a later run reuses them. dir NULL or capacity 0 disables. */
HDMLP_API int hdmlp_config_set_ssd_cache(hdmlp_config *cfg, const char *dir, uint64_t capacity);

/* Distributed loading (world > 1). Every rank must use the same dataset, seed, epochs,
 * memory budget, remote memory, batch size and prefetch window. Owners of chunk groups
 * read from storage; the other ranks fetch those samples over the network. */
/* Endpoints "host:port" of all ranks, in rank order (n == world). Copied. */
HDMLP_API int hdmlp_config_set_peers(hdmlp_config *cfg, const char *const *endpoints,
                                     uint32_t n);
/* Address this rank's server binds ("host:port"); default: its own entry of the peers. */
HDMLP_API int hdmlp_config_set_listen(hdmlp_config *cfg, const char *address);
/* Job token shared by all ranks; messages with another token are rejected. Default 0. */
HDMLP_API int hdmlp_config_set_job_token(hdmlp_config *cfg, uint64_t token);
/* Mutual TLS for the exchange between ranks. Off by default (plaintext). ca_file, cert_file
 * and key_file name PEM files: the CA that signed the ranks' certificates, this rank's
 * certificate (or chain) and its private key. Give all three (non-empty) or none: all NULL
 * turns TLS off again; anything else is HDMLP_E_INVAL. The paths are copied; the files are
 * read when hdmlp_loader_create sets up the exchange (world > 1): a missing or unreadable
 * file fails it with HDMLP_E_IO, an empty or non-PEM one with HDMLP_E_INVAL, naming the
 * file and its role. With TLS, each rank's server presents its certificate and requires a
 * client certificate signed by the CA; each rank's client checks the server's certificate
 * against the CA and against the host of that rank's "host:port" entry in the peers, so a
 * certificate needs a subjectAltName for every host it is reached by (an IP SAN when the
 * peers are IP addresses, as with hdmlp_config_bootstrap_mpi given an address). Every rank
 * must enable TLS with the same CA: a peer that fails the handshake (other CA, name
 * mismatch, plaintext) is reported like an unreachable one, HDMLP_E_PEER naming it within
 * the peer timeout. The job token is still checked on every message. */
HDMLP_API int hdmlp_config_set_tls(hdmlp_config *cfg, const char *ca_file,
                                   const char *cert_file, const char *key_file);
/* Cap on samples received ahead of need from peers (prefetches). 0 (the default) means
 * 10 % of the memory budget. Part of the memory budget, not added to it. */
HDMLP_API int hdmlp_config_set_remote_memory(hdmlp_config *cfg, uint64_t bytes);
/* Opportunistic prefetch: after answering a request an owner pushes the requester's next
 * `window` positions it owns whose samples are in memory. 0 = off. Default 256. */
HDMLP_API int hdmlp_config_set_prefetch(hdmlp_config *cfg, uint32_t window);
/* A peer that does not answer within timeout_ms fails the loader with HDMLP_E_PEER naming
 * it. 100..3600000; default 5000. */
HDMLP_API int hdmlp_config_set_peer_timeout(hdmlp_config *cfg, uint32_t timeout_ms);
/* Same-host path: HDMLP_SAME_HOST_SHM (1, the default), HDMLP_SAME_HOST_SOCKET (2) or
 * HDMLP_SAME_HOST_TCP (0). Without TLS every rank listens, beside its TCP port, on two
 * Unix-domain sockets in the abstract namespace (no file; their names are derived from the
 * rank's "host:port" entry in the peers, and they live in the network namespace, like the
 * TCP port): the gRPC server's, and the ring socket where peers of this host set up a
 * shared-memory ring (a sealed memfd per sending peer, passed with its doorbells over the
 * socket, which only processes of the same user may use); if either cannot be bound,
 * hdmlp_loader_create fails with HDMLP_E_IO naming it. A peer is local when its host is
 * this machine's — a loopback address, an address of one of its interfaces, or a name
 * whose first resolved address is one of those (such as "localhost" or, usually, the host
 * name; hdmlp_loader_create resolves names). With SHM a rank sends to local peers by
 * writing each message once into that peer's ring, which the peer reads in place (no
 * gRPC, no socket copies); with SOCKET it sends them gRPC over the peer's Unix socket;
 * with TCP over TCP; other peers always over TCP, and a peer is never tried two ways.
 * Ranks may differ in this setting (every rank receives on all three). With TLS
 * (hdmlp_config_set_tls) the exchange always uses TCP and no socket is opened. The number
 * of peers reached over SHM or SOCKET is in the stats (peers_same_host). Measured figures
 * of the three: tests/bench/README.md, local_ranks_bench.sh. */
#define HDMLP_SAME_HOST_TCP 0
#define HDMLP_SAME_HOST_SHM 1
#define HDMLP_SAME_HOST_SOCKET 2
HDMLP_API int hdmlp_config_set_same_host(hdmlp_config *cfg, int mode);
/* Per-GPU balance across the ranks of this job on one host (a node board: a small POSIX
 * shared-memory segment named from the user, the job token and the peer list, removed by
 * the last rank out). Each rank publishes its lead, refills in flight and stall time; a
 * rank far ahead while another stalls runs half its I/O threads and lends the unused part
 * of its lookahead memory, which the most-starved rank may borrow; the node's total never
 * exceeds the sum of the budgets, and the order, exactly-once and each rank's abstract
 * memory are the same as without the board. A rank whose slot is not updated within the
 * peer timeout is ignored. HDMLP_NODE_BOARD_AUTO (1, the default): on when world > 1 and
 * the exchange reaches a peer on this host (and runs without it if the segment cannot be
 * made); HDMLP_NODE_BOARD_ON (2): on whenever world > 1 (hdmlp_loader_create fails with
 * HDMLP_E_IO naming the segment if it cannot be made); HDMLP_NODE_BOARD_OFF (0). Stats:
 * board_*, node_stall_*. */
#define HDMLP_NODE_BOARD_OFF 0
#define HDMLP_NODE_BOARD_AUTO 1
#define HDMLP_NODE_BOARD_ON 2
HDMLP_API int hdmlp_config_set_node_board(hdmlp_config *cfg, int mode);
/* Fills rank, world, peers (each rank takes a free port on bind_host, e.g. "127.0.0.1"),
 * seed and job token (both from rank 0) with MPI collectives. Initialises MPI if the
 * application has not (and then finalises it at exit); never finalises MPI it did not
 * initialise. HDMLP_E_UNSUPPORTED when built without MPI, or when the shared library cannot
 * load its distributed module libhdmlp-rpc.so (hdmlp_last_error names it and why). */
HDMLP_API int hdmlp_config_bootstrap_mpi(hdmlp_config *cfg, const char *bind_host);
/* Collects every rank's stats snapshot on rank 0 (an MPI_Gather of the first `size` bytes of
 * *mine over MPI_COMM_WORLD, for programs launched with mpirun, e.g. after
 * hdmlp_config_bootstrap_mpi). size is HDMLP_STATS_SIZE (the struct as the program was
 * compiled), the same on every rank. Collective: every rank must call it, the same number
 * of times. On rank 0, all_on_rank0 receives world entries of `size` bytes in rank order
 * (entry r from rank r); elsewhere it is not touched and may be NULL (HDMLP_E_INVAL on rank
 * 0 only, after taking part). HDMLP_E_INVAL when mine is NULL or size is 0 or above
 * INT_MAX, HDMLP_E_STATE when MPI is not initialised or already finalised,
 * HDMLP_E_UNSUPPORTED when built without MPI, HDMLP_E_PEER when the collective fails. Call
 * from the thread that initialised MPI. */
struct hdmlp_stats;
HDMLP_API int hdmlp_mpi_gather_stats(const struct hdmlp_stats *mine,
                                     struct hdmlp_stats *all_on_rank0, size_t size);

/* ---------------------------------------------------------------------------------------
 * Loader. One consumer thread calls hdmlp_loader_next(); batches may be released from any
 * thread. hdmlp_loader_stats() may be called from any thread at any time.
 * ------------------------------------------------------------------------------------- */
typedef struct hdmlp_loader hdmlp_loader;
typedef struct hdmlp_batch hdmlp_batch;

typedef struct hdmlp_sample_view {
    const void *data; /* raw (decompressed) bytes; valid until the batch is released */
    uint64_t size;
    uint64_t index; /* position in packed order (as hdmlp_dataset_sample_info) */
    uint32_t label;
    uint32_t reserved;
} hdmlp_sample_view;

/* Creates a loader over `ds` (which must stay open until the loader is freed) and starts
 * its I/O threads. The config is copied. The caller owns *out. With world > 1 the shared
 * library first loads its distributed module libhdmlp-rpc.so (once per process); if that
 * fails: HDMLP_E_UNSUPPORTED, hdmlp_last_error naming the module and the reason. */
HDMLP_API int hdmlp_loader_create(hdmlp_dataset *ds, const hdmlp_config *cfg,
                                  hdmlp_loader **out);
/* Stops the I/O threads and frees the loader. Batches not yet released stay valid until
 * released (their memory is freed on release). Not concurrent with hdmlp_loader_next. */
HDMLP_API void hdmlp_loader_free(hdmlp_loader *ld);
/* With peers: tells them this rank is done and keeps serving them until every peer is done
 * (or one fails, or all stay silent for max(4 × peer timeout, 30 s)); afterwards the stats
 * are final. hdmlp_loader_free does this itself; call it first to read final stats.
 * Returns the loader's error, if any. A no-op for world 1. Not concurrent with next. */
HDMLP_API int hdmlp_loader_finish(hdmlp_loader *ld);
/* Blocks until the next batch is ready and hands it out in *out (owned by the caller until
 * hdmlp_batch_release). Returns HDMLP_END (with *out = NULL) after the last epoch;
 * HDMLP_E_NOMEM (resumable) when unreleased batches hold the budget for more than a
 * second (release some and call again); or an
 * error that a worker met (with detail naming segment, chunk and sample). Only one thread
 * may call it at a time. */
HDMLP_API int hdmlp_loader_next(hdmlp_loader *ld, hdmlp_batch **out);
/* As hdmlp_loader_next, but gives up after timeout_ms milliseconds of waiting (0 = wait
 * forever) with HDMLP_E_TIMEOUT; nothing is lost: the next call resumes the same batch.
 * Lets callers such as the Python binding check for signals while they wait. */
HDMLP_API int hdmlp_loader_next_timeout(hdmlp_loader *ld, hdmlp_batch **out,
                                        uint32_t timeout_ms);
/* As hdmlp_loader_next, but never waits: HDMLP_E_TIMEOUT when the next batch is not ready
 * yet (nothing is lost; a later call resumes it). */
HDMLP_API int hdmlp_loader_try_next(hdmlp_loader *ld, hdmlp_batch **out);
/* Samples this rank receives per epoch, and batches per epoch (after drop_last). */
HDMLP_API uint64_t hdmlp_loader_epoch_size(const hdmlp_loader *ld);
HDMLP_API uint64_t hdmlp_loader_batches_per_epoch(const hdmlp_loader *ld);
/* Makes a hdmlp_loader_next() that is waiting (now or next) return HDMLP_E_INTERRUPTED
 * instead of blocking; nothing is lost: the following call resumes the same batch.
 * Thread-safe and async-signal-unsafe (call it from a thread, not a signal handler). */
HDMLP_API void hdmlp_loader_interrupt(hdmlp_loader *ld);
/* Returns the batch's memory to the loader's budget. Accepts NULL. Any thread. */
HDMLP_API void hdmlp_batch_release(hdmlp_batch *batch);
HDMLP_API size_t hdmlp_batch_size(const hdmlp_batch *batch);
/* Epoch (0-based) all samples of this batch belong to. */
HDMLP_API uint64_t hdmlp_batch_epoch(const hdmlp_batch *batch);
/* Pointer to the batch's views (hdmlp_batch_size() of them), owned by the batch. */
HDMLP_API const hdmlp_sample_view *hdmlp_batch_samples(const hdmlp_batch *batch);

/* ---------------------------------------------------------------------------------------
 * Image pipeline (optional). With an image config on the loader config, every sample is an
 * encoded image that the loader decodes and augments on its own decode threads (never on
 * the thread calling hdmlp_loader_next), a few batches ahead of the consumer, straight into
 * one contiguous output buffer per batch. Everything else (order, ranks, tiers, resume,
 * corrupt-sample handling) is unchanged: the same samples arrive in the same batches.
 * In the stats, samples, batches and bytes_delivered count batches when they enter the
 * decode queue (up to `prefetch` batches early; images skipped as corrupt are taken off),
 * and stall_ns is the time hdmlp_loader_next waited for decoded batches.
 *
 * Inputs: JPEG (baseline and progressive; grayscale, YCbCr, and CMYK converted as PIL
 * does; through libjpeg-turbo), PNG (any bit depth and colour type, through libspng; 16-bit
 * is reduced to 8, alpha is dropped) and raw arrays: a 16-byte header "HDRI", then height,
 * width and channels (1 or 3) as little-endian uint32, then height × width × channels uint8
 * in row-major HWC order (exactly that many bytes). Anything else, or an image over 32768
 * pixels on a side or 2^28 pixels, is a corrupt sample (HDMLP_E_CORRUPT naming the sample
 * and the reason).
 *
 * Augmentation is deterministic: every random draw of sample i in epoch e comes from the
 * project's RNG seeded with (loader seed, e, i), so a run reproduces whatever the thread
 * count or timing.
 *   - HDMLP_IMAGE_TRAIN: torchvision's RandomResizedCrop: up to 10 attempts drawing an area
 *     fraction uniformly in `scale` and a log-uniform aspect ratio in `ratio`; the first
 *     crop that fits is taken at a uniform position; otherwise the fallback (the whole
 *     image, clamped to the ratio range, centred). Then a horizontal flip with probability
 *     `flip` (default 0.5).
 *   - HDMLP_IMAGE_VAL: the smallest resize keeping the aspect ratio that covers
 *     height / crop_fraction × width / crop_fraction (default crop_fraction 224/256 =
 *     0.875), then a centre crop of height × width: for a square output, torchvision's
 *     Resize(int(size / crop_fraction)) + CenterCrop(size). No flip unless `flip` is set.
 * Resampling is PIL's antialiased bilinear (Image.BILINEAR with its reducing support: a
 * triangle filter stretched by the scale factor, separable, horizontal pass first, 8-bit
 * rounding between passes), which torchvision applies to PIL images. JPEG decoding may use
 * libjpeg-turbo's DCT scaling (decoding at 1/2, 1/4 or 1/8 size) when the crop is still at
 * least twice the output size after it; the result then differs from a full decode and
 * resize by a few levels (tests/loader/image/test_image_decode.c states the bound). Turn it
 * off for exact parity. Training crops of JPEGs decode only the crop's rows and columns (the
 * whole stream is still read, so damage anywhere is found); their pixels are a full decode's.
 * ------------------------------------------------------------------------------------- */
typedef struct hdmlp_image_config hdmlp_image_config;

typedef enum hdmlp_image_mode {
    HDMLP_IMAGE_TRAIN = 0, /* RandomResizedCrop + horizontal flip (default) */
    HDMLP_IMAGE_VAL = 1    /* Resize (shorter side) + CenterCrop */
} hdmlp_image_mode;

typedef enum hdmlp_image_layout {
    HDMLP_LAYOUT_NHWC = 0, /* default */
    HDMLP_LAYOUT_NCHW = 1
} hdmlp_image_layout;

typedef enum hdmlp_image_dtype {
    HDMLP_DTYPE_UINT8 = 0,  /* pixel values 0..255 (default) */
    HDMLP_DTYPE_FLOAT32 = 1 /* (value / 255 - mean[c]) / std[c] */
} hdmlp_image_dtype;

/* A plain value object like hdmlp_config: not thread-safe; setters check their range and
 * return HDMLP_E_INVAL (naming the parameter) without changing the config on failure. */
HDMLP_API int hdmlp_image_config_create(hdmlp_image_config **out);
HDMLP_API void hdmlp_image_config_free(hdmlp_image_config *ic);
/* Output height and width in pixels, each 1..8192. Default 224 × 224. */
HDMLP_API int hdmlp_image_config_set_size(hdmlp_image_config *ic, uint32_t height,
                                          uint32_t width);
HDMLP_API int hdmlp_image_config_set_mode(hdmlp_image_config *ic, hdmlp_image_mode mode);
/* RandomResizedCrop's area fraction range: 0 < min <= max <= 1. Default 0.08 .. 1. */
HDMLP_API int hdmlp_image_config_set_scale(hdmlp_image_config *ic, double min, double max);
/* RandomResizedCrop's aspect ratio (width / height) range: 0 < min <= max <= 100.
 * Default 3/4 .. 4/3. */
HDMLP_API int hdmlp_image_config_set_ratio(hdmlp_image_config *ic, double min, double max);
/* Validation crop fraction, 0 < f <= 1. Default 0.875 (224 of 256). */
HDMLP_API int hdmlp_image_config_set_crop_fraction(hdmlp_image_config *ic, double f);
/* Horizontal flip probability, 0..1, in either mode. Default 0.5 in TRAIN, 0 in VAL. */
HDMLP_API int hdmlp_image_config_set_flip(hdmlp_image_config *ic, double p);
HDMLP_API int hdmlp_image_config_set_layout(hdmlp_image_config *ic, hdmlp_image_layout layout);
HDMLP_API int hdmlp_image_config_set_dtype(hdmlp_image_config *ic, hdmlp_image_dtype dtype);
/* Normalisation for HDMLP_DTYPE_FLOAT32, per output channel (the first `channels` entries
 * are used): each std must be > 0 and every value finite. Default mean 0, std 1 (values in
 * 0..1). Ignored for uint8. ImageNet's: mean {0.485, 0.456, 0.406}, std {0.229, 0.224,
 * 0.225}. */
HDMLP_API int hdmlp_image_config_set_normalize(hdmlp_image_config *ic, const float mean[3],
                                               const float std[3]);
/* Output channels: 3 (RGB; grayscale inputs are replicated, the default) or 1 (luma: colour
 * PNG and raw inputs as PIL's convert("L"), (19595 R + 38470 G + 7471 B + 2^15) >> 16;
 * colour JPEGs decode their Y plane directly, which differs from that by at most a level or
 * two). */
HDMLP_API int hdmlp_image_config_set_channels(hdmlp_image_config *ic, uint32_t channels);
/* Decode threads, 0..64. 0 (the default) = automatic: the loader keeps a pool of one decode
 * thread per online CPU besides its I/O threads (hdmlp_config_set_threads) and lets a total
 * of (online CPUs + 1) of them run, moving one thread at a time between I/O and decoding
 * from the measured rates (every ~200 ms: when decoding waits for data, towards I/O; when
 * data waits for decoding, towards decoding); at least one of each. n > 0 fixes the split:
 * all I/O threads and n decode threads. The split and rates are in the stats. Each decode
 * thread's working memory (the decoded image, or a training crop's part of a JPEG, and the
 * resampling rows) is outside the memory budget: up to 3 bytes per source pixel. */
HDMLP_API int hdmlp_image_config_set_decode_threads(hdmlp_image_config *ic, uint32_t n);
/* Decode-ahead depth: batches decoded ahead of the consumer, 1..16. Default 2. Each costs
 * one output buffer in the memory budget. */
HDMLP_API int hdmlp_image_config_set_prefetch(hdmlp_image_config *ic, uint32_t batches);
/* Samples with fields (hdmlp_dataset_field_records): the field the pipeline decodes, by
 * name (NUL-terminated, 1..255 bytes; copied), of type image or bytes. Unset (NULL, the
 * default): the dataset's one field of type image. The other fields pass through: each
 * decoded image's sample as a field record (hdmlp_batch_fields). A sample without a value
 * of the field is a corrupt sample naming it. hdmlp_loader_create fails with
 * HDMLP_E_INVAL naming the field when the dataset has no such field (or, unset, not
 * exactly one image field), or when a field is set and the samples are not field records. */
HDMLP_API int hdmlp_image_config_set_field(hdmlp_image_config *ic, const char *name);
/* JPEG DCT scaling (above), 0 or 1. Default 1. */
HDMLP_API int hdmlp_image_config_set_dct_scaling(hdmlp_image_config *ic, int on);
/* Fast JPEG decoding, 0 or 1. Default 0. With 1, JPEGs decode with libjpeg-turbo's fast
 * integer IDCT (JDCT_IFAST, TurboJPEG's TJFLAG_FASTDCT) and plain chroma upsampling
 * (replication instead of the "fancy" triangle filter, TJFLAG_FASTUPSAMPLE): less work a
 * pixel, but the decoded pixels are no longer libjpeg's accurate ones that PIL gives, so the
 * output differs from torchvision/PIL beyond the tolerance above: on the tests' 4:2:0
 * quality-90 images a full-size decode is off by 2 levels on average and by up to ~90 at
 * sharp colour edges (subsampled chroma is replicated, not interpolated), gray by 0.6 on
 * average (tests/loader/image/test_image_decode.c bounds the mean below 3). DCT-scaled
 * decodes keep the accurate IDCT (libjpeg-turbo has no fast scaled one) but still upsample
 * plainly. PNG and raw inputs are not affected. */
HDMLP_API int hdmlp_image_config_set_fast_decode(hdmlp_image_config *ic, int on);
/* Where the batches' output buffers come from, e.g. page-locked (pinned) memory for fast
 * transfers to a GPU (cudaHostAlloc / cudaFreeHost) or a pool of it: alloc(arg, bytes)
 * returns a buffer of at least `bytes` aligned to 64 bytes, or NULL (the loader then fails
 * with HDMLP_E_NOMEM; a misaligned one fails it with HDMLP_E_INVAL); free(arg, ptr, bytes)
 * takes back what alloc returned. alloc is called on the thread calling hdmlp_loader_next,
 * free on the thread releasing the batch or freeing the loader; both must be thread-safe in
 * that sense and must not call into the loader. arg is passed as given and must outlive
 * every batch. Both NULL (the default): the library allocates. One NULL: HDMLP_E_INVAL.
 * Either way a released full batch's buffer is kept and reused for a later batch (at most
 * prefetch + 2 buffers in use and kept together, within the budget's image share), so alloc
 * runs a few times a loader rather than once a batch; the kept ones go to free when the
 * loader is freed. A batch's buffer is never reused while the batch is held. */
HDMLP_API int hdmlp_image_config_set_allocator(hdmlp_image_config *ic,
                                               void *(*alloc)(void *arg, size_t bytes),
                                               void (*free)(void *arg, void *ptr, size_t bytes),
                                               void *arg);

/* Turns the image pipeline on with a copy of `ic` (NULL turns it off). Its buffers come off
 * the memory budget first (stats budget_images): output buffers for prefetch + 2 batches
 * (the batches decoded ahead and two the consumer may hold; each batch × height × width ×
 * channels × element size bytes) and prefetch − 1 raw batches of the largest samples queued
 * for decoding (prefetch of them with field records, which stay with their images until
 * release). The rest of the budget is split as without the pipeline, so the delivered
 * order is that of a loader without it given the budget less budget_images, and a budget
 * hdmlp_loader_create accepts runs a loop that holds one batch to the end.
 * hdmlp_loader_create fails with HDMLP_E_RANGE, naming the pipeline's share, when the
 * budget cannot hold it beside the loader's own minimum. A consumer holding more decoded
 * batches gets HDMLP_E_NOMEM (resumable) from hdmlp_loader_next after a second without a
 * release, as without the pipeline. HDMLP_E_NOMEM when out of memory. */
HDMLP_API int hdmlp_config_set_image(hdmlp_config *cfg, const hdmlp_image_config *ic);

/* A decoded batch, as hdmlp_batch_image() describes it. */
typedef struct hdmlp_image_batch {
    void *data;     /* n images, contiguous: n × H × W × C (NHWC) or n × C × H × W (NCHW);
                     * 64-byte aligned; owned by the batch, valid (and writable) until
                     * hdmlp_batch_release */
    uint64_t bytes; /* n × height × width × channels × element size */
    uint32_t n;     /* images (== hdmlp_batch_size; skipped corrupt images are left out) */
    uint32_t height, width, channels;
    hdmlp_image_layout layout;
    hdmlp_image_dtype dtype;
    const uint32_t *labels;  /* n labels, owned by the batch */
    const uint64_t *indices; /* n packed indices (as hdmlp_sample_view.index) */
} hdmlp_image_batch;

/* Describes the decoded images of a batch from a loader with an image pipeline. The batch's
 * sample views (hdmlp_batch_samples) then point at each image inside the same buffer (size
 * = one image's bytes). HDMLP_E_STATE when the loader has no image pipeline, HDMLP_E_INVAL
 * on NULL. Any thread, while the batch is held. */
HDMLP_API int hdmlp_batch_image(const hdmlp_batch *batch, hdmlp_image_batch *out);
/* With an image pipeline on samples with fields: each image's sample as its field record
 * (hdmlp_sample_field reads it; the decoded field's value included), hdmlp_batch_size() of
 * them in the images' order, owned by the batch, valid until hdmlp_batch_release; they are
 * charged to the budget's image share until then. NULL otherwise. */
HDMLP_API const hdmlp_sample_view *hdmlp_batch_fields(const hdmlp_batch *batch);

/* Counters since creation. All byte counts are exact. The struct only grows: a new field is
 * appended at its end (every field is a uint64_t or an array of them); none is ever moved,
 * resized or removed. The calls that fill one take the size the caller was compiled with
 * (HDMLP_STATS_SIZE), so a program built against an older hdmlp.h keeps working with a
 * newer library (it gets the fields it knows), and a newer program with an older library
 * gets 0 in the fields that library does not have. */
typedef struct hdmlp_stats {
    uint64_t samples;                /* samples delivered */
    uint64_t batches;                /* batches delivered */
    uint64_t epochs;                 /* epochs completed */
    uint64_t requests;               /* scheduler requests (== samples unless draining) */
    uint64_t hits;                   /* requests served from a filled slot */
    uint64_t misses;                 /* requests that needed a refill */
    uint64_t chunk_loads;            /* refills (each reads one chunk, whole or ranged) */
    uint64_t read_ops;               /* read operations issued to storage */
    uint64_t bytes_read;             /* bytes read from storage */
    uint64_t bytes_delivered;        /* raw bytes of delivered samples */
    uint64_t stored_bytes_delivered; /* stored bytes of delivered samples */
    uint64_t samples_filled;         /* samples placed into slots */
    uint64_t whole_refills;          /* refills read as one whole-chunk operation */
    uint64_t ranged_refills;         /* refills read as byte ranges */
    uint64_t peak_memory_bytes;      /* peak accounted bytes (slots + in flight + scratch) */
    uint64_t memory_budget;          /* configured budget */
    uint64_t stall_ns;               /* time hdmlp_loader_next spent waiting for data */
    uint64_t fill_hist[11];          /* refills by fill rate: bucket i holds [i/10, (i+1)/10) */
    uint64_t abstract_chunks;        /* A */
    uint64_t chunk_groups;           /* same as A; groups of consecutive chunks */
    /* distributed (world > 1) */
    uint64_t remote_requests; /* requests sent to owners */
    uint64_t remote_hits;     /* positions served by a prefetch that arrived in time */
    uint64_t prefetch_sent;   /* samples pushed to peers ahead of their request */
    uint64_t answers_sent;    /* samples sent in answer to a peer's request */
    uint64_t net_bytes_out;   /* sample bytes sent to peers */
    uint64_t net_bytes_in;    /* sample bytes received from peers */
    uint64_t net_bytes_lent;  /* of those, bytes same-host peers lent in shared memory
                                 (used in place, not copied) */
    /* tiers */
    uint64_t source_bytes;    /* bytes read from the dataset directory */
    uint64_t ram_cache_bytes; /* bytes served from the RAM chunk cache */
    uint64_t ssd_cache_bytes; /* bytes read from the SSD chunk cache */
    uint64_t ram_cached_chunks;
    uint64_t ssd_staged_chunks;
    uint64_t tier_fallbacks; /* cached chunks found bad or missing and read from the source */
    /* storage cost model in use (measured when calibrated, else configured) */
    uint64_t source_op_ns;       /* per read operation on the dataset's storage */
    uint64_t source_bytes_per_s; /* its bandwidth */
    uint64_t ssd_op_ns;          /* the SSD cache directory's, when calibrated */
    uint64_t ssd_bytes_per_s;
    uint64_t calibrated;      /* 1 if the source figures were measured */
    uint64_t skipped_samples; /* corrupt samples left out (HDMLP_CORRUPT_SKIP) */
    /* the cost model: source_op_ns / source_bytes_per_s above are its current estimate */
    uint64_t cost_learning;     /* 1 if it follows the reads (hdmlp_config_set_cost_learning) */
    uint64_t cost_reads;        /* reads it has learnt from */
    uint64_t cost_changes;      /* changes of the storage it detected */
    uint64_t cost_explorations; /* refills read the other way to learn */
    uint64_t source_op_ns_start; /* its start (default, configured or calibrated) */
    uint64_t source_bytes_per_s_start;
    uint64_t direct_io;       /* 1 if segments are read with O_DIRECT */
    uint64_t page_cache_room; /* room of the page cache (HDMLP_DIRECT_IO_AUTO), else 0 */
    /* where the memory budget went (bytes; with budget_images, they add up to memory_budget) */
    uint64_t budget_read_buffers; /* two chunk read buffers (+ the SSD stager's) */
    uint64_t budget_batches;      /* two batches of the largest samples (+ answers to peers) */
    uint64_t budget_remote;       /* samples peers push ahead of need */
    uint64_t budget_ram_cache;    /* the RAM chunk cache */
    uint64_t budget_lookahead;    /* room beyond the batches (lookahead also uses theirs) */
    uint64_t budget_slots; /* valid slots: their samples (each charged its bytes and 192 for
                            * its record) and the slot tables (40 bytes a slot) */
    /* the exchange's paths (hdmlp_config_set_same_host) */
    uint64_t peers_same_host; /* peers reached over the same-host (Unix) socket, not TCP */
    /* image pipeline (hdmlp_config_set_image); all 0 without one */
    uint64_t images_decoded;    /* images decoded into batches */
    uint64_t decode_failures;   /* images that failed to decode (skipped or failing) */
    uint64_t dct_scaled;        /* JPEG decodes that used DCT scaling */
    uint64_t decode_busy_ns;    /* decode threads' total busy time */
    uint64_t decode_rate;       /* images/s decoded over the last balance window (~200 ms) */
    uint64_t read_rate;         /* samples/s the I/O threads read over that window */
    uint64_t io_threads_active; /* the current split: I/O threads allowed to run */
    uint64_t decode_threads_active; /* and decode threads */
    uint64_t balance_moves;         /* changes of the split (automatic balance) */
    /* per-GPU balance (hdmlp_config_set_node_board); all 0 when the board is off */
    uint64_t board_active;          /* 1 if this rank is on a node board */
    uint64_t board_windows;         /* balance windows (~20 ms) it ran */
    uint64_t board_hold_windows;    /* windows it held back for a starved rank */
    uint64_t board_starved_windows; /* windows it was the node's most-starved rank */
    uint64_t board_idle_windows;    /* windows it did not wait, had two batches or more
                                       ready ahead of its consumer, while another local
                                       rank waited: idle prefetch beside a stall */
    uint64_t board_lead_samples;    /* samples planned ahead of its consumer (last window) */
    uint64_t board_lent_peak;       /* most bytes of its limit lent to the node at once */
    uint64_t board_borrowed_peak;   /* most bytes borrowed above its budget at once */
    uint64_t node_stall_max_ns;     /* largest / smallest stall_ns of the fresh local ranks */
    uint64_t node_stall_min_ns;     /* (this one included), at its last window */
    /* the image pipeline's part of the budget (decoded batches ahead and held, raw batches
     * queued for decoding), taken before the rest is split; 0 without a pipeline */
    uint64_t budget_images;
    /* most refills being read at once (I/O threads busy together; a remote source's threads
     * share the read-buffer reserve by each refill's bytes, so more overlap there) */
    uint64_t refills_in_flight_peak;
    /* queued refills planned again because the cost model moved before they were read */
    uint64_t cost_replans;
    /* most bytes of peers' prefetches held at once (within budget_remote) */
    uint64_t remote_peak;
    /* the delivery order (hdmlp_config_set_order): 0 strict, 1 pool; and the pool's read
     * unit in samples (0 for strict) */
    uint64_t order;
    uint64_t pool_unit;
    /* the strict order's refill policy in use (hdmlp_policy; HDMLP_POLICY_AUTO resolved) */
    uint64_t policy;
    /* the budget set (hdmlp_config_set_memory); memory_budget above is the one in use, more
     * when hdmlp_config_set_memory_raise raised it to the least that works */
    uint64_t memory_configured;
    /* Memory that depends on the dataset: metadata_bytes is the loader's own state (the
     * scheduler's per-chunk and per-slot arrays, the tiers' per-chunk state, the slot table,
     * the planned positions), index_bytes the dataset's index it holds (mapped or read). The
     * per-slot part and each planned sample's record are charged to memory_budget (its
     * slot tables share, and 192 bytes a sample); the per-chunk part and the index
     * are not. 0 in a forecast. */
    uint64_t metadata_bytes;
    uint64_t index_bytes;
    /* the budget's share holding a format-2 dataset's sample tables (DIR/tables: 32 bytes
     * a sample of a classification dataset), held when they fit a sixteenth of the budget,
     * so planning reads no file; else 0 and each miss reads its chunk's table; with the
     * budget_* fields above, the budget */
    uint64_t budget_sample_tables;
} hdmlp_stats;

/* The `size` argument of the calls that fill an hdmlp_stats: the struct as this program
 * was compiled. */
#define HDMLP_STATS_SIZE sizeof(hdmlp_stats)

/* Copies the loader's counters into out: min(size, the library's sizeof(hdmlp_stats))
 * bytes, then zeros out to `size` bytes (fields newer than the library). Nothing at or past
 * (char *)out + size is written. Pass HDMLP_STATS_SIZE (or sizeof of your struct).
 * HDMLP_E_INVAL when ld or out is NULL or size is 0. Any thread, at any time. */
HDMLP_API int hdmlp_loader_stats(hdmlp_loader *ld, hdmlp_stats *out, size_t size);
/* Exact resume. hdmlp_loader_save_state writes a small state (at most HDMLP_STATE_MAX bytes:
 * seed, epoch, position after the last batch handed out, and a fingerprint of the dataset
 * and of the config fields that shape the order) into buf and sets *len. A loader created
 * with hdmlp_config_set_resume(cfg, state, len) then delivers exactly what the saved loader
 * would have delivered next. Resuming with another dataset or an order-changing config is
 * refused (HDMLP_E_INVAL naming the field). With world > 1, every rank must save after the
 * same number of batches (as synchronous data-parallel training does). Any thread. */
#define HDMLP_STATE_MAX 256
HDMLP_API int hdmlp_loader_save_state(hdmlp_loader *ld, void *buf, size_t cap, size_t *len);
HDMLP_API int hdmlp_config_set_resume(hdmlp_config *cfg, const void *state, size_t len);
/* The epoch and the position within it (this rank's samples) a saved state resumes at. */
HDMLP_API int hdmlp_state_position(const void *state, size_t len, uint64_t *epoch,
                                   uint64_t *position);
/* Detail of the last skipped sample ("" if none), copied into buf (NUL-terminated). */
HDMLP_API void hdmlp_loader_last_skip(hdmlp_loader *ld, char *buf, size_t cap);
/* Bytes read from the dataset directory in each planned epoch so far: fills out[0..n) and
 * sets *count to the number of epochs known (which may exceed n). Any thread. */
HDMLP_API int hdmlp_loader_epoch_source_bytes(hdmlp_loader *ld, uint64_t *out, size_t n,
                                              size_t *count);

/* The cost model's estimate over the run so far, log-spaced (a point every r reads, r
 * doubling as the run grows; at most 32 points, the start first): fills out[0..n) and sets
 * *count to the number of points (which may exceed n). Any thread. */
typedef struct hdmlp_cost_point {
    uint64_t reads; /* reads learnt from when this estimate held */
    double op_us;
    double bytes_per_s;
} hdmlp_cost_point;
HDMLP_API int hdmlp_loader_cost_history(hdmlp_loader *ld, hdmlp_cost_point *out, size_t n,
                                        size_t *count);

/* Predicts what a loader made with (ds, cfg) would do over cfg's epochs (which must be
 * bounded), without reading sample data: a metadata-only replay of the same decisions.
 * Fills *out with the counters a run reports when it ends (samples, batches, epochs,
 * requests, hits, misses, chunk_loads, read_ops, bytes_read, bytes_delivered, whole and
 * ranged refills, fill histogram, abstract chunks; timing fields 0); for world > 1, this
 * rank's. out and size as for hdmlp_loader_stats (size 0: HDMLP_E_INVAL). Optional arrays (NULL
 * to skip): chunk_loads[c] = loads of chunk c by this rank (hdmlp_dataset_chunk_count entries),
 * first_use[c] = the first load's sequence number (epoch × N + global position; UINT64_MAX if
 * never), epoch_source_bytes[e] = bytes this rank reads from the dataset directory in epoch e
 * (epochs entries). With tiers, source bytes assume each cached chunk is in its cache by its
 * next load (the RAM cache is filled by the first load; the SSD stager runs in the background).
 * Thread-safe for ds. */
HDMLP_API int hdmlp_loader_forecast(hdmlp_dataset *ds, const hdmlp_config *cfg,
                                    hdmlp_stats *out, size_t size, uint64_t *chunk_loads,
                                    uint64_t *first_use, uint64_t *epoch_source_bytes);

#ifdef __cplusplus
}
#endif
#endif /* HDMLP_H */
