/*
 * I/O engine, io_uring mechanism (compiled only with HDMLP_HAVE_IO_URING).
 *
 * One ring per engine, `depth` entries, no SQPOLL. io_ring_read keeps up to depth reads
 * in flight: it fills the ring, then blocks in io_uring_submit_and_wait for at least one
 * completion, reaps every completion that is ready, resubmits the remainder of short
 * reads (and reads that completed with -EAGAIN/-EINTR) and starts the next requests in
 * the freed slots, until every request has completed.
 */
#include "loader_io.h"

#include "format.h"

#include <errno.h>
#include <liburing.h>
#include <stdint.h>
#include <string.h>

/* Bytes asked of one SQE: the read length is 32-bit; 1 GiB keeps O_DIRECT continuations
 * 4096-aligned. */
#define RING_OP_MAX (UINT64_C(1) << 30)
/* Consecutive -EAGAIN/-EINTR completions of one read before it is reported as failed. */
#define RING_RETRY_MAX 64u
#define RING_PROBE_OPS 256u

/* Called from loader_io.c, which repeats these prototypes. */

typedef struct ring_slot {
    io_read *req;  /* request this slot serves */
    uint64_t done; /* bytes of it read so far */
    unsigned retries;
} ring_slot;

struct io_ring {
    struct io_uring ring;
    unsigned depth;
    int broken;        /* a submission failed fatally; the ring may hold stale requests */
    ring_slot *slots;  /* depth slots; user_data of an SQE points to its slot */
    unsigned *free_ix; /* stack of free slot indexes */
};

static int ring_unavailable(int err)
{
    return err == ENOSYS || err == EPERM || err == EACCES || err == EOPNOTSUPP;
}

/* Checks that the kernel knows IORING_OP_READ (Linux 5.6; the probe is as old). */
static int ring_probe_read(struct io_uring *ring)
{
    const size_t size =
        sizeof(struct io_uring_probe) + RING_PROBE_OPS * sizeof(struct io_uring_probe_op);
    struct io_uring_probe *const p = hd_calloc(1, size);
    if (p == NULL) {
        return hd_err(HDMLP_E_NOMEM, "io_uring: out of memory");
    }
    const int rc = io_uring_register_probe(ring, p, RING_PROBE_OPS);
    const int ok = rc >= 0 && io_uring_opcode_supported(p, IORING_OP_READ);
    hd_free(p);
    if (!ok) {
        return hd_err(HDMLP_E_UNSUPPORTED,
                      "io_uring unavailable: the kernel does not support IORING_OP_READ "
                      "(Linux 5.6 or later needed)");
    }
    return HDMLP_OK;
}

void io_ring_free(io_ring *r)
{
    if (r == NULL) {
        return;
    }
    io_uring_queue_exit(&r->ring);
    hd_free(r->slots);
    hd_free(r->free_ix);
    hd_free(r);
}

int io_ring_create(unsigned depth, io_ring **out)
{
    *out = NULL;
    io_ring *const r = hd_calloc(1, sizeof(*r));
    if (r == NULL) {
        return hd_err(HDMLP_E_NOMEM, "io_uring: out of memory");
    }
    r->depth = depth;
    r->slots = hd_calloc(depth, sizeof(*r->slots));
    r->free_ix = hd_calloc(depth, sizeof(*r->free_ix));
    if (r->slots == NULL || r->free_ix == NULL) {
        hd_free(r->slots);
        hd_free(r->free_ix);
        hd_free(r);
        return hd_err(HDMLP_E_NOMEM, "io_uring: out of memory");
    }
    const int rc = io_uring_queue_init(depth, &r->ring, 0);
    if (rc < 0) {
        hd_free(r->slots);
        hd_free(r->free_ix);
        hd_free(r);
        char buf[128];
        const char *const msg = strerror_r(-rc, buf, sizeof(buf));
        if (ring_unavailable(-rc)) {
            return hd_err(HDMLP_E_UNSUPPORTED,
                          "io_uring unavailable: io_uring_queue_init(%u) failed: %s (kernel "
                          "without io_uring, or disabled by kernel.io_uring_disabled or a "
                          "seccomp policy)",
                          depth, msg);
        }
        return hd_err(hd_errno_code(-rc), "io_uring_queue_init(%u) failed: %s", depth, msg);
    }
    const int prc = ring_probe_read(&r->ring);
    if (prc != HDMLP_OK) {
        io_ring_free(r);
        return prc;
    }
    *out = r;
    return HDMLP_OK;
}

/* Queues the next piece of the slot's request. The SQ ring has at least depth entries and
 * at most depth slots are in use, so an SQE is always free. */
static int ring_prep(io_ring *r, ring_slot *s, uint64_t *ops)
{
    struct io_uring_sqe *const sqe = io_uring_get_sqe(&r->ring);
    if (sqe == NULL) {
        return hd_err(HDMLP_E_STATE, "io_uring: submission queue unexpectedly full");
    }
    const io_read *const q = s->req;
    const uint64_t left = q->len - s->done;
    const unsigned ask = (unsigned)(left < RING_OP_MAX ? left : RING_OP_MAX);
    io_uring_prep_read(sqe, q->fd, q->dst + s->done, ask, q->offset + s->done);
    io_uring_sqe_set_data(sqe, s);
    (*ops)++;
    return HDMLP_OK;
}

/* Accounts one completion of slot s. Returns 1 when its request is finished (result set),
 * 0 when the rest must be submitted again. */
static int ring_complete(ring_slot *s, int res)
{
    io_read *const q = s->req;
    if (res == -EAGAIN || res == -EINTR) {
        if (++s->retries <= RING_RETRY_MAX) {
            return 0;
        }
        q->result = res;
        return 1;
    }
    s->retries = 0;
    if (res < 0) {
        /* -EINVAL after progress: an O_DIRECT read stopped at an unaligned end of file and
         * cannot be continued there, so the short read was the end of file. */
        q->result = res == -EINVAL && s->done > 0 ? (int64_t)s->done : (int64_t)res;
        return 1;
    }
    s->done += (uint64_t)res;
    if (res == 0 || s->done >= q->len) {
        q->result = (int64_t)s->done;
        return 1;
    }
    return 0; /* short read: read the remainder */
}

/* After a fatal submission error: waits for what the kernel already accepted (it writes
 * into the caller's buffers), fails every unfinished request, and marks the ring broken. */
static int ring_fail(io_ring *r, io_read *reads, unsigned n, unsigned in_kernel, int rc)
{
    while (in_kernel > 0) {
        struct io_uring_cqe *cqe = NULL;
        const int wrc = io_uring_wait_cqe(&r->ring, &cqe);
        if (wrc == -EINTR) {
            continue;
        }
        if (wrc < 0) {
            break;
        }
        io_uring_cqe_seen(&r->ring, cqe);
        in_kernel--;
    }
    r->broken = 1;
    char buf[128];
    const char *const msg = strerror_r(-rc, buf, sizeof(buf));
    for (unsigned i = 0; i < n; i++) {
        if (reads[i].result == INT64_MIN) {
            reads[i].result = rc;
        }
    }
    return hd_err(hd_errno_code(-rc), "io_uring: submitting reads failed: %s", msg);
}

int io_ring_read(io_ring *r, io_read *reads, unsigned n, uint64_t *ops)
{
    if (r->broken) {
        return hd_err(HDMLP_E_STATE, "io_uring: engine unusable after an earlier failure");
    }
    for (unsigned i = 0; i < n; i++) {
        reads[i].result = INT64_MIN; /* not finished */
    }
    for (unsigned i = 0; i < r->depth; i++) {
        r->free_ix[i] = r->depth - 1 - i;
    }
    unsigned nfree = r->depth;
    unsigned queued = 0; /* SQEs prepared but not yet accepted by the kernel */
    unsigned next = 0;   /* next request to start */
    for (;;) {
        while (nfree > 0 && next < n) {
            io_read *const q = &reads[next++];
            if (q->len == 0) {
                q->result = 0;
                continue;
            }
            ring_slot *const s = &r->slots[r->free_ix[--nfree]];
            s->req = q;
            s->done = 0;
            s->retries = 0;
            const int rc = ring_prep(r, s, ops);
            if (rc != HDMLP_OK) {
                return ring_fail(r, reads, n, r->depth - nfree - 1 - queued, -EBUSY);
            }
            queued++;
        }
        if (nfree == r->depth) {
            return HDMLP_OK; /* nothing in flight, nothing left */
        }
        const unsigned in_kernel = r->depth - nfree - queued;
        const int rc = io_uring_submit_and_wait(&r->ring, 1);
        if (rc >= 0) {
            queued -= (unsigned)rc < queued ? (unsigned)rc : queued;
        } else if (rc == -EAGAIN || rc == -EBUSY) {
            /* Out of kernel resources: wait for a completion without submitting. */
            struct io_uring_cqe *cqe = NULL;
            const int wrc = in_kernel > 0 ? io_uring_wait_cqe(&r->ring, &cqe) : rc;
            if (wrc < 0 && wrc != -EINTR) {
                return ring_fail(r, reads, n, in_kernel, wrc);
            }
        } else if (rc != -EINTR) {
            return ring_fail(r, reads, n, in_kernel, rc);
        }
        struct io_uring_cqe *cqe = NULL;
        while (io_uring_peek_cqe(&r->ring, &cqe) == 0) {
            ring_slot *const s = io_uring_cqe_get_data(cqe);
            const int res = cqe->res;
            io_uring_cqe_seen(&r->ring, cqe);
            if (ring_complete(s, res)) {
                r->free_ix[nfree++] = (unsigned)(s - r->slots);
                continue;
            }
            const int prc = ring_prep(r, s, ops);
            if (prc != HDMLP_OK) {
                return ring_fail(r, reads, n, r->depth - nfree - 1 - queued, -EBUSY);
            }
            queued++;
        }
    }
}
