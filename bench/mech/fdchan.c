/* Shared code of the descriptor-based mechanisms (see fdchan.h). */
#define _GNU_SOURCE
#include "fdchan.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct fdchan *fdchan_new(struct mech_chan *c, int dgram)
{
    struct fdchan *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->dgram = dgram;
    for (int i = 0; i < MECH_MAX_RECV; i++)
        f->tx[i] = f->rx[i] = -1;
    c->shared = f;
    return f;
}

int fdchan_sender_attach(struct mech_chan *c)
{
    c->local = mech_alloc_local(c->max_len);
    return c->local ? 0 : -ENOMEM;
}

int fdchan_receiver_attach(struct mech_chan *c, unsigned idx)
{
    c->idx = (int)idx;
    c->local = mech_alloc_local(c->max_len);
    return c->local ? 0 : -ENOMEM;
}

int fdchan_send_begin(struct mech_chan *c, size_t len, void **buf)
{
    *buf = c->local;
    return len <= c->max_len ? 0 : -EMSGSIZE;
}

static int send_to(struct mech_chan *c, struct fdchan *f, unsigned i, const void *buf, size_t len)
{
    if (!f->dgram)
        return mech_write_all(f->tx[i], buf, len);
    for (;;) {
        ssize_t n = send(f->tx[i], buf, len, 0);
        if (n >= 0)
            return 0;
        if (errno == EINTR)
            continue;
        /* A lossy receiver that already left refuses; the driver counts loss. */
        if ((c->m->flags & MECH_LOSSY) && (errno == ECONNREFUSED || errno == ENOBUFS))
            return 0;
        return -errno;
    }
}

int fdchan_send_end(struct mech_chan *c, int dst, void *buf, size_t len)
{
    struct fdchan *f = c->shared;
    if (dst >= 0)
        return dst < (int)c->nrecv ? send_to(c, f, (unsigned)dst, buf, len) : -EINVAL;
    for (unsigned i = 0; i < c->nrecv; i++) {
        int rc = send_to(c, f, i, buf, len);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int fdchan_recv_begin(struct mech_chan *c, size_t len, const void **buf, size_t *got)
{
    struct fdchan *f = c->shared;
    int fd = f->rx[c->idx];
    *buf = c->local;
    if (!f->dgram) {
        int rc = mech_read_all(fd, c->local, len);
        *got = len;
        return rc;
    }
    for (;;) {
        ssize_t n = recv(fd, c->local, c->max_len, 0);
        if (n >= 0) {
            *got = (size_t)n;
            return 0;
        }
        if (errno == EINTR)
            continue;
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

void fdchan_recv_end(struct mech_chan *c)
{
    (void)c;
}

void fdchan_detach(struct mech_chan *c)
{
    free(c->local);
    c->local = NULL;
}

void fdchan_teardown(struct mech_chan *c)
{
    struct fdchan *f = c->shared;
    if (!f)
        return;
    for (int i = 0; i < MECH_MAX_RECV; i++) {
        if (f->tx[i] >= 0)
            close(f->tx[i]);
        if (f->rx[i] >= 0 && f->rx[i] != f->tx[i])
            close(f->rx[i]);
    }
    free(f);
    c->shared = NULL;
}
