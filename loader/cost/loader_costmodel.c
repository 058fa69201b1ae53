/* Online storage cost model: recursive least squares on read timings (see the header). */
#include "loader_costmodel.h"

#include <math.h>
#include <time.h>

#define MB 1e6
#define OP_MAX 1e7         /* us per operation */
#define US_PER_MB_MIN 10.0 /* 100 GB/s */
#define US_PER_MB_MAX 1e12 /* 1 B/s */
#define SCALE_START 0.2    /* relative noise assumed before any read */
#define SCALE_MIN 0.02
#define EXPLORE_SHARE 0.02 /* exploration budget: 2 % of chosen plans' predicted cost */
#define EXPLORE_CAP 50.0   /* budget kept: at most 50 chosen plans' cost */

static double clamp(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

static double prior_sd(double v) { return 3.0 * v > 1000.0 ? 3.0 * v : 1000.0; }

void cost_model_init(cost_model *m, const refill_cost *start)
{
    m->theta[0] = clamp(start->op_us, 0.0, OP_MAX);
    m->theta[1] = clamp(MB * 1e6 / start->bytes_per_s, US_PER_MB_MIN, US_PER_MB_MAX);
    /* Prior covariance in relative-error units: (prior sd / noise)^2. */
    const double sa = prior_sd(m->theta[0]) / SCALE_START;
    const double sb = prior_sd(m->theta[1]) / SCALE_START;
    m->p[0][0] = sa * sa;
    m->p[1][1] = sb * sb;
    m->p[0][1] = m->p[1][0] = 0.0;
    m->p0[0] = m->p[0][0];
    m->p0[1] = m->p[1][1];
    m->p0_trace = m->p[0][0] + m->p[1][1];
    m->scale = SCALE_START;
    m->observations = 0;
    m->clipped = 0;
    m->changes = 0;
    m->surprises = 0;
    m->surprise_sign = 0;
    m->follow = 4 * COST_CHANGE; /* the start is a guess: the first reads count in full */
    m->bin = (cost_bin){0, 0, 0, 0};
    m->reads = 0;
}

double cost_model_predict(const cost_model *m, double ops, double bytes)
{
    return m->theta[0] * ops + m->theta[1] * bytes / MB;
}

void cost_model_observe(cost_model *m, double ops, double bytes, double service_us)
{
    if (!(service_us > 0.0) || !(ops >= 1.0) || !(bytes >= 0.0) || !isfinite(service_us)) {
        return;
    }
    const double x[2] = {ops, bytes / MB};
    const double pred = cost_model_predict(m, ops, bytes);
    /* Relative errors: divide by the geometric mean of observed and predicted time. */
    const double d = sqrt((pred > 1e-3 ? pred : 1e-3) * service_us);
    const double z[2] = {x[0] / d, x[1] / d};
    double r = (service_us - pred) / d;
    const double lim = COST_CLIP * m->scale;
    if (m->follow > 0) {
        m->follow--; /* just after a change: every read counts in full */
    } else if (fabs(r) > lim) {
        /* COST_CHANGE surprises in a row on the same side: the storage changed, so the
         * model forgets what it knew (covariance back to the start's) and follows. */
        const int sign = r > 0 ? 1 : -1;
        m->surprises = sign == m->surprise_sign ? m->surprises + 1 : 1;
        m->surprise_sign = sign;
        if (m->surprises >= COST_CHANGE) {
            m->p[0][0] = m->p0[0];
            m->p[1][1] = m->p0[1];
            m->p[0][1] = m->p[1][0] = 0.0;
            m->scale = SCALE_START;
            m->surprises = 0;
            m->follow = 4 * COST_CHANGE;
            m->changes++;
        } else {
            m->clipped++;
            r = sign * lim;
        }
    } else {
        m->surprises = 0;
    }
    /* The noise level learns from clipped residuals, so that a change keeps surprising. */
    m->scale = clamp(0.95 * m->scale + 0.05 * fmin(fabs(r), lim), SCALE_MIN, 10.0);
    const double pz[2] = {m->p[0][0] * z[0] + m->p[0][1] * z[1],
                          m->p[1][0] * z[0] + m->p[1][1] * z[1]};
    const double denom = COST_FORGET + z[0] * pz[0] + z[1] * pz[1];
    const double k[2] = {pz[0] / denom, pz[1] / denom};
    m->theta[0] = clamp(m->theta[0] + k[0] * r, 0.0, OP_MAX);
    m->theta[1] = clamp(m->theta[1] + k[1] * r, US_PER_MB_MIN, US_PER_MB_MAX);
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++) {
            m->p[i][j] = (m->p[i][j] - k[i] * pz[j]) / COST_FORGET;
        }
    }
    /* Symmetric, and bounded where reads no longer inform (windup). */
    const double off = 0.5 * (m->p[0][1] + m->p[1][0]);
    m->p[0][1] = m->p[1][0] = off;
    const double tr = m->p[0][0] + m->p[1][1];
    if (tr > 10.0 * m->p0_trace) {
        const double f = 10.0 * m->p0_trace / tr;
        for (int i = 0; i < 2; i++) {
            for (int j = 0; j < 2; j++) {
                m->p[i][j] *= f;
            }
        }
    }
    m->observations++;
}

void cost_model_add_read(cost_model *m, double ops, double bytes, double service_us)
{
    if (!(service_us >= 0.0) || !isfinite(service_us) || !(ops >= 1.0) || !(bytes >= 0.0)) {
        return;
    }
    cost_bin *b = &m->bin;
    b->ops += ops;
    b->bytes += bytes;
    b->us += service_us;
    b->reads++;
    m->reads++;
    if (b->us >= COST_BIN_US) {
        cost_model_observe(m, b->ops, b->bytes, b->us);
        *b = (cost_bin){0, 0, 0, 0};
    }
}

void cost_model_get(const cost_model *m, refill_cost *out)
{
    out->op_us = m->theta[0];
    out->bytes_per_s = MB * 1e6 / m->theta[1];
}

double cost_model_diff_stderr(const cost_model *m, double ops_a, double bytes_a, double ops_b,
                              double bytes_b)
{
    const double d[2] = {ops_a - ops_b, (bytes_a - bytes_b) / MB};
    const double v = d[0] * (m->p[0][0] * d[0] + m->p[0][1] * d[1]) +
                     d[1] * (m->p[1][0] * d[0] + m->p[1][1] * d[1]);
    return m->scale * sqrt(v > 0.0 ? v : 0.0);
}

int cost_explore(cost_explorer *e, const cost_model *m, double ops_c, double bytes_c,
                 double ops_o, double bytes_o)
{
    const double chosen = cost_model_predict(m, ops_c, bytes_c);
    const double other = cost_model_predict(m, ops_o, bytes_o);
    e->budget_us += EXPLORE_SHARE * chosen;
    if (e->budget_us > EXPLORE_CAP * chosen) {
        e->budget_us = EXPLORE_CAP * chosen;
    }
    const double extra = other > chosen ? other - chosen : 0.0;
    const double se = cost_model_diff_stderr(m, ops_c, bytes_c, ops_o, bytes_o);
    /* What the other plan may cost more, not what the model guesses: where it cannot tell
     * the plans apart its guess may be far off (a throttle's start-up burst teaches "bytes
     * are free" for a window or two), and a budget charged by the guess pays for whole
     * chunks every COST_EXPLORE_GAP refills. */
    const double charge = extra + 2.0 * se;
    e->since++;
    if (e->since >= COST_EXPLORE_GAP && extra < 2.0 * se && e->budget_us >= charge) {
        e->budget_us -= charge;
        e->explored++;
        e->since = 0;
        return 1;
    }
    return 0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cost_clock_init(cost_clock *c)
{
    pthread_mutex_init(&c->lock, NULL);
    c->inflight = 0;
    c->last_ns = now_ns();
    c->share_ns = 0.0;
}

void cost_clock_destroy(cost_clock *c) { pthread_mutex_destroy(&c->lock); }

static void clock_advance(cost_clock *c)
{
    const uint64_t now = now_ns();
    if (c->inflight > 0 && now > c->last_ns) {
        c->share_ns += (double)(now - c->last_ns) / c->inflight;
    }
    c->last_ns = now;
}

double cost_clock_start(cost_clock *c)
{
    pthread_mutex_lock(&c->lock);
    clock_advance(c);
    c->inflight++;
    const double token = c->share_ns;
    pthread_mutex_unlock(&c->lock);
    return token;
}

double cost_clock_end(cost_clock *c, double token)
{
    pthread_mutex_lock(&c->lock);
    clock_advance(c);
    c->inflight--;
    const double us = (c->share_ns - token) / 1000.0;
    pthread_mutex_unlock(&c->lock);
    return us;
}

void cost_history_init(cost_history *h, const refill_cost *start)
{
    h->p[0] = (cost_point){0, 0, start->op_us, start->bytes_per_s};
    h->n = 1;
    h->every = 1;
}

void cost_history_note(cost_history *h, const cost_model *m)
{
    const uint64_t obs = m->observations;
    if (obs == 0 || obs % h->every != 0 || h->p[h->n - 1].observations >= obs) {
        return;
    }
    if (h->n == COST_HISTORY) {
        for (uint32_t i = 0; i < COST_HISTORY / 2; i++) {
            h->p[i] = h->p[2 * i];
        }
        h->n = COST_HISTORY / 2;
        h->every *= 2;
        if (obs % h->every != 0) {
            return;
        }
    }
    refill_cost c;
    cost_model_get(m, &c);
    h->p[h->n++] = (cost_point){obs, m->reads, c.op_us, c.bytes_per_s};
}
