/*
 * Sample memory: a loader's pool of sample buffers (loader_pool.c).
 *
 * Buffers come from malloc once and go back to the pool, not to malloc, when a sample is
 * freed: a free list per size class (sixteen classes per doubling), and a request takes a
 * free buffer of its class or of one up to twice as large before it asks malloc for a new
 * one. malloc keeps freed memory in the arena of the thread that allocated it, and planning
 * runs on whichever thread calls hdmlp_loader_next (Python takes turns between the caller
 * and a waiting helper thread): each arena kept its own high-water mark, a fifth to a third
 * of the budget more resident. Pooled, a loader's samples are one set of buffers whatever
 * thread asks. The pool outlives its loader while samples hold buffers; those then go back
 * to malloc, and the last one frees the pool (and asks malloc to give the memory back to
 * the system). All functions are thread-safe (the pool has its own lock).
 */
#ifndef HDMLP_LOADER_POOL_H
#define HDMLP_LOADER_POOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct sample_pool sample_pool;

/* A new, empty pool; NULL when out of memory. */
sample_pool *sample_pool_create(void);
/* A buffer of at least n bytes (16-byte aligned), from the pool's free lists or malloc; NULL
 * when out of memory or n is above 2^40. */
void *sample_pool_alloc(sample_pool *p, uint64_t n);
/* Gives back a buffer sample_pool_alloc returned (NULL accepted). */
void sample_pool_free(sample_pool *p, void *buf);
/* The loader is going: the free buffers go back to malloc (and malloc gives the memory back
 * to the system), the ones still held go back as they are freed; the pool is freed with the
 * last. NULL accepted. */
void sample_pool_close(sample_pool *p);

#endif
