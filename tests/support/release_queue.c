/* A thread that releases batches handed to it (release_queue.h). */
#include "support/release_queue.h"

#include <string.h>

static void *releaser(void *arg)
{
    release_queue *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (q->count == 0 && !q->done) {
            pthread_cond_wait(&q->cv, &q->lock);
        }
        if (q->count == 0) {
            break;
        }
        hdmlp_batch *b = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->lock);
        hdmlp_batch_release(b);
        pthread_mutex_lock(&q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

int release_queue_start(release_queue *q, int cap)
{
    memset(q, 0, sizeof(*q));
    q->cap = cap < 1 ? 1 : cap > RELEASE_QUEUE_MAX ? RELEASE_QUEUE_MAX : cap;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cv, NULL);
    const int rc = pthread_create(&q->thread, NULL, releaser, q);
    if (rc != 0) {
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->cv);
    }
    return rc;
}

void release_queue_push(release_queue *q, hdmlp_batch *b)
{
    pthread_mutex_lock(&q->lock);
    while (q->count == q->cap) {
        pthread_cond_wait(&q->cv, &q->lock);
    }
    q->items[(q->head + q->count) % q->cap] = b;
    q->count++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->lock);
}

void release_queue_stop(release_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->done = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->thread, NULL);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cv);
}
