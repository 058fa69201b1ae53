/*
 * The consumer's side: hdmlp_loader_next assembles batches from this rank's planned
 * positions in order, waiting for refills and for peers' samples; batches go back to the
 * budget when released (from any thread).
 */
#include "loader_next.h"
#include "loader_core.h"
#include "loader_exchange.h"
#include "loader_image_pipe.h"
#include "loader_plan.h"
#include "loader_teardown.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* How long a consumer blocked only by unreleased batches waits for a release. */
#define STUCK_GRACE_NS (1000ull * 1000000ull)

/* Sends queued messages without holding the lock (lock held on entry and exit). */
static void flush_unlocked(hdmlp_loader *ld)
{
    if (ld->send_head != NULL) {
        pthread_mutex_unlock(&ld->lock);
        exchange_flush(ld);
        pthread_mutex_lock(&ld->lock);
    }
}

/* Gives the front item its sample if it is remote and has arrived; requests it otherwise.
 * Returns the front item, or NULL when nothing is planned. */
static ld_item *front(hdmlp_loader *ld)
{
    if (ld->ring_count == 0) {
        return NULL;
    }
    ld_item *it = &ld->ring[ld->ring_head];
    if (it->s == NULL) {
        const uint64_t seq = it->epoch * ld->epoch_len + it->position / ld->world;
        ld_sample *s = exchange_take(ld, seq);
        if (s != NULL) {
            it->s = s;
            if (s->prefetched) {
                ld->remote_charged -= loader_sample_charge(s->size);
                ld->out[s->lender].taken += loader_sample_charge(s->size);
                if (!it->requested) {
                    ld->st.remote_hits++;
                }
            }
        } else if (!it->requested) {
            exchange_request(ld, it);
        }
    }
    return it;
}

/* Waits (lock held) until the next planned item is ready and pops it into *out. */
static int take_item(hdmlp_loader *ld, ld_item *out, const struct timespec *deadline)
{
    uint64_t stuck_since = 0;
    for (;;) {
        if (ld->failed) {
            return hd_err(ld->failed, "%s", ld->fail_detail);
        }
        if (ld->ring_count == 0) {
            const int rc = plan_advance(ld);
            exchange_serve(ld);
            if (rc != HDMLP_OK) {
                return loader_fail(ld, rc, hdmlp_last_error());
            }
        }
        ld_item *it = front(ld);
        if (it != NULL && it->s != NULL && it->s->state != SAMPLE_PENDING) {
            *out = *it;
            ld->ring_head = (ld->ring_head + 1) % ld->ring_cap;
            ld->ring_count--;
            if (out->s->state < 0) {
                const int code = out->s->state;
                char detail[1024];
                snprintf(detail, sizeof(detail), "%s", out->s->err ? out->s->err : "");
                ld->charged -= loader_sample_charge(out->s->size);
                sample_free(out->s);
                out->s = NULL;
                if (ld->cfg.skip_corrupt && (code == HDMLP_E_CORRUPT || code == HDMLP_E_IO ||
                                             code == HDMLP_E_NOTFOUND)) {
                    /* Counted and reported, never replaced: the batch is one shorter. */
                    ld->st.skipped_samples++;
                    snprintf(ld->last_skip, sizeof(ld->last_skip), "%s", detail);
                    return HDMLP_OK;
                }
                return loader_fail(ld, code, detail);
            }
            return HDMLP_OK;
        }
        if (it == NULL && ld->plan_done) {
            return HDMLP_END;
        }
        if (it == NULL && plan_stuck(ld)) {
            /* Only released batches can free memory now. Another thread may be about to
             * release some: give it a grace period before reporting. */
            if (ld->outstanding_batches > 0 && stuck_since == 0) {
                stuck_since = loader_now_ns();
            }
            if (ld->outstanding_batches > 0 && loader_now_ns() - stuck_since < STUCK_GRACE_NS) {
                const struct timespec until = loader_realtime_in(50 * 1000000ull);
                pthread_cond_timedwait(&ld->ready_cv, &ld->lock, &until);
                const int prc = plan_advance(ld);
                if (prc != HDMLP_OK) {
                    return loader_fail(ld, prc, hdmlp_last_error());
                }
                continue;
            }
            uint64_t left = 0;
            const uint32_t gone = exchange_departed(ld, &left);
            if (gone != UINT32_MAX) {
                char detail[256];
                snprintf(
                    detail, sizeof(detail),
                    "loader: rank %u stopped early (or failed) without taking %llu samples "
                    "this rank decided for it; they hold the memory the next refill needs",
                    gone, (unsigned long long)left);
                return loader_fail(ld, HDMLP_E_PEER, detail);
            }
            return hd_err(
                HDMLP_E_NOMEM,
                "loader: memory budget exhausted (%llu of %llu bytes accounted) while "
                "%llu batches are still held; release batches before asking for more",
                (unsigned long long)ld->charged, (unsigned long long)ld->cfg.memory,
                (unsigned long long)ld->outstanding_batches);
        }
        if (ld->interrupt) {
            ld->interrupt = 0;
            return hd_err(HDMLP_E_INTERRUPTED, "loader: interrupted while waiting for data");
        }
        if (ld->send_head != NULL && !ld->flushing) {
            flush_unlocked(ld);
            continue;
        }
        /* Wait for a completion, a release or a peer's message, bounded by the caller's
         * deadline and, for a remote item, by the peer timeout. */
        struct timespec until;
        const struct timespec *limit = deadline;
        uint64_t peer_deadline = 0;
        if (it != NULL && it->s == NULL && it->requested) {
            peer_deadline = it->requested_ns + (uint64_t)ld->cfg.peer_timeout_ms * 1000000ull;
            const uint64_t now = loader_now_ns();
            if (now >= peer_deadline) {
                char detail[256];
                snprintf(detail, sizeof(detail),
                         "loader: rank %u did not send the sample for position %llu of epoch "
                         "%llu within %u ms",
                         it->owner, (unsigned long long)it->position,
                         (unsigned long long)it->epoch, ld->cfg.peer_timeout_ms);
                return loader_fail(ld, HDMLP_E_PEER, detail);
            }
            until = loader_realtime_in(peer_deadline - now);
            if (deadline == NULL || loader_timespec_before(&until, deadline)) {
                limit = &until;
            }
        }
        const uint64_t t0 = loader_now_ns();
        int wrc = 0;
        if (limit != NULL) {
            wrc = pthread_cond_timedwait(&ld->ready_cv, &ld->lock, limit);
        } else {
            pthread_cond_wait(&ld->ready_cv, &ld->lock);
        }
        ld->st.stall_ns += loader_now_ns() - t0;
        if (wrc == ETIMEDOUT && limit == deadline) {
            return hd_err(HDMLP_E_TIMEOUT, "loader: no data within the timeout");
        }
        const int rc = plan_advance(ld);
        exchange_serve(ld);
        if (rc != HDMLP_OK) {
            return loader_fail(ld, rc, hdmlp_last_error());
        }
    }
}

static void uncharge_samples(hdmlp_loader *ld, ld_sample **s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ld->charged -= loader_sample_charge(s[i]->size);
    }
}

void batch_discard(hdmlp_loader *ld, hdmlp_batch *batch)
{
    if (batch == NULL) {
        return;
    }
    uncharge_samples(ld, batch->samples, batch->n);
    for (size_t i = 0; i < batch->n; i++) {
        sample_free(batch->samples[i]);
    }
    hd_free(batch);
}

/* Tells every peer this rank has delivered all its epochs (lock held). */
void loader_announce_done(hdmlp_loader *ld)
{
    if (ld->announced_done || ld->world == 1) {
        return;
    }
    ld->announced_done = 1;
    for (uint32_t q = 0; q < ld->world; q++) {
        if (q != ld->rank) {
            peer_msg m;
            memset(&m, 0, sizeof(m));
            m.kind = PEER_DONE;
            m.from = ld->rank;
            m.to = q;
            m.token = ld->cfg.token;
            ld_send *e = hd_calloc(1, sizeof(*e));
            if (e == NULL) {
                continue;
            }
            e->m = m;
            if (ld->send_tail != NULL) {
                ld->send_tail->next = e;
            } else {
                ld->send_head = e;
            }
            ld->send_tail = e;
        }
    }
}

static hdmlp_batch *batch_new(hdmlp_loader *ld, uint64_t n)
{
    hdmlp_batch *b =
        hd_calloc(1, sizeof(*b) + n * (sizeof(hdmlp_sample_view) + sizeof(ld_sample *)));
    if (b != NULL) {
        b->views = (hdmlp_sample_view *)(b + 1);
        b->samples = (ld_sample **)(b->views + n);
        b->cap = n;
        b->epoch = ld->deliver_epoch;
    }
    return b;
}

/* Assembles the next batch (lock held). */
static int next_locked(hdmlp_loader *ld, hdmlp_batch **out, const struct timespec *deadline)
{
    const uint64_t b = ld->cfg.batch;
    for (;;) {
        if (ld->partial == NULL) {
            if ((ld->cfg.epochs != 0 && ld->deliver_epoch >= ld->cfg.epochs) ||
                ld->epoch_len == 0) {
                loader_announce_done(ld);
                return HDMLP_END;
            }
            const uint64_t left = ld->epoch_len - ld->deliver_pos;
            ld->partial = batch_new(ld, left < b ? left : b);
            if (ld->partial == NULL) {
                return hd_err(HDMLP_E_NOMEM, "loader: out of memory for a batch");
            }
        }
        hdmlp_batch *batch = ld->partial;
        int rc = HDMLP_OK;
        while (batch->taken < batch->cap && rc == HDMLP_OK) {
            ld_item it;
            rc = take_item(ld, &it, deadline);
            if (rc == HDMLP_OK) {
                batch->taken++;
                if (it.s != NULL) { /* NULL: a skipped corrupt sample */
                    batch->samples[batch->n++] = it.s;
                }
            }
        }
        if (rc == HDMLP_E_NOMEM || rc == HDMLP_E_INTERRUPTED || rc == HDMLP_E_TIMEOUT) {
            if (!ld->failed) {
                return rc; /* resumable: the partial batch stays for the next call */
            }
        }
        ld->partial = NULL;
        if (rc != HDMLP_OK) {
            if (rc == HDMLP_END) {
                rc = loader_fail(ld, HDMLP_E_STATE, "loader: planner ended inside an epoch");
            }
            batch_discard(ld, batch);
            return rc;
        }
        const int drop = ld->cfg.drop_last && batch->cap < b;
        ld->deliver_pos += batch->taken;
        if (ld->deliver_pos == ld->epoch_len) {
            batch->epoch_last = 1;
            ld->deliver_pos = 0;
            ld->deliver_epoch++;
            ld->st.epochs++;
        }
        if (!drop) {
            *out = batch;
            return HDMLP_OK;
        }
        batch_discard(ld, batch);
        pthread_cond_broadcast(&ld->ready_cv);
    }
}

int hdmlp_loader_next(hdmlp_loader *ld, hdmlp_batch **out)
{
    return hdmlp_loader_next_timeout(ld, out, 0);
}

static int next_until(hdmlp_loader *ld, hdmlp_batch **out, const struct timespec *deadline);

int hdmlp_loader_next_timeout(hdmlp_loader *ld, hdmlp_batch **out, uint32_t timeout_ms)
{
    const struct timespec deadline = loader_realtime_in((uint64_t)timeout_ms * 1000000ull);
    return next_until(ld, out, timeout_ms != 0 ? &deadline : NULL);
}

int hdmlp_loader_try_next(hdmlp_loader *ld, hdmlp_batch **out)
{
    const struct timespec past = {0, 0};
    return next_until(ld, out, &past);
}

/* The next raw batch, handed out of this layer: counted, views set, referenced (lock held).
 * The image pipeline takes its batches from here. */
static int raw_next(hdmlp_loader *ld, hdmlp_batch **out, const struct timespec *deadline)
{
    hdmlp_batch *batch = NULL;
    const int rc = next_locked(ld, &batch, deadline);
    if (batch != NULL) {
        for (size_t i = 0; i < batch->n; i++) {
            const ld_sample *s = batch->samples[i];
            batch->views[i] = (hdmlp_sample_view){s->data, s->size, s->index, s->label, 0};
            ld->st.bytes_delivered += s->size;
            ld->st.stored_bytes_delivered += s->stored;
        }
        ld->st.samples += batch->n;
        ld->st.batches++;
        ld->outstanding_batches++;
        ld->refs++;
        batch->ld = ld;
        /* Keep the lookahead going while the consumer works on this batch. */
        const int prc = plan_advance(ld);
        exchange_serve(ld);
        if (prc != HDMLP_OK) {
            loader_fail(ld, prc, hdmlp_last_error());
        }
        *out = batch;
    }
    return rc;
}

/* With on_corrupt=skip, an epoch of which every sample was skipped fails the loader
 * (HDMLP_E_CORRUPT): its data is all bad, and training would silently see nothing. Checked
 * as the epoch's last batch is handed out (b), or at the end (b NULL) after a dropped last
 * batch. Lock held. */
static int close_skip_epoch(hdmlp_loader *ld)
{
    const uint64_t positions = ld->skip_positions;
    const int all_skipped = positions > 0 && ld->skip_kept == 0;
    ld->skip_positions = 0;
    ld->skip_kept = 0;
    if (!all_skipped) {
        return HDMLP_OK;
    }
    char detail[1024];
    snprintf(detail, sizeof(detail),
             "loader: every sample of epoch %llu was corrupt or unreadable and skipped "
             "(on_corrupt=skip: %llu of %llu); the last: %.700s",
             (unsigned long long)ld->skip_epoch, (unsigned long long)positions,
             (unsigned long long)positions, ld->last_skip);
    if (ld->pipe != NULL) {
        ld->pipe->broken = 1; /* the batches decoded ahead are not handed out */
    }
    return loader_fail(ld, HDMLP_E_CORRUPT, detail);
}

static int check_skip_epoch(hdmlp_loader *ld, const hdmlp_batch *b)
{
    if (!ld->cfg.skip_corrupt) {
        return HDMLP_OK;
    }
    if (b != NULL && b->epoch != ld->skip_epoch) {
        const int rc = close_skip_epoch(ld);
        ld->skip_epoch = b->epoch;
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    if (b != NULL) {
        ld->skip_positions += b->taken;
        ld->skip_kept += b->n;
        if (!b->epoch_last) {
            return HDMLP_OK;
        }
    }
    return close_skip_epoch(ld);
}

/* Takes back a batch that was about to be handed out (lock held). */
static void unhand(hdmlp_loader *ld, hdmlp_batch *b)
{
    uncharge_samples(ld, b->samples, b->n);
    for (size_t i = 0; i < b->n; i++) {
        sample_free(b->samples[i]);
    }
    if (b->image != NULL) {
        ld->image_charged -= b->image->charge;
        image_out_recycle(ld, b->image);
        image_out_free(b->image);
    }
    ld->outstanding_batches--;
    ld->st.batches--;
    ld->refs--; /* the handle's reference remains: the caller is in a call on it */
    hd_free(b);
    pthread_cond_broadcast(&ld->ready_cv);
}

static int next_until(hdmlp_loader *ld, hdmlp_batch **out, const struct timespec *deadline)
{
    if (out == NULL || ld == NULL) {
        return hd_err(HDMLP_E_INVAL, "loader_next: loader and out are required");
    }
    *out = NULL;
    pthread_mutex_lock(&ld->lock);
    /* The image pipeline still hands out batches decoded before a failure. */
    int rc = ld->pipe != NULL ? image_pipe_next(ld, raw_next, out, deadline)
             : ld->failed     ? hd_err(ld->failed, "%s", ld->fail_detail)
                              : raw_next(ld, out, deadline);
    if (rc == HDMLP_OK || rc == HDMLP_END) {
        const int src = check_skip_epoch(ld, rc == HDMLP_OK ? *out : NULL);
        if (src != HDMLP_OK) {
            if (*out != NULL) {
                unhand(ld, *out);
                *out = NULL;
            }
            rc = src;
        }
    }
    pthread_mutex_unlock(&ld->lock);
    exchange_flush(ld);
    if (rc != HDMLP_OK) {
        /* exchange_flush may have touched the thread's error detail. */
        pthread_mutex_lock(&ld->lock);
        if (ld->failed) {
            hd_err(ld->failed, "%s", ld->fail_detail);
        }
        pthread_mutex_unlock(&ld->lock);
    }
    return rc;
}

void hdmlp_loader_interrupt(hdmlp_loader *ld)
{
    if (ld == NULL) {
        return;
    }
    pthread_mutex_lock(&ld->lock);
    ld->interrupt = 1;
    pthread_cond_broadcast(&ld->ready_cv);
    pthread_mutex_unlock(&ld->lock);
}

void hdmlp_batch_release(hdmlp_batch *batch)
{
    if (batch == NULL) {
        return;
    }
    hdmlp_loader *ld = batch->ld;
    pthread_mutex_lock(&ld->lock);
    uncharge_samples(ld, batch->samples, batch->n);
    if (batch->image != NULL) {
        ld->image_charged -= batch->image->charge;
        image_out_recycle(ld, batch->image); /* its buffer, for a later batch */
    }
    ld->outstanding_batches--;
    pthread_cond_broadcast(&ld->ready_cv);
    loader_unref_unlock(ld);
    for (size_t i = 0; i < batch->n; i++) {
        sample_free(batch->samples[i]);
    }
    image_out_free(batch->image);
    hd_free(batch);
}
