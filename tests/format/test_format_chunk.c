/* format/: chunk headers (round trip, every byte flip, another chunk's or dataset's header).
 * Part of the test_format binary. */
#include "format.h"
#include "support/format_small.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* ---- chunk headers -------------------------------------------------------------------- */

static void small_chunk_header(const fmt_index *ix, uint64_t c, uint8_t hdr[64])
{
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    const uint64_t sum =
        fmt_chunk_header_encode(hdr, ix->h.dataset_id, c, ch.n_samples, ch.length - 64);
    cr_assert_eq(sum, ch.header_checksum);
    cr_assert_eq(fmt_ld64(hdr + 56), sum);
}

Test(chunk, header_roundtrip)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    for (uint64_t c = 0; c < SMALL_C; c++) {
        uint8_t hdr[64];
        small_chunk_header(&ix, c, hdr);
        cr_assert_eq(memcmp(hdr, "HDMLPCHK", 8), 0);
        cr_assert_eq(fmt_chunk_header_check(&ix, c, hdr, 64), HDMLP_OK, "%s",
                     hdmlp_last_error());
    }
    hd_free(buf);
}

Test(chunk, header_every_byte_flip_detected)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    uint8_t hdr[64];
    small_chunk_header(&ix, 1, hdr);
    static const uint8_t masks[] = {0x01, 0x80, 0xff};
    for (size_t i = 0; i < 64; i++) {
        for (size_t m = 0; m < sizeof(masks); m++) {
            hdr[i] ^= masks[m];
            cr_assert_eq(fmt_chunk_header_check(&ix, 1, hdr, 64), HDMLP_E_CORRUPT,
                         "byte %zu ^ 0x%02x", i, masks[m]);
            cr_assert(strstr(hdmlp_last_error(), "chunk 1:"), "%s", hdmlp_last_error());
            hdr[i] ^= masks[m];
        }
    }
    cr_assert_eq(fmt_chunk_header_check(&ix, 1, hdr, 64), HDMLP_OK);
    hd_free(buf);
}

Test(chunk, header_of_other_chunk_or_dataset_rejected)
{
    size_t len;
    fmt_index ix;
    uint8_t *buf = small_encode(true, &len, &ix);
    uint8_t hdr[64];
    small_chunk_header(&ix, 0, hdr);
    cr_assert_eq(fmt_chunk_header_check(&ix, 0, hdr, 64), HDMLP_OK);
    cr_assert_eq(fmt_chunk_header_check(&ix, 1, hdr, 64), HDMLP_E_CORRUPT);
    /* A self-consistent header of another dataset with the same shape. */
    fmt_chunk ch;
    fmt_index_chunk(&ix, 0, &ch);
    fmt_chunk_header_encode(hdr, SMALL_ID + 1, 0, ch.n_samples, ch.length - 64);
    cr_assert_eq(fmt_chunk_header_check(&ix, 0, hdr, 64), HDMLP_E_CORRUPT);
    cr_assert_eq(fmt_chunk_header_check(&ix, 0, hdr, 63), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "truncated"), "%s", hdmlp_last_error());
    cr_assert_eq(fmt_chunk_header_check(&ix, SMALL_C, hdr, 64), HDMLP_E_RANGE);
    hd_free(buf);
}
