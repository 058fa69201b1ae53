/*
 * Datasets in object storage, against real servers on 127.0.0.1 started by the tests:
 * nginx (range GETs over HTTP and HTTPS with the committed test CA) and the suite's object
 * store tests/objstore/objstore_server.py (S3 with SigV4 checked on every request, fault
 * injection). Each run delivers every sample exactly once with the bytes checked, in the
 * local dataset's order for the seed; bad credentials, missing objects, truncated objects,
 * dropped connections, 503s, cut bodies and stalled servers give a retry or a clear error
 * naming the URL, never a hang or a wrong sample. Tests skip (saying why) where nginx or
 * python3 is missing.
 */
#include "hdmlp.h"
#include "loader_dataset.h"
#include "support/testds.h"

#include <criterion/criterion.h>
#include <curl/curl.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef HDMLP_SOURCE_DIR
#error "HDMLP_SOURCE_DIR must be defined"
#endif

static const testds_spec spec = {.n_samples = 600,
                                 .chunk_size = 8,
                                 .chunks_per_segment = 8,
                                 .seed = 1301,
                                 .min_size = 0,
                                 .max_size = 3000,
                                 .compress = 1,
                                 .n_labels = 3};

/* One segment of about 11 MiB: a multipart upload in 5 MiB parts. */
static const testds_spec big = {.n_samples = 160,
                                .chunk_size = 8,
                                .chunks_per_segment = 0,
                                .seed = 1302,
                                .min_size = 60000,
                                .max_size = 80000,
                                .compress = 0,
                                .n_labels = 2};

/* The spec drain() checks bytes against, and its memory: raw bytes / mem_div. */
static const testds_spec *cur = &spec;
static uint64_t mem_div = 4;

typedef struct server {
    pid_t pid;
    int port;
    char dir[512]; /* served root (the dataset is ROOT/bucket/ds) */
} server;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int free_port(void)
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

static int can_connect(int port)
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    const int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

static int have(const char *prog)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

/* A dataset under ROOT/bucket/ds. */
static void make_root(server *s)
{
    const testds_spec *const sp = cur;
    cr_assert_eq(testds_mkdtemp("objstore", s->dir, sizeof(s->dir)), 0);
    char ds[600];
    snprintf(ds, sizeof(ds), "%s/bucket", s->dir);
    cr_assert_eq(mkdir(ds, 0755), 0);
    snprintf(ds, sizeof(ds), "%s/bucket/ds", s->dir);
    cr_assert_eq(testds_write(ds, sp), HDMLP_OK, "%s", hdmlp_last_error());
}

/* Starts tests/objstore/objstore_server.py with extra arguments; reads "PORT n". */
static void start_py(server *s, const char *const *extra)
{
    if (!have("python3")) {
        cr_skip_test("python3 not found: the object-store server cannot run");
    }
    make_root(s);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    char script[600];
    snprintf(script, sizeof(script), "%s/tests/objstore/objstore_server.py", HDMLP_SOURCE_DIR);
    const char *argv[24] = {"python3", script, "--root", s->dir};
    int n = 4;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 22; i++) {
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    s->pid = fork();
    cr_assert(s->pid >= 0);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a failed test takes its server with it */
        dup2(p[1], 1);
        close(p[0]);
        execvp("python3", (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    struct pollfd pf = {p[0], POLLIN, 0};
    char line[64] = "";
    size_t got = 0;
    while (got < sizeof(line) - 1 && strchr(line, '\n') == NULL && poll(&pf, 1, 20000) == 1) {
        const ssize_t r = read(p[0], line + got, sizeof(line) - 1 - got);
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
        line[got] = '\0';
    }
    close(p[0]);
    cr_assert_eq(sscanf(line, "PORT %d", &s->port), 1, "object-store server did not start");
}

/* nginx serving s->dir over HTTP (port) and HTTPS (port + 1 slot: tls_port). */
static void start_nginx(server *s, int *tls_port)
{
    if (access("/usr/sbin/nginx", X_OK) != 0 && !have("nginx")) {
        cr_skip_test("nginx not installed (Debian package nginx-light): HTTP tests skipped");
    }
    make_root(s);
    s->port = free_port();
    *tls_port = free_port();
    char conf[600], tmp[600];
    snprintf(conf, sizeof(conf), "%s/nginx.conf", s->dir);
    snprintf(tmp, sizeof(tmp), "%s/tmp", s->dir);
    cr_assert_eq(mkdir(tmp, 0755), 0);
    char text[8192];
    snprintf(text, sizeof(text),
             "%sdaemon off;\nworker_processes 1;\nerror_log %s/error.log;\npid %s/nginx.pid;\n"
             "events { worker_connections 128; }\n"
             "http {\n access_log off;\n client_body_temp_path %s; proxy_temp_path %s;\n"
             " fastcgi_temp_path %s; uwsgi_temp_path %s; scgi_temp_path %s;\n"
             " server { listen 127.0.0.1:%d; root %s; }\n"
             " server { listen 127.0.0.1:%d ssl http2; root %s;\n"
             "  ssl_certificate %s/tests/data/tls/rank.pem;\n"
             "  ssl_certificate_key %s/tests/data/tls/rank.key; }\n}\n",
             /* As root, workers would run as nobody and not read the 0700 test dirs. */
             geteuid() == 0 ? "user root;\n" : "", s->dir, s->dir, tmp, tmp, tmp, tmp, tmp,
             s->port, s->dir, *tls_port, s->dir, HDMLP_SOURCE_DIR, HDMLP_SOURCE_DIR);
    cr_assert_eq(testds_write_file(conf, text, strlen(text)), 0);
    s->pid = fork();
    cr_assert(s->pid >= 0);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        const int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execlp("nginx", "nginx", "-c", conf, "-p", s->dir, (char *)NULL);
        execl("/usr/sbin/nginx", "nginx", "-c", conf, "-p", s->dir, (char *)NULL);
        _exit(127);
    }
    const double t0 = now_s();
    while (!(can_connect(s->port) && can_connect(*tls_port)) && now_s() - t0 < 10) {
        usleep(20000);
    }
    cr_assert(can_connect(s->port), "nginx did not start (see %s/error.log)", s->dir);
}

static void stop(server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    testds_rm_rf(s->dir);
}

static size_t stat_body(char *data, size_t size, size_t nmemb, void *arg)
{
    char *buf = arg;
    const size_t have = strlen(buf), n = size * nmemb;
    const size_t k = have + n < 4095 ? n : 4095 - have;
    memcpy(buf + have, data, k);
    buf[have + k] = '\0';
    return n;
}

/* A counter of objstore_server.py's /_stats (0 when absent). */
static long server_stat(const server *s, const char *key)
{
    char url[96], body[4096] = "", pat[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/_stats", s->port);
    CURL *c = curl_easy_init();
    cr_assert_not_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, stat_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    cr_assert_eq(curl_easy_perform(c), CURLE_OK);
    curl_easy_cleanup(c);
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    const char *p = strstr(body, pat);
    return p != NULL ? strtol(p + strlen(pat), NULL, 10) : 0;
}

static hdmlp_source_config *s3_config(const server *s, const char *secret)
{
    hdmlp_source_config *c = NULL;
    cr_assert_eq(hdmlp_source_config_create(&c), HDMLP_OK);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", s->port);
    cr_assert_eq(hdmlp_source_config_set_endpoint(c, ep), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_credentials(c, "hdmlptestkey", secret, NULL),
                 HDMLP_OK);
    return c;
}

/* Drains 2 epochs at 25 % memory (1 / mem_div), checking exactly-once and every sample's bytes;
 * returns the delivered order (malloc'd, 2 N entries). */
static uint64_t *drain(hdmlp_dataset *ds, hdmlp_refill refill, uint32_t threads)
{
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / mem_div);
    hdmlp_config_set_epochs(cfg, 2);
    hdmlp_config_set_batch_size(cfg, 16);
    hdmlp_config_set_seed(cfg, 7);
    hdmlp_config_set_refill(cfg, refill);
    hdmlp_config_set_threads(cfg, threads);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    uint64_t *order = calloc(2 * n, sizeof(uint64_t));
    uint8_t *seen = calloc(2 * n, 1);
    uint8_t *buf = malloc(cur->max_size + 1);
    uint64_t k = 0;
    hdmlp_batch *b;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            cr_assert_eq(seen[hdmlp_batch_epoch(b) * n + v[i].index]++, 0);
            testds_fill(v[i].index, cur->seed, buf, v[i].size);
            cr_assert_eq(memcmp(buf, v[i].data, v[i].size), 0, "sample %llu bytes differ",
                         (unsigned long long)v[i].index);
            cr_assert_lt(k, 2 * n);
            order[k++] = v[i].index;
        }
        hdmlp_batch_release(b);
    }
    cr_assert_eq(rc, HDMLP_END, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert_eq(k, 2 * n, "delivered %llu of %llu", (unsigned long long)k,
                 (unsigned long long)(2 * n));
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    free(seen);
    free(buf);
    return order;
}

/* The order of the same dataset read from the local directory. */
static uint64_t *local_order(const server *s, hdmlp_refill refill)
{
    char dir[700];
    snprintf(dir, sizeof(dir), "%s/bucket/ds", s->dir);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    uint64_t *o = drain(ds, refill, 2);
    hdmlp_dataset_close(ds);
    return o;
}

static void same_as_local(const server *s, hdmlp_dataset *ds, hdmlp_refill refill)
{
    uint64_t *remote = drain(ds, refill, 4);
    uint64_t *local = local_order(s, refill);
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    cr_assert_eq(memcmp(remote, local, 2 * n * sizeof(uint64_t)), 0,
                 "remote order differs from the local dataset's");
    free(remote);
    free(local);
}

Test(objstore, http_nginx_exactly_once_local_order, .timeout = 120)
{
    server s = {0};
    int tls = 0;
    start_nginx(&s, &tls);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds/", s.port);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(url, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_sample_count(ds), spec.n_samples);
    same_as_local(&s, ds, HDMLP_REFILL_WHOLE);
    same_as_local(&s, ds, HDMLP_REFILL_RANGES);
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK, "%s", hdmlp_last_error());
    /* One sample alone, through the dataset's own connection. */
    uint8_t buf[4096], want[4096];
    size_t size = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 17, buf, sizeof(buf), &size), HDMLP_OK, "%s",
                 hdmlp_last_error());
    testds_fill(17, spec.seed, want, size);
    cr_assert_eq(memcmp(buf, want, size), 0);
    hdmlp_dataset_close(ds);
    stop(&s);
}

Test(objstore, https_nginx_with_the_test_ca, .timeout = 120)
{
    server s = {0};
    int tls = 0;
    start_nginx(&s, &tls);
    char url[128], ca[600];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/bucket/ds", tls);
    snprintf(ca, sizeof(ca), "%s/tests/data/tls/ca.pem", HDMLP_SOURCE_DIR);
    hdmlp_source_config *c = NULL;
    cr_assert_eq(hdmlp_source_config_create(&c), HDMLP_OK);
    /* Without the test CA the server's certificate is refused, naming the URL. */
    hdmlp_dataset *ds = NULL;
    int rc = hdmlp_dataset_open_source(url, c, &ds);
    cr_assert_eq(rc, HDMLP_E_IO, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), url) != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_source_config_set_ca_file(c, ca), HDMLP_OK);
    rc = hdmlp_dataset_open_source(url, c, &ds);
    cr_assert_eq(rc, HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_source_config_free(c);
    same_as_local(&s, ds, HDMLP_REFILL_AUTO);
    hdmlp_dataset_close(ds);
    stop(&s);
}

Test(objstore, http_missing_and_truncated_objects, .timeout = 60)
{
    server s = {0};
    int tls = 0;
    start_nginx(&s, &tls);
    char url[128], path[700];
    hdmlp_dataset *ds = NULL;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/none", s.port);
    cr_assert_eq(hdmlp_dataset_open(url, &ds), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "404") != NULL, "%s", hdmlp_last_error());
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    /* A segment cut short: refused at open, naming the segment's URL. */
    snprintf(path, sizeof(path), "%s/bucket/ds/segment-000002", s.dir);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(truncate(path, st.st_size - 100), 0);
    cr_assert_eq(hdmlp_dataset_open(url, &ds), HDMLP_E_CORRUPT);
    cr_assert(strstr(hdmlp_last_error(), "segment-000002") != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "truncated") != NULL, "%s", hdmlp_last_error());
    /* A segment missing. */
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(hdmlp_dataset_open(url, &ds), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "segment-000002") != NULL, "%s", hdmlp_last_error());
    cr_assert_null(ds);
    stop(&s);
}

Test(objstore, s3_sigv4_exactly_once_local_order, .timeout = 120)
{
    server s = {0};
    const char *const args[] = {"--s3", NULL};
    start_py(&s, args);
    hdmlp_source_config *c = s3_config(&s, "hdmlp/test/secret");
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_OK, "%s",
                 hdmlp_last_error());
    same_as_local(&s, ds, HDMLP_REFILL_AUTO);
    hdmlp_dataset_close(ds);
    /* Kept-alive connections: far fewer connections than requests. */
    const long conns = server_stat(&s, "connections"), reqs = server_stat(&s, "requests");
    cr_assert_gt(reqs, 100);
    cr_assert_lt(conns * 5, reqs, "%ld connections for %ld requests", conns, reqs);
    /* A missing bucket or prefix: 404 naming the URL. */
    cr_assert_eq(hdmlp_dataset_open_source("s3://nobucket/ds", c, &ds), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "NoSuchBucket") != NULL, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/nods", c, &ds), HDMLP_E_NOTFOUND);
    cr_assert(strstr(hdmlp_last_error(), "/bucket/nods/index") != NULL, "%s",
              hdmlp_last_error());
    hdmlp_source_config_free(c);
    /* Wrong secret: the server recomputes the signature and refuses it at once. */
    c = s3_config(&s, "not/the/secret");
    const double t0 = now_s();
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_E_IO);
    cr_assert_lt(now_s() - t0, 5.0, "a 403 is not retried");
    cr_assert(strstr(hdmlp_last_error(), "SignatureDoesNotMatch") != NULL, "%s",
              hdmlp_last_error());
    cr_assert_null(ds);
    hdmlp_source_config_free(c);
    /* No credentials at all. */
    cr_assert_eq(hdmlp_source_config_create(&c), HDMLP_OK);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", s.port);
    hdmlp_source_config_set_endpoint(c, ep);
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_E_IO);
    cr_assert(strstr(hdmlp_last_error(), "AccessDenied") != NULL, "%s", hdmlp_last_error());
    hdmlp_source_config_free(c);
    stop(&s);
}

/* 503s, dropped connections and cut bodies are retried: the run is exact. */
Test(objstore, faults_are_retried_exactly_once, .timeout = 120)
{
    server s = {0};
    const char *const args[] = {"--s3", "--fault", "503:5,drop:7,truncate:11", NULL};
    start_py(&s, args);
    hdmlp_source_config *c = s3_config(&s, "hdmlp/test/secret");
    cr_assert_eq(hdmlp_source_config_set_retries(c, 20), HDMLP_OK);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/ds", c, &ds), HDMLP_OK, "%s",
                 hdmlp_last_error());
    hdmlp_source_config_free(c);
    same_as_local(&s, ds, HDMLP_REFILL_RANGES);
    hdmlp_dataset_close(ds);
    stop(&s);
}

/* Retries are bounded: with every segment GET failing, the loader fails with the URL. */
Test(objstore, persistent_faults_fail_with_the_url, .timeout = 60)
{
    server s = {0};
    const char *const args[] = {"--fault", "503:1", NULL};
    start_py(&s, args);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    hdmlp_source_config *c = NULL;
    cr_assert_eq(hdmlp_source_config_create(&c), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_retries(c, 2), HDMLP_OK);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source(url, c, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_source_config_free(c);
    uint8_t buf[4096];
    size_t size = 0;
    cr_assert_eq(hdmlp_dataset_read_sample(ds, 3, buf, sizeof(buf), &size), HDMLP_E_IO);
    cr_assert(strstr(hdmlp_last_error(), "503") != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "after 3 attempts") != NULL, "%s", hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), url) != NULL, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    stop(&s);
}

/* A server that stops sending mid-body: a timeout error within the configured limits. */
Test(objstore, stalled_server_times_out, .timeout = 60)
{
    server s = {0};
    const char *const args[] = {"--fault", "stall:1", "--stall-seconds", "60", NULL};
    start_py(&s, args);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    hdmlp_source_config *c = NULL;
    cr_assert_eq(hdmlp_source_config_create(&c), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_timeouts(c, 2000, 1000, 5000), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_retries(c, 1), HDMLP_OK);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source(url, c, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_source_config_free(c);
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    const double t0 = now_s();
    hdmlp_batch *b = NULL;
    const int rc = hdmlp_loader_next(ld, &b);
    cr_assert_eq(rc, HDMLP_E_TIMEOUT, "%s: %s", hdmlp_err_name(rc), hdmlp_last_error());
    cr_assert_lt(now_s() - t0, 15.0);
    cr_assert(strstr(hdmlp_last_error(), "segment-") != NULL, "%s", hdmlp_last_error());
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    stop(&s);
}

static void on_upload(void *arg, uint64_t done, uint64_t total)
{
    uint64_t *last = arg;
    cr_assert_geq(done, last[0]);
    cr_assert_leq(done, total);
    last[0] = done;
    last[1] = total;
    last[2]++;
}

/* Upload: segments (multipart above the part size), the index last; the copy reads as the
 * original; refused for http(s) and with a wrong secret. */
Test(objstore, upload_multipart_then_read, .timeout = 120)
{
    cur = &big;
    mem_div = 2; /* large samples: 25 % holds too few chunks */
    server s = {0};
    const char *const args[] = {"--s3", NULL};
    start_py(&s, args);
    char dir[700];
    snprintf(dir, sizeof(dir), "%s/bucket/ds", s.dir);
    hdmlp_source_config *c = s3_config(&s, "hdmlp/test/secret");
    cr_assert_eq(hdmlp_source_config_set_part_size(c, 1000), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_source_config_set_part_size(c, 5u << 20), HDMLP_OK);
    uint64_t seen[3] = {0, 0, 0};
    cr_assert_eq(hdmlp_dataset_upload(dir, "s3://bucket/copy", c, on_upload, seen), HDMLP_OK,
                 "%s", hdmlp_last_error());
    cr_assert_eq(seen[0], seen[1], "progress ends at the total");
    cr_assert_geq(seen[2], 2, "a wave of parts, then the index");
    char uploads[700];
    snprintf(uploads, sizeof(uploads), "%s/.uploads", s.dir);
    cr_assert_eq(access(uploads, F_OK), 0, "the segment went as a multipart upload");
    char copy[700], orig[700];
    snprintf(copy, sizeof(copy), "%s/bucket/copy/segment-000000", s.dir);
    snprintf(orig, sizeof(orig), "%s/bucket/ds/segment-000000", s.dir);
    uint8_t *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    cr_assert_eq(testds_read_file(copy, &a, &la), 0);
    cr_assert_eq(testds_read_file(orig, &b, &lb), 0);
    cr_assert_gt(lb, (size_t)(10u << 20));
    cr_assert(la == lb && memcmp(a, b, la) == 0, "uploaded segment differs");
    free(a);
    free(b);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source("s3://bucket/copy", c, &ds), HDMLP_OK, "%s",
                 hdmlp_last_error());
    same_as_local(&s, ds, HDMLP_REFILL_AUTO);
    /* --calibrate probes the store with range GETs (its 11 MiB segment is large enough). */
    hdmlp_config *lc = NULL;
    hdmlp_config_create(&lc);
    hdmlp_config_set_memory(lc, hdmlp_dataset_raw_bytes(ds) / 2);
    hdmlp_config_set_batch_size(lc, 16);
    cr_assert_eq(hdmlp_config_set_calibrate(lc, 1), HDMLP_OK);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, lc, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_stats st;
    hdmlp_loader_stats(ld, &st);
    cr_assert_eq(st.calibrated, 1);
    cr_assert_gt(st.source_op_ns_start, 0);
    cr_assert_gt(st.source_bytes_per_s_start, 0);
    hdmlp_loader_free(ld);
    hdmlp_config_free(lc);
    hdmlp_dataset_close(ds);
    /* Uploading again replaces the copy (the old index goes first). */
    cr_assert_eq(hdmlp_dataset_upload(dir, "s3://bucket/copy", c, NULL, NULL), HDMLP_OK, "%s",
                 hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_upload(dir, "http://127.0.0.1:1/x", c, NULL, NULL),
                 HDMLP_E_UNSUPPORTED);
    hdmlp_source_config_free(c);
    c = s3_config(&s, "not/the/secret");
    cr_assert_eq(hdmlp_dataset_upload(dir, "s3://bucket/other", c, NULL, NULL), HDMLP_E_IO);
    cr_assert(strstr(hdmlp_last_error(), "SignatureDoesNotMatch") != NULL, "%s",
              hdmlp_last_error());
    hdmlp_source_config_free(c);
    snprintf(copy, sizeof(copy), "%s/bucket/other/index", s.dir);
    cr_assert_neq(access(copy, F_OK), 0, "no index after a failed upload");
    stop(&s);
    cur = &spec;
    mem_div = 4;
}

/* The SSD tier caches remote chunks: after the first epoch nothing comes from the store. */
Test(objstore, ssd_tier_caches_remote_chunks, .timeout = 120)
{
    server s = {0};
    int tls = 0;
    start_nginx(&s, &tls);
    char url[128], ssd[700];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/bucket/ds", s.port);
    snprintf(ssd, sizeof(ssd), "%s/ssd", s.dir);
    cr_assert_eq(mkdir(ssd, 0755), 0);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(url, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / 4);
    hdmlp_config_set_epochs(cfg, 3);
    hdmlp_config_set_batch_size(cfg, 16);
    hdmlp_config_set_seed(cfg, 7);
    cr_assert_eq(hdmlp_config_set_ssd_cache(cfg, ssd, 64u << 20), HDMLP_OK);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    testds_seq seq = {0};
    cr_assert_eq(testds_drain(ld, &seq), HDMLP_END, "%s", hdmlp_last_error());
    cr_assert_eq(seq.n, 3 * spec.n_samples);
    uint64_t per_epoch[3] = {0, 0, 0};
    size_t known = 0;
    cr_assert_eq(hdmlp_loader_epoch_source_bytes(ld, per_epoch, 3, &known), HDMLP_OK);
    hdmlp_stats st;
    hdmlp_loader_stats(ld, &st);
    cr_assert_gt(st.ssd_staged_chunks, 0);
    cr_assert_gt(st.ssd_cache_bytes, 0);
    cr_assert_gt(per_epoch[0], 0);
    cr_assert_eq(per_epoch[1] + per_epoch[2], 0, "epochs 1-2 read %llu bytes from the store",
                 (unsigned long long)(per_epoch[1] + per_epoch[2]));
    free(seq.idx);
    free(seq.ep);
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    hdmlp_dataset_close(ds);
    stop(&s);
}
