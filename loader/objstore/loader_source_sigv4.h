/*
 * AWS Signature Version 4 (mechanism only): canonical request, string to sign, signing key
 * and the Authorization header value, with OpenSSL's SHA-256 and HMAC. The caller decides
 * what to sign (loader_source_http.c); this file only computes.
 */
#ifndef HDMLP_LOADER_SIGV4_H
#define HDMLP_LOADER_SIGV4_H

#include <stddef.h>

typedef struct sigv4_header {
    const char *name;  /* lower case */
    const char *value; /* trimmed */
} sigv4_header;

typedef struct sigv4_request {
    const char *method;          /* "GET", "PUT", ... */
    const char *uri;             /* canonical (URI-encoded) path, "/" at least */
    const char *query;           /* canonical query string (sorted, encoded) or "" */
    const sigv4_header *headers; /* every signed header, any order */
    unsigned n_headers;
    const char *payload_hash; /* hex SHA-256 of the body, or "UNSIGNED-PAYLOAD" */
    const char *amz_date;     /* "YYYYMMDDTHHMMSSZ" (its first 8 characters date the scope) */
    const char *region;
    const char *service;
    const char *access_key;
    const char *secret_key;
} sigv4_request;

/* Lower-case hex SHA-256 of data[0..len) into out (65 bytes with the NUL). */
void sigv4_sha256_hex(const void *data, size_t len, char out[65]);

/* Writes the Authorization header value ("AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
 * Signature=...") into out and, when canon_hash is not NULL, the hex SHA-256 of the canonical
 * request (the third line of the string to sign, which servers such as S3 return with a
 * SignatureDoesNotMatch) into canon_hash. Returns 0, HDMLP_E_INVAL (-1) when out (cap bytes)
 * is too small, a field is missing or there are more than 16 headers, or HDMLP_E_NOMEM.
 * Thread-safe. */
int sigv4_authorization(const sigv4_request *r, char *out, size_t cap, char canon_hash[65]);

/* URI-encodes s[0..n) as SigV4 wants (unreserved characters kept, '/' kept when keep_slash,
 * everything else %XX upper case) into out. Returns the length, or HDMLP_E_INVAL (-1) if cap
 * is too small. */
int sigv4_uri_encode(const char *s, size_t n, int keep_slash, char *out, size_t cap);

#endif
