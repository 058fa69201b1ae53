/*
 * Object-store connections (mechanism): HTTP(S) requests through libcurl's multi interface.
 * A batch of requests runs `depth` at a time over kept-alive connections (HTTP/2 streams
 * where the server offers it); each finished request is judged: done, retried after a
 * backoff (5xx, 429, timeouts, dropped connections, short bodies), or failed (403, 404,
 * 416, a body longer than asked, TLS and URL errors). A ranged answer must carry the range
 * asked for (Content-Range); another range is retried like a cut body. s3:// requests carry
 * a SigV4 signature (loader_source_sigv4.c) for exactly the path and Host sent (libcurl
 * is told not to rewrite dot segments). Every request has a connect limit, a low-speed limit
 * and a deadline that covers its retries, so no batch can hang. The operations (reads, HEAD,
 * PUT, multipart, ...) are in loader_source_ops.c.
 */
#include "loader_source_xfer.h"

#include "hd_base.h"
#include "loader_source_sigv4.h"

#include <curl/curl.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

typedef unsigned long long ull;

#define SRC_DEPTH_MAX 256u
#define SRC_URL_MAX 4096u
#define SRC_BACKOFF_MS 50.0
#define SRC_BACKOFF_MAX_MS 2000.0
/* The low-speed limit: a transfer moving fewer than this many bytes a second, over a window
 * of the config's stall_ms, fails (and is retried): a server dripping a byte a second is as
 * stuck as a silent one. */
#define SRC_LOW_SPEED_BPS 1024.0

static const char *method_name(int m)
{
    static const char *const names[] = {"GET", "HEAD", "PUT", "POST", "DELETE"};
    return names[m];
}

struct src_conn {
    const src_store *s;
    CURLM *multi;
    unsigned depth;
    CURL **idle;
    unsigned n_idle;
    uint64_t requests, retries;
    unsigned seed;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int src_conn_create(const src_store *s, unsigned depth, src_conn **out)
{
    if (out == NULL || s == NULL) {
        return hd_err(HDMLP_E_INVAL, "source connection: NULL argument");
    }
    *out = NULL;
    if (depth < 1 || depth > SRC_DEPTH_MAX) {
        return hd_err(HDMLP_E_INVAL, "source connection: depth %u out of range 1..%u", depth,
                      SRC_DEPTH_MAX);
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        return hd_err(HDMLP_E_IO, "libcurl: initialisation failed: %s",
                      curl_easy_strerror(curl_init_rc));
    }
    src_conn *c = hd_calloc(1, sizeof(*c));
    if (c == NULL) {
        return hd_err(HDMLP_E_NOMEM, "source connection: out of memory");
    }
    c->s = s;
    c->depth = depth;
    c->seed = (unsigned)(uintptr_t)c ^ (unsigned)now_ms();
    c->idle = hd_calloc(depth, sizeof(CURL *));
    c->multi = curl_multi_init();
    if (c->idle == NULL || c->multi == NULL) {
        src_conn_free(c);
        return hd_err(HDMLP_E_NOMEM, "source connection: out of memory");
    }
    curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)depth);
    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, (long)depth);
    *out = c;
    return HDMLP_OK;
}

void src_conn_free(src_conn *c)
{
    if (c == NULL) {
        return;
    }
    for (unsigned i = 0; i < c->n_idle; i++) {
        curl_easy_cleanup(c->idle[i]);
    }
    if (c->multi != NULL) {
        curl_multi_cleanup(c->multi);
    }
    hd_free(c->idle);
    hd_free(c);
}

uint64_t src_conn_requests(const src_conn *c) { return c != NULL ? c->requests : 0; }
uint64_t src_conn_retries(const src_conn *c) { return c != NULL ? c->retries : 0; }

/* Checks a 206's Content-Range against the range asked for: 0 the same, 1 another range
 * (or none), 2 the object ends inside the range (shorter than the index says). */
static int check_range(const xfer *x)
{
    ull a = 0, b = 0;
    char total[32] = "";
    if (sscanf(x->content_range, "bytes %llu-%llu/%31s", &a, &b, total) != 3) {
        return 1;
    }
    const ull want_a = (ull)x->offset, want_b = (ull)(x->offset + x->len - 1);
    if (a == want_a && b == want_b) {
        return 0;
    }
    if (a == want_a && b < want_b && total[0] != '*' && strtoull(total, NULL, 10) == b + 1) {
        return 2;
    }
    return 1;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    xfer *x = arg;
    const size_t n = size * nmemb;
    if (x->status == 0) {
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
    }
    if (x->got == 0 && x->grow == NULL && x->len > 0 && x->status == 206 &&
        (x->range_bad = check_range(x)) != 0) {
        return 0; /* another range's bytes: never into dst */
    }
    if (x->status >= 300) {
        const size_t room = sizeof(x->errbody) - 1 - x->errbody_len;
        const size_t k = n < room ? n : room;
        memcpy(x->errbody + x->errbody_len, data, k);
        x->errbody_len += k;
        x->errbody[x->errbody_len] = '\0';
        return n;
    }
    if (x->grow != NULL) {
        if (x->got + n > x->max) {
            x->overflow = 1;
            return 0;
        }
        if (x->got + n > x->cap) {
            uint64_t cap = x->cap ? x->cap * 2 : 65536;
            while (cap < x->got + n) {
                cap *= 2;
            }
            uint8_t *p = hd_realloc(*x->grow, (size_t)cap);
            if (p == NULL) {
                x->overflow = 2;
                return 0;
            }
            *x->grow = p;
            x->cap = cap;
        }
        memcpy(*x->grow + x->got, data, n);
    } else {
        if (x->got + n > x->len) {
            x->overflow = 1;
            return 0;
        }
        memcpy(x->dst + x->got, data, n);
    }
    x->got += n;
    return n;
}

/* Bytes a low-speed window of x must move. */
static curl_off_t window_bytes(const xfer *x)
{
    return (curl_off_t)(SRC_LOW_SPEED_BPS * x->stall_ms / 1000.0);
}

/* The low-speed limit: fails a transfer that moved fewer than window_bytes() in stall_ms.
 * A window starts when the transfer does and again each time it has moved that much, so a
 * body that stops after a burst is noticed stall_ms later (curl's own check averages). */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    xfer *x = arg;
    (void)dltotal;
    (void)ultotal;
    const double t = now_ms();
    if (x->moved_ms == 0.0 || dlnow + ulnow - x->moved >= window_bytes(x)) {
        x->moved = dlnow + ulnow;
        x->moved_ms = t;
        return 0;
    }
    if (t - x->moved_ms > x->stall_ms) {
        x->stalled = 1;
        return 1;
    }
    return 0;
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *arg)
{
    xfer *x = arg;
    const size_t n = size * nmemb;
    if (n > 5 && strncasecmp(line, "HTTP/", 5) == 0) {
        x->content_range[0] = '\0'; /* a new answer (after a 100 Continue) */
    }
    if (n > 14 && strncasecmp(line, "Content-Range:", 14) == 0) {
        size_t a = 14, b = n;
        while (a < b && (line[a] == ' ' || line[a] == '\t')) {
            a++;
        }
        while (b > a && (line[b - 1] == '\r' || line[b - 1] == '\n' || line[b - 1] == ' ')) {
            b--;
        }
        if (b - a < sizeof(x->content_range)) {
            memcpy(x->content_range, line + a, b - a);
            x->content_range[b - a] = '\0';
        }
    }
    if (n > 5 && strncasecmp(line, "ETag:", 5) == 0) {
        size_t a = 5, b = n;
        while (a < b && (line[a] == ' ' || line[a] == '\t')) {
            a++;
        }
        while (b > a && (line[b - 1] == '\r' || line[b - 1] == '\n' || line[b - 1] == ' ')) {
            b--;
        }
        if (b - a < sizeof(x->etag)) {
            memcpy(x->etag, line + a, b - a);
            x->etag[b - a] = '\0';
        }
    }
    return n;
}

static size_t on_upload(char *buf, size_t size, size_t nmemb, void *arg)
{
    xfer *x = arg;
    const uint64_t left = x->body_len - x->body_pos;
    const size_t k = (size_t)(left < size * nmemb ? left : size * nmemb);
    memcpy(buf, x->body + x->body_pos, k);
    x->body_pos += k;
    return k;
}

/* Adds SigV4 headers to x->hdrs for an s3:// store. */
static int sign(const src_conn *c, xfer *x, const char *range)
{
    const src_store *s = c->s;
    if (s->kind != SRC_S3 || s->cfg.access_key == NULL) {
        return 0;
    }
    char path[SRC_URL_MAX];
    if (src_object_path(s, x->object, path, sizeof(path)) != 0) {
        return -1;
    }
    char date[20];
    const time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof(date), "%Y%m%dT%H%M%SZ", &tm);
    char payload[65];
    if (x->method == X_PUT || x->method == X_POST) {
        sigv4_sha256_hex(x->body != NULL ? (const void *)x->body : "", (size_t)x->body_len,
                         payload);
    } else {
        sigv4_sha256_hex("", 0, payload);
    }
    sigv4_header h[5];
    unsigned n = 0;
    h[n++] = (sigv4_header){"host", s->host};
    h[n++] = (sigv4_header){"x-amz-content-sha256", payload};
    h[n++] = (sigv4_header){"x-amz-date", date};
    if (range != NULL) {
        h[n++] = (sigv4_header){"range", range};
    }
    if (s->cfg.session_token != NULL) {
        h[n++] = (sigv4_header){"x-amz-security-token", s->cfg.session_token};
    }
    const char *method = method_name(x->method);
    const sigv4_request r = {method,
                             path,
                             x->query != NULL ? x->query : "",
                             h,
                             n,
                             payload,
                             date,
                             s->cfg.region != NULL ? s->cfg.region : "us-east-1",
                             "s3",
                             s->cfg.access_key,
                             s->cfg.secret_key};
    char auth[1024], line[1200];
    if (sigv4_authorization(&r, auth, sizeof(auth), x->canon) != 0) {
        return -1;
    }
    struct curl_slist *l = x->hdrs;
    snprintf(line, sizeof(line), "x-amz-content-sha256: %s", payload);
    l = curl_slist_append(l, line);
    snprintf(line, sizeof(line), "x-amz-date: %s", date);
    l = l != NULL ? curl_slist_append(l, line) : NULL;
    if (l != NULL && s->cfg.session_token != NULL) {
        char *tok = hd_malloc(strlen(s->cfg.session_token) + 32);
        if (tok == NULL) {
            return -1;
        }
        sprintf(tok, "x-amz-security-token: %s", s->cfg.session_token);
        l = curl_slist_append(l, tok);
        hd_free(tok);
    }
    snprintf(line, sizeof(line), "Authorization: %s", auth);
    l = l != NULL ? curl_slist_append(l, line) : NULL;
    if (l == NULL) {
        return -1;
    }
    x->hdrs = l;
    return 0;
}

/* Prepares x's easy handle for its next attempt and adds it to the multi handle. */
static int start(src_conn *c, xfer *x)
{
    const src_store *s = c->s;
    char url[SRC_URL_MAX];
    if (src_object_url(s, x->object, url, sizeof(url)) != 0 ||
        (x->query != NULL && strlen(url) + strlen(x->query) + 2 > sizeof(url))) {
        return hd_err(HDMLP_E_INVAL, "%s: object name \"%s\" too long", s->url, x->object);
    }
    if (x->query != NULL) {
        strcat(url, "?");
        strcat(url, x->query);
    }
    CURL *e = c->n_idle > 0 ? c->idle[--c->n_idle] : curl_easy_init();
    if (e == NULL) {
        return hd_err(HDMLP_E_NOMEM, "libcurl: cannot create a handle");
    }
    curl_easy_reset(e);
    x->easy = e;
    x->got = 0;
    x->status = 0;
    x->overflow = 0;
    x->errbody_len = 0;
    x->errbody[0] = '\0';
    x->errbuf[0] = '\0';
    x->body_pos = 0;
    x->etag[0] = '\0';
    x->moved = 0;
    x->moved_ms = 0.0;
    x->stalled = 0;
    x->stall_ms = (double)s->cfg.stall_ms;
    x->range_bad = 0;
    x->content_range[0] = '\0';
    x->canon[0] = '\0';
    const double t0 = now_ms();
    if (x->deadline == 0.0) {
        x->deadline = t0 + (double)s->cfg.request_ms;
    }
    const double left_ms = x->deadline - t0;
    curl_slist_free_all(x->hdrs);
    x->hdrs = NULL;
    char range[64];
    const char *rng = NULL;
    if (x->method == X_GET && x->len > 0) {
        snprintf(range, sizeof(range), "bytes=%llu-%llu", (ull)x->offset,
                 (ull)(x->offset + x->len - 1));
        rng = range;
        char line[80];
        snprintf(line, sizeof(line), "Range: %s", range);
        x->hdrs = curl_slist_append(NULL, line);
    }
    if (x->method == X_PUT || x->method == X_POST) {
        x->hdrs = curl_slist_append(x->hdrs, "Expect:");
    }
    if (((x->method == X_GET && x->len > 0) || x->method == X_PUT || x->method == X_POST) &&
        x->hdrs == NULL) {
        return hd_err(HDMLP_E_NOMEM, "libcurl: out of memory for headers");
    }
    if (sign(c, x, rng) != 0) {
        return hd_err(HDMLP_E_NOMEM, "%s: cannot sign the request", url);
    }
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)s->cfg.connect_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, left_ms >= 1.0 ? (long)left_ms : 1L);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* keys are literal: "a/../b" is sent so */
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (s->cfg.ca_file != NULL) {
        curl_easy_setopt(e, CURLOPT_CAINFO, s->cfg.ca_file);
    }
    if (x->method == X_HEAD) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (x->method == X_PUT) {
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(e, CURLOPT_READDATA, x);
        curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->body_len);
    } else if (x->method == X_POST) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body != NULL ? (const char *)x->body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
    } else if (x->method == X_DELETE) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
        return hd_err(HDMLP_E_IO, "libcurl: cannot add a request for %s", url);
    }
    x->active = 1;
    c->requests++;
    return HDMLP_OK;
}

static void finish(src_conn *c, xfer *x)
{
    if (x->easy != NULL) {
        curl_multi_remove_handle(c->multi, x->easy);
        if (c->n_idle < c->depth) {
            c->idle[c->n_idle++] = x->easy;
        } else {
            curl_easy_cleanup(x->easy);
        }
        x->easy = NULL;
    }
    curl_slist_free_all(x->hdrs);
    x->hdrs = NULL;
    x->active = 0;
}

static int retryable_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_CONNECT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
        return 1;
    default:
        return 0;
    }
}

/* The <Code> of an S3 error body, or "". */
static void s3_code(const xfer *x, char *out, size_t cap)
{
    out[0] = '\0';
    const char *a = strstr(x->errbody, "<Code>");
    const char *b = a != NULL ? strstr(a, "</Code>") : NULL;
    if (b != NULL && (size_t)(b - a - 6) < cap) {
        snprintf(out, cap, " (%.*s)", (int)(b - a - 6), a + 6);
    }
}

/* The detail of a 403: a signature the server computed otherwise is not a credentials
 * problem (the key id was found), so it is named as what it is, with the hash of the
 * canonical request signed, which servers that explain the mismatch (S3's
 * <CanonicalRequest>/<StringToSign>, a server's debug log) let one compare. */
static int denied(const src_conn *c, const xfer *x, const char *url, long st, const char *s3)
{
    const char *what = method_name(x->method);
    if (strstr(s3, "SignatureDoesNotMatch") != NULL) {
        const src_store *s = c->s;
        return hd_err(HDMLP_E_IO,
                      "%s %s: %ld signature mismatch%s: the server computed another signature "
                      "for this request (canonical request SHA-256 %s; region %s, Host %s): "
                      "a wrong secret key, region or endpoint, or a proxy that changed the "
                      "request",
                      what, url, st, s3, x->canon[0] ? x->canon : "(none)",
                      s->cfg.region != NULL ? s->cfg.region : "us-east-1", s->host);
    }
    if (strstr(s3, "RequestTimeTooSkewed") != NULL) {
        return hd_err(HDMLP_E_IO,
                      "%s %s: %ld access denied%s: this machine's clock differs from the "
                      "server's by more than S3 allows (15 minutes)",
                      what, url, st, s3);
    }
    return hd_err(HDMLP_E_IO, "%s %s: %ld access denied%s (check the credentials)", what, url,
                  st, s3);
}

/* Judges a finished attempt: 0 done, 1 retry, else a negative code (detail set). last: 0
 * when another attempt may follow, 1 when the attempts are used up, 2 when the request's
 * deadline leaves no time for another. */
static int judge(src_conn *c, xfer *x, CURLcode res, const char *url, int last)
{
    const char *what = method_name(x->method);
    char tries[96];
    if (last == 2) {
        snprintf(tries, sizeof(tries), "after %u attempts, at the request deadline of %u ms",
                 x->attempt + 1, c->s->cfg.request_ms);
    } else {
        snprintf(tries, sizeof(tries), "after %u attempts", x->attempt + 1);
    }
    char rng[64] = "";
    if (x->method == X_GET && x->len > 0) {
        snprintf(rng, sizeof(rng), " bytes %llu-%llu", (ull)x->offset,
                 (ull)(x->offset + x->len - 1));
    }
    if (x->overflow == 2) {
        return hd_err(HDMLP_E_NOMEM, "%s %s: out of memory for the body", what, url);
    }
    if (x->overflow == 1) {
        return hd_err(HDMLP_E_IO,
                      "%s %s%s: the server sent more than the %llu bytes asked (does it "
                      "honour Range requests?)",
                      what, url, rng, (ull)(x->grow != NULL ? x->max : x->len));
    }
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
    if (x->range_bad == 2) {
        return hd_err(HDMLP_E_CORRUPT,
                      "%s %s%s: the object ends inside the range (Content-Range: %s): it is "
                      "shorter than the index says",
                      what, url, rng, x->content_range);
    }
    if (x->range_bad == 1) {
        if (!last) {
            return 1; /* another range's bytes: ask again, as for a cut body */
        }
        return hd_err(HDMLP_E_IO,
                      "%s %s%s: the server answered another range (Content-Range: %s) (%s)",
                      what, url, rng, x->content_range[0] ? x->content_range : "none", tries);
    }
    if (x->stalled) {
        return last ? hd_err(HDMLP_E_TIMEOUT,
                             "%s %s%s: stalled: fewer than %lld bytes moved in %.0f ms (the "
                             "low-speed limit, %.0f bytes/s) (%s)",
                             what, url, rng, (long long)window_bytes(x), x->stall_ms,
                             SRC_LOW_SPEED_BPS, tries)
                    : 1;
    }
    if (res != CURLE_OK) {
        if (retryable_curl(res) && !last) {
            return 1;
        }
        const int code = res == CURLE_OPERATION_TIMEDOUT ? HDMLP_E_TIMEOUT : HDMLP_E_IO;
        return hd_err(code, "%s %s%s: %s%s%s (%s)", what, url, rng, curl_easy_strerror(res),
                      x->errbuf[0] ? ": " : "", x->errbuf, tries);
    }
    const long st = x->status;
    char s3[96];
    s3_code(x, s3, sizeof(s3));
    if (st == 404 && x->method == X_DELETE) {
        return 0; /* nothing to delete */
    }
    if (st == 404) {
        return hd_err(HDMLP_E_NOTFOUND, "%s %s: 404 not found%s", what, url, s3);
    }
    if (st == 401 || st == 403) {
        return denied(c, x, url, st, s3);
    }
    if (st == 416) {
        return hd_err(HDMLP_E_CORRUPT,
                      "%s %s%s: 416 range not satisfiable: the object is shorter than the "
                      "index says",
                      what, url, rng);
    }
    if (st >= 500 || st == 429 || st == 408) {
        if (!last) {
            return 1;
        }
        return hd_err(HDMLP_E_IO, "%s %s%s: HTTP %ld%s (%s)", what, url, rng, st, s3, tries);
    }
    if (st < 200 || st >= 300) {
        return hd_err(HDMLP_E_IO, "%s %s%s: unexpected HTTP status %ld%s", what, url, rng, st,
                      s3);
    }
    if (x->method == X_HEAD) {
        curl_off_t len = -1;
        curl_easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
        if (len < 0) {
            return hd_err(HDMLP_E_IO, "HEAD %s: no Content-Length in the answer", url);
        }
        x->size = (uint64_t)len;
        return 0;
    }
    if (x->method == X_GET && x->len > 0) {
        if (st == 200 && x->offset != 0) {
            return hd_err(HDMLP_E_IO, "GET %s%s: the server ignored the Range header", url,
                          rng);
        }
        if (x->got < x->len) {
            if (!last) {
                return 1; /* a body cut short: ask again */
            }
            return hd_err(HDMLP_E_IO, "GET %s%s: body cut short at %llu of %llu bytes (%s)",
                          url, rng, (ull)x->got, (ull)x->len, tries);
        }
    }
    if (x->method == X_GET && x->grow != NULL) {
        curl_off_t len = -1;
        curl_easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
        if (len >= 0 && (uint64_t)len != x->got) {
            if (!last) {
                return 1;
            }
            return hd_err(HDMLP_E_IO, "GET %s: body cut short at %llu of %lld bytes (%s)", url,
                          (ull)x->got, (long long)len, tries);
        }
        x->size = x->got;
    }
    return 0;
}

int src_run(src_conn *c, xfer *xs, unsigned n)
{
    unsigned left = n, active = 0, next = 0;
    int rc = HDMLP_OK;
    const unsigned max_attempts = c->s->cfg.retries + 1;
    while (left > 0 && rc == HDMLP_OK) {
        const double now = now_ms();
        double wake = now + 1000.0;
        /* Start waiting transfers whose backoff has passed, in order. */
        for (unsigned i = next; i < n && active < c->depth && rc == HDMLP_OK; i++) {
            xfer *x = &xs[i];
            if (x->done || x->active) {
                continue;
            }
            if (x->not_before > now) {
                wake = x->not_before < wake ? x->not_before : wake;
                continue;
            }
            rc = start(c, x);
            active += rc == HDMLP_OK;
        }
        while (next < n && xs[next].done) {
            next++;
        }
        if (rc != HDMLP_OK) {
            break;
        }
        int running = 0;
        curl_multi_perform(c->multi, &running);
        CURLMsg *m;
        int q;
        while ((m = curl_multi_info_read(c->multi, &q)) != NULL && rc == HDMLP_OK) {
            if (m->msg != CURLMSG_DONE) {
                continue;
            }
            xfer *x = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            const CURLcode res = m->data.result;
            char url[SRC_URL_MAX];
            if (src_object_url(c->s, x->object, url, sizeof(url)) != 0) {
                snprintf(url, sizeof(url), "%s", c->s->url);
            }
            double back = SRC_BACKOFF_MS * (double)(1u << (x->attempt < 6 ? x->attempt : 6));
            back = back < SRC_BACKOFF_MAX_MS ? back : SRC_BACKOFF_MAX_MS;
            back *= 0.5 + (double)(rand_r(&c->seed) % 1000) / 1000.0;
            const double t_done = now_ms();
            /* Another attempt needs its backoff and a little time before the deadline. */
            const int last = x->attempt + 1 >= max_attempts       ? 1
                             : t_done + back + 1.0 >= x->deadline ? 2
                                                                  : 0;
            const int v = judge(c, x, res, url, last);
            finish(c, x);
            active--;
            if (v == 0) {
                x->done = 1;
                left--;
            } else if (v == 1) {
                x->attempt++;
                x->not_before = t_done + back;
                c->retries++;
            } else {
                rc = v;
            }
        }
        if (rc != HDMLP_OK || left == 0) {
            break;
        }
        const double t = now_ms();
        for (unsigned i = next; i < n; i++) {
            /* Retries scheduled above wake the loop when their backoff ends. */
            if (!xs[i].done && !xs[i].active && xs[i].not_before < wake) {
                wake = xs[i].not_before;
            }
        }
        int wait_ms = wake > t ? (int)(wake - t) + 1 : 0;
        if (active == 0 && wait_ms == 0) {
            continue;
        }
        if (wait_ms > 1000) {
            wait_ms = 1000;
        }
        curl_multi_poll(c->multi, NULL, 0, wait_ms, NULL);
    }
    for (unsigned i = 0; i < n; i++) {
        if (xs[i].active) {
            finish(c, &xs[i]);
        }
        curl_slist_free_all(xs[i].hdrs);
        xs[i].hdrs = NULL;
    }
    return rc;
}
