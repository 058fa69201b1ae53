/*
 * A fuzz target's sandbox: a fresh directory under $TMPDIR (else /tmp), made on first use
 * and removed, with everything in it, when the process exits.
 */
#ifndef HDMLP_FUZZ_SANDBOX_H
#define HDMLP_FUZZ_SANDBOX_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static char fuzz_sandbox_dir[4096];

static int fuzz_sandbox_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    (void)remove(path); /* best effort */
    return 0;
}

static void fuzz_sandbox_remove(void)
{
    if (fuzz_sandbox_dir[0]) {
        (void)nftw(fuzz_sandbox_dir, fuzz_sandbox_rm, 16, FTW_DEPTH | FTW_PHYS);
    }
}

/* Its path (hdmlp-fuzz-NAME.XXXXXX, no trailing '/'), made on the first call; NULL when it
 * cannot be made. */
static const char *fuzz_sandbox(const char *name)
{
    if (!fuzz_sandbox_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(fuzz_sandbox_dir, sizeof(fuzz_sandbox_dir), "%s/hdmlp-fuzz-%s.XXXXXX",
                 tmp && *tmp ? tmp : "/tmp", name);
        if (mkdtemp(fuzz_sandbox_dir) == NULL) {
            fuzz_sandbox_dir[0] = '\0';
            return NULL;
        }
        atexit(fuzz_sandbox_remove);
    }
    return fuzz_sandbox_dir;
}

#endif
