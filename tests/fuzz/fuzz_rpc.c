/*
 * libFuzzer target: the rpc codec's decode and validation (rpc/rpc_codec.c) of arbitrary
 * bytes, as the server runs it on every incoming call, against a fixed check (token
 * FX_TOKEN, world 4, self 1, max_data 4096).
 *
 * Properties: decoding never crashes, leaks or reads out of bounds; an accepted envelope
 * holds only valid messages (known kind, size within max_data, data readable, ranks in
 * range); re-encoding the accepted messages and decoding again gives the same messages.
 *
 * Built with -DFUZZ_GEN_CORPUS instead of -fsanitize=fuzzer, main() writes the seed corpus
 * into the directory given as argv[1] (see run.sh --gen-corpus).
 */
#include "format.h"
#include "rpc_codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FX_TOKEN 0x5eed5eed12345678ull

static const rpc_check fx_chk = {FX_TOKEN, 4, 1, 4096};

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_rpc: %s (%s)\n", what, hdmlp_last_error());
        abort();
    }
}

/* Header + fragments of msgs. */
static uint8_t *fx_envelope(uint64_t token, uint32_t from, uint32_t to, const peer_msg *msgs,
                            size_t n, size_t *len)
{
    uint8_t *out = malloc(RPC_HEADER_MAX);
    check(out != NULL, "malloc");
    size_t total = rpc_encode_header(token, from, to, out);
    for (size_t i = 0; i < n; i++) {
        uint8_t *f;
        size_t fl;
        check(rpc_encode_msg(&msgs[i], &f, &fl) == HDMLP_OK, "encode");
        out = realloc(out, total + fl);
        check(out != NULL, "realloc");
        memcpy(out + total, f, fl);
        total += fl;
        hd_free(f);
    }
    *len = total;
    return out;
}

static int same_msg(const peer_msg *a, const peer_msg *b)
{
    return a->kind == b->kind && a->from == b->from && a->to == b->to && a->token == b->token &&
           a->epoch == b->epoch && a->position == b->position && a->group == b->group &&
           a->slot == b->slot && a->prefetch == b->prefetch && a->credit == b->credit &&
           a->index == b->index && a->label == b->label && a->size == b->size &&
           (a->size == 0 || memcmp(a->data, b->data, a->size) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rpc_envelope e;
    const int rc = rpc_decode(&fx_chk, data, size, &e);
    if (rc != HDMLP_OK) {
        check(rc == HDMLP_E_CORRUPT || rc == HDMLP_E_RANGE || rc == HDMLP_E_PEER ||
                  rc == HDMLP_E_NOMEM,
              "unexpected error code");
        check(e.n == 0 && e.msgs == NULL && e.pb == NULL, "output not cleared on error");
        check(hdmlp_last_error()[0] != '\0', "error without detail");
        return 0;
    }
    check(e.token == FX_TOKEN && e.to == 1 && e.from < 4 && e.from != 1, "header");
    check(e.n <= RPC_MAX_MSGS, "message count");
    unsigned sum = 0;
    for (size_t i = 0; i < e.n; i++) {
        const peer_msg *m = &e.msgs[i];
        check(m->kind == PEER_REQUEST || m->kind == PEER_SAMPLE || m->kind == PEER_DONE,
              "kind");
        check(m->from == e.from && m->to == 1 && m->token == FX_TOKEN, "ranks");
        check(m->size <= fx_chk.max_data && m->prefetch <= 1, "size or prefetch");
        check(m->kind == PEER_SAMPLE || m->size == 0, "data outside SAMPLE");
        for (uint64_t k = 0; k < m->size; k++) {
            sum += m->data[k]; /* ASan: the bytes are there */
        }
        check(rpc_msg_check_send(m, 4, e.from, fx_chk.max_data) == HDMLP_OK,
              "accepted message fails the sender's check");
    }
    /* Round trip. */
    size_t len;
    uint8_t *again = fx_envelope(e.token, e.from, e.to, e.msgs, e.n, &len);
    rpc_envelope e2;
    check(rpc_decode(&fx_chk, again, len, &e2) == HDMLP_OK, "re-encoded envelope rejected");
    check(e2.n == e.n, "re-encoded count");
    for (size_t i = 0; i < e.n; i++) {
        check(same_msg(&e.msgs[i], &e2.msgs[i]), "re-encoded message differs");
    }
    rpc_envelope_free(&e2);
    free(again);
    rpc_envelope_free(&e);
    return (int)(sum & 0);
}

#ifdef FUZZ_GEN_CORPUS
static void write_seed(const char *dir, const char *name, const uint8_t *body, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    check(f != NULL && fwrite(body, 1, len, f) == len && fclose(f) == 0, "write seed");
}

int main(int argc, char **argv)
{
    check(argc == 2, "usage: gen DIR");
    static uint8_t payload[300];
    for (size_t i = 0; i < sizeof payload; i++) {
        payload[i] = (uint8_t)(i * 7 + 3);
    }
    peer_msg req, ans, pf, done;
    memset(&req, 0, sizeof req);
    req.kind = PEER_REQUEST;
    req.epoch = 2;
    req.position = 12345;
    req.group = 17;
    req.slot = 3;
    req.credit = 1 << 20;
    ans = req;
    ans.kind = PEER_SAMPLE;
    ans.credit = 0;
    ans.index = 999;
    ans.label = 4;
    ans.data = payload;
    ans.size = sizeof payload;
    pf = ans;
    pf.prefetch = 1;
    pf.size = 0;
    pf.data = NULL;
    memset(&done, 0, sizeof done);
    done.kind = PEER_DONE;
    const struct {
        const char *name;
        uint64_t token;
        uint32_t from, to;
        peer_msg msgs[4];
        size_t n;
    } seeds[] = {
        {"probe", FX_TOKEN, 0, 1, {{0}}, 0},
        {"request", FX_TOKEN, 0, 1, {req}, 1},
        {"answer", FX_TOKEN, 2, 1, {ans}, 1},
        {"prefetch-empty", FX_TOKEN, 3, 1, {pf}, 1},
        {"done", FX_TOKEN, 0, 1, {done}, 1},
        {"batch", FX_TOKEN, 2, 1, {req, ans, pf, done}, 4},
        {"wrong-token", FX_TOKEN ^ 1, 0, 1, {req}, 1},
        {"wrong-to", FX_TOKEN, 0, 2, {req}, 1},
        {"from-self", FX_TOKEN, 1, 1, {done}, 1},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        size_t len;
        uint8_t *b = fx_envelope(seeds[i].token, seeds[i].from, seeds[i].to, seeds[i].msgs,
                                 seeds[i].n, &len);
        write_seed(argv[1], seeds[i].name, b, len);
        free(b);
    }
    return 0;
}
#endif
