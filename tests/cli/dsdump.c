/*
 * dsdump — print a packed dataset's metadata, for the CLI tests. Uses only hdmlp.h.
 *
 *   dsdump [--header] [--hash] [--root ROOT] DIR
 *
 * Output (stdout):
 *   # samples=N chunk_size=K chunks=C segments=S labels=L seed=X raw_bytes=R stored_bytes=B
 *   # label<TAB>ID<TAB>NAME                         one line per label
 *   INDEX<TAB>LABEL_NAME<TAB>KEY<TAB>RAW_SIZE<TAB>STORED_SIZE<TAB>CODEC<TAB>CHUNK<TAB>SLOT[<TAB>FNV]
 *                                                   one line per sample, in packed order
 * Keys and label names are printed as their bytes, except '\\' (printed "\\\\") and bytes
 * below 0x20 or equal to 0x7f (printed "\\xHH"), so a line always holds one record.
 *
 *   --header  print only the '#' lines
 *   --hash    read every sample (hdmlp_dataset_read_sample) and append FNV-1a-64 of its bytes;
 *             for a dataset of field records, then each field as NAME=SIZE:FNV (stored),
 *             NAME=#VALUE (an inline int64) or NAME=- (absent), in field order
 *   --root R  read every sample and compare it byte for byte with the file R/KEY; each
 *             mismatch is reported on stderr and makes the exit status 1
 * Exit status: 0 ok, 1 a library call failed or a comparison failed, 2 usage.
 */
#include "hdmlp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '\\') {
            fputs("\\\\", stdout);
        } else if (c < 0x20 || c == 0x7f) {
            printf("\\x%02x", c);
        } else {
            putchar(c);
        }
    }
}

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* the FNV-1a-64 offset basis */
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

/* Reads the whole file `path` into *buf (grown as needed); returns its size or -1. */
static long read_file(const char *path, unsigned char **buf, size_t *cap)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return -1;
    }
    size_t n = 0;
    for (;;) {
        if (n == *cap) {
            const size_t ncap = *cap ? *cap * 2 : 65536;
            unsigned char *nb = realloc(*buf, ncap);
            if (nb == NULL) {
                fclose(f);
                return -1;
            }
            *buf = nb;
            *cap = ncap;
        }
        const size_t got = fread(*buf + n, 1, *cap - n, f);
        n += got;
        if (got == 0) {
            break;
        }
    }
    const int bad = ferror(f);
    fclose(f);
    return bad ? -1 : (long)n;
}

int main(int argc, char **argv)
{
    int header_only = 0, hash = 0;
    const char *root = NULL, *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--header") == 0) {
            header_only = 1;
        } else if (strcmp(argv[i], "--hash") == 0) {
            hash = 1;
        } else if (strcmp(argv[i], "--root") == 0 && i + 1 < argc) {
            root = argv[++i];
        } else if (argv[i][0] != '-' && dir == NULL) {
            dir = argv[i];
        } else {
            dir = NULL;
            break;
        }
    }
    if (dir == NULL) {
        fprintf(stderr, "usage: dsdump [--header] [--hash] [--root ROOT] DIR\n");
        return 2;
    }

    hdmlp_dataset *ds = NULL;
    int rc = hdmlp_dataset_open(dir, &ds);
    if (rc != HDMLP_OK) {
        fprintf(stderr, "dsdump: %s: %s (%s): %s\n", dir, hdmlp_strerror(rc),
                hdmlp_err_name(rc), hdmlp_last_error());
        return 1;
    }
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    const uint32_t nl = hdmlp_dataset_label_count(ds);
    printf("# samples=%" PRIu64 " chunk_size=%" PRIu32 " chunks=%" PRIu64 " segments=%" PRIu32
           " labels=%" PRIu32 " seed=%" PRIu64 " raw_bytes=%" PRIu64 " stored_bytes=%" PRIu64
           "\n",
           n, hdmlp_dataset_chunk_size(ds), hdmlp_dataset_chunk_count(ds),
           hdmlp_dataset_segment_count(ds), nl, hdmlp_dataset_seed(ds),
           hdmlp_dataset_raw_bytes(ds), hdmlp_dataset_stored_bytes(ds));
    for (uint32_t l = 0; l < nl; l++) {
        size_t len = 0;
        const char *name = hdmlp_dataset_label_name(ds, l, &len);
        printf("# label\t%" PRIu32 "\t", l);
        put_escaped(name ? name : "", name ? len : 0);
        putchar('\n');
    }

    int status = 0;
    unsigned char *buf = NULL, *ref = NULL;
    size_t cap = 0, ref_cap = 0;
    char *path = NULL;
    size_t path_cap = 0;
    for (uint64_t i = 0; i < n && !header_only; i++) {
        hdmlp_sample_info si;
        rc = hdmlp_dataset_sample_info(ds, i, &si);
        if (rc != HDMLP_OK) {
            fprintf(stderr, "dsdump: sample %" PRIu64 ": %s\n", i, hdmlp_last_error());
            status = 1;
            break;
        }
        size_t lname_len = 0;
        const char *lname = hdmlp_dataset_label_name(ds, si.label, &lname_len);
        printf("%" PRIu64 "\t", si.index);
        put_escaped(lname ? lname : "?", lname ? lname_len : 1);
        putchar('\t');
        put_escaped(si.key, si.key_size);
        printf("\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu32 "\t%" PRIu64 "\t%" PRIu32, si.raw_size,
               si.stored_size, si.codec, si.chunk, si.slot);
        if (hash || root != NULL) {
            if (si.raw_size + 1 > cap) {
                free(buf);
                cap = (size_t)si.raw_size + 1;
                buf = malloc(cap);
                if (buf == NULL) {
                    fprintf(stderr, "dsdump: out of memory\n");
                    status = 1;
                    break;
                }
            }
            size_t got = 0;
            rc = hdmlp_dataset_read_sample(ds, i, buf, cap, &got);
            if (rc != HDMLP_OK) {
                fprintf(stderr, "dsdump: read sample %" PRIu64 ": %s: %s\n", i,
                        hdmlp_strerror(rc), hdmlp_last_error());
                status = 1;
                putchar('\n');
                continue;
            }
            if (got != si.raw_size) {
                fprintf(stderr,
                        "dsdump: sample %" PRIu64 ": read %zu bytes, raw_size %" PRIu64 "\n", i,
                        got, si.raw_size);
                status = 1;
            }
            if (hash) {
                printf("\t%016" PRIx64, fnv1a(buf, got));
            }
            for (uint32_t f = 0;
                 hash && hdmlp_dataset_field_records(ds) && f < hdmlp_dataset_field_count(ds);
                 f++) {
                hdmlp_field_info in;
                hdmlp_field_value v;
                if (hdmlp_dataset_field(ds, f, &in) != HDMLP_OK ||
                    hdmlp_sample_field(buf, got, f, &v) != HDMLP_OK) {
                    fprintf(stderr, "dsdump: sample %" PRIu64 ", field %u: %s\n", i, f,
                            hdmlp_last_error());
                    status = 1;
                    break;
                }
                printf("\t%.*s=", (int)in.name_size, in.name);
                if (!v.present) {
                    printf("-");
                } else if (v.type == HDMLP_FIELD_INT64) {
                    printf("#%" PRId64, v.i64);
                } else {
                    printf("%" PRIu64 ":%016" PRIx64, v.size, fnv1a(v.data, (size_t)v.size));
                }
            }
            if (root != NULL) {
                const size_t need = strlen(root) + si.key_size + 2;
                if (need > path_cap) {
                    free(path);
                    path_cap = need;
                    path = malloc(path_cap);
                    if (path == NULL) {
                        fprintf(stderr, "dsdump: out of memory\n");
                        return 1;
                    }
                }
                sprintf(path, "%s/", root);
                memcpy(path + strlen(root) + 1, si.key, si.key_size);
                path[strlen(root) + 1 + si.key_size] = '\0';
                const long rn = read_file(path, &ref, &ref_cap);
                if (rn < 0) {
                    fprintf(stderr, "dsdump: sample %" PRIu64 ": cannot read source %s\n", i,
                            path);
                    status = 1;
                } else if ((size_t)rn != got || memcmp(ref, buf, got) != 0) {
                    fprintf(stderr,
                            "dsdump: sample %" PRIu64
                            ": bytes differ from %s (%zu vs %ld bytes)\n",
                            i, path, got, rn);
                    status = 1;
                }
            }
        }
        putchar('\n');
    }
    free(buf);
    free(ref);
    free(path);
    hdmlp_dataset_close(ds);
    if (fflush(stdout) != 0) {
        return 1;
    }
    return status;
}
