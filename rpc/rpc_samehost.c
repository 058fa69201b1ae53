/* The same-host path of the transport: which peers run on this machine, and the Unix
 * socket (abstract namespace) each rank's server listens on beside its TCP port
 * (rpc_transport.h, "Paths"). */
#include "rpc_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define ABSTRACT_PREFIX "unix-abstract:"

int rpc_same_host_address(const char *endpoint, char *out, size_t cap)
{
    /* FNV-1a 64 of the endpoint as every rank spells it in the peers. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)endpoint; *p != '\0'; p++) {
        h = (h ^ *p) * 0x100000001b3ull;
    }
    const int n = snprintf(out, cap, ABSTRACT_PREFIX "hdmlp-%016llx", (unsigned long long)h);
    if (n < 0 || (size_t)n >= cap) {
        return hd_err(HDMLP_E_RANGE, "rpc: same-host address does not fit %zu bytes", cap);
    }
    return HDMLP_OK;
}

/* The abstract socket address of "unix-abstract:NAME"; its length in *len. */
static void abstract_sockaddr(const char *address, struct sockaddr_un *sa, socklen_t *len)
{
    const char *name = address + strlen(ABSTRACT_PREFIX);
    size_t n = strlen(name);
    if (n > sizeof sa->sun_path - 1) {
        n = sizeof sa->sun_path - 1;
    }
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path + 1, name, n); /* sun_path[0] == 0: the abstract namespace */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int rpc_same_host_bind_check(const char *address)
{
    struct sockaddr_un sa;
    socklen_t len;
    abstract_sockaddr(address, &sa, &len);
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (const struct sockaddr *)&sa, len) != 0) {
        const int e = errno;
        if (fd >= 0) {
            close(fd);
        }
        return hd_err(HDMLP_E_IO,
                      "rpc: cannot listen on the same-host socket %s: %s (another transport "
                      "of this host serving the same peers entry?)",
                      address, strerror(e));
    }
    close(fd);
    return HDMLP_OK;
}

/* 1 if a is loopback, unspecified (connects to this host) or one of the interfaces'. */
static int addr_is_local(const struct sockaddr *a, const struct ifaddrs *ifs)
{
    struct in_addr v4;
    int is_v4 = 0;
    if (a->sa_family == AF_INET) {
        v4 = ((const struct sockaddr_in *)a)->sin_addr;
        is_v4 = 1;
    } else if (a->sa_family == AF_INET6) {
        const struct in6_addr *v6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(v6) || IN6_IS_ADDR_UNSPECIFIED(v6)) {
            return 1;
        }
        if (IN6_IS_ADDR_V4MAPPED(v6)) {
            memcpy(&v4, &v6->s6_addr[12], sizeof v4);
            is_v4 = 1;
        } else {
            for (const struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
                if (i->ifa_addr != NULL && i->ifa_addr->sa_family == AF_INET6 &&
                    memcmp(&((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, v6,
                           sizeof *v6) == 0) {
                    return 1;
                }
            }
            return 0;
        }
    } else {
        return 0;
    }
    const uint32_t host = ntohl(v4.s_addr);
    if ((host >> 24) == 127 || host == 0) {
        return 1;
    }
    for (const struct ifaddrs *i = ifs; i != NULL && is_v4; i = i->ifa_next) {
        if (i->ifa_addr != NULL && i->ifa_addr->sa_family == AF_INET &&
            ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == v4.s_addr) {
            return 1;
        }
    }
    return 0;
}

int rpc_endpoint_is_local(const char *endpoint)
{
    const char *colon = strrchr(endpoint, ':');
    size_t len = colon != NULL ? (size_t)(colon - endpoint) : strlen(endpoint);
    if (len >= 2 && endpoint[0] == '[' && endpoint[len - 1] == ']') {
        endpoint++;
        len -= 2;
    }
    char host[256];
    if (len == 0 || len >= sizeof host) {
        return 0;
    }
    memcpy(host, endpoint, len);
    host[len] = '\0';
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL) {
        return 0; /* TCP, which reports the name */
    }
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) {
        ifs = NULL;
    }
    /* The first address: the one a TCP connection would most likely use. */
    const int local = addr_is_local(res->ai_addr, ifs);
    if (ifs != NULL) {
        freeifaddrs(ifs);
    }
    freeaddrinfo(res);
    return local;
}
