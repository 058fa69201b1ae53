/* TCP port helpers for the transport and the bootstraps: pick a free port, explain a
 * failed bind. */
#include "rpc_internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Copies host (without [] around an IPv6 literal) into buf. 0 if it does not fit. */
static int bare_host(const char *host, size_t len, char *buf, size_t cap)
{
    if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
        host++;
        len -= 2;
    }
    if (len == 0 || len >= cap) {
        return 0;
    }
    memcpy(buf, host, len);
    buf[len] = '\0';
    return 1;
}

/* Binds a TCP socket to host:port: the fd, or -1 (errno value in *err) or -2 (getaddrinfo
 * code in *err). With reuse, SO_REUSEADDR as a server sets it (a port with only TIME_WAIT
 * connections binds; one with a listener does not). */
static int bind_to(const char *host, const char *port, int reuse, int *err)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
    const int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        *err = g;
        return -2;
    }
    int fd = -1;
    *err = 0;
    for (struct addrinfo *a = res; a != NULL; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            *err = errno;
            continue;
        }
        const int one = 1;
        if (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
            *err = errno;
            close(fd);
            fd = -1;
            continue;
        }
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0) {
            break;
        }
        *err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd >= 0 ? fd : -1;
}

/* The kernel's ephemeral port range (where bind(port 0) and outgoing connections draw
 * from): 0 if unknown. */
static int ephemeral_low(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int lo = 0, hi = 0;
    if (f != NULL) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2) {
            lo = 0;
        }
        fclose(f);
    }
    return lo;
}

/* A free port below the ephemeral range: between release and listen, no outgoing
 * connection of this host can take it (one from the range could). 0 if none was found. */
static int pick_below_ephemeral(const char *h)
{
    const int lo = ephemeral_low();
    const int base = lo - 12000 > 10000 ? lo - 12000 : 10000;
    if (lo <= base) {
        return 0;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec;
    for (int attempt = 0; attempt < 64; attempt++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull; /* an LCG step */
        const int port = base + (int)((x >> 33) % (uint64_t)(lo - base));
        char ps[16];
        snprintf(ps, sizeof ps, "%d", port);
        int err;
        const int fd = bind_to(h, ps, 0, &err);
        if (fd >= 0) {
            close(fd);
            return port;
        }
        if (fd == -2) {
            return 0;
        }
    }
    return 0;
}

int rpc_pick_endpoint(const char *host, char *out, size_t cap)
{
    char h[256];
    if (host == NULL || !bare_host(host, strlen(host), h, sizeof h)) {
        return hd_err(HDMLP_E_INVAL, "rpc: bad host \"%s\"", host != NULL ? host : "(null)");
    }
    int port = pick_below_ephemeral(h);
    if (port == 0) { /* else whatever port 0 gives */
        int err;
        const int fd = bind_to(h, "0", 0, &err);
        if (fd < 0) {
            return hd_err(HDMLP_E_IO, "rpc: cannot bind a TCP port on %s: %s", host,
                          fd == -2 ? gai_strerror(err) : strerror(err));
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
            port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                            : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        }
        close(fd);
    }
    if (port == 0) {
        return hd_err(HDMLP_E_IO, "rpc: cannot read back the port bound on %s", host);
    }
    const int v6 = strchr(h, ':') != NULL;
    const int n = snprintf(out, cap, v6 ? "[%s]:%d" : "%s:%d", h, port);
    if (n < 0 || (size_t)n >= cap) {
        return hd_err(HDMLP_E_RANGE, "rpc: endpoint for %s does not fit %zu bytes", host, cap);
    }
    return HDMLP_OK;
}

int rpc_bind_check(const char *address)
{
    const char *colon = strrchr(address, ':');
    char h[256];
    if (colon == NULL || !bare_host(address, (size_t)(colon - address), h, sizeof h)) {
        return hd_err(HDMLP_E_INVAL, "rpc: listen address \"%s\" is not host:port", address);
    }
    int err;
    const int fd = bind_to(h, colon + 1, 1, &err);
    if (fd < 0) {
        return hd_err(HDMLP_E_IO, "rpc: cannot listen on %s: %s", address,
                      fd == -2 ? gai_strerror(err) : strerror(err));
    }
    close(fd);
    return HDMLP_OK;
}
