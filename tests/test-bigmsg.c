/*
 * Large messages: a channel created with a heap carries messages longer than
 * its slots in heap blocks, through the ordinary calls (docs/heap.md, "Large
 * messages on channels"). Data checked byte for byte, blocks counted in the
 * heap after deaths, full heaps, and read-only blocks.
 */
#include <signal.h>
#include <sys/stat.h>

#include "task.h"

struct big { char chan[128], heap[128]; };

/* A heap of `heap_size` bytes and a channel of slots x slot_size carrying large messages in it. */
static void big_make(struct big *b, const char *tag, uint64_t heap_size, uint32_t slots,
                     uint32_t slot_size, uint32_t max_receivers, uint32_t heap_flags)
{
    char t[64];
    snprintf(t, sizeof t, "%s-h", tag);
    chan_name(b->heap, sizeof b->heap, t);
    chan_name(b->chan, sizeof b->chan, tag);
    struct zimp_heap_config hc = { .size = heap_size, .flags = heap_flags };
    int rc = zimp_heap_create(b->heap, &hc);
    ASSERT_MSG(rc == 0, "zimp_heap_create: %s %s", err_text(rc), zimp_last_detail());
    struct zimp_config c = { .slots = slots, .slot_size = slot_size, .max_senders = 2,
                             .max_receivers = max_receivers, .heap = b->heap };
    rc = zimp_create(b->chan, &c);
    ASSERT_MSG(rc == 0, "zimp_create with a heap: %s %s", err_text(rc), zimp_last_detail());
}

static struct zimp_heap_stats heap_now(const struct big *b)
{
    struct zimp_heap_stats st;
    ASSERT_OK(zimp_heap_info(b->heap, &st));
    return st;
}

/* Removes the channel (its blocks go with it) and the heap: nothing may be left. */
static void big_done(const struct big *b)
{
    ASSERT_OK(zimp_unlink(b->chan));
    struct zimp_heap_stats st = heap_now(b);
    ASSERT_MSG(st.blocks == 0 && st.used == 0, "%llu blocks (%llu bytes) left after the channel went",
               (unsigned long long)st.blocks, (unsigned long long)st.used);
    ASSERT_OK(zimp_heap_unlink(b->heap));
}

static int send_big(zimp_sender *s, int zc, size_t len, uint64_t seed, int64_t timeout_ns)
{
    if (!zc) {
        uint8_t *tmp = malloc(len ? len : 1);
        ASSERT(tmp);
        pattern_fill(tmp, len, seed);
        int rc = zimp_send(s, tmp, len, timeout_ns);
        free(tmp);
        return rc;
    }
    void *buf;
    int rc = zimp_loan(s, len, &buf, timeout_ns);
    if (rc != 0)
        return rc;
    pattern_fill(buf, len, seed);
    return zimp_publish(s, buf, len);
}

/* Receives message `seed` of len bytes, in place or by copy, and checks every byte. */
static void expect_big(zimp_receiver *r, int zc, size_t len, uint64_t seed)
{
    if (zc) {
        const void *p;
        size_t n;
        int rc = zimp_read(r, &p, &n, T_LONG);
        ASSERT_MSG(rc == 0, "zimp_read of message %llu: %s %s", (unsigned long long)seed, err_text(rc),
                   zimp_last_detail());
        ASSERT_EQ(n, len);
        size_t at = pattern_mismatch(p, n, seed);
        ASSERT_MSG(at == n, "message %llu (%zu bytes): byte %zu wrong", (unsigned long long)seed, n, at);
        ASSERT_OK(zimp_release(r));
        return;
    }
    uint8_t *buf = malloc(len + 1);
    ASSERT(buf);
    ssize_t n = zimp_recv(r, buf, len + 1, T_LONG);
    ASSERT_MSG(n == (ssize_t)len, "zimp_recv of message %llu: %zd %s", (unsigned long long)seed, n,
               err_text(n));
    size_t at = pattern_mismatch(buf, len, seed);
    ASSERT_MSG(at == len, "message %llu (%zu bytes): byte %zu wrong", (unsigned long long)seed, len, at);
    free(buf);
}

/* Every size around the slot boundary and beyond, both paths, three receivers. */
/*
 * ZIMP_ZERO_ON_RELEASE on a channel with a heap: a large loan published
 * short has its unpublished tail zeroed by the sender (receivers map the
 * block read-only; the heap zeroes the whole block when it is freed).
 */
TEST_IMPL(bigmsg_zero_on_release_tail)
{
    char chan[128], heap[128];
    chan_name(heap, sizeof heap, "zt-h");
    chan_name(chan, sizeof chan, "zt");
    struct zimp_heap_config hc = { .size = 4 << 20, .flags = ZIMP_ZERO_ON_RELEASE };
    ASSERT_OK(zimp_heap_create(heap, &hc));
    struct zimp_config c = { .slots = 4, .slot_size = 4096, .max_senders = 1, .max_receivers = 4,
                             .heap = heap, .flags = ZIMP_ZERO_ON_RELEASE };
    ASSERT_OK(zimp_create(chan, &c));
    zimp_receiver *r;
    zimp_sender *s;
    ASSERT_OK(zimp_receiver_open(chan, &r));
    ASSERT_OK(zimp_sender_open(chan, &s));
    const size_t loan = 1 << 20, sent = 10000;
    void *buf;
    ASSERT_OK(zimp_loan(s, loan, &buf, T_LONG));
    memset(buf, 0xA5, loan);
    ASSERT_OK(zimp_publish(s, buf, sent));
    const void *rb;
    size_t len;
    ASSERT_OK(zimp_read(r, &rb, &len, T_LONG));
    ASSERT_EQ(len, sent);
    const uint8_t *p = rb;
    for (size_t k = 0; k < loan; k++)
        ASSERT_MSG(p[k] == (k < sent ? 0xA5 : 0), "byte %zu of the block: 0x%02x (published: %zu bytes)",
                   k, p[k], sent);
    ASSERT_OK(zimp_release(r));
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(chan));
    ASSERT_OK(zimp_heap_unlink(heap));
    return 0;
}

TEST_IMPL(bigmsg_sizes)
{
    struct big b;
    big_make(&b, "sizes", 8 << 20, 4, 256, 4, 0);
    zimp_receiver *r[3];
    for (int i = 0; i < 3; i++)
        ASSERT_OK(zimp_receiver_open(b.chan, &r[i]));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(b.chan, &s));
    const size_t sizes[] = { 0, 1, 48, 49, 255, 256, 257, 4096, 100000, 1 << 20 };
    uint64_t seed = 1;
    for (int round = 0; round < 3; round++) {
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++, seed++) {
            ASSERT_OK(send_big(s, (int)(seed & 1), sizes[k], seed, T_LONG));
            for (int i = 0; i < 3; i++)
                expect_big(r[i], (int)((seed + (uint64_t)i) & 1), sizes[k], seed);
        }
        /* the channel holds at most one block per slot */
        ASSERT(heap_now(&b).blocks <= 4);
    }
    /* a message longer than the heap can ever hold */
    void *buf;
    ASSERT_EQ(zimp_loan(s, (size_t)(16 << 20), &buf, 0), -ENOMEM);
    zimp_sender_close(s);
    for (int i = 0; i < 3; i++) {
        uint8_t one;
        ASSERT_EQ(zimp_recv(r[i], &one, 1, T_LONG), -EPIPE);
        zimp_receiver_close(r[i]);
    }
    big_done(&b);
    return 0;
}

/*
 * Blocks are reused by the sender that drops their last hold (it keeps
 * them: docs/heap.md, "Kept blocks"): data stays right, the heap has no
 * more blocks in use than the ring's two messages and the loan (kept ones
 * count as free), and nothing once the sender is gone.
 */
TEST_IMPL(bigmsg_spares)
{
    struct big b;
    const size_t len = (size_t)5 << 20;
    big_make(&b, "spare", 6 * len, 2, 256, 2, 0);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(b.chan, &r));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(b.chan, &s));
    for (uint64_t i = 0; i < 24; i++) {
        size_t n = len - (size_t)(i % 3) * 4096;     /* the same run of units, lengths vary */
        ASSERT_OK(send_big(s, (int)(i & 1), n, i, T_LONG));
        expect_big(r, (int)((i >> 1) & 1), n, i);
        ASSERT_MSG(heap_now(&b).blocks <= 2 + 1, "%llu blocks", (unsigned long long)heap_now(&b).blocks);
    }
    zimp_sender_close(s);
    zimp_receiver_close(r);
    big_done(&b);
    return 0;
}

struct rx_arg { const struct big *b; int count; size_t len; struct tpipe *ready; int zc; };

static void big_rx_role(void *p)
{
    struct rx_arg *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->b->chan, &r));
    signal_byte(a->ready);
    for (int i = 0; i < a->count; i++)
        expect_big(r, a->zc, a->len, (uint64_t)i + 1000);
    zimp_receiver_close(r);
}

/* 64 MiB messages, written once, read in place by four receiver processes. */
TEST_IMPL(bigmsg_64mib_to_4)
{
    struct big b;
    const size_t len = (size_t)64 << 20;
    big_make(&b, "64m", 3 * len + (1 << 20), 2, 4096, 4, 0);
    struct tpipe ready;
    tpipe_open(&ready);
    struct rx_arg a = { &b, 4, len, &ready, 1 };
    pid_t kid[4];
    for (int i = 0; i < 4; i++) {
        a.zc = i != 3;                  /* three read in place, one copies */
        kid[i] = spawn(big_rx_role, &a);
    }
    ASSERT_OK(wait_bytes(&ready, 4, tmo(10000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(b.chan, &s));
    for (int i = 0; i < a.count; i++)
        ASSERT_OK(send_big(s, 1, len, (uint64_t)i + 1000, T_LONG));
    for (int i = 0; i < 4; i++)
        ASSERT_CHILD_OK(kid[i], tmo(60000));
    zimp_sender_close(s);
    tpipe_close(&ready);
    big_done(&b);
    return 0;
}

static void hold_and_die(void *p)
{
    struct rx_arg *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->b->chan, &r));
    signal_byte(a->ready);
    const void *buf;
    size_t n;
    ASSERT_OK(zimp_read(r, &buf, &n, T_LONG));
    signal_byte(a->ready);              /* holds a large message: the parent kills it now */
    for (;;)
        pause();
}

/*
 * A receiver killed while it reads a large message in place: the heap is
 * small, so the sender could not go on if the dead receiver's blocks stayed.
 */
TEST_IMPL(bigmsg_receiver_killed)
{
    struct big b;
    const size_t len = 1 << 20;
    big_make(&b, "rxkill", 5 * len, 4, 1024, 4, 0);
    zimp_receiver *live;
    ASSERT_OK(zimp_receiver_open(b.chan, &live));
    struct tpipe ready;
    tpipe_open(&ready);
    struct rx_arg a = { &b, 0, len, &ready, 1 };
    pid_t kid = spawn(hold_and_die, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(b.chan, &s));
    ASSERT_OK(send_big(s, 1, len, 1000, T_LONG));
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    kill(kid, SIGKILL);
    ASSERT_EQ(wait_child(kid, tmo(10000)), 128 + SIGKILL);
    expect_big(live, 1, len, 1000);
    for (uint64_t i = 1; i < 40; i++) {
        ASSERT_OK(send_big(s, (int)(i & 1), len, 1000 + i, T_LONG));
        expect_big(live, (int)(i & 1), len, 1000 + i);
    }
    zimp_sender_close(s);
    zimp_receiver_close(live);
    tpipe_close(&ready);
    big_done(&b);
    return 0;
}

static void loan_and_die(void *p)
{
    struct rx_arg *a = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->b->chan, &s));
    for (int i = 0; i < 2; i++)
        ASSERT_OK(send_big(s, 1, a->len, (uint64_t)i + 1000, T_LONG));
    void *buf;
    ASSERT_OK(zimp_loan(s, a->len, &buf, T_LONG));
    memset(buf, 0x5a, a->len / 2);     /* half written, then gone */
    raise(SIGKILL);
}

/* A sender killed with a large loan: its block goes back, the position is passed over. */
TEST_IMPL(bigmsg_sender_killed)
{
    struct big b;
    const size_t len = 300 << 10;
    big_make(&b, "txkill", 4 << 20, 4, 512, 2, 0);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(b.chan, &r));
    struct rx_arg a = { &b, 0, len, NULL, 1 };
    pid_t kid = spawn(loan_and_die, &a);
    ASSERT_EQ(wait_child(kid, tmo(10000)), 128 + SIGKILL);
    expect_big(r, 1, len, 1000);
    expect_big(r, 0, len, 1001);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(b.chan, &s));
    for (uint64_t i = 0; i < 20; i++) {
        ASSERT_OK(send_big(s, (int)(i & 1), len, 2000 + i, T_LONG));
        expect_big(r, (int)(i & 1), len, 2000 + i);
    }
    /* the dead sender's block was freed by a heap call of ours (its member is dead) */
    ASSERT_MSG(heap_now(&b).blocks <= 4, "%llu blocks", (unsigned long long)heap_now(&b).blocks);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    big_done(&b);
    /* killed with a loan, then the channel removed at once: the removal reaps it */
    big_make(&b, "txkill2", 4 << 20, 4, 512, 2, 0);
    kid = spawn(loan_and_die, &a);
    ASSERT_EQ(wait_child(kid, tmo(10000)), 128 + SIGKILL);
    big_done(&b);
    return 0;
}

/*
 * A full heap waits for receivers like a full ring: -EAGAIN without a wait,
 * -ETIMEDOUT after one, a loan as soon as the receiver reads; -ENOMEM when
 * nothing the channel holds could be given back.
 */
TEST_IMPL(bigmsg_heap_full)
{
    struct big b;
    const size_t len = 1 << 20;
    big_make(&b, "full", 3 * len, 8, 1024, 2, 0);
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(b.chan, &r));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(b.chan, &s));
    for (uint64_t i = 0; i < 3; i++)
        ASSERT_OK(send_big(s, 1, len, i, T_LONG));
    void *buf;
    ASSERT_EQ(zimp_loan(s, len, &buf, 0), -EAGAIN);
    int64_t t0 = now_ns();
    ASSERT_EQ(zimp_loan(s, len, &buf, 50 * NS_PER_MS), -ETIMEDOUT);
    ASSERT(now_ns() - t0 >= 45 * NS_PER_MS);
    expect_big(r, 1, len, 0);               /* one released: room for one */
    ASSERT_OK(send_big(s, 0, len, 3, T_LONG));
    ASSERT_EQ(zimp_loan(s, len, &buf, 0), -EAGAIN);
    for (uint64_t i = 1; i < 4; i++)
        expect_big(r, (int)(i & 1), len, i);
    ASSERT_OK(send_big(s, 1, len, 4, 0));
    expect_big(r, 0, len, 4);
    /* a heap full of blocks the channel does not hold: nothing to wait for */
    zimp_heap *h;
    struct zimp_ref refs[3];
    ASSERT_OK(zimp_heap_open(b.heap, &h));
    int got = 0;
    while (got < 2 && zimp_heap_alloc(h, len, &buf, &refs[got]) == 0)
        got++;
    ASSERT_EQ(got, 2);
    /* the last message's block is given back (every receiver passed it), then lent */
    ASSERT_OK(zimp_loan(s, len, &buf, 0));
    ASSERT_OK(zimp_unloan(s, buf));
    ASSERT_OK(zimp_heap_alloc(h, len, &buf, &refs[2]));
    ASSERT_EQ(zimp_loan(s, len, &buf, T_LONG), -ENOMEM);
    ASSERT_OK(zimp_heap_release(h, &refs[0]));
    ASSERT_OK(send_big(s, 1, len, 5, 0));
    expect_big(r, 1, len, 5);
    zimp_heap_close(h);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    big_done(&b);
    return 0;
}

static void write_block_role(void *p)
{
    struct rx_arg *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->b->chan, &r));
    signal_byte(a->ready);
    const void *buf;
    size_t n;
    ASSERT_OK(zimp_read(r, &buf, &n, T_LONG));
    ASSERT_EQ(n, a->len);
    *(volatile char *)buf = 1;            /* must fault: receivers map blocks read-only */
    _exit(3);
}

/* Receivers cannot write a large message; a heap that is gone fails opens clearly. */
TEST_IMPL(bigmsg_read_only_and_errors)
{
    struct big b;
    big_make(&b, "ro", 1 << 20, 4, 64, 2, 0);
    struct tpipe ready;
    tpipe_open(&ready);
    struct rx_arg a = { &b, 1, 1000, &ready, 1 };
    pid_t kid = spawn(write_block_role, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(b.chan, &s));
    ASSERT_OK(send_big(s, 1, 1000, 7, T_LONG));
    int st = wait_child(kid, tmo(10000));
    ASSERT_MSG(died_of_write_fault(st), "writing into a large message: status %d", st);
    zimp_sender_close(s);
    tpipe_close(&ready);

    /* no such heap at create */
    char name[128];
    chan_name(name, sizeof name, "noheap");
    struct zimp_config c = { .slots = 4, .slot_size = 64, .heap = "zimp-no-such-heap" };
    ASSERT_EQ(zimp_create(name, &c), -ENOENT);
    ASSERT(!shm_exists(name));
    /* without a heap, a message longer than a slot is refused as before */
    c.heap = NULL;
    ASSERT_OK(zimp_create(name, &c));
    ASSERT_OK(zimp_sender_open(name, &s));
    void *buf;
    ASSERT_EQ(zimp_loan(s, 65, &buf, 0), -EMSGSIZE);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));

    /* the heap removed under the channel: opens say which heap is missing */
    ASSERT_OK(zimp_heap_unlink(b.heap));
    zimp_receiver *r;
    ASSERT_EQ(zimp_receiver_open(b.chan, &r), -ENOENT);
    ASSERT_MSG(strstr(zimp_last_detail(), b.heap), "detail: %s", zimp_last_detail());
    ASSERT_EQ(zimp_sender_open(b.chan, &s), -ENOENT);
    ASSERT_OK(zimp_unlink(b.chan));
    return 0;
}

/*
 * A receiver that keeps a large message (read in place, never released)
 * holds the heap's room as a stalled receiver holds a ring: with a stall
 * timeout, a sender waiting for heap room gets -ETIMEDOUT, and zimp_stalled
 * names the receiver, which it may evict.
 */
TEST_IMPL(bigmsg_heap_stall)
{
    struct big b;
    const size_t len = 1 << 20;
    chan_name(b.heap, sizeof b.heap, "stall-h");
    chan_name(b.chan, sizeof b.chan, "stall");
    struct zimp_heap_config hc = { .size = 4 * len };
    ASSERT_OK(zimp_heap_create(b.heap, &hc));
    struct zimp_config c = { .slots = 64, .slot_size = 256, .heap = b.heap,
                             .stall_timeout_ns = 100 * NS_PER_MS };
    ASSERT_OK(zimp_create(b.chan, &c));
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(b.chan, &r));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(b.chan, &s));
    ASSERT_OK(send_big(s, 1, len, 0, T_LONG));
    const void *p;
    size_t n;
    ASSERT_OK(zimp_read(r, &p, &n, T_LONG));             /* kept, never released */
    int rc = 0;
    int64_t t0 = now_ns();
    for (uint64_t i = 1; i < 8 && rc == 0; i++)
        rc = send_big(s, 1, len, i, -1);
    ASSERT_MSG(rc == -ETIMEDOUT, "sending into a heap its receiver keeps: %s", err_text(rc));
    ASSERT(now_ns() - t0 >= 95 * NS_PER_MS);
    unsigned idx[4];
    ASSERT_EQ(zimp_stalled(s, idx, 4), 1);
    ASSERT_EQ(idx[0], (unsigned)zimp_receiver_index(r));
    ASSERT_OK(zimp_evict(s, idx[0]));
    ASSERT_OK(send_big(s, 1, len, 9, T_LONG));           /* its blocks are free again */
    ASSERT_EQ(zimp_release(r), -ECONNRESET);
    zimp_receiver_close(r);
    zimp_sender_close(s);
    big_done(&b);
    return 0;
}

/* ---- H5: a heap shared by channels and direct allocations ---- */

struct idle_arg { const char *chan; int count; size_t len; struct tpipe *ready, *go; };

/* Sends `count` large messages, then stays open and idle until told to close. */
static void idle_sender_role(void *p)
{
    struct idle_arg *a = p;
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->chan, &s));
    for (int i = 0; i < a->count; i++)
        ASSERT_OK(send_big(s, 1, a->len, (uint64_t)i + 1000, T_LONG));
    signal_byte(a->ready);
    ASSERT_OK(wait_bytes(a->go, 1, tmo(60000)));
    zimp_sender_close(s);
}

/*
 * Two channels and a direct allocator share one heap. The blocks of
 * messages every receiver of channel B released are taken back by the
 * others' allocations although B's sender (another process) stays idle;
 * a message a receiver still reads in place is not, and is not touched.
 */
TEST_IMPL(bigmsg_shared_heap)
{
    struct big a;
    const size_t len = 1 << 20;
    big_make(&a, "share", 4 * len, 8, 1024, 2, 0);
    char chb[128];
    chan_name(chb, sizeof chb, "share-b");
    struct zimp_config c = { .slots = 8, .slot_size = 1024, .heap = a.heap };
    ASSERT_OK(zimp_create(chb, &c));
    zimp_receiver *ra, *rb;
    ASSERT_OK(zimp_receiver_open(a.chan, &ra));
    ASSERT_OK(zimp_receiver_open(chb, &rb));
    struct tpipe ready, go;
    tpipe_open(&ready);
    tpipe_open(&go);
    struct idle_arg ia = { chb, 4, len, &ready, &go };
    pid_t kid = spawn(idle_sender_role, &ia);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));

    /* the heap holds B's four messages, unread: nothing to take back */
    zimp_sender *sa;
    ASSERT_OK(zimp_sender_open(a.chan, &sa));
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(a.heap, &h));
    void *buf;
    struct zimp_ref refs[4];
    ASSERT_EQ(zimp_loan(sa, len, &buf, 0), -ENOMEM);
    ASSERT_EQ(zimp_heap_alloc(h, len, &buf, &refs[0]), -ENOMEM);

    /* three read and released, the fourth held in place: A's sender gets three */
    for (uint64_t i = 0; i < 3; i++)
        expect_big(rb, 1, len, 1000 + i);
    const void *held;
    size_t n;
    ASSERT_OK(zimp_read(rb, &held, &n, T_LONG));
    ASSERT_EQ(n, len);
    for (uint64_t i = 0; i < 3; i++) {
        int rc = send_big(sa, 1, len, 2000 + i, 0);
        ASSERT_MSG(rc == 0, "loan %llu beside an idle channel's released blocks: %s %s",
                   (unsigned long long)i, err_text(rc), zimp_last_detail());
    }
    ASSERT_EQ(zimp_loan(sa, len, &buf, 0), -EAGAIN);      /* A's own three are unread */
    ASSERT_EQ(zimp_heap_alloc(h, len, &buf, &refs[0]), -ENOMEM);
    ASSERT_EQ(pattern_mismatch(held, n, 1003), n);          /* nobody wrote it meanwhile */
    ASSERT_OK(zimp_release(rb));

    /* released: the direct allocator takes it, then A's three once A's receiver read them */
    ASSERT_OK(zimp_heap_alloc(h, len, &buf, &refs[0]));
    for (uint64_t i = 0; i < 3; i++)
        expect_big(ra, (int)(i & 1), len, 2000 + i);
    for (int i = 1; i < 4; i++) {
        int rc = zimp_heap_alloc(h, len, &buf, &refs[i]);
        ASSERT_MSG(rc == 0, "direct allocation %d beside released messages: %s %s", i, err_text(rc),
                   zimp_last_detail());
        memset(buf, 0xa5, len);
    }
    ASSERT_EQ(heap_now(&a).blocks, 4);
    for (int i = 0; i < 4; i++)
        ASSERT_OK(zimp_heap_release(h, &refs[i]));
    signal_byte(&go);
    ASSERT_CHILD_OK(kid, tmo(10000));
    zimp_heap_close(h);
    zimp_sender_close(sa);
    zimp_receiver_close(ra);
    zimp_receiver_close(rb);
    tpipe_close(&ready);
    tpipe_close(&go);
    ASSERT_OK(zimp_unlink(chb));
    big_done(&a);
    return 0;
}

/*
 * The same through a channel removed while its members still use it (its
 * file is found under its retired name), with a receiver that dies while it
 * reads a message in place: its messages are taken back only once it is dead.
 */
TEST_IMPL(bigmsg_shared_heap_retired)
{
    struct big b;
    const size_t len = 1 << 20;
    big_make(&b, "shret", 2 * len, 4, 1024, 4, 0);
    struct tpipe ready, go;
    tpipe_open(&ready);
    tpipe_open(&go);
    struct rx_arg ra = { &b, 0, len, &ready, 1 };
    pid_t holder = spawn(hold_and_die, &ra);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(b.chan, &r));
    struct idle_arg ia = { b.chan, 2, len, &ready, &go };
    pid_t sender = spawn(idle_sender_role, &ia);
    ASSERT_OK(wait_bytes(&ready, 2, tmo(10000)));   /* sent, and the holder reads the first */
    expect_big(r, 1, len, 1000);
    expect_big(r, 0, len, 1001);
    ASSERT_OK(zimp_unlink(b.chan));                  /* members left: the file is retired */

    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(b.heap, &h));
    void *buf;
    struct zimp_ref refs[2];
    ASSERT_EQ(zimp_heap_alloc(h, len, &buf, &refs[0]), -ENOMEM);   /* the holder is below both */
    kill(holder, SIGKILL);
    ASSERT_EQ(wait_child(holder, tmo(10000)), 128 + SIGKILL);
    for (int i = 0; i < 2; i++) {
        int rc = zimp_heap_alloc(h, len, &buf, &refs[i]);
        ASSERT_MSG(rc == 0, "allocation %d after the reader died: %s %s", i, err_text(rc), zimp_last_detail());
    }
    signal_byte(&go);
    ASSERT_CHILD_OK(sender, tmo(10000));
    zimp_receiver_close(r);                          /* the last member: the record goes */
    ASSERT_EQ(heap_now(&b).blocks, 2);
    for (int i = 0; i < 2; i++)
        ASSERT_OK(zimp_heap_release(h, &refs[i]));
    zimp_heap_close(h);
    struct zimp_heap_stats st = heap_now(&b);
    ASSERT_MSG(st.blocks == 0 && st.members == 0, "%llu blocks, %u members left",
               (unsigned long long)st.blocks, (unsigned)st.members);
    tpipe_close(&ready);
    tpipe_close(&go);
    ASSERT_OK(zimp_heap_unlink(b.heap));
    return 0;
}

/*
 * A channel whose file went without zimp_unlink (removed by hand while its
 * members use it): a full heap cannot look at it, and says so; the blocks
 * go back when its last member closes.
 */
TEST_IMPL(bigmsg_shared_heap_lost_channel)
{
    struct big b;
    const size_t len = 1 << 20;
    big_make(&b, "lost", 2 * len, 4, 1024, 2, 0);
    zimp_receiver *r;
    zimp_sender *s;
    ASSERT_OK(zimp_receiver_open(b.chan, &r));
    ASSERT_OK(zimp_sender_open(b.chan, &s));
    ASSERT_OK(send_big(s, 1, len, 1, T_LONG));
    expect_big(r, 1, len, 1);
    char path[512];
    snprintf(path, sizeof path, "/dev/shm/zimp.%s", b.chan);
    ASSERT_OK(unlink(path));
    zimp_heap *h;
    ASSERT_OK(zimp_heap_open(b.heap, &h));
    void *buf;
    struct zimp_ref ref;
    ASSERT_EQ(zimp_heap_alloc(h, 2 * len, &buf, &ref), -ENOMEM);
    ASSERT_MSG(strstr(zimp_last_detail(), "could not be looked at"), "detail: %s", zimp_last_detail());
    zimp_sender_close(s);
    zimp_receiver_close(r);                   /* the last member: the channel's blocks go */
    ASSERT_OK(zimp_heap_alloc(h, 2 * len, &buf, &ref));
    ASSERT_OK(zimp_heap_release(h, &ref));
    zimp_heap_close(h);
    ASSERT_OK(zimp_heap_unlink(b.heap));
    return 0;
}
