/* The progress bar hdmlp-pack draws on stderr when it is a terminal. */
#include "pack_cli.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define REDRAW_INTERVAL 0.1 /* seconds: at most 10 redraws per second */

double pack_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *pack_human_bytes(uint64_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
    double v = (double)bytes;
    unsigned u = 0;
    while (v >= 1000.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1000.0;
        u++;
    }
    if (u == 0) {
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    } else {
        snprintf(buf, cap, "%.2f %s", v, units[u]);
    }
    return buf;
}

void pack_bar_init(pack_bar *b, int enabled)
{
    memset(b, 0, sizeof(*b));
    b->enabled = enabled;
    b->phase = -1;
    b->phase_start = pack_now();
}

static void draw(pack_bar *b, const char *line)
{
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
    b->drawn = 1;
}

static void eta(char *buf, size_t cap, double seconds)
{
    if (seconds < 0 || seconds > 360000) {
        snprintf(buf, cap, "--:--");
        return;
    }
    const unsigned s = (unsigned)(seconds + 0.5);
    if (s >= 3600) {
        snprintf(buf, cap, "%u:%02u:%02u", s / 3600, s / 60 % 60, s % 60);
    } else {
        snprintf(buf, cap, "%u:%02u", s / 60, s % 60);
    }
}

void pack_bar_update(pack_bar *b, const pack_progress *p)
{
    if (!b->enabled) {
        return;
    }
    const double now = pack_now();
    if ((int)p->phase != b->phase) {
        b->phase = (int)p->phase;
        b->phase_start = now;
    } else if (now - b->last_draw < REDRAW_INTERVAL) {
        return;
    }
    b->last_draw = now;
    const double dt = now - b->phase_start;
    char line[160], h1[32], h2[32], e[32];
    switch (p->phase) {
    case PACK_PHASE_SCAN:
        snprintf(line, sizeof(line), "scanning: %llu samples, %s",
                 (unsigned long long)p->samples_done,
                 pack_human_bytes(p->bytes_done, h1, sizeof(h1)));
        break;
    case PACK_PHASE_DICT:
        snprintf(line, sizeof(line), "training dictionary: %llu samples, %s",
                 (unsigned long long)p->samples_done,
                 pack_human_bytes(p->bytes_done, h1, sizeof(h1)));
        break;
    case PACK_PHASE_WRITE: {
        const double rate = dt > 0 ? (double)p->bytes_done / dt : 0;
        const double frac = p->bytes_total ? (double)p->bytes_done / (double)p->bytes_total
                            : p->samples_total
                                ? (double)p->samples_done / (double)p->samples_total
                                : 1.0;
        char bar[24];
        const int fill = (int)(frac * 20 + 0.5);
        for (int i = 0; i < 20; i++) {
            bar[i] = i < fill ? '#' : '.';
        }
        bar[20] = '\0';
        eta(e, sizeof(e), rate > 0 ? (double)(p->bytes_total - p->bytes_done) / rate : -1);
        snprintf(line, sizeof(line), "[%s] %3.0f%% %llu/%llu samples  %s  %.1f MB/s  ETA %s",
                 bar, frac * 100, (unsigned long long)p->samples_done,
                 (unsigned long long)p->samples_total,
                 pack_human_bytes(p->bytes_done, h2, sizeof(h2)), rate / 1e6, e);
        break;
    }
    default:
        snprintf(line, sizeof(line), "writing the index and committing");
        break;
    }
    draw(b, line);
}

void pack_bar_verify(pack_bar *b, uint64_t done, uint64_t total)
{
    if (!b->enabled) {
        return;
    }
    const double now = pack_now();
    if (done < total && now - b->last_draw < REDRAW_INTERVAL) {
        return;
    }
    b->last_draw = now;
    char line[96];
    snprintf(line, sizeof(line), "verifying: %llu/%llu chunks", (unsigned long long)done,
             (unsigned long long)total);
    draw(b, line);
}

void pack_bar_clear(pack_bar *b)
{
    if (b->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        b->drawn = 0;
    }
}
