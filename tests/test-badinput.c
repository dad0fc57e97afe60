/*
 * Bad input to every public function: NULL handles and pointers, zero and
 * huge sizes, calls out of order. Nothing may crash; each case returns the
 * value listed in docs/errors.md.
 */
#include "task.h"

/* NULL where a pointer is required: any negative errno, -EINVAL expected */
#define ASSERT_REFUSED(call)                                                  \
    do {                                                                      \
        long long rc_ = (long long)(call);                                    \
        ASSERT_MSG(rc_ < 0, "%s returned %lld", #call, rc_);                  \
        if (rc_ != -EINVAL)                                                   \
            fprintf(stderr, "note: %s returned %s, not -EINVAL\n", #call,     \
                    err_text(rc_));                                           \
    } while (0)

static void open_pair(const char *name, zimp_sender **s, zimp_receiver **r)
{
    struct zimp_config cfg = { .slots = 4, .slot_size = 64, .max_receivers = 4 };
    ASSERT_OK(zimp_create(name, &cfg));
    ASSERT_OK(zimp_sender_open(name, s));
    ASSERT_OK(zimp_receiver_open(name, r));
}

TEST_IMPL(bad_input_lifecycle)
{
    char name[128];
    chan_name(name, sizeof name, "bl");
    zimp_sender *s = NULL;
    zimp_receiver *r = NULL;
    ASSERT_REFUSED(zimp_create(NULL, NULL));
    ASSERT_REFUSED(zimp_unlink(NULL));
    ASSERT_REFUSED(zimp_sender_open(NULL, &s));
    ASSERT_REFUSED(zimp_receiver_open(NULL, &r));
    ASSERT_REFUSED(zimp_reap("a/b"));
    struct zimp_config zero;
    memset(&zero, 0, sizeof zero);
    ASSERT_OK(zimp_create(name, &zero));           /* all defaults, mode 0600 */
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.mode & 07777, 0600);
    ASSERT_REFUSED(zimp_sender_open(name, NULL));
    ASSERT_REFUSED(zimp_receiver_open(name, NULL));
    ASSERT_EQ(info.senders, 0);
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.senders, 0);                    /* refused opens left no member */
    ASSERT_EQ(info.receivers, 0);

    zimp_sender_close(NULL);
    zimp_receiver_close(NULL);
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_receiver_open(name, &r));
    zimp_sender_close(s);                          /* once: a second close is undefined, like free() */
    zimp_receiver_close(r);
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.senders, 0);
    ASSERT_EQ(info.receivers, 0);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

TEST_IMPL(bad_input_send)
{
    char name[128];
    chan_name(name, sizeof name, "bs");
    zimp_sender *s;
    zimp_receiver *r;
    open_pair(name, &s, &r);
    uint8_t data[128] = { 1, 2, 3 };
    void *lb = NULL, *lb2 = NULL;

    ASSERT_REFUSED(zimp_loan(NULL, 8, &lb, 0));
    ASSERT_REFUSED(zimp_loan(s, 8, NULL, 0));
    ASSERT_EQ(zimp_loan(s, 65, &lb, 0), -EMSGSIZE);
    ASSERT_EQ(zimp_loan(s, SIZE_MAX, &lb, 0), -EMSGSIZE);
    ASSERT_REFUSED(zimp_publish(NULL, data, 8));
    ASSERT_REFUSED(zimp_publish(s, data, 8));      /* no loan */
    ASSERT_REFUSED(zimp_send(NULL, data, 8, 0));
    ASSERT_REFUSED(zimp_send(s, NULL, 8, 0));
    ASSERT_EQ(zimp_send(s, data, 65, 0), -EMSGSIZE);
    ASSERT_EQ(zimp_send(s, data, SIZE_MAX, 0), -EMSGSIZE);
    ASSERT_EQ(zimp_recv(r, data, sizeof data, 0), -EAGAIN);   /* nothing was queued */

    /* one loan at a time */
    ASSERT_OK(zimp_loan(s, 16, &lb, 0));
    ASSERT_EQ(zimp_loan(s, 16, &lb2, 0), -EBUSY);
    ASSERT_EQ(zimp_send(s, data, 16, 0), -EBUSY);
    /* publish longer than the loan, or of another buffer: refused, loan kept */
    ASSERT_REFUSED(zimp_publish(s, lb, 17));
    ASSERT_REFUSED(zimp_publish(s, lb, SIZE_MAX));
    ASSERT_REFUSED(zimp_publish(s, data, 16));
    ASSERT_REFUSED(zimp_publish(s, NULL, 16));
    msg_fill(lb, 16, 0, 0);
    ASSERT_OK(zimp_publish(s, lb, 16));
    ASSERT_REFUSED(zimp_publish(s, lb, 16));       /* already published */
    /* publish shorter than the loan is fine */
    ASSERT_OK(zimp_loan(s, 64, &lb, 0));
    msg_fill(lb, 20, 0, 1);
    ASSERT_OK(zimp_publish(s, lb, 20));
    uint8_t buf[64];
    uint32_t snd;
    uint64_t seq;
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, NS_PER_S), 16);
    ASSERT(msg_check(buf, 16, &snd, &seq) && seq == 0);
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, NS_PER_S), 20);
    ASSERT(msg_check(buf, 20, &snd, &seq) && seq == 1);
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 0), -EAGAIN);

    ASSERT_REFUSED(zimp_sender_set_spin(NULL, 0));
    ASSERT_OK(zimp_sender_set_spin(s, 0));
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

TEST_IMPL(bad_input_recv)
{
    char name[128];
    chan_name(name, sizeof name, "br");
    zimp_sender *s;
    zimp_receiver *r;
    open_pair(name, &s, &r);
    uint8_t buf[64];
    const void *rb = NULL;
    size_t len = 0;
    msg_fill(buf, 32, 0, 0);
    ASSERT_OK(zimp_send(s, buf, 32, 0));
    msg_fill(buf, 32, 0, 1);
    ASSERT_OK(zimp_send(s, buf, 32, 0));

    ASSERT_REFUSED(zimp_recv(NULL, buf, sizeof buf, 0));
    ASSERT_REFUSED(zimp_recv(r, NULL, sizeof buf, 0));
    ASSERT_REFUSED(zimp_read(NULL, &rb, &len, 0));
    ASSERT_REFUSED(zimp_read(r, NULL, &len, 0));
    ASSERT_REFUSED(zimp_read(r, &rb, NULL, 0));
    ASSERT_REFUSED(zimp_release(NULL));
    ASSERT_REFUSED(zimp_release(r));               /* nothing borrowed */

    /* none of the refused calls consumed message 0 */
    ASSERT_OK(zimp_read(r, &rb, &len, NS_PER_S));
    uint32_t snd;
    uint64_t seq;
    ASSERT(msg_check(rb, len, &snd, &seq) && seq == 0);
    const void *rb2 = NULL;
    ASSERT_EQ(zimp_read(r, &rb2, &len, 0), -EBUSY);
    ASSERT(msg_check(rb, 32, &snd, &seq) && seq == 0);   /* borrow still intact */
    ASSERT_OK(zimp_release(r));
    ASSERT_REFUSED(zimp_release(r));               /* released twice */
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, NS_PER_S), 32);
    ASSERT(msg_check(buf, 32, &snd, &seq) && seq == 1);

    /* No buffer and no room: an empty message only (UBSan: no memcpy of NULL) */
    ASSERT_OK(zimp_send(s, NULL, 0, 0));
    ASSERT_OK(zimp_send(s, "abc", 3, 0));
    ASSERT_EQ(zimp_recv(r, NULL, 0, NS_PER_S), 0);
    ASSERT_EQ(zimp_recv(r, NULL, 0, NS_PER_S), -EMSGSIZE);
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, NS_PER_S), 3);   /* stayed queued */

    ASSERT_REFUSED(zimp_receiver_fd(NULL));
    ASSERT(zimp_receiver_fd(r) >= 0);
    ASSERT_REFUSED(zimp_receiver_index(NULL));
    ASSERT_REFUSED(zimp_receiver_set_spin(NULL, 0));
    ASSERT_OK(zimp_receiver_set_spin(r, 0));
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

static int noop_cb(const char *n, void *a) { (void)n; (void)a; return 0; }

TEST_IMPL(bad_input_inspect)
{
    char name[128];
    chan_name(name, sizeof name, "bi");
    zimp_sender *s;
    zimp_receiver *r;
    open_pair(name, &s, &r);
    unsigned idx[4];
    struct zimp_info info;
    ASSERT_REFUSED(zimp_stalled(NULL, idx, 4));
    ASSERT_REFUSED(zimp_stalled(s, NULL, 4));
    ASSERT_EQ(zimp_stalled(s, NULL, 0), 0);
    ASSERT_EQ(zimp_stalled(s, idx, 4), 0);
    ASSERT_REFUSED(zimp_evict(NULL, 0));
    ASSERT_REFUSED(zimp_evict(s, 4));              /* max_receivers is 4 */
    ASSERT_REFUSED(zimp_evict(s, 1u << 30));
    ASSERT_REFUSED(zimp_evict(s, UINT32_MAX));
    ASSERT_REFUSED(zimp_info(NULL, &info));
    ASSERT_REFUSED(zimp_info(name, NULL));
    ASSERT_REFUSED(zimp_list(NULL, NULL));
    ASSERT(zimp_list(noop_cb, NULL) >= 0);
    /* the receiver was not disturbed */
    ASSERT_OK(zimp_send(s, "x", 1, 0));
    char c;
    ASSERT_EQ(zimp_recv(r, &c, 1, NS_PER_S), 1);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}
