/*
 * libFuzzer target: the index decoder on arbitrary bytes.
 *
 * Each input is decoded as given, then again with its trailing checksum recomputed so the
 * fuzzer reaches the structural checks behind the checksum. A decoded index must satisfy
 * the invariants the loader relies on, and must re-encode to an index that decodes.
 *
 * Built with -DFUZZ_GEN_CORPUS instead of -fsanitize=fuzzer, main() writes the seed corpus
 * into the directory given as argv[1] (see run.sh --gen-corpus).
 */
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_index: invariant violated: %s\n", what);
        abort();
    }
}

/* Walks a decoded index through the accessors, checking what the loader assumes. */
static void walk(const fmt_index *ix)
{
    volatile uint8_t sink = 0;
    const fmt_header *h = &ix->h;
    check(h->n_samples >= 1 && h->chunk_size >= 1 && h->n_labels >= 1 && h->n_segments >= 1,
          "counts");
    uint64_t raw = 0, stored = 0;
    for (uint64_t c = 0; c < h->n_chunks; c++) {
        fmt_chunk ch;
        fmt_index_chunk(ix, c, &ch);
        check(ch.segment < h->n_segments, "chunk segment");
        fmt_segment seg;
        fmt_index_segment(ix, ch.segment, &seg);
        check(ch.offset % FMT_ALIGN == 0, "chunk alignment");
        check(ch.offset <= seg.size && ch.length <= seg.size - ch.offset, "chunk in segment");
        check(ch.length >= FMT_CHUNK_HEADER_LEN, "chunk length");
        for (uint32_t j = 0; j < ch.n_samples; j++) {
            const uint64_t i = c * h->chunk_size + j;
            check(i < h->n_samples, "sample index");
            fmt_sample s;
            fmt_index_sample(ix, i, &s);
            check(s.offset >= FMT_CHUNK_HEADER_LEN, "sample offset");
            check(s.offset <= ch.length && s.stored_len <= ch.length - s.offset,
                  "sample in chunk");
            check(s.codec <= FMT_CODEC_ZSTD_DICT, "codec");
            check(s.codec != FMT_CODEC_NONE || s.raw_len == s.stored_len, "codec 0 lengths");
            check(s.codec != FMT_CODEC_ZSTD_DICT || ix->dict_len > 0, "dict");
            check(s.label < h->n_labels, "label");
            check((uint64_t)s.key_off + s.key_len <= ix->strings_len, "key");
            if (s.key_len) {
                sink ^= ix->strings[s.key_off + s.key_len - 1];
            }
            raw += s.raw_len;
            stored += s.stored_len;
        }
    }
    check(raw == h->raw_bytes && stored == h->stored_bytes, "byte totals");
    for (uint32_t l = 0; l < h->n_labels; l++) {
        fmt_label lab;
        fmt_index_label(ix, l, &lab);
        check((uint64_t)lab.name_off + lab.name_len <= ix->strings_len, "label name");
        if (lab.name_len) {
            sink ^= ix->strings[lab.name_off + lab.name_len - 1];
        }
    }
    if (ix->dict_len) {
        sink ^= ix->dict[ix->dict_len - 1];
    }
    (void)sink;
}

/* decode(encode(records of ix)) must succeed. */
static void reencode(const fmt_index *ix)
{
    const fmt_header *h = &ix->h;
    fmt_sample *samples = malloc((size_t)h->n_samples * sizeof(*samples));
    fmt_chunk *chunks = malloc((size_t)h->n_chunks * sizeof(*chunks));
    fmt_segment *segments = malloc((size_t)h->n_segments * sizeof(*segments));
    fmt_label *labels = malloc((size_t)h->n_labels * sizeof(*labels));
    check(samples && chunks && segments && labels, "malloc");
    for (uint64_t i = 0; i < h->n_samples; i++) {
        fmt_index_sample(ix, i, &samples[i]);
    }
    for (uint64_t c = 0; c < h->n_chunks; c++) {
        fmt_index_chunk(ix, c, &chunks[c]);
    }
    for (uint32_t s = 0; s < h->n_segments; s++) {
        fmt_index_segment(ix, s, &segments[s]);
    }
    for (uint32_t l = 0; l < h->n_labels; l++) {
        fmt_index_label(ix, l, &labels[l]);
    }
    fmt_index_build b;
    memset(&b, 0, sizeof(b));
    b.h = *h;
    b.h.flags = 0; /* a newer minor may set flags this version does not write */
    b.samples = samples;
    b.n_samples = h->n_samples;
    b.chunks = chunks;
    b.n_chunks = h->n_chunks;
    b.segments = segments;
    b.n_segments = h->n_segments;
    b.labels = labels;
    b.n_labels = h->n_labels;
    b.strings = ix->strings;
    b.strings_len = ix->strings_len;
    b.dict = ix->dict;
    b.dict_len = ix->dict_len;
    uint8_t *out = NULL;
    size_t len = 0;
    check(fmt_index_encode(&b, &out, &len) == HDMLP_OK, "re-encode");
    fmt_index again;
    check(fmt_index_decode(out, len, &again) == HDMLP_OK, "decode of re-encoded index");
    check(again.h.n_samples == h->n_samples && again.h.raw_bytes == h->raw_bytes,
          "re-encoded header");
    hd_free(out);
    free(samples);
    free(chunks);
    free(segments);
    free(labels);
}

static void exercise(const uint8_t *buf, size_t size)
{
    fmt_index ix;
    const int rc = fmt_index_decode(buf, size, &ix);
    check(rc == HDMLP_OK || rc == HDMLP_E_CORRUPT || rc == HDMLP_E_VERSION, "return code");
    check(hdmlp_last_error() != NULL, "error detail");
    if (rc != HDMLP_OK) {
        return;
    }
    walk(&ix);
    reencode(&ix);
    fmt_decoder *d = NULL;
    if (fmt_decoder_create(&ix, &d) == HDMLP_OK) {
        fmt_decoder_free(d);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Exact-size copies so ASan sees any read past the end. */
    uint8_t *copy = calloc(size ? size : 1, 1);
    check(copy != NULL, "malloc");
    if (size) {
        memcpy(copy, data, size);
    }
    exercise(copy, size);
    if (size >= FMT_INDEX_TRAILER_LEN) {
        fmt_st64(copy + size - 8, fmt_checksum(copy, size - 8));
        exercise(copy, size);
    }
    free(copy);
    return 0;
}

#ifdef FUZZ_GEN_CORPUS
/* Seed corpus: small valid indexes of several shapes. */
static void write_seed(const char *dir, const char *name, const uint8_t *buf, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    check(f != NULL && fwrite(buf, 1, len, f) == len && fclose(f) == 0, "write seed");
}

static void gen(const char *dir, const char *name, uint64_t n, uint32_t k, uint32_t per_seg,
                uint32_t n_labels, bool dict)
{
    static fmt_sample samples[64];
    static fmt_chunk chunks[64];
    static fmt_segment segments[64];
    static fmt_label labels[8];
    static uint8_t strings[1024];
    static const uint8_t dict_bytes[] = "raw dictionary content for the seed corpus";
    size_t slen = 0;
    const uint64_t n_chunks = (n + k - 1) / k;
    const uint32_t n_seg = (uint32_t)((n_chunks + per_seg - 1) / per_seg);
    memset(segments, 0, sizeof(segments));
    for (uint64_t i = 0; i < n; i++) {
        fmt_sample *s = &samples[i];
        s->stored_len = (i * 5) % 9;
        s->codec = (uint32_t)(i % (dict ? 3 : 2));
        s->raw_len = s->codec ? s->stored_len * 2 + 1 : s->stored_len;
        s->checksum = i * 0x9e3779b97f4a7c15ull;
        s->label = (uint32_t)(i % n_labels);
        s->key_off = (uint32_t)slen;
        s->key_len =
            (uint32_t)snprintf((char *)strings + slen, 16, "key%llu", (unsigned long long)i);
        slen += s->key_len;
    }
    for (uint32_t l = 0; l < n_labels; l++) {
        labels[l].name_off = (uint32_t)slen;
        labels[l].name_len = (uint32_t)snprintf((char *)strings + slen, 16, "class%u", l);
        slen += labels[l].name_len;
    }
    uint64_t off = 0;
    for (uint64_t c = 0; c < n_chunks; c++) {
        const uint32_t seg = (uint32_t)(c / per_seg);
        if (c % per_seg == 0) {
            off = 0;
        }
        const uint32_t cnt = (uint32_t)(c + 1 < n_chunks ? k : n - c * k);
        uint64_t pos = FMT_CHUNK_HEADER_LEN;
        for (uint32_t j = 0; j < cnt; j++) {
            samples[c * k + j].offset = pos;
            pos += samples[c * k + j].stored_len;
        }
        uint8_t hdr[FMT_CHUNK_HEADER_LEN];
        chunks[c] =
            (fmt_chunk){.offset = off,
                        .length = pos,
                        .segment = seg,
                        .n_samples = cnt,
                        .header_checksum = fmt_chunk_header_encode(hdr, 77, c, cnt, pos - 64)};
        off += fmt_align_up(pos);
        segments[seg].size = off;
        segments[seg].n_chunks++;
    }
    fmt_index_build b;
    memset(&b, 0, sizeof(b));
    b.h.dataset_id = 77;
    b.h.chunk_size = k;
    b.h.pack_seed = 5;
    b.samples = samples;
    b.n_samples = n;
    b.chunks = chunks;
    b.n_chunks = n_chunks;
    b.segments = segments;
    b.n_segments = n_seg;
    b.labels = labels;
    b.n_labels = n_labels;
    b.strings = strings;
    b.strings_len = slen;
    b.dict = dict ? dict_bytes : NULL;
    b.dict_len = dict ? sizeof(dict_bytes) - 1 : 0;
    uint8_t *out;
    size_t len;
    check(fmt_index_encode(&b, &out, &len) == HDMLP_OK, hdmlp_last_error());
    check(len < 8192, "seed size");
    write_seed(dir, name, out, len);
    hd_free(out);
}

int main(int argc, char **argv)
{
    check(argc == 2, "usage: gen DIR");
    gen(argv[1], "one-sample", 1, 1, 1, 1, false);
    gen(argv[1], "k3-two-segments", 10, 3, 2, 3, false);
    gen(argv[1], "k4-dict", 9, 4, 4, 2, true);
    gen(argv[1], "k1-chunk-per-segment", 5, 1, 1, 2, true);
    gen(argv[1], "k8-one-segment", 40, 8, 100, 5, false);
    return 0;
}
#endif
