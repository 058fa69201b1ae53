/*
 * The image pipeline's consumer side: queuing raw batches ahead (hdmlp_loader_next's
 * thread), handing out decoded ones in order, compacting away images that failed with
 * HDMLP_CORRUPT_SKIP, and the public view of a decoded batch.
 */
#include "loader_image_pipe.h"
#include "loader_plan.h"
#include "loader_teardown.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A batch's output buffer (lock held): a pooled one when there is one (a full batch's, also
 * for a shorter last batch), else a new one of n images from the user's allocator or ours.
 * Every byte of an image is written by its decode, so what a reused buffer held before
 * never shows. */
static int out_buffer(struct hdmlp_loader *ld, image_pipe *p, image_out *o, size_t n)
{
    if (p->ic.alloc != NULL) {
        o->buf_free = p->ic.free;
        o->buf_arg = p->ic.alloc_arg;
    }
    if (p->pooled > 0) {
        o->buf = p->pool[--p->pooled];
        o->buf_bytes = p->full_bytes;
        ld->image_pooled -= p->full_bytes;
        return HDMLP_OK;
    }
    o->buf_bytes = (size_t)p->img_bytes * n;
    if (p->ic.alloc == NULL) {
        o->buf = hd_aligned_alloc(64, o->buf_bytes);
        return o->buf != NULL
                   ? HDMLP_OK
                   : hd_err(HDMLP_E_NOMEM, "image: out of memory for a batch of %zu images", n);
    }
    o->buf = p->ic.alloc(p->ic.alloc_arg, o->buf_bytes);
    if (o->buf == NULL) {
        return hd_err(HDMLP_E_NOMEM,
                      "image: the allocator returned NULL for a %zu-byte batch buffer",
                      o->buf_bytes);
    }
    if ((uintptr_t)o->buf % 64 != 0) {
        const void *got = o->buf;
        return hd_err(
            HDMLP_E_INVAL,
            "image: the allocator returned %p for a batch buffer, not 64-byte aligned", got);
    }
    return HDMLP_OK;
}

void image_out_recycle(struct hdmlp_loader *ld, image_out *o)
{
    image_pipe *p = ld->pipe;
    if (o == NULL || o->buf == NULL || p == NULL || p->stop || o->buf_bytes != p->full_bytes ||
        p->pooled >= p->pool_cap ||
        ld->image_charged + ld->image_pooled + o->buf_bytes > p->reserve) {
        return;
    }
    p->pool[p->pooled++] = o->buf;
    ld->image_pooled += o->buf_bytes;
    o->buf = NULL;
}

/* Queues a raw batch for the decode threads (lock held). */
static int submit(struct hdmlp_loader *ld, image_pipe *p, hdmlp_batch *b)
{
    image_out *o = hd_calloc(1, sizeof(*o));
    const size_t n = b->n ? b->n : 1;
    if (o != NULL) {
        const int rc = out_buffer(ld, p, o, n);
        if (rc != HDMLP_OK) {
            image_out_free(o); /* a misaligned buffer goes back to the user, never the pool */
            return rc;
        }
        o->result = hd_calloc(n, sizeof(int));
        o->err = hd_calloc(n, sizeof(char *));
        o->raw_size = hd_calloc(n, sizeof(uint64_t));
        o->labels = hd_calloc(n, sizeof(uint32_t));
        o->indices = hd_calloc(n, sizeof(uint64_t));
        o->records = p->field != FMT_NO_FIELD ? hd_calloc(n, sizeof(hdmlp_sample_view)) : NULL;
    }
    if (o == NULL || !o->result || !o->err || !o->raw_size || !o->labels || !o->indices ||
        (p->field != FMT_NO_FIELD && o->records == NULL)) {
        image_out_recycle(ld, o);
        image_out_free(o);
        return hd_err(HDMLP_E_NOMEM, "image: out of memory for a batch of %zu images", b->n);
    }
    o->batch = b;
    o->n_raw = (uint32_t)b->n;
    o->charge = o->buf_bytes;
    for (size_t i = 0; i < b->n; i++) {
        o->raw_size[i] = b->samples[i]->size;
    }
    o->pos_epoch = ld->deliver_epoch;
    o->pos = ld->deliver_pos;
    b->image = o;
    ld->image_charged += o->charge;
    loader_note_peak(ld);
    if (p->tail != NULL) {
        p->tail->next = o;
    } else {
        p->head = o;
    }
    p->tail = o;
    p->depth++;
    pthread_cond_broadcast(&p->work_cv);
    return HDMLP_OK;
}

/* Returns a batch that will never reach the consumer to the loader (lock held). */
static void drop(struct hdmlp_loader *ld, hdmlp_batch *b)
{
    image_out *o = b->image;
    for (size_t i = 0; i < b->n; i++) {
        ld->charged -= loader_sample_charge(b->samples[i]->size);
        sample_free(b->samples[i]);
    }
    ld->image_charged -= o != NULL ? o->charge : 0;
    ld->outstanding_batches--;
    ld->refs--; /* the handle's reference remains: the consumer is in a call on it */
    image_out_recycle(ld, o);
    image_out_free(o);
    hd_free(b);
    pthread_cond_broadcast(&ld->ready_cv);
}

/* Turns a fully decoded batch into what the consumer gets: images that failed are left out
 * (HDMLP_CORRUPT_SKIP) or fail the loader. Lock held. */
static int finalize(struct hdmlp_loader *ld, image_pipe *p, image_out *o)
{
    hdmlp_batch *b = o->batch;
    for (uint32_t i = 0; i < o->n_raw; i++) {
        if (o->result[i] != HDMLP_OK &&
            !(ld->cfg.skip_corrupt && o->result[i] == HDMLP_E_CORRUPT)) {
            char detail[1024];
            snprintf(detail, sizeof(detail), "%s",
                     o->err[i] ? o->err[i] : "image: decode failed");
            const int rc = o->result[i];
            drop(ld, b);
            return loader_fail(ld, rc, detail);
        }
    }
    size_t n = 0;
    for (uint32_t i = 0; i < o->n_raw; i++) {
        ld_sample *s = b->samples[i];
        if (o->result[i] != HDMLP_OK) {
            ld->st.skipped_samples++;
            ld->st.samples--;
            ld->st.bytes_delivered -= o->raw_size[i];
            ld->st.stored_bytes_delivered -= s->stored;
            snprintf(ld->last_skip, sizeof(ld->last_skip), "%s", o->err[i] ? o->err[i] : "");
            sample_free(s);
            continue;
        }
        if (n != i) {
            memmove(o->buf + n * p->img_bytes, o->buf + (size_t)i * p->img_bytes, p->img_bytes);
        }
        b->samples[n] = s;
        o->labels[n] = s->label;
        o->indices[n] = s->index;
        b->views[n] =
            (hdmlp_sample_view){o->buf + n * p->img_bytes, p->img_bytes, s->index, s->label, 0};
        if (o->records != NULL) {
            o->records[n] = (hdmlp_sample_view){s->data, s->size, s->index, s->label, 0};
        }
        n++;
    }
    b->n = n;
    return HDMLP_OK;
}

/* How long a consumer holding more decoded batches than the reserve's two waits for a
 * release (from any thread) before HDMLP_E_NOMEM, as hdmlp_loader_next does without the
 * pipeline. */
#define HELD_GRACE_NS (1000ull * 1000000ull)

/* Whether one more batch's output buffer fits in the reserve (lock held). */
static int out_room(const struct hdmlp_loader *ld, const image_pipe *p)
{
    return ld->image_charged + p->img_bytes * ld->cfg.batch <= p->reserve;
}

/* Waits on the loader's condition (lock held) until woken or the deadline passes. */
static int wait_ready(struct hdmlp_loader *ld, const struct timespec *deadline)
{
    const uint64_t t0 = loader_now_ns();
    int wrc = 0;
    if (deadline != NULL) {
        wrc = pthread_cond_timedwait(&ld->ready_cv, &ld->lock, deadline);
    } else {
        pthread_cond_wait(&ld->ready_cv, &ld->lock);
    }
    ld->st.stall_ns += loader_now_ns() - t0;
    return wrc == ETIMEDOUT ? HDMLP_E_TIMEOUT : HDMLP_OK;
}

/* Hands out the decoded head of the queue (lock held). */
static int pop(struct hdmlp_loader *ld, image_pipe *p, hdmlp_batch **out)
{
    image_out *o = p->head;
    p->head = o->next;
    if (p->head == NULL) {
        p->tail = NULL;
    }
    p->depth--;
    o->next = NULL;
    p->handed_epoch = o->pos_epoch;
    p->handed_pos = o->pos;
    const int rc = finalize(ld, p, o);
    if (rc != HDMLP_OK) {
        p->broken = 1;
        return rc;
    }
    *out = o->batch;
    return HDMLP_OK;
}

/* Queues the raw batches that are ready now, without waiting (lock held): called as a
 * decoded batch goes out, so decoding goes on while the consumer works on it. What this meets
 * is kept for the consumer's next call: an interrupt, a failure (after the queued batches). */
static void top_up_ready(struct hdmlp_loader *ld, image_pipe *p, image_raw_next_fn raw)
{
    const struct timespec past = {0, 0};
    while (!ld->failed && p->depth < p->ic.prefetch && !p->raw_end &&
           p->pending_rc == HDMLP_OK && out_room(ld, p)) {
        hdmlp_batch *b = NULL;
        int rc = raw(ld, &b, &past);
        if (rc == HDMLP_OK) {
            rc = submit(ld, p, b);
            if (rc == HDMLP_OK) {
                continue;
            }
            drop(ld, b);
            loader_fail(ld, rc, hdmlp_last_error());
        }
        if (rc == HDMLP_END) {
            p->raw_end = 1;
        } else if (rc == HDMLP_E_INTERRUPTED) {
            ld->interrupt = 1; /* it was meant for the consumer's next wait */
        } else if (rc != HDMLP_E_TIMEOUT && rc != HDMLP_E_NOMEM) {
            p->pending_rc = rc;
            snprintf(p->pending_detail, sizeof(p->pending_detail), "%s", hdmlp_last_error());
        }
        break;
    }
}

int image_pipe_next(struct hdmlp_loader *ld, image_raw_next_fn raw, hdmlp_batch **out,
                    const struct timespec *deadline)
{
    image_pipe *p = ld->pipe;
    const struct timespec past = {0, 0};
    uint64_t held_since = 0;
    for (;;) {
        if (p->broken) {
            return hd_err(ld->failed ? ld->failed : p->pending_rc, "%s",
                          ld->failed ? ld->fail_detail : p->pending_detail);
        }
        /* Batches assembled before a failure are still delivered, as without the pipeline. */
        if (p->head != NULL && p->head->done == p->head->n_raw) {
            const int rc = pop(ld, p, out);
            if (rc == HDMLP_OK) {
                top_up_ready(ld, p, raw);
            }
            return rc;
        }
        /* Keep `prefetch` batches queued; block for raw data only when none is. */
        while (!ld->failed && p->depth < p->ic.prefetch && !p->raw_end &&
               p->pending_rc == HDMLP_OK && out_room(ld, p)) {
            hdmlp_batch *b = NULL;
            const int rc = raw(ld, &b, p->depth == 0 ? deadline : &past);
            if (rc == HDMLP_OK) {
                const int src = submit(ld, p, b);
                if (src != HDMLP_OK) {
                    drop(ld, b);
                    p->broken = 1;
                    return loader_fail(ld, src, hdmlp_last_error());
                }
                continue;
            }
            if (rc == HDMLP_END) {
                p->raw_end = 1;
            } else if (rc == HDMLP_E_INTERRUPTED ||
                       (p->depth == 0 && (rc == HDMLP_E_TIMEOUT || rc == HDMLP_E_NOMEM))) {
                return rc; /* resumable: the caller's deadline, an interrupt, the budget */
            } else if (rc != HDMLP_E_TIMEOUT && rc != HDMLP_E_NOMEM) {
                /* A failure: reported once the batches queued before it are out. */
                p->pending_rc = rc;
                snprintf(p->pending_detail, sizeof(p->pending_detail), "%s",
                         hdmlp_last_error());
            }
            break;
        }
        if (p->head == NULL && !ld->failed && p->pending_rc == HDMLP_OK && !p->raw_end) {
            /* Nothing queued because the caller holds more decoded batches than the
             * reserve's two: give another thread a grace period to release some. */
            if (held_since == 0) {
                held_since = loader_now_ns();
            }
            if (loader_now_ns() - held_since >= HELD_GRACE_NS) {
                return hd_err(HDMLP_E_NOMEM,
                              "image: %llu decoded batches are held (%llu bytes of the %llu "
                              "reserved for them); release batches before asking for more",
                              (unsigned long long)ld->outstanding_batches,
                              (unsigned long long)ld->image_charged,
                              (unsigned long long)p->reserve);
            }
            const struct timespec until = loader_realtime_in(50 * 1000000ull);
            const int past_deadline =
                deadline != NULL && loader_timespec_before(deadline, &until);
            if (wait_ready(ld, past_deadline ? deadline : &until) != HDMLP_OK &&
                past_deadline) {
                return hd_err(HDMLP_E_TIMEOUT, "loader: no decoded batch within the timeout");
            }
            continue;
        }
        if (p->head == NULL) {
            if (ld->failed || p->pending_rc != HDMLP_OK) {
                p->broken = 1;
                continue;
            }
            return HDMLP_END; /* raw_end: nothing queued and nothing to come */
        }
        if (p->head->done == p->head->n_raw) {
            continue;
        }
        if (ld->interrupt) {
            ld->interrupt = 0;
            return hd_err(HDMLP_E_INTERRUPTED, "loader: interrupted while waiting for images");
        }
        const int full = p->depth >= p->ic.prefetch;
        const uint64_t t0 = loader_now_ns();
        const int wrc = wait_ready(ld, deadline);
        if (full) {
            p->win_full_ns += loader_now_ns() - t0;
        }
        if (wrc != HDMLP_OK) {
            return hd_err(HDMLP_E_TIMEOUT, "loader: no decoded batch within the timeout");
        }
    }
}

const hdmlp_sample_view *hdmlp_batch_fields(const hdmlp_batch *batch)
{
    return batch != NULL && batch->image != NULL ? batch->image->records : NULL;
}

int hdmlp_batch_image(const hdmlp_batch *batch, hdmlp_image_batch *out)
{
    if (batch == NULL || out == NULL) {
        return hd_err(HDMLP_E_INVAL, "batch_image: batch and out are required");
    }
    const image_out *o = batch->image;
    if (o == NULL) {
        return hd_err(HDMLP_E_STATE, "batch_image: the loader has no image pipeline");
    }
    const struct hdmlp_image_config *ic = batch->ld->cfg.image;
    out->data = o->buf;
    out->n = (uint32_t)batch->n;
    out->height = ic->height;
    out->width = ic->width;
    out->channels = ic->channels;
    out->layout = ic->layout;
    out->dtype = ic->dtype;
    out->bytes = image_out_bytes(ic) * batch->n;
    out->labels = o->labels;
    out->indices = o->indices;
    return HDMLP_OK;
}
