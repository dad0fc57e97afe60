/*
 * Lossy receivers (zimp_receiver_open_lossy): they never hold a sender back,
 * report what they lost (-ENOBUFS, zimp_receiver_missed), never deliver a
 * message that was written over, and leave lossless receivers' guarantees
 * alone.
 */
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>

#include "task.h"

/* Received messages (by seq) and losses of one lossy reader, in shared memory. */
struct tally {
    uint64_t got, missed, last_seq, torn, out_of_order, enobufs;
};

struct lossy_arg {
    const char *name;
    struct tally *t;
    struct tpipe *ready;
    int zc;               /* 0 copy, 1 in place, 2 both */
    long pause_us;        /* between receives: slower than the sender */
    size_t cap;
    long hold_us;         /* in-place reads: time between zimp_read and looking at the data */
};

/* Reads until -EPIPE, counting messages and losses; checks every message it keeps. */
static void lossy_reader(void *p)
{
    struct lossy_arg *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open_lossy(a->name, &r));
    signal_byte(a->ready);
    uint8_t *buf = malloc(a->cap);
    ASSERT(buf);
    struct tally *t = a->t;
    bool first = true;
    for (int i = 0;; i++) {
        if (a->pause_us)
            sleep_ns(a->pause_us * 1000);
        int zc = a->zc == 2 ? i & 1 : a->zc;
        uint32_t id;
        uint64_t seq;
        ssize_t n;
        int ok = 0;
        if (zc) {
            const void *d;
            size_t len;
            n = zimp_read(r, &d, &len, T_LONG);
            if (n == 0) {
                if (a->hold_us)
                    sleep_ns(a->hold_us * 1000);        /* senders may write over it now */
                ok = msg_check(d, len, &id, &seq);       /* looked at before the release */
                int rc = zimp_release(r);
                if (rc == -ENOBUFS) {                   /* written over meanwhile: not ours */
                    t->enobufs++;
                    continue;
                }
                ASSERT_OK(rc);
                n = (ssize_t)len;
            }
        } else {
            n = zimp_recv(r, buf, a->cap, T_LONG);
            ok = n >= 0 && msg_check(buf, (size_t)n, &id, &seq);
        }
        if (n == -ENOBUFS) {
            t->enobufs++;
            continue;
        }
        if (n == -EPIPE)
            break;
        ASSERT_MSG(n >= 0, "lossy receive %d: %s", i, err_text(n));
        if (!ok) {
            t->torn++;
            continue;
        }
        if (!first && seq <= t->last_seq)
            t->out_of_order++;
        first = false;
        t->last_seq = seq;
        t->got++;
    }
    ASSERT_OK(zimp_receiver_missed(r, &t->missed));
    zimp_receiver_close(r);
    free(buf);
}

/*
 * What every lossy reader must show: whole messages only, in order, and kept
 * plus lost covering the `sent` positions, plus at most `abandoned` more
 * (positions that carried no message count when they were written over).
 */
static void check_lossy(const struct tally *t, uint64_t sent, uint64_t abandoned)
{
    ASSERT_EQ(t->torn, 0);
    ASSERT_EQ(t->out_of_order, 0);
    ASSERT_MSG(t->got + t->missed >= sent && t->got + t->missed <= sent + abandoned,
               "lossy: %llu received + %llu missed, %llu sent and %llu abandoned",
               (unsigned long long)t->got, (unsigned long long)t->missed, (unsigned long long)sent,
               (unsigned long long)abandoned);
}

/* A lossless reader: every message, in order, until -EPIPE. */
static void lossless_reader(void *p)
{
    struct lossy_arg *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    uint8_t buf[4096];
    uint64_t want = 0;
    for (;;) {
        ssize_t n = recv_msg(r, (int)(want & 1), buf, sizeof buf, T_LONG);
        if (n == -EPIPE)
            break;
        uint32_t id;
        uint64_t seq;
        ASSERT_MSG(n >= 0 && msg_check(buf, (size_t)n, &id, &seq), "lossless message %llu: %s",
                   (unsigned long long)want, err_text(n));
        ASSERT_EQ(seq, want);
        want++;
    }
    a->t->got = want;
    zimp_receiver_close(r);
}

/*
 * A stopped lossy receiver and a lossless one on a small ring: the sender
 * never waits for the stopped one, the lossless one gets everything, and
 * the lossy one, resumed, reports what it lost and then reads on: every
 * position is either received or counted as missed, exactly.
 */
TEST_IMPL(lossy_stopped_never_blocks)
{
    char name[128];
    chan_name(name, sizeof name, "stop");
    create_chan(name, 8, 256, 1, 4);
    struct tally *t = shared_alloc(4096);
    struct tpipe ready;
    tpipe_open(&ready);
    struct lossy_arg lossy = { name, &t[0], &ready, 2, 0, 256, 0 };
    struct lossy_arg full = { name, &t[1], &ready, 0, 0, 256, 0 };
    pid_t lk = spawn(lossy_reader, &lossy);
    pid_t fk = spawn(lossless_reader, &full);
    ASSERT_OK(wait_bytes(&ready, 2, tmo(10000)));
    kill(lk, SIGSTOP);
    ASSERT_OK(wait_stopped(lk, tmo(5000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    const uint64_t total = (uint64_t)scaled(20000);
    for (uint64_t i = 0; i < total; i++) {
        /* a lossless receiver that reads keeps this short; the stopped one must not */
        int rc = send_msg(s, (int)(i & 1), 0, i, 16 + (size_t)(i % 200), 5 * NS_PER_S);
        ASSERT_MSG(rc == 0, "send %llu with a stopped lossy receiver: %s", (unsigned long long)i, err_text(rc));
    }
    kill(lk, SIGCONT);
    zimp_sender_close(s);
    ASSERT_CHILD_OK(fk, tmo(30000));
    ASSERT_CHILD_OK(lk, tmo(30000));
    ASSERT_EQ(t[1].got, total);
    check_lossy(&t[0], total, 0);
    ASSERT_MSG(t[0].enobufs >= 1, "the resumed lossy receiver reported no loss");
    ASSERT_OK(zimp_unlink(name));
    shared_free(t, 4096);
    tpipe_close(&ready);
    return 0;
}

/*
 * A slow lossy reader against a fast sender of random lengths: whatever it
 * keeps is whole (lengths and checksums verified), in order, and kept plus
 * lost adds up to everything sent. Copies and in-place reads alternate.
 */
TEST_IMPL(lossy_never_torn)
{
    char name[128];
    chan_name(name, sizeof name, "torn");
    create_chan(name, 4, 2048, 1, 2);
    struct tally *t = shared_alloc(4096);
    struct tpipe ready;
    tpipe_open(&ready);
    struct lossy_arg lossy = { name, &t[0], &ready, 2, 20, 2048, 30 };
    pid_t lk = spawn(lossy_reader, &lossy);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_sender_set_spin(s, UINT64_MAX));
    struct xrand rnd = { (uint64_t)getpid() };
    const uint64_t total = (uint64_t)scaled(60000);
    for (uint64_t i = 0; i < total; i++)
        ASSERT_OK(send_msg(s, (int)(i & 1), 0, i, 16 + (size_t)xrand_below(&rnd, 2033), T_LONG));
    zimp_sender_close(s);
    ASSERT_CHILD_OK(lk, tmo(60000));
    check_lossy(&t[0], total, 0);
    ASSERT_MSG(t[0].missed > 0, "a reader 20 us per message against a spinning sender lost nothing");
    /* in-place reads held 30 us against a spinning sender: some were written over */
    ASSERT_MSG(t[0].enobufs > 1, "no in-place read was written over (%llu -ENOBUFS)",
               (unsigned long long)t[0].enobufs);
    ASSERT_OK(zimp_unlink(name));
    shared_free(t, 4096);
    tpipe_close(&ready);
    return 0;
}

/* Large messages to a lossy reader: blocks it keeps are whole. */
TEST_IMPL(lossy_large_messages)
{
    char name[128], heap[128];
    chan_name(name, sizeof name, "big");
    chan_name(heap, sizeof heap, "big-h");
    struct zimp_heap_config hc = { .size = 8 << 20 };
    ASSERT_OK(zimp_heap_create(heap, &hc));
    struct zimp_config c = { .slots = 4, .slot_size = 64, .max_senders = 1, .max_receivers = 2, .heap = heap };
    ASSERT_OK(zimp_create(name, &c));
    struct tally *t = shared_alloc(4096);
    struct tpipe ready;
    tpipe_open(&ready);
    struct lossy_arg lossy = { name, &t[0], &ready, 2, 50, 300 << 10, 30 };
    pid_t lk = spawn(lossy_reader, &lossy);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    const uint64_t total = (uint64_t)scaled(3000);
    for (uint64_t i = 0; i < total; i++)
        ASSERT_OK(send_msg(s, MODE_ZC, 0, i, 32 + (size_t)((i * 7919) % (256 << 10)), T_LONG));
    zimp_sender_close(s);
    ASSERT_CHILD_OK(lk, tmo(60000));
    check_lossy(&t[0], total, 0);
    ASSERT_OK(zimp_unlink(name));
    struct zimp_heap_stats st;
    ASSERT_OK(zimp_heap_info(heap, &st));
    ASSERT_EQ(st.blocks, 0);
    ASSERT_OK(zimp_heap_unlink(heap));
    shared_free(t, 4096);
    tpipe_close(&ready);
    return 0;
}

struct dying_sender { const char *name; uint64_t count; };

static void send_then_die(void *p)
{
    struct dying_sender *a = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    for (uint64_t i = 0; i < a->count; i++)
        ASSERT_OK(send_msg(s, (int)(i & 1), 0, i, 100, T_LONG));
    void *buf;
    ASSERT_OK(zimp_loan(s, 100, &buf, T_LONG));
    memset(buf, 0x77, 50);                 /* half a message, then kill -9 */
    raise(SIGKILL);
}

/*
 * A sender killed with a loan while a slow lossy reader and a lossless one
 * read: the lossless one gets every published message in order; the lossy
 * one keeps only whole messages, in order, and kept plus lost covers every
 * position but at most the abandoned one.
 */
TEST_IMPL(lossy_sender_killed)
{
    char name[128];
    chan_name(name, sizeof name, "kill");
    create_chan(name, 8, 256, 2, 4);
    struct tally *t = shared_alloc(4096);
    struct tpipe ready;
    tpipe_open(&ready);
    struct lossy_arg lossy = { name, &t[0], &ready, 2, 20, 256, 10 };
    struct lossy_arg full = { name, &t[1], &ready, 0, 0, 256, 0 };
    pid_t lk = spawn(lossy_reader, &lossy);
    pid_t fk = spawn(lossless_reader, &full);
    ASSERT_OK(wait_bytes(&ready, 2, tmo(10000)));
    const uint64_t first = 500, total = (uint64_t)scaled(4000);
    /* open before the first sender dies: readers would drain to -EPIPE in between */
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    struct dying_sender dying = { name, first };
    ASSERT_EQ(wait_child(spawn(send_then_die, &dying), tmo(20000)), 128 + SIGKILL);
    for (uint64_t i = first; i < total; i++)
        ASSERT_OK(send_msg(s, (int)(i & 1), 0, i, 100, T_LONG));
    zimp_sender_close(s);
    ASSERT_CHILD_OK(fk, tmo(30000));
    ASSERT_CHILD_OK(lk, tmo(30000));
    ASSERT_EQ(t[1].got, total);
    check_lossy(&t[0], total, 1);
    ASSERT_OK(zimp_unlink(name));
    shared_free(t, 4096);
    tpipe_close(&ready);
    return 0;
}

/* Lossy receivers: listed with their flag and losses, evictable, refused where zeroing is on. */
TEST_IMPL(lossy_membership)
{
    char name[128];
    chan_name(name, sizeof name, "mem");
    create_chan(name, 2, 64, 1, 3);
    zimp_receiver *l, *full;
    ASSERT_OK(zimp_receiver_open_lossy(name, &l));
    ASSERT_OK(zimp_receiver_open(name, &full));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    /* the lossless one reads, the lossy one does not: the sender goes on */
    for (uint64_t i = 0; i < 10; i++) {
        ASSERT_OK(send_msg(s, MODE_COPY, 0, i, 32, 0));
        expect_msg(full, 0, i, T_LONG);
    }
    uint8_t buf[64];
    ASSERT_EQ(zimp_recv(l, buf, sizeof buf, 0), -ENOBUFS);
    uint64_t missed;
    ASSERT_OK(zimp_receiver_missed(l, &missed));
    ASSERT_EQ(missed, 9);                  /* 10 sent: it goes on half a ring before tail */
    expect_msg(l, 0, 9, T_LONG);
    ASSERT_OK(zimp_receiver_missed(full, &missed));
    ASSERT_EQ(missed, 0);
    struct zimp_member_info mi[4];
    int n = zimp_members(name, mi, 4);
    ASSERT_EQ(n, 3);
    int seen = 0;
    for (int i = 0; i < n; i++)
        if (mi[i].role == ZIMP_MEMBER_RECEIVER && mi[i].index == (uint32_t)zimp_receiver_index(l)) {
            ASSERT_EQ(mi[i].flags, ZIMP_MEMBER_LOSSY);
            ASSERT_EQ(mi[i].missed, 9);
            seen = 1;
        } else {
            ASSERT_EQ(mi[i].flags, 0);
        }
    ASSERT(seen);
    /* a stalled-receiver scan never names it; an eviction still works */
    unsigned idx[4];
    ASSERT_EQ(zimp_stalled(s, idx, 4), 0);
    ASSERT_OK(zimp_evict(s, (unsigned)zimp_receiver_index(l)));
    ASSERT_EQ(zimp_recv(l, buf, sizeof buf, 0), -ECONNRESET);
    zimp_receiver_close(l);
    zimp_receiver_close(full);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));

    struct zimp_config c = { .slots = 4, .slot_size = 64, .flags = ZIMP_ZERO_ON_RELEASE };
    ASSERT_OK(zimp_create(name, &c));
    ASSERT_EQ(zimp_receiver_open_lossy(name, &l), -ENOTSUP);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/*
 * A gap found while arming the descriptor (zimp_receiver_fd looks for a
 * ready message, and so finds the overrun) is still reported: -ENOBUFS
 * first, then the message after the gap.
 */
TEST_IMPL(lossy_gap_found_arming)
{
    char name[128];
    chan_name(name, sizeof name, "arm");
    create_chan(name, 4, 64, 1, 1);
    zimp_receiver *l;
    ASSERT_OK(zimp_receiver_open_lossy(name, &l));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    for (uint64_t i = 0; i < 10; i++)
        ASSERT_OK(send_msg(s, MODE_COPY, 0, i, 32, 0));
    int fd = zimp_receiver_fd(l);
    ASSERT(fd >= 0);
    uint8_t buf[64];
    ASSERT_EQ(zimp_recv(l, buf, sizeof buf, 0), -ENOBUFS);
    uint64_t missed;
    ASSERT_OK(zimp_receiver_missed(l, &missed));
    ASSERT_EQ(missed, 8);                  /* 10 sent: it goes on half a ring before tail */
    expect_msg(l, 0, 8, T_LONG);
    expect_msg(l, 0, 9, T_LONG);
    ASSERT_EQ(zimp_recv(l, buf, sizeof buf, 0), -EAGAIN);
    zimp_receiver_close(l);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}
