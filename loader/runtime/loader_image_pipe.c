/*
 * The image pipeline's threads and queue. The consumer (hdmlp_loader_next) assembles raw
 * batches as before and queues them here, up to `prefetch` batches ahead, blocking only
 * when nothing is queued; decode threads claim samples of the queued batches in order,
 * decode and augment each straight into the batch's output buffer and free the sample's
 * raw bytes at once; the consumer hands out the oldest batch once all its samples are done.
 * Every time is measured under the loader's lock; the split between I/O and decode threads
 * (automatic mode) moves one thread at a time from what the last window measured.
 */
#include "loader_image_pipe.h"
#include "loader_plan.h"

#include "fmt_rng.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BALANCE_WINDOW_NS (200ull * 1000000ull)

/* The decode of one sample into `out` (one image of the batch). */
typedef struct decode_ctx {
    image_decoder *dec;
    uint8_t *scratch, *tmp;
    size_t scratch_cap, tmp_cap;
} decode_ctx;

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap) {
        return HDMLP_OK;
    }
    hd_free(*buf);
    *buf = hd_malloc(need);
    *cap = *buf != NULL ? need : 0;
    return *buf != NULL ? HDMLP_OK : hd_err(HDMLP_E_NOMEM, "image: out of memory (scratch)");
}

static int decode_one(const image_pipe *p, decode_ctx *c, const uint8_t *data, size_t size,
                      uint64_t seed, uint64_t epoch, uint64_t index, void *out, int *dct)
{
    const struct hdmlp_image_config *ic = &p->ic;
    image_kind kind;
    uint32_t h = 0, w = 0;
    int rc = image_probe(c->dec, data, size, &kind, &h, &w);
    if (rc != HDMLP_OK) {
        return rc;
    }
    fmt_rng rng;
    image_rng_seed(&rng, seed, epoch, index);
    double y0 = 0, x0 = 0, bh = h, bw = w;
    uint32_t rh = ic->height, rw = ic->width, top = 0, left = 0;
    int flip = 0;
    if (ic->mode == HDMLP_IMAGE_TRAIN) {
        image_crop cr;
        image_crop_train(ic, &rng, h, w, &cr);
        y0 = cr.top;
        x0 = cr.left;
        bh = cr.height;
        bw = cr.width;
        flip = cr.flip;
    } else {
        image_crop_val(ic, h, w, &rh, &rw, &top, &left);
        const double pf = image_flip_prob(ic);
        flip = pf > 0.0 && (double)(fmt_rng_next(&rng) >> 11) * 0x1p-53 < pf;
    }
    uint32_t denom = 1;
    if (kind == IMAGE_JPEG && ic->dct_scaling) {
        for (uint32_t d = 8; d >= 2 && denom == 1; d /= 2) {
            if (bw / d >= 2.0 * rw && bh / d >= 2.0 * rh) {
                denom = d;
            }
        }
    }
    /* A training crop decodes only its own pixels (JPEG); validation needs the whole image. */
    image_buf img;
    double box[4] = {y0, x0, bh, bw};
    rc = image_decode_box(c->dec, data, size, kind, h, w, ic->channels, denom,
                          ic->mode == HDMLP_IMAGE_TRAIN, box, &img);
    if (rc != HDMLP_OK) {
        return rc;
    }
    *dct = denom > 1;
    /* uint8 NHWC: resampled straight into the batch, flipped by the resampling itself. */
    const int direct = ic->dtype == HDMLP_DTYPE_UINT8 && ic->layout == HDMLP_LAYOUT_NHWC;
    rc = grow(&c->scratch, &c->scratch_cap, image_resize_scratch(&img, ic->height, ic->width));
    if (rc == HDMLP_OK && !direct) {
        rc = grow(&c->tmp, &c->tmp_cap, (size_t)ic->height * ic->width * ic->channels);
    }
    if (rc == HDMLP_OK) {
        uint8_t *dst = direct ? out : c->tmp;
        rc = image_resize_region(&img, box[0], box[1], box[2], box[3], rh, rw, top, left, dst,
                                 ic->height, ic->width, direct && flip, c->scratch);
        if (rc == HDMLP_OK && !direct) {
            image_store(ic, dst, flip, out);
        }
    }
    image_buf_free(&img);
    return rc;
}

/* Moves the split one thread after each window, from what it measured (lock held). */
static void balance_tick(struct hdmlp_loader *ld, image_pipe *p, uint64_t now)
{
    const uint64_t span = now - p->win_start;
    if (span < BALANCE_WINDOW_NS) {
        return;
    }
    ld->st.decode_rate = p->win_decoded * 1000000000ull / span;
    ld->st.read_rate = p->win_read * 1000000000ull / span;
    if (p->automatic) {
        image_split s = {p->io_limit, p->decode_active, p->io_max, p->n_threads, p->verdict};
        const int moved = image_balance(&s, p->win_idle_ns, p->win_full_ns, span);
        p->io_limit = s.io;
        p->decode_active = s.decode;
        p->verdict = s.verdict;
        if (moved != 0) {
            ld->st.balance_moves++;
            pthread_cond_broadcast(moved < 0 ? &p->io_cv : &p->work_cv);
        }
        ld->st.io_threads_active = p->io_limit;
        ld->st.decode_threads_active = p->decode_active;
    }
    p->win_start = now;
    p->win_decoded = p->win_read = p->win_idle_ns = p->win_full_ns = 0;
}

/* The first queued batch with an unclaimed sample (lock held). */
static image_out *claimable(image_pipe *p)
{
    for (image_out *o = p->head; o != NULL; o = o->next) {
        if (o->claimed < o->n_raw) {
            return o;
        }
    }
    return NULL;
}

static char *dup_detail(const char *s)
{
    char *d = hd_malloc(strlen(s) + 1);
    if (d != NULL) {
        strcpy(d, s);
    }
    return d;
}

static void *decode_main(void *arg)
{
    decode_thread *t = arg;
    image_pipe *p = t->p;
    struct hdmlp_loader *ld = t->ld;
    decode_ctx c = {NULL, NULL, NULL, 0, 0};
    const int crc = image_decoder_create(&c.dec);
    if (crc == HDMLP_OK) {
        image_decoder_set_fast(c.dec, p->ic.fast_decode);
    }
    pthread_mutex_lock(&ld->lock);
    for (;;) {
        if (p->stop) {
            break;
        }
        image_out *o = t->index < p->decode_active ? claimable(p) : NULL;
        if (o == NULL) {
            /* Idle for want of data only while the queue has room the I/O side has not
             * filled (not when the consumer is simply busy with what is queued). */
            const int starved =
                t->index < p->decode_active && p->depth < p->ic.prefetch && !p->raw_end;
            const uint64_t t0 = loader_now_ns();
            pthread_cond_wait(&p->work_cv, &ld->lock);
            if (starved) {
                p->win_idle_ns += loader_now_ns() - t0;
            }
            continue;
        }
        const uint32_t i = o->claimed++;
        ld_sample *s = o->batch->samples[i];
        const uint64_t epoch = o->batch->epoch, index = s->index;
        pthread_mutex_unlock(&ld->lock);

        const uint64_t t0 = loader_now_ns();
        int dct = 0;
        int rc = crc;
        const void *img = s->data;
        uint64_t img_size = s->size;
        if (rc == HDMLP_OK && p->field != FMT_NO_FIELD) { /* the image field's value */
            fmt_frec_value v;
            rc = fmt_frec_field(s->data, s->size, p->field, &v);
            if (rc == HDMLP_OK && v.state != FMT_VALUE_STORED) {
                hdmlp_field_info in;
                hdmlp_dataset_field(ld->ds, p->field, &in);
                rc = hd_err(HDMLP_E_CORRUPT, "no value of the image field %.*s",
                            (int)in.name_size, in.name);
            }
            img = v.data;
            img_size = v.size;
        }
        if (rc == HDMLP_OK) {
            rc = decode_one(p, &c, img, img_size, ld->cfg.seed, epoch, index,
                            o->buf + (size_t)i * p->img_bytes, &dct);
        }
        char *err = NULL;
        if (rc != HDMLP_OK) {
            hdmlp_sample_info info;
            char name[256] = "";
            if (hdmlp_dataset_sample_info(ld->ds, index, &info) == HDMLP_OK) {
                snprintf(name, sizeof(name), " (%.*s)",
                         (int)(info.key_size < 200 ? info.key_size : 200), info.key);
            }
            char detail[1400];
            snprintf(detail, sizeof(detail), "image: sample %llu%s of epoch %llu: %s",
                     (unsigned long long)index, name, (unsigned long long)epoch,
                     hdmlp_last_error());
            err = dup_detail(detail);
            if (rc != HDMLP_E_NOMEM) {
                rc = HDMLP_E_CORRUPT;
            }
        }
        /* The raw bytes are not needed any more: back to the budget now. A field record
         * decoded stays with the batch (its other fields pass through). */
        const int keep = rc == HDMLP_OK && p->field != FMT_NO_FIELD;
        if (!keep) {
            sample_data_free(s);
        }
        const uint64_t now = loader_now_ns();

        pthread_mutex_lock(&ld->lock);
        if (!keep) {
            ld->charged -= loader_sample_charge(s->size);
            s->size = 0;
        }
        o->result[i] = rc;
        o->err[i] = err;
        o->done++;
        ld->st.decode_busy_ns += now - t0;
        if (rc == HDMLP_OK) {
            ld->st.images_decoded++;
            ld->st.dct_scaled += (uint64_t)dct;
        } else {
            ld->st.decode_failures++;
        }
        p->win_decoded++;
        if (o->done == o->n_raw) {
            pthread_cond_broadcast(&ld->ready_cv);
        }
        pthread_cond_broadcast(&ld->ready_cv); /* memory was released */
        balance_tick(ld, p, now);
    }
    pthread_mutex_unlock(&ld->lock);
    image_decoder_free(c.dec);
    hd_free(c.scratch);
    hd_free(c.tmp);
    return NULL;
}

void image_out_free(image_out *o)
{
    if (o == NULL) {
        return;
    }
    for (uint32_t i = 0; o->err != NULL && i < o->n_raw; i++) {
        hd_free(o->err[i]);
    }
    hd_free(o->err);
    hd_free(o->result);
    hd_free(o->raw_size);
    hd_free(o->labels);
    hd_free(o->indices);
    hd_free(o->records);
    if (o->buf_free != NULL) {
        if (o->buf != NULL) {
            o->buf_free(o->buf_arg, o->buf, o->buf_bytes);
        }
    } else {
        hd_free(o->buf);
    }
    hd_free(o);
}

/* Frees the pipeline and the buffers pooled in it (lock not held: the user's free may
 * take its time). */
static void pipe_free(image_pipe *p)
{
    for (uint32_t i = 0; i < p->pooled; i++) {
        if (p->ic.free != NULL) {
            p->ic.free(p->ic.alloc_arg, p->pool[i], p->full_bytes);
        } else {
            hd_free(p->pool[i]);
        }
    }
    hd_free(p->pool);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->io_cv);
    hd_free(p->threads);
    hd_free(p);
}

int image_field_of(const hdmlp_dataset *ds, const struct hdmlp_image_config *ic,
                   uint32_t *field)
{
    *field = FMT_NO_FIELD;
    const char *const want = ic->field;
    if (!hdmlp_dataset_field_records(ds)) {
        return want[0] == '\0' ? HDMLP_OK
                               : hd_err(HDMLP_E_INVAL,
                                        "image field %s: this dataset's samples are not field "
                                        "records (each is the image decoded): leave it unset",
                                        want);
    }
    const uint32_t nf = hdmlp_dataset_field_count(ds);
    uint32_t found = 0;
    for (uint32_t f = 0; f < nf; f++) {
        hdmlp_field_info in;
        hdmlp_dataset_field(ds, f, &in);
        const int named = want[0] != '\0' && in.name_size == strlen(want) &&
                          memcmp(in.name, want, in.name_size) == 0;
        if (named && in.type != HDMLP_FIELD_IMAGE && in.type != HDMLP_FIELD_BYTES) {
            return hd_err(HDMLP_E_INVAL, "image field %s: of type %s (image or bytes decode)",
                          want, fmt_field_type_name(in.type));
        }
        if (named || (want[0] == '\0' && in.type == HDMLP_FIELD_IMAGE)) {
            *field = f;
            found++;
        }
    }
    if (found == 1) {
        return HDMLP_OK;
    }
    *field = FMT_NO_FIELD;
    if (want[0] != '\0') {
        return hd_err(HDMLP_E_INVAL, "image field %s: the dataset has no such field", want);
    }
    return hd_err(HDMLP_E_INVAL,
                  "image pipeline: the dataset's samples have %u fields of type image, not "
                  "one: name the field to decode (hdmlp_image_config_set_field)",
                  found);
}

int image_pipe_start(struct hdmlp_loader *ld)
{
    const struct hdmlp_image_config *ic = ld->cfg.image;
    uint32_t field;
    const int frc = image_field_of(ld->ds, ic, &field);
    if (frc != HDMLP_OK) {
        return frc;
    }
    image_pipe *p = hd_calloc(1, sizeof(*p));
    if (p == NULL) {
        return hd_err(HDMLP_E_NOMEM, "image: out of memory for the pipeline");
    }
    p->ic = *ic;
    p->field = field;
    p->img_bytes = image_out_bytes(ic);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->io_cv, NULL);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) {
        cpus = 1;
    }
    if (cpus > 64) {
        cpus = 64;
    }
    p->io_max = ld->n_workers;
    if (ic->decode_threads == 0) {
        p->automatic = 1;
        p->n_threads = (uint32_t)cpus;
        p->total = p->n_threads + 1;
        p->io_limit = 1;
        p->decode_active = p->total - p->io_limit;
    } else {
        p->n_threads = ic->decode_threads;
        p->decode_active = p->n_threads;
        p->io_limit = 0;
    }
    p->threads = hd_calloc(p->n_threads, sizeof(*p->threads));
    p->pool_cap = ic->prefetch + 2;
    p->pool = hd_calloc(p->pool_cap, sizeof(*p->pool));
    p->full_bytes = p->img_bytes * ld->cfg.batch;
    if (p->threads == NULL || p->pool == NULL) {
        pipe_free(p);
        return hd_err(HDMLP_E_NOMEM, "image: out of memory for the decode threads");
    }
    /* Output buffers: those decoded ahead and two the consumer may hold. Sizing set them
     * (and the raw batches queued for decoding) apart from the rest of the budget
     * (budget_images); the budget's owner moves their room from planning to the image
     * reserve, and image_charged counts them against it (image_pooled the released ones
     * kept for reuse). The I/O threads already run: the budget and the pipeline change under
     * the lock. */
    const uint64_t reserve = p->img_bytes * ld->cfg.batch * (ic->prefetch + 2);
    pthread_mutex_lock(&ld->lock);
    const int rc = budget_reserve(&ld->budget, BUDGET_IMAGES, reserve);
    if (rc != HDMLP_OK) {
        pthread_mutex_unlock(&ld->lock);
        pipe_free(p);
        return hd_err_wrap(rc,
                           "image: %u batches of %u images of %u x %u x %u: ", ic->prefetch + 2,
                           ld->cfg.batch, ic->height, ic->width, ic->channels);
    }
    p->reserve = reserve;
    ld->st.io_threads_active = p->io_limit ? p->io_limit : p->io_max;
    ld->st.decode_threads_active = p->decode_active;
    p->win_start = loader_now_ns();
    /* Where a saved state stands until the first decoded batch goes out (after resume). */
    p->handed_epoch = ld->deliver_epoch;
    p->handed_pos = ld->deliver_pos;
    ld->pipe = p;
    pthread_mutex_unlock(&ld->lock);
    for (uint32_t i = 0; i < p->n_threads; i++) {
        decode_thread *t = &p->threads[i];
        *t = (decode_thread){p, ld, i, 0, 0};
        if (pthread_create(&t->thread, NULL, decode_main, t) != 0) {
            return hd_err(HDMLP_E_NOMEM, "image: cannot start a decode thread");
        }
        t->started = 1;
    }
    return HDMLP_OK;
}

/* Drops a queued batch the consumer never received (lock held; ld->refs stays above 0). */
static void drop_queued(struct hdmlp_loader *ld, image_out *o)
{
    hdmlp_batch *b = o->batch;
    for (size_t i = 0; i < b->n; i++) {
        ld->charged -= loader_sample_charge(b->samples[i]->size);
        sample_free(b->samples[i]);
    }
    ld->image_charged -= o->charge;
    ld->outstanding_batches--;
    ld->refs--;
    image_out_free(o);
    hd_free(b);
}

void image_pipe_stop(struct hdmlp_loader *ld)
{
    image_pipe *p = ld->pipe;
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&ld->lock);
    p->stop = 1;
    p->io_limit = 0;
    pthread_cond_broadcast(&p->work_cv);
    pthread_cond_broadcast(&p->io_cv);
    pthread_mutex_unlock(&ld->lock);
    for (uint32_t i = 0; p->threads != NULL && i < p->n_threads; i++) {
        if (p->threads[i].started) {
            pthread_join(p->threads[i].thread, NULL);
        }
    }
    pthread_mutex_lock(&ld->lock);
    while (p->head != NULL) {
        image_out *o = p->head;
        p->head = o->next;
        drop_queued(ld, o);
    }
    /* Batches still held free their buffers as they are released; the pooled ones go now. */
    ld->image_pooled = 0;
    ld->pipe = NULL;
    pthread_mutex_unlock(&ld->lock);
    pipe_free(p);
}

int image_pipe_io_allowed(struct hdmlp_loader *ld, uint32_t i)
{
    const image_pipe *p = ld->pipe;
    return p == NULL || p->io_limit == 0 || i < p->io_limit;
}

void image_pipe_io_done(struct hdmlp_loader *ld, uint32_t n)
{
    if (ld->pipe != NULL) {
        ld->pipe->win_read += n;
    }
}

void image_pipe_io_wait(struct hdmlp_loader *ld)
{
    pthread_cond_wait(&ld->pipe->io_cv, &ld->lock);
}

int image_pipe_position(const struct hdmlp_loader *ld, uint64_t *epoch, uint64_t *pos)
{
    const image_pipe *p = ld->pipe;
    if (p == NULL) {
        return 0;
    }
    *epoch = p->handed_epoch;
    *pos = p->handed_pos;
    return 1;
}
