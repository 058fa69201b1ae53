/* The one allocation wrapper every library allocation goes through. */
#include "format.h"

#include <stdlib.h>

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
