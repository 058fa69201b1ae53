/* Optional mutual TLS for the transport: the PEM files named by the config
 * (hdmlp_config_set_tls) read at creation, and the gRPC SSL credentials made from them
 * (plaintext when off). */
#include "rpc_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Larger than any sensible CA bundle, small enough to read whole. */
#define TLS_FILE_MAX ((size_t)4 << 20)

typedef struct tls_role {
    const char *what;   /* for messages */
    const char *param;  /* the setter's parameter */
    const char *marker; /* a PEM block the file must contain */
} tls_role;

static const tls_role roles[3] = {
    {"CA file", "ca_file", "-----BEGIN CERTIFICATE-----"},
    {"certificate file", "cert_file", "-----BEGIN CERTIFICATE-----"},
    {"private key file", "key_file", "PRIVATE KEY-----"},
};

/* Reads path whole into a NUL-terminated hd_malloc'd string, checked for role's PEM block. */
static int read_pem(const char *path, const tls_role *role, char **out)
{
    *out = NULL;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        return hd_err(HDMLP_E_IO, "tls: cannot open the %s (%s) \"%s\": %s", role->what,
                      role->param, path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return hd_err(HDMLP_E_IO, "tls: the %s (%s) \"%s\" is not a regular file", role->what,
                      role->param, path);
    }
    if ((uint64_t)sb.st_size > TLS_FILE_MAX) {
        close(fd);
        return hd_err(HDMLP_E_INVAL, "tls: the %s (%s) \"%s\" is %llu bytes, above %zu",
                      role->what, role->param, path, (unsigned long long)sb.st_size,
                      TLS_FILE_MAX);
    }
    const size_t cap = (size_t)sb.st_size;
    char *buf = hd_malloc(cap + 1);
    if (buf == NULL) {
        close(fd);
        return hd_err(HDMLP_E_NOMEM, "tls: out of memory reading \"%s\"", path);
    }
    size_t len = 0;
    int e = 0;
    while (len < cap) {
        const ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            e = n < 0 ? errno : 0;
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    int rc = HDMLP_OK;
    if (e != 0) {
        rc = hd_err(HDMLP_E_IO, "tls: cannot read the %s (%s) \"%s\": %s", role->what,
                    role->param, path, strerror(e));
    } else if (len == 0) {
        rc = hd_err(HDMLP_E_INVAL, "tls: the %s (%s) \"%s\" is empty", role->what, role->param,
                    path);
    } else if (strlen(buf) != len || strstr(buf, role->marker) == NULL) {
        rc = hd_err(HDMLP_E_INVAL, "tls: the %s (%s) \"%s\" is not PEM (no \"%s\" block)",
                    role->what, role->param, path, role->marker);
    }
    if (rc != HDMLP_OK) {
        memset(buf, 0, cap + 1); /* it may hold (part of) a key */
        hd_free(buf);
        return rc;
    }
    *out = buf;
    return HDMLP_OK;
}

int rpc_tls_load(const struct hdmlp_config *cfg, rpc_tls *out)
{
    memset(out, 0, sizeof *out);
    const char *const paths[3] = {cfg->tls_ca, cfg->tls_cert, cfg->tls_key};
    if (paths[0] == NULL && paths[1] == NULL && paths[2] == NULL) {
        return HDMLP_OK;
    }
    char **dst[3] = {&out->ca, &out->cert, &out->key};
    for (int i = 0; i < 3; i++) {
        const int rc = paths[i] != NULL
                           ? read_pem(paths[i], &roles[i], dst[i])
                           : hd_err(HDMLP_E_INVAL, "tls: %s is missing", roles[i].param);
        if (rc != HDMLP_OK) {
            rpc_tls_free(out);
            return rc;
        }
    }
    return HDMLP_OK;
}

static void free_secret(char *s)
{
    if (s != NULL) {
        memset(s, 0, strlen(s));
        hd_free(s);
    }
}

void rpc_tls_free(rpc_tls *tls)
{
    free_secret(tls->ca);
    free_secret(tls->cert);
    free_secret(tls->key);
    memset(tls, 0, sizeof *tls);
}

grpc_channel_credentials *rpc_tls_channel_creds(const rpc_tls *tls)
{
    if (tls->ca == NULL) {
        return grpc_insecure_credentials_create();
    }
    /* The server's certificate must chain to tls->ca and name the host of the target. */
    grpc_ssl_pem_key_cert_pair pair = {tls->key, tls->cert};
    return grpc_ssl_credentials_create_ex(tls->ca, &pair, NULL, NULL);
}

grpc_server_credentials *rpc_tls_server_creds(const rpc_tls *tls)
{
    if (tls->ca == NULL) {
        return grpc_insecure_server_credentials_create();
    }
    const grpc_ssl_pem_key_cert_pair pair = {tls->key, tls->cert};
    grpc_ssl_server_certificate_config *sc =
        grpc_ssl_server_certificate_config_create(tls->ca, &pair, 1);
    if (sc == NULL) {
        return NULL;
    }
    /* Takes sc; the returned options are taken by the credentials. */
    grpc_ssl_server_credentials_options *opt =
        grpc_ssl_server_credentials_create_options_using_config(
            GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY, sc);
    return opt != NULL ? grpc_ssl_server_credentials_create_with_options(opt) : NULL;
}
