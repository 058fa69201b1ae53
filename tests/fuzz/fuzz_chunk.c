/*
 * libFuzzer target: chunk header check and sample decode of arbitrary bytes against a small
 * fixed valid index built in memory (N = 6, K = 4: chunks of 4 and 2 samples; codecs 0, 1
 * and 2 with a raw-content dictionary).
 *
 * Input: byte 0 selects the chunk (bit 0) and a codec for the free sample (bits 1-2);
 * bytes 1-2 are a raw length (LE) for the free sample; the rest is a chunk as read from a
 * segment (header + payload). Each sample whose range lies in the input is decoded twice:
 * against the index's checksum, and with the checksum recomputed from the input so the
 * fuzzer reaches zstd. The rest is also decoded as one free-standing sample.
 *
 * Built with -DFUZZ_GEN_CORPUS instead of -fsanitize=fuzzer, main() writes the seed corpus
 * into the directory given as argv[1] (see run.sh --gen-corpus).
 */
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FX_N 6u
#define FX_K 4u
#define FX_C 2u
#define FX_ID 0x0123456789abcdefull

static const uint8_t fx_dict[] =
    "hdmlp fuzz dictionary: sample payload sample payload 0123456789";
static const uint32_t fx_codec[FX_N] = {0, 1, 2, 1, 2, 0};

static uint8_t fx_seg[FX_C * FMT_ALIGN]; /* the fixture's one segment */
static uint8_t *fx_index;
static fmt_index fx_ix;
static fmt_decoder *fx_dec;

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_chunk: %s (%s)\n", what, hdmlp_last_error());
        abort();
    }
}

static void fx_fill(uint64_t i, uint8_t *buf, size_t len)
{
    static const char text[] = "sample payload ";
    for (size_t j = 0; j < len; j++) {
        buf[j] = (uint8_t)(j % 16 == 0 ? '0' + (int)i : text[j % (sizeof(text) - 1)]);
    }
}

static void fx_build(void)
{
    if (fx_index != NULL) {
        return;
    }
    fmt_encoder *plain, *with_dict;
    check(fmt_encoder_create(1, NULL, 0, &plain) == HDMLP_OK, "encoder");
    check(fmt_encoder_create(1, fx_dict, sizeof(fx_dict) - 1, &with_dict) == HDMLP_OK,
          "dict encoder");
    fmt_sample samples[FX_N];
    fmt_chunk chunks[FX_C];
    memset(samples, 0, sizeof(samples));
    uint8_t raw[200];
    uint8_t *enc = NULL;
    size_t enc_cap = 0;
    static const uint8_t strings[] = "s0s1s2s3s4s5label";
    for (uint32_t c = 0; c < FX_C; c++) {
        uint8_t *chunk = fx_seg + (size_t)c * FMT_ALIGN;
        uint64_t pos = FMT_CHUNK_HEADER_LEN;
        const uint32_t n = c == 0 ? FX_K : FX_N - FX_K;
        for (uint32_t j = 0; j < n; j++) {
            const uint32_t i = c * FX_K + j;
            const size_t raw_len = (i == 0 || i == 3) ? 0u : 30u * i + 7u; /* two empty */
            fx_fill(i, raw, raw_len);
            const uint8_t *stored = raw;
            size_t stored_len = raw_len;
            uint32_t codec = FMT_CODEC_NONE;
            if (fx_codec[i] != FMT_CODEC_NONE) {
                check(fmt_encode(fx_codec[i] == 1 ? plain : with_dict, raw, raw_len, &enc,
                                 &enc_cap, &stored_len, &codec) == HDMLP_OK,
                      "encode");
                stored = enc;
            }
            check(codec == fx_codec[i] && pos + stored_len <= FMT_ALIGN, "fixture layout");
            memcpy(chunk + pos, stored, stored_len);
            samples[i] = (fmt_sample){.offset = pos,
                                      .stored_len = stored_len,
                                      .raw_len = raw_len,
                                      .checksum = fmt_checksum(stored, stored_len),
                                      .key_off = 2 * i,
                                      .key_len = 2,
                                      .codec = codec};
            pos += stored_len;
        }
        chunks[c] = (fmt_chunk){.offset = (uint64_t)c * FMT_ALIGN,
                                .length = pos,
                                .n_samples = n,
                                .header_checksum =
                                    fmt_chunk_header_encode(chunk, FX_ID, c, n, pos - 64)};
    }
    fmt_encoder_free(plain);
    fmt_encoder_free(with_dict);
    hd_free(enc);
    const fmt_segment seg = {sizeof(fx_seg), FX_C};
    const fmt_label label = {12, 5};
    fmt_index_build b;
    memset(&b, 0, sizeof(b));
    b.h.dataset_id = FX_ID;
    b.h.chunk_size = FX_K;
    b.samples = samples;
    b.n_samples = FX_N;
    b.chunks = chunks;
    b.n_chunks = FX_C;
    b.segments = &seg;
    b.n_segments = 1;
    b.labels = &label;
    b.n_labels = 1;
    b.strings = strings;
    b.strings_len = sizeof(strings) - 1;
    b.dict = fx_dict;
    b.dict_len = sizeof(fx_dict) - 1;
    size_t len;
    check(fmt_index_encode(&b, &fx_index, &len) == HDMLP_OK, "index encode");
    check(fmt_index_decode(fx_index, len, &fx_ix) == HDMLP_OK, "index decode");
    check(fmt_decoder_create(&fx_ix, &fx_dec) == HDMLP_OK, "decoder");
}

static void decode_one(uint64_t index, const fmt_sample *s, const uint8_t *stored, bool intact)
{
    uint8_t *dst = malloc(s->raw_len ? (size_t)s->raw_len : 1); /* exact size for ASan */
    check(dst != NULL, "malloc");
    const int rc = fmt_sample_decode(fx_dec, index, s, stored, dst, (size_t)s->raw_len);
    check(rc == HDMLP_OK || rc == HDMLP_E_CORRUPT, "decode return code");
    if (rc == HDMLP_OK && intact) {
        /* A sample that passes its index checksum must decode to its original bytes. */
        uint8_t *want = malloc(s->raw_len ? (size_t)s->raw_len : 1);
        check(want != NULL, "malloc");
        fx_fill(index, want, (size_t)s->raw_len);
        check(memcmp(want, dst, (size_t)s->raw_len) == 0,
              "checksum-valid sample decodes wrong");
        free(want);
    }
    free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fx_build();
    if (size < 3) {
        return 0;
    }
    const uint64_t c = data[0] & 1u;
    const uint32_t free_codec = (data[0] >> 1) & 3u;
    const uint64_t free_raw = fmt_ld16(data + 1);
    const size_t len = size - 3;
    uint8_t *chunk = malloc(len ? len : 1); /* exact size for ASan */
    check(chunk != NULL, "malloc");
    memcpy(chunk, data + 3, len);

    const int rc = fmt_chunk_header_check(&fx_ix, c, chunk, len);
    check(rc == HDMLP_OK || rc == HDMLP_E_CORRUPT, "header check return code");
    fmt_chunk ch;
    fmt_index_chunk(&fx_ix, c, &ch);
    for (uint32_t j = 0; j < ch.n_samples; j++) {
        const uint64_t i = c * FX_K + j;
        fmt_sample s;
        fmt_index_sample(&fx_ix, i, &s);
        if (s.offset > len || s.stored_len > len - s.offset) {
            continue;
        }
        const uint8_t *stored = chunk + s.offset;
        uint8_t *exact = malloc(s.stored_len ? (size_t)s.stored_len : 1);
        check(exact != NULL, "malloc");
        memcpy(exact, stored, (size_t)s.stored_len);
        check(fmt_sample_verify(i, &s, exact) != HDMLP_E_INVAL, "verify");
        decode_one(i, &s, exact, true);
        s.checksum = fmt_checksum(exact, (size_t)s.stored_len);
        decode_one(i, &s, exact, false);
        free(exact);
    }
    fmt_sample fs = {.offset = 64,
                     .stored_len = len,
                     .raw_len = free_raw,
                     .checksum = fmt_checksum(chunk, len),
                     .codec = free_codec};
    if (fs.codec == FMT_CODEC_NONE) {
        fs.raw_len = len;
    }
    decode_one(0, &fs, chunk, false);
    free(chunk);
    return 0;
}

#ifdef FUZZ_GEN_CORPUS
static void write_seed(const char *dir, const char *name, uint8_t sel, uint16_t raw,
                       const uint8_t *body, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    uint8_t pre[3] = {sel, (uint8_t)raw, (uint8_t)(raw >> 8)};
    check(f != NULL && fwrite(pre, 1, 3, f) == 3 && fwrite(body, 1, len, f) == len &&
              fclose(f) == 0,
          "write seed");
}

int main(int argc, char **argv)
{
    check(argc == 2, "usage: gen DIR");
    fx_build();
    for (uint32_t c = 0; c < FX_C; c++) {
        fmt_chunk ch;
        fmt_index_chunk(&fx_ix, c, &ch);
        const uint8_t *chunk = fx_seg + ch.offset;
        char name[64];
        snprintf(name, sizeof(name), "chunk%u", c);
        write_seed(argv[1], name, (uint8_t)c, 0, chunk, (size_t)ch.length);
        snprintf(name, sizeof(name), "chunk%u-padded", c);
        write_seed(argv[1], name, (uint8_t)c, 0, chunk, FMT_ALIGN);
        /* Each compressed sample alone, as a free sample with its codec and raw length. */
        for (uint32_t j = 0; j < ch.n_samples; j++) {
            const uint32_t i = c * FX_K + j;
            fmt_sample s;
            fmt_index_sample(&fx_ix, i, &s);
            snprintf(name, sizeof(name), "sample%u-codec%u", i, s.codec);
            write_seed(argv[1], name, (uint8_t)(s.codec << 1), (uint16_t)s.raw_len,
                       chunk + s.offset, (size_t)s.stored_len);
        }
    }
    return 0;
}
#endif
