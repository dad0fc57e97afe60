/*
 * Supervision: be told when a channel's members come, go or die, and when
 * the channel itself appears or is removed (LINX's hunt and attach),
 * without a daemon and without joining the channel.
 *
 * The watcher maps the channel read-only and keeps a snapshot of its member
 * records. (Mapped, not read with pread as zimp_info reads them: it looks
 * every ZIMP_WATCH_POLL_NS, and a receiver record has a page of its own, so
 * a read of 4,096 receivers' pages took 3.5 ms against 0.04 ms for the
 * lines it needs. A truncated segment can therefore SIGBUS a watcher as it
 * does a member: docs/robustness.md.) Its descriptor is an epoll set of
 *   - an inotify watch on the segment directory: the name appears (a
 *     creator links it when it is ready) or is removed, at once;
 *   - a pidfd per member: a death, at once;
 *   - a timer every ZIMP_WATCH_POLL_NS while a channel is mapped: joins and
 *     clean closes change only shared memory, which no kernel object
 *     reports, so they are found by comparing the snapshot.
 * zimp_watch_read turns whatever happened into events.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/core_int.h"

struct watched {               /* one member record as last seen */
    uint64_t owner;            /* its owner word (0: free) */
    uint64_t free_gen;         /* while free: the free owner word (its generation) */
    bool reported_dead;
    struct zimp_peer peer;     /* pidfd of that owner, in the epoll set while it lives */
};

struct zimp_watch {
    unsigned fork_gen;
    char name[ZIMP_NAME_MAX + 1];
    char file[ZIMP_NAME_MAX + 16];     /* its name in ZIMP_SHM_DIR */
    int epfd, inotify, timer;
    struct zimp_map m;                 /* m.base NULL while the name does not exist */
    struct watched *rec;               /* senders, then receivers */
    uint32_t nrec;
    bool had_sender;                   /* a live sender was seen since the last NO_SENDER */
};

#define WATCH_TIMER UINT32_MAX
#define WATCH_INOTIFY (UINT32_MAX - 1)

static uint32_t nsenders(const zimp_watch *w) { return w->m.g.max_senders; }

static zimp_a64 *owner_word(zimp_watch *w, uint32_t i)
{
    return i < nsenders(w) ? &zimp__srec(w->m.base, &w->m.g, i)->owner
                           : &zimp__rrec(w->m.base, &w->m.g, i - nsenders(w))->owner;
}

static uint64_t ident_of(zimp_watch *w, uint32_t i, uint64_t o)
{
    if (i < nsenders(w)) {
        struct zimp_sender_rec *r = zimp__srec(w->m.base, &w->m.g, i);
        return zimp__ident(&r->ident, &r->ident_of, o);
    }
    struct zimp_receiver_rec *r = zimp__rrec(w->m.base, &w->m.g, i - nsenders(w));
    return zimp__ident(&r->ident, &r->ident_of, o);
}

/* Whether the member of record i, owner word o, is alive (an exec is a death): through the record's peer cache. */
static bool watched_alive(zimp_watch *w, uint32_t i, uint64_t o)
{
    struct zimp_where at;
    if (i < nsenders(w)) {
        struct zimp_sender_rec *r = zimp__srec(w->m.base, &w->m.g, i);
        at = zimp__where(&w->m, &r->mapped, &r->image, &r->ident_of, o);
    } else {
        struct zimp_receiver_rec *r = zimp__rrec(w->m.base, &w->m.g, i - nsenders(w));
        at = zimp__where(&w->m, &r->mapped, &r->image, &r->ident_of, o);
    }
    return zimp__member_alive(&w->rec[i].peer, o, ident_of(w, i, o), &at);
}

static void forget(zimp_watch *w, struct watched *x)
{
    if (x->peer.pidfd >= 0 && x->peer.polled)
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, x->peer.pidfd, NULL);
    zimp__peer_reset(&x->peer);
    x->owner = 0;
    x->reported_dead = false;
}

static void unmap(zimp_watch *w)
{
    for (uint32_t i = 0; i < w->nrec; i++)
        forget(w, &w->rec[i]);
    free(w->rec);
    w->rec = NULL;
    w->nrec = 0;
    if (w->m.base)
        zimp__map_close(&w->m);
    w->m.base = NULL;
    struct itimerspec off = { 0 };
    timerfd_settime(w->timer, 0, &off, NULL);
}

/* Maps the channel if its name exists: 1 mapped now, 0 absent, < 0 error. */
static int try_map(zimp_watch *w)
{
    int r = zimp__map_open_readonly(w->name, &w->m);
    if (r == -ENOENT)
        return 0;
    if (r != 0)
        return r;
    w->nrec = w->m.g.max_senders + w->m.g.max_receivers;
    w->rec = calloc(w->nrec, sizeof *w->rec);
    if (!w->rec) {
        zimp__map_close(&w->m);
        w->m.base = NULL;
        return zimp__fail(-ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < w->nrec; i++)
        zimp__peer_init(&w->rec[i].peer);
    struct itimerspec tick = { { 0, (long)ZIMP_WATCH_POLL_NS }, { 0, (long)ZIMP_WATCH_POLL_NS } };
    timerfd_settime(w->timer, 0, &tick, NULL);
    return 1;
}

ZIMP_API int zimp_watch_open(const char *name, zimp_watch **out)
{
    char path[512];
    int r;
    zimp__clear_detail();
    if (!out)
        return zimp__fail(-EINVAL, "output handle pointer is NULL");
    *out = NULL;
    if ((r = zimp__path(name, path, sizeof path)) != 0)
        return r;
    zimp_watch *w = calloc(1, sizeof *w);
    if (!w)
        return zimp__fail(-ENOMEM, "out of memory");
    w->fork_gen = zimp__fork_token();
    w->epfd = w->inotify = w->timer = -1;
    w->m.fd = -1;
    snprintf(w->name, sizeof w->name, "%s", name);
    snprintf(w->file, sizeof w->file, "%s%s", ZIMP_SHM_PREFIX, name);
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    w->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event in = { .events = EPOLLIN, .data.u32 = WATCH_INOTIFY };
    struct epoll_event tm = { .events = EPOLLIN, .data.u32 = WATCH_TIMER };
    if (w->epfd < 0 || w->inotify < 0 || w->timer < 0 ||
        inotify_add_watch(w->inotify, ZIMP_SHM_DIR, IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM) < 0 ||
        epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->inotify, &in) != 0 ||
        epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->timer, &tm) != 0) {
        r = zimp__fail(-errno, "cannot set up the watch: %s", strerror(errno));
        zimp_watch_close(w);
        return r;
    }
    /* Members present now are the starting point, not news. */
    if ((r = try_map(w)) < 0) {
        zimp_watch_close(w);
        return r;
    }
    for (uint32_t i = 0; i < w->nrec; i++) {
        uint64_t o = zimp_load_acquire(owner_word(w, i));
        uint32_t st = ZIMP_OWNER_STATE(o);
        if (st == ZIMP_M_FREE)
            w->rec[i].free_gen = o;
        if (!zimp__member_state(st))
            continue;
        w->rec[i].owner = o;
        if (watched_alive(w, i, o) && i < nsenders(w))
            w->had_sender = true;
    }
    *out = w;
    return 0;
}

ZIMP_API int zimp_watch_fd(zimp_watch *w)
{
    if (!w)
        return -EINVAL;
    if (zimp__inherited(w->fork_gen))
        return -EBADF;
    return w->epfd;
}

struct out { struct zimp_watch_event *ev; size_t cap, n; };

static void emit(struct out *o, uint32_t what, uint32_t role, uint32_t index, int32_t pid)
{
    if (o->n < o->cap)
        o->ev[o->n] = (struct zimp_watch_event){ what, role, index, pid };
    o->n++;
}

/* Whether the name was created or removed since the last look (inotify). */
static void name_events(zimp_watch *w, bool *created, bool *removed)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(w->inotify, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            if (e->len && strcmp(e->name, w->file) == 0) {
                if (e->mask & (IN_CREATE | IN_MOVED_TO))
                    *created = true;
                if (e->mask & (IN_DELETE | IN_MOVED_FROM))
                    *removed = true;
            }
            p += sizeof *e + e->len;
        }
    }
}

/* Compares record i with the snapshot; emits and updates. */
static zimp_a64 *closed_word(zimp_watch *w, uint32_t i)
{
    return i < nsenders(w) ? &zimp__srec(w->m.base, &w->m.g, i)->closed
                           : &zimp__rrec(w->m.base, &w->m.g, i - nsenders(w))->closed;
}

/* Generations are 24 bits; every join raises the record's by one, frees keep it. */
static uint32_t gens_between(uint32_t from, uint32_t to) { return (to - from) & 0xffffffu; }

/*
 * Compares record i with the snapshot; emits and updates. A member that is
 * gone from its record closed if the record's `closed` word says its
 * generation closed cleanly (L1: recorded before the record is freed, by
 * leaving members only), or if its process still runs; otherwise it died.
 * Joins between two looks show as generations skipped.
 */
static void diff_record(zimp_watch *w, uint32_t i, struct out *o)
{
    struct watched *x = &w->rec[i];
    uint32_t role = i < nsenders(w) ? ZIMP_MEMBER_SENDER : ZIMP_MEMBER_RECEIVER;
    uint32_t index = i < nsenders(w) ? i : i - nsenders(w);
    uint64_t now = zimp_load_acquire(owner_word(w, i));
    uint32_t st = ZIMP_OWNER_STATE(now);
    bool taken = zimp__member_state(st);
    /* The same member (an eviction keeps its pid and generation). */
    bool same = x->owner && taken && ZIMP_OWNER_GEN(now) == ZIMP_OWNER_GEN(x->owner) &&
                ZIMP_OWNER_PID(now) == ZIMP_OWNER_PID(x->owner);
    if (same) {
        if (!x->reported_dead && !watched_alive(w, i, x->owner)) {
            emit(o, ZIMP_WATCH_DIED, role, index, ZIMP_OWNER_PID(x->owner));
            x->reported_dead = true;
            if (x->peer.polled)
                epoll_ctl(w->epfd, EPOLL_CTL_DEL, x->peer.pidfd, NULL);
            x->peer.polled = false;
        }
        if (st == ZIMP_M_EVICTED && ZIMP_OWNER_STATE(x->owner) != ZIMP_M_EVICTED)
            emit(o, ZIMP_WATCH_EVICTED, role, index, ZIMP_OWNER_PID(now));
        x->owner = now;
    } else {
        uint64_t last = x->owner ? x->owner : x->free_gen;
        if (x->owner && !x->reported_dead) {
            bool marked = zimp__closed_has(zimp_load_acquire(closed_word(w, i)), ZIMP_OWNER_GEN(x->owner));
            bool closed = marked || zimp__peer_alive(&x->peer, x->owner, 0);
            emit(o, closed ? ZIMP_WATCH_LEFT : ZIMP_WATCH_DIED, role, index, ZIMP_OWNER_PID(x->owner));
        }
        if (x->owner)
            forget(w, x);
        /* members that joined (and left) since: generations not accounted for */
        uint32_t joined = gens_between(ZIMP_OWNER_GEN(last), ZIMP_OWNER_GEN(now));
        if (joined > (taken ? 1u : 0u)) {
            emit(o, ZIMP_WATCH_JOINED, role, index, 0);
            emit(o, ZIMP_WATCH_LEFT, role, index, 0);
            if (role == ZIMP_MEMBER_SENDER)
                w->had_sender = true;
        }
        if (taken) {
            x->owner = now;
            emit(o, ZIMP_WATCH_JOINED, role, index, ZIMP_OWNER_PID(now));
            watched_alive(w, i, now);
        }
    }
    x->free_gen = st == ZIMP_M_FREE ? now : 0;
    if (x->owner && !x->reported_dead && x->peer.pidfd >= 0 && !x->peer.polled) {
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
        x->peer.polled = epoll_ctl(w->epfd, EPOLL_CTL_ADD, x->peer.pidfd, &ev) == 0;
    }
}

ZIMP_API int zimp_watch_read(zimp_watch *w, struct zimp_watch_event *ev, size_t cap)
{
    if (!w || (!ev && cap))
        return -EINVAL;
    if (zimp__inherited(w->fork_gen))
        return -EBADF;
    struct out o = { ev, cap, 0 };
    uint64_t ticks;
    if (read(w->timer, &ticks, sizeof ticks) < 0)
        ticks = 0;
    bool created = false, removed = false;
    name_events(w, &created, &removed);
    if (removed)
        emit(&o, ZIMP_WATCH_REMOVED, 0, 0, 0);
    if (created) {
        /* A new channel under the name: watch it instead of the old one. */
        if (w->m.base) {
            for (uint32_t i = 0; i < w->nrec; i++)
                diff_record(w, i, &o);           /* last news of the old one */
            unmap(w);
        }
        int r = try_map(w);
        if (r < 0)
            return r;
        if (r > 0)
            emit(&o, ZIMP_WATCH_CREATED, 0, 0, 0);
        w->had_sender = false;
    }
    if (w->m.base) {
        uint32_t live_senders = 0;
        for (uint32_t i = 0; i < w->nrec; i++) {
            diff_record(w, i, &o);
            live_senders += i < nsenders(w) && w->rec[i].owner && !w->rec[i].reported_dead &&
                            ZIMP_OWNER_STATE(w->rec[i].owner) == ZIMP_M_ACTIVE;
        }
        if (live_senders)
            w->had_sender = true;
        else if (w->had_sender) {
            emit(&o, ZIMP_WATCH_NO_SENDER, 0, 0, 0);
            w->had_sender = false;
        }
    }
    return o.n > INT_MAX ? INT_MAX : (int)o.n;
}

ZIMP_API void zimp_watch_close(zimp_watch *w)
{
    if (!w)
        return;
    /* Nothing shared to undo: an inherited copy is closed like the original. */
    unmap(w);
    if (w->epfd >= 0)
        close(w->epfd);
    if (w->inotify >= 0)
        close(w->inotify);
    if (w->timer >= 0)
        close(w->timer);
    free(w);
}
