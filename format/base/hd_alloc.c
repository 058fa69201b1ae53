/* The one allocation wrapper every library allocation goes through. */
#include "hd_base.h"

#include <stdlib.h>
#include <sys/mman.h>

void *hd_malloc(size_t n) { return malloc(n ? n : 1); }

void *hd_calloc(size_t count, size_t size)
{
    return calloc(count ? count : 1, size ? size : 1);
}

void *hd_realloc(void *p, size_t n) { return realloc(p, n ? n : 1); }

void *hd_aligned_alloc(size_t align, size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, align, n ? n : 1) != 0) {
        return NULL;
    }
    return p;
}

void hd_free(void *p) { free(p); }

/* Large I/O buffers: mapped directly (so they never move malloc's mmap threshold and are
 * returned to the system on free), 2 MiB-aligned lengths with transparent huge pages where
 * the kernel allows, so direct reads reach the device as few large requests. */
#define HD_HUGE (2u << 20)

static size_t map_len(size_t n)
{
    return n >= HD_HUGE ? (n + HD_HUGE - 1) & ~(size_t)(HD_HUGE - 1)
                        : (n + 4095) & ~(size_t)4095;
}

void *hd_map_alloc(size_t n)
{
    const size_t len = map_len(n ? n : 1);
    if (len < HD_HUGE) {
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    /* Over-map by 2 MiB and trim to a 2 MiB-aligned start. */
    uint8_t *raw =
        mmap(NULL, len + HD_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        return NULL;
    }
    const uintptr_t start = ((uintptr_t)raw + HD_HUGE - 1) & ~(uintptr_t)(HD_HUGE - 1);
    uint8_t *p = (uint8_t *)start;
    if (p > raw) {
        munmap(raw, (size_t)(p - raw));
    }
    const size_t tail = (size_t)(raw + len + HD_HUGE - (p + len));
    if (tail > 0) {
        munmap(p + len, tail);
    }
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE);
#endif
    return p;
}

void hd_map_release_pages(void *p, size_t n)
{
    if (p != NULL) {
        (void)madvise(p, map_len(n ? n : 1), MADV_DONTNEED);
    }
}

void hd_map_free(void *p, size_t n)
{
    if (p != NULL) {
        munmap(p, map_len(n ? n : 1));
    }
}
