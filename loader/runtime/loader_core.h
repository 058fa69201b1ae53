/*
 * Loader core structures: planned deliveries, refill jobs, batches.
 *
 * Threads: the consumer (hdmlp_loader_next) runs the scheduler in sequence order and
 * queues refill jobs; I/O workers read, verify and decode them; batches are released from
 * any thread. One mutex guards everything below except what a worker does to the job it
 * has taken off the queue.
 *
 * Layering: one header per file says what the others may call (loader_<file>.h, each
 * including this one, the struct); a file calls only files on lower layers, never up, and
 * .ci/check_layers.py fails on a call circle between the library's files (from the objects'
 * symbols). Upper layers hand lower ones the loader and callbacks.
 *   6 API          loader_api.c (create, free, stats; starts threads, wires the exchange)
 *   5 consumer     loader_next.c (batches), loader_resume.c (saved positions),
 *     threads      loader_worker.c (I/O threads)
 *   4 movers       loader_exchange.c (peers), loader_tier_stage.c (SSD stager),
 *                  loader_image_batch.c (decoded batches to the consumer)
 *   3 images       loader_image_pipe.c (decode threads, the I/O/decode split)
 *   2 planning     loader_plan.c (scheduler ahead of the consumer, refill jobs, outboxes,
 *                  the cost model's learning), loader_forecast.c
 *   1 base         loader_teardown.c (reference count, source counters), loader_pool.c,
 *                  loader_balance_apply.c (the node board's hooks); below runtime/, the
 *                  subsystems' folders (README "Layout")
 */
#ifndef HDMLP_LOADER_CORE_H
#define HDMLP_LOADER_CORE_H

#include "loader.h"
#include "loader_budget.h"
#include "loader_chunksrc.h"
#include "loader_costmodel.h"
#include "loader_dataset.h"
#include "loader_io.h"
#include "loader_peer.h"
#include "loader_pool.h"
#include "loader_refill.h"
#include "loader_sampler.h"
#include "loader_sched.h"
#include "loader_sizing.h"
#include "loader_tier.h"

#include <pthread.h>
#include <time.h>

enum { SAMPLE_PENDING = 0, SAMPLE_READY = 1 }; /* or a negative HDMLP_E_* code */

typedef struct ld_sample {
    uint64_t index;
    uint64_t size; /* raw bytes (charged to the budget until released) */
    uint64_t stored;
    uint32_t label;
    int state;
    uint8_t *data;
    char *err;      /* detail of a failed refill */
    int prefetched; /* received from a peer ahead of need */
    int result;     /* worker-private decode result until published as state */
    /* Where data lives: the heap (home NULL), or the transport's shared sample memory:
     * this rank's own block (lender PEER_MEM_OWN) or one a same-host peer lent. */
    peer_mem *home;
    uint32_t lender;
    struct sample_pool *pool; /* the pool the heap buffer is from, or NULL (malloc) */
} ld_sample;

typedef struct ld_job {
    struct ld_job *next;
    uint64_t chunk;
    uint64_t epoch; /* planned epoch (for per-epoch source bytes) */
    int first_load; /* the first load of a RAM- or SSD-placed chunk: read whole, cached */
    uint32_t n;
    ld_sample **samples; /* n, in slot order (the delivered one included) */
    uint32_t *slots;     /* their n in-chunk slots, increasing */
    /* Their n sample records (FORMAT.md: samples section): copied from the chunk's table at
     * planning when planning's view has them (offsets), else by the I/O thread that takes
     * the job, from job_tables, before its read (plan_records); `prepared` once they and
     * the read plan are made. The I/O thread decodes, and plan_refresh plans again,
     * without the table. */
    uint8_t *rec;
    uint8_t *vals; /* a dataset with fields: the n samples' value records (F each), copied
                    * with the records; the decoder builds each field record from them */
    int prepared;
    hdmlp_refill mode; /* the read mode planning chose: the plan's, or auto's choice */
    int miss;          /* admitted for a miss: its plan counts as a whole or ranged refill */
    refill_plan plan;
    /* Auto refill with a learnt model: the model's observation count when the plan was
     * made, and whether it was an exploration (its shape is then kept). */
    int explored;
    int span; /* read as a span (refill_span_cost), a shape `auto` alone does not consider */
    uint64_t planned_at;
} ld_job;

/* A position of this rank's sequence: a sample this rank owns (s set at planning), or a
 * remote one (s set when the owner's answer or prefetch arrives). */
typedef struct ld_item {
    ld_sample *s;
    uint64_t epoch;
    uint64_t position; /* global position in the epoch */
    uint64_t group;
    uint32_t slot;
    uint32_t owner; /* rank owning the location */
    int requested;  /* remote: a request was sent */
    uint64_t requested_ns;
} ld_item;

/* A decided sample waiting to be sent to the rank that will request it. */
typedef struct ld_out {
    ld_sample *s;
    uint64_t epoch;
    uint64_t position;
    uint64_t group;
    uint32_t slot;
    int sent;
} ld_out;

typedef struct ld_outbox {
    ld_out *q; /* ring of entries in position order */
    uint64_t cap, head, count;
    int want; /* the peer is blocked on (want_epoch, want_position) */
    uint64_t want_epoch, want_position;
    /* Owner side: the peer's credit (its latest) and the prefetch bytes sent to it, both
     * counted from the start of the run: the bytes in flight to it or held by it are
     * pushed - (what it consumed), at most its share of its remote memory. */
    uint64_t limit, pushed;
    /* Requester side: bytes of this owner's prefetches consumed so far. */
    uint64_t taken;
    int done; /* the peer finished all its epochs */
} ld_outbox;

/* Samples received ahead of need, keyed by this rank's sequence number. */
typedef struct ld_remote {
    uint64_t seq;
    ld_sample *s;
    struct ld_remote *next;
} ld_remote;

/* A message to send once the lock is released. */
typedef struct ld_send {
    peer_msg m;
    ld_sample *s; /* freed (and uncharged) after sending, or NULL */
    struct ld_send *next;
} ld_send;

typedef struct ld_worker {
    struct hdmlp_loader *ld;
    pthread_t thread;
    int started;
    io_engine *io;                /* for local files (segments, SSD cache files) */
    chunk_reader *rd[TIER_KINDS]; /* a reader of each source in ld->src, by TIER_* */
    fmt_decoder *dec;
    uint8_t *buf; /* read buffer (hd_map_alloc), reserved in the budget */
    uint64_t buf_cap;
    uint64_t held; /* bytes of buf charged for the running job (0: resident, reserved) */
    int held_pool; /* held comes from the read-buffer pool (else from the budget) */
} ld_worker;

struct hdmlp_loader {
    hdmlp_dataset *ds;
    const fmt_index *ix;
    fmt_tables tables;     /* where planning reads sample tables (sizes views, or views) */
    fmt_tables job_tables; /* where an I/O thread reads a job's records: checked views */
    struct hdmlp_config cfg;
    sched *sch;
    refill_cost cost; /* the source's cost model now (lock held): planning reads it */

    /* cost learning (lock held; the clocks have their own locks) */
    int learn;
    cost_model src_model, ssd_model;
    cost_explorer explorer;
    cost_history src_hist;
    cost_clock src_clock, ssd_clock;

    pthread_mutex_t lock;
    pthread_cond_t work_cv;  /* jobs queued or shutdown */
    pthread_cond_t ready_cv; /* a job completed or memory was released */
    unsigned refs;           /* the handle + each outstanding batch */
    int shutdown;

    ld_worker *workers;
    uint32_t n_workers;

    uint64_t charged; /* accounted bytes: samples not yet released + refill buffers */
    /* The budget's split and every move between its shares (loader_budget.h): the planning
     * limit, the I/O pool, the remote cap, the image reserve, lending to local ranks. */
    loader_budget budget;
    /* Read buffers charged per job (loader_worker.c): on for a remote source, where a
     * request waits tens of milliseconds and more jobs in flight pay; the reserved buffers'
     * bytes (the budget's I/O pool, inside charged) are then shared by every thread by each
     * job's need. */
    int io_pooled;
    uint64_t io_pool_used;
    uint32_t reading; /* jobs being read now (st.refills_in_flight_peak: its peak) */
    /* Decoded batch buffers (loader_image_*.c): charged against the image reserve that
     * image_pipe_start takes from planning's share, so never against planning's room. */
    uint64_t image_charged;
    uint64_t image_pooled; /* released buffers kept for reuse, inside the same reserve */

    ld_job *q_head, *q_tail;
    uint64_t inflight; /* jobs queued or running */

    /* planning frontier */
    uint64_t epoch_len;              /* this rank's positions per epoch */
    uint64_t *epoch_len_of;          /* every rank's */
    sampler order;                   /* the order of plan_epoch (every rank's requests) */
    uint64_t order_run[SAMPLER_RUN]; /* its samples at positions order_at .. (plan_sample_at) */
    uint64_t order_at;               /* UINT64_MAX: none yet this epoch */
    uint64_t plan_epoch, plan_pos;
    int plan_started, plan_done;
    ld_sample **slot_buf; /* A × K: buffer of each valid slot */
    ld_job *pending;      /* decided refill not yet admitted (memory) */
    sched_step pending_step;
    int have_pending;

    /* Where refills read from, by TIER_*: the dataset (local or remote, chosen at create),
     * the RAM and SSD tiers (ops NULL when off). */
    chunk_source src[TIER_KINDS];

    /* tiers */
    tier *tier;
    uint64_t *epoch_source; /* source bytes per planned epoch */
    uint64_t epoch_source_cap;
    uint64_t epoch_source_known;
    pthread_t stager;
    int stager_started;
    int stage_done;
    uint8_t *stage_buf; /* the stager's read buffer: stage_cap bytes, mapped at create */
    uint64_t stage_cap;

    /* peers */
    uint32_t rank, world;
    peer_transport *net;
    /* The transport's shared sample memory while the transport lives (lock); samples in it
     * keep it alive after. */
    peer_mem *mem;
    ld_outbox *out;     /* world entries; [rank] unused */
    ld_remote **remote; /* hash buckets */
    uint64_t remote_buckets;
    uint64_t remote_charged; /* prefetched bytes held (the budget's remote cap bounds them) */
    ld_send *send_head, *send_tail;
    /* One thread at a time sends the queue, in order (lock): a peer must see this rank's
     * messages in the order they were queued (a stale request overtaking a fresh one would
     * clear it). Others only queue; the flusher takes what they queued before it stops. */
    int flushing;
    uint32_t peers_done;
    int announced_done;
    int peer_failed;
    uint64_t last_peer_ns;

    /* planned, not yet delivered */
    ld_item *ring;
    uint64_t ring_cap, ring_head, ring_count;

    /* delivery */
    uint64_t deliver_epoch, deliver_pos;
    uint64_t outstanding_batches;
    struct hdmlp_batch *partial; /* batch being assembled when the budget ran out */
    int interrupt;
    char last_skip[1024]; /* detail of the last skipped sample */
    /* on_corrupt=skip: the epoch being handed out, its positions and samples kept so far
     * (an epoch that kept none fails the loader: loader_next.c) */
    uint64_t skip_epoch, skip_positions, skip_kept;
    int failed;
    char fail_detail[1024];

    hdmlp_stats st;
    struct sample_pool *pool;  /* sample buffers (loader_pool.c), made on first use */
    struct balance_state *bal; /* the node board (loader_balance_apply.c), or NULL */
    struct image_pipe *pipe;   /* the image pipeline (loader_image_pipe.c), or NULL */
};

/* The budget charges each planned sample LOADER_SAMPLE_META bytes beyond its own: its record,
 * its planned position, and three allocation headers (the record's, the pool node's, the
 * pool buffer's malloc chunk). */
_Static_assert(sizeof(ld_sample) + sizeof(ld_item) + 3 * 16 <= LOADER_SAMPLE_META,
               "LOADER_SAMPLE_META must cover a planned sample's record");

struct hdmlp_batch {
    struct hdmlp_loader *ld;
    uint64_t epoch;
    size_t n;       /* samples in the batch */
    size_t cap;     /* positions it covers */
    size_t taken;   /* positions taken so far (skipped corrupt samples included) */
    int epoch_last; /* the last batch of its epoch */
    hdmlp_sample_view *views;
    ld_sample **samples;
    struct image_out *image; /* decoded images (image pipeline), or NULL */
};

/* Monotonic nanoseconds (stall times, peer deadlines). */
static inline uint64_t loader_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_REALTIME (the clock of the loader's condition waits) `ns` nanoseconds from now. */
static inline struct timespec loader_realtime_in(uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const uint64_t sum = (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec += (time_t)(sum / 1000000000ull);
    ts.tv_nsec = (long)(sum % 1000000000ull);
    return ts;
}

/* Whether time a is before time b. */
static inline int loader_timespec_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Notes the accounted bytes in peak_memory_bytes (lock held). */
static inline void loader_note_peak(struct hdmlp_loader *ld)
{
    const uint64_t now = ld->charged + ld->image_charged + ld->image_pooled;
    if (now > ld->st.peak_memory_bytes) {
        ld->st.peak_memory_bytes = now;
    }
}

#endif
