/* Unix domain sockets, one socketpair per receiver: stream (framed by the
 * run's fixed message size) and datagram. */
#define _GNU_SOURCE
#include "fdchan.h"

#include <errno.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <unistd.h>

static void set_bufs(int fd, size_t len)
{
    int want = (int)(len * 4 < 262144 ? 262144 : len * 4);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof want) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof want) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof want);
}

static int unix_setup_kind(struct mech_chan *c, int type)
{
    struct fdchan *f = fdchan_new(c, type == SOCK_DGRAM);
    if (!f)
        return -ENOMEM;
    for (unsigned i = 0; i < c->nrecv; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, type, 0, sv) < 0)
            return -errno;
        f->tx[i] = sv[0];
        f->rx[i] = sv[1];
        if (type == SOCK_DGRAM) {
            set_bufs(sv[0], c->max_len);
            set_bufs(sv[1], c->max_len);
        }
    }
    if (type == SOCK_DGRAM) {
        /* The largest datagram must fit the socket buffers: try it once. */
        char *tmp = mech_alloc_local(c->max_len);
        if (!tmp)
            return -ENOMEM;
        ssize_t n = send(f->tx[0], tmp, c->max_len, MSG_DONTWAIT);
        int err = n < 0 ? errno : 0;
        if (n >= 0)
            n = recv(f->rx[0], tmp, c->max_len, MSG_DONTWAIT);
        free(tmp);
        if (err)
            return -err;
    }
    return 0;
}

static int ustream_setup(struct mech_chan *c) { return unix_setup_kind(c, SOCK_STREAM); }
static int udgram_setup(struct mech_chan *c) { return unix_setup_kind(c, SOCK_DGRAM); }

const struct mech mech_unix_stream = {
    .name = "unix-stream", .label = "Unix socket (stream)",
    .setup = ustream_setup,
    .sender_attach = fdchan_sender_attach, .receiver_attach = fdchan_receiver_attach,
    .send_begin = fdchan_send_begin, .send_end = fdchan_send_end,
    .recv_begin = fdchan_recv_begin, .recv_end = fdchan_recv_end,
    .detach = fdchan_detach, .teardown = fdchan_teardown,
};

const struct mech mech_unix_dgram = {
    .name = "unix-dgram", .label = "Unix socket (datagram)",
    .setup = udgram_setup,
    .sender_attach = fdchan_sender_attach, .receiver_attach = fdchan_receiver_attach,
    .send_begin = fdchan_send_begin, .send_end = fdchan_send_end,
    .recv_begin = fdchan_recv_begin, .recv_end = fdchan_recv_end,
    .detach = fdchan_detach, .teardown = fdchan_teardown,
};
