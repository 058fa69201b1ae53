/* format/: sample codecs (none, zstd with and without a dictionary, dictionary training),
 * each round trip beside its rejections. Part of the test_format binary. */
#include "format.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* ---- sample codecs -------------------------------------------------------------------- */

#define CODEC_SEED 20240611u

static fmt_sample make_sample(const uint8_t *stored, size_t stored_len, size_t raw_len,
                              uint32_t codec)
{
    fmt_sample s;
    memset(&s, 0, sizeof(s));
    s.offset = 64;
    s.stored_len = stored_len;
    s.raw_len = raw_len;
    s.codec = codec;
    s.checksum = fmt_checksum(stored, stored_len);
    return s;
}

/* Index with K = 4 and the given dictionary (only header fields and dict are used). */
static fmt_index codec_index(const uint8_t *dict, size_t dict_len)
{
    fmt_index ix;
    memset(&ix, 0, sizeof(ix));
    ix.h.chunk_size = 4;
    ix.dict = dict;
    ix.dict_len = dict_len;
    return ix;
}

Test(codec, none_roundtrip_and_checksum_mismatch)
{
    cr_log_info("seed %u", CODEC_SEED);
    uint8_t raw[300], out[300];
    testds_fill(9, CODEC_SEED, raw, sizeof(raw));
    const fmt_index ix = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK);
    fmt_sample s = make_sample(raw, sizeof(raw), sizeof(raw), FMT_CODEC_NONE);
    cr_assert_eq(fmt_sample_decode(d, 9, &s, raw, out, sizeof(out)), HDMLP_OK);
    cr_assert_eq(memcmp(raw, out, sizeof(raw)), 0);
    cr_assert_eq(fmt_sample_verify(9, &s, raw), HDMLP_OK);
    raw[100] ^= 0x10;
    cr_assert_eq(fmt_sample_decode(d, 9, &s, raw, out, sizeof(out)), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "sample 9 (chunk 2): checksum mismatch"), "%s",
              hdmlp_last_error());
    cr_assert_eq(fmt_sample_verify(9, &s, raw), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "sample 9: checksum"), "%s", hdmlp_last_error());
    fmt_decoder_free(d);
}

static void zstd_roundtrip(const uint8_t *dict, size_t dict_len, uint32_t want_codec)
{
    cr_log_info("seed %u", CODEC_SEED);
    const fmt_index ix = codec_index(dict, dict_len);
    fmt_encoder *e;
    fmt_decoder *d;
    cr_assert_eq(fmt_encoder_create(3, dict, dict_len, &e), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK, "%s", hdmlp_last_error());
    uint8_t *enc = NULL;
    size_t enc_cap = 0;
    static const size_t sizes[] = {0, 1, 63, 64, 1000, 100000};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        const size_t n = sizes[k];
        uint8_t *raw = malloc(n + 1), *out = malloc(n + 1);
        testds_fill(k, CODEC_SEED, raw, n);
        size_t enc_len;
        uint32_t codec = 99;
        cr_assert_eq(fmt_encode(e, raw, n, &enc, &enc_cap, &enc_len, &codec), HDMLP_OK);
        cr_assert_eq(codec, want_codec);
        if (n >= 1000) {
            cr_assert_lt(enc_len, n / 4, "compressible content");
        }
        const fmt_sample s = make_sample(enc, enc_len, n, codec);
        cr_assert_eq(fmt_sample_decode(d, k, &s, enc, out, n), HDMLP_OK, "size %zu: %s", n,
                     hdmlp_last_error());
        cr_assert_eq(memcmp(raw, out, n), 0, "size %zu", n);
        free(raw);
        free(out);
    }
    hd_free(enc);
    fmt_encoder_free(e);
    fmt_decoder_free(d);
}

Test(codec, zstd_roundtrip) { zstd_roundtrip(NULL, 0, FMT_CODEC_ZSTD); }

Test(codec, zstd_dict_roundtrip)
{
    uint8_t dict[512];
    testds_fill(123, CODEC_SEED, dict, sizeof(dict)); /* raw-content dictionary */
    zstd_roundtrip(dict, sizeof(dict), FMT_CODEC_ZSTD_DICT);
}

/* Encodes sample content k (n bytes) with zstd; returns a malloc'd frame. */
static uint8_t *zstd_frame(size_t n, size_t *len)
{
    uint8_t *raw = malloc(n + 1);
    testds_fill(5, CODEC_SEED, raw, n);
    const size_t cap = ZSTD_compressBound(n);
    uint8_t *out = malloc(cap);
    *len = ZSTD_compress(out, cap, raw, n, 1);
    cr_assert(!ZSTD_isError(*len));
    free(raw);
    return out;
}

Test(codec, zstd_wrong_raw_length_rejected)
{
    size_t len;
    uint8_t *frame = zstd_frame(500, &len);
    const fmt_index ix = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK);
    uint8_t out[600];
    fmt_sample s = make_sample(frame, len, 500, FMT_CODEC_ZSTD);
    cr_assert_eq(fmt_sample_decode(d, 6, &s, frame, out, sizeof(out)), HDMLP_OK);
    s.raw_len = 499;
    cr_assert_eq(fmt_sample_decode(d, 6, &s, frame, out, sizeof(out)), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "sample 6 (chunk 1)"), "%s", hdmlp_last_error());
    s.raw_len = 501;
    cr_assert_eq(fmt_sample_decode(d, 6, &s, frame, out, sizeof(out)), HDMLP_E_CORRUPT);
    free(frame);
    fmt_decoder_free(d);
}

Test(codec, zstd_frame_without_content_size_checked)
{
    uint8_t raw[400], out[800];
    testds_fill(1, CODEC_SEED, raw, sizeof(raw));
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
    uint8_t frame[1024];
    ZSTD_outBuffer ob = {frame, sizeof(frame), 0};
    ZSTD_inBuffer ib = {raw, sizeof(raw), 0};
    cr_assert_eq(ZSTD_compressStream2(cctx, &ob, &ib, ZSTD_e_end), 0);
    ZSTD_freeCCtx(cctx);
    cr_assert_eq(ZSTD_getFrameContentSize(frame, ob.pos), ZSTD_CONTENTSIZE_UNKNOWN);
    const fmt_index ix = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK);
    fmt_sample s = make_sample(frame, ob.pos, sizeof(raw), FMT_CODEC_ZSTD);
    cr_assert_eq(fmt_sample_decode(d, 0, &s, frame, out, sizeof(out)), HDMLP_OK);
    cr_assert_eq(memcmp(out, raw, sizeof(raw)), 0);
    s.raw_len = sizeof(raw) - 1; /* decoding would overflow raw_len */
    cr_assert_eq(fmt_sample_decode(d, 0, &s, frame, out, sizeof(out)), HDMLP_E_CORRUPT);
    s.raw_len = sizeof(raw) + 1; /* decoding gives fewer bytes */
    cr_assert_eq(fmt_sample_decode(d, 0, &s, frame, out, sizeof(out)), HDMLP_E_CORRUPT);
    fmt_decoder_free(d);
}

Test(codec, zstd_trailing_or_garbage_rejected)
{
    size_t len;
    uint8_t *frame = zstd_frame(300, &len);
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, frame, len);
    longer[len] = 0;
    const fmt_index ix = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK);
    uint8_t out[300];
    fmt_sample s = make_sample(longer, len + 1, 300, FMT_CODEC_ZSTD);
    cr_assert_eq(fmt_sample_decode(d, 0, &s, longer, out, sizeof(out)), HDMLP_E_CORRUPT);
    s = make_sample(frame, len - 1, 300, FMT_CODEC_ZSTD); /* truncated frame */
    cr_assert_eq(fmt_sample_decode(d, 0, &s, frame, out, sizeof(out)), HDMLP_E_CORRUPT);
    static const uint8_t garbage[] = "definitely not a zstd frame";
    s = make_sample(garbage, sizeof(garbage), 300, FMT_CODEC_ZSTD);
    cr_assert_eq(fmt_sample_decode(d, 0, &s, garbage, out, sizeof(out)), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "zstd"), "%s", hdmlp_last_error());
    s = make_sample(NULL, 0, 0, FMT_CODEC_ZSTD); /* empty stored bytes: not a frame */
    cr_assert_eq(fmt_sample_decode(d, 0, &s, NULL, out, sizeof(out)), HDMLP_E_CORRUPT);
    free(frame);
    free(longer);
    fmt_decoder_free(d);
}

Test(codec, dict_sample_needs_dict_and_plain_decoder_fails)
{
    uint8_t dict[512];
    testds_fill(123, CODEC_SEED, dict, sizeof(dict));
    fmt_encoder *e;
    cr_assert_eq(fmt_encoder_create(1, dict, sizeof(dict), &e), HDMLP_OK);
    uint8_t raw[2000], out[2000];
    testds_fill(7, CODEC_SEED, raw, sizeof(raw));
    uint8_t *enc = NULL;
    size_t cap = 0, len;
    uint32_t codec;
    cr_assert_eq(fmt_encode(e, raw, sizeof(raw), &enc, &cap, &len, &codec), HDMLP_OK);
    const fmt_index plain = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&plain, &d), HDMLP_OK);
    fmt_sample s = make_sample(enc, len, sizeof(raw), FMT_CODEC_ZSTD_DICT);
    cr_assert_eq(fmt_sample_decode(d, 3, &s, enc, out, sizeof(out)), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "dictionary"), "%s", hdmlp_last_error());
    s.codec = FMT_CODEC_ZSTD; /* a dictionary frame read as plain zstd */
    cr_assert_eq(fmt_sample_decode(d, 3, &s, enc, out, sizeof(out)), HDMLP_E_CORRUPT);
    s.codec = 3;
    cr_assert_eq(fmt_sample_decode(d, 3, &s, enc, out, sizeof(out)), HDMLP_E_CORRUPT);
    hd_free(enc);
    fmt_encoder_free(e);
    fmt_decoder_free(d);
}

Test(codec, destination_too_small)
{
    uint8_t raw[100], out[100];
    testds_fill(2, CODEC_SEED, raw, sizeof(raw));
    const fmt_index ix = codec_index(NULL, 0);
    fmt_decoder *d;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_OK);
    const fmt_sample s = make_sample(raw, sizeof(raw), sizeof(raw), FMT_CODEC_NONE);
    cr_assert_eq(fmt_sample_decode(d, 0, &s, raw, out, sizeof(out)), HDMLP_OK);
    cr_assert_eq(fmt_sample_decode(d, 0, &s, raw, out, sizeof(out) - 1), HDMLP_E_RANGE);
    fmt_decoder_free(d);
}

Test(codec, encoder_level_checked)
{
    fmt_encoder *e = (fmt_encoder *)1;
    cr_assert_eq(fmt_encoder_create(0, NULL, 0, &e), HDMLP_E_INVAL);
    cr_assert_null(e);
    cr_assert_eq(fmt_encoder_create(ZSTD_maxCLevel() + 1, NULL, 0, &e), HDMLP_E_INVAL);
    cr_assert_eq(fmt_encoder_create(ZSTD_maxCLevel(), NULL, 0, &e), HDMLP_OK);
    fmt_encoder_free(e);
    fmt_encoder_free(NULL);
    fmt_decoder_free(NULL);
}

Test(codec, dict_train)
{
    cr_log_info("seed %u", CODEC_SEED);
    enum { N = 1000, SZ = 200 };
    uint8_t *all = malloc(N * SZ);
    size_t sizes[N];
    for (unsigned i = 0; i < N; i++) {
        testds_fill(i, CODEC_SEED, all + (size_t)i * SZ, SZ);
        sizes[i] = SZ;
    }
    uint8_t dict[4096];
    size_t dict_len = 0;
    cr_assert_eq(fmt_dict_train(all, sizes, N, dict, sizeof(dict), &dict_len), HDMLP_OK, "%s",
                 hdmlp_last_error());
    cr_assert_gt(dict_len, 0);
    cr_assert_leq(dict_len, sizeof(dict));
    zstd_roundtrip(dict, dict_len, FMT_CODEC_ZSTD_DICT);
    /* Too little material to train on. */
    cr_assert_eq(fmt_dict_train(all, sizes, 1, dict, sizeof(dict), &dict_len), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "dictionary training"), "%s", hdmlp_last_error());
    free(all);
}

Test(codec, bad_dictionary_refused_by_decoder)
{
    /* zstd dictionary magic followed by garbage entropy tables. */
    uint8_t dict[256];
    memset(dict, 0xee, sizeof(dict));
    fmt_st32(dict, 0xEC30A437u);
    const fmt_index ix = codec_index(dict, sizeof(dict));
    fmt_decoder *d = (fmt_decoder *)1;
    cr_assert_eq(fmt_decoder_create(&ix, &d), HDMLP_E_CORRUPT);
    cr_assert_null(d);
    cr_assert(strstr(hdmlp_last_error(), "dict"), "%s", hdmlp_last_error());
}
