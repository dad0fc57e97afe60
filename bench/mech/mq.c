/* Message queues, one per receiver: System V (msgsnd/msgrcv) and POSIX
 * (mq_send/mq_receive). Message size limits are the kernel's: SysV
 * kernel.msgmax, POSIX fs.mqueue.msgsize_max and RLIMIT_MSGQUEUE (the
 * latter raised here when the process may, else the queue depth shrinks to
 * fit; scripts/bench.sh raises the sysctls when it runs as root). */
#define _GNU_SOURCE
#include "../mech.h"

#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/resource.h>
#include <unistd.h>

struct mq_state {
    int id[MECH_MAX_RECV];          /* SysV queue ids */
    mqd_t mq[MECH_MAX_RECV];        /* POSIX descriptors (inherited) */
    char name[MECH_MAX_RECV][48];
};

static int local_alloc(struct mech_chan *c)
{
    c->local = mech_alloc_local(c->max_len + 16);
    return c->local ? 0 : -ENOMEM;
}

static int q_sender_attach(struct mech_chan *c) { return local_alloc(c); }
static int q_receiver_attach(struct mech_chan *c, unsigned idx)
{
    c->idx = (int)idx;
    return local_alloc(c);
}
static void q_recv_end(struct mech_chan *c) { (void)c; }
static void q_detach(struct mech_chan *c)
{
    free(c->local);
    c->local = NULL;
}

/* ---- System V ---- */

static char sysv_reason[96];

static const char *sysv_unsupported(const struct mech_chan *c)
{
    long max = mech_read_sysctl("/proc/sys/kernel/msgmax");
    if (max >= 0 && c->max_len > (size_t)max) {
        snprintf(sysv_reason, sizeof sysv_reason, "> kernel.msgmax %ld B", max);
        return sysv_reason;
    }
    return NULL;
}

static int sysv_setup(struct mech_chan *c)
{
    struct mq_state *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    c->shared = s;
    for (int i = 0; i < MECH_MAX_RECV; i++)
        s->id[i] = -1;
    for (unsigned i = 0; i < c->nrecv; i++) {
        s->id[i] = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
        if (s->id[i] < 0)
            return -errno;
        struct msqid_ds ds;
        if (msgctl(s->id[i], IPC_STAT, &ds) == 0 && ds.msg_qbytes < 4 * (c->max_len + 8)) {
            ds.msg_qbytes = 4 * (c->max_len + 8);
            msgctl(s->id[i], IPC_SET, &ds);   /* root only; else the default stays */
        }
        if (msgctl(s->id[i], IPC_STAT, &ds) == 0 && ds.msg_qbytes < c->max_len)
            return -EMSGSIZE;                /* would block forever: > the queue's byte limit */
    }
    return 0;
}

static int sysv_send_begin(struct mech_chan *c, size_t len, void **buf)
{
    *(long *)c->local = 1;              /* mtype */
    *buf = (char *)c->local + sizeof(long);
    return len <= c->max_len ? 0 : -EMSGSIZE;
}

static int sysv_send_to(int id, void *msg, size_t len)
{
    while (msgsnd(id, msg, len, 0) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    return 0;
}

static int sysv_send_end(struct mech_chan *c, int dst, void *buf, size_t len)
{
    struct mq_state *s = c->shared;
    void *msg = (char *)buf - sizeof(long);
    if (dst >= 0)
        return dst < (int)c->nrecv ? sysv_send_to(s->id[dst], msg, len) : -EINVAL;
    for (unsigned i = 0; i < c->nrecv; i++) {
        int rc = sysv_send_to(s->id[i], msg, len);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int sysv_recv_begin(struct mech_chan *c, size_t len, const void **buf, size_t *got)
{
    struct mq_state *s = c->shared;
    (void)len;
    for (;;) {
        ssize_t n = msgrcv(s->id[c->idx], c->local, c->max_len, 0, 0);
        if (n >= 0) {
            *buf = (char *)c->local + sizeof(long);
            *got = (size_t)n;
            return 0;
        }
        if (errno != EINTR)
            return -errno;
    }
}

static void sysv_teardown(struct mech_chan *c)
{
    struct mq_state *s = c->shared;
    if (!s)
        return;
    for (int i = 0; i < MECH_MAX_RECV; i++)
        if (s->id[i] >= 0)
            msgctl(s->id[i], IPC_RMID, NULL);
    free(s);
    c->shared = NULL;
}

const struct mech mech_sysv_mq = {
    .name = "sysv-mq", .label = "System V MQ",
    .unsupported = sysv_unsupported, .setup = sysv_setup,
    .sender_attach = q_sender_attach, .receiver_attach = q_receiver_attach,
    .send_begin = sysv_send_begin, .send_end = sysv_send_end,
    .recv_begin = sysv_recv_begin, .recv_end = q_recv_end,
    .detach = q_detach, .teardown = sysv_teardown,
};

/* ---- POSIX ---- */

static char posix_reason[128];

/* Queue depth that fits RLIMIT_MSGQUEUE for nrecv queues (raising the limit
 * first where allowed): at most fs.mqueue.msg_max and 10, 0 if none fits. */
static long posix_depth(const struct mech_chan *c)
{
    long depth = mech_read_sysctl("/proc/sys/fs/mqueue/msg_max");
    if (depth <= 0 || depth > 10)
        depth = 10;
    /* the kernel charges about msgsize + one pointer per message, plus a tree node */
    rlim_t per = (rlim_t)(c->max_len ? c->max_len : 1) + 64;
    rlim_t need = (rlim_t)c->nrecv * (rlim_t)depth * per + 65536;
    struct rlimit rl;
    if (getrlimit(RLIMIT_MSGQUEUE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return depth;
    if (rl.rlim_cur < need) {
        struct rlimit want = { need, rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? rl.rlim_max : need };
        if (setrlimit(RLIMIT_MSGQUEUE, &want) == 0)
            return depth;
        if (rl.rlim_max != rl.rlim_cur) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_MSGQUEUE, &rl);
        }
        getrlimit(RLIMIT_MSGQUEUE, &rl);
    }
    rlim_t fit = rl.rlim_cur > 65536 ? (rl.rlim_cur - 65536) / ((rlim_t)c->nrecv * per) : 0;
    return (long)fit < depth ? (long)fit : depth;
}

static const char *posix_unsupported(const struct mech_chan *c)
{
    long max = mech_read_sysctl("/proc/sys/fs/mqueue/msgsize_max");
    if (max >= 0 && c->max_len > (size_t)max) {
        snprintf(posix_reason, sizeof posix_reason, "> fs.mqueue.msgsize_max %ld B", max);
        return posix_reason;
    }
    if (posix_depth(c) < 1) {
        struct rlimit rl = { 0, 0 };
        getrlimit(RLIMIT_MSGQUEUE, &rl);
        snprintf(posix_reason, sizeof posix_reason, "RLIMIT_MSGQUEUE %llu B < %u queues x 1 message",
                 (unsigned long long)rl.rlim_cur, c->nrecv);
        return posix_reason;
    }
    return NULL;
}

static int posix_setup(struct mech_chan *c)
{
    static unsigned seq;
    struct mq_state *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    c->shared = s;
    for (int i = 0; i < MECH_MAX_RECV; i++)
        s->mq[i] = (mqd_t)-1;
    long depth = posix_depth(c);
    if (depth < 1)
        return -EMFILE;
    for (unsigned i = 0; i < c->nrecv; i++) {
        struct mq_attr a = { .mq_maxmsg = depth, .mq_msgsize = (long)(c->max_len ? c->max_len : 1) };
        snprintf(s->name[i], sizeof s->name[i], "/zimp-bench-%d-%u-%u", (int)getpid(), seq++, i);
        s->mq[i] = mq_open(s->name[i], O_CREAT | O_EXCL | O_RDWR, 0600, &a);
        if (s->mq[i] == (mqd_t)-1)
            return -errno;
    }
    return 0;
}

static int posix_send_begin(struct mech_chan *c, size_t len, void **buf)
{
    *buf = c->local;
    return len <= c->max_len ? 0 : -EMSGSIZE;
}

static int posix_send_to(mqd_t q, const void *buf, size_t len)
{
    while (mq_send(q, buf, len, 0) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    return 0;
}

static int posix_send_end(struct mech_chan *c, int dst, void *buf, size_t len)
{
    struct mq_state *s = c->shared;
    if (dst >= 0)
        return dst < (int)c->nrecv ? posix_send_to(s->mq[dst], buf, len) : -EINVAL;
    for (unsigned i = 0; i < c->nrecv; i++) {
        int rc = posix_send_to(s->mq[i], buf, len);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int posix_recv_begin(struct mech_chan *c, size_t len, const void **buf, size_t *got)
{
    struct mq_state *s = c->shared;
    (void)len;
    for (;;) {
        ssize_t n = mq_receive(s->mq[c->idx], c->local, c->max_len ? c->max_len : 1, NULL);
        if (n >= 0) {
            *buf = c->local;
            *got = (size_t)n;
            return 0;
        }
        if (errno != EINTR)
            return -errno;
    }
}

static void posix_teardown(struct mech_chan *c)
{
    struct mq_state *s = c->shared;
    if (!s)
        return;
    for (int i = 0; i < MECH_MAX_RECV; i++) {
        if (s->mq[i] != (mqd_t)-1) {
            mq_close(s->mq[i]);
            mq_unlink(s->name[i]);
        }
    }
    free(s);
    c->shared = NULL;
}

const struct mech mech_posix_mq = {
    .name = "posix-mq", .label = "POSIX MQ",
    .unsupported = posix_unsupported, .setup = posix_setup,
    .sender_attach = q_sender_attach, .receiver_attach = q_receiver_attach,
    .send_begin = posix_send_begin, .send_end = posix_send_end,
    .recv_begin = posix_recv_begin, .recv_end = q_recv_end,
    .detach = q_detach, .teardown = posix_teardown,
};
