/*
 * An index built in memory (see memds.h).
 */
#include "support/memds.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

void memds_make(memds *m, uint64_t n, uint32_t k, uint64_t (*size_of)(uint64_t))
{
    const uint64_t c = (n + k - 1) / k;
    fmt_sample *s = calloc(n, sizeof(*s));
    fmt_chunk *ch = calloc(c, sizeof(*ch));
    uint8_t strings[] = "class-0";
    fmt_label label = {0, 7};
    uint64_t seg = 0, raw = 0;
    for (uint64_t ci = 0; ci < c; ci++) {
        uint64_t off = FMT_CHUNK_HEADER_LEN;
        const uint64_t first = ci * k;
        const uint64_t last = first + k < n ? first + k : n;
        for (uint64_t i = first; i < last; i++) {
            s[i].offset = off;
            s[i].stored_len = s[i].raw_len = size_of(i);
            s[i].key_off = 0;
            s[i].key_len = 0;
            off += s[i].stored_len;
            raw += s[i].raw_len;
        }
        ch[ci].offset = seg;
        ch[ci].length = off;
        ch[ci].segment = 0;
        ch[ci].n_samples = (uint32_t)(last - first);
        seg += fmt_align_up(off);
    }
    fmt_segment sg = {seg, c};
    fmt_index_build b;
    memset(&b, 0, sizeof(b));
    b.h.dataset_id = 7;
    b.h.chunk_size = k;
    b.h.raw_bytes = b.h.stored_bytes = raw;
    b.samples = s;
    b.n_samples = n;
    b.chunks = ch;
    b.n_chunks = c;
    b.segments = &sg;
    b.n_segments = 1;
    b.labels = &label;
    b.n_labels = 1;
    b.strings = strings;
    b.strings_len = 7;
    cr_assert_eq(fmt_index_encode(&b, &m->buf, &m->len), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(fmt_index_decode(m->buf, m->len, &m->ix), HDMLP_OK, "%s", hdmlp_last_error());
    free(s);
    free(ch);
}

void memds_free(memds *m) { hd_free(m->buf); }
