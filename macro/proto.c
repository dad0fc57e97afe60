/* PaxosInside and the snapshot protocol over struct mech (see macro.h). */
#define _GNU_SOURCE
#include "macro.h"

#include <errno.h>
#include <signal.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEY      0x9e3779b97f4a7c15ull
#define STOP     UINT64_MAX
#define REP_LEN  24u
#define MAXPROC  (SNAP_MAX_NODES + 8)
#define WARMUP   50u

double macro_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int macro_mech_usable(const struct mech *m)
{
    return !(m->flags & (MECH_EXTERNAL | MECH_LOSSY));
}

/* ---- messages: [a u64][b u64] ... [tail u64 = f(a, b, len)] ---- */

static uint64_t tail_of(uint64_t a, uint64_t b, size_t len)
{
    return (a * KEY) ^ (b + 0x51ed27ull) ^ (uint64_t)len;
}

static void stamp(void *buf, size_t len, uint64_t a, uint64_t b)
{
    char *p = buf;
    uint64_t t = tail_of(a, b, len);
    memcpy(p, &a, 8);
    memcpy(p + 8, &b, 8);
    memcpy(p + len - 8, &t, 8);
}

/* 0 if buf is message (a, b) of length len. */
static int check(const void *buf, size_t got, size_t len, uint64_t a, uint64_t b)
{
    const char *p = buf;
    uint64_t x, y, t;
    if (got != len)
        return -EBADMSG;
    memcpy(&x, p, 8);
    memcpy(&y, p + 8, 8);
    memcpy(&t, p + len - 8, 8);
    return x == a && y == b && t == tail_of(a, b, len) ? 0 : -EBADMSG;
}

static uint64_t field(const void *buf, int i)
{
    uint64_t v;
    memcpy(&v, (const char *)buf + 8 * i, 8);
    return v;
}

static uint64_t fnv(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- process group: shared control block, barrier, reaping ---- */

struct ctl {
    alignas(64) _Atomic int ready;
    _Atomic int finished;
    uint64_t decided;
    _Atomic int failed;
    char note[160];
    double secs;
    uint64_t learned[PAXOS_LEARNERS], hash[PAXOS_LEARNERS];
    double mean_us, p50_us, p99_us;
    uint64_t done;
};

static struct ctl *ctl_new(void)
{
    void *p = mmap(NULL, sizeof(struct ctl), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Records the first failure; the others see ctl->failed and leave. */
static int fail(struct ctl *k, int rc, const char *fmt, ...)
{
    int zero = 0;
    if (atomic_compare_exchange_strong(&k->failed, &zero, 1)) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(k->note, sizeof k->note, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof k->note)
            snprintf(k->note + n, sizeof k->note - (size_t)n, ": %s", strerror(rc < 0 ? -rc : rc));
    }
    return rc < 0 ? rc : -EIO;
}

/* Every process arrives once attached; returns -1 if one of them failed. */
static int barrier(struct ctl *k, int nproc)
{
    atomic_fetch_add(&k->ready, 1);
    double end = macro_now_s() + 30;
    while (atomic_load(&k->ready) < nproc) {
        if (atomic_load(&k->failed) || macro_now_s() > end)
            return -1;
        usleep(200);
    }
    return 0;
}

/* Every process arrives after its last send: a mechanism may need its
 * sender alive until the message is read (cross-memory attach). */
static void exit_barrier(struct ctl *k, int nproc)
{
    atomic_fetch_add(&k->finished, 1);
    double end = macro_now_s() + 30;
    while (atomic_load(&k->finished) < nproc && !atomic_load(&k->failed) && macro_now_s() < end)
        usleep(200);
}

/* Waits for every child; kills all on the first failure or at the deadline. */
static int reap(pid_t *pids, int n, double timeout_s, struct ctl *k)
{
    double end = macro_now_s() + timeout_s;
    int left = n, bad = 0, timedout = 0;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int i = 0; i < n; i++)
                if (pids[i] == p) {
                    pids[i] = 0;
                    left--;
                    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                        if (!bad && !atomic_load(&k->failed))
                            fail(k, -ECHILD, "role %d %s %d", i,
                                 WIFSIGNALED(st) ? "killed by signal" : "exited",
                                 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
                        bad = 1;
                    }
                }
            continue;
        }
        if (bad || atomic_load(&k->failed) || macro_now_s() > end) {
            if (!bad && !atomic_load(&k->failed))
                timedout = 1;
            for (int i = 0; i < n; i++)
                if (pids[i] > 0)
                    kill(pids[i], SIGKILL);
            bad = 1;
        }
        usleep(500);
    }
    if (timedout)
        fail(k, -ETIMEDOUT, "run exceeded %.0f s", timeout_s);
    return bad || atomic_load(&k->failed) ? -1 : 0;
}

/* ---- channels ---- */

struct chans {
    struct mech_chan c[MAXPROC];
    int n;
};

/* 0 ready, 1 not applicable (why filled), <0 setup error. */
static int chan_add(struct chans *cs, const struct mech *m, unsigned nrecv, size_t len,
                    int oversub, char *why, size_t whylen)
{
    struct mech_chan *c = &cs->c[cs->n];
    memset(c, 0, sizeof *c);
    c->m = m;
    c->nrecv = nrecv;
    c->max_len = len;
    c->oversubscribed = oversub;
    c->idx = -1;
    const char *u = m->unsupported ? m->unsupported(c) : NULL;
    if (u) {
        snprintf(why, whylen, "%s", u);
        return 1;
    }
    cs->n++;
    int rc = m->setup(c);
    if (rc < 0) {   /* a resource limit of the mechanism at this size */
        snprintf(why, whylen, "setup(%u receivers, %zu B): %s", nrecv, len, strerror(-rc));
        return 1;
    }
    return 0;
}

static void chans_teardown(struct chans *cs)
{
    for (int i = cs->n - 1; i >= 0; i--)
        if (cs->c[i].m)
            cs->c[i].m->teardown(&cs->c[i]);
    cs->n = 0;
}

static int tx(struct mech_chan *c, size_t len, void **buf)
{
    return c->m->send_begin(c, len, buf);
}

static int rx(struct mech_chan *c, size_t len, const void **buf, size_t *got)
{
    for (;;) {
        int rc = c->m->recv_begin(c, len, buf, got);
        if (rc != -EAGAIN)
            return rc;
    }
}

/* ---- PaxosInside ---- */

enum { P_CLIENT, P_LEADER, P_ACCEPTOR, P_LEARNER0 };
#define P_NPROC (P_LEARNER0 + PAXOS_LEARNERS)
/* channel indices */
enum { C_REQ, C_ACC, C_DEC, C_REP0 };

static int paxos_client(struct chans *cs, const struct paxos_opts *o, unsigned w, struct ctl *k)
{
    struct mech_chan *req = &cs->c[C_REQ];
    struct mech_chan *rep[PAXOS_LEARNERS];
    int rc = req->m->sender_attach(req);
    for (int i = 0; i < PAXOS_LEARNERS && rc == 0; i++) {
        rep[i] = &cs->c[C_REP0 + i];
        rc = rep[i]->m->receiver_attach(rep[i], 0);
    }
    char *value = malloc(o->size);
    if (rc < 0 || !value)
        return fail(k, rc < 0 ? rc : -ENOMEM, "client attach");
    for (size_t i = 0; i < o->size; i++)
        value[i] = (char)(i * 131 + 7);
    if (barrier(k, P_NPROC) < 0)
        return -1;
    double t0 = macro_now_s();
    uint64_t count = o->count;
    for (uint64_t inst = 1; inst <= count + w; inst++) {
        if (inst > w) {          /* window full: collect the oldest consensus */
            uint64_t want = inst - w;
            for (int i = 0; i < PAXOS_LEARNERS; i++) {
                const void *b;
                size_t got;
                if ((rc = rx(rep[i], REP_LEN, &b, &got)) < 0)
                    return fail(k, rc, "client recv reply %llu", (unsigned long long)want);
                rc = check(b, got, REP_LEN, want, (uint64_t)i);
                rep[i]->m->recv_end(rep[i]);
                if (rc < 0)
                    return fail(k, rc, "client: bad reply from learner %d for %llu", i,
                                (unsigned long long)want);
            }
        }
        if (inst > count)
            continue;
        if (o->max_s > 0 && (inst & 63) == 0 && macro_now_s() - t0 > o->max_s)
            count = inst - 1;   /* time cap: stop proposing, collect the window */
        if (inst > count)
            continue;
        void *b;
        if ((rc = tx(req, o->size, &b)) < 0)
            return fail(k, rc, "client send_begin");
        memcpy(b, value, o->size);
        stamp(b, o->size, inst, 0);
        if ((rc = req->m->send_end(req, 0, b, o->size)) < 0)
            return fail(k, rc, "client send");
    }
    k->secs = macro_now_s() - t0;
    k->decided = count;
    void *b;
    if ((rc = tx(req, o->size, &b)) < 0)
        return fail(k, rc, "client send_begin");
    stamp(b, o->size, STOP, 0);
    if ((rc = req->m->send_end(req, 0, b, o->size)) < 0)
        return fail(k, rc, "client send stop");
    exit_barrier(k, P_NPROC);
    req->m->detach(req);
    for (int i = 0; i < PAXOS_LEARNERS; i++)
        rep[i]->m->detach(rep[i]);
    free(value);
    return 0;
}

/* Leader (ballot 1) and acceptor: receive on in, copy to out. The leader
 * tags the accept with its ballot; the acceptor checks it, accepts instances
 * in order and multicasts the decision to every learner. */
static int paxos_forward(struct chans *cs, const struct paxos_opts *o, int role, struct ctl *k)
{
    struct mech_chan *in = &cs->c[role == P_LEADER ? C_REQ : C_ACC];
    struct mech_chan *out = &cs->c[role == P_LEADER ? C_ACC : C_DEC];
    const char *who = role == P_LEADER ? "leader" : "acceptor";
    int rc = in->m->receiver_attach(in, 0);
    if (rc == 0)
        rc = out->m->sender_attach(out);
    if (rc < 0)
        return fail(k, rc, "%s attach", who);
    if (barrier(k, P_NPROC) < 0)
        return -1;
    uint64_t ballot_in = role == P_LEADER ? 0 : 1, ballot_out = 1;
    for (uint64_t inst = 1;; inst++) {
        const void *m;
        size_t got;
        void *b;
        if ((rc = rx(in, o->size, &m, &got)) < 0)
            return fail(k, rc, "%s recv %llu", who, (unsigned long long)inst);
        uint64_t id = field(m, 0);
        if (id == STOP)
            inst = STOP;
        if ((rc = check(m, got, o->size, inst, ballot_in)) < 0)
            return fail(k, rc, "%s: expected instance %llu ballot %llu", who,
                        (unsigned long long)inst, (unsigned long long)ballot_in);
        if ((rc = tx(out, o->size, &b)) < 0)
            return fail(k, rc, "%s send_begin", who);
        memcpy(b, m, o->size);
        in->m->recv_end(in);
        stamp(b, o->size, inst, ballot_out);
        if ((rc = out->m->send_end(out, role == P_LEADER ? 0 : MECH_ALL, b, o->size)) < 0)
            return fail(k, rc, "%s send", who);
        if (inst == STOP)
            break;
    }
    exit_barrier(k, P_NPROC);
    in->m->detach(in);
    out->m->detach(out);
    return 0;
}

static int paxos_learner(struct chans *cs, const struct paxos_opts *o, int i, struct ctl *k)
{
    struct mech_chan *dec = &cs->c[C_DEC], *rep = &cs->c[C_REP0 + i];
    int rc = dec->m->receiver_attach(dec, (unsigned)i);
    if (rc == 0)
        rc = rep->m->sender_attach(rep);
    if (rc < 0)
        return fail(k, rc, "learner %d attach", i);
    if (barrier(k, P_NPROC) < 0)
        return -1;
    uint64_t h = 0xcbf29ce484222325ull, n = 0;
    size_t sample = o->size < 64 ? o->size : 64;
    for (uint64_t inst = 1;; inst++) {
        const void *m;
        size_t got;
        if ((rc = rx(dec, o->size, &m, &got)) < 0)
            return fail(k, rc, "learner %d recv %llu", i, (unsigned long long)inst);
        if (field(m, 0) == STOP) {
            dec->m->recv_end(dec);
            break;
        }
        if ((rc = check(m, got, o->size, inst, 1)) < 0)
            return fail(k, rc, "learner %d: expected decision %llu", i, (unsigned long long)inst);
        h = fnv(h, m, sample);
        h = fnv(h, (const char *)m + o->size - 8, 8);
        n++;
        dec->m->recv_end(dec);
        void *b;
        if ((rc = tx(rep, REP_LEN, &b)) < 0)
            return fail(k, rc, "learner %d send_begin", i);
        stamp(b, REP_LEN, inst, (uint64_t)i);
        if ((rc = rep->m->send_end(rep, 0, b, REP_LEN)) < 0)
            return fail(k, rc, "learner %d reply", i);
    }
    k->learned[i] = n;
    k->hash[i] = h;
    exit_barrier(k, P_NPROC);
    dec->m->detach(dec);
    rep->m->detach(rep);
    return 0;
}

/*
 * Forks one process per role p in [0, nproc) running role(p, ctx), waits for
 * them (bounded by timeout_s), then tears the channels down and frees them.
 * 0, or -EIO with the failure copied into note.
 */
static int run_roles(struct chans *cs, int nproc, int (*role)(int p, void *ctx), void *ctx,
                     double timeout_s, struct ctl *k, char *note, size_t cap)
{
    pid_t pids[MAXPROC];
    int nforked = 0;
    fflush(NULL);
    for (int p = 0; p < nproc && p < MAXPROC; p++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(role(p, ctx) == 0 ? 0 : 1);
        if (pid < 0) {
            fail(k, -errno, "fork");
            break;
        }
        pids[nforked++] = pid;
    }
    reap(pids, nforked, timeout_s, k);
    chans_teardown(cs);
    free(cs);
    if (!atomic_load(&k->failed))
        return 0;
    snprintf(note, cap, "%s", k->note);
    return -EIO;
}

static unsigned paxos_window(const struct mech *m)
{
    /* POSIX queues hold 10 messages by default; everything else >= 32. */
    return strcmp(m->name, "posix-mq") == 0 ? 8 : 16;
}

struct paxos_run { struct chans *cs; const struct paxos_opts *o; unsigned w; struct ctl *k; };

static int paxos_role(int p, void *ctx)
{
    struct paxos_run *a = ctx;
    if (p == P_CLIENT)
        return paxos_client(a->cs, a->o, a->w, a->k);
    if (p == P_LEADER || p == P_ACCEPTOR)
        return paxos_forward(a->cs, a->o, p, a->k);
    return paxos_learner(a->cs, a->o, p - P_LEARNER0, a->k);
}

int macro_paxos(const struct mech *m, const struct paxos_opts *o, struct paxos_result *r)
{
    memset(r, 0, sizeof *r);
    if (o->size < 64 || o->count == 0) {
        snprintf(r->note, sizeof r->note, "size must be >= 64 B");
        return r->status = -EINVAL;
    }
    unsigned w = o->window ? o->window : paxos_window(m);
    r->window = w;
    int oversub = P_NPROC > mech_nprocs_online();
    struct chans *cs = calloc(1, sizeof *cs);
    struct ctl *k = ctl_new();
    if (!cs || !k) {
        free(cs);
        snprintf(r->note, sizeof r->note, "out of memory");
        return r->status = -ENOMEM;
    }
    int rc = chan_add(cs, m, 1, o->size, oversub, r->note, sizeof r->note);
    if (rc == 0)
        rc = chan_add(cs, m, 1, o->size, oversub, r->note, sizeof r->note);
    if (rc == 0)
        rc = chan_add(cs, m, PAXOS_LEARNERS, o->size, oversub, r->note, sizeof r->note);
    for (int i = 0; i < PAXOS_LEARNERS && rc == 0; i++)
        rc = chan_add(cs, m, 1, REP_LEN, oversub, r->note, sizeof r->note);
    if (rc != 0) {
        chans_teardown(cs);
        free(cs);
        munmap(k, sizeof *k);
        return r->status = rc;
    }
    struct paxos_run run = { cs, o, w, k };
    if (run_roles(cs, P_NPROC, paxos_role, &run, o->timeout_s, k, r->note, sizeof r->note) != 0) {
        r->status = -EIO;
    } else {
        r->secs = k->secs;
        r->decided = k->decided;
        r->per_s = (double)k->decided / k->secs;
        memcpy(r->learned, k->learned, sizeof r->learned);
        memcpy(r->hash, k->hash, sizeof r->hash);
        for (int i = 0; i < PAXOS_LEARNERS; i++)
            if (r->learned[i] != k->decided || r->hash[i] != r->hash[0]) {
                snprintf(r->note, sizeof r->note, "learner %d learned %llu values (hash %llx), learner 0 %llu (%llx)",
                         i, (unsigned long long)r->learned[i], (unsigned long long)r->hash[i],
                         (unsigned long long)r->learned[0], (unsigned long long)r->hash[0]);
                r->status = -EBADMSG;
            }
    }
    munmap(k, sizeof *k);
    return r->status;
}

/* ---- snapshot ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* channel 0: request to every node; channel i (1..n-1): node i's checkpoints */
static int snap_initiator(struct chans *cs, const struct snap_opts *o, struct ctl *k)
{
    unsigned n = o->nodes;
    struct mech_chan *req = &cs->c[0];
    int rc = req->m->sender_attach(req);
    for (unsigned i = 1; i < n && rc == 0; i++)
        rc = cs->c[i].m->receiver_attach(&cs->c[i], 0);
    uint64_t total = o->count + WARMUP;
    double *lat = malloc(sizeof(double) * o->count);
    if (rc < 0 || !lat)
        return fail(k, rc < 0 ? rc : -ENOMEM, "initiator attach");
    if (barrier(k, (int)n) < 0)
        return -1;
    double start = macro_now_s();
    for (uint64_t round = 1; round <= total + 1; round++) {
        void *b;
        double t0 = macro_now_s();
        if (o->max_s > 0 && round > WARMUP + 20 && round <= total && t0 - start > o->max_s)
            total = round - 1;   /* time cap */
        uint64_t id = round > total ? STOP : round;
        if ((rc = tx(req, SNAP_REQ_LEN, &b)) < 0)
            return fail(k, rc, "initiator send_begin");
        stamp(b, SNAP_REQ_LEN, id, 0);
        if ((rc = req->m->send_end(req, MECH_ALL, b, SNAP_REQ_LEN)) < 0)
            return fail(k, rc, "initiator send");
        if (id == STOP)
            break;
        for (unsigned i = 1; i < n; i++) {     /* one checkpoint per node */
            struct mech_chan *c = &cs->c[i];
            const void *m;
            size_t got;
            if ((rc = rx(c, o->ckpt, &m, &got)) < 0)
                return fail(k, rc, "initiator recv from node %u", i);
            rc = check(m, got, o->ckpt, round, i);
            c->m->recv_end(c);
            if (rc < 0)
                return fail(k, rc, "snapshot %llu: bad checkpoint from node %u",
                            (unsigned long long)round, i);
        }
        if (round > WARMUP)
            lat[round - WARMUP - 1] = (macro_now_s() - t0) * 1e6;
    }
    uint64_t done = total - WARMUP;
    double sum = 0;
    for (uint64_t i = 0; i < done; i++)
        sum += lat[i];
    qsort(lat, done, sizeof *lat, cmp_double);
    k->mean_us = sum / (double)done;
    k->p50_us = lat[done / 2];
    k->p99_us = lat[(done * 99) / 100];
    k->done = done;
    free(lat);
    exit_barrier(k, (int)n);
    req->m->detach(req);
    for (unsigned i = 1; i < n; i++)
        cs->c[i].m->detach(&cs->c[i]);
    return 0;
}

static int snap_node(struct chans *cs, const struct snap_opts *o, unsigned i, struct ctl *k)
{
    struct mech_chan *req = &cs->c[0], *out = &cs->c[i];
    int rc = req->m->receiver_attach(req, i - 1);
    if (rc == 0)
        rc = out->m->sender_attach(out);
    char *ckpt = malloc(o->ckpt);
    if (rc < 0 || !ckpt)
        return fail(k, rc < 0 ? rc : -ENOMEM, "node %u attach", i);
    for (size_t j = 0; j < o->ckpt; j++)
        ckpt[j] = (char)(j * 17 + i);
    if (barrier(k, (int)o->nodes) < 0)
        return -1;
    for (uint64_t round = 1;; round++) {
        const void *m;
        size_t got;
        void *b;
        if ((rc = rx(req, SNAP_REQ_LEN, &m, &got)) < 0)
            return fail(k, rc, "node %u recv", i);
        if (field(m, 0) == STOP) {
            req->m->recv_end(req);
            break;
        }
        rc = check(m, got, SNAP_REQ_LEN, round, 0);
        req->m->recv_end(req);
        if (rc < 0)
            return fail(k, rc, "node %u: bad request %llu", i, (unsigned long long)round);
        if ((rc = tx(out, o->ckpt, &b)) < 0)
            return fail(k, rc, "node %u send_begin", i);
        memcpy(b, ckpt, o->ckpt);
        stamp(b, o->ckpt, round, i);
        if ((rc = out->m->send_end(out, 0, b, o->ckpt)) < 0)
            return fail(k, rc, "node %u send", i);
    }
    exit_barrier(k, (int)o->nodes);
    req->m->detach(req);
    out->m->detach(out);
    free(ckpt);
    return 0;
}

struct snap_run { struct chans *cs; const struct snap_opts *o; struct ctl *k; };

static int snap_role(int p, void *ctx)
{
    struct snap_run *a = ctx;
    return p == 0 ? snap_initiator(a->cs, a->o, a->k) : snap_node(a->cs, a->o, (unsigned)p, a->k);
}

int macro_snapshot(const struct mech *m, const struct snap_opts *o, struct snap_result *r)
{
    memset(r, 0, sizeof *r);
    unsigned n = o->nodes;
    if (n < 2 || n > SNAP_MAX_NODES || o->ckpt < 64 || o->count == 0) {
        snprintf(r->note, sizeof r->note, "nodes 2..%d, checkpoint >= 64 B", SNAP_MAX_NODES);
        return r->status = -EINVAL;
    }
    r->oversubscribed = (int)n > mech_nprocs_online();
    struct chans *cs = calloc(1, sizeof *cs);
    struct ctl *k = ctl_new();
    if (!cs || !k) {
        free(cs);
        snprintf(r->note, sizeof r->note, "out of memory");
        return r->status = -ENOMEM;
    }
    int rc = chan_add(cs, m, n - 1, SNAP_REQ_LEN, r->oversubscribed, r->note, sizeof r->note);
    for (unsigned i = 1; i < n && rc == 0; i++)
        rc = chan_add(cs, m, 1, o->ckpt, r->oversubscribed, r->note, sizeof r->note);
    if (rc != 0) {
        chans_teardown(cs);
        free(cs);
        munmap(k, sizeof *k);
        return r->status = rc;
    }
    struct snap_run run = { cs, o, k };
    if (run_roles(cs, (int)n, snap_role, &run, o->timeout_s, k, r->note, sizeof r->note) != 0) {
        r->status = -EIO;
    } else if (k->done == 0 || k->done > o->count) {
        snprintf(r->note, sizeof r->note, "%llu of %llu snapshots", (unsigned long long)k->done,
                 (unsigned long long)o->count);
        r->status = -EIO;
    } else {
        r->mean_us = k->mean_us;
        r->p50_us = k->p50_us;
        r->p99_us = k->p99_us;
        r->done = k->done;
    }
    munmap(k, sizeof *k);
    return r->status;
}
