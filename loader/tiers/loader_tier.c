/* Chunk tiers: placement by load count, RAM cache, SSD cache files. */
#include "loader_tier.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct tier {
    const fmt_index *ix;
    uint64_t n_chunks;
    uint8_t *place; /* TIER_* per chunk */
    uint8_t **ram;  /* cached whole chunks */
    uint64_t *ram_len;
    uint8_t *planned; /* RAM chunks whose first (whole) load was planned */
    int *ssd_fd;      /* -1 until staged and opened */
    uint8_t *staged;  /* 1 once the file is complete, 2 while one thread writes it */
    uint64_t *order;  /* SSD chunks by first use */
    uint64_t n_order;
    uint64_t ram_chunks, ssd_chunks;
    int ssd_stopped; /* a write failed (e.g. disk full): no more staging */
    char *dir;
    uint64_t dataset_id;
    int direct;
    pthread_mutex_t lock;
    pthread_cond_t cached; /* a first load finished */
};

typedef struct rank_entry {
    uint64_t chunk, loads, first;
} rank_entry;

static int by_loads(const void *a, const void *b)
{
    const rank_entry *x = a, *y = b;
    if (x->loads != y->loads) {
        return x->loads > y->loads ? -1 : 1;
    }
    if (x->first != y->first) {
        return x->first < y->first ? -1 : 1;
    }
    return x->chunk < y->chunk ? -1 : (x->chunk > y->chunk);
}

static int by_first(const void *a, const void *b)
{
    const rank_entry *x = a, *y = b;
    if (x->first != y->first) {
        return x->first < y->first ? -1 : 1;
    }
    return x->chunk < y->chunk ? -1 : (x->chunk > y->chunk);
}

static uint64_t chunk_bytes(const fmt_index *ix, uint64_t c)
{
    fmt_chunk ch;
    fmt_index_chunk(ix, c, &ch);
    return fmt_align_up(ch.length);
}

static void file_name(const tier *t, uint64_t chunk, char *buf, size_t cap, int tmp)
{
    snprintf(buf, cap, "%s/hdmlp-%016llx-chunk-%llu%s", t->dir,
             (unsigned long long)t->dataset_id, (unsigned long long)chunk, tmp ? ".tmp" : "");
}

/* A file left by an earlier run counts as staged when its size is right; its contents are
 * verified when read. */
static void adopt_existing(tier *t, uint64_t chunk)
{
    char name[4096];
    file_name(t, chunk, name, sizeof(name), 0);
    struct stat st;
    if (stat(name, &st) == 0 && (uint64_t)st.st_size == chunk_bytes(t->ix, chunk)) {
        t->staged[chunk] = 1;
    }
}

int tier_create(const fmt_index *ix, const tier_params *p, const uint64_t *loads,
                const uint64_t *first_use, tier **out)
{
    *out = NULL;
    const uint64_t c = ix->h.n_chunks;
    tier *t = hd_calloc(1, sizeof(*t));
    rank_entry *r = hd_malloc(c * sizeof(*r));
    if (t == NULL || r == NULL) {
        hd_free(t);
        hd_free(r);
        return hd_err(HDMLP_E_NOMEM, "tiers: out of memory");
    }
    t->ix = ix;
    t->n_chunks = c;
    t->dataset_id = p->dataset_id;
    t->direct = p->direct;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cached, NULL);
    t->place = hd_calloc(c, 1);
    t->ram = hd_calloc(c, sizeof(uint8_t *));
    t->ram_len = hd_calloc(c, sizeof(uint64_t));
    t->planned = hd_calloc(c, 1);
    t->ssd_fd = hd_malloc(c * sizeof(int));
    t->staged = hd_calloc(c, 1);
    t->order = hd_malloc(c * sizeof(uint64_t));
    if (!t->place || !t->ram || !t->ram_len || !t->planned || !t->ssd_fd || !t->staged ||
        !t->order) {
        hd_free(r);
        tier_free(t);
        return hd_err(HDMLP_E_NOMEM, "tiers: out of memory");
    }
    for (uint64_t i = 0; i < c; i++) {
        t->ssd_fd[i] = -1;
    }
    if (p->ssd_dir != NULL && p->ssd_bytes > 0) {
        const size_t len = strlen(p->ssd_dir) + 1;
        t->dir = hd_malloc(len);
        if (t->dir == NULL) {
            hd_free(r);
            tier_free(t);
            return hd_err(HDMLP_E_NOMEM, "tiers: out of memory");
        }
        memcpy(t->dir, p->ssd_dir, len);
        if (mkdir(t->dir, 0755) != 0 && errno != EEXIST) {
            const int e = errno;
            hd_free(r);
            tier_free(t);
            return hd_err(hd_errno_code(e), "ssd cache: cannot create %s: %s", p->ssd_dir,
                          strerror(e));
        }
    }
    uint64_t n = 0;
    for (uint64_t i = 0; i < c; i++) {
        if (loads[i] > 0) {
            r[n++] = (rank_entry){i, loads[i], first_use[i]};
        }
    }
    qsort(r, n, sizeof(*r), by_loads);
    uint64_t ram_left = p->ram_bytes, ssd_left = t->dir != NULL ? p->ssd_bytes : 0;
    uint64_t n_ssd = 0;
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t b = chunk_bytes(ix, r[i].chunk);
        if (b <= ram_left) {
            t->place[r[i].chunk] = TIER_RAM;
            ram_left -= b;
        } else if (b <= ssd_left) {
            t->place[r[i].chunk] = TIER_SSD;
            ssd_left -= b;
            r[n_ssd++] = r[i]; /* compact the SSD chunks to the front (i >= n_ssd) */
        }
    }
    qsort(r, n_ssd, sizeof(*r), by_first);
    for (uint64_t i = 0; i < n_ssd; i++) {
        t->order[i] = r[i].chunk;
        adopt_existing(t, r[i].chunk);
    }
    t->n_order = n_ssd;
    hd_free(r);
    *out = t;
    return HDMLP_OK;
}

void tier_free(tier *t)
{
    if (t == NULL) {
        return;
    }
    for (uint64_t i = 0; t->ram != NULL && t->ram_len != NULL && i < t->n_chunks; i++) {
        hd_map_free(t->ram[i], t->ram_len[i]);
    }
    for (uint64_t i = 0; t->ssd_fd != NULL && i < t->n_chunks; i++) {
        if (t->ssd_fd[i] >= 0) {
            close(t->ssd_fd[i]);
        }
    }
    hd_free(t->place);
    hd_free(t->ram);
    hd_free(t->ram_len);
    hd_free(t->planned);
    hd_free(t->ssd_fd);
    hd_free(t->staged);
    hd_free(t->order);
    hd_free(t->dir);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->cached);
    hd_free(t);
}

int tier_placement(const tier *t, uint64_t chunk) { return t->place[chunk]; }

const uint8_t *tier_ram_get(tier *t, uint64_t chunk)
{
    pthread_mutex_lock(&t->lock);
    const uint8_t *p = t->ram[chunk];
    pthread_mutex_unlock(&t->lock);
    return p;
}

/* planned[c]: 0 not yet, 1 first load planned, 2 finished (cached or abandoned). */
int tier_first_plan(tier *t, uint64_t chunk)
{
    pthread_mutex_lock(&t->lock);
    const int first = t->place[chunk] != TIER_SOURCE && t->planned[chunk] == 0;
    if (first) {
        t->planned[chunk] = 1;
    }
    pthread_mutex_unlock(&t->lock);
    return first;
}

void tier_first_done(tier *t, uint64_t chunk)
{
    pthread_mutex_lock(&t->lock);
    t->planned[chunk] = 2;
    pthread_cond_broadcast(&t->cached);
    pthread_mutex_unlock(&t->lock);
}

const uint8_t *tier_ram_wait(tier *t, uint64_t chunk)
{
    pthread_mutex_lock(&t->lock);
    while (t->place[chunk] == TIER_RAM && t->planned[chunk] == 1 && t->ram[chunk] == NULL) {
        pthread_cond_wait(&t->cached, &t->lock);
    }
    const uint8_t *p = t->ram[chunk];
    pthread_mutex_unlock(&t->lock);
    return p;
}

int tier_ram_put(tier *t, uint64_t chunk, uint8_t *buf, uint64_t len)
{
    int taken = 0;
    pthread_mutex_lock(&t->lock);
    if (t->place[chunk] == TIER_RAM && t->ram[chunk] == NULL) {
        t->ram[chunk] = buf;
        t->ram_len[chunk] = len;
        t->planned[chunk] = 2;
        pthread_cond_broadcast(&t->cached);
        t->ram_chunks++;
        taken = 1;
    }
    pthread_mutex_unlock(&t->lock);
    return taken;
}

uint64_t tier_state_bytes(const tier *t)
{
    /* place, planned and staged (a byte each), ram (a pointer), ram_len and order (8 bytes
     * each) and ssd_fd (an int) per chunk: as tier_create allocates them */
    return t->n_chunks * (3 + sizeof(uint8_t *) + 2 * sizeof(uint64_t) + sizeof(int));
}

uint64_t tier_ram_chunks(const tier *t)
{
    tier *m = (tier *)t;
    pthread_mutex_lock(&m->lock);
    const uint64_t n = m->ram_chunks;
    pthread_mutex_unlock(&m->lock);
    return n;
}

int tier_ssd_fd(tier *t, uint64_t chunk)
{
    pthread_mutex_lock(&t->lock);
    int fd = -1;
    if (t->place[chunk] == TIER_SSD && t->staged[chunk] == 1) {
        if (t->ssd_fd[chunk] < 0) {
            char name[4096];
            file_name(t, chunk, name, sizeof(name), 0);
            /* Files hold whole aligned chunks, so direct plans read them as they read the
             * segments (tmpfs and the like refuse O_DIRECT: read those buffered). */
            t->ssd_fd[chunk] = open(name, O_RDONLY | O_CLOEXEC | (t->direct ? O_DIRECT : 0));
            if (t->ssd_fd[chunk] < 0 && t->direct && errno == EINVAL) {
                t->ssd_fd[chunk] = open(name, O_RDONLY | O_CLOEXEC);
            }
            if (t->ssd_fd[chunk] < 0) {
                t->staged[chunk] = 0; /* missing: fall back to the source */
            }
        }
        fd = t->ssd_fd[chunk];
    }
    pthread_mutex_unlock(&t->lock);
    return fd;
}

void tier_ssd_bad(tier *t, uint64_t chunk)
{
    pthread_mutex_lock(&t->lock);
    if (t->ssd_fd[chunk] >= 0) {
        close(t->ssd_fd[chunk]);
        t->ssd_fd[chunk] = -1;
    }
    if (t->staged[chunk] == 1) {
        t->staged[chunk] = 0;
        t->ssd_chunks -= t->ssd_chunks > 0;
    }
    t->place[chunk] = TIER_SOURCE; /* never served from the cache again */
    char name[4096];
    file_name(t, chunk, name, sizeof(name), 0);
    unlink(name);
    pthread_mutex_unlock(&t->lock);
}

const uint64_t *tier_ssd_order(const tier *t, uint64_t *n)
{
    *n = t->n_order;
    return t->order;
}

int tier_ssd_stopped(tier *t)
{
    pthread_mutex_lock(&t->lock);
    const int s = t->ssd_stopped;
    pthread_mutex_unlock(&t->lock);
    return s;
}

int tier_ssd_staged(tier *t, uint64_t chunk)
{
    pthread_mutex_lock(&t->lock);
    const int s = t->staged[chunk] == 1;
    pthread_mutex_unlock(&t->lock);
    return s;
}

uint64_t tier_ssd_chunks(const tier *t) { return t->ssd_chunks; }

static int write_all(int fd, const uint8_t *buf, uint64_t len)
{
    while (len > 0) {
        const ssize_t w = write(fd, buf, len > (1u << 30) ? (1u << 30) : len);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        buf += w;
        len -= (uint64_t)w;
    }
    return 0;
}

/* Claims chunk for writing: 0 when it is staged, being written, not SSD-placed, or staging
 * stopped. */
static int claim(tier *t, uint64_t chunk)
{
    pthread_mutex_lock(&t->lock);
    const int ok = t->place[chunk] == TIER_SSD && t->staged[chunk] == 0 && !t->ssd_stopped;
    if (ok) {
        t->staged[chunk] = 2;
    }
    pthread_mutex_unlock(&t->lock);
    return ok;
}

static int write_file(tier *t, uint64_t chunk, const uint8_t *buf, uint64_t len)
{
    char tmp[4096], name[4096];
    file_name(t, chunk, tmp, sizeof(tmp), 1);
    file_name(t, chunk, name, sizeof(name), 0);
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        const int e = errno;
        return hd_err(hd_errno_code(e), "ssd cache: cannot create %s: %s", tmp, strerror(e));
    }
    /* No fsync: a cache file that a crash leaves short or stale fails the size check when
     * adopted or the checksums when read, and falls back to the source; syncing every
     * chunk would make staging slower than the refills it takes chunks from. */
    if (write_all(fd, buf, len) != 0) {
        const int e = errno;
        close(fd);
        unlink(tmp);
        return hd_err(hd_errno_code(e), "ssd cache: cannot write %s: %s", tmp, strerror(e));
    }
    close(fd);
    if (rename(tmp, name) != 0) {
        const int e = errno;
        unlink(tmp);
        return hd_err(hd_errno_code(e), "ssd cache: cannot rename %s: %s", tmp, strerror(e));
    }
    return HDMLP_OK;
}

int tier_ssd_store(tier *t, uint64_t chunk, const uint8_t *buf, uint64_t len)
{
    if (!claim(t, chunk)) {
        return tier_ssd_stopped(t) ? HDMLP_E_NOSPC : 0;
    }
    const int rc = write_file(t, chunk, buf, len);
    pthread_mutex_lock(&t->lock);
    if (rc == HDMLP_OK && t->place[chunk] == TIER_SSD) {
        t->staged[chunk] = 1;
        t->ssd_chunks++;
    } else {
        t->staged[chunk] = 0;
        t->ssd_stopped |= rc != HDMLP_OK;
    }
    pthread_mutex_unlock(&t->lock);
    return rc == HDMLP_OK ? 1 : rc;
}
