/*
 * Loader core structures: planned deliveries, refill jobs, batches.
 *
 * Threads: the consumer (hdmlp_loader_next) runs the scheduler in sequence order and
 * queues refill jobs; I/O workers read, verify and decode them; batches are released from
 * any thread. One mutex guards everything below except what a worker does to the job it
 * has taken off the queue.
 */
#ifndef HDMLP_LOADER_CORE_H
#define HDMLP_LOADER_CORE_H

#include "loader.h"
#include "loader_dataset.h"
#include "loader_io.h"
#include "loader_refill.h"
#include "loader_sched.h"

#include <pthread.h>

enum { SAMPLE_PENDING = 0, SAMPLE_READY = 1 }; /* or a negative HDMLP_E_* code */

typedef struct ld_sample {
    uint64_t index;
    uint64_t size; /* raw bytes (charged to the budget until released) */
    uint64_t stored;
    uint32_t label;
    int state;
    uint8_t *data;
    char *err; /* detail of a failed refill */
} ld_sample;

typedef struct ld_job {
    struct ld_job *next;
    uint64_t chunk;
    uint32_t n;
    ld_sample **samples; /* n, in slot order (the delivered one included) */
    uint32_t *slots;
    refill_plan plan;
} ld_job;

typedef struct ld_item {
    ld_sample *s;
    uint64_t epoch;
} ld_item;

typedef struct ld_worker {
    struct hdmlp_loader *ld;
    pthread_t thread;
    int started;
    io_engine *io;
    fmt_decoder *dec;
    io_read *reads;
    uint32_t reads_cap;
} ld_worker;

struct hdmlp_loader {
    hdmlp_dataset *ds;
    const fmt_index *ix;
    struct hdmlp_config cfg;
    sched *sch;
    refill_cost cost;

    pthread_mutex_t lock;
    pthread_cond_t work_cv;  /* jobs queued or shutdown */
    pthread_cond_t ready_cv; /* a job completed or memory was released */
    unsigned refs;           /* the handle + each outstanding batch */
    int shutdown;

    ld_worker *workers;
    uint32_t n_workers;

    uint64_t charged; /* accounted bytes: samples not yet released + refill buffers */
    uint64_t slot_cap;

    ld_job *q_head, *q_tail;
    uint64_t inflight; /* jobs queued or running */

    /* planning frontier */
    uint64_t epoch_len;
    uint64_t *perm;    /* this rank's requests of plan_epoch */
    uint64_t *scratch; /* N */
    uint64_t plan_epoch, plan_pos;
    int plan_started, plan_done;
    ld_sample **slot_buf; /* A × K: buffer of each valid slot */
    ld_job *pending;      /* decided refill not yet admitted (memory) */
    sched_step pending_step;
    int have_pending;

    /* planned, not yet delivered */
    ld_item *ring;
    uint64_t ring_cap, ring_head, ring_count;

    /* delivery */
    uint64_t deliver_epoch, deliver_pos;
    uint64_t outstanding_batches;
    struct hdmlp_batch *partial; /* batch being assembled when the budget ran out */
    int interrupt;
    int failed;
    char fail_detail[1024];

    hdmlp_stats st;
};

struct hdmlp_batch {
    struct hdmlp_loader *ld;
    uint64_t epoch;
    size_t n;
    size_t cap;
    hdmlp_sample_view *views;
    ld_sample **samples;
};

/* loader_worker.c */
int worker_start(struct hdmlp_loader *ld, ld_worker *w);
void *worker_main(void *arg);
void worker_free(ld_worker *w);
void job_free(ld_job *job);

/* loader_plan.c (lock held) */
int plan_advance(struct hdmlp_loader *ld);
int plan_stuck(const struct hdmlp_loader *ld);
void sample_free(ld_sample *s);

#endif
