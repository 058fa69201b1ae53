/* A thread that releases batches handed to it through a bounded queue: lets tests release
 * batches on another thread than the consumer's, as training loops with pinned-memory
 * copies or worker pools do. Plain C (no Criterion), so TSan programs can use it. */
#ifndef HDMLP_TEST_RELEASE_QUEUE_H
#define HDMLP_TEST_RELEASE_QUEUE_H

#include "hdmlp.h"

#include <pthread.h>

#define RELEASE_QUEUE_MAX 64

typedef struct release_queue {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    pthread_t thread;
    hdmlp_batch *items[RELEASE_QUEUE_MAX];
    int cap; /* batches queued at most (1..RELEASE_QUEUE_MAX) */
    int head, count, done;
} release_queue;

/* Starts the releasing thread; at most `cap` batches wait in the queue. 0 or an error. */
int release_queue_start(release_queue *q, int cap);
/* Hands b to the thread, waiting while the queue is full. */
void release_queue_push(release_queue *q, hdmlp_batch *b);
/* Lets the thread release what is queued, joins it and frees the queue. */
void release_queue_stop(release_queue *q);

#endif
