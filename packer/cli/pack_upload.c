/* hdmlp-pack's uploads: --upload DIR -o s3://..., and -o s3://... (pack into a temporary
 * directory, upload it with the same code, remove it). Credentials, region and endpoint as
 * AWS's tools read them (hdmlp_source_config_load_aws). */
#include "pack_cli.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pack_is_url(const char *s)
{
    return strncmp(s, "s3://", 5) == 0 || strncmp(s, "http://", 7) == 0 ||
           strncmp(s, "https://", 8) == 0;
}

typedef struct up_bar {
    int enabled;
    double last;
} up_bar;

static void on_progress(void *arg, uint64_t done, uint64_t total)
{
    up_bar *b = arg;
    const double t = pack_now();
    if (!b->enabled || (t - b->last < 0.1 && done < total)) {
        return;
    }
    b->last = t;
    char d[32], a[32];
    fprintf(stderr, "\r" PACK_CLI_NAME ": uploading %s of %s", pack_human_bytes(done, d, 32),
            pack_human_bytes(total, a, 32));
    if (done >= total) {
        fputc('\n', stderr);
    }
}

int pack_cmd_upload(const char *dir, const char *url, int progress)
{
    hdmlp_source_config *cfg = NULL;
    int rc = hdmlp_source_config_create(&cfg);
    if (rc == HDMLP_OK) {
        rc = hdmlp_source_config_load_aws(cfg);
    }
    up_bar b = {progress, 0.0};
    if (rc == HDMLP_OK) {
        rc = hdmlp_dataset_upload(dir, url, cfg, on_progress, &b);
    }
    hdmlp_source_config_free(cfg);
    if (rc != HDMLP_OK) {
        fprintf(stderr, PACK_CLI_NAME ": %s\n",
                *hdmlp_last_error() ? hdmlp_last_error() : hdmlp_strerror(rc));
        return 1;
    }
    return 0;
}

int pack_tmp_dir(char *buf, size_t cap)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || *base == '\0') {
        base = "/tmp";
    }
    if ((size_t)snprintf(buf, cap, "%s/hdmlp-pack-XXXXXX", base) >= cap || !mkdtemp(buf)) {
        fprintf(stderr, PACK_CLI_NAME ": cannot create a temporary directory in %s\n", base);
        return -1;
    }
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void pack_rm_tree(const char *dir) { (void)nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }
