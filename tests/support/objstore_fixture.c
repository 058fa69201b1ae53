/*
 * Fixtures of the object-store tests (test_objstore*.c, one Criterion binary): the test
 * datasets, nginx and tests/objstore/objstore_server.py started on 127.0.0.1, and the
 * check that a remote dataset delivers what the local one does.
 */
#include "support/objstore_fixture.h"

#include "support/testds.h"

#include <criterion/criterion.h>
#include <curl/curl.h>

#include <arpa/inet.h>
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

const testds_spec objstore_spec = {.n_samples = 600,
                                   .chunk_size = 8,
                                   .chunks_per_segment = 8,
                                   .seed = 1301,
                                   .min_size = 0,
                                   .max_size = 3000,
                                   .compress = 1,
                                   .n_labels = 3};

const testds_spec objstore_big = {.n_samples = 160,
                                  .chunk_size = 8,
                                  .chunks_per_segment = 0,
                                  .seed = 1302,
                                  .min_size = 60000,
                                  .max_size = 80000,
                                  .compress = 0,
                                  .n_labels = 2};

const testds_spec *objstore_cur = &objstore_spec;
uint64_t objstore_mem_div = 4;

double objstore_now_s(void)
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

int objstore_port_free(int port)
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    const int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
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
static void make_root(objstore_server *s)
{
    const testds_spec *const sp = objstore_cur;
    cr_assert_eq(testds_mkdtemp("objstore", s->dir, sizeof(s->dir)), 0);
    char ds[600];
    snprintf(ds, sizeof(ds), "%s/bucket", s->dir);
    cr_assert_eq(mkdir(ds, 0755), 0);
    snprintf(ds, sizeof(ds), "%s/bucket/ds", s->dir);
    cr_assert_eq(testds_write(ds, sp), HDMLP_OK, "%s", hdmlp_last_error());
}

void objstore_start_py(objstore_server *s, const char *const *extra)
{
    if (!have("python3")) {
        cr_skip_test("python3 not found: the object-store server cannot run");
    }
    make_root(s);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    char script[600];
    snprintf(script, sizeof(script), "%s/tests/objstore/objstore_server.py", HDMLP_SOURCE_DIR);
    /* Debian's python3 (its python3-botocore for --botocore-check), else the one on PATH. */
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    const char *argv[24] = {py, script, "--root", s->dir};
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
        execvp(py, (char *const *)argv);
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

void objstore_start_nginx(objstore_server *s, int *tls_port)
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
    const double t0 = objstore_now_s();
    while (!(can_connect(s->port) && can_connect(*tls_port)) && objstore_now_s() - t0 < 10) {
        usleep(20000);
    }
    cr_assert(can_connect(s->port), "nginx did not start (see %s/error.log)", s->dir);
}

void objstore_stop(objstore_server *s)
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

long objstore_server_stat(const objstore_server *s, const char *key)
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

hdmlp_source_config *objstore_s3_config(const objstore_server *s, const char *secret)
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

uint64_t *objstore_drain(hdmlp_dataset *ds, hdmlp_refill refill, uint32_t threads,
                         hdmlp_stats *st)
{
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    hdmlp_config *cfg = NULL;
    hdmlp_config_create(&cfg);
    hdmlp_config_set_memory(cfg, hdmlp_dataset_raw_bytes(ds) / objstore_mem_div);
    hdmlp_config_set_epochs(cfg, 2);
    hdmlp_config_set_batch_size(cfg, 16);
    hdmlp_config_set_seed(cfg, 7);
    hdmlp_config_set_refill(cfg, refill);
    hdmlp_config_set_threads(cfg, threads);
    hdmlp_loader *ld = NULL;
    cr_assert_eq(hdmlp_loader_create(ds, cfg, &ld), HDMLP_OK, "%s", hdmlp_last_error());
    uint64_t *order = calloc(2 * n, sizeof(uint64_t));
    uint8_t *seen = calloc(2 * n, 1);
    uint8_t *buf = malloc(objstore_cur->max_size + 1);
    uint64_t k = 0;
    hdmlp_batch *b;
    int rc;
    while ((rc = hdmlp_loader_next(ld, &b)) == HDMLP_OK) {
        const hdmlp_sample_view *v = hdmlp_batch_samples(b);
        for (size_t i = 0; i < hdmlp_batch_size(b); i++) {
            cr_assert_eq(seen[hdmlp_batch_epoch(b) * n + v[i].index]++, 0);
            testds_fill(v[i].index, objstore_cur->seed, buf, v[i].size);
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
    if (st != NULL) {
        hdmlp_loader_stats(ld, st, sizeof *st);
    }
    hdmlp_loader_free(ld);
    hdmlp_config_free(cfg);
    free(seen);
    free(buf);
    return order;
}

/* The order of the same dataset read from the local directory. */
static uint64_t *local_order(const objstore_server *s, hdmlp_refill refill)
{
    char dir[700];
    snprintf(dir, sizeof(dir), "%s/bucket/ds", s->dir);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open(dir, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    uint64_t *o = objstore_drain(ds, refill, 2, NULL);
    hdmlp_dataset_close(ds);
    return o;
}

void objstore_same_as_local(const objstore_server *s, hdmlp_dataset *ds, hdmlp_refill refill)
{
    uint64_t *remote = objstore_drain(ds, refill, 4, NULL);
    uint64_t *local = local_order(s, refill);
    const uint64_t n = hdmlp_dataset_sample_count(ds);
    cr_assert_eq(memcmp(remote, local, 2 * n * sizeof(uint64_t)), 0,
                 "remote order differs from the local dataset's");
    free(remote);
    free(local);
}
