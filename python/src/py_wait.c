/*
 * Interruptible waits for hdmlp_loader_next().
 *
 * hdmlp_loader_next() blocks on a condition variable, which a signal does not wake, so a
 * Ctrl-C would only be seen once the batch arrived. When a batch is not ready at once
 * (py_loader.c first asks with hdmlp_loader_interrupt() armed, which makes next() return
 * HDMLP_E_INTERRUPTED instead of waiting), the blocking call runs on this helper thread and
 * the Python thread waits on a POSIX semaphore, with the GIL released. sem_wait() returns
 * EINTR when a signal handler ran on the waiting thread (never restarted, SA_RESTART or
 * not), and Linux delivers process-directed signals to the main thread unless it blocks
 * them; the helper blocks every signal. The Python thread then runs PyErr_CheckSignals()
 * and, on KeyboardInterrupt, wakes the helper with hdmlp_loader_interrupt().
 *
 * The helper never touches Python. It blocks (condition variable), never polls.
 */
#include "py_internal.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

enum { W_IDLE = 0, W_REQUEST = 1, W_RUNNING = 2, W_QUIT = 3 };

struct py_waiter {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sem_t done;
    int state;
    hdmlp_loader *ld;
    hdmlp_batch *batch;
    int rc;
    char detail[1024];
};

static void *waiter_main(void *arg)
{
    py_waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->state != W_REQUEST && w->state != W_QUIT) {
            pthread_cond_wait(&w->cv, &w->mu);
        }
        if (w->state == W_QUIT) {
            break;
        }
        w->state = W_RUNNING;
        hdmlp_loader *ld = w->ld;
        pthread_mutex_unlock(&w->mu);

        hdmlp_batch *batch = NULL;
        const int rc = hdmlp_loader_next(ld, &batch);
        pthread_mutex_lock(&w->mu);
        w->batch = batch;
        w->rc = rc;
        snprintf(w->detail, sizeof(w->detail), "%s", rc == HDMLP_OK ? "" : hdmlp_last_error());
        w->state = W_IDLE;
        sem_post(&w->done);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int py_waiter_create(py_waiter **out)
{
    *out = NULL;
    py_waiter *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return ENOMEM;
    }
    if (sem_init(&w->done, 0, 0) != 0) {
        const int e = errno;
        free(w);
        return e;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    const int rc = pthread_create(&w->thread, NULL, waiter_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        sem_destroy(&w->done);
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

void py_waiter_free(py_waiter *w)
{
    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->state = W_QUIT;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    sem_destroy(&w->done);
    free(w);
}

void py_waiter_submit(py_waiter *w, hdmlp_loader *ld)
{
    pthread_mutex_lock(&w->mu);
    w->ld = ld;
    w->batch = NULL;
    w->rc = HDMLP_OK;
    w->detail[0] = '\0';
    w->state = W_REQUEST;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int py_waiter_wait(py_waiter *w)
{
    if (sem_wait(&w->done) == 0) {
        return 0;
    }
    return errno;
}

void py_waiter_wait_all(py_waiter *w)
{
    while (sem_wait(&w->done) != 0) {
    }
}

int py_waiter_result(py_waiter *w, hdmlp_batch **batch, const char **detail)
{
    pthread_mutex_lock(&w->mu);
    *batch = w->batch;
    w->batch = NULL;
    *detail = w->detail;
    const int rc = w->rc;
    pthread_mutex_unlock(&w->mu);
    return rc;
}
