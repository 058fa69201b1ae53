/* hdmlp-pack: argv, messages and exit codes (0 ok, 1 failure, 2 usage error). */
#include "hdmlp.h"
#include "loader_units.h"
#include "pack_cli.h"
#include "packer.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
    "Usage: hdmlp-pack [options] -o OUT INPUT...\n"
    "       hdmlp-pack --info DATASET\n"
    "       hdmlp-pack --verify DATASET\n"
    "       hdmlp-pack --extract DATASET INDEX|KEY [-o FILE]\n"
    "       hdmlp-pack --upload DIR -o s3://BUCKET/PREFIX\n"
    "\n"
    "Packs samples into the hdmlp dataset directory OUT (an index and segment\n"
    "files): globally shuffled, grouped into chunks of K samples, 4 KiB aligned.\n"
    "\n"
    "Inputs (several merge; labels are the union of their names, numbered in\n"
    "bytewise sorted order, \".\" first; keys need not be unique):\n"
    "  DIR            each subdirectory of DIR is a label and every file below it\n"
    "                 a sample of that label; files directly in DIR get the label\n"
    "                 \".\". Keys are paths relative to DIR. Entries are visited in\n"
    "                 bytewise order; hidden files are included; symlinks are\n"
    "                 followed (to files and directories); a symlink to a directory\n"
    "                 it is inside of (a loop) is skipped; dangling symlinks,\n"
    "                 unreadable and special files are errors.\n"
    "  ARCHIVE        a tar (plain, gz, bz2, xz, zst, ...), zip, 7z or cpio file,\n"
    "                 recognised by its content. Each regular member is a sample\n"
    "                 keyed by its stored name (never used as a path); its label\n"
    "                 is its top directory (after leading \"/\" and \"./\"), \".\" for\n"
    "                 members in the root. A symlink member is a sample with the\n"
    "                 bytes of the member it names (relative to its directory);\n"
    "                 symlinks to directories, to nothing in the archive (absolute,\n"
    "                 outside, missing) or in loops, and special members, are\n"
    "                 skipped. The archive is unpacked into a temporary spill file\n"
    "                 beside OUT while packing.\n"
    "  --list FILE    lines \"PATH<TAB>LABEL\"; relative paths are relative to the\n"
    "                 directory of FILE (\"-\": standard input, relative to the\n"
    "                 working directory); blank lines and lines starting with #\n"
    "                 are skipped.\n"
    "  --webdataset   every input is a WebDataset shard (an archive): adjacent\n"
    "                 members sharing a key (the name up to the first '.' of its\n"
    "                 last component) are one sample, keyed by it, labelled by\n"
    "                 the decimal class number in its .cls member (labels \"0\"\n"
    "                 to the largest number, numbered by value); each other\n"
    "                 member is a value of the field its extension names: image\n"
    "                 (.jpg .jpeg .png .webp .ppm .bmp .gif .tif ...), text\n"
    "                 (.txt), JSON (.json), bytes (any other). An image and a\n"
    "                 .cls alone give samples of the image's bytes; more fields\n"
    "                 give field records. A sample without a .cls or another\n"
    "                 member, with two of one field, or a link member, is an\n"
    "                 error naming it. A .npy member is an ndarray (C-ordered,\n";
static const char usage_inputs2[] =
    "                 little-endian numbers, up to 4 dims; a field's arrays share\n"
    "                 dtype and dims, sizes may vary).\n"
    "  --manifest FILE  a JSONL file (one JSON object a line) or a CSV file (.csv:\n"
    "                 a header row of column names, then RFC 4180 rows): a sample\n"
    "                 a row, a field a column. --label-field (\"label\") is the\n"
    "                 label column (labels numbered by value when all are class\n"
    "                 numbers, else in name order; without the column, no label),\n"
    "                 \"__key__\" the key (else FILE:LINE), the --file-fields\n"
    "                 columns (\"image\") paths (relative to FILE's directory) of\n"
    "                 files whose bytes are the value, typed by extension as in\n"
    "                 WebDataset shards; other columns are values as they stand:\n"
    "                 integers int64, numbers float64, strings text, other JSON\n"
    "                 JSON. null or an empty cell is an absent value. Manifests\n"
    "                 are packed with manifests only.\n"
    "  --label-field NAME, --file-fields A,B,...  as above\n"
    "  --require-fields A,B,...  fields every sample must have (a sample without\n"
    "                 one is an error naming it and the field); others may be\n"
    "                 absent, as the index records.\n"
    "\n"
    "Whatever is skipped is counted by reason in the summary (the first few are\n"
    "named in warnings), and so are labels left without samples.\n"
    "An input that is or contains an hdmlp dataset (a directory holding an index or\n"
    "segment files, or such archive members; lists are not checked) is an error\n"
    "naming it, unless:\n"
    "      --skip-nested     leave such datasets out (counted in the summary)\n"
    "      --allow-nested    pack their files as ordinary samples\n"
    "OUT and its temporary directory are never packed, even inside an input.\n"
    "\n";

/* Split in parts: C11 compilers need only support string literals of 4095 bytes. */
static const char usage_opts[] =
    "Options:\n"
    "  -o, --output OUT      dataset directory to create\n"
    "      --chunk-size K    samples per chunk, 1..1048576, or auto (the default: chunks\n"
    "                        of about 1 MiB, at least 64 samples, at most N/256 when\n"
    "                        that is more)\n"
    "      --seed S          shuffle seed, decimal or 0x-hex (default: random from\n"
    "                        /dev/urandom; printed in the summary, stored in the\n"
    "                        index)\n"
    "      --compress MODE   none | zstd[:LEVEL] | auto (default auto: zstd level\n"
    "                        3, except samples recognised as already-compressed\n"
    "                        media by their magic bytes: JPEG, PNG, GIF, WebP,\n"
    "                        MP4, gzip, zstd, zip, xz, bzip2, ...). A sample is\n"
    "                        stored compressed only if that saves at least 3 %.\n"
    "      --dict            train a zstd dictionary (at most 110 KiB) from up to\n"
    "                        1000 samples / 8 MiB of the packed order, use it\n"
    "      --image-max-side N\n"
    "                        re-encode JPEG and PNG samples whose longer side\n"
    "                        exceeds N pixels as JPEG with that side N (aspect\n"
    "                        kept), so that epochs read and decode fewer bytes;\n"
    "                        keys stay; other samples are stored as given; an\n"
    "                        image that cannot be decoded is kept as it is with a\n"
    "                        warning naming it (default: off)\n"
    "      --image-quality Q JPEG quality 1..100 of re-encoded images (default 90)\n"
    "  -j, --threads N       worker threads (default: number of CPUs)\n"
    "      --segment-size SIZE\n"
    "                        start a new segment file when the next chunk would\n"
    "                        exceed SIZE (default 1G; 0 = one chunk per file);\n"
    "                        suffixes K, M, G, T (powers of 1024)\n"
    "  -f, --force           replace an existing OUT (only a previous dataset, an\n"
    "                        empty directory or a non-directory)\n"
    "  -q, --quiet           no progress bar, no summary\n"
    "  -h, --help            show this help and exit\n"
    "  -V, --version         show the version and exit\n"
    "\n";

static const char usage_text2[] =
    "Inspection (through the public API):\n"
    "      --info DATASET    samples, chunks, segments, labels with counts, sizes,\n"
    "                        codecs, dictionary size, seed; image statistics\n"
    "                        (types, bytes and sides: mean and percentiles) read\n"
    "                        from the headers of up to 2000 samples in packed\n"
    "                        order (a uniform random sample; all if fewer)\n"
    "      --verify DATASET  check every checksum; prints OK, or names the first\n"
    "                        bad chunk or sample and exits 1\n"
    "      --extract DATASET INDEX|KEY [-o FILE]\n"
    "                        write one sample's original bytes to FILE or stdout;\n"
    "                        a decimal INDEX is a position in packed order,\n"
    "                        anything else a key; a sample with fields goes to\n"
    "                        FILE.FIELD, one file a field (an ndarray as .npy)\n"
    "DATASET may be a URL: http(s)://HOST/PATH/ or s3://BUCKET/PREFIX.\n"
    "\n"
    "Object storage (credentials, region and endpoint from AWS_ACCESS_KEY_ID,\n"
    "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL and the\n"
    "AWS_PROFILE profile of ~/.aws/credentials and ~/.aws/config):\n"
    "  -o s3://BUCKET/PREFIX packs into a temporary directory ($TMPDIR), uploads it\n"
    "                        and removes it\n"
    "      --upload DIR      uploads the dataset DIR to -o s3://BUCKET/PREFIX:\n"
    "                        segments first (multipart above 64 MiB), the index\n"
    "                        last, so a half-finished upload never opens\n"
    "\n"
    "The output is written atomically (a temporary directory beside OUT, renamed\n"
    "at the end). It is reproducible: the same inputs, options and seed give\n"
    "byte-identical files, whatever the thread count, if SOURCE_DATE_EPOCH is set\n"
    "(it is stored as the creation time; otherwise the current time is).\n"
    "A progress bar is drawn on stderr when it is a terminal.\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 usage error.\n";

static void usage_error(const char *fmt, const char *arg)
{
    fputs(PACK_CLI_NAME ": ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nTry 'hdmlp-pack --help' for more information.\n", stderr);
}

/* ---- argument parsing --------------------------------------------------------------- */

/* Decimal or 0x-hex unsigned 64-bit. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') {
        return -1;
    }
    const int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, hex ? 16 : 10);
    if (errno != 0 || end == s + (hex ? 2 : 0) || *end != '\0') {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_compress(const char *s, pack_opts *o)
{
    if (strcmp(s, "none") == 0) {
        o->compress = PACK_COMPRESS_NONE;
        return 0;
    }
    if (strcmp(s, "auto") == 0) {
        o->compress = PACK_COMPRESS_AUTO;
        return 0;
    }
    if (strncmp(s, "zstd", 4) != 0 || (s[4] != '\0' && s[4] != ':')) {
        return -1;
    }
    o->compress = PACK_COMPRESS_ZSTD;
    if (s[4] == ':') {
        uint64_t level;
        if (parse_u64(s + 5, &level) != 0 || level < 1 || level > 22) {
            return -1;
        }
        o->level = (int)level;
    }
    return 0;
}

/* ---- signals, callbacks -------------------------------------------------------------- */

/* Set by SIGINT/SIGTERM, read by the library's threads through cb_cancel: a lock-free
 * atomic (async-signal-safe and race-free). The CLI's state, not the library's. */
static atomic_int g_stop;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&g_stop, 1);
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

typedef struct cli {
    pack_bar bar;
} cli;

static int cb_cancel(void *arg)
{
    (void)arg;
    return atomic_load_explicit(&g_stop, memory_order_relaxed) != 0;
}

static void cb_progress(void *arg, const pack_progress *p)
{
    cli *const c = arg;
    pack_bar_update(&c->bar, p);
}

static void cb_message(void *arg, const char *msg)
{
    cli *const c = arg;
    pack_bar_clear(&c->bar);
    fprintf(stderr, PACK_CLI_NAME ": warning: %s\n", msg);
}

static int random_seed(uint64_t *seed)
{
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    unsigned char b[8];
    const ssize_t r = read(fd, b, sizeof(b));
    close(fd);
    if (r != (ssize_t)sizeof(b)) {
        return -1;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | b[i];
    }
    *seed = v;
    return 0;
}

static void print_summary(const pack_summary *s, const char *out)
{
    char in_h[32], st_h[32];
    const double ratio = s->stored_bytes ? (double)s->raw_bytes / (double)s->stored_bytes : 1.0;
    const double rate = s->seconds > 0 ? (double)s->raw_bytes / s->seconds / 1e6 : 0.0;
    printf("Packed %llu samples with %u label%s into %s: %llu chunk%s of up to %u samples in "
           "%u segment file%s. %s in, %s stored (ratio %.2f; codecs: %llu none, %llu zstd, "
           "%llu zstd+dict; ",
           (unsigned long long)s->samples, s->labels, s->labels == 1 ? "" : "s", out,
           (unsigned long long)s->chunks, s->chunks == 1 ? "" : "s", s->chunk_size, s->segments,
           s->segments == 1 ? "" : "s", pack_human_bytes(s->raw_bytes, in_h, sizeof(in_h)),
           pack_human_bytes(s->stored_bytes, st_h, sizeof(st_h)), ratio,
           (unsigned long long)s->codec_count[0], (unsigned long long)s->codec_count[1],
           (unsigned long long)s->codec_count[2]);
    if (s->dict_bytes) {
        printf("dictionary %llu bytes). ", (unsigned long long)s->dict_bytes);
    } else {
        printf("no dictionary). ");
    }
    printf("Seed %llu. %.2f s, %.1f MB/s.\n", (unsigned long long)s->seed, s->seconds, rate);
    if (s->fields[0] != '\0') {
        printf("Fields: %s.\n", s->fields);
    }
    if (s->images_resized || s->images_kept) {
        char a_h[32], b_h[32];
        printf("Images: %llu re-encoded (%s before, %s after), %llu over the limit kept as "
               "they were.\n",
               (unsigned long long)s->images_resized,
               pack_human_bytes(s->image_bytes_in, a_h, sizeof(a_h)),
               pack_human_bytes(s->image_bytes_out, b_h, sizeof(b_h)),
               (unsigned long long)s->images_kept);
    }
}

/* What was left out, and labels without samples: in the summary (stdout), or as warnings
 * on stderr with --quiet. */
static void print_losses(FILE *f, const pack_summary *s)
{
    const char *const prefix = f == stderr ? PACK_CLI_NAME ": warning: " : "";
    uint64_t total = 0;
    for (int r = 0; r < PACK_SKIP_N; r++) {
        total += s->skipped[r];
    }
    if (total) {
        fprintf(f, "%s%s %llu input entr%s:", prefix, f == stderr ? "skipped" : "Skipped",
                (unsigned long long)total, total == 1 ? "y" : "ies");
        const char *sep = " ";
        for (int r = 0; r < PACK_SKIP_N; r++) {
            if (s->skipped[r]) {
                fprintf(f, "%s%s (%llu)", sep, pack_skip_reason_text(r),
                        (unsigned long long)s->skipped[r]);
                sep = ", ";
            }
        }
        fputs(".\n", f);
    }
    if (s->empty_labels) {
        fprintf(f, "%s%u of %u labels have no samples: %s\n",
                f == stderr ? prefix : "Warning: ", s->empty_labels, s->labels,
                s->empty_label_names);
    }
}

/* ---- main ------------------------------------------------------------------------------ */

enum {
    OPT_LIST = 256,
    OPT_CHUNK,
    OPT_SEED,
    OPT_COMPRESS,
    OPT_DICT,
    OPT_SEGMENT,
    OPT_IMAGE_SIDE,
    OPT_IMAGE_QUALITY,
    OPT_SKIP_NESTED,
    OPT_ALLOW_NESTED,
    OPT_WEBDATASET,
    OPT_MANIFEST,
    OPT_LABEL_FIELD,
    OPT_FILE_FIELDS,
    OPT_REQUIRE_FIELDS,
    OPT_INFO,
    OPT_VERIFY,
    OPT_EXTRACT,
    OPT_UPLOAD
};

enum mode { MODE_PACK, MODE_INFO, MODE_VERIFY, MODE_EXTRACT, MODE_UPLOAD };

static const struct option long_opts[] = {
    {"output", required_argument, NULL, 'o'},
    {"list", required_argument, NULL, OPT_LIST},
    {"chunk-size", required_argument, NULL, OPT_CHUNK},
    {"seed", required_argument, NULL, OPT_SEED},
    {"compress", required_argument, NULL, OPT_COMPRESS},
    {"dict", no_argument, NULL, OPT_DICT},
    {"threads", required_argument, NULL, 'j'},
    {"segment-size", required_argument, NULL, OPT_SEGMENT},
    {"image-max-side", required_argument, NULL, OPT_IMAGE_SIDE},
    {"image-quality", required_argument, NULL, OPT_IMAGE_QUALITY},
    {"skip-nested", no_argument, NULL, OPT_SKIP_NESTED},
    {"allow-nested", no_argument, NULL, OPT_ALLOW_NESTED},
    {"webdataset", no_argument, NULL, OPT_WEBDATASET},
    {"manifest", required_argument, NULL, OPT_MANIFEST},
    {"label-field", required_argument, NULL, OPT_LABEL_FIELD},
    {"file-fields", required_argument, NULL, OPT_FILE_FIELDS},
    {"require-fields", required_argument, NULL, OPT_REQUIRE_FIELDS},
    {"force", no_argument, NULL, 'f'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {"info", required_argument, NULL, OPT_INFO},
    {"verify", required_argument, NULL, OPT_VERIFY},
    {"extract", required_argument, NULL, OPT_EXTRACT},
    {"upload", required_argument, NULL, OPT_UPLOAD},
    {NULL, 0, NULL, 0},
};

typedef struct args {
    enum mode mode;
    const char *dataset; /* inspection modes */
    const char *out;
    pack_input *inputs;
    size_t n_inputs;
    int quiet;
    int have_seed;
    int have_quality;
    int pack_only; /* a packing option was given */
    pack_opts o;
} args;

static int set_mode(args *a, enum mode m, const char *dataset, const char *opt)
{
    if (a->mode != MODE_PACK) {
        usage_error("%s cannot be combined with another of --info, --verify, --extract", opt);
        return -1;
    }
    a->mode = m;
    a->dataset = dataset;
    return 0;
}

/* Returns -1 to continue, else the exit code. */
static int parse_args(int argc, char **argv, args *a)
{
    a->inputs = calloc((size_t)argc, sizeof(pack_input));
    if (!a->inputs) {
        fputs(PACK_CLI_NAME ": out of memory\n", stderr);
        return 1;
    }
    opterr = 0;
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, "-:o:j:fqhV", long_opts, NULL)) != -1) {
        switch (c) {
        case 1:
            a->inputs[a->n_inputs].kind = PACK_INPUT_PATH;
            a->inputs[a->n_inputs++].path = optarg;
            break;
        case OPT_LIST:
        case OPT_MANIFEST:
            a->inputs[a->n_inputs].kind = c == OPT_LIST ? PACK_INPUT_LIST : PACK_INPUT_MANIFEST;
            a->inputs[a->n_inputs++].path = optarg;
            a->pack_only = 1;
            break;
        case OPT_LABEL_FIELD:
            a->o.label_field = optarg;
            a->pack_only = 1;
            break;
        case OPT_FILE_FIELDS:
            a->o.file_fields = optarg;
            a->pack_only = 1;
            break;
        case OPT_REQUIRE_FIELDS:
            a->o.require_fields = optarg;
            a->pack_only = 1;
            break;
        case 'o':
            a->out = optarg;
            break;
        case OPT_CHUNK:
            if (strcmp(optarg, "auto") == 0) {
                v = PACK_CHUNK_AUTO;
            } else if (parse_u64(optarg, &v) != 0 || v == 0 || v > (1u << 20)) {
                usage_error("--chunk-size must be an integer from 1 to 1048576, or auto (got "
                            "'%s')",
                            optarg);
                return 2;
            }
            a->o.chunk_size = (uint32_t)v;
            a->pack_only = 1;
            break;
        case OPT_SEED:
            if (parse_u64(optarg, &a->o.seed) != 0) {
                usage_error("--seed must be an unsigned 64-bit integer (got '%s')", optarg);
                return 2;
            }
            a->have_seed = 1;
            a->pack_only = 1;
            break;
        case OPT_COMPRESS:
            if (parse_compress(optarg, &a->o) != 0) {
                usage_error("--compress must be none, auto, zstd or zstd:LEVEL with LEVEL "
                            "1..22 (got '%s')",
                            optarg);
                return 2;
            }
            a->pack_only = 1;
            break;
        case OPT_DICT:
            a->o.dict = 1;
            a->pack_only = 1;
            break;
        case 'j':
            if (parse_u64(optarg, &v) != 0 || v == 0 || v > PACK_MAX_THREADS) {
                usage_error("--threads must be an integer from 1 to 256 (got '%s')", optarg);
                return 2;
            }
            a->o.threads = (unsigned)v;
            a->pack_only = 1;
            break;
        case OPT_SEGMENT:
            /* The sizes hdmlp-bench and Python take (K = KiB, KB = 1000). */
            if (units_parse_size(optarg, 0, &a->o.segment_size, NULL, NULL, 0) != 0) {
                usage_error("--segment-size must be a size such as 512M or 2G (got '%s')",
                            optarg);
                return 2;
            }
            a->pack_only = 1;
            break;
        case OPT_IMAGE_SIDE:
            if (parse_u64(optarg, &v) != 0 || v == 0 || v > 65535) {
                usage_error("--image-max-side must be an integer from 1 to 65535 (got '%s')",
                            optarg);
                return 2;
            }
            a->o.image_max_side = (uint32_t)v;
            a->pack_only = 1;
            break;
        case OPT_IMAGE_QUALITY:
            if (parse_u64(optarg, &v) != 0 || v == 0 || v > 100) {
                usage_error("--image-quality must be an integer from 1 to 100 (got '%s')",
                            optarg);
                return 2;
            }
            a->o.image_quality = (int)v;
            a->have_quality = 1;
            a->pack_only = 1;
            break;
        case OPT_WEBDATASET:
            a->o.webdataset = 1;
            a->pack_only = 1;
            break;
        case OPT_SKIP_NESTED:
        case OPT_ALLOW_NESTED: {
            const pack_nested m = c == OPT_SKIP_NESTED ? PACK_NESTED_SKIP : PACK_NESTED_PACK;
            if (a->o.nested != PACK_NESTED_REFUSE && a->o.nested != m) {
                usage_error("%s", "--skip-nested and --allow-nested cannot be combined");
                return 2;
            }
            a->o.nested = m;
            a->pack_only = 1;
            break;
        }
        case 'f':
            a->o.force = 1;
            a->pack_only = 1;
            break;
        case 'q':
            a->quiet = 1;
            break;
        case 'h':
            fputs(usage_text, stdout);
            fputs(usage_inputs2, stdout);
            fputs(usage_opts, stdout);
            fputs(usage_text2, stdout);
            return 0;
        case 'V':
            printf("hdmlp-pack %s (format %u.%u)\n", hdmlp_version_string(), 1u, 0u);
            return 0;
        case OPT_INFO:
            if (set_mode(a, MODE_INFO, optarg, "--info") != 0) {
                return 2;
            }
            break;
        case OPT_VERIFY:
            if (set_mode(a, MODE_VERIFY, optarg, "--verify") != 0) {
                return 2;
            }
            break;
        case OPT_UPLOAD:
            if (set_mode(a, MODE_UPLOAD, optarg, "--upload") != 0) {
                return 2;
            }
            break;
        case OPT_EXTRACT:
            if (set_mode(a, MODE_EXTRACT, optarg, "--extract") != 0) {
                return 2;
            }
            break;
        case ':':
            usage_error("option '%s' needs an argument", argv[optind - 1]);
            return 2;
        default:
            usage_error("unrecognized option '%s'", argv[optind - 1]);
            return 2;
        }
    }
    for (; optind < argc; optind++) { /* operands after "--" */
        a->inputs[a->n_inputs].kind = PACK_INPUT_PATH;
        a->inputs[a->n_inputs++].path = argv[optind];
    }
    return -1;
}

static int check_mode_args(const args *a)
{
    if (a->mode == MODE_PACK) {
        if (!a->out) {
            usage_error("%s", "no output directory (-o OUT)");
            return 2;
        }
        if (a->n_inputs == 0) {
            usage_error("%s", "no inputs (DIR, ARCHIVE, --list FILE or --manifest FILE)");
            return 2;
        }
        if (a->o.dict && a->o.compress == PACK_COMPRESS_NONE) {
            usage_error("%s", "--dict cannot be used with --compress none");
            return 2;
        }
        if (a->have_quality && a->o.image_max_side == 0) {
            usage_error("%s", "--image-quality needs --image-max-side");
            return 2;
        }
        return -1;
    }
    if (a->pack_only) {
        usage_error("%s", "packing options cannot be used with --info, --verify or --extract");
        return 2;
    }
    if (a->mode == MODE_UPLOAD) {
        if (a->n_inputs != 0 || !a->out || strncmp(a->out, "s3://", 5) != 0) {
            usage_error("%s", "--upload needs DIR and -o s3://BUCKET/PREFIX, nothing else");
            return 2;
        }
        return -1;
    }
    if (a->mode == MODE_EXTRACT) {
        if (a->n_inputs != 1 || a->inputs[0].kind != PACK_INPUT_PATH) {
            usage_error("%s", "--extract needs DATASET and one INDEX or KEY");
            return 2;
        }
        return -1;
    }
    if (a->n_inputs != 0 || a->out) {
        usage_error("unexpected argument '%s'", a->n_inputs ? a->inputs[0].path : a->out);
        return 2;
    }
    return -1;
}

static int run_pack(args *a)
{
    if (!a->have_seed && random_seed(&a->o.seed) != 0) {
        fprintf(stderr, PACK_CLI_NAME ": cannot read /dev/urandom for a seed: %s\n",
                strerror(errno));
        return 1;
    }
    const char *const sde = getenv("SOURCE_DATE_EPOCH");
    if (sde && *sde) {
        if (parse_u64(sde, &a->o.created) != 0) {
            fprintf(stderr, PACK_CLI_NAME ": SOURCE_DATE_EPOCH is not a number: '%s'\n", sde);
            return 2;
        }
        a->o.has_created = 1;
    }
    /* For tests: a small in-memory sort run makes a small dataset exercise the merge of
     * runs (pack_opts.sort_run_bytes); the output is the same whatever its value. */
    const char *const run = getenv("HDMLP_PACK_SORT_RUN_BYTES");
    if (run && *run &&
        (parse_u64(run, &a->o.sort_run_bytes) != 0 || a->o.sort_run_bytes == 0)) {
        fprintf(stderr,
                PACK_CLI_NAME ": HDMLP_PACK_SORT_RUN_BYTES is not a positive number: '%s'\n",
                run);
        return 2;
    }
    cli c;
    pack_bar_init(&c.bar, !a->quiet && isatty(STDERR_FILENO));
    a->o.progress = cb_progress;
    a->o.message = cb_message;
    a->o.cancel = cb_cancel;
    a->o.cb_arg = &c;
    install_signals();
    pack_summary sum;
    const int rc = pack_run(&a->o, a->inputs, a->n_inputs, a->out, &sum);
    pack_bar_clear(&c.bar);
    if (rc != HDMLP_OK) {
        const char *const detail = hdmlp_last_error();
        fprintf(stderr, PACK_CLI_NAME ": %s\n", *detail ? detail : hdmlp_strerror(rc));
        return 1;
    }
    if (!a->quiet) {
        print_summary(&sum, a->out);
        print_losses(stdout, &sum);
        if (fflush(stdout) != 0) {
            return 1;
        }
    } else {
        print_losses(stderr, &sum);
    }
    return 0;
}

/* -o s3://...: packs into a temporary directory, uploads it (index last), removes it. */
static int run_pack_upload(args *a)
{
    const char *const url = a->out;
    if (strncmp(url, "s3://", 5) != 0) {
        usage_error("-o %s: packing to a URL needs s3:// (http(s) stores are read-only)", url);
        return 2;
    }
    char tmp[4096], out[4200];
    if (pack_tmp_dir(tmp, sizeof(tmp)) != 0) {
        return 1;
    }
    snprintf(out, sizeof(out), "%s/dataset", tmp);
    a->out = out;
    int ret = run_pack(a);
    if (ret == 0) {
        ret = pack_cmd_upload(out, url, !a->quiet && isatty(STDERR_FILENO));
    }
    pack_rm_tree(tmp);
    a->out = url;
    return ret;
}

int main(int argc, char **argv)
{
    args a;
    memset(&a, 0, sizeof(a));
    pack_opts_init(&a.o);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    a.o.threads = cpus < 1                        ? 1u
                  : cpus > (long)PACK_MAX_THREADS ? PACK_MAX_THREADS
                                                  : (unsigned)cpus;
    int ret = parse_args(argc, argv, &a);
    if (ret < 0) {
        ret = check_mode_args(&a);
    }
    if (ret < 0) {
        switch (a.mode) {
        case MODE_INFO:
            ret = pack_cmd_info(a.dataset);
            break;
        case MODE_VERIFY:
            ret = pack_cmd_verify(a.dataset, !a.quiet && isatty(STDERR_FILENO));
            break;
        case MODE_EXTRACT:
            ret = pack_cmd_extract(a.dataset, a.inputs[0].path, a.out);
            break;
        case MODE_UPLOAD:
            ret = pack_cmd_upload(a.dataset, a.out, !a.quiet && isatty(STDERR_FILENO));
            break;
        default:
            ret = a.out != NULL && pack_is_url(a.out) ? run_pack_upload(&a) : run_pack(&a);
            break;
        }
    }
    free(a.inputs);
    return ret;
}
