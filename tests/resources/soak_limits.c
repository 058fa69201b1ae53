/*
 * rel_soak ssd-enospc and emfile: the SSD cache on a full tmpfs, and too few file
 * descriptors (see soak.c).
 */
#include "resources/soak.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- SSD cache on a full tmpfs ---------------------------------------------------------- */

static int count_files(const char *dir, int *tmp_files, uint64_t *bytes)
{
    DIR *const d = opendir(dir);
    if (!d) {
        return -1;
    }
    int n = 0;
    *tmp_files = 0;
    *bytes = 0;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' && (de->d_name[1] == '\0' || strcmp(de->d_name, "..") == 0)) {
            continue;
        }
        n++;
        *tmp_files += strstr(de->d_name, "tmp") != NULL;
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        FILE *const f = fopen(path, "rb");
        if (f) {
            fseek(f, 0, SEEK_END);
            *bytes += (uint64_t)ftell(f);
            fclose(f);
        }
    }
    closedir(d);
    return n;
}

int cmd_ssd_enospc(void)
{
    static const testds_spec spec = {3000, 16, 0, 79, 1024, 4096, 0, 0, 10, 0}; /* ~7.5 MiB */
    char dir[4200], mnt[4200];
    make_dataset("ssd", &spec, dir, sizeof(dir));
    snprintf(mnt, sizeof(mnt), "%s/ssd-mnt", base_dir);
    REQUIRE(mkdir(mnt, 0755) == 0 || errno == EEXIST, "mkdir %s", mnt);
    if (mount("hdmlp-soak", mnt, "tmpfs", 0, "size=1m") != 0) {
        printf("ssd-enospc: SKIP: cannot mount a tmpfs on %s: %s\n", mnt, strerror(errno));
        return 77;
    }
    hdmlp_dataset *ds = NULL;
    REQUIRE(hdmlp_dataset_open(dir, &ds) == HDMLP_OK, "open: %s", hdmlp_last_error());
    const uint64_t chunks = hdmlp_dataset_chunk_count(ds);
    hdmlp_config *const cfg = config(1u << 20, 2, 2);
    REQUIRE(hdmlp_config_set_ssd_cache(cfg, mnt, 64u << 20) == HDMLP_OK, "ssd cache: %s",
            hdmlp_last_error());
    for (int run = 0; run < 2; run++) {
        hdmlp_stats st;
        const int rc = run_all(ds, cfg, &st);
        CHECK(rc == HDMLP_END, "run %d: %s: %s", run, hdmlp_err_name(rc), hdmlp_last_error());
        int tmp_files = 0;
        uint64_t bytes = 0;
        const int files = count_files(mnt, &tmp_files, &bytes);
        printf("ssd-enospc: run %d: %llu samples in %llu epochs exactly once; %llu of %llu "
               "chunks staged, %d cache files (%llu KiB) on the 1 MiB tmpfs, %d partial; "
               "source %llu KiB, ssd %llu KiB, fallbacks %llu\n",
               run, (unsigned long long)st.samples, (unsigned long long)st.epochs,
               (unsigned long long)st.ssd_staged_chunks, (unsigned long long)chunks, files,
               (unsigned long long)(bytes / 1024), tmp_files,
               (unsigned long long)(st.source_bytes / 1024),
               (unsigned long long)(st.ssd_cache_bytes / 1024),
               (unsigned long long)st.tier_fallbacks);
        CHECK(st.samples == 2 * hdmlp_dataset_sample_count(ds), "run %d: samples", run);
        CHECK(tmp_files == 0, "run %d: a partial cache file remains", run);
        CHECK(files > 0 && (uint64_t)files < chunks, "run %d: %d cache files of %llu chunks",
              run, files, (unsigned long long)chunks);
        if (run == 0) {
            CHECK(st.ssd_staged_chunks > 0 && st.ssd_staged_chunks < chunks,
                  "staging did not stop at the full disk (%llu of %llu)",
                  (unsigned long long)st.ssd_staged_chunks, (unsigned long long)chunks);
            CHECK(st.source_bytes > 0, "nothing read from the source");
        } else {
            CHECK(st.ssd_cache_bytes > 0, "run 1 read nothing from the staged chunks");
        }
    }
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    CHECK(umount(mnt) == 0, "umount %s: %s", mnt, strerror(errno));
    return failures ? 1 : 0;
}

/* ---- EMFILE ----------------------------------------------------------------------------- */

int cmd_emfile(void)
{
    static const testds_spec spec = {1024, 4, 1, 83, 64, 2048, 0, 0, 4, 0}; /* 256 segments */
    char dir[4200];
    make_dataset("emfile", &spec, dir, sizeof(dir));
    hdmlp_dataset *ds = NULL;
    REQUIRE(hdmlp_dataset_open(dir, &ds) == HDMLP_OK, "open: %s", hdmlp_last_error());
    struct rlimit old;
    REQUIRE(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit");
    const int now = open_fds();
    struct rlimit low = old;
    low.rlim_cur = (rlim_t)(now + 24);
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
    hdmlp_config *const cfg = config(1u << 20, 2, 1);
    hdmlp_loader *ld = NULL;
    int rc = hdmlp_loader_create(ds, cfg, &ld);
    uint64_t delivered = 0;
    const char *where = "loader_create";
    if (rc == HDMLP_OK) {
        where = "loader_next";
        hdmlp_batch *b;
        while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
            delivered += hdmlp_batch_size(b);
            hdmlp_batch_release(b);
        }
    }
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", hdmlp_last_error());
    printf("emfile: RLIMIT_NOFILE %d (fds open %d), %llu segment files: %s after %llu "
           "samples returned %s: %s\n",
           (int)low.rlim_cur, now, (unsigned long long)hdmlp_dataset_segment_count(ds), where,
           (unsigned long long)delivered, hdmlp_err_name(rc), msg);
    CHECK(rc == HDMLP_E_MFILE || rc == HDMLP_E_IO, "expected HDMLP_E_MFILE or E_IO, got %s",
          hdmlp_err_name(rc));
    CHECK(strstr(msg, dir) != NULL && (strstr(msg, "segment-") || strstr(msg, "index")),
          "the error does not name the file: %s", msg);
    hdmlp_loader_free(ld);
    hdmlp_dataset_close(ds);
    REQUIRE(setrlimit(RLIMIT_NOFILE, &old) == 0, "restoring the limit");

    /* with the limit back, the same dataset loads */
    REQUIRE(hdmlp_dataset_open(dir, &ds) == HDMLP_OK, "reopen: %s", hdmlp_last_error());
    rc = run_all(ds, cfg, NULL);
    CHECK(rc == HDMLP_END, "after restoring the limit: %s: %s", hdmlp_err_name(rc),
          hdmlp_last_error());
    printf("emfile: limit restored: one epoch delivered exactly once\n");
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    return failures ? 1 : 0;
}
