/* Sample tables, version 1: a chunk's records are where the index's samples section holds
 * them (records cK .. cK+n_c-1, contiguous: FORMAT.md), so a table is a view into it. */
#include "format.h"

int fmt_index_table(const fmt_index *ix, uint64_t c, fmt_table *out)
{
    if (c >= ix->h.n_chunks) {
        return hd_err(HDMLP_E_RANGE, "sample table of chunk %llu: out of range (%llu chunks)",
                      (unsigned long long)c, (unsigned long long)ix->h.n_chunks);
    }
    const uint64_t first = c * ix->h.chunk_size;
    const uint64_t left = ix->h.n_samples - first;
    *out = (fmt_table){.rec = ix->samples + first * FMT_SAMPLE_REC_LEN,
                       .chunk = c,
                       .first = first,
                       .n = left < ix->h.chunk_size ? (uint32_t)left : ix->h.chunk_size};
    return HDMLP_OK;
}

uint64_t fmt_index_raw_top_sum(const fmt_index *ix, uint64_t m)
{
    const uint64_t n = ix->h.n_samples;
    if (m >= n) {
        return ix->h.raw_bytes;
    }
    uint64_t *heap = hd_malloc((m ? m : 1) * sizeof(uint64_t));
    if (heap == NULL) {
        return UINT64_MAX;
    }
    uint64_t used = 0, sum = 0;
    for (uint64_t i = 0; i < n && m > 0; i++) {
        const uint64_t v = fmt_rec_raw_len(ix->samples + i * FMT_SAMPLE_REC_LEN);
        if (used < m) {
            uint64_t j = used++;
            heap[j] = v;
            while (j > 0 && heap[(j - 1) / 2] > heap[j]) {
                const uint64_t t = heap[j];
                heap[j] = heap[(j - 1) / 2];
                heap[(j - 1) / 2] = t;
                j = (j - 1) / 2;
            }
        } else if (v > heap[0]) {
            heap[0] = v;
            uint64_t j = 0;
            for (;;) {
                const uint64_t l = 2 * j + 1, r = l + 1;
                uint64_t min = j;
                if (l < m && heap[l] < heap[min]) {
                    min = l;
                }
                if (r < m && heap[r] < heap[min]) {
                    min = r;
                }
                if (min == j) {
                    break;
                }
                const uint64_t t = heap[j];
                heap[j] = heap[min];
                heap[min] = t;
                j = min;
            }
        }
    }
    for (uint64_t i = 0; i < used; i++) {
        sum += heap[i];
    }
    hd_free(heap);
    return sum;
}

static int index_get(void *ctx, uint64_t chunk, void *buf, size_t cap, fmt_table *out)
{
    (void)buf;
    (void)cap;
    return fmt_index_table(ctx, chunk, out);
}

static uint64_t index_top(void *ctx, uint64_t m) { return fmt_index_raw_top_sum(ctx, m); }

fmt_tables fmt_index_tables(const fmt_index *ix)
{
    return (fmt_tables){index_get, index_top, (void *)(uintptr_t)ix, 0, NULL};
}
