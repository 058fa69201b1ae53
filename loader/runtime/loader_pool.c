/* Sample memory: a loader's pool of sample buffers (see loader_pool.h). */
#include "loader_pool.h"

#include "format.h"

#include <pthread.h>
#ifdef HDMLP_HAVE_MALLOC_TRIM
#include <malloc.h>
#endif

/* Classes: 16-byte steps up to 256 bytes (1..16), then sixteen per doubling up to POOL_MAX
 * (a class's buffers are at most 1/16 larger than the requests of that class). */
#define POOL_SMALL 256u
#define POOL_MAX ((uint64_t)1 << 40)
#define POOL_CLASSES (17u + 32u * 16u)

/* Classes above a request's that may serve it when its own has no free buffer: any free
 * buffer up to twice the size asked is reused before malloc is asked for another (exact
 * classes alone kept each class's own high-water mark: more resident than malloc). */
#define POOL_REACH 16u

/* Each buffer starts with this header (16 bytes: the caller's bytes stay 16-byte aligned). */
typedef struct pool_node {
    struct pool_node *next; /* on a free list */
    uint64_t cls;           /* the class of the buffer's size */
} pool_node;

struct sample_pool {
    pthread_mutex_t lock;
    pool_node *free[POOL_CLASSES];
    uint64_t live; /* buffers handed out */
    int closed;
};

/* The class of an n-byte request (n <= POOL_MAX) and its buffer size. */
static uint32_t class_of(uint64_t n, uint64_t *bytes)
{
    n = n ? n : 1;
    if (n <= POOL_SMALL) {
        const uint64_t c = (n + 15) / 16;
        *bytes = c * 16;
        return (uint32_t)c;
    }
    uint32_t e = 8; /* 2^e < n <= 2^(e+1) */
    while ((n - 1) >> (e + 1) != 0) {
        e++;
    }
    const uint64_t step = (uint64_t)1 << (e - 4);
    const uint64_t k = (n + step - 1) / step; /* 17..32 */
    *bytes = k * step;
    return 17u + (e - 8u) * 16u + (uint32_t)(k - 17u);
}

sample_pool *sample_pool_create(void)
{
    sample_pool *p = hd_calloc(1, sizeof(*p));
    if (p != NULL) {
        pthread_mutex_init(&p->lock, NULL);
    }
    return p;
}

void *sample_pool_alloc(sample_pool *p, uint64_t n)
{
    if (n > POOL_MAX) {
        return NULL;
    }
    uint64_t bytes;
    const uint32_t c = class_of(n, &bytes);
    pthread_mutex_lock(&p->lock);
    pool_node *b = NULL;
    for (uint32_t k = c; b == NULL && k <= c + POOL_REACH && k < POOL_CLASSES; k++) {
        b = p->free[k];
        if (b != NULL) {
            p->free[k] = b->next;
        }
    }
    p->live++;
    pthread_mutex_unlock(&p->lock);
    if (b == NULL) {
        b = hd_malloc(sizeof(pool_node) + (size_t)bytes);
        if (b == NULL) {
            pthread_mutex_lock(&p->lock);
            p->live--;
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        b->cls = c;
    }
    return b + 1;
}

static void pool_destroy(sample_pool *p)
{
    pthread_mutex_destroy(&p->lock);
    hd_free(p);
#ifdef HDMLP_HAVE_MALLOC_TRIM
    /* Samples are many small blocks: freed, they stay in malloc's arenas (free, but resident)
     * until something trims them. A loader that held a budget's worth gives it back here. */
    malloc_trim(0);
#endif
}

void sample_pool_free(sample_pool *p, void *buf)
{
    if (buf == NULL) {
        return;
    }
    pool_node *b = (pool_node *)buf - 1;
    pthread_mutex_lock(&p->lock);
    p->live--;
    const int closed = p->closed, last = closed && p->live == 0;
    if (!closed) {
        b->next = p->free[b->cls];
        p->free[b->cls] = b;
    }
    pthread_mutex_unlock(&p->lock);
    if (closed) {
        hd_free(b);
    }
    if (last) {
        pool_destroy(p);
    }
}

void sample_pool_close(sample_pool *p)
{
    if (p == NULL) {
        return;
    }
    /* Under the lock: a buffer freed meanwhile may be the last and free the pool. */
    pthread_mutex_lock(&p->lock);
    p->closed = 1;
    for (uint32_t c = 0; c < POOL_CLASSES; c++) {
        while (p->free[c] != NULL) {
            pool_node *b = p->free[c];
            p->free[c] = b->next;
            hd_free(b);
        }
    }
    const int last = p->live == 0;
    pthread_mutex_unlock(&p->lock);
    if (last) {
        pool_destroy(p);
    }
}
