/*
 * hostile_rpc's attacker process: raw gRPC C-core calls to /hdmlp.Peer/Deliver, one
 * channel per attack kind with INFLIGHT calls in flight, driven through pipes by the
 * parent, which reads the tallies (see hostile_rpc.c).
 */
#include "hostile/hostile_rpc.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *const attack_names[A_N] = {"wrong token", "malformed",   "oversized",
                                       "rank range",  "loc REQUEST", "loc SAMPLE"};

/* ---- the attacker process --------------------------------------------------------------
 * A child forked before this process initialises gRPC (so the server's RSS is measured
 * alone). One thread and one channel per attack kind, INFLIGHT calls in flight each. The
 * parent sends a command (target and kinds), later a stop byte, and reads the tallies. */

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

/* Forks the attacker process. Call before this process initialises gRPC. 0 or -1. */
int flood_init(flood *f)
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

void flood_start(flood *f, const char *target, const int *kinds, int n_kinds)
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

void flood_stop(flood *f)
{
    const char b = 's';
    f->secs = (double)(now_ns() - f->t0) / 1e9;
    CHECK(write_full(f->cmd_fd, &b, 1) == 0 && read_full(f->res_fd, f->t, sizeof(f->t)) == 0,
          "attacker process gone");
}

void flood_exit(flood *f)
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
void flood_report(const flood *f, const int *kinds, int n_kinds, uint64_t *sent,
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
