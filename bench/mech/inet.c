/* TCP and UDP over the loopback interface (127.0.0.1 only), one connection
 * or socket pair per receiver. UDP is lossy: a receiver that lags loses
 * datagrams, counted as loss by the driver; datagrams above 65,507 B do not
 * exist. */
#define _GNU_SOURCE
#include "fdchan.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define UDP_MAX 65507

static struct sockaddr_in loopback(void)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static int tcp_setup(struct mech_chan *c)
{
    struct fdchan *f = fdchan_new(c, 0);
    if (!f)
        return -ENOMEM;
    int one = 1, rc = 0;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        return -errno;
    struct sockaddr_in a = loopback();
    socklen_t al = sizeof a;
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, MECH_MAX_RECV) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &al) < 0) {
        rc = -errno;
        goto out;
    }
    for (unsigned i = 0; i < c->nrecv; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
            rc = -errno;
            if (s >= 0)
                close(s);
            goto out;
        }
        f->tx[i] = s;
        int r = accept(lfd, NULL, NULL);
        if (r < 0) {
            rc = -errno;
            goto out;
        }
        f->rx[i] = r;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(r, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
out:
    close(lfd);
    return rc;
}

static const char *udp_unsupported(const struct mech_chan *c)
{
    return c->max_len > UDP_MAX ? "UDP datagram > 65,507 B" : NULL;
}

static int udp_setup(struct mech_chan *c)
{
    struct fdchan *f = fdchan_new(c, 1);
    if (!f)
        return -ENOMEM;
    for (unsigned i = 0; i < c->nrecv; i++) {
        struct sockaddr_in a = loopback();
        socklen_t al = sizeof a;
        int r = socket(AF_INET, SOCK_DGRAM, 0);
        if (r < 0)
            return -errno;
        f->rx[i] = r;
        int big = 4 << 20;
        if (setsockopt(r, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0)
            setsockopt(r, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        struct timeval tv = { 0, 20000 };   /* poll interval: recv_begin -> -EAGAIN */
        setsockopt(r, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (bind(r, (struct sockaddr *)&a, sizeof a) < 0 ||
            getsockname(r, (struct sockaddr *)&a, &al) < 0)
            return -errno;
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        if (s < 0)
            return -errno;
        f->tx[i] = s;
        if (connect(s, (struct sockaddr *)&a, sizeof a) < 0)
            return -errno;
    }
    return 0;
}

const struct mech mech_tcp = {
    .name = "tcp", .label = "TCP (loopback)",
    .setup = tcp_setup,
    .sender_attach = fdchan_sender_attach, .receiver_attach = fdchan_receiver_attach,
    .send_begin = fdchan_send_begin, .send_end = fdchan_send_end,
    .recv_begin = fdchan_recv_begin, .recv_end = fdchan_recv_end,
    .detach = fdchan_detach, .teardown = fdchan_teardown,
};

const struct mech mech_udp = {
    .name = "udp", .label = "UDP (loopback)", .flags = MECH_LOSSY,
    .unsupported = udp_unsupported, .setup = udp_setup,
    .sender_attach = fdchan_sender_attach, .receiver_attach = fdchan_receiver_attach,
    .send_begin = fdchan_send_begin, .send_end = fdchan_send_end,
    .recv_begin = fdchan_recv_begin, .recv_end = fdchan_recv_end,
    .detach = fdchan_detach, .teardown = fdchan_teardown,
};
