/*
 * Regression tests for the eight defects an outside review found in layout 1
 * (docs/robustness.md). Each asserts what the contract (zimp.h,
 * docs/protocol.md) promises where layout 1 broke it:
 *   1 abandoned claims made a healthy channel answer -EPROTO;
 *   2 a loan held across zimp_receiver_open was lost;
 *   3 a dead epoll receiver killed its senders with SIGPIPE, and a receiver
 *     could point a sender at another process's descriptor;
 *   4 an epoll waiter never learned of a sender that opened after it armed;
 *   5 a reused pid made a dead member look alive;
 *   6 a stopped sender holding a loan was blamed on a healthy receiver and
 *     could not be removed;
 *   7 a forked child closing inherited handles broke the parent's;
 *   8 open/close cycles must not leak, and closing NULL is a no-op.
 * Timing never decides a verdict: waits are bounded by generous tmo() limits.
 */
#include "task.h"
#include "deny_syscall.h"
#include "core/core_int.h"
#include "heap/heap_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>

/* Receives the next message and checks it is (id, seq), intact. */

static int64_t ms_ns(long ms) { return (int64_t)ms * NS_PER_MS; }

/* ======== 1. abandoned claims: senders that give up or die while waiting ======== */

struct blocker {
    const char *name;
    uint32_t id;
    int64_t timeout;            /* > 0: must time out; < 0: waits until killed */
    struct tpipe *ready;
    int *result;                /* 1 while zimp_send has not returned */
};

static void blocker_role(void *p)
{
    struct blocker *a = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    signal_byte(a->ready);
    int rc = send_msg(s, (int)(a->id & 1), a->id, 0, 32, a->timeout);
    __atomic_store_n(a->result, rc, __ATOMIC_SEQ_CST);
    ASSERT_MSG(rc == -ETIMEDOUT, "sender %u on a full ring: %d (%s)", a->id, rc, err_text(rc));
    zimp_sender_close(s);
}

struct streamer { const char *name; uint32_t id; long count; };

static void streamer_role(void *p)
{
    struct streamer *a = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    for (long i = 0; i < a->count; i++) {
        int rc = send_msg(s, (int)(i & 1), a->id, (uint64_t)i, 32, T_LONG);
        ASSERT_MSG(rc == 0, "new sender, message %ld: %s", i, err_text(rc));
    }
    zimp_sender_close(s);
}

/*
 * A receiver holds a full ring back (by not reading, or by a zimp_read
 * borrow) while rounds of senders block in zimp_send and time out (or are
 * killed), then close. The receiver then gets exactly the messages whose
 * send returned 0, in order, never -EPROTO, and new senders reach it.
 */
static void abandoned_claims(int kill_them)
{
    static const struct { uint32_t slots; int senders; int borrow; } cases[] = {
        { 8, 10, 0 }, { 2, 7, 1 },
    };
    const int rounds = 4;
    int *results = shared_alloc(4096);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char name[128], tag[16];
        snprintf(tag, sizeof tag, "ac%u", cases[c].slots);
        chan_name(name, sizeof name, tag);
        uint32_t slots = cases[c].slots;
        create_chan(name, slots, 64, 16, 4);
        zimp_receiver *r;
        zimp_sender *s0;
        ASSERT_OK(zimp_receiver_open(name, &r));
        ASSERT_OK(zimp_sender_open(name, &s0));
        for (uint32_t i = 0; i < slots; i++)
            ASSERT_OK(send_msg(s0, (int)(i & 1), 0, i, 32, 0));
        uint8_t buf[64] = { 0 };
        ASSERT_EQ(zimp_send(s0, buf, 8, 0), -EAGAIN);           /* the ring is full */
        uint64_t next = 0;
        if (cases[c].borrow) {                                  /* hold message 0 in place */
            const void *rb;
            size_t len;
            uint32_t snd;
            uint64_t seq;
            ASSERT_OK(zimp_read(r, &rb, &len, NS_PER_S));
            ASSERT(msg_check(rb, len, &snd, &seq) && snd == 0 && seq == 0);
        }
        struct tpipe ready;
        tpipe_open(&ready);
        for (int round = 0; round < rounds; round++) {
            pid_t pids[16];
            struct blocker b[16];
            int n = cases[c].senders;
            for (int k = 0; k < n; k++) {
                results[k] = 1;
                b[k] = (struct blocker){ name, 100u + (uint32_t)(round * 16 + k),
                                         kill_them ? -1 : ms_ns(20), &ready, &results[k] };
                pids[k] = spawn(blocker_role, &b[k]);
            }
            ASSERT_OK(wait_bytes(&ready, n, tmo(10000)));
            if (kill_them) {
                sleep_ms(30);                                    /* inside zimp_send now */
                for (int k = 0; k < n; k++)
                    ASSERT_OK(kill(pids[k], SIGKILL));
                for (int k = 0; k < n; k++) {
                    ASSERT_EQ(wait_child(pids[k], tmo(5000)), 128 + SIGKILL);
                    ASSERT_MSG(results[k] == 1, "round %d: blocked sender %d returned %d (%s) "
                               "although the ring stayed full", round, k, results[k],
                               err_text(results[k]));
                }
            } else {
                for (int k = 0; k < n; k++)
                    ASSERT_CHILD_OK(pids[k], tmo(10000));
            }
        }
        tpipe_close(&ready);
        /* The receiver resumes: the ring's messages, in order, then nothing. */
        if (cases[c].borrow) {
            ASSERT_OK(zimp_release(r));
            next = 1;
        }
        for (uint64_t i = next; i < slots; i++)
            expect_msg(r, 0, i, ms_ns(tmo(5000)));
        ssize_t n = zimp_recv(r, buf, sizeof buf, 0);
        ASSERT_MSG(n == -EAGAIN, "after the ring was drained: %zd (%s)", n, err_text(n));
        /* the old sender and a new one still reach it */
        for (uint64_t i = 0; i < 2 * slots; i++) {
            int rc = send_msg(s0, (int)(i & 1), 0, slots + i, 32, ms_ns(tmo(5000)));
            ASSERT_MSG(rc == 0, "send %llu after the rounds: %s", (unsigned long long)i,
                       err_text(rc));
            expect_msg(r, 0, slots + i, ms_ns(tmo(5000)));
        }
        struct streamer st = { name, 7, 50 };
        pid_t sp = spawn(streamer_role, &st);
        for (long i = 0; i < st.count; i++)
            expect_msg(r, 7, (uint64_t)i, ms_ns(tmo(5000)));
        ASSERT_CHILD_OK(sp, tmo(10000));
        zimp_sender_close(s0);
        n = zimp_recv(r, buf, sizeof buf, ms_ns(tmo(5000)));
        ASSERT_MSG(n == -EPIPE, "every sender gone: %zd (%s)", n, err_text(n));
        zimp_receiver_close(r);
        ASSERT_OK(zimp_unlink(name));
    }
    shared_free(results, 4096);
}

TEST_IMPL(abandoned_claims_timeouts)
{
    abandoned_claims(0);
    return 0;
}

TEST_IMPL(abandoned_claims_kills)
{
    abandoned_claims(1);
    return 0;
}

/* ======== 2. a loan held across a receiver's open ======== */

/*
 * Sender A holds a loan; the other senders send (timeout 0) until the ring
 * wraps to A's slot and then keep trying (re-opening after each -EAGAIN)
 * for more than two rings' worth of attempts. A receiver opens; A publishes;
 * the receiver gets A's message first (exactly once), then B's next one.
 */
static void loan_across_open_case(const char *tag, uint32_t slots, uint32_t max_senders,
                                  int nsenders)
{
    char name[128];
    chan_name(name, sizeof name, tag);
    create_chan(name, slots, 0, max_senders, 4);
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    uint32_t ring = info.slots;
    zimp_sender *s[16];
    uint64_t seqs[16] = { 0 };
    ASSERT(nsenders >= 2 && nsenders <= 16);
    for (int i = 0; i < nsenders; i++)
        ASSERT_OK(zimp_sender_open(name, &s[i]));
    void *lb;
    ASSERT_OK(zimp_loan(s[0], 32, &lb, 0));
    long attempts = 2L * ring + 2L * info.max_senders + 8, published = 0;
    for (long a = 0; a < attempts; a++) {
        int k = 1 + (int)(a % (nsenders - 1));
        int rc = send_msg(s[k], (int)(a & 1), (uint32_t)k, seqs[k], 32, 0);
        if (rc == 0) {
            seqs[k]++;
            published++;
            continue;
        }
        ASSERT_MSG(rc == -EAGAIN, "%s: attempt %ld: %s", tag, a, err_text(rc));
        zimp_sender_close(s[k]);                 /* gives up; a new incarnation tries */
        ASSERT_OK(zimp_sender_open(name, &s[k]));
    }
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    msg_fill(lb, 32, 0, 0);
    ASSERT_OK(zimp_publish(s[0], lb, 32));
    uint8_t buf[64];
    ssize_t n = zimp_recv(r, buf, sizeof buf, ms_ns(tmo(5000)));
    uint32_t snd = 99;
    uint64_t seq = 99;
    ASSERT_MSG(n == 32 && msg_check(buf, 32, &snd, &seq) && snd == 0 && seq == 0,
               "%s: the loan held across the open was not delivered first: %zd (%s), "
               "sender %u seq %llu", tag, n, err_text(n), snd, (unsigned long long)seq);
    int rc = send_msg(s[1], MODE_COPY, 1, seqs[1], 32, ms_ns(tmo(5000)));
    ASSERT_MSG(rc == 0, "%s: B's next send: %s", tag, err_text(rc));
    expect_msg(r, 1, seqs[1], ms_ns(tmo(5000)));
    n = zimp_recv(r, buf, sizeof buf, 0);
    ASSERT_MSG(n == -EAGAIN, "%s: after A's and B's messages: %zd (%s)", tag, n, err_text(n));
    /* I1: no position a ring past A's unpublished loan was claimed (it is A's slot) */
    ASSERT_MSG(published >= 1 && published <= (long)ring - 1, "%s: %ld published around a "
               "held loan on a ring of %u", tag, published, ring);
    zimp_receiver_close(r);
    for (int i = 0; i < nsenders; i++)
        zimp_sender_close(s[i]);
    ASSERT_OK(zimp_unlink(name));
}

TEST_IMPL(loan_across_open)
{
    loan_across_open_case("lao-default", 0, 0, 3);     /* 256 slots, 16 senders */
    loan_across_open_case("lao-4x3", 4, 3, 3);
    loan_across_open_case("lao-16x16", 16, 16, 16);
    return 0;
}

/* ---- churn: receivers join and leave while senders run ---- */

enum { CH_SENDERS = 3, CH_RECEIVERS = 3, CH_MAX = 4000 };

struct churn_shared {
    int64_t pub_start[CH_SENDERS][CH_MAX];  /* taken just before publishing (0: not yet) */
    long published[CH_SENDERS];             /* messages whose send returned 0 */
    int senders_done;
    long count;
    long sessions;
    long received;
};

struct churn_args { const char *name; struct churn_shared *sh; uint32_t id; struct tpipe *ready; };

/*
 * Sender 0 copies with no timeout; sender 1 loans and sometimes holds its
 * loan a while (joins land inside it, the ring fills behind it); sender 2
 * gives up after 1 ms and re-opens (layout 1 left a claim behind each time).
 */
static void churn_sender_role(void *p)
{
    struct churn_args *a = p;
    struct churn_shared *sh = a->sh;
    struct xrand rnd = { (uint64_t)getpid() * 7919u + a->id };
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    signal_byte(a->ready);
    for (long seq = 0; seq < sh->count; seq++) {
        int64_t *ts = &sh->pub_start[a->id][seq];
        if (a->id == 0) {
            __atomic_store_n(ts, now_ns(), __ATOMIC_SEQ_CST);
            ASSERT_OK(send_msg(s, MODE_COPY, a->id, (uint64_t)seq, 48, T_LONG));
        } else if (a->id == 1) {
            void *b;
            ASSERT_OK(zimp_loan(s, 48, &b, T_LONG));
            msg_fill(b, 48, a->id, (uint64_t)seq);
            uint64_t dice = xrand_below(&rnd, 16);
            if (dice == 0)              /* long enough for the others to give up meanwhile */
                sleep_ns(5 * NS_PER_MS + (int64_t)xrand_below(&rnd, 10 * NS_PER_MS));
            else if (dice < 4)
                sleep_ns((int64_t)xrand_below(&rnd, 500000));
            __atomic_store_n(ts, now_ns(), __ATOMIC_SEQ_CST);
            ASSERT_OK(zimp_publish(s, b, 48));
        } else {
            for (;;) {
                __atomic_store_n(ts, now_ns(), __ATOMIC_SEQ_CST);
                int rc = send_msg(s, (int)(seq & 1), a->id, (uint64_t)seq, 48, NS_PER_MS);
                if (rc == 0)
                    break;
                ASSERT_MSG(rc == -ETIMEDOUT, "impatient sender: %s", err_text(rc));
                zimp_sender_close(s);
                ASSERT_OK(zimp_sender_open(a->name, &s));
            }
        }
        __atomic_store_n(&sh->published[a->id], seq + 1, __ATOMIC_SEQ_CST);
    }
    zimp_sender_close(s);
    __atomic_add_fetch(&sh->senders_done, 1, __ATOMIC_SEQ_CST);
}

/* First seq of sender i whose publish started after t (count if none yet). */
static long first_after(struct churn_shared *sh, uint32_t i, int64_t t)
{
    for (long s = 0; s < sh->count; s++) {
        int64_t v = __atomic_load_n(&sh->pub_start[i][s], __ATOMIC_SEQ_CST);
        if (v == 0)
            break;
        if (v > t)
            return s;
    }
    return sh->count;
}

/*
 * Each session: open, note t_open, receive until it has at least K messages
 * and one from every sender still publishing after t_open (or until the
 * channel is drained with every sender done). Then, per sender: the
 * received seqs are consecutive, and none is missing from the first message
 * whose publish started after t_open (a full drain must reach the end).
 */
static void churn_receiver_role(void *p)
{
    struct churn_args *a = p;
    struct churn_shared *sh = a->sh;
    struct xrand rnd = { (uint64_t)getpid() * 104729u };
    uint8_t buf[64];
    while (__atomic_load_n(&sh->senders_done, __ATOMIC_SEQ_CST) < CH_SENDERS) {
        zimp_receiver *r;
        int rc = zimp_receiver_open(a->name, &r);
        if (rc == -EUSERS) {
            sleep_ms(1);
            continue;
        }
        ASSERT_MSG(rc == 0, "receiver open: %s", err_text(rc));
        int64_t t_open = now_ns();
        long k = 1 + (long)xrand_below(&rnd, 64), n = 0;
        int got[CH_SENDERS] = { 0 }, drained = 0;
        long first[CH_SENDERS] = { 0 }, last[CH_SENDERS] = { 0 };
        for (;;) {
            if (n >= k) {
                int enough = 1;
                for (uint32_t i = 0; i < CH_SENDERS; i++) {
                    long pub = __atomic_load_n(&sh->published[i], __ATOMIC_SEQ_CST);
                    int finished_before = pub == sh->count &&
                        __atomic_load_n(&sh->pub_start[i][sh->count - 1], __ATOMIC_SEQ_CST) < t_open;
                    if (!got[i] && !finished_before)
                        enough = 0;
                }
                if (enough)
                    break;
            }
            ssize_t m = recv_msg(r, (int)(n & 1), buf, sizeof buf, T_LONG);
            if (m == -EPIPE) {
                if (__atomic_load_n(&sh->senders_done, __ATOMIC_SEQ_CST) == CH_SENDERS) {
                    drained = 1;
                    break;
                }
                sleep_ms(1);        /* the impatient sender is between incarnations */
                continue;
            }
            ASSERT_MSG(m > 0, "session at %lld: receive: %zd (%s)", (long long)t_open, m,
                       err_text(m));
            uint32_t snd;
            uint64_t seq;
            ASSERT_MSG(msg_check(buf, (size_t)m, &snd, &seq) && snd < CH_SENDERS &&
                       (long)seq < sh->count, "torn or foreign message");
            if (got[snd])
                ASSERT_MSG((long)seq == last[snd] + 1, "sender %u: seq %llu after %ld (lost "
                           "or duplicated)", snd, (unsigned long long)seq, last[snd]);
            else
                first[snd] = (long)seq;
            got[snd] = 1;
            last[snd] = (long)seq;
            n++;
        }
        for (uint32_t i = 0; i < CH_SENDERS; i++) {
            long must = first_after(sh, i, t_open);   /* published after the open */
            if (must >= sh->count)
                continue;
            ASSERT_MSG(got[i] || !drained, "sender %u: message %ld was published after the "
                       "open and never received (channel drained)", i, must);
            if (!got[i])
                continue;
            ASSERT_MSG(first[i] <= must, "sender %u: first received %ld, but %ld was "
                       "published after the open returned and is missing", i, first[i], must);
            ASSERT_MSG(!drained || last[i] == sh->count - 1, "sender %u: drained at %ld of %ld",
                       i, last[i], sh->count);
        }
        __atomic_add_fetch(&sh->sessions, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&sh->received, n, __ATOMIC_SEQ_CST);
        zimp_receiver_close(r);
    }
}

TEST_IMPL(join_churn_delivery)
{
    char name[128];
    chan_name(name, sizeof name, "churn");
    create_chan(name, 16, 64, 4, 8);
    struct churn_shared *sh = shared_alloc(sizeof *sh);
    sh->count = scaled(2000);
    struct tpipe ready;
    tpipe_open(&ready);
    struct churn_args sa[CH_SENDERS], ra[CH_RECEIVERS];
    pid_t sp[CH_SENDERS], rp[CH_RECEIVERS];
    for (uint32_t i = 0; i < CH_SENDERS; i++) {
        sa[i] = (struct churn_args){ name, sh, i, &ready };
        sp[i] = spawn(churn_sender_role, &sa[i]);
    }
    ASSERT_OK(wait_bytes(&ready, CH_SENDERS, tmo(10000)));
    for (uint32_t i = 0; i < CH_RECEIVERS; i++) {
        ra[i] = (struct churn_args){ name, sh, i, &ready };
        rp[i] = spawn(churn_receiver_role, &ra[i]);
    }
    for (int i = 0; i < CH_SENDERS; i++)
        ASSERT_CHILD_OK(sp[i], tmo(50000));
    for (int i = 0; i < CH_RECEIVERS; i++)
        ASSERT_CHILD_OK(rp[i], tmo(20000));
    fprintf(stderr, "join_churn_delivery: %ld receiver sessions, %ld messages received\n",
            sh->sessions, sh->received);
    ASSERT(sh->sessions >= CH_RECEIVERS);
    tpipe_close(&ready);
    shared_free(sh, sizeof *sh);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ======== 3. a dead epoll receiver, and a receiver that lies in its record ======== */

struct fdrx {
    const char *name;
    int notified_first;         /* receive one notified message before dying */
    int exit_normally;          /* exit without closing instead of waiting for SIGKILL */
    struct tpipe *to_test;
};

static void fdrx_role(void *p)
{
    struct fdrx *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    int ep = epoll_watch(r);
    uint8_t buf[64];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);          /* armed */
    signal_byte(a->to_test);
    if (a->notified_first) {
        ssize_t n = epoll_receive(r, ep, buf, sizeof buf, tmo(5000));
        ASSERT_MSG(n == 32, "notified message: %zd (%s)", n, err_text(n));
        ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);      /* armed again */
        signal_byte(a->to_test);
    }
    if (a->exit_normally)
        _exit(0);                                                   /* no close */
    for (;;)
        pause();
}

struct fdtx { const char *name; struct tpipe *ready, *go; int first, rest; };

static void fdtx_role(void *p)
{
    struct fdtx *a = p;
    signal(SIGPIPE, SIG_DFL);                  /* a SIGPIPE must kill it, visibly */
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    signal_byte(a->ready);
    int seq = 0;
    ASSERT_OK(wait_bytes(a->go, 1, tmo(10000)));
    for (; seq < a->first; seq++)
        ASSERT_OK(send_msg(s, MODE_COPY, 1, (uint64_t)seq, 32, ms_ns(tmo(5000))));
    signal_byte(a->ready);
    ASSERT_OK(wait_bytes(a->go, 1, tmo(10000)));
    for (; seq < a->first + a->rest; seq++) {
        int rc = send_msg(s, seq & 1, 1, (uint64_t)seq, 32, ms_ns(tmo(5000)));
        ASSERT_MSG(rc == 0, "send %d after the receiver died: %s", seq, err_text(rc));
    }
    zimp_sender_close(s);
}

/*
 * A receiver arms zimp_receiver_fd and dies (SIGKILL, or exit without
 * close), after having been notified once or not. The sender keeps sending:
 * it must not die (SIGPIPE is left at its default), and a healthy receiver
 * gets everything.
 */
TEST_IMPL(epoll_receiver_death_no_sigpipe)
{
    static const struct { int notified_first, exit_normally; } cases[] = {
        { 1, 0 }, { 1, 1 }, { 0, 0 }, { 0, 1 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char name[128], tag[16];
        snprintf(tag, sizeof tag, "sp%zu", c);
        chan_name(name, sizeof name, tag);
        create_chan(name, 8, 64, 2, 4);
        zimp_receiver *healthy;
        ASSERT_OK(zimp_receiver_open(name, &healthy));
        struct tpipe txr, txgo, rxr;
        tpipe_open(&txr);
        tpipe_open(&txgo);
        tpipe_open(&rxr);
        struct fdtx ta = { name, &txr, &txgo, cases[c].notified_first, 5 };
        pid_t tx = spawn(fdtx_role, &ta);
        ASSERT_OK(wait_bytes(&txr, 1, tmo(10000)));
        struct fdrx ra = { name, cases[c].notified_first, cases[c].exit_normally, &rxr };
        pid_t rx = spawn(fdrx_role, &ra);
        ASSERT_OK(wait_bytes(&rxr, 1, tmo(10000)));                /* armed */
        signal_byte(&txgo);                                        /* the first message(s) */
        ASSERT_OK(wait_bytes(&txr, 1, tmo(10000)));
        if (cases[c].notified_first)
            ASSERT_OK(wait_bytes(&rxr, 1, tmo(10000)));            /* got it, armed again */
        if (cases[c].exit_normally) {
            ASSERT_CHILD_OK(rx, tmo(10000));
        } else {
            ASSERT_OK(kill(rx, SIGKILL));
            ASSERT_EQ(wait_child(rx, tmo(5000)), 128 + SIGKILL);
        }
        signal_byte(&txgo);                                        /* sends after the death */
        int st = wait_child(tx, tmo(10000));
        ASSERT_MSG(st == 0, "case %zu: the sender ended with status %d%s", c, st,
                   st == 128 + SIGPIPE ? " (killed by SIGPIPE)" : "");
        for (int i = 0; i < ta.first + ta.rest; i++)
            expect_msg(healthy, 1, (uint64_t)i, ms_ns(tmo(5000)));
        zimp_receiver_close(healthy);
        ASSERT_OK(zimp_unlink(name));
        tpipe_close(&txr);
        tpipe_close(&txgo);
        tpipe_close(&rxr);
    }
    return 0;
}

/* ---- confused deputy: a receiver rewrites its own record page ---- */

struct victim_state {
    int pid, wfd, ready, stop;
    long bytes;
};

/* Another process with a pipe it watches: nobody may write into it. */
static void victim_role(void *p)
{
    struct victim_state *v = p;
    int fd[2];
    ASSERT_OK(pipe2(fd, O_NONBLOCK));
    v->wfd = fd[1];
    v->pid = getpid();
    __atomic_store_n(&v->ready, 1, __ATOMIC_SEQ_CST);
    char buf[256];
    for (;;) {
        int stop = __atomic_load_n(&v->stop, __ATOMIC_SEQ_CST);
        struct pollfd pfd = { fd[0], POLLIN, 0 };
        poll(&pfd, 1, 5);
        ssize_t n;
        while ((n = read(fd[0], buf, sizeof buf)) > 0)
            __atomic_add_fetch(&v->bytes, n, __ATOMIC_SEQ_CST);
        if (stop)
            break;
    }
}

/*
 * The record page this receiver process may write: the writable mapping of
 * the segment with the highest file offset (the wait page is the other one).
 * Falls back to the header's geometry (layout_int.h: off_receivers at byte
 * 208, receiver_stride at byte 236) through a read-write mapping of its own.
 */
static uint8_t *own_record_page(const char *name, unsigned index)
{
    char want[512], line[1024];
    snprintf(want, sizeof want, "%s%s", SHM_PREFIX, name);
    size_t wl = strlen(want);
    FILE *f = fopen("/proc/self/maps", "r");
    ASSERT(f != NULL);
    uint8_t *best = NULL;
    unsigned long long best_off = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        unsigned long long off;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s %llx", &lo, &hi, perms, &off) != 4)
            continue;
        char *path = strchr(line, '/');
        if (!path || strncmp(path, want, wl) || (path[wl] != '\n' && path[wl] != ' '))
            continue;
        if (perms[0] == 'r' && perms[1] == 'w' && off >= 2 * 4096 && (!best || off > best_off)) {
            best = (uint8_t *)lo;
            best_off = off;
        }
    }
    fclose(f);
    if (best)
        return best;
    struct segmap sm = map_shm_file("zimp.", name);
    uint8_t *base = sm.base;
    uint64_t off_receivers;
    uint32_t stride;
    memcpy(&off_receivers, base + 208, sizeof off_receivers);
    memcpy(&stride, base + 236, sizeof stride);
    ASSERT(stride >= 128 && off_receivers + (uint64_t)(index + 1) * stride <= (uint64_t)sm.size);
    return base + off_receivers + (uint64_t)index * stride;
}

struct hostile { const char *name; struct victim_state *v; struct tpipe *to_test, *go; int rounds; };

/*
 * Before each round: restore its record (from byte 64: line 0 holds the
 * head, which may only hold senders back), re-arm through the library, then
 * write another process's pid and descriptor number over it.
 */
static void hostile_role(void *p)
{
    struct hostile *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    ASSERT(zimp_receiver_fd(r) >= 0);
    uint8_t buf[64];
    while (zimp_recv(r, buf, sizeof buf, 0) >= 0)
        ;
    uint8_t *page = own_record_page(a->name, (unsigned)zimp_receiver_index(r));
    static uint8_t orig[4096];
    memcpy(orig, page, sizeof orig);
    uint32_t vp = (uint32_t)a->v->pid, vf = (uint32_t)a->v->wfd;
    struct xrand rnd = { (uint64_t)getpid() };
    signal_byte(a->to_test);
    for (int round = 0; round < a->rounds; round++) {
        ASSERT_OK(wait_bytes(a->go, 1, tmo(10000)));
        memcpy(page + 64, orig + 64, 4096 - 64);
        while (zimp_recv(r, buf, sizeof buf, 0) >= 0)   /* ends armed (or refused) */
            ;
        uint32_t *w = (uint32_t *)page;
        switch (round % 5) {
        case 0:                 /* (pid, fd) pairs over the whole record */
        case 1:                 /* (fd, pid) pairs */
            for (int i = 16; i < 1024; i++)
                w[i] = ((i & 1) ^ (round & 1)) ? vf : vp;
            break;
        case 2: {               /* layout 1 fields: owner's pid, armed, notify_fd */
            uint64_t owner;
            memcpy(&owner, page + 64, 8);
            owner = (owner & ~0xffffffffull) | vp;
            memcpy(page + 64, &owner, 8);
            w[22] = 1;
            w[23] = vf;
            break;
        }
        case 3:                 /* owner's pid, and the descriptor number everywhere else */
            for (int i = 17; i < 1024; i++)
                w[i] = vf;
            w[16] = vp;
            w[24] = 1;
            break;
        default:                /* noise */
            for (int i = 64; i < 4096; i++)
                page[i] = (uint8_t)xrand_next(&rnd);
            break;
        }
        signal_byte(a->to_test);
    }
    for (;;)
        pause();
}

struct deputy { const char *name; struct tpipe *ready, *go; int rounds, per_round; };

static void deputy_sender_role(void *p)
{
    struct deputy *a = p;
    signal(SIGPIPE, SIG_DFL);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    signal_byte(a->ready);
    uint64_t seq = 0;
    for (int round = 0; round < a->rounds; round++) {
        ASSERT_OK(wait_bytes(a->go, 1, tmo(10000)));
        for (int k = 0; k < a->per_round; k++, seq++) {
            int rc = send_msg(s, (int)(seq & 1), 1, seq, 32, ms_ns(tmo(5000)));
            ASSERT_MSG(rc == 0, "round %d: send: %s", round, err_text(rc));
        }
        signal_byte(a->ready);
    }
    zimp_sender_close(s);
}

/*
 * A receiver rewrites its own record page with another process's pid and
 * descriptor numbers. The sender publishing to it must not die, must not
 * write a byte into that other process's pipe, and a healthy receiver gets
 * every message.
 */
TEST_IMPL(receiver_record_scribble)
{
    char name[128];
    chan_name(name, sizeof name, "deputy");
    create_chan(name, 64, 64, 2, 4);     /* 64 slots: the hostile never holds the sender */
    const int rounds = 10, per_round = 3;
    struct victim_state *v = shared_alloc(4096);
    pid_t vp = spawn(victim_role, v);
    for (int i = 0; i < 10000 && !__atomic_load_n(&v->ready, __ATOMIC_SEQ_CST); i++)
        sleep_ms(1);
    ASSERT(v->ready);
    zimp_receiver *healthy;
    ASSERT_OK(zimp_receiver_open(name, &healthy));
    struct tpipe txr, txgo, hr, hgo;
    tpipe_open(&txr);
    tpipe_open(&txgo);
    tpipe_open(&hr);
    tpipe_open(&hgo);
    struct deputy da = { name, &txr, &txgo, rounds, per_round };
    pid_t tx = spawn(deputy_sender_role, &da);
    ASSERT_OK(wait_bytes(&txr, 1, tmo(10000)));
    struct hostile ha = { name, v, &hr, &hgo, rounds };
    pid_t hx = spawn(hostile_role, &ha);
    ASSERT_OK(wait_bytes(&hr, 1, tmo(10000)));
    uint64_t seq = 0;
    for (int round = 0; round < rounds; round++) {
        signal_byte(&hgo);
        ASSERT_OK(wait_bytes(&hr, 1, tmo(10000)));        /* re-armed, then scribbled */
        signal_byte(&txgo);
        if (wait_bytes(&txr, 1, tmo(10000)) != 0)
            break;                                         /* the sender's status says why */
        for (int k = 0; k < per_round; k++, seq++)
            expect_msg(healthy, 1, seq, ms_ns(tmo(5000)));
    }
    int st = wait_child(tx, tmo(10000));
    ASSERT_MSG(st == 0, "the sender ended with status %d%s", st,
               st == 128 + SIGPIPE ? " (killed by SIGPIPE)" : "");
    ASSERT_EQ(seq, (uint64_t)(rounds * per_round));
    kill(hx, SIGKILL);
    wait_child(hx, tmo(5000));
    __atomic_store_n(&v->stop, 1, __ATOMIC_SEQ_CST);
    ASSERT_CHILD_OK(vp, tmo(5000));
    ASSERT_MSG(v->bytes == 0, "a sender wrote %ld bytes into another process's pipe (pid %d, "
               "fd %d) named by a receiver's record", v->bytes, v->pid, v->wfd);
    zimp_receiver_close(healthy);
    ASSERT_OK(zimp_unlink(name));
    tpipe_close(&txr);
    tpipe_close(&txgo);
    tpipe_close(&hr);
    tpipe_close(&hgo);
    shared_free(v, 4096);
    return 0;
}

/* ======== 4. an epoll waiter and a sender that opened after it armed ======== */

struct late_tx { const char *name; int what; };   /* 0: die at once, 1: mid-loan, 2: after one */

static void late_tx_role(void *p)
{
    struct late_tx *a = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    if (a->what == 1) {
        void *lb;
        ASSERT_OK(zimp_loan(s, 32, &lb, 0));
        memset(lb, 0xDD, 32);
    } else if (a->what == 2) {
        ASSERT_OK(send_msg(s, MODE_COPY, 1, 0, 32, 0));
    }
    raise(SIGKILL);
}

TEST_IMPL(epoll_late_sender_death)
{
    static const char *what[] = { "killed right after its open", "killed holding a loan",
                                  "killed after one message" };
    for (int c = 0; c < 3; c++) {
        char name[128], tag[16];
        snprintf(tag, sizeof tag, "late%d", c);
        chan_name(name, sizeof name, tag);
        create_chan(name, 8, 64, 2, 2);
        zimp_receiver *r;
        ASSERT_OK(zimp_receiver_open(name, &r));
        int ep = epoll_watch(r);
        struct epoll_event out;
        uint8_t buf[64];
        /* no sender has ever opened: it waits like a FIFO reader, and is armed */
        ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
        while (epoll_wait(ep, &out, 1, 0) > 0)
            ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
        struct late_tx ta = { name, c };
        pid_t tx = spawn(late_tx_role, &ta);
        /* only the descriptor wakes us; spurious readiness is allowed */
        int64_t end = now_ns() + ms_ns(tmo(5000));
        int got = 0;
        ssize_t n;
        for (;;) {
            int64_t left = end - now_ns();
            int k = left > 0 ? epoll_wait(ep, &out, 1, (int)(left / NS_PER_MS) + 1) : 0;
            ASSERT_MSG(k == 1, "sender %s: the epoll descriptor never became readable "
                       "(%d message(s) received)", what[c], got);
            while ((n = zimp_recv(r, buf, sizeof buf, 0)) > 0) {
                uint32_t snd;
                uint64_t seq;
                ASSERT(n == 32 && msg_check(buf, 32, &snd, &seq) && snd == 1 && seq == 0);
                got++;
            }
            if (n == -EPIPE)
                break;
            ASSERT_MSG(n == -EAGAIN, "sender %s: receive: %zd (%s)", what[c], n, err_text(n));
        }
        ASSERT_MSG(got == (c == 2), "sender %s: %d messages before -EPIPE", what[c], got);
        ASSERT_EQ(wait_child(tx, tmo(5000)), 128 + SIGKILL);
        close(ep);
        zimp_receiver_close(r);
        ASSERT_OK(zimp_unlink(name));
    }
    return 0;
}

/* ======== 5. a dead member's pid reused by a new process ======== */

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/*
 * 0 if pids can be steered (root may write ns_last_pid) and identity is
 * exact (pidfs, Linux 6.9+: without it a pid reused within the same clock
 * tick is documented to look alive); else a reason.
 */
static const char *pid_reuse_unsupported(void)
{
    int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return "cannot write /proc/sys/kernel/ns_last_pid";
    close(fd);
    int pfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (pfd < 0)
        return "no pidfd_open";
    struct statfs sfs;
    int ok = fstatfs(pfd, &sfs) == 0 && (uint32_t)sfs.f_type == 0x50494446u;   /* PIDFS_MAGIC */
    close(pfd);
    return ok ? NULL : "no pidfs (identity by start time: same-tick reuse is a documented limit)";
}

static unsigned long long start_tick(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *q = strrchr(buf, ')');
    if (!q)
        return 0;
    q += 2;
    for (int field = 3; field < 22 && q; field++)
        if ((q = strchr(q, ' ')))
            q++;
    return q ? strtoull(q, NULL, 10) : 0;
}

static void pause_role(void *p)
{
    (void)p;
    for (;;)
        pause();
}

/* Forks a pause()ing child with pid `want` (just freed); its pid or -1. */
static pid_t fork_with_pid(pid_t want)
{
    if (want <= 1)
        return -1;
    int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char b[32];
    int len = snprintf(b, sizeof b, "%d", (int)want - 1);
    ssize_t w = write(fd, b, (size_t)len);
    close(fd);
    if (w != len)
        return -1;
    pid_t c = spawn(pause_role, NULL);
    if (c == want)
        return c;
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    return -1;
}

struct reuse_member { const char *name; int sender; struct tpipe *ready; };

static void reuse_member_role(void *p)
{
    struct reuse_member *a = p;
    if (a->sender) {
        zimp_sender *s;
        ASSERT_OK(zimp_sender_open(a->name, &s));
        ASSERT_OK(send_msg(s, MODE_COPY, 1, 0, 32, 0));
        void *lb;
        ASSERT_OK(zimp_loan(s, 32, &lb, 0));
        memset(lb, 0xDD, 32);
    } else {
        zimp_receiver *r;
        ASSERT_OK(zimp_receiver_open(a->name, &r));
    }
    signal_byte(a->ready);
    for (;;)
        pause();
}

/*
 * Starts a member (receiver, or a sender that then holds a loan), kills it
 * and forks a process with its pid, as fast as possible (ideally within its
 * start tick). Returns the impostor's pid, or -1. A receiver is retried
 * until the reuse lands in its start tick; a sender (whose message and dead
 * loan stay in the channel) is tried once per channel.
 */
static pid_t member_then_impostor(const char *name, int sender, int *same_tick)
{
    pid_t imp = -1;
    *same_tick = 0;
    for (int attempt = 0; attempt < (sender ? 1 : 40); attempt++) {
        struct tpipe ready;
        tpipe_open(&ready);
        struct reuse_member a = { name, sender, &ready };
        pid_t m = spawn(reuse_member_role, &a);
        ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
        unsigned long long t0 = start_tick(m);
        kill(m, SIGKILL);
        ASSERT_EQ(wait_child(m, tmo(5000)), 128 + SIGKILL);
        tpipe_close(&ready);
        pid_t c = fork_with_pid(m);
        if (c < 0)
            continue;
        int same = t0 != 0 && start_tick(c) == t0;
        if (imp > 0) {
            kill(imp, SIGKILL);
            waitpid(imp, NULL, 0);
        }
        imp = c;
        *same_tick = same;
        if (same)
            break;
    }
    return imp;
}

/*
 * A receiver joins and is killed; a new process gets its pid. A sender on a
 * 2-slot ring must not wait for the dead receiver: it sends more than a ring.
 */
TEST_IMPL(pid_reuse_receiver)
{
    const char *why = pid_reuse_unsupported();
    if (why) {
        fprintf(stderr, "pid_reuse_receiver: skipped: %s\n", why);
        return TEST_SKIP;
    }
    char name[128];
    chan_name(name, sizeof name, "pidr");
    create_chan(name, 2, 64, 2, 2);
    zimp_sender *early;
    ASSERT_OK(zimp_sender_open(name, &early));          /* knew the receiver while alive */
    int same;
    pid_t imp = member_then_impostor(name, 0, &same);
    if (imp < 0) {
        zimp_sender_close(early);
        ASSERT_OK(zimp_unlink(name));
        fprintf(stderr, "pid_reuse_receiver: skipped: could not get the dead pid again\n");
        return TEST_SKIP;
    }
    fprintf(stderr, "pid_reuse_receiver: pid %d reused%s\n", (int)imp,
            same ? " within the same clock tick" : "");
    zimp_sender *late;
    ASSERT_OK(zimp_sender_open(name, &late));           /* first sees the impostor */
    for (int i = 0; i < 5; i++) {
        int rc = send_msg(late, MODE_COPY, 2, (uint64_t)i, 32, ms_ns(tmo(3000)));
        ASSERT_MSG(rc == 0, "new sender, message %d on a 2-slot ring: %s (the dead receiver, "
                   "whose pid is alive again, still counts)", i, err_text(rc));
        rc = send_msg(early, MODE_ZC, 1, (uint64_t)i, 32, ms_ns(tmo(3000)));
        ASSERT_MSG(rc == 0, "old sender, message %d: %s", i, err_text(rc));
    }
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.receivers, 0);
    kill(imp, SIGKILL);
    ASSERT_EQ(wait_child(imp, tmo(5000)), 128 + SIGKILL);
    zimp_sender_close(early);
    zimp_sender_close(late);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

struct thread_thief { pid_t want; struct tpipe *got; };

static void *thief_thread(void *p)
{
    struct thread_thief *a = p;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    put_bytes(a->got->w, &tid, sizeof tid);
    for (;;)
        pause();
    return NULL;
}

/* A process whose second thread is created with thread id a->want (just freed). */
static void thread_thief_role(void *p)
{
    struct thread_thief *a = p;
    int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
    ASSERT_MSG(fd >= 0, "ns_last_pid: %s", strerror(errno));
    char b[32];
    int len = snprintf(b, sizeof b, "%d", (int)a->want - 1);
    ASSERT_EQ(write(fd, b, (size_t)len), len);
    close(fd);
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, thief_thread, a), 0);
    for (;;)
        pause();
}

/* Without pidfd_open (an older kernel, a seccomp profile), a new sender judges by /proc. */
static void no_pidfd_sender_role(void *p)
{
    const char *name = p;
    ASSERT_OK(deny_syscall(SYS_pidfd_open, ENOSYS));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    for (int i = 0; i < 5; i++) {
        int rc = send_msg(s, MODE_COPY, 3, (uint64_t)i, 32, ms_ns(tmo(3000)));
        ASSERT_MSG(rc == 0, "without pidfd_open, message %d on a 2-slot ring: %s (the dead "
                   "receiver, whose pid is a thread now, looks alive by /proc)", i, err_text(rc));
    }
    zimp_sender_close(s);
}

/*
 * A receiver joins and is killed; a thread of another process gets its pid
 * as its thread id. /proc shows that thread at /proc/PID (not in listings),
 * so a check by /proc sees the pid alive; but a member's pid is a process
 * id, and pidfd_open refuses a thread that leads no process: the member is
 * dead. A sender without pidfd_open (judging by /proc, where the thread
 * leads no process) and the old sender do not wait for it on a 2-slot ring,
 * and the only receiver record is taken over by the next receiver.
 */
TEST_IMPL(pid_reuse_thread)
{
    const char *why = pid_reuse_unsupported();
    if (why) {
        fprintf(stderr, "pid_reuse_thread: skipped: %s\n", why);
        return TEST_SKIP;
    }
    char name[128];
    chan_name(name, sizeof name, "pidt");
    create_chan(name, 2, 64, 2, 1);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    pid_t thief = -1;
    for (int attempt = 0; attempt < 40 && thief < 0; attempt++) {
        struct tpipe ready, got;
        tpipe_open(&ready);
        tpipe_open(&got);
        struct reuse_member a = { name, 0, &ready };
        pid_t m = spawn(reuse_member_role, &a);
        ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
        kill(m, SIGKILL);
        ASSERT_EQ(wait_child(m, tmo(5000)), 128 + SIGKILL);
        struct thread_thief t = { m, &got };
        pid_t c = spawn(thread_thief_role, &t);
        pid_t tid = 0;
        ASSERT_OK(get_bytes(got.r, &tid, sizeof tid, tmo(10000)));
        tpipe_close(&ready);
        tpipe_close(&got);
        if (tid == m)
            thief = c;
        else {                    /* another process was faster: m's record is free to take over */
            kill(c, SIGKILL);
            waitpid(c, NULL, 0);
        }
    }
    if (thief < 0) {
        zimp_sender_close(s);
        ASSERT_OK(zimp_unlink(name));
        fprintf(stderr, "pid_reuse_thread: skipped: no thread got the dead pid\n");
        return TEST_SKIP;
    }
    ASSERT_CHILD_OK(spawn(no_pidfd_sender_role, name), tmo(20000));
    for (int i = 0; i < 5; i++) {
        int rc = send_msg(s, MODE_COPY, 1, (uint64_t)i, 32, ms_ns(tmo(3000)));
        ASSERT_MSG(rc == 0, "message %d on a 2-slot ring: %s (the dead receiver, whose pid "
                   "is a thread of another process now, still counts)", i, err_text(rc));
    }
    zimp_receiver *r;
    int rc = zimp_receiver_open(name, &r);
    ASSERT_MSG(rc == 0, "the one receiver record, of a member whose pid is a thread now: %s",
               err_text(rc));
    ASSERT_OK(send_msg(s, MODE_COPY, 1, 9, 32, ms_ns(tmo(3000))));
    expect_msg(r, 1, 9, ms_ns(tmo(5000)));
    kill(thief, SIGKILL);
    ASSERT_EQ(wait_child(thief, tmo(5000)), 128 + SIGKILL);
    zimp_receiver_close(r);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ---- a member that exec()s: same process, same pid, no mapping left ---- */

struct exec_child {
    const char *name;
    char before;           /* joins as 'r', or 's' (sends seq 0, then takes a loan) */
    const char *after;     /* what the new image joins as: "r", "s" or "-" */
    struct tpipe ready;    /* one byte when joined, and one from the new image */
    struct tpipe go;       /* a byte from the parent lets it exec */
    pid_t pid;
};

static void exec_member_image(struct exec_child *a, const char *exe);

static void exec_child_role(void *p)
{
    struct exec_child *a = p;
    if (a->before == 'r') {
        zimp_receiver *r;
        ASSERT_OK(zimp_receiver_open(a->name, &r));
    } else {
        zimp_sender *s;
        ASSERT_OK(zimp_sender_open(a->name, &s));
        ASSERT_OK(send_msg(s, MODE_COPY, 1, 0, 32, 0));
        void *lb;
        ASSERT_OK(zimp_loan(s, 32, &lb, 0));
        memset(lb, 0xEE, 32);
    }
    exec_member_image(a, "/proc/self/exe");
}

/* Says it joined, waits for the parent's word, and exec()s `exe` as zimp-tests --exec-member. */
static void exec_member_image(struct exec_child *a, const char *exe)
{
    signal_byte(&a->ready);
    ASSERT_OK(wait_bytes(&a->go, 1, tmo(10000)));
    char fd[16];
    snprintf(fd, sizeof fd, "%d", a->ready.w);
    execl(exe, "zimp-tests", "--exec-member", a->after, a->name, fd, (char *)NULL);
    ASSERT_MSG(0, "exec of %s: %s", exe, strerror(errno));
}

/*
 * Starts `role` (exec_child_role, or NULL for it) for channel `name`, and
 * lets it exec once `between` ran; returns when the new image joined as
 * `after`. exec_child_end kills it.
 */
static void exec_child_start(struct exec_child *a, const char *name, char before, const char *after,
                             void (*role)(void *), void (*between)(void *), void *arg)
{
    *a = (struct exec_child){ .name = name, .before = before, .after = after };
    tpipe_open(&a->ready);
    tpipe_open(&a->go);
    a->pid = spawn(role ? role : exec_child_role, a);
    ASSERT_OK(wait_bytes(&a->ready, 1, tmo(10000)));
    if (between)
        between(arg);
    signal_byte(&a->go);
    ASSERT_OK(wait_bytes(&a->ready, 1, tmo(10000)));
}

static void exec_child_end(struct exec_child *a)
{
    kill(a->pid, SIGKILL);
    ASSERT_EQ(wait_child(a->pid, tmo(5000)), 128 + SIGKILL);
    tpipe_close(&a->ready);
    tpipe_close(&a->go);
}

static void send_two(void *p)
{
    for (int i = 0; i < 2; i++)
        ASSERT_OK(send_msg(p, MODE_COPY, 2, (uint64_t)i, 32, ms_ns(tmo(3000))));
}

/*
 * A receiver exec()s another program: its process lives on, pid and
 * identity unchanged, but nothing of it can ever read again. The sender of
 * a 2-slot ring stops waiting for it (the exec check: the process no longer
 * maps the segment), and it is not counted.
 */
TEST_IMPL(exec_receiver)
{
    char name[128];
    chan_name(name, sizeof name, "execr");
    create_chan(name, 2, 64, 1, 2);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    struct exec_child a;
    exec_child_start(&a, name, 'r', "-", NULL, NULL, NULL);
    for (int i = 0; i < 5; i++) {
        int rc = send_msg(s, MODE_COPY, 2, (uint64_t)i, 32, ms_ns(tmo(5000)));
        ASSERT_MSG(rc == 0, "message %d on a 2-slot ring: %s (the receiver that exec()ed still "
                   "counts)", i, err_text(rc));
    }
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.receivers, 0);
    exec_child_end(&a);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

static char self_exe[4096];            /* /proc/self/exe, read while the leader lives */

static void *leaderless_exec_thread(void *p)
{
    struct exec_child *a = p;
    sleep_ms(50);                      /* the leader has exited: /proc/PID/stat shows no image */
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    exec_member_image(a, self_exe);
    return NULL;
}

/* Joins from a second thread after the leading one exited, then exec()s from it. */
static void leaderless_exec_role(void *p)
{
    ASSERT_MSG(readlink("/proc/self/exe", self_exe, sizeof self_exe - 1) > 0, "readlink: %s", strerror(errno));
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, leaderless_exec_thread, p), 0);
    pthread_exit(NULL);
}

/* Before the exec: the sender and the receiver (its image unknown) are members, alive. */
static void both_live(void *p)
{
    struct zimp_member_info mi[2];
    ASSERT_EQ(zimp_members(p, mi, 2), 2);
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(mi[i].state, ZIMP_MEMBER_LIVE);
}

/*
 * A receiver whose process image was unknown at its join (its leading
 * thread had exited: /proc shows no code or stack addresses) exec()s from
 * its other thread. The exec check falls back on its maps, where the
 * segment is gone: the sender stops waiting for it.
 */
TEST_IMPL(exec_receiver_unknown_image)
{
    char name[128];
    chan_name(name, sizeof name, "execu");
    create_chan(name, 2, 64, 1, 2);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    struct exec_child a;
    exec_child_start(&a, name, 'r', "-", leaderless_exec_role, both_live, name);
    for (int i = 0; i < 5; i++) {
        int rc = send_msg(s, MODE_COPY, 2, (uint64_t)i, 32, ms_ns(tmo(5000)));
        ASSERT_MSG(rc == 0, "message %d on a 2-slot ring: %s (the receiver that exec()ed, its image "
                   "unknown at join, still counts)", i, err_text(rc));
    }
    exec_child_end(&a);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/*
 * A receiver exec()s and its new image opens the channel again: the same
 * pid now maps the segment, at another address. The old record is dead,
 * the new one alive: with two messages sent before the exec, the sender
 * has room for two more (the new receiver's), and one receiver counts.
 */
TEST_IMPL(exec_receiver_reopens)
{
    char name[128];
    chan_name(name, sizeof name, "execo");
    create_chan(name, 2, 64, 1, 2);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    struct exec_child a;
    exec_child_start(&a, name, 'r', "r", NULL, send_two, s);
    for (int i = 2; i < 4; i++) {
        int rc = send_msg(s, MODE_COPY, 2, (uint64_t)i, 32, ms_ns(tmo(5000)));
        ASSERT_MSG(rc == 0, "message %d: %s (the record from before the exec still counts, "
                   "though the process maps the segment only where its new record says)", i,
                   err_text(rc));
    }
    ASSERT_EQ(send_msg(s, MODE_COPY, 2, 4, 32, 0), -EAGAIN);     /* the new receiver holds the ring */
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.receivers, 1);
    exec_child_end(&a);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/*
 * The only sender publishes one message, takes a loan and exec()s: the
 * receiver gets the message, passes the loan's position, and then -EPIPE
 * (no live sender), instead of waiting for ever.
 */
TEST_IMPL(exec_sender)
{
    char name[128];
    chan_name(name, sizeof name, "execs");
    create_chan(name, 4, 64, 2, 1);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    struct exec_child a;
    exec_child_start(&a, name, 's', "-", NULL, NULL, NULL);
    expect_msg(r, 1, 0, ms_ns(tmo(5000)));
    uint8_t buf[64];
    ssize_t n = zimp_recv(r, buf, sizeof buf, ms_ns(tmo(5000)));
    ASSERT_MSG(n == -EPIPE, "after the exec of the only sender: %zd (%s), want EPIPE", n, err_text(n));
    exec_child_end(&a);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/*
 * The sender holding a loan exec()s and its new program opens the channel
 * as a sender again: the same pid maps the segment, but not where the old
 * record says. Its loan's position is passed, and another sender's message
 * reaches the receiver.
 */
TEST_IMPL(exec_sender_reopens)
{
    char name[128];
    chan_name(name, sizeof name, "execso");
    create_chan(name, 4, 64, 3, 1);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    struct exec_child a;
    exec_child_start(&a, name, 's', "s", NULL, NULL, NULL);
    expect_msg(r, 1, 0, ms_ns(tmo(5000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(send_msg(s, MODE_COPY, 2, 0, 32, ms_ns(tmo(3000))));
    expect_msg(r, 2, 0, ms_ns(tmo(5000)));          /* past the exec'd sender's loan */
    exec_child_end(&a);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

static char task_name_chan[128];

struct leaderless { const char *name; struct tpipe *ready, *done; zimp_receiver *r; };

static void *leaderless_reader(void *p)
{
    struct leaderless *a = p;
    sleep_ms(300);                     /* the sender fills the ring and waits meanwhile */
    uint8_t buf[64];
    int got = 0;
    for (; got < 10; got++) {
        ssize_t n = zimp_recv(a->r, buf, sizeof buf, ms_ns(tmo(5000)));
        if (n < 0)
            break;
    }
    put_bytes(a->done->w, &got, sizeof got);
    _exit(0);
}

/* A receiver whose main thread exits at once: another thread reads. */
static void leaderless_role(void *p)
{
    struct leaderless *a = p;
    ASSERT_OK(zimp_receiver_open(a->name, &a->r));
    signal_byte(a->ready);
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, leaderless_reader, a), 0);
    pthread_exit(NULL);
}

/*
 * A receiver process whose leading thread exited while another thread
 * reads is alive, though /proc shows its pid as a zombie ('Z'). Judged
 * without pidfd_open (as behind a seccomp profile that denies it), the
 * sender waits for it on a 2-slot ring and it reads all ten messages.
 */
TEST_IMPL(leader_exited_alive)
{
    char name[128];
    chan_name(name, sizeof name, "leader");
    create_chan(name, 2, 64, 1, 1);
    struct tpipe ready, done;
    tpipe_open(&ready);
    tpipe_open(&done);
    struct leaderless a = { name, &ready, &done, NULL };
    pid_t c = spawn(leaderless_role, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    ASSERT_OK(deny_syscall(SYS_pidfd_open, EPERM));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    for (int i = 0; i < 10; i++)
        ASSERT_OK(send_msg(s, MODE_COPY, 1, (uint64_t)i, 32, ms_ns(tmo(5000))));
    int got = -1;
    ASSERT_OK(get_bytes(done.r, &got, sizeof got, tmo(10000)));
    ASSERT_MSG(got == 10, "the receiver whose leader exited got %d of 10 messages (judged dead by /proc, "
               "its record freed under it)", got);
    ASSERT_EQ(wait_child(c, tmo(5000)), 0);
    tpipe_close(&ready);
    tpipe_close(&done);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

static void *idle_thread(void *p)
{
    (void)p;
    for (;;)
        pause();
    return NULL;
}

/* A receiver whose leading thread exits 3-5 ms after the join; an idle thread keeps the process. */
static void leader_exits_role(void *p)
{
    struct tpipe *ready = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(task_name_chan, &r));
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, idle_thread, NULL), 0);
    signal_byte(ready);
    sleep_ns((3 + getpid() % 3) * NS_PER_MS);
    pthread_exit(NULL);
}

/*
 * Inspection while a member's leading thread exits: the exec check reads
 * the process image, then its maps; a leader that exits between the two
 * leaves maps empty, which is no exec. zimp_members never lists the live
 * receiver as dead (3 s of trials, each looking for 12 ms around the exit).
 */
TEST_IMPL(members_leader_exit)
{
    chan_name(task_name_chan, sizeof task_name_chan, "lexit");
    create_chan(task_name_chan, 2, 64, 1, 1);
    int trials = 0;
    for (int64_t end = now_ns() + 3 * NS_PER_S; now_ns() < end; trials++) {
        struct tpipe ready;
        tpipe_open(&ready);
        pid_t c = spawn(leader_exits_role, &ready);
        ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
        tpipe_close(&ready);
        for (int64_t t0 = now_ns(); now_ns() - t0 < 12 * NS_PER_MS;) {
            struct zimp_member_info mi[2];
            int n = zimp_members(task_name_chan, mi, 2);
            for (int i = 0; i < n; i++)
                ASSERT_MSG(!(mi[i].pid == c && mi[i].state == ZIMP_MEMBER_DEAD), "trial %d: the live "
                           "receiver %d is listed dead while its leading thread exits", trials, (int)c);
        }
        kill(c, SIGKILL);
        ASSERT_EQ(wait_child(c, tmo(5000)), 128 + SIGKILL);
    }
    fprintf(stderr, "members_leader_exit: %d trials\n", trials);
    ASSERT_OK(zimp_unlink(task_name_chan));
    return 0;
}

struct slow_reader { const char *name; struct tpipe *ready, *done; };

/* Joins, waits 300 ms (the ring fills), then reads until the sender is gone: how many, in order. */
static void slow_reader_role(void *p)
{
    struct slow_reader *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    sleep_ms(300);
    uint8_t buf[64];
    int got = 0;
    for (;;) {
        ssize_t n = zimp_recv(r, buf, sizeof buf, ms_ns(tmo(1500)));
        if (n < 0) {
            ASSERT_MSG(n == -EPIPE, "after %d messages: %zd (%s)", got, n, err_text(n));
            break;                      /* drained, and the sender closed */
        }
        uint32_t snd;
        uint64_t seq;
        ASSERT_MSG(msg_check(buf, (size_t)n, &snd, &seq) && seq == (uint64_t)got, "message %d is not "
                   "the one sent", got);
        got++;
    }
    put_bytes(a->done->w, &got, sizeof got);
    zimp_receiver_close(r);
}

/* A sender with neither pidfd_open nor a /proc of its own (a tmpfs over it, in its mount namespace). */
static void sender_without_proc_role(void *p)
{
    const char *name = p;
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("none", "/proc", "tmpfs", 0, NULL) != 0)
        _exit(TEST_SKIP);
    ASSERT_OK(deny_syscall(SYS_pidfd_open, EPERM));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    for (int i = 0; i < 8; i++) {
        int rc = send_msg(s, MODE_COPY, 1, (uint64_t)i, 32, ms_ns(tmo(5000)));
        ASSERT_MSG(rc == 0, "message %d: %s", i, err_text(rc));
    }
    zimp_sender_close(s);
}

/*
 * With no pidfd and no /proc to read (/proc/PID is then nothing, or some
 * other namespace's process), nothing is known of the members but what
 * kill(pid, 0) says: a live receiver that reads late is waited for on a
 * 4-slot ring, and gets all eight messages in order.
 */
TEST_IMPL(no_proc_no_pidfd)
{
    char name[128];
    chan_name(name, sizeof name, "noproc");
    create_chan(name, 4, 64, 1, 1);
    struct tpipe ready, done;
    tpipe_open(&ready);
    tpipe_open(&done);
    struct slow_reader a = { name, &ready, &done };
    pid_t rx = spawn(slow_reader_role, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    int rc = wait_child(spawn(sender_without_proc_role, name), tmo(30000));
    if (rc == TEST_SKIP) {
        kill(rx, SIGKILL);
        waitpid(rx, NULL, 0);
        ASSERT_OK(zimp_unlink(name));
        fprintf(stderr, "no_proc_no_pidfd: skipped: no private mount namespace here\n");
        return TEST_SKIP;
    }
    ASSERT_EQ(rc, 0);
    int got = -1;
    ASSERT_OK(get_bytes(done.r, &got, sizeof got, tmo(10000)));
    ASSERT_MSG(got == 8, "the live receiver got %d of 8 (judged dead by a sender that cannot see it)", got);
    ASSERT_EQ(wait_child(rx, tmo(5000)), 0);
    tpipe_close(&ready);
    tpipe_close(&done);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/*
 * A channel of another layout version (a library of another version made
 * it, and its members may be alive) is not damage: zimp_reap by name
 * refuses it (-EPROTO, the segment stays), opening it says which layout it
 * is, and zimp_unlink removes it.
 */
TEST_IMPL(reap_other_layout)
{
    char name[128];
    chan_name(name, sizeof name, "oldlay");
    create_chan(name, 4, 64, 1, 1);
    struct segmap m = map_shm_file(ZIMP_SHM_PREFIX, name);
    ((struct zimp_header *)m.base)->layout_major = ZIMP_LAYOUT_MAJOR - 1;
    munmap(m.base, m.size);
    zimp_receiver *r;
    ASSERT_EQ(zimp_receiver_open(name, &r), -EPROTO);
    ASSERT_MSG(strstr(zimp_last_detail(), "layout version") != NULL, "detail: %s", zimp_last_detail());
    ASSERT_EQ(zimp_reap(name), -EPROTO);
    ASSERT_MSG(strstr(zimp_last_detail(), "zimp_unlink") != NULL, "detail: %s", zimp_last_detail());
    ASSERT_EQ(shm_exists(name), 1);
    ASSERT_OK(zimp_unlink(name));
    ASSERT_EQ(shm_exists(name), 0);
    return 0;
}

/* In a new pid namespace (its first process), tries to join as both roles: 0 if both say -EXDEV. */
static void other_pidns_role(void *p)
{
    const char *name = p;
    if (unshare(CLONE_NEWPID) != 0)
        _exit(TEST_SKIP);
    pid_t c = fork();
    if (c == 0) {
        zimp_sender *s;
        zimp_receiver *r;
        int rs = zimp_sender_open(name, &s), rr = zimp_receiver_open(name, &r);
        if (rs != -EXDEV || rr != -EXDEV || !strstr(zimp_last_detail(), "pid namespace")) {
            fprintf(stderr, "from another pid namespace: sender_open %d, receiver_open %d (%s)\n", rs, rr,
                    zimp_last_detail());
            _exit(1);
        }
        _exit(0);
    }
    int st;
    ASSERT_EQ(waitpid(c, &st, 0), c);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 2);
}

/*
 * Liveness goes by pid, so members must share a pid namespace: one in
 * another would judge every other member dead (its pids name nothing
 * there). Opens from another namespace are refused (-EXDEV); the channel
 * goes on for its members.
 */
TEST_IMPL(other_pidns_refused)
{
    char name[128];
    chan_name(name, sizeof name, "pidns");
    create_chan(name, 4, 64, 1, 1);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    int rc = wait_child(spawn(other_pidns_role, name), tmo(10000));
    if (rc == TEST_SKIP) {
        zimp_receiver_close(r);
        ASSERT_OK(zimp_unlink(name));
        fprintf(stderr, "other_pidns_refused: skipped: cannot make a pid namespace here\n");
        return TEST_SKIP;
    }
    ASSERT_EQ(rc, 0);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(send_msg(s, MODE_COPY, 1, 0, 32, 0));
    expect_msg(r, 1, 0, ms_ns(tmo(5000)));
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

static void heap_creator_role(void *p)
{
    struct zimp_heap_config hc;
    memset(&hc, 0, sizeof hc);
    hc.size = 1 << 20;
    ASSERT_OK(zimp_heap_create(p, &hc));
}

/*
 * A heap's creator exits without a member ever attaching, and a new process
 * gets its pid: zimp_heap_gc removes the heap (the header notes the
 * creator's identity, not only its pid, which kept the heap while the new
 * process ran).
 */
TEST_IMPL(heap_gc_creator_pid_reused)
{
    const char *why = pid_reuse_unsupported();
    if (why) {
        fprintf(stderr, "heap_gc_creator_pid_reused: skipped: %s\n", why);
        return TEST_SKIP;
    }
    char name[128];
    pid_t imp = -1;
    for (int attempt = 0; attempt < 40 && imp < 0; attempt++) {
        char tag[16];
        snprintf(tag, sizeof tag, "hgc%d", attempt);
        chan_name(name, sizeof name, tag);
        pid_t c = spawn(heap_creator_role, name);
        ASSERT_EQ(wait_child(c, tmo(10000)), 0);
        if ((imp = fork_with_pid(c)) < 0)
            ASSERT_OK(zimp_heap_unlink(name));
    }
    if (imp < 0) {
        fprintf(stderr, "heap_gc_creator_pid_reused: skipped: could not get the dead pid again\n");
        return TEST_SKIP;
    }
    int rc = zimp_heap_gc(name);
    kill(imp, SIGKILL);
    waitpid(imp, NULL, 0);
    ASSERT_MSG(rc == 1, "zimp_heap_gc of a heap whose creator died, its pid in use again: %d", rc);
    return 0;
}

/* A heap of another layout major is another library's, maybe in use: zimp_heap_gc leaves it. */
TEST_IMPL(heap_gc_other_layout)
{
    char name[128];
    chan_name(name, sizeof name, "hold");
    heap_creator_role(name);
    struct segmap m = map_shm_file(ZIMP_HEAP_PREFIX, name);
    ((struct zimp_heap_hdr *)m.base)->major = ZIMP_HEAP_MAJOR - 1;
    munmap(m.base, m.size);
    ASSERT_EQ(zimp_heap_gc(name), -EPROTO);
    ASSERT_MSG(strstr(zimp_last_detail(), "zimp_heap_unlink") != NULL, "detail: %s", zimp_last_detail());
    ASSERT_OK(zimp_heap_unlink(name));
    return 0;
}

/*
 * A sender publishes one message, takes a loan and is killed; a new process
 * gets its pid. The receiver skips the dead loan's position and gets later
 * messages.
 */
TEST_IMPL(pid_reuse_sender)
{
    const char *why = pid_reuse_unsupported();
    if (why) {
        fprintf(stderr, "pid_reuse_sender: skipped: %s\n", why);
        return TEST_SKIP;
    }
    char name[128];
    pid_t imp = -1;
    int same = 0;
    zimp_receiver *r = NULL;
    for (int attempt = 0; attempt < 5 && imp < 0; attempt++) {
        char tag[16];
        snprintf(tag, sizeof tag, "pids%d", attempt);
        chan_name(name, sizeof name, tag);
        create_chan(name, 8, 64, 4, 2);
        ASSERT_OK(zimp_receiver_open(name, &r));
        imp = member_then_impostor(name, 1, &same);
        if (imp < 0) {
            zimp_receiver_close(r);
            ASSERT_OK(zimp_unlink(name));
        }
    }
    if (imp < 0) {
        fprintf(stderr, "pid_reuse_sender: skipped: could not get the dead pid again\n");
        return TEST_SKIP;
    }
    fprintf(stderr, "pid_reuse_sender: pid %d reused%s\n", (int)imp,
            same ? " within the same clock tick" : "");
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    for (int i = 0; i < 3; i++)
        ASSERT_OK(send_msg(s, i & 1, 2, (uint64_t)i, 32, ms_ns(tmo(3000))));
    expect_msg(r, 1, 0, ms_ns(tmo(5000)));
    for (int i = 0; i < 3; i++)
        expect_msg(r, 2, (uint64_t)i, ms_ns(tmo(5000)));   /* past the dead loan */
    uint8_t buf[64];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
    kill(imp, SIGKILL);
    ASSERT_EQ(wait_child(imp, tmo(5000)), 128 + SIGKILL);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ======== 6. a stopped sender holding a loan ======== */

struct ev_rx { const char *name; struct tpipe *ready; long *got, *total; };

/* Receives until -EPIPE: only B's messages, intact, consecutive. */
static void ev_rx_role(void *p)
{
    struct ev_rx *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    int idx = zimp_receiver_index(r);
    put_bytes(a->ready->w, &idx, sizeof idx);
    uint8_t buf[256];
    long next = 0;
    for (;;) {
        ssize_t n = recv_msg(r, (int)(next & 1), buf, sizeof buf, T_LONG);
        if (n == -EPIPE)
            break;
        ASSERT_MSG(n > 0, "after %ld messages: %zd (%s)", next, n, err_text(n));
        uint32_t snd;
        uint64_t seq;
        ASSERT_MSG(msg_check(buf, (size_t)n, &snd, &seq), "message after %ld is corrupt "
                   "(%zd bytes, first 0x%02x): the evicted sender's writes reached it", next,
                   n, buf[0]);
        ASSERT_MSG(snd == 2 && (long)seq == next, "expected B's %ld, got sender %u seq %llu",
                   next, snd, (unsigned long long)seq);
        next++;
        __atomic_store_n(a->got, next, __ATOMIC_SEQ_CST);
    }
    ASSERT_EQ(next, __atomic_load_n(a->total, __ATOMIC_SEQ_CST));
    zimp_receiver_close(r);
}

struct ev_tx { const char *name; struct tpipe *to_test, *go; int *stop; };

/* Loans, is stopped; after SIGCONT keeps writing its loan, then publishes. */
static void ev_tx_role(void *p)
{
    struct ev_tx *a = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    int idx = zimp_sender_index(s);          /* checked by the test */
    void *lb;
    ASSERT_OK(zimp_loan(s, 128, &lb, T_LONG));
    put_bytes(a->to_test->w, &idx, sizeof idx);
    raise(SIGSTOP);
    ASSERT_OK(wait_bytes(a->go, 1, tmo(30000)));
    do {
        memset(lb, 0xEE, 128);            /* the whole loan, again and again */
        sched_yield();
    } while (!__atomic_load_n(a->stop, __ATOMIC_SEQ_CST));
    int rc[2];
    rc[0] = zimp_publish(s, lb, 128);
    rc[1] = zimp_send(s, "x", 1, 0);
    put_bytes(a->to_test->w, rc, sizeof rc);
    zimp_sender_close(s);
}

static int has_index(const unsigned *v, int n, unsigned x)
{
    for (int i = 0; i < n && i < 16; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

TEST_IMPL(stopped_sender_evict)
{
    char name[128];
    chan_name(name, sizeof name, "stop");
    struct zimp_config cfg = { .slots = 8, .slot_size = 128, .max_senders = 4,
                               .max_receivers = 4, .stall_timeout_ns = 200 * NS_PER_MS };
    ASSERT_OK(zimp_create(name, &cfg));
    long *sh = shared_alloc(4096);              /* [0] got, [1] total */
    int *stop = (int *)(sh + 8);
    sh[1] = -1;
    struct tpipe rxr, txr, txgo;
    tpipe_open(&rxr);
    tpipe_open(&txr);
    tpipe_open(&txgo);
    struct ev_rx ra = { name, &rxr, &sh[0], &sh[1] };
    pid_t rx = spawn(ev_rx_role, &ra);
    int rx_idx = -1, a_idx = -1;
    ASSERT_OK(get_bytes(rxr.r, &rx_idx, sizeof rx_idx, tmo(10000)));
    struct ev_tx ta = { name, &txr, &txgo, stop };
    pid_t a = spawn(ev_tx_role, &ta);
    ASSERT_OK(get_bytes(txr.r, &a_idx, sizeof a_idx, tmo(10000)));
    ASSERT_OK(wait_stopped(a, tmo(10000)));     /* stopped holding its loan */

    zimp_sender *b;
    ASSERT_OK(zimp_sender_open(name, &b));
    long sent = 0;
    int rc = 0;
    while (sent < 64 && (rc = send_msg(b, (int)(sent & 1), 2, (uint64_t)sent, 100, T_LONG)) == 0)
        sent++;
    ASSERT_MSG(sent < 64 && rc == -ETIMEDOUT, "B past a stopped sender's loan: %ld sent, "
               "then %d (%s)", sent, rc, err_text(rc));
    unsigned idx[16];
    int n = zimp_stalled(b, idx, 16);
    ASSERT_MSG(n >= 0 && !has_index(idx, n, (unsigned)rx_idx), "zimp_stalled = %d names the "
               "healthy receiver %d, which waits for the stopped sender's message", n, rx_idx);
    int b_idx = zimp_sender_index(b);
    ASSERT_MSG(a_idx >= 0 && b_idx >= 0 && b_idx != a_idx, "sender indices %d, %d", a_idx,
               b_idx);
    ASSERT_EQ(zimp_evict_sender(b, (unsigned)b_idx), -EINVAL);    /* itself */
    ASSERT_EQ(zimp_evict_sender(b, 4), -EINVAL);                   /* beyond max_senders */
    unsigned free_idx = 0;
    while ((int)free_idx == a_idx || (int)free_idx == b_idx)
        free_idx++;
    ASSERT_EQ(zimp_evict_sender(b, free_idx), -ENOENT);            /* nobody there */
    n = zimp_stalled_senders(b, idx, 16);
    ASSERT_MSG(n >= 1 && has_index(idx, n, (unsigned)a_idx), "zimp_stalled_senders = %d (%s) "
               "does not name the stopped sender %d", n, err_text(n), a_idx);
    ASSERT_OK(zimp_evict_sender(b, (unsigned)a_idx));

    /* B goes on; the receiver skips A's position */
    for (long end = sent + 3 * 8; sent < end; sent++) {
        rc = send_msg(b, (int)(sent & 1), 2, (uint64_t)sent, 100, ms_ns(tmo(5000)));
        ASSERT_MSG(rc == 0, "B's send %ld after the eviction: %s", sent, err_text(rc));
    }
    int64_t deadline = now_ns() + ms_ns(tmo(10000));
    while (__atomic_load_n(&sh[0], __ATOMIC_SEQ_CST) < sent && now_ns() < deadline)
        sleep_ms(1);
    ASSERT_MSG(sh[0] == sent, "the receiver got %ld of B's %ld messages", sh[0], sent);

    /* A resumes and scribbles over its loan while B sends more rings */
    ASSERT_OK(kill(a, SIGCONT));
    signal_byte(&txgo);
    for (long end = sent + 3 * 8; sent < end; sent++) {
        rc = send_msg(b, (int)(sent & 1), 2, (uint64_t)sent, 100, ms_ns(tmo(5000)));
        ASSERT_MSG(rc == 0, "B's send %ld while A writes its loan: %s", sent, err_text(rc));
    }
    __atomic_store_n(stop, 1, __ATOMIC_SEQ_CST);
    int arc[2];
    ASSERT_OK(get_bytes(txr.r, arc, sizeof arc, tmo(10000)));
    ASSERT_MSG(arc[0] == -ECONNRESET, "evicted sender's publish: %d (%s)", arc[0],
               err_text(arc[0]));
    ASSERT_MSG(arc[1] == -ECONNRESET, "evicted sender's send: %d (%s)", arc[1],
               err_text(arc[1]));
    ASSERT_CHILD_OK(a, tmo(10000));
    for (long end = sent + 2 * 8; sent < end; sent++)        /* A closed: the full ring again */
        ASSERT_OK(send_msg(b, (int)(sent & 1), 2, (uint64_t)sent, 100, ms_ns(tmo(5000))));
    __atomic_store_n(&sh[1], sent, __ATOMIC_SEQ_CST);
    zimp_sender_close(b);
    ASSERT_CHILD_OK(rx, tmo(20000));
    ASSERT_OK(zimp_unlink(name));
    tpipe_close(&rxr);
    tpipe_close(&txr);
    tpipe_close(&txgo);
    shared_free(sh, 4096);
    return 0;
}

/* ======== 7. a forked child and inherited handles ======== */

struct inherited { zimp_sender *s; zimp_receiver *r; };

static void inherited_child(void *p)
{
    struct inherited *a = p;
    uint8_t buf[64] = { 0 };
    void *lb;
    const void *rb;
    size_t len;
    ASSERT_EQ(zimp_send(a->s, buf, 8, 0), -EBADF);
    ASSERT_EQ(zimp_loan(a->s, 8, &lb, 0), -EBADF);
    ASSERT_EQ(zimp_recv(a->r, buf, sizeof buf, 0), -EBADF);
    ASSERT_EQ(zimp_read(a->r, &rb, &len, 0), -EBADF);
    ASSERT_EQ(zimp_release(a->r), -EBADF);
    ASSERT_EQ(zimp_receiver_fd(a->r), -EBADF);
    zimp_sender_close(a->s);
    zimp_receiver_close(a->r);
}

/*
 * A child made without running fork()'s atfork handlers: by _Fork() or by
 * the raw system call (as clone() or a language runtime's own fork would).
 */
static pid_t spawn_raw(void (*fn)(void *), void *arg, int syscall_fork)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = syscall_fork ? (pid_t)syscall(SYS_fork) : _Fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        fn(arg);
        _exit(0);
    }
    return pid;
}

/*
 * The parent holds a sender, a receiver with an armed descriptor and a
 * borrow; a child made by fork(), then one by _Fork(), then one by the raw
 * system call, each calls and closes the inherited handles. The parent's
 * handles, membership and descriptor are untouched.
 */
TEST_IMPL(fork_child_closes_inherited)
{
    char name[128];
    chan_name(name, sizeof name, "inh");
    create_chan(name, 16, 64, 4, 4);
    zimp_sender *s;
    zimp_receiver *r;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_receiver_open(name, &r));
    int ep = epoll_watch(r);
    struct epoll_event out;
    uint8_t buf[64];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
    ASSERT_OK(send_msg(s, MODE_COPY, 0, 0, 32, 0));
    const void *rb;
    size_t len;
    ASSERT_OK(zimp_read(r, &rb, &len, ms_ns(tmo(5000))));              /* borrowed across the fork */
    struct zimp_info before, after;
    ASSERT_OK(zimp_info(name, &before));
    int ridx = zimp_receiver_index(r), sidx = zimp_sender_index(s);
    ASSERT(ridx >= 0);

    struct inherited a = { s, r };
    ASSERT_CHILD_OK(spawn(inherited_child, &a), tmo(10000));
    ASSERT_CHILD_OK(spawn_raw(inherited_child, &a, 0), tmo(10000));
    ASSERT_CHILD_OK(spawn_raw(inherited_child, &a, 1), tmo(10000));

    uint32_t snd;
    uint64_t seq;
    ASSERT(msg_check(rb, len, &snd, &seq) && snd == 0 && seq == 0);  /* still mapped, intact */
    ASSERT_OK(zimp_release(r));
    ASSERT_OK(zimp_info(name, &after));
    ASSERT_EQ(after.senders, before.senders);
    ASSERT_EQ(after.receivers, before.receivers);
    ASSERT_OK(send_msg(s, MODE_ZC, 0, 1, 32, ms_ns(tmo(5000))));
    ASSERT_OK(send_msg(s, MODE_COPY, 0, 2, 32, ms_ns(tmo(5000))));
    expect_msg(r, 0, 1, ms_ns(tmo(5000)));
    expect_msg(r, 0, 2, ms_ns(tmo(5000)));
    /* the descriptor still works */
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
    while (epoll_wait(ep, &out, 1, 0) > 0)
        ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
    ASSERT_OK(send_msg(s, MODE_COPY, 0, 3, 32, ms_ns(tmo(5000))));
    ASSERT_MSG(epoll_wait(ep, &out, 1, (int)tmo(5000)) == 1, "descriptor not readable after a "
               "publish once the child closed its copy");
    expect_msg(r, 0, 3, 0);
    /* the records are still the parent's */
    zimp_receiver *r2;
    zimp_sender *s2;
    ASSERT_OK(zimp_receiver_open(name, &r2));
    ASSERT_OK(zimp_sender_open(name, &s2));
    ASSERT_MSG(zimp_receiver_index(r2) != ridx, "a new receiver got index %d, the parent's",
               ridx);
    ASSERT(sidx >= 0);
    ASSERT_MSG(zimp_sender_index(s2) != sidx, "a new sender got index %d, the parent's", sidx);
    ASSERT_OK(send_msg(s2, MODE_COPY, 1, 0, 32, ms_ns(tmo(5000))));
    expect_msg(r, 1, 0, ms_ns(tmo(5000)));
    expect_msg(r2, 1, 0, ms_ns(tmo(5000)));
    ASSERT_OK(zimp_info(name, &after));
    ASSERT_EQ(after.senders, before.senders + 1);
    ASSERT_EQ(after.receivers, before.receivers + 1);
    close(ep);
    zimp_sender_close(s2);
    zimp_receiver_close(r2);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ======== 8. closing: NULL, and no leaks over many cycles ======== */

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    ASSERT(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1;                          /* the directory's own descriptor */
}

/* Lines of /proc/self/maps (those containing `needle`, if given). */
static int count_maps(const char *needle)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ASSERT(f != NULL);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (!needle || strstr(line, needle))
            n++;
    fclose(f);
    return n;
}

static void open_close_cycle(const char *name, long i)
{
    zimp_sender *s;
    zimp_receiver *r;
    uint8_t buf[16];
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_receiver_open(name, &r));
    if (i & 1) {
        ASSERT(zimp_receiver_fd(r) >= 0);
        ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);     /* armed */
    }
    ASSERT_OK(zimp_send(s, "x", 1, 0));
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, NS_PER_S), 1);
    zimp_receiver_close(r);
    zimp_sender_close(s);
}

TEST_IMPL(close_null_no_leaks)
{
    zimp_sender_close(NULL);
    zimp_receiver_close(NULL);
    char name[128], needle[160];
    chan_name(name, sizeof name, "leak");
    snprintf(needle, sizeof needle, "zimp.%s", name);
    create_chan(name, 4, 64, 2, 2);
    open_close_cycle(name, 0);            /* first use: lazy library state */
    open_close_cycle(name, 1);
    int fds0 = count_fds(), maps0 = count_maps(NULL);
    ASSERT_EQ(count_maps(needle), 0);
    long cycles = 10000;
    for (long i = 0; i < cycles; i++)
        open_close_cycle(name, i);
    int fds1 = count_fds(), maps1 = count_maps(NULL);
    ASSERT_MSG(fds1 == fds0, "%d descriptors before %ld open/close cycles, %d after", fds0,
               cycles, fds1);
    ASSERT_MSG(count_maps(needle) == 0, "the segment is still mapped after every close");
    ASSERT_MSG(maps1 <= maps0 + 8, "%d mappings before %ld cycles, %d after", maps0, cycles,
               maps1);
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.senders, 0);
    ASSERT_EQ(info.receivers, 0);
    zimp_sender_close(NULL);
    zimp_receiver_close(NULL);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

struct joiner { const char *name; struct tpipe opened; };

static void loan_and_stop(void *arg)
{
    zimp_sender *s;
    void *buf;
    ASSERT_OK(zimp_sender_open(arg, &s));
    ASSERT_OK(zimp_loan(s, 32, &buf, NS_PER_S));
    raise(SIGSTOP);                              /* holds its loan until evicted and killed */
    for (;;)
        pause();
}

static void joining_receiver(void *arg)
{
    struct joiner *j = arg;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(j->name, &r));
    signal_byte(&j->opened);
    for (;;)
        pause();
}

/* The head of the receiver record of process pid, or -1 if it has none. */
static long long head_of(const char *name, pid_t pid)
{
    struct zimp_member_info m;
    return find_member(name, ZIMP_MEMBER_RECEIVER, pid, &m) ? -1 : (long long)m.position;
}

/*
 * A stopped sender evicted while a receiver is inside its open (its head is
 * 0 then, holding every slot): the skip has to wait, and must happen at a
 * later sender call, not only when a sender blocks for room.
 */
TEST_IMPL(evict_sender_during_join)
{
    char name[128];
    chan_name(name, sizeof name, "ej");
    create_chan(name, 8, 64, 3, 4);
    zimp_receiver *r1;
    zimp_sender *a;
    ASSERT_OK(zimp_receiver_open(name, &r1));
    ASSERT_OK(zimp_sender_open(name, &a));
    for (uint64_t i = 0; i < 8; i++) {
        ASSERT_OK(send_msg(a, MODE_COPY, 0, i, 32, NS_PER_S));
        expect_msg(r1, 0, i, NS_PER_S);
    }
    pid_t e = spawn(loan_and_stop, name);       /* holds position 8 */
    ASSERT_OK(wait_stopped(e, tmo(10000)));
    /* catch a joiner between J1 (head 0) and the end of its open */
    struct joiner j = { name, { 0 } };
    tpipe_open(&j.opened);
    pid_t jp = -1;
    struct xrand x = { 99 };
    for (int tries = 0; tries < 2000 && jp < 0; tries++) {
        pid_t c = spawn(joining_receiver, &j);
        sleep_ns((int64_t)xrand_below(&x, 400000));
        kill(c, SIGSTOP);
        ASSERT_OK(wait_stopped(c, tmo(5000)));
        if (head_of(name, c) == 0) {
            jp = c;
            break;
        }
        kill(c, SIGKILL);
        wait_child(c, tmo(5000));
        char drain[64];
        while (get_bytes(j.opened.r, drain, 1, 0) == 0)
            ;
        zimp_receiver *probe;             /* let a sender reclaim the killed joiners' records */
        ASSERT_OK(zimp_receiver_open(name, &probe));
        zimp_receiver_close(probe);
    }
    if (jp < 0) {
        fprintf(stderr, "evict_sender_during_join: never caught a joiner inside its open; skipped\n");
        kill(e, SIGKILL);
        wait_child(e, tmo(5000));
        zimp_sender_close(a);
        zimp_receiver_close(r1);
        zimp_unlink(name);
        return TEST_SKIP;
    }
    struct zimp_member_info em;
    ASSERT_OK(find_member(name, ZIMP_MEMBER_SENDER, e, &em));
    ASSERT_OK(zimp_evict_sender(a, em.index));       /* the skip must wait for the joiner */
    ASSERT_OK(kill(jp, SIGCONT));
    ASSERT_OK(wait_bytes(&j.opened, 1, tmo(10000)));     /* its open returned */
    ASSERT_OK(send_msg(a, MODE_COPY, 0, 9, 32, NS_PER_S));
    expect_msg(r1, 0, 9, ms_ns(tmo(3000)));             /* position 8 skipped by this send's call */
    kill(e, SIGKILL);
    kill(jp, SIGKILL);
    wait_child(e, tmo(5000));
    wait_child(jp, tmo(5000));
    zimp_sender_close(a);
    zimp_receiver_close(r1);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* ======== inspectors against hostile files (a second outside review) ======== */

struct named { const char *name; };

static void fifo_calls(void *p)
{
    const struct named *a = p;
    struct zimp_info info;
    struct zimp_member_info mi[4];
    struct zimp_heap_stats hs;
    zimp_sender *s;
    zimp_receiver *r;
    zimp_heap *h;
    ASSERT_EQ(zimp_info(a->name, &info), -EPROTO);
    ASSERT_EQ(zimp_members(a->name, mi, 4), -EPROTO);
    ASSERT_EQ(zimp_sender_open(a->name, &s), -EPROTO);
    ASSERT_EQ(zimp_receiver_open(a->name, &r), -EPROTO);
    ASSERT(zimp_reap(NULL) >= 0);                   /* the sweep passes it by */
    ASSERT_EQ(zimp_heap_open(a->name, &h), -EPROTO);
    ASSERT_EQ(zimp_heap_info(a->name, &hs), -EPROTO);
}

/*
 * Anyone may make a FIFO in /dev/shm under a channel's or a heap's name: an
 * open without O_NONBLOCK waited there for a writer for ever (zimp ls, gc,
 * zimp_info, zimp_reap(NULL) hung). Each call must refuse it at once.
 */
TEST_IMPL(segment_fifo_refused)
{
    char name[128], chan[256], heap[256];
    chan_name(name, sizeof name, "fifo");
    snprintf(chan, sizeof chan, "/dev/shm/zimp.%s", name);
    snprintf(heap, sizeof heap, "/dev/shm/zimpheap.%s", name);
    ASSERT_OK(mkfifo(chan, 0600));
    ASSERT_OK(mkfifo(heap, 0600));
    struct named a = { name };
    int rc = wait_child(spawn(fifo_calls, &a), 10000);
    ASSERT_EQ(zimp_reap(name), 1);                  /* named: an invalid file goes */
    ASSERT_EQ(zimp_heap_gc(name), 1);
    ASSERT_EQ(access(chan, F_OK) + access(heap, F_OK), -2);
    ASSERT_EQ(rc, 0);
    return 0;
}

struct cutter { const char *from, *to; volatile int *stop; struct tpipe *ready; };

/* Writes a copy of a real segment, then truncates it to nothing, in a loop. */
static void cutter_role(void *p)
{
    const struct cutter *a = p;
    int src = open(a->from, O_RDONLY);
    struct stat st;
    ASSERT(src >= 0 && fstat(src, &st) == 0);
    char *buf = malloc((size_t)st.st_size);
    ASSERT(buf && pread(src, buf, (size_t)st.st_size, 0) == st.st_size);
    int dst = open(a->to, O_RDWR | O_CREAT, 0600);
    ASSERT(dst >= 0);
    signal_byte(a->ready);
    while (!*a->stop) {
        ASSERT(pwrite(dst, buf, (size_t)st.st_size, 0) == st.st_size);
        sleep_ns(100000);
        ASSERT_OK(ftruncate(dst, 0));
    }
    free(buf);
}

static void heap_inspector_role(void *p)
{
    const struct named *a = p;
    struct zimp_heap_stats st;
    for (int i = 0; i < 3000; i++) {
        int rc = zimp_heap_info(a->name, &st);
        ASSERT_MSG(rc == 0 || rc == -EPROTO, "zimp_heap_info: %d (%s)", rc, err_text(rc));
    }
}

static void inspector_role(void *p)
{
    const struct named *a = p;
    struct zimp_info info;
    struct zimp_member_info mi[8];
    for (int i = 0; i < 3000; i++) {
        int rc = zimp_info(a->name, &info);
        ASSERT_MSG(rc == 0 || rc == -EPROTO, "zimp_info: %d (%s)", rc, err_text(rc));
        rc = zimp_members(a->name, mi, 8);
        ASSERT_MSG(rc >= 0 || rc == -EPROTO, "zimp_members: %d (%s)", rc, err_text(rc));
    }
}

/*
 * An inspector is no member: whoever may write a segment may cut it short
 * while zimp_info, zimp_members or zimp_heap_info looks (members and watchers mapping it get
 * SIGBUS, a documented limit; inspectors read with pread and must not). The
 * review crashed `zimp stat` 15 times in 300 so.
 */
TEST_IMPL(inspect_while_truncated)
{
    char name[128], copy[128], from[256], to[256];
    chan_name(name, sizeof name, "trunc");
    chan_name(copy, sizeof copy, "cut");
    struct zimp_config cfg = { .slots = 1024, .slot_size = 64, .max_senders = 64, .max_receivers = 512 };
    ASSERT_OK(zimp_create(name, &cfg));
    snprintf(from, sizeof from, "/dev/shm/zimp.%s", name);
    snprintf(to, sizeof to, "/dev/shm/zimp.%s", copy);
    volatile int *stop = shared_alloc(sizeof *stop);
    struct tpipe ready;
    tpipe_open(&ready);
    struct cutter c = { from, to, stop, &ready };
    pid_t cutter = spawn(cutter_role, &c);
    ASSERT_OK(wait_bytes(&ready, 1, 10000));
    tpipe_close(&ready);
    struct named a = { copy };
    int rc = wait_child(spawn(inspector_role, &a), 60000);
    *stop = 1;
    ASSERT_CHILD_OK(cutter, 10000);
    shared_free((void *)stop, sizeof *stop);
    unlink(to);
    ASSERT_OK(zimp_unlink(name));
    ASSERT_MSG(rc == 0, "the inspector ended with %d (135 = SIGBUS)", rc);

    /* the same for a heap */
    struct zimp_heap_config hc = { .size = 4u << 20 };
    ASSERT_OK(zimp_heap_create(name, &hc));
    snprintf(from, sizeof from, "/dev/shm/zimpheap.%s", name);
    snprintf(to, sizeof to, "/dev/shm/zimpheap.%s", copy);
    stop = shared_alloc(sizeof *stop);
    tpipe_open(&ready);
    struct cutter hcut = { from, to, stop, &ready };
    cutter = spawn(cutter_role, &hcut);
    ASSERT_OK(wait_bytes(&ready, 1, 10000));
    tpipe_close(&ready);
    rc = wait_child(spawn(heap_inspector_role, &a), 60000);
    *stop = 1;
    ASSERT_CHILD_OK(cutter, 10000);
    shared_free((void *)stop, sizeof *stop);
    unlink(to);
    ASSERT_OK(zimp_heap_unlink(name));
    ASSERT_MSG(rc == 0, "the heap inspector ended with %d (135 = SIGBUS)", rc);
    return 0;
}
