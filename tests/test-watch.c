/*
 * Supervision: zimp_watch reports joins, clean leaves, deaths, evictions,
 * the last sender's departure, and the name's creation and removal.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "task.h"

struct seen {
    struct zimp_watch_event ev[256];
    bool used[256];                   /* matched by an expect already */
    int n;
};

static const char *what_name(uint32_t w)
{
    static const char *const n[] = { "?", "joined", "left", "died", "evicted", "no-sender", "created", "removed" };
    return w < sizeof n / sizeof *n ? n[w] : "?";
}

/*
 * Waits (through the watch descriptor only) for event `what` (of `role` for
 * member events, pid if non-zero): the first such event not matched yet
 * (one member's events come in order; different members' in any); fails
 * after ms. Returns the event's index in s->ev.
 */
static int expect(zimp_watch *w, int ep, struct seen *s, uint32_t what, uint32_t role, pid_t pid, long ms)
{
    int64_t end = now_ns() + ms * 1000000ll;
    for (;;) {
        for (int i = 0; i < s->n; i++) {
            struct zimp_watch_event *e = &s->ev[i];
            bool member = what <= ZIMP_WATCH_EVICTED;
            if (!s->used[i] && e->what == what && (!member || e->role == role) && (!pid || e->pid == pid)) {
                s->used[i] = true;
                return i;
            }
        }
        int64_t left = end - now_ns();
        if (left <= 0) {
            char got[512] = "";
            for (int i = 0; i < s->n; i++)
                snprintf(got + strlen(got), sizeof got - strlen(got), " %s(%u,%d)", what_name(s->ev[i].what),
                         s->ev[i].role, s->ev[i].pid);
            ASSERT_MSG(0, "no %s event (role %u, pid %d) within %ld ms; all so far:%s", what_name(what), role, (int)pid, ms, got);
        }
        struct epoll_event ev;
        epoll_wait(ep, &ev, 1, (int)(left / 1000000) + 1);
        int n = zimp_watch_read(w, s->ev + s->n, sizeof s->ev / sizeof *s->ev - (size_t)s->n);
        ASSERT(n >= 0 && s->n + n <= (int)(sizeof s->ev / sizeof *s->ev));
        s->n += n;
    }
}

struct closer { const char *name; struct tpipe go; };

static void sender_role(void *arg)
{
    struct closer *a = arg;
    zimp_sender *s;
    char c;
    ASSERT_OK(zimp_sender_open(a->name, &s));
    ASSERT_OK(zimp_send(s, "x", 1, NS_PER_S));
    ASSERT_OK(get_bytes(a->go.r, &c, 1, tmo(10000)));
    zimp_sender_close(s);            /* a clean close */
}

/* Opens and closes a sender at once: faster than the watch looks. */
static void brief_sender(void *arg)
{
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(arg, &s));
    zimp_sender_close(s);
}

static void idle_sender(void *arg)
{
    zimp_sender *s;
    ASSERT_OK(zimp_sender_open(arg, &s));
    for (;;)
        pause();
}

static void idle_receiver(void *arg)
{
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(arg, &r));
    for (;;)
        pause();
}

TEST_IMPL(watch_events)
{
    char name[128];
    chan_name(name, sizeof name, "w");
    zimp_watch *w;
    ASSERT_EQ(zimp_watch_open("bad/name", &w), -EINVAL);
    ASSERT_OK(zimp_watch_open(name, &w));          /* the name does not exist yet: hunt */
    int ep = epoll_watch_fd(zimp_watch_fd(w));
    static struct seen s;
    long bound = tmo(2000);                        /* deaths and names: at once; joins: 100 ms */

    create_chan(name, 8, 64, 4, 4);
    expect(w, ep, &s, ZIMP_WATCH_CREATED, 0, 0, bound);

    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(name, &r));
    expect(w, ep, &s, ZIMP_WATCH_JOINED, ZIMP_MEMBER_RECEIVER, getpid(), bound);

    /* a sender that sends and closes cleanly: joined, left, no sender left */
    struct closer ca = { name, { 0 } };
    tpipe_open(&ca.go);
    pid_t a = spawn(sender_role, &ca);
    expect(w, ep, &s, ZIMP_WATCH_JOINED, ZIMP_MEMBER_SENDER, a, bound);
    put_bytes(ca.go.w, "g", 1);
    expect(w, ep, &s, ZIMP_WATCH_LEFT, ZIMP_MEMBER_SENDER, a, bound);
    expect(w, ep, &s, ZIMP_WATCH_NO_SENDER, 0, 0, bound);
    ASSERT_CHILD_OK(a, tmo(5000));
    for (int i = 0; i < s.n; i++)
        ASSERT_MSG(!(s.ev[i].what == ZIMP_WATCH_DIED && s.ev[i].pid == a), "a clean close reported as a death");

    /* a sender that came and went between two looks is reported too (pid unknown) */
    ASSERT_CHILD_OK(spawn(brief_sender, name), tmo(5000));
    expect(w, ep, &s, ZIMP_WATCH_JOINED, ZIMP_MEMBER_SENDER, 0, bound);
    expect(w, ep, &s, ZIMP_WATCH_LEFT, ZIMP_MEMBER_SENDER, 0, bound);
    expect(w, ep, &s, ZIMP_WATCH_NO_SENDER, 0, 0, bound);

    /* a sender killed: joined, died (at once), no sender left */
    pid_t b = spawn(idle_sender, name);
    expect(w, ep, &s, ZIMP_WATCH_JOINED, ZIMP_MEMBER_SENDER, b, bound);
    ASSERT_OK(kill(b, SIGKILL));
    int64_t t0 = now_ns();
    expect(w, ep, &s, ZIMP_WATCH_DIED, ZIMP_MEMBER_SENDER, b, bound);
    fprintf(stderr, "watch_events: sender death reported %.2f ms after the kill\n", (now_ns() - t0) / 1e6);
    expect(w, ep, &s, ZIMP_WATCH_NO_SENDER, 0, 0, bound);
    ASSERT_EQ(wait_child(b, tmo(5000)), 128 + SIGKILL);

    /* a stopped receiver evicted, another killed */
    pid_t c = spawn(idle_receiver, name), d = spawn(idle_receiver, name);
    expect(w, ep, &s, ZIMP_WATCH_JOINED, ZIMP_MEMBER_RECEIVER, c, bound);
    expect(w, ep, &s, ZIMP_WATCH_JOINED, ZIMP_MEMBER_RECEIVER, d, bound);
    struct zimp_member_info cm;
    ASSERT_OK(find_member(name, ZIMP_MEMBER_RECEIVER, c, &cm));
    zimp_sender *snd;
    ASSERT_OK(zimp_sender_open(name, &snd));
    expect(w, ep, &s, ZIMP_WATCH_JOINED, ZIMP_MEMBER_SENDER, getpid(), bound);
    ASSERT_OK(kill(c, SIGSTOP));
    ASSERT_OK(zimp_evict(snd, cm.index));
    expect(w, ep, &s, ZIMP_WATCH_EVICTED, ZIMP_MEMBER_RECEIVER, c, bound);
    ASSERT_OK(kill(d, SIGKILL));
    expect(w, ep, &s, ZIMP_WATCH_DIED, ZIMP_MEMBER_RECEIVER, d, bound);
    kill(c, SIGKILL);
    wait_child(c, tmo(5000));
    wait_child(d, tmo(5000));
    zimp_sender_close(snd);

    /* the name removed */
    ASSERT_OK(zimp_unlink(name));
    expect(w, ep, &s, ZIMP_WATCH_REMOVED, 0, 0, bound);
    zimp_receiver_close(r);
    close(ep);
    zimp_watch_close(w);
    zimp_watch_close(NULL);
    return 0;
}

struct opener { const char *name; struct tpipe opened, go; };

/* Opens a receiver, says so, waits for the word, closes cleanly. */
static void closing_receiver(void *arg)
{
    struct opener *a = arg;
    zimp_receiver *r;
    char c;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(&a->opened);
    ASSERT_OK(get_bytes(a->go.r, &c, 1, tmo(10000)));
    zimp_receiver_close(r);
}

/*
 * One receiver record, reused between two looks of the watcher: a clean
 * close followed by another member's join is a close, not a death; a member
 * that came and went unseen is still reported.
 */
TEST_IMPL(watch_record_reuse)
{
    char name[128];
    chan_name(name, sizeof name, "w");
    create_chan(name, 8, 64, 2, 1);             /* one receiver record: every join reuses it */
    zimp_watch *w;
    ASSERT_OK(zimp_watch_open(name, &w));
    int ep = epoll_watch_fd(zimp_watch_fd(w));
    static struct seen s;
    long bound = tmo(2000);

    struct opener a = { name, { 0 }, { 0 } };
    tpipe_open(&a.opened);
    tpipe_open(&a.go);
    pid_t pa = spawn(closing_receiver, &a);
    ASSERT_OK(wait_bytes(&a.opened, 1, tmo(10000)));
    expect(w, ep, &s, ZIMP_WATCH_JOINED, ZIMP_MEMBER_RECEIVER, pa, bound);
    /* A closes and exits, B joins, before the watcher looks again */
    put_bytes(a.go.w, "g", 1);
    ASSERT_CHILD_OK(pa, tmo(5000));
    struct opener b = { name, { 0 }, { 0 } };
    tpipe_open(&b.opened);
    tpipe_open(&b.go);
    pid_t pb = spawn(closing_receiver, &b);
    ASSERT_OK(wait_bytes(&b.opened, 1, tmo(10000)));
    expect(w, ep, &s, ZIMP_WATCH_LEFT, ZIMP_MEMBER_RECEIVER, pa, bound);
    expect(w, ep, &s, ZIMP_WATCH_JOINED, ZIMP_MEMBER_RECEIVER, pb, bound);
    for (int i = 0; i < s.n; i++)
        ASSERT_MSG(!(s.ev[i].what == ZIMP_WATCH_DIED && s.ev[i].pid == pa), "a clean close reported as a death");

    /* B closes, C comes and goes, D joins: all before the watcher looks */
    put_bytes(b.go.w, "g", 1);
    ASSERT_CHILD_OK(pb, tmo(5000));
    struct opener c = { name, { 0 }, { 0 } };
    tpipe_open(&c.opened);
    tpipe_open(&c.go);
    pid_t pc = spawn(closing_receiver, &c);
    ASSERT_OK(wait_bytes(&c.opened, 1, tmo(10000)));
    put_bytes(c.go.w, "g", 1);
    ASSERT_CHILD_OK(pc, tmo(5000));
    struct opener d = { name, { 0 }, { 0 } };
    tpipe_open(&d.opened);
    tpipe_open(&d.go);
    pid_t pd = spawn(closing_receiver, &d);
    ASSERT_OK(wait_bytes(&d.opened, 1, tmo(10000)));
    expect(w, ep, &s, ZIMP_WATCH_LEFT, ZIMP_MEMBER_RECEIVER, pb, bound);
    expect(w, ep, &s, ZIMP_WATCH_JOINED, ZIMP_MEMBER_RECEIVER, 0, bound);   /* C, unseen: pid 0 */
    expect(w, ep, &s, ZIMP_WATCH_JOINED, ZIMP_MEMBER_RECEIVER, pd, bound);
    put_bytes(d.go.w, "g", 1);
    ASSERT_CHILD_OK(pd, tmo(5000));
    expect(w, ep, &s, ZIMP_WATCH_LEFT, ZIMP_MEMBER_RECEIVER, pd, bound);
    close(ep);
    zimp_watch_close(w);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}
