/* Private interfaces of the channel core (src/core). */
#ifndef ZIMP_CORE_INT_H
#define ZIMP_CORE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "zimp/zimp.h"
#include "shm/layout_int.h"

#define ZIMP_SHM_DIR     "/dev/shm"
#define ZIMP_SHM_PREFIX  "zimp."
#define ZIMP_CHECK_NS    10000000ull     /* liveness re-check period while blocked: 10 ms */
#define ZIMP_SPIN_DEFAULT_NS 5000ull

/* ---- util.c: errors, names, time ---- */

/* Sets the thread-local detail string and returns err (for `return zimp__fail(...)`). */
int zimp__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zimp__clear_detail(void);
/* Validates a channel name and writes its segment path; 0 or negative errno. */
int zimp__path(const char *name, char *path, size_t cap);
uint64_t zimp__now_ns(void);
/* Absolute deadline for a contract timeout: UINT64_MAX for "forever". */
uint64_t zimp__deadline(int64_t timeout_ns);
uint32_t zimp__crc32c(const void *buf, size_t len);
uint64_t zimp__default_spin(void);

/* ---- proc.c: process identity and liveness ---- */

/* Identity of a process: its start time in clock ticks since boot (0 if unknown). */
uint64_t zimp__self_ident(void);

/* Per-peer liveness cache: one per member record a handle watches. */
struct zimp_peer {
    uint64_t owner;      /* owner word the cache describes */
    int pidfd;           /* -1: none (yet) */
    bool verified;       /* identity checked against the record's ident */
    bool dead;
    bool polled;         /* pidfd is in the receiver's epoll set */
};
void zimp__peer_init(struct zimp_peer *p);
void zimp__peer_reset(struct zimp_peer *p);
/*
 * Whether the member owning a record (owner word, ident) is alive. Dead
 * means exited, zombie, or its pid now belongs to another process.
 */
bool zimp__peer_alive(struct zimp_peer *p, uint64_t owner, uint64_t ident);
/* One check without a cache (inspection and cleanup paths). */
bool zimp__alive_once(uint64_t owner, uint64_t ident);

/* ---- notify.c: futex sleeping and waking ---- */

/*
 * Condition for zimp__wait: returns > 0 when satisfied, 0 to keep waiting,
 * < 0 for an error. `slow` asks it to also run its liveness checks.
 */
typedef int (*zimp_cond_fn)(void *ctx, bool slow);

/*
 * Waits until cond holds: spins up to spin_ns, then sleeps on `futex`
 * after setting `waiting`, waking at least every ZIMP_CHECK_NS for a slow
 * check. deadline is absolute (UINT64_MAX: forever). Returns cond's
 * positive value, its error, or -ETIMEDOUT / -EAGAIN (deadline 0).
 */
int zimp__wait(zimp_a32 *futex, zimp_a32 *waiting, zimp_cond_fn cond, void *ctx,
               uint64_t spin_ns, uint64_t deadline, uint64_t *last_slow);
/* Wakes every sleeper of (futex, waiting) if the waiting flag is set. */
void zimp__wake(zimp_a32 *futex, zimp_a32 *waiting);

/* ---- channel.c: segment files and mappings ---- */

struct zimp_map {
    void *base;
    uint64_t size;
    struct zimp_geometry g;
    uint32_t flags;
    uint64_t stall_timeout_ns;
    int fd;
};
enum zimp_role { ZIMP_ROLE_SENDER, ZIMP_ROLE_RECEIVER };
/* Opens and validates channel `name`, mapped for `role` (receivers: read-only). */
int zimp__map_open(const char *name, enum zimp_role role, struct zimp_map *m);
void zimp__map_close(struct zimp_map *m);
/* Finds a free (or dead member's) record and takes it; index or negative errno. */
int zimp__join(struct zimp_map *m, enum zimp_role role, uint64_t *owner_out);
/* Makes a record free again if it still holds `owner`. */
void zimp__leave(zimp_a64 *owner_word, uint64_t owner);

/*
 * Whether a live sender holds (claimed, not yet published) position p, or
 * with p == ZIMP_ANY_SENDER whether any live sender is a member. peers is
 * the caller's liveness cache, one entry per sender record.
 */
#define ZIMP_ANY_SENDER (UINT64_MAX - 1)
bool zimp__claim_live(struct zimp_map *m, struct zimp_peer *peers, uint64_t p);

/* Registry of live handles, so that a double close is detected and ignored. */
void zimp__handle_add(const void *h);
bool zimp__handle_remove(const void *h);

/* ---- the handles ---- */

struct zimp_sender {
    struct zimp_map m;
    uint32_t index;
    uint64_t owner;
    struct zimp_sender_rec *rec;
    uint64_t min_head;        /* cached minimum head of live receivers */
    uint64_t joins_seen;      /* wait.joins when min_head was computed */
    uint64_t held;            /* claimed, unpublished position, or ZIMP_NO_INTENT */
    void *loan_buf;           /* non-NULL while a loan is out */
    size_t loan_len;
    uint64_t spin_ns;
    uint64_t last_slow;
    uint64_t blocked_since;   /* when the held position started waiting (stall timer) */
    struct zimp_peer *peers;  /* per receiver record */
    struct zimp_peer *speers; /* per sender record */
    int *pipes;               /* per receiver: opened notification pipe, -1 */
    uint64_t *pipe_owner;     /* per receiver: owner word the pipe belongs to */
};

struct zimp_receiver {
    struct zimp_map m;
    uint32_t index;
    uint64_t owner;
    struct zimp_receiver_rec *rec;
    uint64_t pos;             /* next position to read */
    uint64_t start;           /* tail when it joined: below it, only `pending` is read */
    uint64_t *pending;        /* claims below start unpublished at join (sorted) */
    uint32_t npending;
    bool borrowed;            /* zimp_read outstanding on position pos - 1 */
    uint32_t borrow_len;      /* its length (validated) */
    uint64_t spin_ns;
    uint64_t last_slow;
    struct zimp_peer *peers;  /* per sender record */
    int pipe_r, pipe_w;       /* notification pipe (zimp_receiver_fd), -1 */
    int epfd;                 /* what zimp_receiver_fd returns, -1 until asked */
};

/* Min head over live receivers; reclaims dead ones when `slow`. Sender side. */
uint64_t zimp__min_head(zimp_sender *s, uint64_t tail, bool slow);
/* Writes a byte to the pipe of each armed receiver (sender side). */
void zimp__notify_fds(zimp_sender *s);

#endif /* ZIMP_CORE_INT_H */
