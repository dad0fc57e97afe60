/* Delivery: ordering, fan-out, fan-in, ring wrap-around, sizes. */
#include "task.h"

#define MAX_TX 8

struct rx_args {
    const char *name;
    int mode;               /* MODE_COPY, MODE_ZC, or 2: alternate */
    long expect;            /* messages to receive in total */
    uint32_t nsenders;
    size_t cap;
    struct tpipe *ready;    /* one byte once open */
    uint64_t *hash_out;     /* shared: hash of the (sender, seq) order */
    int expect_epipe;       /* then -EPIPE once every sender left */
};

static void rx_role(void *p)
{
    struct rx_args *a = p;
    zimp_receiver *r = NULL;
    int rc = zimp_receiver_open(a->name, &r);
    ASSERT_MSG(rc == 0, "receiver_open: %s (%s)", err_text(rc), zimp_last_detail());
    signal_byte(a->ready);
    uint64_t next[MAX_TX] = { 0 };
    uint64_t h = HASH_INIT;
    uint8_t *buf = malloc(a->cap);
    ASSERT(buf);
    for (long i = 0; i < a->expect; i++) {
        int mode = a->mode == 2 ? (int)(i & 1) : a->mode;
        ssize_t n = recv_msg(r, mode, buf, a->cap, T_LONG);
        ASSERT_MSG(n >= 0, "message %ld of %ld: %s", i, a->expect, err_text(n));
        uint32_t snd;
        uint64_t seq;
        ASSERT_MSG(msg_check(buf, (size_t)n, &snd, &seq), "message %ld corrupt (len %zd)", i, n);
        ASSERT_MSG(snd < a->nsenders, "message %ld: sender %u", i, snd);
        ASSERT_MSG(seq == next[snd], "sender %u: got seq %llu, expected %llu", snd,
                   (unsigned long long)seq, (unsigned long long)next[snd]);
        next[snd]++;
        h = hash_step(h, ((uint64_t)snd << 48) | seq);
    }
    if (a->expect_epipe) {
        ssize_t n = zimp_recv(r, buf, a->cap, 5 * NS_PER_S);
        ASSERT_EQ(n, -EPIPE);
    }
    if (a->hash_out)
        *a->hash_out = h;
    free(buf);
    zimp_receiver_close(r);
}

struct tx_args {
    const char *name;
    int mode;               /* MODE_COPY, MODE_ZC, or 2: alternate */
    uint32_t id;
    long count;
    size_t minlen, maxlen;
    struct tpipe *ready, *go;
};

static void tx_role(void *p)
{
    struct tx_args *a = p;
    zimp_sender *s = NULL;
    int rc = zimp_sender_open(a->name, &s);
    ASSERT_MSG(rc == 0, "sender_open: %s (%s)", err_text(rc), zimp_last_detail());
    if (a->ready)
        signal_byte(a->ready);
    if (a->go)
        ASSERT_OK(wait_bytes(a->go, 1, tmo(30000)));
    size_t span = a->maxlen - a->minlen + 1;
    for (long i = 0; i < a->count; i++) {
        int mode = a->mode == 2 ? (int)(i & 1) : a->mode;
        size_t len = a->minlen + (size_t)((uint64_t)i * 2654435761u % span);
        rc = send_msg(s, mode, a->id, (uint64_t)i, len, T_LONG);
        ASSERT_MSG(rc == 0, "send %ld: %s", i, err_text(rc));
    }
    zimp_sender_close(s);
}

/* n receivers (modes[i]) and one sender (txmode) of count messages */
static void fan_out(const char *tag, uint32_t slots, uint32_t slot_size, int nrx,
                    const int *modes, int txmode, long count, size_t minlen)
{
    char name[128];
    chan_name(name, sizeof name, tag);
    create_chan(name, slots, slot_size, 0, (uint32_t)(nrx > 64 ? nrx : 0));
    struct tpipe ready;
    tpipe_open(&ready);
    uint64_t *hashes = shared_alloc(sizeof(uint64_t) * (size_t)nrx);
    pid_t *pids = calloc((size_t)nrx, sizeof(pid_t));
    struct rx_args ra = { name, 0, count, 1, slot_size, &ready, NULL, 1 };
    for (int i = 0; i < nrx; i++) {
        ra.mode = modes[i];
        ra.hash_out = &hashes[i];
        pids[i] = spawn(rx_role, &ra);
    }
    ASSERT_MSG(wait_bytes(&ready, nrx, tmo(30000)) == 0, "receivers did not open");
    struct tx_args ta = { name, txmode, 0, count, minlen, slot_size, NULL, NULL };
    pid_t tx = spawn(tx_role, &ta);
    long bound = tmo(100000);                 /* a hang, not a slow machine */
    ASSERT_CHILD_OK(tx, bound);
    for (int i = 0; i < nrx; i++)
        ASSERT_CHILD_OK(pids[i], bound);
    uint64_t h = HASH_INIT;
    for (long i = 0; i < count; i++)
        h = hash_step(h, (uint64_t)i);
    for (int i = 0; i < nrx; i++)
        ASSERT_EQ(hashes[i], h);
    ASSERT_OK(zimp_unlink(name));
    free(pids);
    shared_free(hashes, sizeof(uint64_t) * (size_t)nrx);
    tpipe_close(&ready);
}

TEST_IMPL(one_to_one_copy)
{
    int modes[1] = { MODE_COPY };
    fan_out("c", 64, 1024, 1, modes, MODE_COPY, scaled(50000), sizeof(struct tmsg));
    return 0;
}

TEST_IMPL(one_to_one_zerocopy)
{
    int modes[1] = { MODE_ZC };
    fan_out("z", 64, 1024, 1, modes, MODE_ZC, scaled(50000), sizeof(struct tmsg));
    return 0;
}

TEST_IMPL(one_to_one_mixed)
{
    /* sender alternates send/loan; one copying and one zero-copy receiver */
    int modes[3] = { MODE_COPY, MODE_ZC, 2 };
    fan_out("m", 32, 512, 3, modes, 2, scaled(30000), sizeof(struct tmsg));
    return 0;
}

TEST_IMPL(one_to_many_64)
{
    int modes[64];
    for (int i = 0; i < 64; i++)
        modes[i] = i % 3 == 0 ? MODE_ZC : i % 3 == 1 ? MODE_COPY : 2;
    fan_out("f", 256, 256, 64, modes, 2, scaled(3000), sizeof(struct tmsg));
    return 0;
}

TEST_IMPL(ring_wrap_millions)
{
    /* 8-slot ring wraps 125k times. (An 8-slot ring hands over 8 messages per
     * time slice when the CPUs are oversubscribed: about 17k messages/s with
     * three CPU hogs on 2 cores, so the count stays well inside the bound.) */
    int modes[1] = { MODE_COPY };
    long n = env_long("ZIMP_WRAP_MESSAGES", scaled(1000000));
    fan_out("w", 8, 64, 1, modes, MODE_COPY, n, sizeof(struct tmsg));
    return 0;
}

TEST_IMPL(many_to_many_4x8)
{
    enum { NTX = 4, NRX = 8 };
    char name[128];
    chan_name(name, sizeof name, "mm");
    create_chan(name, 64, 256, NTX, NRX);
    long per = scaled(5000);
    struct tpipe ready, go;
    tpipe_open(&ready);
    tpipe_open(&go);
    uint64_t *hashes = shared_alloc(sizeof(uint64_t) * NRX);
    pid_t rx[NRX], tx[NTX];
    struct rx_args ra = { name, 0, per * NTX, NTX, 256, &ready, NULL, 1 };
    for (int i = 0; i < NRX; i++) {
        ra.mode = i % 3 == 2 ? 2 : i % 2;
        ra.hash_out = &hashes[i];
        rx[i] = spawn(rx_role, &ra);
    }
    ASSERT_OK(wait_bytes(&ready, NRX, tmo(30000)));
    /* every sender opens before any starts: none leaves before all joined */
    for (int i = 0; i < NTX; i++) {
        struct tx_args ta = { name, i % 3 == 2 ? 2 : i % 2, (uint32_t)i, per,
                              sizeof(struct tmsg), 256, &ready, &go };
        tx[i] = spawn(tx_role, &ta);
    }
    ASSERT_OK(wait_bytes(&ready, NTX, tmo(30000)));
    char gobytes[NTX] = { 0 };
    put_bytes(go.w, gobytes, NTX);
    for (int i = 0; i < NTX; i++)
        ASSERT_CHILD_OK(tx[i], tmo(60000));
    for (int i = 0; i < NRX; i++)
        ASSERT_CHILD_OK(rx[i], tmo(60000));
    /* one total order: every receiver saw the same interleaving */
    for (int i = 1; i < NRX; i++)
        ASSERT_MSG(hashes[i] == hashes[0], "receiver %d order differs from receiver 0", i);
    ASSERT_OK(zimp_unlink(name));
    shared_free(hashes, sizeof(uint64_t) * NRX);
    tpipe_close(&ready);
    tpipe_close(&go);
    return 0;
}

TEST_IMPL(sizes_zero_and_max)
{
    char name[128];
    chan_name(name, sizeof name, "sz");
    create_chan(name, 8, 256, 0, 0);
    zimp_sender *s;
    zimp_receiver *r;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_receiver_open(name, &r));
    uint8_t out[300], in[300];
    for (int i = 0; i < 300; i++)
        out[i] = (uint8_t)(i * 7 + 3);

    /* zero length, copying and zero-copy both ways */
    ASSERT_OK(zimp_send(s, out, 0, 0));
    void *lb = NULL;
    ASSERT_OK(zimp_loan(s, 0, &lb, 0));
    ASSERT_OK(zimp_publish(s, lb, 0));
    memset(in, 0xEE, sizeof in);
    ASSERT_EQ(zimp_recv(r, in, sizeof in, NS_PER_S), 0);
    ASSERT_EQ(in[0], 0xEE);
    const void *rb = NULL;
    size_t len = 99;
    ASSERT_OK(zimp_read(r, &rb, &len, NS_PER_S));
    ASSERT_EQ(len, 0);
    ASSERT_OK(zimp_release(r));

    /* exactly slot_size */
    ASSERT_OK(zimp_send(s, out, 256, 0));
    ASSERT_OK(zimp_loan(s, 256, &lb, 0));
    ASSERT(lb != NULL);
    memcpy(lb, out + 1, 256);
    ASSERT_OK(zimp_publish(s, lb, 256));
    ASSERT_EQ(zimp_recv(r, in, 256, NS_PER_S), 256);
    ASSERT_OK(memcmp(in, out, 256));
    ASSERT_OK(zimp_read(r, &rb, &len, NS_PER_S));
    ASSERT_EQ(len, 256);
    ASSERT_OK(memcmp(rb, out + 1, 256));
    ASSERT_OK(zimp_release(r));

    /* slot_size + 1 is refused and nothing is queued */
    ASSERT_EQ(zimp_send(s, out, 257, 0), -EMSGSIZE);
    ASSERT_EQ(zimp_loan(s, 257, &lb, 0), -EMSGSIZE);
    ASSERT_EQ(zimp_send(s, out, SIZE_MAX / 2, 0), -EMSGSIZE);
    ASSERT_EQ(zimp_recv(r, in, sizeof in, 0), -EAGAIN);

    /* and the channel still works */
    ASSERT_OK(zimp_send(s, out, 17, 0));
    ASSERT_EQ(zimp_recv(r, in, sizeof in, NS_PER_S), 17);
    ASSERT_OK(memcmp(in, out, 17));

    zimp_receiver_close(r);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/*
 * Messages of at most 48 bytes travel in the slot's header line, larger ones
 * in its data area. Every length around the boundary, loaned at that length
 * or at the slot size and published short, arrives intact by both receive
 * paths, on plain, checksummed and zero-on-release channels; a zero-copy
 * read of a small message is 16-byte aligned, of a larger one line-aligned.
 */
TEST_IMPL(inline_boundary)
{
    static const uint32_t flags[] = { 0, ZIMP_CHECKSUM, ZIMP_ZERO_ON_RELEASE };
    static const size_t lens[] = { 0, 1, 15, 16, 47, 48, 49, 63, 64, 65, 200 };
    const size_t nl = sizeof lens / sizeof lens[0];
    for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
        char name[128];
        chan_name(name, sizeof name, "inl");
        struct zimp_config cfg = { .slots = 4, .slot_size = 256, .flags = flags[f] };
        ASSERT_OK(zimp_create(name, &cfg));
        zimp_sender *s;
        zimp_receiver *r;
        ASSERT_OK(zimp_sender_open(name, &s));
        ASSERT_OK(zimp_receiver_open(name, &r));
        for (size_t i = 0; i < 4 * nl; i++) {
            size_t len = lens[i % nl];
            int how = (int)(i / nl);          /* 0: send, 1: loan len, 2: loan 256, 3: loan len, recv */
            uint8_t out[256], in[256];
            for (size_t k = 0; k < len; k++)
                out[k] = (uint8_t)(i * 13 + k * 7 + f);
            if (how == 0) {
                ASSERT_OK(zimp_send(s, out, len, NS_PER_S));
            } else {
                void *lb;
                ASSERT_OK(zimp_loan(s, how == 2 ? 256 : len, &lb, NS_PER_S));
                ASSERT_MSG(((uintptr_t)lb & 15) == 0, "loan of %zu bytes at %p", len, lb);
                if (how == 2)
                    memset(lb, 0xA5, 256);    /* bytes past len must not leak into the message */
                memcpy(lb, out, len);
                ASSERT_OK(zimp_publish(s, lb, len));
            }
            if (how == 3 || how == 0) {
                memset(in, 0xEE, sizeof in);
                ASSERT_EQ(zimp_recv(r, in, sizeof in, NS_PER_S), (ssize_t)len);
                ASSERT_MSG(memcmp(in, out, len) == 0, "recv of %zu bytes (flags %u)", len, flags[f]);
            } else {
                const void *rb;
                size_t got;
                ASSERT_OK(zimp_read(r, &rb, &got, NS_PER_S));
                ASSERT_EQ(got, len);
                ASSERT_MSG(memcmp(rb, out, len) == 0, "read of %zu bytes, loan %d (flags %u)",
                           len, how, flags[f]);
                uintptr_t align = len > 48 || (flags[f] & ZIMP_ZERO_ON_RELEASE) ? 64 : 16;
                ASSERT_MSG(len == 0 || ((uintptr_t)rb & (align - 1)) == 0, "read of %zu bytes at %p",
                           len, rb);
                ASSERT_OK(zimp_release(r));
            }
        }
        zimp_receiver_close(r);
        zimp_sender_close(s);
        ASSERT_OK(zimp_unlink(name));
    }
    return 0;
}

TEST_IMPL(recv_buffer_too_small)
{
    char name[128];
    chan_name(name, sizeof name, "small");
    create_chan(name, 8, 256, 0, 0);
    zimp_sender *s;
    zimp_receiver *r;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_receiver_open(name, &r));
    uint8_t a[100], b[10], in[200];
    msg_fill(a, sizeof a, 1, 1);
    msg_fill(b, sizeof b, 2, 2);
    ASSERT_OK(zimp_send(s, a, sizeof a, 0));
    ASSERT_OK(zimp_send(s, b, sizeof b, 0));
    ASSERT_EQ(zimp_recv(r, in, 50, NS_PER_S), -EMSGSIZE);
    ASSERT_EQ(zimp_recv(r, in, 99, NS_PER_S), -EMSGSIZE);
    ASSERT_EQ(zimp_recv(r, in, 0, NS_PER_S), -EMSGSIZE);
    ASSERT_EQ(zimp_recv(r, in, 100, NS_PER_S), 100);   /* still queued */
    ASSERT_OK(memcmp(in, a, 100));
    ASSERT_EQ(zimp_recv(r, in, 10, NS_PER_S), 10);
    ASSERT_OK(memcmp(in, b, 10));
    ASSERT_EQ(zimp_recv(r, in, sizeof in, 0), -EAGAIN);
    zimp_receiver_close(r);
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* Child: after delay_ms opens a sender and sends msgs (sender id 9). */
struct late_tx { const char *name; long delay_ms; int msgs; int linger_ms; };

static void late_tx_role(void *p)
{
    struct late_tx *a = p;
    sleep_ms(a->delay_ms);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    for (int i = 0; i < a->msgs; i++)
        ASSERT_OK(send_msg(s, MODE_COPY, 9, (uint64_t)i, 32, T_LONG));
    sleep_ms(a->linger_ms);
    zimp_sender_close(s);
}

static void expect_timeout(const char *what, int64_t t0, int64_t timeout)
{
    int64_t el = now_ns() - t0;
    ASSERT_MSG(el >= timeout - timeout / 20, "%s returned after %lld ns, before its %lld ns timeout",
               what, (long long)el, (long long)timeout);
    ASSERT_MSG(el < 5 * NS_PER_S + timeout, "%s took %lld ns", what, (long long)el);
}

TEST_IMPL(timeout_modes_recv)
{
    char name[128];
    chan_name(name, sizeof name, "tr");
    create_chan(name, 8, 256, 0, 0);
    zimp_sender *keep;                       /* keeps the channel from ending */
    zimp_receiver *r;
    ASSERT_OK(zimp_sender_open(name, &keep));
    ASSERT_OK(zimp_receiver_open(name, &r));
    uint8_t buf[256];
    const void *rb;
    size_t len;

    int64_t t0 = now_ns();
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);
    ASSERT_EQ(zimp_read(r, &rb, &len, 0), -EAGAIN);
    ASSERT_MSG(now_ns() - t0 < NS_PER_S, "timeout 0 blocked");

    int64_t to = 200 * NS_PER_MS;
    t0 = now_ns();
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, to), -ETIMEDOUT);
    expect_timeout("zimp_recv", t0, to);
    t0 = now_ns();
    ASSERT_EQ(zimp_read(r, &rb, &len, to), -ETIMEDOUT);
    expect_timeout("zimp_read", t0, to);
    to = 1;                                  /* 1 ns: expires at once */
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, to), -ETIMEDOUT);

    /* negative and huge timeouts block until a later sender's message */
    const int64_t forever[] = { -1, INT64_MIN, INT64_MAX, -1 };
    for (int k = 0; k < 4; k++) {
        struct late_tx lt = { name, 300, 1, 0 };
        t0 = now_ns();
        pid_t pid = spawn(late_tx_role, &lt);
        ssize_t n;
        if (k < 3) {
            n = zimp_recv(r, buf, sizeof buf, forever[k]);
        } else {
            n = zimp_read(r, &rb, &len, forever[k]);
            if (n == 0) {
                memcpy(buf, rb, len);
                n = (ssize_t)len;
                ASSERT_OK(zimp_release(r));
            }
        }
        ASSERT_MSG(n == 32, "timeout %lld: got %zd (%s)", (long long)forever[k], n, err_text(n));
        uint32_t snd;
        uint64_t seq;
        ASSERT(msg_check(buf, 32, &snd, &seq) && snd == 9 && seq == 0);
        ASSERT_MSG(now_ns() - t0 >= 200 * NS_PER_MS, "returned before the message was sent");
        ASSERT_CHILD_OK(pid, tmo(10000));
    }
    zimp_receiver_close(r);
    zimp_sender_close(keep);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

struct slow_rx { const char *name; struct tpipe *ready, *go; int expect; };

static void slow_rx_role(void *p)
{
    struct slow_rx *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    ASSERT_OK(wait_bytes(a->go, 1, tmo(30000)));
    sleep_ms(300);
    uint8_t buf[256];
    for (int i = 0; i < a->expect; i++) {
        ssize_t n = zimp_recv(r, buf, sizeof buf, T_LONG);
        uint32_t snd;
        uint64_t seq;
        ASSERT_MSG(n > 0, "message %d: %s", i, err_text(n));
        ASSERT(msg_check(buf, (size_t)n, &snd, &seq));
        ASSERT_EQ(seq, i);
    }
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S), -EPIPE);
    zimp_receiver_close(r);
}

TEST_IMPL(timeout_modes_send)
{
    char name[128];
    chan_name(name, sizeof name, "ts");
    create_chan(name, 4, 256, 0, 0);
    struct tpipe ready, go;
    tpipe_open(&ready);
    tpipe_open(&go);
    struct slow_rx a = { name, &ready, &go, 6 };
    pid_t rx = spawn(slow_rx_role, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    for (int i = 0; i < 4; i++)
        ASSERT_OK(send_msg(s, i & 1, 0, (uint64_t)i, 40, 0));

    /* ring full: 0 -> -EAGAIN at once, positive -> -ETIMEDOUT after it */
    int64_t t0 = now_ns();
    ASSERT_EQ(send_msg(s, MODE_COPY, 0, 4, 40, 0), -EAGAIN);
    void *lb;
    ASSERT_EQ(zimp_loan(s, 40, &lb, 0), -EAGAIN);
    ASSERT_MSG(now_ns() - t0 < NS_PER_S, "timeout 0 blocked");
    int64_t to = 200 * NS_PER_MS;
    t0 = now_ns();
    ASSERT_EQ(send_msg(s, MODE_COPY, 0, 4, 40, to), -ETIMEDOUT);
    expect_timeout("zimp_send", t0, to);
    t0 = now_ns();
    ASSERT_EQ(zimp_loan(s, 40, &lb, to), -ETIMEDOUT);
    expect_timeout("zimp_loan", t0, to);

    /* negative: blocks until the receiver makes room */
    signal_byte(&go);
    t0 = now_ns();
    ASSERT_OK(send_msg(s, MODE_COPY, 0, 4, 40, -1));
    ASSERT_MSG(now_ns() - t0 >= 200 * NS_PER_MS, "send did not wait for room");
    ASSERT_OK(send_msg(s, MODE_ZC, 0, 5, 40, INT64_MAX));
    zimp_sender_close(s);
    ASSERT_CHILD_OK(rx, tmo(20000));
    ASSERT_OK(zimp_unlink(name));
    tpipe_close(&ready);
    tpipe_close(&go);
    return 0;
}

TEST_IMPL(no_receiver_never_blocks)
{
    char name[128];
    chan_name(name, sizeof name, "norx");
    create_chan(name, 4, 64, 0, 0);
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(name, &s));
    for (int i = 0; i < 40; i++)
        ASSERT_OK(send_msg(s, i & 1, 0, (uint64_t)i, 32, 0));
    zimp_sender_close(s);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

/* A loan given back is skipped at once: the next message arrives without a wait. */
TEST_IMPL(unloan_skips_at_once)
{
    char name[128];
    chan_name(name, sizeof name, "u");
    create_chan(name, 4, 256, 2, 2);
    zimp_receiver *r1, *r2;
    zimp_sender *s;
    ASSERT_OK(zimp_receiver_open(name, &r1));
    ASSERT_OK(zimp_receiver_open(name, &r2));
    ASSERT_OK(zimp_sender_open(name, &s));
    char buf[256];
    ASSERT_EQ(zimp_unloan(s, buf), -EINVAL);                /* no loan */
    for (int i = 0; i < 11; i++) {                           /* wraps the 4-slot ring */
        void *slot;
        size_t len = i % 2 ? 200 : 20;                       /* in the data area, and inline */
        ASSERT_OK(zimp_loan(s, len, &slot, NS_PER_S));
        memset(slot, 0xee, len);
        ASSERT_EQ(zimp_unloan(s, buf), -EINVAL);             /* not the loan */
        ASSERT_OK(zimp_unloan(s, slot));
        ASSERT_EQ(zimp_publish(s, slot, len), -EINVAL);      /* given back */
        ASSERT_EQ(zimp_unloan(s, slot), -EINVAL);
        ASSERT_OK(send_msg(s, i % 2 ? MODE_ZC : MODE_COPY, 0, (uint64_t)i, 32, NS_PER_S));
        /* non-blocking: the skipped position must not hold the receivers up */
        expect_msg(r1, 0, (uint64_t)i, 0);
        expect_msg(r2, 0, (uint64_t)i, 0);
    }
    ASSERT_EQ(zimp_recv(r1, buf, sizeof buf, 0), -EAGAIN);
    zimp_sender_close(s);
    zimp_receiver_close(r1);
    zimp_receiver_close(r2);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}
