/* Forked measurement runs (see run.h). */
#define _GNU_SOURCE
#include "run.h"
#include "msg.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NO_TOTAL UINT64_MAX
#define MAX_SAMPLES (1u << 20)

double run_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- process control ---- */

struct rx_stat {
    alignas(64) uint64_t msgs, lost;
    double secs;
    int err;
    char what[96];
};

struct ctrl {
    alignas(64) _Atomic int attached;
    _Atomic int failed;
    _Atomic int finished;
    alignas(64) _Atomic int64_t go_ns;      /* 0: not yet; -1: abort */
    alignas(64) _Atomic uint64_t total;     /* messages sent, NO_TOTAL while sending */
    alignas(64) struct {
        uint64_t sent;
        double send_p50_ns;
        double p50, p99, p999, max, mean;
        uint64_t samples;
        int err;
        char what[96];
    } tx;
    struct rx_stat rx[MECH_MAX_RECV];
};

static int g_cpus[256];
static int g_ncpu;

static void cpus_init(void)
{
    if (g_ncpu)
        return;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int i = 0; i < CPU_SETSIZE && g_ncpu < 256; i++)
            if (CPU_ISSET(i, &set))
                g_cpus[g_ncpu++] = i;
    }
    if (!g_ncpu)
        g_cpus[g_ncpu++] = 0;
}

static void pin_to(int slot)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(g_cpus[slot % g_ncpu], &set);
    sched_setaffinity(0, sizeof set, &set);
}

static void fail(struct ctrl *k, int *err, char *what, int rc, const char *step)
{
    *err = rc;
    snprintf(what, 96, "%s: %s", step, strerror(rc < 0 ? -rc : rc));
    atomic_fetch_add(&k->failed, 1);
}

/* Waits for the start signal; 0 to go, -1 to abort. */
static int await_go(struct ctrl *k)
{
    int64_t go;
    while ((go = atomic_load(&k->go_ns)) == 0)
        usleep(100);
    if (go < 0)
        return -1;
    while (now_ns() < go)
        ;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(const uint32_t *v, size_t n, double q)
{
    if (!n)
        return NAN;
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* Forks fn(arg, i) for i in 0..n-1; waits for every child to attach, starts
 * them together, reaps them within limit_s. Returns 0, or -ETIMEDOUT after
 * killing stragglers, or -ECHILD if a child failed before the start. */
static int run_children(struct ctrl *k, int n, void (*fn)(struct ctrl *, void *, int), void *arg,
                        double limit_s)
{
    pid_t pid[MECH_MAX_RECV + 2];
    int rc = 0, started = 0;
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            fn(k, arg, i);
            _exit(0);
        }
        if (pid[i] < 0) {
            rc = -errno;
            n = i;
            atomic_store(&k->go_ns, -1);
            break;
        }
    }
    double t0 = run_now_s();
    while (rc == 0 && atomic_load(&k->attached) + atomic_load(&k->failed) < n) {
        if (run_now_s() - t0 > 20) {
            rc = -ETIMEDOUT;
            break;
        }
        usleep(200);
    }
    if (rc == 0 && atomic_load(&k->failed) == 0) {
        atomic_store(&k->go_ns, now_ns() + 2000000);
        started = 1;
    } else {
        atomic_store(&k->go_ns, -1);
        if (rc == 0)
            rc = -ECHILD;
    }
    int left = n;
    double deadline = run_now_s() + (started ? limit_s : 5) + 15;
    int reaped[MECH_MAX_RECV + 2] = { 0 };
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (reaped[i])
                continue;
            int st;
            pid_t w = waitpid(pid[i], &st, WNOHANG);
            if (w == pid[i] || (w < 0 && errno == ECHILD)) {
                reaped[i] = 1;
                left--;
                if (w == pid[i] && !(WIFEXITED(st) && WEXITSTATUS(st) == 0) && rc == 0)
                    rc = -ECHILD;
            }
        }
        if (left > 0 && run_now_s() > deadline) {
            for (int i = 0; i < n; i++)
                if (!reaped[i])
                    kill(pid[i], SIGKILL);
            if (rc == 0)
                rc = -ETIMEDOUT;
            deadline = run_now_s() + 5;
        }
        if (left > 0)
            usleep(1000);
    }
    return rc;
}

/* ---- streaming: child 0 sends, children 1..n receive ---- */

struct stream_arg {
    struct mech_chan *c;
    size_t size;
    const struct run_opts *o;
    int pinned;
};

static void stream_sender(struct ctrl *k, struct stream_arg *a)
{
    struct mech_chan *c = a->c;
    const struct mech *m = c->m;
    c->idx = -1;
    if (a->pinned)
        pin_to(0);
    int rc = m->sender_attach(c);
    if (rc < 0) {
        fail(k, &k->tx.err, k->tx.what, rc, "sender_attach");
        m->detach(c);
        return;
    }
    atomic_fetch_add(&k->attached, 1);
    uint32_t *samp = malloc(sizeof(uint32_t) * 65536);
    size_t ns = 0;
    if (await_go(k) < 0 || !samp)
        goto out;
    int64_t end = atomic_load(&k->go_ns) + (int64_t)(a->o->seconds * 1e9);
    uint64_t seq = 0;
    for (;;) {
        int sample = (seq & 15) == 0;
        int64_t t0 = sample ? now_ns() : 0;
        void *buf;
        rc = m->send_begin(c, a->size, &buf);
        if (rc == 0) {
            msg_write(buf, a->size, seq, a->o->full_check);
            rc = m->send_end(c, MECH_ALL, buf, a->size);
        }
        if (rc < 0) {
            fail(k, &k->tx.err, k->tx.what, rc, "send");
            break;
        }
        seq++;
        if (sample) {
            int64_t t1 = now_ns();
            samp[ns++ & 65535] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
            if (t1 >= end)
                break;
        }
        if (a->o->max_msgs && seq >= a->o->max_msgs)
            break;
    }
    k->tx.sent = seq;
    atomic_store(&k->total, seq);
    if (rc == 0) {
        /* the stop message; lossy mechanisms repeat it until all receivers finished */
        double t_stop = run_now_s();
        do {
            void *buf;
            rc = m->send_begin(c, a->size, &buf);
            if (rc == 0) {
                msg_write(buf, a->size, seq, a->o->full_check);
                rc = m->send_end(c, MECH_ALL, buf, a->size);
            }
            if (!(m->flags & MECH_LOSSY))
                break;
            usleep(1000);
        } while (rc == 0 && atomic_load(&k->finished) < (int)c->nrecv && run_now_s() - t_stop < 2);
        if (rc < 0)
            fail(k, &k->tx.err, k->tx.what, rc, "send stop");
    }
    if (ns > 65536)
        ns = 65536;
    qsort(samp, ns, sizeof *samp, cmp_u32);
    k->tx.send_p50_ns = pct(samp, ns, 0.5);
    /* reliable mechanisms: stay attached until every receiver has its stop */
    while (atomic_load(&k->finished) + atomic_load(&k->failed) < (int)c->nrecv)
        usleep(200);
out:
    free(samp);
    m->detach(c);
}

static void stream_receiver(struct ctrl *k, struct stream_arg *a, unsigned idx)
{
    struct mech_chan *c = a->c;
    const struct mech *m = c->m;
    struct rx_stat *st = &k->rx[idx];
    if (a->pinned)
        pin_to((int)idx + 1);
    int rc = m->receiver_attach(c, idx);
    if (rc < 0) {
        fail(k, &st->err, st->what, rc, "receiver_attach");
        m->detach(c);
        return;
    }
    atomic_fetch_add(&k->attached, 1);
    if (await_go(k) < 0) {
        m->detach(c);
        return;
    }
    int64_t go = atomic_load(&k->go_ns);
    uint64_t expect = 0, count = 0, lost = 0;
    int lossy = (m->flags & MECH_LOSSY) != 0;
    double quiet_since = 0;
    for (;;) {
        const void *buf;
        size_t got;
        rc = m->recv_begin(c, a->size, &buf, &got);
        if (rc == -EAGAIN && lossy) {
            uint64_t total = atomic_load(&k->total);
            if (total != NO_TOTAL) {
                if (quiet_since == 0)
                    quiet_since = run_now_s();
                else if (run_now_s() - quiet_since > 0.2) {
                    if (total > expect)
                        lost += total - expect;
                    break;
                }
            }
            continue;
        }
        if (rc < 0) {
            fail(k, &st->err, st->what, rc, "recv");
            break;
        }
        if (got != a->size) {
            m->recv_end(c);
            fail(k, &st->err, st->what, -EBADMSG, "wrong length");
            break;
        }
        if (lossy) {   /* skip forward over lost datagrams */
            uint64_t mask = seq_mask(a->size);
            uint64_t skip = (msg_seq(buf, a->size) - expect) & mask;
            expect += skip;
            lost += skip;
        }
        uint64_t total = atomic_load(&k->total);
        if (total != NO_TOTAL && expect >= total) {
            m->recv_end(c);
            break;     /* stop message */
        }
        rc = msg_check(buf, a->size, expect, a->o->full_check);
        m->recv_end(c);
        if (rc < 0) {
            char step[64];
            snprintf(step, sizeof step, "message %llu corrupt or out of order",
                     (unsigned long long)expect);
            fail(k, &st->err, st->what, rc, step);
            break;
        }
        expect++;
        count++;
    }
    st->secs = (double)(now_ns() - go) * 1e-9;
    st->msgs = count;
    st->lost = lost;
    atomic_fetch_add(&k->finished, 1);
    /* stay until the sender is done: some mechanisms fail when a peer left */
    while (atomic_load(&k->total) == NO_TOTAL && !atomic_load(&k->failed))
        usleep(200);
    m->detach(c);
}

static void stream_child(struct ctrl *k, void *arg, int i)
{
    struct stream_arg *a = arg;
    if (i == 0)
        stream_sender(k, a);
    else
        stream_receiver(k, a, (unsigned)i - 1);
}

static struct ctrl *ctrl_new(void)
{
    struct ctrl *k = mech_map_shared(sizeof *k);
    if (k)
        atomic_store(&k->total, NO_TOTAL);
    return k;
}

int run_stream(const struct mech *m, unsigned nrecv, size_t size,
               const struct run_opts *o, struct stream_result *out)
{
    memset(out, 0, sizeof *out);
    cpus_init();
    struct mech_chan c = { .m = m, .nrecv = nrecv, .max_len = size, .idx = -1 };
    c.oversubscribed = (int)nrecv + 1 > g_ncpu;
    out->pinned = !c.oversubscribed;
    const char *why = m->unsupported ? m->unsupported(&c) : NULL;
    if (nrecv < 1 || nrecv > MECH_MAX_RECV)
        why = "receiver count out of range";
    if (why) {
        out->status = 1;
        snprintf(out->note, sizeof out->note, "n/a (%s)", why);
        return 1;
    }
    struct ctrl *k = ctrl_new();
    if (!k)
        return out->status = -ENOMEM;
    int rc = m->setup(&c);
    if (rc < 0) {
        out->status = 1;
        snprintf(out->note, sizeof out->note, "n/a (setup: %s)", strerror(-rc));
        m->teardown(&c);
        mech_unmap(k, sizeof *k);
        return 1;
    }
    struct stream_arg a = { &c, size, o, out->pinned };
    rc = run_children(k, (int)nrecv + 1, stream_child, &a, o->seconds);
    m->teardown(&c);
    double sum = 0, mn = INFINITY, lost = 0, msgs = 0;
    const char *what = k->tx.err ? k->tx.what : NULL;
    for (unsigned i = 0; i < nrecv; i++) {
        struct rx_stat *st = &k->rx[i];
        if (st->err && !what)
            what = st->what;
        double r = st->secs > 0 ? (double)st->msgs / st->secs : 0;
        sum += r;
        mn = r < mn ? r : mn;
        lost += (double)st->lost;
        msgs += (double)st->msgs;
    }
    if (rc < 0 || what) {
        out->status = rc < 0 ? rc : -EIO;
        snprintf(out->note, sizeof out->note, "error: %s", what ? what : strerror(-rc));
    } else {
        out->msgs_per_s = sum / nrecv;
        out->min_msgs_per_s = mn;
        out->mb_per_s = out->msgs_per_s * (double)size / 1e6;
        out->loss = msgs + lost > 0 ? lost / (msgs + lost) : 0;
        out->send_p50_ns = k->tx.send_p50_ns;
        out->msgs = (uint64_t)(msgs / nrecv);
    }
    mech_unmap(k, sizeof *k);
    return out->status;
}

/* ---- ping-pong: child 0 pings on fwd, child 1 answers on back ---- */

struct pp_arg {
    struct mech_chan *fwd, *back;
    size_t size;
    const struct run_opts *o;
    int pinned;
};

static int pp_send(struct mech_chan *c, size_t size, uint64_t seq, int full)
{
    void *buf;
    int rc = c->m->send_begin(c, size, &buf);
    if (rc < 0)
        return rc;
    msg_write(buf, size, seq, full);
    return c->m->send_end(c, 0, buf, size);
}

static int pp_recv(struct mech_chan *c, size_t size, uint64_t seq, int full)
{
    const void *buf;
    size_t got;
    int rc;
    while ((rc = c->m->recv_begin(c, size, &buf, &got)) == -EAGAIN)
        ;
    if (rc < 0)
        return rc;
    rc = got == size ? msg_check(buf, size, seq, full) : -EBADMSG;
    c->m->recv_end(c);
    return rc;
}

static void pp_child(struct ctrl *k, void *arg, int i)
{
    struct pp_arg *a = arg;
    const struct mech *m = a->fwd->m;
    int full = a->o->full_check;
    int *err = i == 0 ? &k->tx.err : &k->rx[0].err;
    char *what = i == 0 ? k->tx.what : k->rx[0].what;
    if (a->pinned)
        pin_to(i);
    /* A: sender of fwd, receiver of back; B: the opposite */
    struct mech_chan *mine_tx = i == 0 ? a->fwd : a->back;
    struct mech_chan *mine_rx = i == 0 ? a->back : a->fwd;
    mine_tx->idx = -1;
    int rc = m->receiver_attach(mine_rx, 0);
    if (rc == 0)
        rc = m->sender_attach(mine_tx);
    if (rc < 0) {
        fail(k, err, what, rc, "attach");
        goto out;
    }
    atomic_fetch_add(&k->attached, 1);
    if (await_go(k) < 0)
        goto out;
    if (i == 1) {
        for (uint64_t seq = 0;; seq++) {
            const void *buf;
            size_t got;
            while ((rc = m->recv_begin(mine_rx, a->size, &buf, &got)) == -EAGAIN)
                ;
            if (rc == 0) {
                uint64_t total = atomic_load(&k->total);
                int stop = total != NO_TOTAL && seq >= total;
                if (!stop)
                    rc = got == a->size ? msg_check(buf, a->size, seq, full) : -EBADMSG;
                m->recv_end(mine_rx);
                if (stop)
                    break;
            }
            if (rc == 0)
                rc = pp_send(mine_tx, a->size, seq, full);
            if (rc < 0) {
                fail(k, err, what, rc, "pong");
                break;
            }
        }
        goto out;
    }
    uint32_t *samp = malloc(sizeof(uint32_t) * MAX_SAMPLES);
    size_t ns = 0;
    uint64_t warm = 200, seq = 0;
    int64_t end = atomic_load(&k->go_ns) + (int64_t)(a->o->seconds * 1e9);
    double sum = 0;
    uint32_t *ssamp = malloc(sizeof(uint32_t) * MAX_SAMPLES);   /* send_begin..send_end */
    while (samp && ssamp) {
        int64_t t0 = now_ns();
        rc = pp_send(mine_tx, a->size, seq, full);
        int64_t ts = now_ns();
        if (rc == 0)
            rc = pp_recv(mine_rx, a->size, seq, full);
        int64_t t1 = now_ns();
        if (seq >= warm && ns < MAX_SAMPLES)
            ssamp[ns] = (uint32_t)(ts - t0);
        if (rc < 0) {
            fail(k, err, what, rc, "ping");
            break;
        }
        if (seq++ >= warm && ns < MAX_SAMPLES) {
            uint32_t v = (uint32_t)((t1 - t0) / 2);
            samp[ns++] = v;
            sum += v;
        }
        if (t1 >= end || ns >= MAX_SAMPLES || (a->o->max_msgs && seq >= a->o->max_msgs))
            break;
    }
    atomic_store(&k->total, seq);
    if (rc == 0 && pp_send(mine_tx, a->size, seq, full) < 0)
        fail(k, err, what, -EIO, "stop");
    if (samp && ssamp) {
        qsort(ssamp, ns, sizeof *ssamp, cmp_u32);
        k->tx.send_p50_ns = pct(ssamp, ns, 0.5);
        qsort(samp, ns, sizeof *samp, cmp_u32);
        k->tx.p50 = pct(samp, ns, 0.5);
        k->tx.p99 = pct(samp, ns, 0.99);
        k->tx.p999 = pct(samp, ns, 0.999);
        k->tx.max = ns ? samp[ns - 1] : NAN;
        k->tx.mean = ns ? sum / (double)ns : NAN;
        k->tx.samples = ns;
    }
    free(samp);
    free(ssamp);
    /* wait for the stop to be consumed before leaving */
    while (atomic_load(&k->finished) < 1 && !atomic_load(&k->failed))
        usleep(200);
out:
    if (i == 1)
        atomic_fetch_add(&k->finished, 1);
    m->detach(mine_tx);
    m->detach(mine_rx);
}

int run_pingpong(const struct mech *m, size_t size, const struct run_opts *o, struct lat_result *out)
{
    memset(out, 0, sizeof *out);
    cpus_init();
    struct mech_chan fwd = { .m = m, .nrecv = 1, .max_len = size, .idx = -1 };
    fwd.oversubscribed = g_ncpu < 2;
    struct mech_chan back = fwd;
    out->pinned = !fwd.oversubscribed;
    const char *why = m->unsupported ? m->unsupported(&fwd) : NULL;
    if (why) {
        out->status = 1;
        snprintf(out->note, sizeof out->note, "n/a (%s)", why);
        return 1;
    }
    struct ctrl *k = ctrl_new();
    if (!k)
        return out->status = -ENOMEM;
    int rc = m->setup(&fwd);
    int rc2 = rc < 0 ? rc : m->setup(&back);
    if (rc < 0 || rc2 < 0) {
        out->status = 1;
        snprintf(out->note, sizeof out->note, "n/a (setup: %s)", strerror(-(rc < 0 ? rc : rc2)));
        m->teardown(&fwd);
        if (rc == 0)
            m->teardown(&back);
        mech_unmap(k, sizeof *k);
        return 1;
    }
    struct pp_arg a = { &fwd, &back, size, o, out->pinned };
    rc = run_children(k, 2, pp_child, &a, o->seconds);
    m->teardown(&fwd);
    m->teardown(&back);
    const char *what = k->tx.err ? k->tx.what : k->rx[0].err ? k->rx[0].what : NULL;
    if (rc < 0 || what) {
        out->status = rc < 0 ? rc : -EIO;
        snprintf(out->note, sizeof out->note, "error: %s", what ? what : strerror(-rc));
    } else {
        out->p50 = k->tx.p50;
        out->p99 = k->tx.p99;
        out->p999 = k->tx.p999;
        out->max = k->tx.max;
        out->mean = k->tx.mean;
        out->samples = k->tx.samples;
        out->send_p50_ns = k->tx.send_p50_ns;
    }
    mech_unmap(k, sizeof *k);
    return out->status;
}

/* ---- probe ---- */

struct probe_arg { _Atomic uint64_t *word; double seconds; };

static void probe_child(struct ctrl *k, void *arg, int i)
{
    struct probe_arg *a = arg;
    pin_to(i);
    atomic_fetch_add(&k->attached, 1);
    if (await_go(k) < 0)
        return;
    int64_t end = atomic_load(&k->go_ns) + (int64_t)(a->seconds * 1e9);
    uint64_t v = (uint64_t)i, n = 0;
    int64_t t0 = now_ns(), t1 = t0;
    for (;;) {
        /* A moves even -> odd, B odd -> even; UINT64_MAX ends it */
        uint64_t w;
        while ((w = atomic_load_explicit(a->word, memory_order_acquire)) != v && w != UINT64_MAX)
            __builtin_ia32_pause();
        if (w == UINT64_MAX)
            break;
        n++;
        if ((n & 1023) == 0 && i == 0 && (t1 = now_ns()) >= end) {
            atomic_store(a->word, UINT64_MAX);
            break;
        }
        atomic_store_explicit(a->word, v + 1, memory_order_release);
        v += 2;
    }
    if (i == 0) {
        k->tx.mean = (double)(t1 - t0) / (double)(2 * n);
        k->tx.samples = n;
    }
}

double run_probe(double seconds)
{
    cpus_init();
    if (g_ncpu < 2)
        return NAN;
    struct ctrl *k = ctrl_new();
    _Atomic uint64_t *word = mech_map_shared(4096);
    if (!k || !word) {
        mech_unmap(k, sizeof *k);
        return NAN;
    }
    struct probe_arg a = { word, seconds };
    int rc = run_children(k, 2, probe_child, &a, seconds);
    double v = rc == 0 && k->tx.samples ? k->tx.mean : NAN;
    mech_unmap((void *)word, 4096);
    mech_unmap(k, sizeof *k);
    return v;
}
