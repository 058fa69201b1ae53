/*
 * Corruption at run time, many trials (plain C; the public API and tests/support/testds).
 *
 * Each trial writes a fresh synthetic dataset (several segment files, raw or zstd), starts a
 * loader over it (on_corrupt fail or skip, no RAM cache so every refill reads the files) and,
 * at a random batch (or before the loader is created), damages one segment file: flips one
 * random bit of one random byte, truncates it to a random length, or deletes it. Checks:
 *   - every delivered sample has exactly the bytes and size testds_fill/testds_size give
 *     (never a wrong sample), and no sample is delivered twice in an epoch;
 *   - fail mode: the run ends with END (the damage went unnoticed: a flip in padding, in a
 *     chunk already read, a file already open when deleted...; then every sample must have
 *     been delivered) or with HDMLP_E_CORRUPT / HDMLP_E_IO / HDMLP_E_NOTFOUND whose detail
 *     names the chunk or segment;
 *   - skip mode: the run ends with END and delivered + skipped_samples = every sample of
 *     every epoch;
 *   - nothing hangs (hdmlp_loader_next_timeout, and alarm() per trial) or crashes.
 * Prints one line per trial and a summary table; exits 1 on any violation.
 *
 * Environment: HDMLP_CORRUPT_TRIALS (default 120, about a second), HDMLP_CORRUPT_SEED (default
 * printed), HDMLP_TEST_TMP (scratch directory base).
 */
#include "hdmlp.h"
#include "support/testds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EPOCHS 2
#define BATCH 16
#define NEXT_TIMEOUT_MS 20000
#define TRIAL_ALARM_S 120

enum { K_FLIP, K_TRUNC, K_DELETE, K_N };
static const char *const kind_names[K_N] = {"bit flip", "truncate", "delete"};

typedef struct tally {
    uint64_t trials;
    uint64_t detected;   /* fail: the run failed naming the damage; skip: samples skipped */
    uint64_t undetected; /* the damage changed nothing that was read after it */
    uint64_t before;     /* trials damaged before the loader was created */
    uint64_t skipped;    /* skipped_samples, summed */
    uint64_t delivered;  /* samples delivered and verified */
    uint64_t wrong;      /* samples with wrong bytes, size or index, or delivered twice */
    uint64_t violations; /* other broken promises: hang, unnamed error, lost samples */
} tally;

static tally tallies[K_N][2];

static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? strtoull(v, NULL, 0) : dflt;
}

/* Damages one segment of dir; describes it in what. 0, or -1 if the file system refused. */
static int damage(const char *dir, uint32_t n_segments, int kind, uint64_t *rng, char *what,
                  size_t cap)
{
    const uint32_t s = (uint32_t)(next_rand(rng) % n_segments);
    char path[1024];
    snprintf(path, sizeof(path), "%s/segment-%06u", dir, s);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(what, cap, "stat segment %u: %s", s, strerror(errno));
        return -1;
    }
    const uint64_t size = (uint64_t)sb.st_size;
    if (kind == K_DELETE) {
        snprintf(what, cap, "delete segment %u (%llu bytes)", s, (unsigned long long)size);
        return unlink(path) == 0 ? 0 : -1;
    }
    if (size == 0) {
        snprintf(what, cap, "segment %u is empty", s);
        return -1;
    }
    const uint64_t off = next_rand(rng) % size;
    if (kind == K_TRUNC) {
        snprintf(what, cap, "truncate segment %u to %llu of %llu bytes", s,
                 (unsigned long long)off, (unsigned long long)size);
        return truncate(path, (off_t)off) == 0 ? 0 : -1;
    }
    const int bit = (int)(next_rand(rng) % 8);
    snprintf(what, cap, "flip bit %d of byte %llu of segment %u (%llu bytes)", bit,
             (unsigned long long)off, s, (unsigned long long)size);
    const int fd = open(path, O_RDWR);
    if (fd < 0) {
        return -1;
    }
    uint8_t c = 0;
    int rc = -1;
    if (pread(fd, &c, 1, (off_t)off) == 1) {
        c ^= (uint8_t)(1u << bit);
        rc = pwrite(fd, &c, 1, (off_t)off) == 1 ? 0 : -1;
    }
    close(fd);
    return rc;
}

static int names_the_damage(const char *detail)
{
    return strstr(detail, "chunk") != NULL || strstr(detail, "segment") != NULL;
}

static int allowed_error(int rc)
{
    return rc == HDMLP_E_CORRUPT || rc == HDMLP_E_IO || rc == HDMLP_E_NOTFOUND;
}

/* One trial; adds to tallies. Returns 0, or -1 when the trial could not be set up. */
static int trial(uint64_t t, uint64_t seed)
{
    uint64_t rng = seed ^ (t * 0xD1B54A32D192ED03ull);
    const int kind = (int)(t % K_N);
    const int skip = (int)((t / K_N) % 2);
    tally *tl = &tallies[kind][skip];
    testds_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.n_samples = 600 + next_rand(&rng) % 600;
    spec.chunk_size = 8 + (uint32_t)(next_rand(&rng) % 25);
    spec.chunks_per_segment = 2 + (uint32_t)(next_rand(&rng) % 5);
    spec.seed = next_rand(&rng);
    spec.min_size = 40;
    spec.max_size = 700;
    spec.compress = (int)(next_rand(&rng) % 2);
    spec.n_labels = 5;

    char dir[512];
    if (testds_mkdtemp("corrupt", dir, sizeof(dir)) != 0) {
        fprintf(stderr, "trial %llu: cannot make a scratch directory\n", (unsigned long long)t);
        return -1;
    }
    hdmlp_dataset *ds = NULL;
    hdmlp_config *cfg = NULL;
    hdmlp_loader *ld = NULL;
    uint8_t *seen = NULL, *buf = NULL;
    int ret = -1;
    if (testds_write(dir, &spec) != HDMLP_OK || hdmlp_dataset_open(dir, &ds) != HDMLP_OK) {
        fprintf(stderr, "trial %llu: dataset: %s\n", (unsigned long long)t, hdmlp_last_error());
        goto out;
    }
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    const uint32_t n_seg = hdmlp_dataset_segment_count(ds);
    uint64_t mem = hdmlp_dataset_raw_bytes(ds) / 3;
    if (mem < (64u << 10)) {
        mem = 64u << 10;
    }
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, mem);
    hdmlp_config_set_memory_raise(cfg, 1); /* a third of the data, or the least that works */
    hdmlp_config_set_ram_cache(cfg, 0);
    hdmlp_config_set_epochs(cfg, EPOCHS);
    hdmlp_config_set_batch_size(cfg, BATCH);
    hdmlp_config_set_seed(cfg, spec.seed);
    hdmlp_config_set_threads(cfg, 2);
    hdmlp_config_set_on_corrupt(cfg, skip ? HDMLP_CORRUPT_SKIP : HDMLP_CORRUPT_FAIL);
    /* both read paths: whole chunks (header checked) and sample ranges; both engines */
    const hdmlp_refill refill = (hdmlp_refill)(next_rand(&rng) % 3);
    const hdmlp_engine engine = next_rand(&rng) % 2 ? HDMLP_ENGINE_AUTO : HDMLP_ENGINE_PREAD;
    hdmlp_config_set_refill(cfg, refill);
    hdmlp_config_set_engine(cfg, engine);
    const uint64_t batches = EPOCHS * ((n + BATCH - 1) / BATCH);
    /* -1 (one trial in 8): before the loader is created (and opens any segment); else
     * before taking batch `moment` */
    const int64_t moment = next_rand(&rng) % 8 == 0 ? -1 : (int64_t)(next_rand(&rng) % batches);
    char what[256] = "";
    int damaged = 0;
    seen = calloc(n * EPOCHS, 1);
    buf = malloc(spec.max_size + 1);
    if (seen == NULL || buf == NULL) {
        goto out;
    }
    tl->trials++;
    alarm(TRIAL_ALARM_S);
    if (moment < 0) {
        damaged = damage(dir, n_seg, kind, &rng, what, sizeof(what)) == 0;
    }
    int rc = hdmlp_loader_create(ds, cfg, &ld);
    char detail[1024] = "";
    uint64_t delivered = 0, wrong = 0, taken = 0;
    int hang = 0, at_create = 0;
    if (rc != HDMLP_OK) {
        at_create = 1;
        snprintf(detail, sizeof(detail), "%s", hdmlp_last_error());
    }
    while (ld != NULL) {
        if (!damaged && (int64_t)taken == moment) {
            damaged = damage(dir, n_seg, kind, &rng, what, sizeof(what)) == 0;
        }
        hdmlp_batch *b = NULL;
        rc = hdmlp_loader_next_timeout(ld, &b, NEXT_TIMEOUT_MS);
        if (rc == HDMLP_E_TIMEOUT) {
            hang = 1;
            break;
        }
        if (rc != HDMLP_OK) {
            if (rc < 0) {
                snprintf(detail, sizeof(detail), "%s", hdmlp_last_error());
            }
            break;
        }
        const uint64_t epoch = hdmlp_batch_epoch(b);
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            const uint64_t idx = v[i].index;
            int ok = idx < n && epoch < EPOCHS && v[i].size == testds_size(&spec, idx);
            if (ok) {
                testds_fill(idx, spec.seed, buf, (size_t)v[i].size);
                ok = v[i].size == 0 ||
                     (v[i].data != NULL && memcmp(buf, v[i].data, (size_t)v[i].size) == 0);
            }
            if (ok && seen[epoch * n + idx]++ != 0) {
                ok = 0;
            }
            if (!ok) {
                fprintf(stderr, "trial %llu: WRONG sample %llu (epoch %llu, %llu bytes%s)\n",
                        (unsigned long long)t, (unsigned long long)idx,
                        (unsigned long long)epoch, (unsigned long long)v[i].size,
                        v[i].data == NULL ? ", data NULL" : "");
                wrong++;
            }
            delivered++;
        }
        hdmlp_batch_release(b);
        taken++;
    }
    hdmlp_stats st;
    memset(&st, 0, sizeof(st));
    if (ld != NULL) {
        hdmlp_loader_stats(ld, &st, sizeof st);
    }
    alarm(0);
    /* classify */
    const char *verdict = "ok";
    int violation = hang;
    int detected = 0;
    if (hang) {
        verdict = "HANG";
    } else if (!skip) {
        if (rc == HDMLP_END) {
            if (delivered != n * EPOCHS) {
                violation = 1;
                verdict = "LOST SAMPLES";
            }
        } else if (allowed_error(rc) && names_the_damage(detail)) {
            detected = 1;
        } else {
            violation = 1;
            verdict = "UNEXPECTED ERROR";
        }
    } else {
        if (rc == HDMLP_END) {
            detected = st.skipped_samples > 0;
            if (delivered + st.skipped_samples != n * EPOCHS) {
                violation = 1;
                verdict = "COUNT MISMATCH";
            }
        } else if (at_create && allowed_error(rc) && names_the_damage(detail)) {
            detected = 1; /* nothing to skip yet: creation refused, naming the file */
        } else {
            violation = 1;
            verdict = "FAILED IN SKIP MODE";
        }
    }
    tl->detected += detected;
    tl->undetected += !detected && !violation;
    tl->before += moment < 0;
    tl->skipped += st.skipped_samples;
    tl->delivered += delivered;
    tl->wrong += wrong;
    tl->violations += violation;
    char when[64] = "before create";
    if (moment >= 0) {
        snprintf(when, sizeof(when), "at batch %lld", (long long)moment);
    }
    static const char *const refills[] = {"auto", "whole", "ranges"};
    printf("trial %3llu %-8s %s n=%llu K=%u %s %s %s, %s: %s -> %s, %llu delivered, %llu "
           "skipped%s%s [%s]\n",
           (unsigned long long)t, kind_names[kind], skip ? "skip" : "fail",
           (unsigned long long)n, spec.chunk_size, spec.compress ? "zstd" : "raw",
           refills[refill], engine == HDMLP_ENGINE_PREAD ? "pread" : "auto-engine", when,
           damaged ? what : "(no damage)", hang ? "TIMEOUT" : hdmlp_err_name(rc),
           (unsigned long long)delivered, (unsigned long long)st.skipped_samples,
           detail[0] != '\0' ? ": " : "", detail, verdict);
    ret = 0;
out:
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    free(seen);
    free(buf);
    testds_rm_rf(dir);
    return ret;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const uint64_t trials = env_u64("HDMLP_CORRUPT_TRIALS", 120);
    const uint64_t seed = env_u64("HDMLP_CORRUPT_SEED", 20240917);
    printf(
        "corrupt_trials: %llu trials, seed %llu (HDMLP_CORRUPT_TRIALS, HDMLP_CORRUPT_SEED)\n",
        (unsigned long long)trials, (unsigned long long)seed);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t t = 0; t < trials; t++) {
        if (trial(t, seed) != 0) {
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double secs =
        (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("\n| damage | mode | trials | of which before create | detected | unnoticed | "
           "skipped samples | delivered (verified) | wrong samples | hangs/other violations "
           "|\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    uint64_t wrong = 0, violations = 0;
    for (int k = 0; k < K_N; k++) {
        for (int m = 0; m < 2; m++) {
            const tally *x = &tallies[k][m];
            printf("| %s | %s | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu |\n",
                   kind_names[k], m ? "skip" : "fail", (unsigned long long)x->trials,
                   (unsigned long long)x->before, (unsigned long long)x->detected,
                   (unsigned long long)x->undetected, (unsigned long long)x->skipped,
                   (unsigned long long)x->delivered, (unsigned long long)x->wrong,
                   (unsigned long long)x->violations);
            wrong += x->wrong;
            violations += x->violations;
        }
    }
    printf("corrupt_trials: %llu trials in %.1f s: %llu wrong samples, %llu violations\n",
           (unsigned long long)trials, secs, (unsigned long long)wrong,
           (unsigned long long)violations);
    return wrong == 0 && violations == 0 ? 0 : 1;
}
