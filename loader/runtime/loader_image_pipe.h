/*
 * The image pipeline inside a loader (hdmlp_config_set_image): decode threads that turn the
 * raw batches the consumer assembles, a few batches ahead, into one output buffer per
 * batch, and the split of threads between I/O and decoding. Everything runs under the
 * loader's lock except the decoding itself.
 */
#ifndef HDMLP_LOADER_IMAGE_PIPE_H
#define HDMLP_LOADER_IMAGE_PIPE_H

#include "loader_core.h"
#include "loader_image.h"

/* A batch's decoded images (hdmlp_batch.image). */
typedef struct image_out {
    struct image_out *next; /* queue link */
    struct hdmlp_batch *batch;
    uint8_t *buf;     /* n_raw images (64-byte aligned), compacted when finalised; NULL once
                       * handed back to the pipeline's pool */
    size_t buf_bytes; /* its size, as allocated (a full batch's when it came from the pool) */
    void (*buf_free)(void *arg, void *ptr, size_t bytes); /* the user's, or NULL */
    void *buf_arg;
    uint64_t charge;    /* bytes charged to the budget for buf: buf_bytes */
    uint32_t n_raw;     /* samples of the raw batch */
    uint32_t claimed;   /* samples handed to decode threads */
    uint32_t done;      /* samples decoded (or failed) */
    int *result;        /* per sample */
    char **err;         /* per sample detail, or NULL */
    uint64_t *raw_size; /* per sample raw bytes (stats of skipped samples) */
    uint32_t *labels;
    uint64_t *indices;
    hdmlp_sample_view *records; /* samples with fields: each image's field record */
    uint64_t pos_epoch, pos;    /* the consumer's position after this batch */
} image_out;

typedef struct image_pipe image_pipe;

typedef struct decode_thread {
    image_pipe *p;
    struct hdmlp_loader *ld;
    uint32_t index;
    pthread_t thread;
    int started;
} decode_thread;

struct image_pipe {
    struct hdmlp_image_config ic;
    uint64_t img_bytes; /* one output image */
    uint32_t field;     /* samples with fields: the one decoded (the others pass through);
                         * FMT_NO_FIELD when each sample is an image */
    uint64_t reserve; /* output buffers' bytes reserved (BUDGET_IMAGES; image_charged's cap) */
    /* Output buffers kept for reuse (loader_image_batch.c): full batches' buffers handed
     * back, so their pages stay mapped instead of being faulted and zeroed again for every
     * batch. Held inside the reserve: image_charged + image_pooled <= reserve, and at most
     * pool_cap (prefetch + 2) of them. */
    uint8_t **pool;
    uint32_t pooled, pool_cap;
    uint64_t full_bytes; /* a full batch's buffer: img_bytes × batch */
    decode_thread *threads;
    uint32_t n_threads;
    pthread_cond_t work_cv; /* decode threads: samples queued, split changed, stop */
    pthread_cond_t io_cv;   /* I/O threads held back by the split */
    int stop;
    image_out *head, *tail;
    uint32_t depth;
    int raw_end;
    int pending_rc; /* a raw batch's error met ahead of the queued batches */
    int broken;     /* a failure went out: every later call repeats it */
    char pending_detail[1024];
    uint64_t handed_epoch, handed_pos;
    /* the split */
    int automatic;
    uint32_t total;    /* threads allowed to run: io_limit + decode_active */
    uint32_t io_limit; /* I/O threads allowed (0: all, fixed split) */
    uint32_t io_max;   /* I/O threads there are */
    uint32_t decode_active;
    uint64_t win_start;
    uint64_t win_decoded;
    uint64_t win_read;    /* samples the I/O threads completed */
    uint64_t win_idle_ns; /* decode threads waiting for samples */
    uint64_t win_full_ns; /* the consumer waiting on a full queue */
    int verdict;          /* image_split.verdict (loader_image_split.c) */
};

/* Assembles the next raw batch and hands it out of the raw layer (counted in the stats,
 * referenced); loader_next.c's, passed in by the caller (lock held). */
typedef int (*image_raw_next_fn)(struct hdmlp_loader *ld, struct hdmlp_batch **out,
                                 const struct timespec *deadline);

/* The field the pipeline decodes on dataset ds (hdmlp_image_config_set_field): *field, or
 * FMT_NO_FIELD when each sample is the image. HDMLP_E_INVAL naming the field or the
 * choice when there is none to decode. */
int image_field_of(const struct hdmlp_dataset *ds, const struct hdmlp_image_config *ic,
                   uint32_t *field);
/* Starts the pipeline of ld->cfg.image (at create, after the I/O threads): checks that the
 * budget holds its buffers and takes them from planning, starts the decode threads. */
int image_pipe_start(struct hdmlp_loader *ld);
/* Stops the decode threads and drops batches decoded ahead (at free, before the I/O threads
 * stop; lock not held). Safe when the pipeline was never started. */
void image_pipe_stop(struct hdmlp_loader *ld);
/* hdmlp_loader_next with the pipeline on (lock held): the next decoded batch. */
int image_pipe_next(struct hdmlp_loader *ld, image_raw_next_fn raw, struct hdmlp_batch **out,
                    const struct timespec *deadline);
/* The consumer's position after the last batch handed out (for saved states); 0 when no
 * batch went out yet (the loader's own position then holds). Lock held. */
int image_pipe_position(const struct hdmlp_loader *ld, uint64_t *epoch, uint64_t *pos);
/* An I/O thread with index i may take jobs (lock held). */
int image_pipe_io_allowed(struct hdmlp_loader *ld, uint32_t i);
/* An I/O thread completed n samples (lock held): the read rate. */
void image_pipe_io_done(struct hdmlp_loader *ld, uint32_t n);
/* Waits (lock held) until the split may let I/O thread i run again or the loader stops. */
void image_pipe_io_wait(struct hdmlp_loader *ld);
/* Frees a batch's images (lock not held; its charge was returned by the caller). The output
 * buffer is freed unless image_out_recycle took it. */
void image_out_free(image_out *o);
/* Hands a batch's output buffer back to the pipeline's pool when it is a full batch's and the
 * reserve covers it beside the buffers in use (lock held; after its charge was returned,
 * before image_out_free). Otherwise leaves it to image_out_free. Safe with the pipeline
 * stopped (ld->pipe NULL: nothing is kept). */
void image_out_recycle(struct hdmlp_loader *ld, image_out *o);

#endif
