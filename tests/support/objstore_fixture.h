/*
 * Fixtures of the object-store tests (test_objstore*.c, one Criterion binary): servers on
 * 127.0.0.1 serving a test dataset under ROOT/bucket/ds, and the remote-vs-local check.
 * Starting a server skips the test (saying why) where nginx or python3 is missing.
 */
#ifndef HDMLP_TEST_OBJSTORE_FIXTURE_H
#define HDMLP_TEST_OBJSTORE_FIXTURE_H

#include "hdmlp.h"
#include "support/testds.h"

#include <stdint.h>
#include <sys/types.h>

/* The default dataset (600 samples, compressed). */
extern const testds_spec objstore_spec;
/* One segment of about 11 MiB: a multipart upload in 5 MiB parts. */
extern const testds_spec objstore_big;
/* The spec the next server's dataset is made from and objstore_same_as_local checks bytes
 * against, and its memory: raw bytes / objstore_mem_div (defaults: objstore_spec, 4). */
extern const testds_spec *objstore_cur;
extern uint64_t objstore_mem_div;

typedef struct objstore_server {
    pid_t pid;
    int port;
    char dir[512]; /* served root (the dataset is ROOT/bucket/ds) */
} objstore_server;

/* CLOCK_MONOTONIC in seconds. */
double objstore_now_s(void);
/* Starts tests/objstore/objstore_server.py with extra arguments; reads "PORT n". */
void objstore_start_py(objstore_server *s, const char *const *extra);
/* nginx serving s->dir over HTTP (port) and HTTPS (port + 1 slot: tls_port). */
void objstore_start_nginx(objstore_server *s, int *tls_port);
/* Stops the server and removes its root. */
void objstore_stop(objstore_server *s);
/* 1 when nothing listens on 127.0.0.1:port and this process may bind it. */
int objstore_port_free(int port);
/* A counter of objstore_server.py's /_stats (0 when absent). */
long objstore_server_stat(const objstore_server *s, const char *key);
/* A source config for s's S3 endpoint with the test key and `secret`. */
hdmlp_source_config *objstore_s3_config(const objstore_server *s, const char *secret);
/* Drains 2 epochs of ds at 1 / objstore_mem_div of its bytes (batch 16, seed 7) with
 * `threads` I/O threads, checking exactly-once and every sample's bytes; fills *st (when
 * not NULL) with the loader's stats; returns the delivered order (malloc'd, 2 N entries). */
uint64_t *objstore_drain(hdmlp_dataset *ds, hdmlp_refill refill, uint32_t threads,
                         hdmlp_stats *st);
/* Drains 2 epochs of ds (4 threads) and of the local copy under s (2 threads), checking
 * exactly-once and the bytes; asserts the two orders are the same. */
void objstore_same_as_local(const objstore_server *s, hdmlp_dataset *ds, hdmlp_refill refill);

#endif
