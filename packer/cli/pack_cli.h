/* hdmlp-pack's command-line side: progress bar and inspection commands. Not the library. */
#ifndef HDMLP_PACK_CLI_H
#define HDMLP_PACK_CLI_H

#include "hdmlp.h"
#include "packer.h"

#include <stdint.h>
#include <stdio.h>

#define PACK_CLI_NAME "hdmlp-pack"

/* ---- progress bar on stderr (pack_progress.c) ------------------------------------------- */
typedef struct pack_bar {
    int enabled;
    int drawn;          /* a line is on screen */
    double phase_start; /* when the current phase began */
    double last_draw;
    int phase; /* last phase seen, -1 before the first */
} pack_bar;

void pack_bar_init(pack_bar *b, int enabled);
/* Redraws at most 10 times a second (always on a phase change). */
void pack_bar_update(pack_bar *b, const pack_progress *p);
/* Progress of --verify. */
void pack_bar_verify(pack_bar *b, uint64_t done, uint64_t total);
/* Erases the bar (before printing anything else on the terminal). */
void pack_bar_clear(pack_bar *b);
double pack_now(void);
/* "1.23 GB" (decimal units) into buf. */
const char *pack_human_bytes(uint64_t bytes, char *buf, size_t cap);

/* ---- inspection (pack_inspect.c); each returns the process exit code ---------------- */
int pack_cmd_info(const char *path);
int pack_cmd_verify(const char *path, int progress);
int pack_cmd_extract(const char *path, const char *what, const char *out_file);
/* --info's image lines (pack_inspect_image.c). */
void pack_info_images(hdmlp_dataset *ds);

/* ---- object storage (pack_upload.c) ---------------------------------------------------- */
int pack_is_url(const char *s);
/* Uploads dataset directory dir to url (--upload); returns the process exit code. */
int pack_cmd_upload(const char *dir, const char *url, int progress);
/* A fresh directory $TMPDIR/hdmlp-pack-XXXXXX into buf (0, or -1 with a message). */
int pack_tmp_dir(char *buf, size_t cap);
void pack_rm_tree(const char *dir);

#endif /* HDMLP_PACK_CLI_H */
