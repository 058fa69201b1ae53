/*
 * The sample arena (rpc/rpc_arena.h): allocation, alignment, exhaustion, coalescing, a
 * random run against a reference model of the units, lending and hostile releases, a
 * peer's mapping of the memfd and its checks, and threads allocating concurrently.
 */
#include "hdmlp.h"
#include "rpc_arena.h"

#include <criterion/criterion.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define UNIT RPC_ARENA_UNIT

static rpc_arena *make(uint64_t bytes)
{
    rpc_arena *a = NULL;
    cr_assert_eq(rpc_arena_create(bytes, &a), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_not_null(a);
    return a;
}

static rpc_arena_stats stats(rpc_arena *a)
{
    rpc_arena_stats st;
    rpc_arena_stats_get(a, &st);
    return st;
}

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint8_t pattern_byte(uint64_t seed, uint64_t i)
{
    return (uint8_t)(seed * 29 + i * 131 + (i >> 8));
}

static void pattern_fill(uint8_t *p, uint64_t len, uint64_t seed)
{
    for (uint64_t i = 0; i < len; i++) {
        p[i] = pattern_byte(seed, i);
    }
}

static int pattern_ok(const uint8_t *p, uint64_t len, uint64_t seed)
{
    for (uint64_t i = 0; i < len; i++) {
        if (p[i] != pattern_byte(seed, i)) {
            return 0;
        }
    }
    return 1;
}

/* The whole arena can be allocated in one block (everything free and coalesced). */
static void assert_all_free(rpc_arena *a)
{
    void *p = rpc_arena_alloc(a, rpc_arena_size(a));
    cr_assert_eq(p, rpc_arena_base(a), "the whole arena is one free run");
    cr_assert_eq(rpc_arena_free(a, p), HDMLP_OK);
}

/* ---- create, alloc, free ---------------------------------------------------------------- */

Test(rpc_arena, create_rounds_to_units)
{
    rpc_arena *a = make(0);
    cr_assert_eq(rpc_arena_size(a), UNIT);
    cr_assert_geq(rpc_arena_fd(a), 0);
    rpc_arena_destroy(a);
    a = make(UNIT + 1);
    cr_assert_eq(rpc_arena_size(a), 2 * UNIT);
    rpc_arena_destroy(a);
    rpc_arena_destroy(NULL);
}

Test(rpc_arena, create_rejects_over_64_gib)
{
    rpc_arena *a = (rpc_arena *)1;
    cr_assert_eq(rpc_arena_create(RPC_ARENA_MAX + 1, &a), HDMLP_E_INVAL);
    cr_assert_null(a);
    cr_assert_neq(strstr(hdmlp_last_error(), "64 GiB"), NULL, "%s", hdmlp_last_error());
}

Test(rpc_arena, alloc_free_round_trip)
{
    rpc_arena *a = make(64 * UNIT);
    uint8_t *p = rpc_arena_alloc(a, 100);
    cr_assert_not_null(p);
    cr_assert(rpc_arena_owns(a, p));
    memset(p, 0xab, 100);
    rpc_arena_stats st = stats(a);
    cr_assert_eq(st.used, UNIT);
    cr_assert_eq(st.peak, UNIT);
    cr_assert_eq(rpc_arena_free(a, p), HDMLP_OK);
    st = stats(a);
    cr_assert_eq(st.used, 0);
    cr_assert_eq(st.peak, UNIT);
    cr_assert_eq(st.failed, 0);
    assert_all_free(a);
    rpc_arena_destroy(a);
}

Test(rpc_arena, alloc_is_unit_aligned_and_rounded)
{
    rpc_arena *a = make(256 * UNIT);
    const uint64_t lens[] = {0, 1, UNIT - 1, UNIT, UNIT + 1, 3 * UNIT, 70 * UNIT + 5};
    uint64_t units = 0;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint8_t *p = rpc_arena_alloc(a, lens[i]);
        cr_assert_not_null(p, "alloc of %llu", (unsigned long long)lens[i]);
        cr_assert_eq((uintptr_t)p % UNIT, 0, "alloc of %llu is aligned",
                     (unsigned long long)lens[i]);
        cr_assert_eq((uint64_t)(p - rpc_arena_base(a)) % UNIT, 0);
        units += lens[i] == 0 ? 1 : (lens[i] + UNIT - 1) / UNIT;
        cr_assert_eq(stats(a).used, units * UNIT, "used after alloc of %llu",
                     (unsigned long long)lens[i]);
    }
    rpc_arena_destroy(a);
}

Test(rpc_arena, owns_only_the_mapping)
{
    rpc_arena *a = make(4 * UNIT);
    uint8_t *b = rpc_arena_base(a);
    cr_assert(rpc_arena_owns(a, b));
    cr_assert(rpc_arena_owns(a, b + 4 * UNIT - 1));
    cr_assert_not(rpc_arena_owns(a, b + 4 * UNIT));
    cr_assert_not(rpc_arena_owns(a, b - 1));
    cr_assert_not(rpc_arena_owns(a, NULL));
    cr_assert_not(rpc_arena_owns(NULL, b));
    rpc_arena_destroy(a);
}

Test(rpc_arena, exhaustion_returns_null_and_counts_failed)
{
    rpc_arena *a = make(8 * UNIT);
    for (int i = 0; i < 8; i++) {
        cr_assert_not_null(rpc_arena_alloc(a, UNIT));
    }
    cr_assert_null(rpc_arena_alloc(a, 1));
    cr_assert_null(rpc_arena_alloc(a, 0));
    cr_assert_null(rpc_arena_alloc(a, UINT64_MAX));
    rpc_arena_stats st = stats(a);
    cr_assert_eq(st.failed, 3);
    cr_assert_eq(st.used, 8 * UNIT);
    rpc_arena_destroy(a);

    a = make(8 * UNIT);
    cr_assert_null(rpc_arena_alloc(a, 8 * UNIT + 1), "larger than the arena");
    cr_assert_null(rpc_arena_alloc(a, UINT64_MAX - UNIT + 2), "rounding does not wrap");
    cr_assert_eq(stats(a).failed, 2);
    cr_assert_eq(stats(a).used, 0);
    assert_all_free(a);
    rpc_arena_destroy(a);
}

Test(rpc_arena, free_coalesces_with_both_neighbours)
{
    rpc_arena *a = make(6 * UNIT);
    uint8_t *pa = rpc_arena_alloc(a, UNIT);
    uint8_t *pb = rpc_arena_alloc(a, 2 * UNIT);
    uint8_t *pc = rpc_arena_alloc(a, 3 * UNIT);
    cr_assert(pa != NULL && pb != NULL && pc != NULL);
    cr_assert_null(rpc_arena_alloc(a, 1), "A, B and C fill the arena");
    cr_assert_eq(rpc_arena_free(a, pa), HDMLP_OK);
    cr_assert_eq(rpc_arena_free(a, pc), HDMLP_OK);
    cr_assert_null(rpc_arena_alloc(a, 4 * UNIT), "A and C are not adjacent");
    cr_assert_eq(rpc_arena_free(a, pb), HDMLP_OK);
    assert_all_free(a);

    /* The other orders: B first (then A merges right, C merges left). */
    pa = rpc_arena_alloc(a, UNIT);
    pb = rpc_arena_alloc(a, 2 * UNIT);
    pc = rpc_arena_alloc(a, 3 * UNIT);
    cr_assert_eq(rpc_arena_free(a, pb), HDMLP_OK);
    cr_assert_eq(rpc_arena_free(a, pa), HDMLP_OK);
    cr_assert_eq(rpc_arena_free(a, pc), HDMLP_OK);
    assert_all_free(a);
    rpc_arena_destroy(a);
}

Test(rpc_arena, free_rejects_what_is_not_a_block_in_use)
{
    rpc_arena *a = make(16 * UNIT);
    uint8_t *p = rpc_arena_alloc(a, 3 * UNIT);
    uint8_t *q = rpc_arena_alloc(a, UNIT);
    cr_assert(p != NULL && q != NULL);
    const rpc_arena_stats before = stats(a);
    uint8_t outside[8];
    void *const bad[] = {p + UNIT, p + 1,
                         q + UNIT, rpc_arena_base(a) + 15 * UNIT,
                         outside,  rpc_arena_base(a) + 16 * UNIT,
                         NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(rpc_arena_free(a, bad[i]), HDMLP_E_INVAL, "bad pointer %zu", i);
        const char *e = hdmlp_last_error();
        cr_assert(strstr(e, "arena free of offset") != NULL || strstr(e, "outside") != NULL,
                  "%zu: %s", i, e);
    }
    const rpc_arena_stats after = stats(a);
    cr_assert(after.used == before.used && after.peak == before.peak, "stats unchanged");
    cr_assert_eq(rpc_arena_free(a, p), HDMLP_OK);
    cr_assert_eq(rpc_arena_free(a, p), HDMLP_E_INVAL, "double free");
    cr_assert_eq(stats(a).used, UNIT);
    cr_assert_eq(rpc_arena_free(a, q), HDMLP_OK);
    assert_all_free(a);
    rpc_arena_destroy(a);
}

/* ---- random run against a model --------------------------------------------------------- */

#define MODEL_SEED 0x61726e61ull
#define MODEL_UNITS 4096u
#define MODEL_OPS 8000
#define MODEL_LIVE 400
#define MODEL_MAX_LEN (200u << 10)

typedef struct {
    uint8_t *p;
    uint64_t len, seed;
    uint32_t first, units;
} live_block;

/* The longest run of free units in the model. */
static uint32_t model_longest_gap(const uint8_t *taken)
{
    uint32_t best = 0, run = 0;
    for (uint32_t u = 0; u < MODEL_UNITS; u++) {
        run = taken[u] ? 0 : run + 1;
        best = run > best ? run : best;
    }
    return best;
}

Test(rpc_arena, random_allocs_and_frees_match_a_model, .timeout = 30)
{
    cr_log_info("seed %#llx", (unsigned long long)MODEL_SEED);
    uint64_t rng = MODEL_SEED;
    rpc_arena *a = make((uint64_t)MODEL_UNITS * UNIT);
    uint8_t *const base = rpc_arena_base(a);
    static uint8_t taken[MODEL_UNITS];
    static live_block live[MODEL_LIVE];
    memset(taken, 0, sizeof taken);
    uint32_t nlive = 0;
    uint64_t used = 0, peak = 0, failed = 0, allocs = 0;

    for (int op = 0; op < MODEL_OPS; op++) {
        if (nlive == 0 || (nlive < MODEL_LIVE && rng_next(&rng) % 100 < 55)) {
            /* Log-uniform lengths in 1 B..200 KiB: mostly small, some large. */
            const uint64_t span = (uint64_t)1 << (1 + rng_next(&rng) % 18);
            const uint64_t len =
                1 + rng_next(&rng) % (span < MODEL_MAX_LEN ? span : MODEL_MAX_LEN);
            const uint32_t units = (uint32_t)((len + UNIT - 1) / UNIT);
            uint8_t *p = rpc_arena_alloc(a, len);
            if (p == NULL) {
                failed++;
                cr_assert_lt(model_longest_gap(taken), units,
                             "op %d: alloc of %llu failed with a free run that fits", op,
                             (unsigned long long)len);
            } else {
                cr_assert_eq((uint64_t)(p - base) % UNIT, 0, "op %d: aligned", op);
                const uint32_t first = (uint32_t)((uint64_t)(p - base) / UNIT);
                cr_assert_leq(first + units, MODEL_UNITS, "op %d: inside the arena", op);
                for (uint32_t u = first; u < first + units; u++) {
                    cr_assert_not(taken[u], "op %d: unit %u given twice", op, u);
                    taken[u] = 1;
                }
                const uint64_t seed = ++allocs;
                pattern_fill(p, len, seed);
                live[nlive++] = (live_block){p, len, seed, first, units};
                used += units;
                peak = used > peak ? used : peak;
            }
        } else {
            const uint32_t i = (uint32_t)(rng_next(&rng) % nlive);
            const live_block b = live[i];
            cr_assert(pattern_ok(b.p, b.len, b.seed), "op %d: block %llu kept its bytes", op,
                      (unsigned long long)b.seed);
            cr_assert_eq(rpc_arena_free(a, b.p), HDMLP_OK, "%s", hdmlp_last_error());
            memset(taken + b.first, 0, b.units);
            used -= b.units;
            live[i] = live[--nlive];
        }
        const rpc_arena_stats st = stats(a);
        cr_assert_eq(st.used, used * UNIT, "op %d: used", op);
        cr_assert_eq(st.peak, peak * UNIT, "op %d: peak", op);
        cr_assert_eq(st.failed, failed, "op %d: failed", op);
    }
    cr_log_info("%llu allocations, %llu found no room, peak %llu units",
                (unsigned long long)allocs, (unsigned long long)failed,
                (unsigned long long)peak);
    cr_assert_gt(failed, 0, "the run reaches exhaustion");
    while (nlive > 0) {
        const live_block b = live[--nlive];
        cr_assert(pattern_ok(b.p, b.len, b.seed), "block %llu kept its bytes",
                  (unsigned long long)b.seed);
        cr_assert_eq(rpc_arena_free(a, b.p), HDMLP_OK);
    }
    cr_assert_eq(stats(a).used, 0);
    assert_all_free(a);
    rpc_arena_destroy(a);
}

/* ---- lend and release ------------------------------------------------------------------- */

Test(rpc_arena, lend_and_release_frees_the_block)
{
    rpc_arena *a = make(8 * UNIT);
    uint8_t *p = rpc_arena_alloc(a, 2 * UNIT + 10);
    uint8_t *q = rpc_arena_alloc(a, UNIT);
    uint64_t off = UINT64_MAX;
    cr_assert_eq(rpc_arena_lend(a, p, 3, &off), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(off, (uint64_t)(p - rpc_arena_base(a)));
    rpc_arena_stats st = stats(a);
    cr_assert_eq(st.lent, 3 * UNIT);
    cr_assert_eq(st.used, 4 * UNIT, "lent blocks count as used");
    cr_assert_eq(rpc_arena_release(a, off, 3 * UNIT, 3), HDMLP_OK, "%s", hdmlp_last_error());
    st = stats(a);
    cr_assert_eq(st.lent, 0);
    cr_assert_eq(st.used, UNIT);
    cr_assert_eq(rpc_arena_free(a, q), HDMLP_OK);
    assert_all_free(a);
    rpc_arena_destroy(a);
}

Test(rpc_arena, release_rejects_a_wrong_peer_and_leaves_the_arena)
{
    rpc_arena *a = make(8 * UNIT);
    uint8_t *p = rpc_arena_alloc(a, 2 * UNIT);
    uint8_t *q = rpc_arena_alloc(a, UNIT); /* in use, never lent */
    cr_assert(p != NULL && q != NULL);
    uint64_t off = 0;
    cr_assert_eq(rpc_arena_lend(a, p, 1, &off), HDMLP_OK);
    const uint64_t qoff = (uint64_t)(q - rpc_arena_base(a));
    const rpc_arena_stats before = stats(a);
    const struct {
        uint64_t off, len;
        uint32_t by;
        const char *why;
    } bad[] = {
        {off, 10, 2, "which is lent to rank 1"},          /* wrong rank */
        {off + UNIT, 10, 1, "which is not a block"},      /* inside the block */
        {off + 1, 10, 1, "which is not a block"},         /* misaligned */
        {8 * UNIT, 10, 1, "which is not a block"},        /* past the end */
        {UINT64_MAX, 10, 1, "which is not a block"},      /* far past the end */
        {qoff, 10, 1, "which is not lent"},               /* in use, not lent */
        {qoff + UNIT, 10, 1, "which is not a block"},     /* free */
        {off, 2 * UNIT + 1, 1, "which holds 2048 bytes"}, /* len too large */
        {off, UINT64_MAX, 1, "which holds 2048 bytes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(rpc_arena_release(a, bad[i].off, bad[i].len, bad[i].by), HDMLP_E_PEER,
                     "bad release %zu", i);
        const char *e = hdmlp_last_error();
        cr_assert_neq(strstr(e, "released offset"), NULL, "%zu: %s", i, e);
        cr_assert_neq(strstr(e, bad[i].why), NULL, "%zu: %s", i, e);
        const rpc_arena_stats now = stats(a);
        cr_assert(now.used == before.used && now.lent == before.lent, "%zu: unchanged", i);
    }
    cr_assert_eq(rpc_arena_release(a, off, 2 * UNIT, 1), HDMLP_OK, "the right release");
    cr_assert_eq(rpc_arena_release(a, off, 2 * UNIT, 1), HDMLP_E_PEER, "double release");
    cr_assert_eq(stats(a).used, UNIT);
    cr_assert_eq(stats(a).lent, 0);
    cr_assert_eq(rpc_arena_free(a, q), HDMLP_OK);
    assert_all_free(a);
    rpc_arena_destroy(a);
}

Test(rpc_arena, lend_and_free_reject_a_lent_or_free_block)
{
    rpc_arena *a = make(8 * UNIT);
    uint8_t *p = rpc_arena_alloc(a, 2 * UNIT);
    uint64_t off = 0;
    cr_assert_eq(rpc_arena_lend(a, p + UNIT, 1, &off), HDMLP_E_INVAL, "inside a block");
    cr_assert_eq(rpc_arena_lend(a, p + 2 * UNIT, 1, &off), HDMLP_E_INVAL, "a free run");
    cr_assert_eq(rpc_arena_lend(a, NULL, 1, &off), HDMLP_E_INVAL);
    cr_assert_eq(stats(a).lent, 0);
    cr_assert_eq(rpc_arena_lend(a, p, 1, &off), HDMLP_OK);
    cr_assert_eq(rpc_arena_lend(a, p, 2, &off), HDMLP_E_INVAL, "lent already");
    cr_assert_eq(rpc_arena_free(a, p), HDMLP_E_INVAL, "a lent block is not freed");
    cr_assert_neq(strstr(hdmlp_last_error(), "lent"), NULL, "%s", hdmlp_last_error());
    cr_assert_eq(stats(a).lent, 2 * UNIT);
    cr_assert_eq(rpc_arena_release(a, off, 1, 1), HDMLP_OK, "still lent to rank 1");
    assert_all_free(a);
    rpc_arena_destroy(a);
}

/* ---- a peer's mapping ------------------------------------------------------------------- */

Test(rpc_arena, map_peer_shares_the_bytes)
{
    rpc_arena *a = make(16 * UNIT);
    uint8_t *peer = NULL;
    cr_assert_eq(rpc_arena_map_peer(rpc_arena_fd(a), rpc_arena_size(a), &peer), HDMLP_OK, "%s",
                 hdmlp_last_error());
    cr_assert(peer != NULL && peer != rpc_arena_base(a));
    uint8_t *p = rpc_arena_alloc(a, 3000);
    uint64_t off = 0;
    pattern_fill(p, 3000, 7);
    cr_assert_eq(rpc_arena_lend(a, p, 1, &off), HDMLP_OK);
    cr_assert(pattern_ok(peer + off, 3000, 7), "the peer sees the owner's write");
    pattern_fill(peer + off, 3000, 8);
    cr_assert(pattern_ok(p, 3000, 8), "the owner sees the peer's write");
    cr_assert_eq(rpc_arena_release(a, off, 3000, 1), HDMLP_OK);
    rpc_arena_unmap_peer(peer, rpc_arena_size(a));
    rpc_arena_unmap_peer(NULL, 0);
    rpc_arena_destroy(a);
}

Test(rpc_arena, map_peer_rejects_a_wrong_size)
{
    rpc_arena *a = make(16 * UNIT);
    const uint64_t sizes[] = {0, 15 * UNIT, 16 * UNIT + 1, 17 * UNIT, RPC_ARENA_MAX + UNIT};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *peer = (uint8_t *)1;
        cr_assert_eq(rpc_arena_map_peer(rpc_arena_fd(a), sizes[i], &peer), HDMLP_E_PEER,
                     "size %llu", (unsigned long long)sizes[i]);
        cr_assert_null(peer);
    }
    rpc_arena_destroy(a);
}

Test(rpc_arena, map_peer_rejects_an_unsealed_memfd)
{
    const uint64_t bytes = 16 * UNIT;
    const int plain = memfd_create("hdmlp-test-arena", MFD_CLOEXEC);
    const int grow_only = memfd_create("hdmlp-test-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    cr_assert(plain >= 0 && grow_only >= 0);
    cr_assert_eq(ftruncate(plain, (off_t)bytes), 0);
    cr_assert_eq(ftruncate(grow_only, (off_t)bytes), 0);
    cr_assert_eq(fcntl(grow_only, F_ADD_SEALS, F_SEAL_GROW), 0);
    const int fds[] = {plain, grow_only};
    for (size_t i = 0; i < 2; i++) {
        uint8_t *peer = (uint8_t *)1;
        cr_assert_eq(rpc_arena_map_peer(fds[i], bytes, &peer), HDMLP_E_PEER, "fd %zu", i);
        cr_assert_null(peer);
        cr_assert_neq(strstr(hdmlp_last_error(), "sealed"), NULL, "%s", hdmlp_last_error());
    }
    int pipefd[2];
    cr_assert_eq(pipe(pipefd), 0);
    uint8_t *peer = NULL;
    cr_assert_eq(rpc_arena_map_peer(pipefd[0], bytes, &peer), HDMLP_E_PEER, "not a file");
    close(pipefd[0]);
    close(pipefd[1]);
    close(plain);
    close(grow_only);
}

/* ---- threads ---------------------------------------------------------------------------- */

#define THREADS 4
#define THREAD_MS 300
#define THREAD_LIVE 32

typedef struct {
    rpc_arena *a;
    uint32_t id;
    uint64_t ops, bad; /* bad: a pattern lost, or a call that should have worked failed */
} thread_arg;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Allocates, writes, checks and frees (or lends and releases as rank id) until the
 * deadline; then gives everything back. */
static void *thread_main(void *arg)
{
    thread_arg *t = arg;
    uint64_t rng = MODEL_SEED + t->id;
    live_block live[THREAD_LIVE];
    uint32_t n = 0;
    const double end = now_ms() + THREAD_MS;
    while (now_ms() < end || n > 0) {
        const int stop = now_ms() >= end;
        if (!stop && n < THREAD_LIVE && rng_next(&rng) % 2 == 0) {
            const uint64_t len = 1 + rng_next(&rng) % (32u << 10);
            uint8_t *p = rpc_arena_alloc(t->a, len);
            if (p != NULL) {
                const uint64_t seed = ((uint64_t)t->id << 32) | t->ops;
                pattern_fill(p, len, seed);
                live[n++] = (live_block){p, len, seed, 0, 0};
            }
        } else if (n > 0) {
            const uint32_t i = (uint32_t)(rng_next(&rng) % n);
            const live_block b = live[i];
            live[i] = live[--n];
            t->bad += !pattern_ok(b.p, b.len, b.seed);
            uint64_t off = 0;
            if (rng_next(&rng) % 4 == 0) {
                t->bad += rpc_arena_lend(t->a, b.p, t->id, &off) != HDMLP_OK;
                t->bad += rpc_arena_release(t->a, off, b.len, t->id) != HDMLP_OK;
            } else {
                t->bad += rpc_arena_free(t->a, b.p) != HDMLP_OK;
            }
        }
        t->ops++;
    }
    return NULL;
}

Test(rpc_arena, threads_alloc_and_free_concurrently, .timeout = 30)
{
    cr_log_info("seed %#llx + thread", (unsigned long long)MODEL_SEED);
    rpc_arena *a = make(1u << 20);
    thread_arg args[THREADS];
    pthread_t th[THREADS];
    for (uint32_t i = 0; i < THREADS; i++) {
        args[i] = (thread_arg){a, i + 1, 0, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
    }
    uint64_t ops = 0;
    for (uint32_t i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(args[i].bad, 0, "thread %u: %llu bad checks", i,
                     (unsigned long long)args[i].bad);
        ops += args[i].ops;
    }
    const rpc_arena_stats st = stats(a);
    cr_log_info("%llu operations, peak %llu bytes, %llu allocations found no room",
                (unsigned long long)ops, (unsigned long long)st.peak,
                (unsigned long long)st.failed);
    cr_assert_eq(st.used, 0);
    cr_assert_eq(st.lent, 0);
    cr_assert_leq(st.peak, rpc_arena_size(a));
    assert_all_free(a);
    rpc_arena_destroy(a);
}
