/* hdmlp-bench under mpirun: gathering the ranks' results (see bench_dist.h). */
#include "bench_dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CARRIER_WORDS (sizeof(hdmlp_stats) / sizeof(uint64_t))
#define FIXED_WORDS 14

static uint64_t dbits(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static double bitsd(uint64_t u)
{
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static int gather_failed(int rc)
{
    const char *detail = hdmlp_last_error();
    fprintf(stderr, "hdmlp-bench: gathering the ranks' results: %s (%s)%s%s\n",
            hdmlp_err_name(rc), hdmlp_strerror(rc), detail[0] != '\0' ? ": " : "", detail);
    return -1;
}

/* Moves n words per rank to rank 0 (all: world x n words there, or NULL). Collective: every
 * block is gathered even after a failure here, so the other ranks are never left waiting. */
static int gather_words(const uint64_t *mine, size_t n, uint64_t *all, uint32_t world, int root)
{
    hdmlp_stats carrier;
    hdmlp_stats *recv = root && all != NULL ? calloc(world, sizeof(hdmlp_stats)) : NULL;
    int first = HDMLP_OK;

    for (size_t off = 0; off < n; off += CARRIER_WORDS) {
        const size_t m = n - off < CARRIER_WORDS ? n - off : CARRIER_WORDS;
        memset(&carrier, 0, sizeof carrier);
        memcpy(&carrier, mine + off, m * sizeof(uint64_t));
        const int rc = hdmlp_mpi_gather_stats(&carrier, recv, sizeof carrier);
        if (rc != HDMLP_OK && first == HDMLP_OK) {
            first = rc;
            gather_failed(rc);
        }
        for (uint32_t r = 0; recv != NULL && r < world; r++) {
            memcpy(all + (size_t)r * n + off, &recv[r], m * sizeof(uint64_t));
        }
    }
    free(recv);
    return first == HDMLP_OK && (!root || recv != NULL) ? 0 : -1;
}

/* This rank's figures as words (see FIXED_WORDS); w has FIXED_WORDS + 2 x span entries. */
static void pack(const bench_rank *mine, size_t span, uint64_t *w)
{
    w[0] = (uint64_t)mine->status;
    w[1] = dbits(mine->seconds);
    w[2] = dbits(mine->create_seconds);
    w[3] = dbits(mine->free_seconds);
    w[4] = mine->peak_rss_bytes;
    w[5] = mine->consumer_samples;
    w[6] = mine->consumer_bytes;
    w[7] = (uint64_t)mine->have_random;
    w[8] = dbits(mine->random.dist_sum);
    w[9] = dbits(mine->random.dist_norm);
    w[10] = dbits(mine->random.corr_sum);
    w[11] = mine->random.corr_n;
    w[12] = mine->epoch_seconds != NULL;
    w[13] = mine->epoch_source_bytes != NULL;
    for (size_t e = 0; e < span; e++) {
        w[FIXED_WORDS + e] = mine->epoch_seconds != NULL ? dbits(mine->epoch_seconds[e]) : 0;
        w[FIXED_WORDS + span + e] =
            mine->epoch_source_bytes != NULL ? mine->epoch_source_bytes[e] : 0;
    }
}

/* Rank r's record from its words; 0, or -1 when out of memory. */
static int unpack(const uint64_t *v, size_t span, const hdmlp_stats *st, uint32_t r,
                  bench_rank *b)
{
    b->rank = r;
    b->status = (int)v[0];
    b->st = *st;
    b->seconds = bitsd(v[1]);
    b->create_seconds = bitsd(v[2]);
    b->free_seconds = bitsd(v[3]);
    b->peak_rss_bytes = v[4];
    b->consumer_samples = v[5];
    b->consumer_bytes = v[6];
    b->have_random = (int)v[7];
    b->random.dist_sum = bitsd(v[8]);
    b->random.dist_norm = bitsd(v[9]);
    b->random.corr_sum = bitsd(v[10]);
    b->random.corr_n = v[11];
    if (v[12] != 0) {
        b->epoch_seconds = calloc(span > 0 ? span : 1, sizeof(double));
        if (b->epoch_seconds == NULL) {
            return -1;
        }
    }
    if (v[13] != 0) {
        b->epoch_source_bytes = calloc(span > 0 ? span : 1, sizeof(uint64_t));
        if (b->epoch_source_bytes == NULL) {
            return -1;
        }
    }
    for (size_t e = 0; e < span; e++) {
        if (b->epoch_seconds != NULL) {
            b->epoch_seconds[e] = bitsd(v[FIXED_WORDS + e]);
        }
        if (b->epoch_source_bytes != NULL) {
            b->epoch_source_bytes[e] = v[FIXED_WORDS + span + e];
        }
    }
    return 0;
}

int bench_dist_gather(const bench_opts *o, const bench_rank *mine, uint32_t world,
                      bench_rank **all)
{
    const size_t span = (size_t)bench_span(o);
    const size_t n = FIXED_WORDS + 2 * span;
    const int root = mine->rank == 0;
    uint64_t *w = calloc(n, sizeof(uint64_t));
    uint64_t *words = root ? calloc((size_t)world * n, sizeof(uint64_t)) : NULL;
    hdmlp_stats *stats = root ? calloc(world, sizeof(hdmlp_stats)) : NULL;
    bench_rank *out = root ? calloc(world, sizeof(bench_rank)) : NULL;
    int rc = 0;

    *all = NULL;
    /* Every rank makes the same gathers whatever fails locally (missing buffers are
     * zeros here and NULL receivers on rank 0), so no rank is left in a collective. */
    if (w == NULL) {
        rc = -1;
        fprintf(stderr, "hdmlp-bench: out of memory gathering the ranks' results\n");
    } else {
        pack(mine, span, w);
    }
    const int grc = hdmlp_mpi_gather_stats(&mine->st, stats, sizeof mine->st);
    if (grc != HDMLP_OK && rc == 0) {
        rc = gather_failed(grc);
    }
    if (w != NULL) {
        if (gather_words(w, n, words, world, root) != 0) {
            rc = -1;
        }
    } else {
        /* Without our words: send zeros in the same number of blocks. */
        uint64_t zero[CARRIER_WORDS] = {0};
        for (size_t off = 0; off < n; off += CARRIER_WORDS) {
            gather_words(zero, CARRIER_WORDS, NULL, world, root);
        }
    }
    if (rc == 0 && root && (words == NULL || stats == NULL || out == NULL)) {
        fprintf(stderr, "hdmlp-bench: out of memory gathering the ranks' results\n");
        rc = -1;
    }
    for (uint32_t r = 0; rc == 0 && root && r < world; r++) {
        if (unpack(words + (size_t)r * n, span, &stats[r], r, &out[r]) != 0) {
            fprintf(stderr, "hdmlp-bench: out of memory gathering the ranks' results\n");
            rc = -1;
        }
    }
    free(w);
    free(words);
    free(stats);
    if (rc != 0 || !root) {
        bench_dist_free(out, out != NULL ? world : 0);
        return rc;
    }
    *all = out;
    return 0;
}

void bench_dist_free(bench_rank *all, uint32_t world)
{
    for (uint32_t r = 0; all != NULL && r < world; r++) {
        free(all[r].epoch_seconds);
        free(all[r].epoch_source_bytes);
    }
    free(all);
}
