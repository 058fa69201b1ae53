/*
 * Source configuration (the public hdmlp_source_config setters, AWS environment and
 * ~/.aws files) and object-store URLs: parsing http(s):// and s3:// dataset URLs into a
 * store, and the URL and signed path of each object.
 */
#include "loader_source.h"

#include "hd_base.h"
#include "loader_source_sigv4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SRC_URL_MAX 4096u

static char *dup_str(const char *s)
{
    if (s == NULL) {
        return NULL;
    }
    const size_t n = strlen(s) + 1;
    char *d = hd_malloc(n);
    if (d != NULL) {
        memcpy(d, s, n);
    }
    return d;
}

/* Replaces *slot with a copy of value (NULL clears). */
static int set_str(char **slot, const char *value, const char *what)
{
    char *d = NULL;
    if (value != NULL) {
        d = dup_str(value);
        if (d == NULL) {
            return hd_err(HDMLP_E_NOMEM, "source config: out of memory for the %s", what);
        }
    }
    hd_free(*slot);
    *slot = d;
    return HDMLP_OK;
}

int hdmlp_source_config_create(hdmlp_source_config **out)
{
    if (out == NULL) {
        return hd_err(HDMLP_E_INVAL, "source config: out is NULL");
    }
    *out = hd_calloc(1, sizeof(**out));
    if (*out == NULL) {
        return hd_err(HDMLP_E_NOMEM, "source config: out of memory");
    }
    (*out)->path_style = -1;
    (*out)->connect_ms = 10000;
    (*out)->stall_ms = 10000;
    (*out)->request_ms = 120000;
    (*out)->retries = 4;
    (*out)->part_size = UINT64_C(64) << 20;
    return HDMLP_OK;
}

static void config_clear(hdmlp_source_config *c)
{
    hd_free(c->endpoint);
    hd_free(c->region);
    hd_free(c->access_key);
    if (c->secret_key != NULL) {
        memset(c->secret_key, 0, strlen(c->secret_key));
    }
    hd_free(c->secret_key);
    hd_free(c->session_token);
    hd_free(c->ca_file);
}

void hdmlp_source_config_free(hdmlp_source_config *cfg)
{
    if (cfg != NULL) {
        config_clear(cfg);
        hd_free(cfg);
    }
}

int hdmlp_source_config_set_endpoint(hdmlp_source_config *cfg, const char *url)
{
    if (cfg == NULL) {
        return hd_err(HDMLP_E_INVAL, "source config: NULL config");
    }
    if (url != NULL && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        return hd_err(HDMLP_E_INVAL, "source config: endpoint \"%s\" is not an http(s):// URL",
                      url);
    }
    return set_str(&cfg->endpoint, url, "endpoint");
}

int hdmlp_source_config_set_region(hdmlp_source_config *cfg, const char *region)
{
    if (cfg == NULL) {
        return hd_err(HDMLP_E_INVAL, "source config: NULL config");
    }
    if (region != NULL && (region[0] == '\0' || strlen(region) > 64 || strchr(region, '/'))) {
        return hd_err(HDMLP_E_INVAL, "source config: region \"%s\" is not a region name",
                      region);
    }
    return set_str(&cfg->region, region, "region");
}

int hdmlp_source_config_set_credentials(hdmlp_source_config *cfg, const char *access_key,
                                        const char *secret_key, const char *session_token)
{
    if (cfg == NULL) {
        return hd_err(HDMLP_E_INVAL, "source config: NULL config");
    }
    if ((access_key == NULL) != (secret_key == NULL) ||
        (access_key != NULL && (access_key[0] == '\0' || secret_key[0] == '\0' ||
                                strlen(access_key) > 128 || strlen(secret_key) > 128))) {
        return hd_err(HDMLP_E_INVAL, "source config: credentials need both an access key and "
                                     "a secret key (1..128 characters), or neither");
    }
    hdmlp_source_config tmp = {0};
    if (set_str(&tmp.access_key, access_key, "access key") != HDMLP_OK ||
        set_str(&tmp.secret_key, secret_key, "secret key") != HDMLP_OK ||
        set_str(&tmp.session_token, session_token, "session token") != HDMLP_OK) {
        config_clear(&tmp);
        return HDMLP_E_NOMEM;
    }
    hd_free(cfg->access_key);
    if (cfg->secret_key != NULL) {
        memset(cfg->secret_key, 0, strlen(cfg->secret_key));
    }
    hd_free(cfg->secret_key);
    hd_free(cfg->session_token);
    cfg->access_key = tmp.access_key;
    cfg->secret_key = tmp.secret_key;
    cfg->session_token = tmp.session_token;
    return HDMLP_OK;
}

int hdmlp_source_config_set_path_style(hdmlp_source_config *cfg, int path_style)
{
    if (cfg == NULL || path_style < -1 || path_style > 1) {
        return hd_err(HDMLP_E_INVAL, "source config: path_style must be -1 (auto), 0 or 1");
    }
    cfg->path_style = path_style;
    return HDMLP_OK;
}

int hdmlp_source_config_set_ca_file(hdmlp_source_config *cfg, const char *path)
{
    if (cfg == NULL) {
        return hd_err(HDMLP_E_INVAL, "source config: NULL config");
    }
    return set_str(&cfg->ca_file, path, "CA file");
}

int hdmlp_source_config_set_timeouts(hdmlp_source_config *cfg, uint32_t connect_ms,
                                     uint32_t stall_ms, uint32_t request_ms)
{
    if (cfg == NULL || connect_ms < 1 || stall_ms < 1000 || request_ms < 1 ||
        connect_ms > 3600000 || stall_ms > 3600000 || request_ms > 86400000) {
        return hd_err(HDMLP_E_INVAL,
                      "source config: timeouts out of range (connect 1..3600000 ms, stall "
                      "1000..3600000 ms, request 1..86400000 ms)");
    }
    cfg->connect_ms = connect_ms;
    cfg->stall_ms = stall_ms;
    cfg->request_ms = request_ms;
    return HDMLP_OK;
}

int hdmlp_source_config_set_retries(hdmlp_source_config *cfg, uint32_t retries)
{
    if (cfg == NULL || retries > 20) {
        return hd_err(HDMLP_E_INVAL, "source config: retries out of range 0..20");
    }
    cfg->retries = retries;
    return HDMLP_OK;
}

int hdmlp_source_config_set_part_size(hdmlp_source_config *cfg, uint64_t bytes)
{
    if (cfg == NULL || bytes < (UINT64_C(5) << 20) || bytes > (UINT64_C(5) << 30)) {
        return hd_err(HDMLP_E_INVAL, "source config: part size out of S3's range 5 MiB..5 GiB");
    }
    cfg->part_size = bytes;
    return HDMLP_OK;
}

/* Looks up `key` in section `section` of an INI-style AWS file; value into out. */
static int ini_lookup(const char *path, const char *section, const char *key, char *out,
                      size_t cap)
{
    FILE *f = path != NULL ? fopen(path, "r") : NULL;
    if (f == NULL) {
        return 0;
    }
    char line[1024];
    int in = 0, found = 0;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        char *s = line;
        while (*s == ' ' || *s == '\t') {
            s++;
        }
        char *e = s + strlen(s);
        while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) {
            *--e = '\0';
        }
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (close != NULL) {
                *close = '\0';
                in = strcmp(s + 1, section) == 0;
            }
            continue;
        }
        if (!in || *s == '#' || *s == ';') {
            continue;
        }
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            continue;
        }
        char *k_end = eq;
        while (k_end > s && (k_end[-1] == ' ' || k_end[-1] == '\t')) {
            k_end--;
        }
        char *v = eq + 1;
        while (*v == ' ' || *v == '\t') {
            v++;
        }
        if ((size_t)(k_end - s) == strlen(key) && strncmp(s, key, strlen(key)) == 0 &&
            strlen(v) < cap) {
            strcpy(out, v);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* AWS's order: environment first, then the shared credentials file (profile name as
 * is), then the config file ("profile NAME", or "default"). */
int hdmlp_source_config_load_aws(hdmlp_source_config *cfg)
{
    if (cfg == NULL) {
        return hd_err(HDMLP_E_INVAL, "source config: NULL config");
    }
    const char *profile = getenv("AWS_PROFILE");
    if (profile == NULL || profile[0] == '\0') {
        profile = "default";
    }
    const char *home = getenv("HOME");
    char cred_path[1024] = "", conf_path[1024] = "";
    const char *cp = getenv("AWS_SHARED_CREDENTIALS_FILE");
    const char *fp = getenv("AWS_CONFIG_FILE");
    if (cp != NULL) {
        snprintf(cred_path, sizeof(cred_path), "%s", cp);
    } else if (home != NULL) {
        snprintf(cred_path, sizeof(cred_path), "%s/.aws/credentials", home);
    }
    if (fp != NULL) {
        snprintf(conf_path, sizeof(conf_path), "%s", fp);
    } else if (home != NULL) {
        snprintf(conf_path, sizeof(conf_path), "%s/.aws/config", home);
    }
    char conf_section[256];
    if (strcmp(profile, "default") == 0) {
        snprintf(conf_section, sizeof(conf_section), "default");
    } else {
        snprintf(conf_section, sizeof(conf_section), "profile %s", profile);
    }
    char ak[256] = "", sk[256] = "", tok[4096] = "", region[128] = "", endpoint[1024] = "";
    const char *e;
    if ((e = getenv("AWS_ACCESS_KEY_ID")) != NULL && (e[0] != '\0') && strlen(e) < sizeof(ak)) {
        strcpy(ak, e);
        if ((e = getenv("AWS_SECRET_ACCESS_KEY")) != NULL && strlen(e) < sizeof(sk)) {
            strcpy(sk, e);
        }
        if ((e = getenv("AWS_SESSION_TOKEN")) != NULL && strlen(e) < sizeof(tok)) {
            strcpy(tok, e);
        }
    } else if (ini_lookup(cred_path, profile, "aws_access_key_id", ak, sizeof(ak))) {
        ini_lookup(cred_path, profile, "aws_secret_access_key", sk, sizeof(sk));
        ini_lookup(cred_path, profile, "aws_session_token", tok, sizeof(tok));
    } else if (ini_lookup(conf_path, conf_section, "aws_access_key_id", ak, sizeof(ak))) {
        ini_lookup(conf_path, conf_section, "aws_secret_access_key", sk, sizeof(sk));
        ini_lookup(conf_path, conf_section, "aws_session_token", tok, sizeof(tok));
    }
    if ((e = getenv("AWS_REGION")) != NULL && e[0] != '\0' && strlen(e) < sizeof(region)) {
        strcpy(region, e);
    } else if ((e = getenv("AWS_DEFAULT_REGION")) != NULL && e[0] != '\0' &&
               strlen(e) < sizeof(region)) {
        strcpy(region, e);
    } else {
        ini_lookup(conf_path, conf_section, "region", region, sizeof(region));
    }
    if ((e = getenv("AWS_ENDPOINT_URL_S3")) != NULL && e[0] != '\0' &&
        strlen(e) < sizeof(endpoint)) {
        strcpy(endpoint, e);
    } else if ((e = getenv("AWS_ENDPOINT_URL")) != NULL && e[0] != '\0' &&
               strlen(e) < sizeof(endpoint)) {
        strcpy(endpoint, e);
    } else {
        ini_lookup(conf_path, conf_section, "endpoint_url", endpoint, sizeof(endpoint));
    }
    int rc = HDMLP_OK;
    if ((e = getenv("AWS_CA_BUNDLE")) != NULL && e[0] != '\0') {
        rc = hdmlp_source_config_set_ca_file(cfg, e);
    }
    if (rc == HDMLP_OK && ak[0] != '\0') {
        if (sk[0] == '\0') {
            rc = hd_err(HDMLP_E_INVAL,
                        "AWS credentials: an access key id without a secret access key "
                        "(profile %s)",
                        profile);
        } else {
            rc = hdmlp_source_config_set_credentials(cfg, ak, sk, tok[0] ? tok : NULL);
        }
    }
    if (rc == HDMLP_OK && region[0] != '\0') {
        rc = hdmlp_source_config_set_region(cfg, region);
    }
    if (rc == HDMLP_OK && endpoint[0] != '\0') {
        rc = hdmlp_source_config_set_endpoint(cfg, endpoint);
    }
    memset(sk, 0, sizeof(sk));
    return rc;
}

int src_is_url(const char *path)
{
    return path != NULL &&
           (strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0 ||
            strncmp(path, "s3://", 5) == 0);
}

static int copy_config(hdmlp_source_config *dst, const hdmlp_source_config *src)
{
    *dst = *src;
    dst->endpoint = dup_str(src->endpoint);
    dst->region = dup_str(src->region);
    dst->access_key = dup_str(src->access_key);
    dst->secret_key = dup_str(src->secret_key);
    dst->session_token = dup_str(src->session_token);
    dst->ca_file = dup_str(src->ca_file);
    if ((src->endpoint && !dst->endpoint) || (src->region && !dst->region) ||
        (src->access_key && !dst->access_key) || (src->secret_key && !dst->secret_key) ||
        (src->session_token && !dst->session_token) || (src->ca_file && !dst->ca_file)) {
        return hd_err(HDMLP_E_NOMEM, "source: out of memory");
    }
    return HDMLP_OK;
}

/* Splits "scheme://authority/rest" into base ("scheme://authority"), host (authority) and
 * rest (after the '/', may be empty). The authority is written the way libcurl writes the
 * Host header, which is what gets signed: the host name in lower case (as botocore signs
 * it; names are case-insensitive) and no port when it is the scheme's default
 * (http://h:80 and https://h:443 send "Host: h"). */
static int split_url(const char *url, char **base, char **host, const char **rest)
{
    const char *p = strstr(url, "://");
    if (p == NULL) {
        return -1;
    }
    const char *auth = p + 3;
    const char *slash = strchr(auth, '/');
    size_t alen = slash != NULL ? (size_t)(slash - auth) : strlen(auth);
    if (alen == 0 || memchr(auth, '@', alen) != NULL || memchr(auth, '?', alen) != NULL ||
        memchr(auth, '#', alen) != NULL) {
        return -1;
    }
    /* The port: after the last ':' that follows an IPv6 literal's ']'. */
    const char *close = memchr(auth, ']', alen);
    const char *from = close != NULL ? close : auth;
    const char *colon = NULL;
    for (const char *q = from; q < auth + alen; q++) {
        if (*q == ':') {
            colon = q;
        }
    }
    size_t hlen = alen;
    if (colon != NULL) {
        const char *port = colon + 1;
        const size_t plen = (size_t)(auth + alen - port);
        for (size_t i = 0; i < plen; i++) {
            if (port[i] < '0' || port[i] > '9') {
                return -1;
            }
        }
        const int http = (size_t)(p - url) == 4 && strncasecmp(url, "http", 4) == 0;
        const int https = (size_t)(p - url) == 5 && strncasecmp(url, "https", 5) == 0;
        if (plen == 0 || (http && plen == 2 && strncmp(port, "80", 2) == 0) ||
            (https && plen == 3 && strncmp(port, "443", 3) == 0)) {
            hlen = (size_t)(colon - auth); /* the default port: not written */
        }
    }
    if (hlen == 0) {
        return -1;
    }
    const size_t slen = (size_t)(auth - url);
    *base = hd_malloc(slen + hlen + 1);
    *host = hd_malloc(hlen + 1);
    if (*base == NULL || *host == NULL) {
        return -2;
    }
    for (size_t i = 0; i < hlen; i++) {
        const char c = auth[i];
        (*host)[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    (*host)[hlen] = '\0';
    memcpy(*base, url, slen);
    memcpy(*base + slen, *host, hlen + 1);
    *rest = slash != NULL ? slash + 1 : "";
    return 0;
}

/* 1 when bucket can be a DNS label under AWS's endpoint (virtual-hosted style), as botocore
 * decides: 3..63 characters of [a-z0-9-], not starting or ending with '-', and no '.' (a
 * dotted name cannot match the certificate *.s3.REGION.amazonaws.com). */
static int dns_bucket(const char *bucket)
{
    const size_t n = strlen(bucket);
    if (n < 3 || n > 63 || bucket[0] == '-' || bucket[n - 1] == '-') {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const char c = bucket[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
            return 0;
        }
    }
    return 1;
}

/* path_prefix = "/" + lead + encode(key prefix) + "/" (no doubled slashes). */
static int make_prefix(src_store *s, const char *lead, const char *key)
{
    char enc[SRC_URL_MAX];
    size_t klen = strlen(key);
    while (klen > 0 && key[klen - 1] == '/') {
        klen--;
    }
    if (strchr(key, '?') != NULL || strchr(key, '#') != NULL) {
        return -1;
    }
    if (sigv4_uri_encode(key, klen, 1, enc, sizeof(enc)) < 0) {
        return -1;
    }
    const size_t cap = strlen(lead) + strlen(enc) + 4;
    s->path_prefix = hd_malloc(cap);
    if (s->path_prefix == NULL) {
        return -2;
    }
    snprintf(s->path_prefix, cap, "/%s%s%s%s", lead, lead[0] ? "/" : "", enc,
             enc[0] ? "/" : "");
    return 0;
}

static int store_parse(src_store *s, const char *url)
{
    const char *rest = NULL;
    int rc;
    if (strncmp(url, "s3://", 5) == 0) {
        s->kind = SRC_S3;
        const char *b = url + 5;
        const char *slash = strchr(b, '/');
        const size_t blen = slash != NULL ? (size_t)(slash - b) : strlen(b);
        char bucket[256];
        if (blen == 0 || blen >= sizeof(bucket)) {
            return -1;
        }
        memcpy(bucket, b, blen);
        bucket[blen] = '\0';
        for (size_t i = 0; i < blen; i++) {
            const char c = bucket[i];
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                  c == '_' || (c >= 'A' && c <= 'Z'))) {
                return -1;
            }
        }
        const char *key = slash != NULL ? slash + 1 : "";
        const char *region = s->cfg.region != NULL ? s->cfg.region : "us-east-1";
        char endpoint[1024];
        const int custom = s->cfg.endpoint != NULL;
        /* Auto: path style with a custom endpoint, and on AWS's for a bucket that cannot be
         * a host name label (botocore's rule). */
        const int path_style =
            s->cfg.path_style >= 0 ? s->cfg.path_style : custom || !dns_bucket(bucket);
        if (custom) {
            snprintf(endpoint, sizeof(endpoint), "%s", s->cfg.endpoint);
        } else {
            snprintf(endpoint, sizeof(endpoint), "https://s3.%s.amazonaws.com", region);
        }
        size_t elen = strlen(endpoint);
        while (elen > 0 && endpoint[elen - 1] == '/') {
            endpoint[--elen] = '\0';
        }
        if (!path_style) {
            /* Virtual-hosted style: the bucket becomes part of the host name. */
            char *sep = strstr(endpoint, "://");
            if (sep == NULL) {
                return -1;
            }
            char vh[sizeof(endpoint)];
            const int n = snprintf(vh, sizeof(vh), "%.*s%s.%s", (int)(sep + 3 - endpoint),
                                   endpoint, bucket, sep + 3);
            if (n < 0 || (size_t)n >= sizeof(vh)) {
                return -1;
            }
            memcpy(endpoint, vh, (size_t)n + 1);
        }
        rc = split_url(endpoint, &s->base, &s->host, &rest);
        if (rc != 0 || rest[0] != '\0') {
            return rc == -2 ? -2 : -1;
        }
        return make_prefix(s, path_style ? bucket : "", key);
    }
    s->kind = SRC_HTTP;
    rc = split_url(url, &s->base, &s->host, &rest);
    if (rc != 0) {
        return rc;
    }
    /* The path of an http(s) URL is used as given (already encoded). */
    size_t n = strlen(rest);
    while (n > 0 && rest[n - 1] == '/') {
        n--;
    }
    if (memchr(rest, '?', n) != NULL || memchr(rest, '#', n) != NULL) {
        return -1;
    }
    s->path_prefix = hd_malloc(n + 3);
    if (s->path_prefix == NULL) {
        return -2;
    }
    snprintf(s->path_prefix, n + 3, "/%.*s%s", (int)n, rest, n ? "/" : "");
    return 0;
}

int src_store_open(const char *url, const hdmlp_source_config *cfg, src_store **out)
{
    if (out == NULL || url == NULL) {
        return hd_err(HDMLP_E_INVAL, "source: NULL argument");
    }
    *out = NULL;
    if (!src_is_url(url) || strlen(url) >= SRC_URL_MAX - 64) {
        return hd_err(HDMLP_E_INVAL, "%s: not an http://, https:// or s3:// URL", url);
    }
    src_store *s = hd_calloc(1, sizeof(*s));
    if (s == NULL) {
        return hd_err(HDMLP_E_NOMEM, "source: out of memory");
    }
    hdmlp_source_config defaults;
    int rc = HDMLP_OK;
    if (cfg == NULL) {
        hdmlp_source_config *d = NULL;
        rc = hdmlp_source_config_create(&d);
        if (rc == HDMLP_OK) {
            defaults = *d;
            hd_free(d); /* its strings are all NULL */
            cfg = &defaults;
        }
    }
    if (rc == HDMLP_OK) {
        rc = copy_config(&s->cfg, cfg);
    }
    if (rc == HDMLP_OK) {
        s->url = dup_str(url);
        if (s->url == NULL) {
            rc = hd_err(HDMLP_E_NOMEM, "source: out of memory");
        }
    }
    if (rc == HDMLP_OK) {
        const int prc = store_parse(s, url);
        if (prc == -2) {
            rc = hd_err(HDMLP_E_NOMEM, "source: out of memory");
        } else if (prc != 0) {
            rc = hd_err(HDMLP_E_INVAL,
                        "%s: cannot parse the URL (want http(s)://host[:port]/path or "
                        "s3://bucket/prefix, no query, no user)",
                        url);
        }
    }
    if (rc != HDMLP_OK) {
        src_store_free(s);
        return rc;
    }
    *out = s;
    return HDMLP_OK;
}

void src_store_free(src_store *s)
{
    if (s == NULL) {
        return;
    }
    config_clear(&s->cfg);
    hd_free(s->url);
    hd_free(s->base);
    hd_free(s->host);
    hd_free(s->path_prefix);
    hd_free(s);
}

int src_object_path(const src_store *s, const char *name, char *buf, size_t cap)
{
    char enc[1024];
    if (sigv4_uri_encode(name, strlen(name), 1, enc, sizeof(enc)) < 0) {
        return -1;
    }
    const int n = snprintf(buf, cap, "%s%s", s->path_prefix, enc);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int src_object_url(const src_store *s, const char *name, char *buf, size_t cap)
{
    char path[SRC_URL_MAX];
    if (src_object_path(s, name, path, sizeof(path)) != 0) {
        return -1;
    }
    const int n = snprintf(buf, cap, "%s%s", s->base, path);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}
