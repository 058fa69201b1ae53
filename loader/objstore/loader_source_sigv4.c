/*
 * AWS Signature Version 4: the canonical request, the string to sign, the derived signing
 * key (HMAC chain over date, region, service) and the final signature. Checked against
 * AWS's published test vectors in tests/loader/objstore/test_objstore_sigv4.c.
 */
#include "loader_source_sigv4.h"

#include "hd_base.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIGV4_MAX_HEADERS 16
#define SIGV4_TEXT_MAX 8192

static void hex(const unsigned char *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

void sigv4_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256(data, len, md);
    hex(md, sizeof(md), out);
}

static int hmac(const void *key, size_t key_len, const char *msg, unsigned char out[32])
{
    unsigned int n = 32;
    return HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, strlen(msg), out,
                &n) != NULL &&
                   n == 32
               ? 0
               : HDMLP_E_INVAL;
}

int sigv4_uri_encode(const char *s, size_t n, int keep_slash, char *out, size_t cap)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        const int plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                          (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
                          c == '~' || (c == '/' && keep_slash);
        if (o + (plain ? 1 : 3) >= cap) {
            return HDMLP_E_INVAL;
        }
        if (plain) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = digits[c >> 4];
            out[o++] = digits[c & 15];
        }
    }
    if (o >= cap) {
        return HDMLP_E_INVAL;
    }
    out[o] = '\0';
    return (int)o;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const sigv4_header *)a)->name, ((const sigv4_header *)b)->name);
}

/* Appends printf-style text at *pos; HDMLP_E_INVAL once the buffer is full. */
static int put(char *buf, size_t cap, size_t *pos, const char *fmt, const char *a,
               const char *b)
{
    const int n = snprintf(buf + *pos, cap - *pos, fmt, a, b);
    if (n < 0 || (size_t)n >= cap - *pos) {
        return HDMLP_E_INVAL;
    }
    *pos += (size_t)n;
    return 0;
}

int sigv4_authorization(const sigv4_request *r, char *out, size_t cap, char canon_hash_out[65])
{
    if (r == NULL || r->method == NULL || r->uri == NULL || r->query == NULL ||
        r->payload_hash == NULL || r->amz_date == NULL || strlen(r->amz_date) != 16 ||
        r->region == NULL || r->service == NULL || r->access_key == NULL ||
        r->secret_key == NULL || r->n_headers > SIGV4_MAX_HEADERS ||
        (r->n_headers > 0 && r->headers == NULL)) {
        return HDMLP_E_INVAL;
    }
    sigv4_header h[SIGV4_MAX_HEADERS];
    if (r->n_headers > 0) {
        memcpy(h, r->headers, r->n_headers * sizeof(h[0]));
        qsort(h, r->n_headers, sizeof(h[0]), by_name);
    }
    char signed_names[1024];
    size_t sn = 0;
    signed_names[0] = '\0';
    for (unsigned i = 0; i < r->n_headers; i++) {
        if (put(signed_names, sizeof(signed_names), &sn, "%s%s", i ? ";" : "", h[i].name) !=
            0) {
            return HDMLP_E_INVAL;
        }
    }
    char *canon = hd_malloc(SIGV4_TEXT_MAX);
    if (canon == NULL) {
        return hd_err(HDMLP_E_NOMEM, "SigV4: no memory for the canonical request");
    }
    size_t cn = 0;
    int bad = put(canon, SIGV4_TEXT_MAX, &cn, "%s\n%s\n", r->method, r->uri);
    bad |= put(canon, SIGV4_TEXT_MAX, &cn, "%s\n%s", r->query, "");
    for (unsigned i = 0; i < r->n_headers && !bad; i++) {
        bad |= put(canon, SIGV4_TEXT_MAX, &cn, "%s:%s\n", h[i].name, h[i].value);
    }
    bad |= put(canon, SIGV4_TEXT_MAX, &cn, "\n%s\n%s", signed_names, r->payload_hash);
    if (bad) {
        hd_free(canon);
        return HDMLP_E_INVAL;
    }
    char canon_hash[65];
    sigv4_sha256_hex(canon, cn, canon_hash);
    hd_free(canon);
    if (canon_hash_out != NULL) {
        memcpy(canon_hash_out, canon_hash, sizeof(canon_hash));
    }

    char date[9];
    memcpy(date, r->amz_date, 8);
    date[8] = '\0';
    char scope[256];
    if (snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", date, r->region, r->service) >=
        (int)sizeof(scope)) {
        return HDMLP_E_INVAL;
    }
    char to_sign[512];
    if (snprintf(to_sign, sizeof(to_sign), "AWS4-HMAC-SHA256\n%s\n%s\n%s", r->amz_date, scope,
                 canon_hash) >= (int)sizeof(to_sign)) {
        return HDMLP_E_INVAL;
    }
    char kkey[256];
    if (snprintf(kkey, sizeof(kkey), "AWS4%s", r->secret_key) >= (int)sizeof(kkey)) {
        return HDMLP_E_INVAL;
    }
    unsigned char k[32], k2[32], sig[32];
    const int failed = hmac(kkey, strlen(kkey), date, k) != 0 ||
                       hmac(k, 32, r->region, k2) != 0 || hmac(k2, 32, r->service, k) != 0 ||
                       hmac(k, 32, "aws4_request", k2) != 0 || hmac(k2, 32, to_sign, sig) != 0;
    OPENSSL_cleanse(kkey, sizeof(kkey));
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(k2, sizeof(k2));
    if (failed) {
        return HDMLP_E_INVAL;
    }
    char sig_hex[65];
    hex(sig, sizeof(sig), sig_hex);
    const int n =
        snprintf(out, cap, "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
                 r->access_key, scope, signed_names, sig_hex);
    return n < 0 || (size_t)n >= cap ? HDMLP_E_INVAL : 0;
}
