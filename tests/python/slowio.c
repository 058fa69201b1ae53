/*
 * LD_PRELOAD shim for the Python tests: pread(2) can be made slow on demand, so a loader's
 * next() blocks for as long as a test needs (Ctrl-C and GIL tests).
 *
 *   slowio_set_delay_ms(ms)   every pread/pread64 that starts while ms > 0 first waits
 *                             until ms elapse or the delay is set back to 0 (which wakes
 *                             the waiters at once); returns nothing
 *   slowio_waiting()          number of reads waiting right now
 *
 * The wait is a condition variable with a deadline, not a sleep loop. Test helper only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

void slowio_set_delay_ms(unsigned ms);
unsigned slowio_waiting(void);
ssize_t pread(int fd, void *buf, size_t count, off_t offset);
ssize_t pread64(int fd, void *buf, size_t count, off_t offset);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned delay_ms;
static unsigned generation;
static unsigned waiting;

void slowio_set_delay_ms(unsigned ms)
{
    pthread_mutex_lock(&mu);
    delay_ms = ms;
    generation++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

unsigned slowio_waiting(void)
{
    pthread_mutex_lock(&mu);
    const unsigned n = waiting;
    pthread_mutex_unlock(&mu);
    return n;
}

static void maybe_wait(void)
{
    pthread_mutex_lock(&mu);
    if (delay_ms > 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += delay_ms / 1000;
        until.tv_nsec += (long)(delay_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        const unsigned gen = generation;
        waiting++;
        while (delay_ms > 0 && generation == gen) {
            if (pthread_cond_timedwait(&cv, &mu, &until) == ETIMEDOUT) {
                break;
            }
        }
        waiting--;
    }
    pthread_mutex_unlock(&mu);
}

typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);

static ssize_t real_pread(const char *name, int fd, void *buf, size_t count, off_t offset)
{
    pread_fn fn;
    void *sym = dlsym(RTLD_NEXT, name);
    memcpy(&fn, &sym, sizeof(fn));
    if (fn == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return fn(fd, buf, count, offset);
}

ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
    maybe_wait();
    return real_pread("pread", fd, buf, count, offset);
}

ssize_t pread64(int fd, void *buf, size_t count, off_t offset)
{
    maybe_wait();
    return real_pread("pread64", fd, buf, count, offset);
}
