/* The chunk pipeline: worker threads build whole chunks (read samples in packed order,
 * compress, checksum, chunk header); the calling thread appends them in order to the
 * segment files; a prefetch thread asks the kernel to read the samples of the next chunks
 * ahead (posix_fadvise WILLNEED), which gives the random reads a deep queue.
 *
 * The items come in packed order from pack_packed.c: a worker claiming chunk c copies its
 * samples' items and keys into the chunk's slot (under the lock: claims are in order, and
 * one reader walks the positions); the prefetch thread walks them with a reader of its
 * own. A chunk's items, keys and sample records live in its slot until the writer has
 * appended its table and key block; nothing per sample outlives its chunk.
 *
 * Memory: at most `window` (2 × threads) chunks are in flight, and no more than
 * INFLIGHT_BUDGET bytes of chunk buffers unless a single chunk is larger (it then goes
 * alone); idle buffers kept for reuse add at most POOL_BYTES. Workers wait on condition
 * variables; nothing spins or sleeps. */
#include "pack_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define INFLIGHT_BUDGET (256ull << 20)
#define POOL_BYTES (64ull << 20) /* idle chunk buffers kept for reuse */
#define PREFETCH_BYTES (32ull << 20)
#define PREFETCH_SAMPLES 4096u
#define ERRMSG_MAX 1024
#define WARN_MAX 20 /* image preparation warnings passed on; the rest are counted */

typedef struct wr_slot {
    pack_buf warn;    /* image preparation warnings of its samples, '\0'-terminated each */
    pack_item *items; /* its samples' items (key_off into keys) */
    fmt_sample *recs; /* its samples' records (key_off into keys) */
    uint8_t *vals;    /* WebDataset fields: its samples' value records (F each), or NULL */
    pack_buf keys;    /* its samples' keys back to back */
    uint8_t *buf;
    uint64_t cap; /* capacity of buf */
    uint64_t len; /* chunk length (header + payload) */
    uint64_t est; /* bytes reserved from the budget */
    uint64_t raw; /* raw bytes of its samples */
    uint32_t n;   /* samples */
    int ready;
} wr_slot;

typedef struct wr_state {
    pack_write_args *a;
    uint32_t k;
    uint64_t n_chunks;
    pthread_mutex_t mu;
    pthread_cond_t cv_work; /* workers: window or budget */
    pthread_cond_t cv_done; /* writer: a chunk became ready, or stop */
    pthread_cond_t cv_pf;   /* prefetcher: workers consumed, or stop */
    uint64_t next_claim;
    uint64_t next_est; /* budget estimate of chunk next_claim */
    uint64_t next_write;
    uint64_t window;
    uint64_t inflight;
    wr_slot *slots;
    uint8_t **pool; /* recycled chunk buffers (at most `window`), with their capacities */
    uint64_t *pool_cap;
    uint64_t pool_n;
    uint64_t pool_bytes;
    int stop;
    int err;
    char errmsg[ERRMSG_MAX];
    /* prefetch */
    uint64_t pf_pos, pf_bytes; /* next position to prefetch; raw bytes before it */
    uint64_t consumed_samples, consumed_bytes;
    int pf_waiting;
    uint64_t warned;             /* image preparation warnings seen by the writer */
    pack_packed_reader claim_rd; /* items of the chunks being claimed (under mu) */
} wr_state;

static uint64_t chunk_raw(const wr_state *s, uint64_t c, uint32_t *n)
{
    const pack_write_args *const a = s->a;
    const uint64_t first = c * s->k;
    const uint64_t end = first + s->k < a->n ? first + s->k : a->n;
    *n = (uint32_t)(end - first);
    return a->chunk_raw[c];
}

static uint64_t chunk_est(const wr_state *s, uint64_t c)
{
    uint32_t n;
    if (c >= s->n_chunks) {
        return 0;
    }
    return fmt_align_up(FMT_CHUNK_HEADER_LEN + chunk_raw(s, c, &n));
}

/* A chunk buffer of at least `need` bytes: a recycled one if it is big enough (reusing
 * buffers saves page faults), else a new one. */
static uint8_t *pool_get(wr_state *s, uint64_t need, uint64_t *cap)
{
    uint8_t *buf = NULL;
    pthread_mutex_lock(&s->mu);
    for (uint64_t i = s->pool_n; i > 0; i--) {
        if (s->pool_cap[i - 1] >= need) {
            buf = s->pool[i - 1];
            *cap = s->pool_cap[i - 1];
            s->pool_bytes -= *cap;
            s->pool[i - 1] = s->pool[s->pool_n - 1];
            s->pool_cap[i - 1] = s->pool_cap[s->pool_n - 1];
            s->pool_n--;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (!buf) {
        buf = hd_malloc((size_t)need);
        *cap = need;
    }
    return buf;
}

/* Returns a buffer to the pool; frees it if the pool is full. */
static void pool_put(wr_state *s, uint8_t *buf, uint64_t cap)
{
    if (!buf) {
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (s->pool_n < s->window && s->pool_bytes + cap <= POOL_BYTES) {
        s->pool_bytes += cap;
        s->pool[s->pool_n] = buf;
        s->pool_cap[s->pool_n++] = cap;
        buf = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    hd_free(buf);
}

/* Records the first error (with the calling thread's detail) and stops everyone.
 * Called with the lock held. */
static void fail_locked(wr_state *s, int code)
{
    if (!s->err) {
        s->err = code;
        snprintf(s->errmsg, sizeof(s->errmsg), "%s", hdmlp_last_error());
    }
    s->stop = 1;
    pthread_cond_broadcast(&s->cv_work);
    pthread_cond_broadcast(&s->cv_done);
    pthread_cond_broadcast(&s->cv_pf);
}

static void fail(wr_state *s, int code)
{
    pthread_mutex_lock(&s->mu);
    fail_locked(s, code);
    pthread_mutex_unlock(&s->mu);
}

typedef struct worker {
    wr_state *s;
    pthread_t tid;
    pack_image_ctx *img; /* image preparation, NULL when off */
    pack_image_totals img_totals;
    pack_buf *warn; /* of the chunk being built */
    wr_slot *slot;  /* the chunk being built: its records and keys */
    fmt_encoder *enc;
    uint8_t *scratch;
    size_t scratch_cap;
    uint8_t *item; /* WebDataset fields: a sample's spilled bytes */
    uint64_t item_cap;
    pack_reader r;
} worker;

static void consumed(wr_state *s, uint64_t bytes)
{
    pthread_mutex_lock(&s->mu);
    s->consumed_samples++;
    s->consumed_bytes += bytes;
    /* Wake the prefetcher once it is only half its window ahead, not on every sample. */
    if (s->pf_waiting && s->pf_pos <= s->consumed_samples + PREFETCH_SAMPLES / 2 &&
        s->pf_bytes <= s->consumed_bytes + PREFETCH_BYTES / 2) {
        s->pf_waiting = 0;
        pthread_cond_signal(&s->cv_pf);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Grows a chunk buffer to hold `end` bytes and its padding (re-encoded images can come out
 * longer than the bytes the buffer was sized for). */
static int ensure_cap(uint8_t **buf, uint64_t *cap, uint64_t end)
{
    const uint64_t need = fmt_align_up(end);
    if (need <= *cap) {
        return HDMLP_OK;
    }
    uint8_t *const nb = need <= SIZE_MAX ? hd_realloc(*buf, (size_t)need) : NULL;
    if (!nb) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for a chunk of %llu bytes",
                      (unsigned long long)need);
    }
    *buf = nb;
    *cap = need;
    return HDMLP_OK;
}

/* Image preparation of the sample at *buf + off (it->size bytes): re-encoded bytes replace
 * them (the chunk buffer grows if they are longer); *size is the sample's new length. A
 * sample that cannot be prepared stays as it is, with a warning for the writer to pass on. */
static int prepare_image(worker *w, const pack_item *it, const uint8_t *key, uint8_t **buf,
                         uint64_t *cap, uint64_t off, uint64_t *size)
{
    const uint8_t *img = NULL;
    size_t img_len = 0;
    const int r = pack_image_prepare(w->img, *buf + off, (size_t)it->size, &img, &img_len);
    if (r < 0) {
        char msg[512];
        const int len = snprintf(msg, sizeof(msg), "%.*s: %s; stored as it is",
                                 (int)(it->key_len < 256 ? it->key_len : 256),
                                 (const char *)key, pack_image_why(w->img));
        w->img_totals.kept++;
        return pack_buf_append(w->warn, msg,
                               len < 0                         ? 1
                               : (size_t)len + 1 > sizeof(msg) ? sizeof(msg)
                                                               : (size_t)len + 1);
    }
    if (r == 0) {
        return HDMLP_OK;
    }
    const int rc = ensure_cap(buf, cap, off + img_len);
    if (rc != HDMLP_OK) {
        return rc;
    }
    memcpy(*buf + off, img, img_len);
    w->img_totals.resized++;
    w->img_totals.bytes_in += it->size;
    w->img_totals.bytes_out += img_len;
    *size = img_len;
    return HDMLP_OK;
}

/* Reads, prepares, encodes and checksums the sample in slot t of the chunk being built
 * into *buf + *off. */
/* Compresses the raw bytes at dst in place when that pays (the configured mode; not
 * media that is compressed already; at least 3 % smaller): *stored and *codec. */
static int store_value(worker *w, uint8_t *dst, uint64_t raw, const pack_item *it,
                       const uint8_t *key, uint64_t *stored, uint32_t *codec)
{
    *stored = raw;
    *codec = FMT_CODEC_NONE;
    const pack_compress mode = w->s->a->ctx->o->compress;
    if (!w->enc || raw == 0 ||
        (mode == PACK_COMPRESS_AUTO && pack_is_compressed_media(dst, raw))) {
        return HDMLP_OK;
    }
    size_t out_len = 0;
    uint32_t cc = FMT_CODEC_NONE;
    const int rc = fmt_encode(w->enc, dst, raw, &w->scratch, &w->scratch_cap, &out_len, &cc);
    if (rc != HDMLP_OK) {
        return hd_err_wrap(rc, "compressing %.*s: ", (int)it->key_len, (const char *)key);
    }
    if ((uint64_t)out_len * 100 <= raw * 97) { /* shrinks by at least 3 % */
        memcpy(dst, w->scratch, out_len);
        *stored = out_len;
        *codec = cc;
    }
    return HDMLP_OK;
}

static int finish_sample(worker *w, uint8_t **buf, uint64_t *cap, uint64_t *off, uint32_t t,
                         uint64_t raw);

/* Sample t's record (its key, label, place and sizes) for the `stored` bytes at *off, which
 * then moves past them. */
static fmt_sample *put_record(worker *w, uint32_t t, uint64_t *off, uint64_t raw,
                              uint64_t stored)
{
    const pack_item *const it = &w->slot->items[t];
    fmt_sample *const rec = &w->slot->recs[t];
    rec->key_off = (uint32_t)it->key_off;
    rec->key_len = it->key_len;
    rec->label = it->label;
    rec->offset = *off;
    rec->raw_len = raw;
    rec->stored_len = stored;
    *off += stored;
    return rec;
}

/* A sample with fields (its values then their trailer, as spilled: pack_fields.c): when
 * plain, its one value's bytes; else each value as the dataset stores it (pack_fields_value),
 * in the dataset's field order, its value record in the slot's vals (absent fields stay zero
 * records but for the label's). Returns its raw bytes in *raw; sets *plain. */
static int field_values(worker *w, uint8_t **buf, uint64_t *cap, uint64_t off, uint32_t t,
                        uint64_t *raw, uint64_t *stored, int *plain)
{
    const pack_fields *f = &w->s->a->ctx->fields;
    const pack_item *const it = &w->slot->items[t];
    const uint8_t *const key = w->slot->keys.p + it->key_off;
    if (it->size > w->item_cap) {
        uint8_t *nb = hd_realloc(w->item, (size_t)it->size);
        if (nb == NULL) {
            return hd_err(HDMLP_E_NOMEM, "out of memory for sample %.*s", (int)it->key_len,
                          (const char *)key);
        }
        w->item = nb;
        w->item_cap = it->size;
    }
    int rc = pack_read_item(&w->r, it, key, w->item, it->size);
    pack_field_val v[PACK_MAX_FIELDS];
    uint32_t n = 0;
    if (rc == HDMLP_OK) {
        rc = pack_fields_parse(w->item, it->size, v, &n);
    }
    if (rc != HDMLP_OK) {
        return hd_err_wrap(rc, "%.*s: ", (int)it->key_len, (const char *)key);
    }
    consumed(w->s, it->size);
    *plain = f->plain;
    *raw = *stored = 0;
    if (f->plain) { /* compressed, and prepared as an image, by the caller */
        rc = n == 1 ? ensure_cap(buf, cap, off + v[0].size)
                    : hd_err(HDMLP_E_STATE, "%.*s: %u values", (int)it->key_len,
                             (const char *)key, n);
        if (rc == HDMLP_OK) {
            memcpy(*buf + off, w->item, (size_t)v[0].size);
            *raw = *stored = v[0].size;
        }
        return rc;
    }
    uint8_t *const recs = w->slot->vals + (size_t)t * f->n_final * FMT_VALUE_REC_LEN;
    if (f->label_final != FMT_NO_FIELD) {
        const fmt_value label = fmt_value_int64(it->label);
        fmt_value_encode(recs + (size_t)f->label_final * FMT_VALUE_REC_LEN, &label);
    }
    /* Values in the dataset's field order (the spilled order is the input's). */
    uint64_t at[PACK_MAX_FIELDS];
    for (uint32_t i = 0; i < n; i++) {
        at[i] = i == 0 ? 0 : at[i - 1] + v[i - 1].size;
    }
    for (uint32_t j = 0; j < f->n_final; j++) {
        for (uint32_t i = 0; i < n; i++) {
            if (v[i].field >= f->n || f->final_of[v[i].field] != j) {
                continue;
            }
            rc = ensure_cap(buf, cap, off + *stored + v[i].size + PACK_FIELD_VALUE_EXTRA);
            if (rc != HDMLP_OK) {
                return rc;
            }
            uint8_t *const dst = *buf + off + *stored;
            uint64_t len = 0;
            fmt_value val;
            rc = pack_fields_value(f, v[i].field, w->item + at[i], v[i].size, dst, &len, &val);
            if (rc != HDMLP_OK) {
                return hd_err_wrap(rc, "sample %.*s: ", (int)it->key_len, (const char *)key);
            }
            if (!fmt_field_scalar(f->type[v[i].field])) {
                uint64_t st;
                uint32_t codec;
                rc = store_value(w, dst, len, it, key, &st, &codec);
                if (rc != HDMLP_OK) {
                    return rc;
                }
                val = fmt_value_stored(st, len, fmt_checksum(dst, st), codec);
                *raw += len;
                *stored += st;
            }
            fmt_value_encode(recs + (size_t)j * FMT_VALUE_REC_LEN, &val);
            break;
        }
    }
    return HDMLP_OK;
}

static int build_sample(worker *w, uint8_t **buf, uint64_t *cap, uint64_t *off, uint32_t t)
{
    if (pack_has_fields(w->s->a->ctx)) {
        uint64_t raw = 0, stored = 0;
        int plain = 0;
        const int rc = field_values(w, buf, cap, *off, t, &raw, &stored, &plain);
        if (rc != HDMLP_OK || plain) {
            return rc != HDMLP_OK ? rc : finish_sample(w, buf, cap, off, t, raw);
        }
        put_record(w, t, off, raw, stored);
        return HDMLP_OK;
    }
    const pack_item *const it = &w->slot->items[t];
    const uint8_t *const key = w->slot->keys.p + it->key_off;
    int rc = ensure_cap(buf, cap, *off + it->size);
    if (rc == HDMLP_OK) {
        rc = pack_read_item(&w->r, it, key, *buf + *off, it->size);
    }
    if (rc != HDMLP_OK) {
        return rc;
    }
    consumed(w->s, it->size);
    return finish_sample(w, buf, cap, off, t, it->size);
}

/* A sample whose raw bytes are at *buf + *off: prepared as an image (when on), compressed,
 * checksummed, its record made. */
static int finish_sample(worker *w, uint8_t **buf, uint64_t *cap, uint64_t *off, uint32_t t,
                         uint64_t raw)
{
    const pack_item *const it = &w->slot->items[t];
    const uint8_t *const key = w->slot->keys.p + it->key_off;
    int rc;
    if (w->img) {
        rc = prepare_image(w, it, key, buf, cap, *off, &raw);
        if (rc != HDMLP_OK) {
            return rc;
        }
    }
    uint8_t *const dst = *buf + *off;
    uint64_t stored;
    uint32_t codec;
    rc = store_value(w, dst, raw, it, key, &stored, &codec);
    if (rc != HDMLP_OK) {
        return rc;
    }
    fmt_sample *const rec = put_record(w, t, off, raw, stored);
    rec->checksum = fmt_checksum(dst, stored);
    rec->codec = codec;
    return HDMLP_OK;
}

static int build_chunk(worker *w, uint64_t c, wr_slot *out)
{
    wr_state *const s = w->s;
    const pack_write_args *const a = s->a;
    uint32_t n;
    const uint64_t raw = chunk_raw(s, c, &n);
    const uint64_t est = fmt_align_up(FMT_CHUNK_HEADER_LEN + raw);
    uint64_t cap = 0;
    uint8_t *buf = est <= SIZE_MAX ? pool_get(s, est, &cap) : NULL;
    if (!buf) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for chunk %llu (%llu bytes)",
                      (unsigned long long)c, (unsigned long long)est);
    }
    uint64_t off = FMT_CHUNK_HEADER_LEN;
    w->warn = &out->warn;
    w->slot = out; /* its items and keys are there (claim_items) */
    out->recs = hd_calloc(n, sizeof(fmt_sample));
    const pack_fields *const f = &a->ctx->fields;
    const int fielded = pack_has_fields(a->ctx) && !f->plain;
    out->vals = fielded ? hd_calloc((size_t)n * f->n_final, FMT_VALUE_REC_LEN) : NULL;
    if (!out->recs || (fielded && !out->vals)) {
        pool_put(s, buf, cap);
        return hd_err(HDMLP_E_NOMEM, "out of memory for chunk %llu", (unsigned long long)c);
    }
    for (uint32_t t = 0; t < n; t++) {
        int rc = build_sample(w, &buf, &cap, &off, t);
        if (rc == HDMLP_OK && pack_cancelled(a->ctx->o)) {
            rc = hd_err(HDMLP_E_INTERRUPTED, "interrupted");
        }
        if (rc != HDMLP_OK) {
            pool_put(s, buf, cap);
            return rc;
        }
    }
    const uint64_t hsum =
        fmt_chunk_header_encode(buf, a->dataset_id, c, n, off - FMT_CHUNK_HEADER_LEN);
    memset(buf + off, 0, (size_t)(fmt_align_up(off) - off));
    fmt_chunk *const rec = &a->chunks[c];
    rec->length = off;
    rec->n_samples = n;
    rec->header_checksum = hsum;
    out->buf = buf;
    out->cap = cap;
    out->len = off;
    out->est = est;
    out->raw = raw;
    out->n = n;
    return HDMLP_OK;
}

/* Copies chunk c's items and keys into its slot, from the claim reader (with the lock
 * held: claims are in order). */
static int claim_items(wr_state *s, uint64_t c, wr_slot *slot)
{
    const uint64_t first = c * s->k;
    const uint64_t end = first + s->k < s->a->n ? first + s->k : s->a->n;
    slot->items = hd_malloc((size_t)(end - first) * sizeof(pack_item));
    if (!slot->items || pack_buf_reserve(&slot->keys, 1) != HDMLP_OK) {
        return hd_err(HDMLP_E_NOMEM, "out of memory for chunk %llu", (unsigned long long)c);
    }
    for (uint64_t p = first; p < end; p++) {
        pack_item it;
        const uint8_t *key = NULL;
        int rc = pack_packed_at(&s->claim_rd, p, &it, &key);
        if (rc == HDMLP_OK) {
            const uint64_t at = slot->keys.len;
            rc = pack_buf_append(&slot->keys, key, it.key_len);
            it.key_off = at;
        }
        if (rc != HDMLP_OK) {
            return rc;
        }
        slot->items[p - first] = it;
    }
    return HDMLP_OK;
}

static void *worker_main(void *arg)
{
    worker *const w = arg;
    wr_state *const s = w->s;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && s->next_claim < s->n_chunks &&
               !(s->next_claim < s->next_write + s->window &&
                 (s->inflight == 0 || s->inflight + s->next_est <= INFLIGHT_BUDGET))) {
            pthread_cond_wait(&s->cv_work, &s->mu);
        }
        if (s->stop || s->next_claim >= s->n_chunks) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        const uint64_t c = s->next_claim++;
        s->inflight += s->next_est;
        s->next_est = chunk_est(s, s->next_claim);
        wr_slot slot = {0};
        int rc = claim_items(s, c, &slot);
        pthread_mutex_unlock(&s->mu);

        if (rc == HDMLP_OK) {
            rc = build_chunk(w, c, &slot);
        }
        pthread_mutex_lock(&s->mu);
        if (rc != HDMLP_OK) {
            pack_buf_free(&slot.warn);
            pack_buf_free(&slot.keys);
            hd_free(slot.recs);
            hd_free(slot.vals);
            hd_free(slot.items);
            fail_locked(s, rc);
            pthread_mutex_unlock(&s->mu);
            break;
        }
        slot.ready = 1;
        s->slots[c % s->window] = slot;
        pthread_cond_signal(&s->cv_done);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

static void *prefetch_main(void *arg)
{
    wr_state *const s = arg;
    const pack_write_args *const a = s->a;
    pack_reader r;
    pack_reader_init(&r, a->ctx);
    pack_packed_reader pr;
    pack_packed_reader_init(&pr, a->ctx);
    pthread_mutex_lock(&s->mu);
    while (!s->stop && s->pf_pos < a->n) {
        if (s->pf_bytes >= s->consumed_bytes + PREFETCH_BYTES ||
            s->pf_pos >= s->consumed_samples + PREFETCH_SAMPLES) {
            s->pf_waiting = 1;
            while (s->pf_waiting && !s->stop) {
                pthread_cond_wait(&s->cv_pf, &s->mu);
            }
            s->pf_waiting = 0;
            continue;
        }
        const uint64_t p = s->pf_pos;
        const int behind = p < s->consumed_samples; /* workers are past it (roughly) */
        pthread_mutex_unlock(&s->mu);
        pack_item item = {0};
        const pack_item *const it = &item;
        const uint8_t *key = NULL;
        /* read errors: the worker reading the sample reports them */
        if (pack_packed_at(&pr, p, &item, &key) == HDMLP_OK && !behind) {
            const uint64_t len = it->size < PREFETCH_BYTES ? it->size : PREFETCH_BYTES;
            pack_prefetch_item(&r, it, key, len);
        }
        pthread_mutex_lock(&s->mu);
        s->pf_pos = p + 1;
        s->pf_bytes += it->size;
    }
    pthread_mutex_unlock(&s->mu);
    pack_reader_free(&r);
    pack_packed_reader_free(&pr);
    return NULL;
}

/* The writer: appends chunks in order. Runs on the calling thread. */
static void write_loop(wr_state *s)
{
    pack_write_args *const a = s->a;
    uint64_t samples_done = 0, bytes_done = 0;
    for (uint64_t c = 0; c < s->n_chunks; c++) {
        pthread_mutex_lock(&s->mu);
        wr_slot *const slot = &s->slots[c % s->window];
        while (!s->stop && !slot->ready) {
            pthread_cond_wait(&s->cv_done, &s->mu);
        }
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            return;
        }
        const wr_slot mine = *slot;
        memset(slot, 0, sizeof(*slot));
        pthread_mutex_unlock(&s->mu);

        for (size_t at = 0; at < mine.warn.len;
             at += strlen((const char *)mine.warn.p + at) + 1) {
            if (s->warned++ < WARN_MAX) {
                pack_warn(a->ctx->o, "%s", (const char *)mine.warn.p + at);
            }
        }
        wr_slot tmp = mine;
        pack_buf_free(&tmp.warn);
        int rc = pack_segw_append(a->segw, mine.buf, mine.len, &a->chunks[c]);
        if (rc == HDMLP_OK) {
            rc = pack_tablew_chunk(a->tablew, mine.recs, mine.vals,
                                   mine.vals ? a->ctx->fields.n_final : 0, mine.keys.p, mine.n,
                                   &a->chunks[c]);
        }
        if (rc == HDMLP_OK) {
            a->raw_bytes += a->chunks[c].raw_bytes;
            for (uint32_t t = 0; t < mine.n; t++) {
                a->stored_bytes += mine.recs[t].stored_len;
                a->codec_count[mine.recs[t].codec < 3 ? mine.recs[t].codec : 0]++;
            }
        }
        hd_free(tmp.recs);
        hd_free(tmp.vals);
        hd_free(tmp.items);
        pack_buf_free(&tmp.keys);
        pool_put(s, mine.buf, mine.cap);
        pthread_mutex_lock(&s->mu);
        s->inflight -= mine.est;
        s->next_write = c + 1;
        pthread_cond_broadcast(&s->cv_work);
        if (rc != HDMLP_OK) {
            fail_locked(s, rc);
        } else if (pack_cancelled(a->ctx->o)) {
            fail_locked(s, hd_err(HDMLP_E_INTERRUPTED, "interrupted"));
        }
        const int stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop) {
            return;
        }
        samples_done += mine.n;
        bytes_done += mine.raw;
        pack_report(a->ctx->o, PACK_PHASE_WRITE, samples_done, a->n, bytes_done,
                    a->ctx->raw_bytes);
    }
}

int pack_write_chunks(pack_write_args *a)
{
    const pack_opts *const o = a->ctx->o;
    wr_state s;
    memset(&s, 0, sizeof(s));
    s.a = a;
    s.k = o->chunk_size;
    s.n_chunks = (a->n + s.k - 1) / s.k;
    s.window = 2ull * o->threads;
    s.slots = hd_calloc((size_t)s.window, sizeof(wr_slot));
    s.pool = hd_calloc((size_t)s.window, sizeof(uint8_t *));
    s.pool_cap = hd_calloc((size_t)s.window, sizeof(uint64_t));
    const unsigned nw = o->threads;
    worker *const ws = hd_calloc(nw, sizeof(worker));
    if (!s.slots || !ws || !s.pool || !s.pool_cap) {
        hd_free(s.pool);
        hd_free(s.pool_cap);
        hd_free(s.slots);
        hd_free(ws);
        return hd_err(HDMLP_E_NOMEM, "out of memory for %u workers", nw);
    }
    s.next_est = chunk_est(&s, 0);
    pack_packed_reader_init(&s.claim_rd, a->ctx);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv_work, NULL);
    pthread_cond_init(&s.cv_done, NULL);
    pthread_cond_init(&s.cv_pf, NULL);

    int rc = HDMLP_OK;
    unsigned started = 0;
    for (unsigned i = 0; i < nw && rc == HDMLP_OK; i++) {
        ws[i].s = &s;
        pack_reader_init(&ws[i].r, a->ctx);
        if (o->compress != PACK_COMPRESS_NONE) {
            rc = fmt_encoder_create(o->level, a->dict, a->dict_len, &ws[i].enc);
        }
        if (rc == HDMLP_OK && o->image_max_side > 0) {
            rc = pack_image_ctx_create(o->image_max_side, o->image_quality, &ws[i].img);
        }
    }
    pthread_t pf;
    int pf_started = 0;
    if (rc == HDMLP_OK) {
        pf_started = pthread_create(&pf, NULL, prefetch_main, &s) == 0;
        for (; started < nw; started++) {
            if (pthread_create(&ws[started].tid, NULL, worker_main, &ws[started]) != 0) {
                rc = hd_err(HDMLP_E_NOMEM, "cannot start worker thread %u", started);
                fail(&s, rc);
                break;
            }
        }
    }
    if (rc == HDMLP_OK) {
        write_loop(&s);
    } else {
        fail(&s, rc);
    }
    if (s.warned > WARN_MAX) {
        pack_warn(o, "%llu more images could not be prepared and are stored as they are",
                  (unsigned long long)(s.warned - WARN_MAX));
    }
    for (unsigned i = 0; i < started; i++) {
        pthread_join(ws[i].tid, NULL);
    }
    if (pf_started) {
        pthread_mutex_lock(&s.mu);
        s.stop = 1;
        pthread_cond_broadcast(&s.cv_pf);
        pthread_mutex_unlock(&s.mu);
        pthread_join(pf, NULL);
    }
    if (rc == HDMLP_OK && s.err) {
        rc = hd_err(s.err, "%s", s.errmsg);
    }
    for (uint64_t i = 0; i < s.window; i++) {
        hd_free(s.slots[i].buf);
        pack_buf_free(&s.slots[i].warn);
        pack_buf_free(&s.slots[i].keys);
        hd_free(s.slots[i].recs);
        hd_free(s.slots[i].vals);
        hd_free(s.slots[i].items);
    }
    for (uint64_t i = 0; i < s.pool_n; i++) {
        hd_free(s.pool[i]);
    }
    hd_free(s.pool);
    hd_free(s.pool_cap);
    for (unsigned i = 0; i < nw; i++) {
        if (ws[i].enc) {
            fmt_encoder_free(ws[i].enc);
        }
        pack_image_ctx_free(ws[i].img);
        a->img.resized += ws[i].img_totals.resized;
        a->img.bytes_in += ws[i].img_totals.bytes_in;
        a->img.bytes_out += ws[i].img_totals.bytes_out;
        a->img.kept += ws[i].img_totals.kept;
        hd_free(ws[i].scratch);
        hd_free(ws[i].item);
        pack_reader_free(&ws[i].r);
    }
    hd_free(ws);
    hd_free(s.slots);
    if (rc == HDMLP_OK && o->image_max_side > 0) { /* re-encoding changed raw lengths */
        a->ctx->raw_bytes = a->raw_bytes;
    }
    pack_packed_reader_free(&s.claim_rd);
    pthread_cond_destroy(&s.cv_pf);
    pthread_cond_destroy(&s.cv_done);
    pthread_cond_destroy(&s.cv_work);
    pthread_mutex_destroy(&s.mu);
    return rc;
}
