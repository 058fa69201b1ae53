/* Chunk headers (sample checksums: fmt_codec.c). */
#include "format.h"

#include <string.h>

#define CHK_MAGIC "HDMLPCHK"
#define CHK_CHECKSUM_AT 56u

typedef unsigned long long ull;

uint64_t fmt_chunk_header_encode(uint8_t hdr[FMT_CHUNK_HEADER_LEN], uint64_t dataset_id,
                                 uint64_t chunk, uint32_t n_samples, uint64_t payload_len)
{
    memset(hdr, 0, FMT_CHUNK_HEADER_LEN);
    memcpy(hdr, CHK_MAGIC, 8);
    fmt_st64(hdr + 8, dataset_id);
    fmt_st64(hdr + 16, chunk);
    fmt_st32(hdr + 24, n_samples);
    fmt_st32(hdr + 28, 0);
    fmt_st64(hdr + 32, payload_len);
    const uint64_t sum = fmt_checksum(hdr, CHK_CHECKSUM_AT);
    fmt_st64(hdr + CHK_CHECKSUM_AT, sum);
    return sum;
}

int fmt_chunk_header_check(const fmt_index *ix, uint64_t chunk, const uint8_t *hdr, size_t len)
{
    if (chunk >= ix->h.n_chunks) {
        return hd_err(HDMLP_E_RANGE, "chunk %llu: out of range (%llu chunks)", (ull)chunk,
                      (ull)ix->h.n_chunks);
    }
    if (hdr == NULL || len < FMT_CHUNK_HEADER_LEN) {
        return hd_err(HDMLP_E_CORRUPT, "chunk %llu: header truncated (%zu bytes)", (ull)chunk,
                      hdr == NULL ? (size_t)0 : len);
    }
    fmt_chunk rec;
    fmt_index_chunk(ix, chunk, &rec);
    if (memcmp(hdr, CHK_MAGIC, 8) != 0) {
        return hd_err(HDMLP_E_CORRUPT, "chunk %llu: bad header magic", (ull)chunk);
    }
    const uint64_t stored = fmt_ld64(hdr + CHK_CHECKSUM_AT);
    const uint64_t got = fmt_checksum(hdr, CHK_CHECKSUM_AT);
    if (stored != got) {
        return hd_err(HDMLP_E_CORRUPT,
                      "chunk %llu: header checksum mismatch (stored %016llx, computed %016llx)",
                      (ull)chunk, (ull)stored, (ull)got);
    }
    if (stored != rec.header_checksum) {
        return hd_err(HDMLP_E_CORRUPT,
                      "chunk %llu: header checksum %016llx differs from the index's %016llx",
                      (ull)chunk, (ull)stored, (ull)rec.header_checksum);
    }
    const uint64_t id = fmt_ld64(hdr + 8);
    if (id != ix->h.dataset_id) {
        return hd_err(
            HDMLP_E_CORRUPT,
            "chunk %llu: dataset_id %016llx, the index says %016llx (chunk of another "
            "dataset?)",
            (ull)chunk, (ull)id, (ull)ix->h.dataset_id);
    }
    const uint64_t c = fmt_ld64(hdr + 16);
    if (c != chunk) {
        return hd_err(HDMLP_E_CORRUPT, "chunk %llu: header says chunk %llu", (ull)chunk,
                      (ull)c);
    }
    const uint32_t n = fmt_ld32(hdr + 24);
    if (n != rec.n_samples) {
        return hd_err(HDMLP_E_CORRUPT, "chunk %llu: header n_samples %u, the index says %u",
                      (ull)chunk, n, rec.n_samples);
    }
    const uint64_t payload = fmt_ld64(hdr + 32);
    if (payload != rec.length - FMT_CHUNK_HEADER_LEN) {
        return hd_err(HDMLP_E_CORRUPT,
                      "chunk %llu: header payload_length %llu, the index says %llu", (ull)chunk,
                      (ull)payload, (ull)(rec.length - FMT_CHUNK_HEADER_LEN));
    }
    /* flags and reserved bytes may gain meaning in a newer minor version. */
    if (ix->h.minor <= FMT_VERSION_MINOR) {
        if (fmt_ld32(hdr + 28) != 0) {
            return hd_err(HDMLP_E_CORRUPT, "chunk %llu: header flags 0x%x, expected 0",
                          (ull)chunk, fmt_ld32(hdr + 28));
        }
        for (unsigned i = 40; i < CHK_CHECKSUM_AT; i++) {
            if (hdr[i] != 0) {
                return hd_err(HDMLP_E_CORRUPT, "chunk %llu: reserved header byte %u not zero",
                              (ull)chunk, i);
            }
        }
    }
    return HDMLP_OK;
}

int fmt_sample_verify(uint64_t index, const fmt_sample *s, const uint8_t *stored)
{
    if (stored == NULL && s->stored_len != 0) {
        return hd_err(HDMLP_E_INVAL, "sample %llu: NULL stored bytes", (ull)index);
    }
    if (s->codec == FMT_CODEC_FIELDS) { /* each stored value has its own checksum */
        if (s->vals == NULL) {
            return hd_err(HDMLP_E_INVAL, "sample %llu: a sample with fields needs its values",
                          (ull)index);
        }
        uint64_t at = 0;
        for (uint32_t f = 0; f < s->n_fields; f++) {
            const uint8_t *r = s->vals + (size_t)f * FMT_VALUE_REC_LEN;
            if (r[13] != FMT_VALUE_STORED) {
                continue;
            }
            const uint64_t len = fmt_ld32(r);
            const uint32_t got =
                (uint32_t)(fmt_checksum(stored + at, (size_t)len) & UINT32_MAX);
            if (at + len > s->stored_len || got != fmt_ld32(r + 8)) {
                return hd_err(HDMLP_E_CORRUPT,
                              "sample %llu, field %u: checksum mismatch (stored bytes hash to "
                              "%08x, the table says %08x)",
                              (ull)index, f, got, fmt_ld32(r + 8));
            }
            at += len;
        }
        return HDMLP_OK;
    }
    const uint64_t got = fmt_checksum(stored, (size_t)s->stored_len);
    if (!fmt_sample_sum_ok(s, got)) {
        return hd_err(HDMLP_E_CORRUPT,
                      "sample %llu: checksum mismatch (stored bytes hash to %016llx, the index "
                      "says %016llx)",
                      (ull)index, (ull)got, (ull)s->checksum);
    }
    return HDMLP_OK;
}
