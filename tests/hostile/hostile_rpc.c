/*
 * Hostile peers (plain C): a real 2-rank exchange over the gRPC transport on loopback (two
 * loaders made by hdmlp_loader_create with peers, in this process) while an attacker
 * process (forked before this one initialises gRPC, so that RSS here is the servers' and
 * loaders' alone) floods rank 0's server with raw gRPC C-core calls to /hdmlp.Peer/Deliver,
 * one channel per kind with INFLIGHT calls in flight:
 *   wrong token  well-formed Envelopes (REQUEST / SAMPLE) carrying another job's token
 *   malformed    random bytes, and hand-made protobuf that lies (SAMPLE size != data
 *                length, unknown kind, missing fields, more than RPC_MAX_MSGS messages)
 *   oversized    64 MiB + 64 KiB (above the server's receive limit)
 *   rank range   the right token, ranks out of range (from >= world, from == receiver,
 *                to != receiver)
 * Phases: (1) the exchange alone (samples/s, RSS); (2) the exchange under the three small
 * kinds, then under oversized calls, each flood up to HDMLP_HOSTILE_SECONDS: hostile calls
 * sent and rejected per second, the exchange's samples/s during the flood, the server
 * process's RSS before, peak, at the end and after the run; (3) a token holder: REQUESTs
 * with absurd epoch/position/group/slot/credit (the exchange must still complete exactly
 * once), then SAMPLEs with an index out of range, which rank 0 must refuse with
 * HDMLP_E_PEER naming rank and sample (its run stops; nothing crashes or is delivered
 * wrong).
 * Every delivered sample is checked byte for byte (testds_fill) and exactly once per epoch
 * across both ranks. Exits 1 on a broken promise: a wrong or duplicated sample, a failed
 * legitimate run, a hostile call answered OK, RSS growth above HOSTILE_RSS_LIMIT.
 *
 * Environment: HDMLP_HOSTILE_SECONDS (flood length, default 4), HDMLP_HOSTILE_BIG_INFLIGHT
 * (oversized calls in flight, default 2), HDMLP_TEST_TMP.
 */
#include "format.h" /* hd_free, for rpc_encode_msg's buffers */
#include "hdmlp.h"
#include "rpc_codec.h"
#include "rpc_transport.h"
#include "support/testds.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORLD 2
#define TOKEN 0x5EC0DE5EC0DEull
#define BATCH 16
#define INFLIGHT 8     /* calls in flight per attack kind */
#define BIG_INFLIGHT 2 /* oversized calls in flight */
#define BIG_LEN ((64u << 20) + (64u << 10))
#define HOSTILE_RSS_LIMIT ((uint64_t)32 << 20)

enum { A_TOKEN, A_MALFORMED, A_BIG, A_RANKS, A_LOC_REQUEST, A_LOC_SAMPLE, A_N };
static const char *const attack_names[A_N] = {"wrong token", "malformed",   "oversized",
                                              "rank range",  "loc REQUEST", "loc SAMPLE"};

static const testds_spec spec = {4000, 10, 8, 4242, 200, 1200, 0, 0, 7};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtoull(line + 6, NULL, 10);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kb << 10;
}

static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int failures;
#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            printf("FAIL: " __VA_ARGS__);                                                      \
            printf("\n");                                                                      \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

/* ---- the legitimate exchange ------------------------------------------------------------ */

typedef struct rank_run {
    hdmlp_loader *ld;
    uint64_t *ep, *idx;
    uint64_t n, cap, wrong;
    _Atomic uint64_t delivered; /* read by the main thread during the run */
    atomic_int done;
    int rc;
    char err[512];
} rank_run;

static void *consume(void *arg)
{
    rank_run *r = arg;
    uint8_t *buf = malloc(spec.max_size + 1);
    hdmlp_batch *b;
    int rc;
    while ((rc = hdmlp_loader_next(r->ld, &b)) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            const size_t size = testds_size(&spec, v[i].index);
            int ok = v[i].index < spec.n_samples && v[i].size == size && buf != NULL;
            if (ok && size > 0) {
                testds_fill(v[i].index, spec.seed, buf, size);
                ok = v[i].data != NULL && memcmp(buf, v[i].data, size) == 0;
            }
            r->wrong += !ok;
            if (r->n == r->cap) {
                r->cap = r->cap ? 2 * r->cap : 4096;
                r->ep = realloc(r->ep, r->cap * sizeof(*r->ep));
                r->idx = realloc(r->idx, r->cap * sizeof(*r->idx));
            }
            r->ep[r->n] = hdmlp_batch_epoch(b);
            r->idx[r->n++] = v[i].index;
        }
        atomic_fetch_add(&r->delivered, hdmlp_batch_size(b));
        hdmlp_batch_release(b);
    }
    r->rc = rc;
    snprintf(r->err, sizeof(r->err), "%s", rc == HDMLP_END ? "" : hdmlp_last_error());
    atomic_store(&r->done, 1);
    hdmlp_loader_free(r->ld);
    r->ld = NULL;
    free(buf);
    return NULL;
}

typedef struct exchange {
    char eps[WORLD][64];
    rank_run runs[WORLD];
    pthread_t th[WORLD];
    uint64_t epochs, t0;
} exchange;

/* Creates both ranks' loaders on fresh loopback ports. 0 or -1. */
static int exchange_create(exchange *x, hdmlp_dataset *ds, uint64_t epochs, uint32_t timeout_ms)
{
    memset(x, 0, sizeof(*x));
    x->epochs = epochs;
    const char *ptrs[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        if (rpc_pick_endpoint("127.0.0.1", x->eps[r], sizeof(x->eps[r])) != HDMLP_OK) {
            printf("rpc_pick_endpoint: %s\n", hdmlp_last_error());
            return -1;
        }
        ptrs[r] = x->eps[r];
    }
    for (uint32_t r = 0; r < WORLD; r++) {
        hdmlp_config *cfg = NULL;
        hdmlp_config_create(&cfg);
        hdmlp_config_set_rank(cfg, r, WORLD);
        hdmlp_config_set_peers(cfg, ptrs, WORLD);
        hdmlp_config_set_job_token(cfg, TOKEN);
        hdmlp_config_set_peer_timeout(cfg, timeout_ms);
        hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
        hdmlp_config_set_batch_size(cfg, BATCH);
        hdmlp_config_set_epochs(cfg, epochs);
        hdmlp_config_set_seed(cfg, 11);
        const int rc = hdmlp_loader_create(ds, cfg, &x->runs[r].ld);
        hdmlp_config_free(cfg);
        if (rc != HDMLP_OK) {
            printf("rank %u: %s: %s\n", r, hdmlp_err_name(rc), hdmlp_last_error());
            return -1;
        }
    }
    return 0;
}

static void exchange_start(exchange *x)
{
    x->t0 = now_ns();
    for (uint32_t r = 0; r < WORLD; r++) {
        pthread_create(&x->th[r], NULL, consume, &x->runs[r]);
    }
}

/* Joins both ranks; checks bytes and (when `complete`) exactly once per epoch. Returns
 * delivered samples per second. */
static double exchange_finish(exchange *x, const char *what, int complete)
{
    for (uint32_t r = 0; r < WORLD; r++) {
        pthread_join(x->th[r], NULL);
    }
    const double secs = (double)(now_ns() - x->t0) / 1e9;
    const uint64_t n = spec.n_samples;
    uint8_t *seen = calloc(n * x->epochs, 1);
    uint64_t total = 0, dup = 0, wrong = 0;
    for (uint32_t r = 0; r < WORLD; r++) {
        rank_run *rr = &x->runs[r];
        if (complete) {
            CHECK(rr->rc == HDMLP_END, "%s: rank %u ended with %s: %s", what, r,
                  hdmlp_err_name(rr->rc), rr->err);
        }
        for (uint64_t i = 0; i < rr->n; i++) {
            if (rr->ep[i] < x->epochs && rr->idx[i] < n) {
                dup += seen[rr->ep[i] * n + rr->idx[i]]++ != 0;
            }
        }
        total += rr->n;
        wrong += rr->wrong;
        free(rr->ep);
        free(rr->idx);
    }
    free(seen);
    CHECK(wrong == 0, "%s: %llu wrong samples", what, (unsigned long long)wrong);
    CHECK(dup == 0, "%s: %llu samples delivered twice in an epoch", what,
          (unsigned long long)dup);
    if (complete) {
        CHECK(total == n * x->epochs, "%s: %llu of %llu samples", what,
              (unsigned long long)total, (unsigned long long)(n * x->epochs));
    }
    const double rate = (double)total / secs;
    printf("%s: %llu epochs, %llu samples in %.2f s = %.0f samples/s; rank 0 %s, rank 1 %s\n",
           what, (unsigned long long)x->epochs, (unsigned long long)total, secs, rate,
           hdmlp_err_name(x->runs[0].rc), hdmlp_err_name(x->runs[1].rc));
    return rate;
}

/* ---- hostile payloads ------------------------------------------------------------------ */

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Envelope header (token, from, to) then the message fragments of msgs[0..n). */
static size_t envelope(uint8_t *out, size_t cap, uint64_t token, uint32_t from, uint32_t to,
                       const peer_msg *msgs, size_t n)
{
    size_t len = rpc_encode_header(token, from, to, out);
    for (size_t i = 0; i < n; i++) {
        uint8_t *f = NULL;
        size_t fl = 0;
        if (rpc_encode_msg(&msgs[i], &f, &fl) != HDMLP_OK) {
            break;
        }
        if (len + fl <= cap) {
            memcpy(out + len, f, fl);
            len += fl;
        }
        hd_free(f);
    }
    return len;
}

/* A protobuf Envelope with the right header and one raw Msg body. */
static size_t envelope_raw(uint8_t *out, uint64_t token, const uint8_t *msg, size_t mlen)
{
    size_t len = rpc_encode_header(token, 1, 0, out);
    out[len++] = 0x22; /* field 4, length-delimited */
    len += put_varint(out + len, mlen);
    memcpy(out + len, msg, mlen);
    return len + mlen;
}

/* Builds attack `kind` number `i` into buf (cap bytes); returns its length. */
static size_t make_attack(int kind, uint64_t i, uint64_t *rng, uint8_t *buf, size_t cap,
                          uint64_t *expect_ok)
{
    static const uint8_t data[64] = {1, 2, 3};
    peer_msg m;
    memset(&m, 0, sizeof(m));
    *expect_ok = 0;
    switch (kind) {
    case A_TOKEN:
        m.kind = i % 2 ? PEER_SAMPLE : PEER_REQUEST;
        m.from = 1;
        m.to = 0;
        m.epoch = 0;
        m.position = 2 * (i % 1000);
        m.index = i % spec.n_samples;
        m.size = m.kind == PEER_SAMPLE ? sizeof(data) : 0;
        m.data = m.kind == PEER_SAMPLE ? data : NULL;
        return envelope(buf, cap, TOKEN ^ (1 + next_rand(rng) % 1000), 1, 0, &m, 1);
    case A_MALFORMED: {
        uint8_t msg[64];
        size_t ml = 0;
        switch (i % 5) {
        case 0: /* SAMPLE whose size says 1 TiB, with 10 bytes of data */
            msg[ml++] = 0x08, msg[ml++] = PEER_SAMPLE;
            msg[ml++] = 0x50, ml += put_varint(msg + ml, (uint64_t)1 << 40);
            msg[ml++] = 0x5A, msg[ml++] = 10;
            memset(msg + ml, 7, 10), ml += 10;
            return envelope_raw(buf, TOKEN, msg, ml);
        case 1: /* unknown kind */
            msg[ml++] = 0x08, msg[ml++] = 99;
            return envelope_raw(buf, TOKEN, msg, ml);
        case 2: /* REQUEST missing its fields */
            msg[ml++] = 0x08, msg[ml++] = PEER_REQUEST;
            return envelope_raw(buf, TOKEN, msg, ml);
        case 3: { /* more messages than RPC_MAX_MSGS (each an empty DONE) */
            size_t len = rpc_encode_header(TOKEN, 1, 0, buf);
            for (uint32_t k = 0; k <= RPC_MAX_MSGS && len + 4 <= cap; k++) {
                buf[len++] = 0x22, buf[len++] = 2, buf[len++] = 0x08, buf[len++] = PEER_DONE;
            }
            return len;
        }
        default: { /* random bytes */
            const size_t len = 1 + next_rand(rng) % 1024;
            for (size_t k = 0; k < len; k++) {
                buf[k] = (uint8_t)next_rand(rng);
            }
            return len;
        }
        }
    }
    case A_RANKS: {
        static const uint32_t froms[] = {2, 7, UINT32_MAX, 0, 1};
        static const uint32_t tos[] = {0, 0, 0, 0, 5};
        const size_t k = i % 5;
        m.kind = PEER_REQUEST;
        m.from = froms[k];
        m.to = tos[k];
        m.epoch = 0;
        m.position = 1;
        m.free_remote = 100;
        return envelope(buf, cap, TOKEN, froms[k], tos[k], &m, 1);
    }
    case A_LOC_REQUEST:
        /* well-formed, right token and ranks: absurd location and credit */
        m.kind = PEER_REQUEST;
        m.from = 1;
        m.to = 0;
        m.epoch = (uint64_t)1 << (20 + i % 40);
        m.position = next_rand(rng);
        m.group = next_rand(rng);
        m.slot = (uint32_t)next_rand(rng);
        m.free_remote = UINT64_MAX - i;
        *expect_ok = 1; /* the codec cannot know the dataset: accepted, then ignored */
        return envelope(buf, cap, TOKEN, 1, 0, &m, 1);
    case A_LOC_SAMPLE:
        m.kind = PEER_SAMPLE;
        m.from = 1;
        m.to = 0;
        m.epoch = 0;
        m.position = 0;
        m.index = spec.n_samples + i; /* out of range */
        m.size = sizeof(data);
        m.data = data;
        *expect_ok = 1;
        return envelope(buf, cap, TOKEN, 1, 0, &m, 1);
    default:
        return 0;
    }
}

/* ---- the attacker process --------------------------------------------------------------
 * A child forked before this process initialises gRPC (so the server's RSS is measured
 * alone). One thread and one channel per attack kind, INFLIGHT calls in flight each. The
 * parent sends a command (target and kinds), later a stop byte, and reads the tallies. */

typedef struct tally {
    uint64_t sent, ok, rejected, other; /* other: UNAVAILABLE (connection reset), ... */
    uint64_t by_status[17];
    char first_reject[160]; /* status details of the first rejection */
} tally;

typedef struct attack_cmd {
    int op; /* 1 run, 2 exit */
    char target[64];
    int kinds[A_N];
    int n_kinds;
    int big_inflight;
} attack_cmd;

typedef struct attacker {
    char target[64];
    int kind;
    atomic_int *stop;
    const uint8_t *big; /* BIG_LEN bytes */
    int big_inflight;
    tally t;
    uint64_t seed;
    pthread_t th;
} attacker;

typedef struct slot {
    grpc_call *call;
    grpc_byte_buffer *req, *resp;
    grpc_metadata_array imd, tmd;
    grpc_status_code status;
    grpc_slice details;
    uint64_t expect_ok;
    int busy;
} slot;

static int start_call(attacker *a, grpc_channel *ch, grpc_completion_queue *cq, slot *s,
                      uint64_t i, uint64_t *rng, uint8_t *scratch, size_t cap)
{
    memset(s, 0, sizeof(*s));
    grpc_slice payload;
    if (a->kind == A_BIG) {
        payload = grpc_slice_from_static_buffer(a->big, BIG_LEN);
    } else {
        const size_t len = make_attack(a->kind, i, rng, scratch, cap, &s->expect_ok);
        payload = grpc_slice_from_copied_buffer((const char *)scratch, len);
    }
    s->req = grpc_raw_byte_buffer_create(&payload, 1);
    grpc_slice_unref(payload);
    const gpr_timespec dl =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(10000, GPR_TIMESPAN));
    s->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                       grpc_slice_from_static_string("/hdmlp.Peer/Deliver"),
                                       NULL, dl, NULL);
    grpc_metadata_array_init(&s->imd);
    grpc_metadata_array_init(&s->tmd);
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    size_t n = 0;
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n++].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = s->req;
    ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->imd;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &s->resp;
    ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[n].data.recv_status_on_client.trailing_metadata = &s->tmd;
    ops[n].data.recv_status_on_client.status = &s->status;
    ops[n++].data.recv_status_on_client.status_details = &s->details;
    if (grpc_call_start_batch(s->call, ops, n, s, NULL) != GRPC_CALL_OK) {
        grpc_call_unref(s->call);
        grpc_byte_buffer_destroy(s->req);
        grpc_metadata_array_destroy(&s->imd);
        grpc_metadata_array_destroy(&s->tmd);
        return -1;
    }
    s->busy = 1;
    a->t.sent++;
    return 0;
}

static void end_call(attacker *a, slot *s)
{
    tally *t = &a->t;
    if (s->status == GRPC_STATUS_OK) {
        t->ok++;
    } else if (s->status == GRPC_STATUS_INVALID_ARGUMENT ||
               s->status == GRPC_STATUS_PERMISSION_DENIED ||
               s->status == GRPC_STATUS_RESOURCE_EXHAUSTED) {
        if (t->rejected++ == 0) {
            snprintf(t->first_reject, sizeof(t->first_reject), "%.*s",
                     (int)GRPC_SLICE_LENGTH(s->details),
                     (const char *)GRPC_SLICE_START_PTR(s->details));
        }
    } else {
        t->other++;
    }
    if ((unsigned)s->status < 17) {
        t->by_status[s->status]++;
    }
    grpc_slice_unref(s->details);
    grpc_metadata_array_destroy(&s->imd);
    grpc_metadata_array_destroy(&s->tmd);
    grpc_byte_buffer_destroy(s->req);
    if (s->resp != NULL) {
        grpc_byte_buffer_destroy(s->resp);
    }
    grpc_call_unref(s->call);
    s->busy = 0;
}

static void *attack_main(void *arg)
{
    attacker *a = arg;
    grpc_arg args[] = {{GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, {.integer = -1}},
                       {GRPC_ARG_INTEGER, GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, {.integer = 1}}};
    const grpc_channel_args cargs = {sizeof(args) / sizeof(args[0]), args};
    grpc_channel_credentials *cr = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(a->target, cr, &cargs);
    grpc_channel_credentials_release(cr);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    const size_t cap = 64u << 10;
    uint8_t *scratch = malloc(cap);
    slot slots[INFLIGHT];
    memset(slots, 0, sizeof(slots));
    uint64_t rng = a->seed, i = 0;
    const int inflight = a->kind == A_BIG ? a->big_inflight : INFLIGHT;
    int busy = 0;
    for (int k = 0; k < inflight; k++) {
        busy += start_call(a, ch, cq, &slots[k], i++, &rng, scratch, cap) == 0;
    }
    while (busy > 0) {
        const grpc_event ev = grpc_completion_queue_next(
            cq,
            gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(200, GPR_TIMESPAN)),
            NULL);
        if (ev.type != GRPC_OP_COMPLETE) {
            continue;
        }
        slot *s = ev.tag;
        end_call(a, s);
        busy--;
        if (!atomic_load(a->stop)) {
            busy += start_call(a, ch, cq, s, i++, &rng, scratch, cap) == 0;
        }
    }
    grpc_channel_destroy(ch);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
    free(scratch);
    return NULL;
}

static int read_full(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        const ssize_t r = read(fd, p, len);
        if (r <= 0) {
            return -1;
        }
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        const ssize_t r = write(fd, p, len);
        if (r <= 0) {
            return -1;
        }
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

static void attacker_process(int cmd_fd, int res_fd)
{
    grpc_init();
    uint8_t *big = malloc(BIG_LEN);
    if (big == NULL) {
        _exit(3);
    }
    memset(big, 0x5A, BIG_LEN);
    attack_cmd c;
    while (read_full(cmd_fd, &c, sizeof(c)) == 0 && c.op == 1) {
        atomic_int stop;
        atomic_init(&stop, 0);
        attacker att[A_N];
        memset(att, 0, sizeof(att));
        for (int k = 0; k < c.n_kinds; k++) {
            snprintf(att[k].target, sizeof(att[k].target), "%s", c.target);
            att[k].kind = c.kinds[k];
            att[k].stop = &stop;
            att[k].big = big;
            att[k].big_inflight = c.big_inflight;
            att[k].seed = 0xA77AC4ull + (uint64_t)k;
            pthread_create(&att[k].th, NULL, attack_main, &att[k]);
        }
        char b;
        const int ok = read_full(cmd_fd, &b, 1) == 0;
        atomic_store(&stop, 1);
        tally out[A_N];
        memset(out, 0, sizeof(out));
        for (int k = 0; k < c.n_kinds; k++) {
            pthread_join(att[k].th, NULL);
            out[c.kinds[k]] = att[k].t;
        }
        if (!ok || write_full(res_fd, out, sizeof(out)) != 0) {
            break;
        }
    }
    free(big);
    grpc_shutdown();
    _exit(0);
}

typedef struct flood {
    int big_inflight;
    int cmd_fd, res_fd;
    pid_t pid;
    tally t[A_N];
    uint64_t t0;
    double secs;
} flood;

/* Forks the attacker process. Call before this process initialises gRPC. 0 or -1. */
static int flood_init(flood *f)
{
    int cmd[2], res[2];
    if (pipe(cmd) != 0 || pipe(res) != 0) {
        return -1;
    }
    fflush(stdout);
    f->pid = fork();
    if (f->pid < 0) {
        return -1;
    }
    if (f->pid == 0) {
        close(cmd[1]);
        close(res[0]);
        attacker_process(cmd[0], res[1]);
    }
    close(cmd[0]);
    close(res[1]);
    f->cmd_fd = cmd[1];
    f->res_fd = res[0];
    return 0;
}

static void flood_start(flood *f, const char *target, const int *kinds, int n_kinds)
{
    attack_cmd c;
    memset(&c, 0, sizeof(c));
    c.op = 1;
    snprintf(c.target, sizeof(c.target), "%s", target);
    for (int k = 0; k < n_kinds; k++) {
        c.kinds[k] = kinds[k];
    }
    c.n_kinds = n_kinds;
    c.big_inflight = f->big_inflight;
    memset(f->t, 0, sizeof(f->t));
    f->t0 = now_ns();
    CHECK(write_full(f->cmd_fd, &c, sizeof(c)) == 0, "attacker process gone");
}

static void flood_stop(flood *f)
{
    const char b = 's';
    f->secs = (double)(now_ns() - f->t0) / 1e9;
    CHECK(write_full(f->cmd_fd, &b, 1) == 0 && read_full(f->res_fd, f->t, sizeof(f->t)) == 0,
          "attacker process gone");
}

static void flood_exit(flood *f)
{
    attack_cmd c;
    memset(&c, 0, sizeof(c));
    c.op = 2;
    write_full(f->cmd_fd, &c, sizeof(c));
    close(f->cmd_fd);
    close(f->res_fd);
    int status = 0;
    waitpid(f->pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "attacker process: status %d", status);
}

/* Prints the tallies of `kinds`; returns calls sent and rejected. */
static void flood_report(const flood *f, const int *kinds, int n_kinds, uint64_t *sent,
                         uint64_t *rejected)
{
    *sent = *rejected = 0;
    for (int j = 0; j < n_kinds; j++) {
        const tally *t = &f->t[kinds[j]];
        printf("  %-11s sent %7llu (%6.0f/s)  rejected %7llu (%6.0f/s)  OK %llu  other %llu "
               "[INVALID_ARGUMENT %llu, PERMISSION_DENIED %llu, RESOURCE_EXHAUSTED %llu, "
               "UNAVAILABLE %llu, DEADLINE %llu]\n",
               attack_names[kinds[j]], (unsigned long long)t->sent, (double)t->sent / f->secs,
               (unsigned long long)t->rejected, (double)t->rejected / f->secs,
               (unsigned long long)t->ok, (unsigned long long)t->other,
               (unsigned long long)t->by_status[GRPC_STATUS_INVALID_ARGUMENT],
               (unsigned long long)t->by_status[GRPC_STATUS_PERMISSION_DENIED],
               (unsigned long long)t->by_status[GRPC_STATUS_RESOURCE_EXHAUSTED],
               (unsigned long long)t->by_status[GRPC_STATUS_UNAVAILABLE],
               (unsigned long long)t->by_status[GRPC_STATUS_DEADLINE_EXCEEDED]);
        if (t->rejected > 0) {
            printf("              first rejection: %s\n", t->first_reject);
        }
        *sent += t->sent;
        *rejected += t->rejected;
    }
}

/* ---- RSS sampler ------------------------------------------------------------------------ */

typedef struct sampler {
    atomic_int stop;
    uint64_t peak;
    pthread_t th;
} sampler;

static void *sample_main(void *arg)
{
    sampler *s = arg;
    while (!atomic_load(&s->stop)) {
        const uint64_t r = rss_bytes();
        if (r > s->peak) {
            s->peak = r;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void sampler_start(sampler *s)
{
    memset(s, 0, sizeof(*s));
    atomic_init(&s->stop, 0);
    s->peak = rss_bytes();
    pthread_create(&s->th, NULL, sample_main, s);
}

static uint64_t sampler_stop(sampler *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    return s->peak;
}

#define MIB(x) ((double)(x) / 1048576.0)

/* Returns freed heap memory to the system, so that RSS shows what is still held. */
static void trim(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

static uint64_t delivered(exchange *x)
{
    return atomic_load(&x->runs[0].delivered) + atomic_load(&x->runs[1].delivered);
}

static int all_done(exchange *x)
{
    return atomic_load(&x->runs[0].done) && atomic_load(&x->runs[1].done);
}

/* The exchange runs while `kinds` flood rank 0 for up to secs seconds (or until the run
 * ends). Prints the hostile rates, the exchange's samples/s during the flood and RSS; the
 * run then completes (unflooded) and is checked. Returns the exchange's rate. */
static double flooded_run(flood *f, hdmlp_dataset *ds, uint64_t epochs, double secs,
                          const int *kinds, int n_kinds, const char *what, int expect_complete,
                          exchange *x)
{
    if (exchange_create(x, ds, epochs, 5000) != 0) {
        failures++;
        return 0;
    }
    const uint64_t rss0 = rss_bytes();
    sampler smp;
    sampler_start(&smp);
    flood_start(f, x->eps[0], kinds, n_kinds);
    /* let the attackers connect and load the server before the exchange starts */
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    exchange_start(x);
    const uint64_t t0 = now_ns();
    while (!all_done(x) && (double)(now_ns() - t0) / 1e9 < secs) {
        ts.tv_nsec = 10 * 1000000L;
        nanosleep(&ts, NULL);
    }
    const uint64_t got = delivered(x);
    const double window = (double)(now_ns() - t0) / 1e9;
    const uint64_t rss1 = rss_bytes();
    flood_stop(f);
    const uint64_t peak = sampler_stop(&smp);
    exchange_finish(x, what, expect_complete);
    trim();
    const uint64_t rss2 = rss_bytes();
    uint64_t sent, rejected;
    printf("  flood %.2f s:\n", f->secs);
    flood_report(f, kinds, n_kinds, &sent, &rejected);
    const double rate = (double)got / window;
    printf("  => %s: hostile %.0f calls/s sent, %.0f/s rejected; exchange %.0f samples/s "
           "during the flood; server-process RSS %.1f MiB before, peak %.1f (+%.1f MiB), "
           "%.1f at the end of the flood, %.1f after the run (loaders freed, heap trimmed)\n",
           what, (double)sent / f->secs, (double)rejected / f->secs, rate, MIB(rss0), MIB(peak),
           MIB(peak - rss0), MIB(rss1), MIB(rss2));
    /* gRPC core buffers an oversized call whole before rejecting it (a known limit of the
     * transport): with oversized calls in flight the growth is bounded by those buffers and
     * is released when the flood stops. Everything else must stay within the small limit. */
    int big = 0;
    for (int k = 0; k < n_kinds; k++) {
        big |= kinds[k] == A_BIG;
    }
    const uint64_t limit =
        HOSTILE_RSS_LIMIT + (big ? (uint64_t)f->big_inflight * 6 * (65ull << 20) : 0);
    CHECK(peak - rss0 < limit, "%s: RSS grew by %.1f MiB (limit %.0f)", what, MIB(peak - rss0),
          MIB(limit));
    /* Afterwards at most one retained buffer per oversized call in flight remains cached. */
    const uint64_t after =
        HOSTILE_RSS_LIMIT + (big ? (uint64_t)f->big_inflight * (65ull << 20) : 0);
    CHECK(rss2 < rss0 + after, "%s: RSS stayed %.1f MiB above where it started", what,
          MIB(rss2 - rss0));
    return rate;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *env = getenv("HDMLP_HOSTILE_SECONDS");
    const double secs = env != NULL && *env != '\0' ? strtod(env, NULL) : 4.0;
    char dir[512];
    if (testds_mkdtemp("hostile", dir, sizeof(dir)) != 0 ||
        testds_write(dir, &spec) != HDMLP_OK) {
        printf("dataset: %s\n", hdmlp_last_error());
        return 1;
    }
    hdmlp_dataset *ds = NULL;
    if (hdmlp_dataset_open(dir, &ds) != HDMLP_OK) {
        printf("open: %s\n", hdmlp_last_error());
        return 1;
    }
    flood f;
    memset(&f, 0, sizeof(f));
    env = getenv("HDMLP_HOSTILE_BIG_INFLIGHT");
    f.big_inflight = env != NULL && *env != '\0' ? atoi(env) : BIG_INFLIGHT;
    if (f.big_inflight < 1 || f.big_inflight > INFLIGHT) {
        f.big_inflight = BIG_INFLIGHT;
    }
    if (flood_init(&f) != 0) {
        printf("cannot start the attacker process\n");
        return 1;
    }
    printf("hostile_rpc: %llu samples (%.1f MiB raw), 2 ranks over gRPC on loopback (token "
           "%#llx); an attacker process floods rank 0, one channel per attack kind with %d "
           "calls in flight (%d oversized); floods of up to %.0f s (HDMLP_HOSTILE_SECONDS)\n",
           (unsigned long long)spec.n_samples, MIB(hdmlp_dataset_raw_bytes(ds)),
           (unsigned long long)TOKEN, INFLIGHT, f.big_inflight, secs);

    /* 1. baseline */
    exchange x;
    if (exchange_create(&x, ds, 10, 5000) != 0) {
        return 1;
    }
    const uint64_t base_rss0 = rss_bytes();
    sampler smp;
    sampler_start(&smp);
    exchange_start(&x);
    const double base_rate = exchange_finish(&x, "baseline (no flood)", 1);
    const uint64_t base_peak = sampler_stop(&smp);
    printf("  baseline RSS %.1f MiB before, peak %.1f (+%.1f MiB)\n", MIB(base_rss0),
           MIB(base_peak), MIB(base_peak - base_rss0));

    /* enough epochs to outlast the flood at the unflooded rate */
    uint64_t epochs = (uint64_t)(secs * base_rate / (double)spec.n_samples) + 2;
    if (epochs > 400) {
        epochs = 400;
    }
    /* 2. floods without the token */
    static const int small[] = {A_TOKEN, A_MALFORMED, A_RANKS};
    static const int big[] = {A_BIG};
    const double r_small =
        flooded_run(&f, ds, epochs, secs, small, 3, "small hostile calls", 1, &x);
    for (int j = 0; j < 3; j++) {
        CHECK(f.t[small[j]].ok == 0, "%s: %llu calls answered OK", attack_names[small[j]],
              (unsigned long long)f.t[small[j]].ok);
        CHECK(f.t[small[j]].rejected > 0, "%s: nothing rejected", attack_names[small[j]]);
    }
    const double r_big = flooded_run(&f, ds, epochs, secs, big, 1, "oversized calls", 1, &x);
    CHECK(f.t[A_BIG].ok == 0, "oversized: %llu calls answered OK",
          (unsigned long long)f.t[A_BIG].ok);
    CHECK(f.t[A_BIG].rejected > 0, "oversized: nothing rejected");

    /* 3. the token holder */
    static const int loc_req[] = {A_LOC_REQUEST};
    flooded_run(&f, ds, epochs, secs, loc_req, 1, "token holder: out-of-range REQUESTs", 1, &x);
    static const int loc_sample[] = {A_LOC_SAMPLE};
    if (exchange_create(&x, ds, 2, 2000) != 0) {
        return 1;
    }
    flood_start(&f, x.eps[0], loc_sample, 1);
    exchange_start(&x);
    exchange_finish(&x, "token holder: out-of-range SAMPLEs", 0);
    flood_stop(&f);
    uint64_t sent, rejected;
    flood_report(&f, loc_sample, 1, &sent, &rejected);
    printf("  rank 0: %s: %s\n  rank 1: %s: %s\n", hdmlp_err_name(x.runs[0].rc), x.runs[0].err,
           hdmlp_err_name(x.runs[1].rc), x.runs[1].err);
    CHECK(x.runs[0].rc == HDMLP_E_PEER && strstr(x.runs[0].err, "sample") != NULL &&
              strstr(x.runs[0].err, "rank 1") != NULL,
          "rank 0 must refuse an out-of-range SAMPLE with HDMLP_E_PEER naming it");

    printf("summary: exchange alone %.0f samples/s; with small hostile calls %.0f (%.0f %%); "
           "with oversized calls %.0f (%.0f %%)\n",
           base_rate, r_small, 100.0 * r_small / base_rate, r_big, 100.0 * r_big / base_rate);
    flood_exit(&f);
    hdmlp_dataset_close(ds);
    testds_rm_rf(dir);
    printf("hostile_rpc: %s\n", failures == 0 ? "all promises held" : "FAILED");
    return failures == 0 ? 0 : 1;
}
