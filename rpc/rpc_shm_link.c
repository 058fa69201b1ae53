/* Ring set-up over an abstract seqpacket socket (rpc_shm_link.h). */
#include "rpc_shm_link.h"

#include "format.h"
#include "rpc_transport.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int rpc_shm_address(const char *endpoint, char *out, size_t cap)
{
    char sock[RPC_SAME_HOST_ADDR_MAX];
    const int rc = rpc_same_host_address(endpoint, sock, sizeof sock);
    if (rc != HDMLP_OK) {
        return rc;
    }
    const char *name = strchr(sock, ':') + 1; /* past "unix-abstract:" */
    const int n = snprintf(out, cap, "%s-ring", name);
    if (n < 0 || (size_t)n >= cap) {
        return hd_err(HDMLP_E_RANGE, "rpc: ring socket name does not fit %zu bytes", cap);
    }
    return HDMLP_OK;
}

static socklen_t sockaddr_of(const char *name, struct sockaddr_un *sa)
{
    size_t n = strlen(name);
    if (n > sizeof sa->sun_path - 1) {
        n = sizeof sa->sun_path - 1;
    }
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path + 1, name, n); /* sun_path[0] == 0: the abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int rpc_shm_listen(const char *name, int *fd)
{
    struct sockaddr_un sa;
    const socklen_t len = sockaddr_of(name, &sa);
    *fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (*fd < 0 || bind(*fd, (const struct sockaddr *)&sa, len) != 0 || listen(*fd, 64) != 0) {
        const int e = errno;
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
        return hd_err(HDMLP_E_IO,
                      "rpc: cannot listen on the same-host ring socket @%s: %s (another "
                      "transport of this host serving the same peers entry?)",
                      name, strerror(e));
    }
    return HDMLP_OK;
}

int rpc_shm_accept(int listen_fd, int *fd)
{
    *fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (*fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            return 0;
        }
        hd_err(HDMLP_E_IO, "rpc: accepting on the ring socket: %s", strerror(errno));
        return -1;
    }
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (getsockopt(*fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.uid != geteuid()) {
        hd_err(HDMLP_E_PEER, "rpc: ring socket: a process of another user (uid %ld) connected",
               (long)cred.uid);
        close(*fd);
        *fd = -1;
        return -1;
    }
    return 1;
}

int rpc_shm_dial(const char *name, int *fd)
{
    struct sockaddr_un sa;
    const socklen_t len = sockaddr_of(name, &sa);
    *fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (*fd < 0) {
        hd_err(HDMLP_E_IO, "rpc: socket for the ring socket @%s: %s", name, strerror(errno));
        return -1;
    }
    if (connect(*fd, (const struct sockaddr *)&sa, len) == 0) {
        return 1;
    }
    const int e = errno;
    close(*fd);
    *fd = -1;
    if (e == ECONNREFUSED || e == ENOENT || e == EAGAIN || e == EINTR) {
        return 0; /* not listening yet, or its backlog is full */
    }
    hd_err(HDMLP_E_IO, "rpc: connecting to the ring socket @%s: %s", name, strerror(e));
    return -1;
}

int rpc_shm_send_packet(int fd, const void *buf, size_t len, const int *fds, int n_fds)
{
    struct iovec iov = {(void *)buf, len};
    union {
        char buf[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (n_fds > 0) {
        memset(&ctl, 0, sizeof ctl);
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE((size_t)n_fds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)n_fds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)n_fds * sizeof(int));
    }
    if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)len) {
        return hd_err(HDMLP_E_IO, "rpc: ring socket: sending %zu bytes: %s", len,
                      strerror(errno));
    }
    return HDMLP_OK;
}

long rpc_shm_recv_packet(int fd, void *buf, size_t cap, int fds[3])
{
    fds[0] = fds[1] = fds[2] = -1;
    struct iovec iov = {buf, cap};
    union {
        char buf[CMSG_SPACE(8 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof ctl.buf;
    const ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            return -1;
        }
        if (errno == ECONNRESET) {
            return 0;
        }
        hd_err(HDMLP_E_IO, "rpc: ring socket: %s", strerror(errno));
        return -2;
    }
    int got = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int d;
            memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof d);
            if (got < 3) {
                fds[got++] = d;
            } else {
                close(d); /* more than we asked for: not ours to keep */
            }
        }
    }
    if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
        for (int i = 0; i < 3; i++) {
            if (fds[i] >= 0) {
                close(fds[i]);
                fds[i] = -1;
            }
        }
        hd_err(HDMLP_E_PEER, "rpc: ring socket: a truncated packet");
        return -2;
    }
    return (long)n;
}
