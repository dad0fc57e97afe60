/* Pipes: one pipe per receiver, write() N times / read() once (2 copies).
 * pipe+vmsplice: the sender maps its pages into each pipe (no copy on send,
 * one copy on read). A page in a pipe must not change until read, so the
 * sender rotates over more buffers than a pipe can hold messages. */
#define _GNU_SOURCE
#include "fdchan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

static int pipe_setup(struct mech_chan *c)
{
    struct fdchan *f = fdchan_new(c, 0);
    if (!f)
        return -ENOMEM;
    for (unsigned i = 0; i < c->nrecv; i++) {
        int p[2];
        if (pipe(p) < 0)
            return -errno;
        f->rx[i] = p[0];
        f->tx[i] = p[1];
    }
    return 0;
}

const struct mech mech_pipe = {
    .name = "pipe", .label = "pipe",
    .setup = pipe_setup,
    .sender_attach = fdchan_sender_attach, .receiver_attach = fdchan_receiver_attach,
    .send_begin = fdchan_send_begin, .send_end = fdchan_send_end,
    .recv_begin = fdchan_recv_begin, .recv_end = fdchan_recv_end,
    .detach = fdchan_detach, .teardown = fdchan_teardown,
};

struct vsp_local {
    size_t stride, nbuf, next;
    char *mem;
};

static int vsp_sender_attach(struct mech_chan *c)
{
    struct fdchan *f = c->shared;
    long cap = fcntl(f->tx[0], F_GETPIPE_SZ);
    if (cap <= 0)
        cap = 65536;
    struct vsp_local *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->stride = (c->max_len + 4095) & ~(size_t)4095;
    l->nbuf = (size_t)cap / 4096 + 2;   /* a pipe holds at most cap/4096 buffers */
    l->mem = mech_alloc_local(l->stride * l->nbuf);
    if (!l->mem) {
        free(l);
        return -ENOMEM;
    }
    c->local = l;
    return 0;
}

static int vsp_send_begin(struct mech_chan *c, size_t len, void **buf)
{
    struct vsp_local *l = c->local;
    if (len > c->max_len)
        return -EMSGSIZE;
    *buf = l->mem + l->stride * l->next;
    l->next = (l->next + 1) % l->nbuf;
    return 0;
}

static int vsp_send_to(int fd, void *buf, size_t len)
{
    struct iovec iov = { buf, len };
    while (iov.iov_len > 0) {
        ssize_t n = vmsplice(fd, &iov, 1, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        iov.iov_base = (char *)iov.iov_base + n;
        iov.iov_len -= (size_t)n;
    }
    return 0;
}

static int vsp_send_end(struct mech_chan *c, int dst, void *buf, size_t len)
{
    struct fdchan *f = c->shared;
    if (dst >= 0)
        return dst < (int)c->nrecv ? vsp_send_to(f->tx[dst], buf, len) : -EINVAL;
    for (unsigned i = 0; i < c->nrecv; i++) {
        int rc = vsp_send_to(f->tx[i], buf, len);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void vsp_detach(struct mech_chan *c)
{
    if (c->idx >= 0) {
        fdchan_detach(c);
        return;
    }
    struct vsp_local *l = c->local;
    if (l) {
        free(l->mem);
        free(l);
    }
    c->local = NULL;
}

const struct mech mech_vmsplice = {
    .name = "vmsplice", .label = "pipe+vmsplice",
    .setup = pipe_setup,
    .sender_attach = vsp_sender_attach, .receiver_attach = fdchan_receiver_attach,
    .send_begin = vsp_send_begin, .send_end = vsp_send_end,
    .recv_begin = fdchan_recv_begin, .recv_end = fdchan_recv_end,
    .detach = vsp_detach, .teardown = fdchan_teardown,
};
