/* Kernel message queues carrying a transfer as a pipeline of chunks: System V
 * (msgsnd/msgrcv) and POSIX (mq_send/mq_receive). The study's "message
 * queue" was its own lock-free queue of cells; these are the kernel's, each
 * chunk copied into the kernel and out again. The queue holds `depth`
 * chunks, so the source fills chunk k+1 while the destination drains chunk k.
 * Limits are the kernel's and are read at run time: a chunk is at most
 * kernel.msgmax (System V) or fs.mqueue.msgsize_max (POSIX); the depth is
 * bounded by the queue's byte limit (msg_qbytes, which CAP_SYS_RESOURCE may
 * raise past kernel.msgmnb) or by fs.mqueue.msg_max and RLIMIT_MSGQUEUE. */
#define _GNU_SOURCE
#include "xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/msg.h>
#include <sys/resource.h>
#include <unistd.h>

#define MQ_CHUNK 32768u      /* the study's queue element (its Figure 3 knee) */
#define MQ_DEPTH 4u

struct mq_shared {
    size_t chunk, depth;
    int id;                  /* System V queue */
    char name[64];           /* POSIX queue */
};

struct mq_local {
    mqd_t q;
    unsigned char *stage;    /* sizeof(long) + chunk: a chunk that cannot go direct */
};

static size_t mq_cap(size_t want, long limit)
{
    return limit > 0 && want > (size_t)limit ? (size_t)limit : want;
}

static int mq_attach_common(struct xfer_ctx *c)
{
    const struct mq_shared *s = c->shared;
    struct mq_local *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    c->local = l;
    l->q = (mqd_t)-1;
    l->stage = xfer_map_local(sizeof(long) + s->chunk);
    return l->stage ? 0 : -ENOMEM;
}

static void mq_detach(struct xfer_ctx *c)
{
    const struct mq_shared *s = c->shared;
    struct mq_local *l = c->local;
    if (!l)
        return;
    if (l->q != (mqd_t)-1)
        mq_close(l->q);
    xfer_unmap(l->stage, sizeof(long) + s->chunk);
    free(l);
    c->local = NULL;
}

/* ---- System V ---- */

static int sysv_init(struct xfer_ctx *c)
{
    struct mq_shared *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    c->shared = s;
    s->id = -1;
    s->chunk = mq_cap(c->chunk ? c->chunk : MQ_CHUNK, xfer_read_long("/proc/sys/kernel/msgmax"));
    s->depth = c->depth ? c->depth : MQ_DEPTH;
    s->id = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    if (s->id < 0)
        return -errno;
    struct msqid_ds ds;
    if (msgctl(s->id, IPC_STAT, &ds) < 0)
        return -errno;
    if (ds.msg_qbytes < s->depth * s->chunk) {
        ds.msg_qbytes = s->depth * s->chunk;
        msgctl(s->id, IPC_SET, &ds);        /* refused without CAP_SYS_RESOURCE */
        if (msgctl(s->id, IPC_STAT, &ds) < 0)
            return -errno;
    }
    if (ds.msg_qbytes < s->chunk)
        return -EMSGSIZE;                   /* a chunk would never fit */
    s->depth = ds.msg_qbytes / s->chunk;
    c->chunk = s->chunk, c->depth = (unsigned)s->depth;   /* what the kernel allowed */
    return 0;
}

static int sysv_send(struct xfer_ctx *c, const void *src, void *peer_dst, size_t len)
{
    const struct mq_shared *s = c->shared;
    struct mq_local *l = c->local;
    const unsigned char *from = src;
    (void)peer_dst;
    /* msgsnd wants the type word right before the bytes: stage each chunk
     * (a library may not write into its caller's source buffer). */
    long type = 1;
    memcpy(l->stage, &type, sizeof type);
    for (size_t off = 0; off < len; off += s->chunk) {
        size_t n = len - off < s->chunk ? len - off : s->chunk;
        xcopy_in(l->stage + sizeof type, from + off, n, len);
        while (msgsnd(s->id, l->stage, n, 0) < 0)
            if (errno != EINTR)
                return -errno;
    }
    return 0;
}

/* Receives one chunk at buf, whose sizeof(long) bytes before it msgrcv
 * overwrites with the message type: those bytes are saved and put back. */
static int sysv_recv_at(int id, unsigned char *buf, size_t n)
{
    long saved;
    memcpy(&saved, buf - sizeof saved, sizeof saved);
    ssize_t got;
    while ((got = msgrcv(id, buf - sizeof saved, n, 0, 0)) < 0)
        if (errno != EINTR)
            return -errno;
    memcpy(buf - sizeof saved, &saved, sizeof saved);
    return (size_t)got == n ? 0 : -EPROTO;
}

static int sysv_recv(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len)
{
    const struct mq_shared *s = c->shared;
    struct mq_local *l = c->local;
    unsigned char *to = dst;
    (void)peer_src;
    for (size_t off = 0; off < len; off += s->chunk) {
        size_t n = len - off < s->chunk ? len - off : s->chunk;
        int rc;
        if (off >= sizeof(long)) {
            /* straight into the destination: the word before it is ours
             * (the previous chunk's tail), so it can be saved and restored */
            rc = sysv_recv_at(s->id, to + off, n);
        } else {
            rc = sysv_recv_at(s->id, l->stage + sizeof(long), n);
            xcopy_out(to + off, l->stage + sizeof(long), n, len);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void sysv_finalize(struct xfer_ctx *c)
{
    struct mq_shared *s = c->shared;
    if (!s)
        return;
    if (s->id >= 0)
        msgctl(s->id, IPC_RMID, NULL);
    free(s);
    c->shared = NULL;
}

const struct xfer xfer_sysv_mq = {
    .name = "sysv-mq", .label = "System V message queue, chunked", .study_row = "Message queue",
    .flags = XFER_CHUNKED,
    .init = sysv_init, .attach = mq_attach_common,
    .send = sysv_send, .recv = sysv_recv,
    .detach = mq_detach, .finalize = sysv_finalize,
};

/* ---- POSIX ---- */

/* Depth that RLIMIT_MSGQUEUE allows for one queue (raising the limit first
 * where this process may); the kernel charges a message's size plus a
 * pointer, and a little per queue. */
static size_t posix_depth_fit(size_t chunk, size_t want)
{
    rlim_t need = (rlim_t)want * (chunk + 64) + 65536;
    struct rlimit rl;
    if (getrlimit(RLIMIT_MSGQUEUE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return want;
    struct rlimit up = { need, rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? rl.rlim_max : need };
    if (setrlimit(RLIMIT_MSGQUEUE, &up) == 0)
        return want;
    rlim_t fit = rl.rlim_cur > 65536 ? (rl.rlim_cur - 65536) / (chunk + 64) : 0;
    return fit < want ? (size_t)fit : want;
}

static int posix_init(struct xfer_ctx *c)
{
    static unsigned seq;
    struct mq_shared *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    c->shared = s;
    s->id = -1;
    s->chunk = mq_cap(c->chunk ? c->chunk : MQ_CHUNK, xfer_read_long("/proc/sys/fs/mqueue/msgsize_max"));
    s->depth = mq_cap(c->depth ? c->depth : MQ_DEPTH, xfer_read_long("/proc/sys/fs/mqueue/msg_max"));
    s->depth = posix_depth_fit(s->chunk, s->depth);
    if (s->depth < 1)
        return -EMSGSIZE;
    snprintf(s->name, sizeof s->name, "/zimp-xfer-%d-%u", (int)getpid(), seq++);
    struct mq_attr a = { .mq_maxmsg = (long)s->depth, .mq_msgsize = (long)s->chunk };
    mqd_t q = mq_open(s->name, O_CREAT | O_EXCL | O_RDWR, 0600, &a);
    if (q == (mqd_t)-1)
        return -errno;
    mq_close(q);             /* each side opens its own descriptor by name */
    c->chunk = s->chunk, c->depth = (unsigned)s->depth;   /* what the kernel allowed */
    return 0;
}

static int posix_attach(struct xfer_ctx *c)
{
    const struct mq_shared *s = c->shared;
    int rc = mq_attach_common(c);
    if (rc < 0)
        return rc;
    struct mq_local *l = c->local;
    l->q = mq_open(s->name, O_RDWR);
    return l->q == (mqd_t)-1 ? -errno : 0;
}

static int posix_send(struct xfer_ctx *c, const void *src, void *peer_dst, size_t len)
{
    const struct mq_shared *s = c->shared;
    struct mq_local *l = c->local;
    const char *from = src;
    (void)peer_dst;
    for (size_t off = 0; off < len; off += s->chunk) {
        size_t n = len - off < s->chunk ? len - off : s->chunk;
        while (mq_send(l->q, from + off, n, 0) < 0)
            if (errno != EINTR)
                return -errno;
    }
    return 0;
}

static int posix_recv_into(mqd_t q, void *buf, size_t cap, size_t n)
{
    ssize_t got;
    while ((got = mq_receive(q, buf, cap, NULL)) < 0)
        if (errno != EINTR)
            return -errno;
    return (size_t)got == n ? 0 : -EPROTO;
}

static int posix_recv(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len)
{
    const struct mq_shared *s = c->shared;
    struct mq_local *l = c->local;
    unsigned char *to = dst;
    (void)peer_src;
    for (size_t off = 0; off < len; off += s->chunk) {
        size_t n = len - off < s->chunk ? len - off : s->chunk;
        int rc;
        if (len - off >= s->chunk) {
            /* mq_receive wants room for a full message: direct when there is */
            rc = posix_recv_into(l->q, to + off, s->chunk, n);
        } else {
            rc = posix_recv_into(l->q, l->stage, s->chunk, n);
            xcopy_out(to + off, l->stage, n, len);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void posix_finalize(struct xfer_ctx *c)
{
    struct mq_shared *s = c->shared;
    if (!s)
        return;
    if (s->name[0])
        mq_unlink(s->name);
    free(s);
    c->shared = NULL;
}

const struct xfer xfer_posix_mq = {
    .name = "posix-mq", .label = "POSIX message queue, chunked", .study_row = "Message queue",
    .flags = XFER_CHUNKED,
    .init = posix_init, .attach = posix_attach,
    .send = posix_send, .recv = posix_recv,
    .detach = mq_detach, .finalize = posix_finalize,
};
