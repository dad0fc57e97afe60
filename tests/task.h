/*
 * Minimal test harness: asserts, child processes, pipes, clocks.
 * Every test runs in its own forked process (see runner.c); a failed
 * assertion prints where and exits that process with status 1.
 */
#ifndef ZIMP_TESTS_TASK_H
#define ZIMP_TESTS_TASK_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <zimp/zimp.h>

#define TEST_IMPL(name) int run_test_##name(void)
#define TEST_SKIP 77

/* Where the library keeps the segment of channel NAME: SHM_PREFIX NAME. */
#define SHM_DIR "/dev/shm"
#define SHM_PREFIX "/dev/shm/zimp."

#define NS_PER_MS 1000000LL
#define NS_PER_S 1000000000LL
#define T_LONG (10 * NS_PER_S) /* "forever", bounded so a hang is reported */

void task_fail(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

#define ASSERT(expr)                                                    \
    do {                                                                \
        if (!(expr))                                                    \
            task_fail(__FILE__, __LINE__, #expr, " ");                  \
    } while (0)

#define ASSERT_MSG(expr, ...)                                           \
    do {                                                                \
        if (!(expr))                                                    \
            task_fail(__FILE__, __LINE__, #expr, __VA_ARGS__);          \
    } while (0)

#define ASSERT_EQ(a, b)                                                 \
    do {                                                                \
        long long a_ = (long long)(a), b_ = (long long)(b);             \
        if (a_ != b_)                                                   \
            task_fail(__FILE__, __LINE__, #a " == " #b,                 \
                      "%lld != %lld (%s)", a_, b_, err_text(a_));       \
    } while (0)

#define ASSERT_NE(a, b)                                                 \
    do {                                                                \
        long long a_ = (long long)(a), b_ = (long long)(b);             \
        if (a_ == b_)                                                   \
            task_fail(__FILE__, __LINE__, #a " != " #b, "both %lld", a_); \
    } while (0)

#define ASSERT_OK(rc) ASSERT_EQ((rc), 0)
#define ASSERT_NEG(rc)                                                  \
    do {                                                                \
        long long r_ = (long long)(rc);                                 \
        if (r_ >= 0)                                                    \
            task_fail(__FILE__, __LINE__, #rc " < 0", "got %lld", r_);  \
    } while (0)

/* errno name for a (possibly negative) error code; "" for non-negative. */
const char *err_text(long long rc);

/* ---- environment ---- */
int under_sanitizer(void);          /* ZIMP_SANITIZER non-empty */
long scaled(long n);                /* n, or n/4 (>= 1) under sanitizers */
long env_long(const char *var, long dflt);
long tmo(long ms);                  /* ms, or 4*ms under sanitizers (hang bounds) */

/* ---- descriptors ---- */
/* This process's descriptors whose /proc/self/fd link contains one of `needles` (NULL-ended); at most cap. */
int find_fds(int *out, int cap, const char *const *needles);

/* ---- names and segments ---- */
/* Unique channel name for this run: "zt<runner pid>-<test>-<tag>". */
const char *chan_name(char *buf, size_t cap, const char *tag);
int shm_exists(const char *name);   /* SHM_PREFIX name present */
int leftover_segments(int remove);  /* channels and heaps of this test; remove them if asked */
extern char task_prefix[64];        /* "zt<runner pid>-<test>" */
extern const char *task_name;

/* ---- time ---- */
int64_t now_ns(void);
void sleep_ns(int64_t ns);
void sleep_ms(long ms);

/* ---- processes ---- */
/* fork(); the child runs fn(arg) and _exits with 0 (or 1 on a failed assert). */
pid_t spawn(void (*fn)(void *), void *arg);
/* Waits for pid up to timeout_ms: exit code, 128+signal, or -1 (then killed). */
int wait_child(pid_t pid, long timeout_ms);
#define ASSERT_CHILD_OK(pid, ms) ASSERT_EQ(wait_child((pid), (ms)), 0)
/* Waits until pid is stopped (SIGSTOP); 0 or -1. */
int wait_stopped(pid_t pid, long timeout_ms);
/* Whether a child's status says it died writing to read-only memory (its own
 * code after the write must _exit(3)); sanitizers exit with a status instead. */
int died_of_write_fault(int status);
void *shared_alloc(size_t size);    /* MAP_SHARED anonymous, zeroed */
void shared_free(void *p, size_t size);
/* A file of /dev/shm mapped read-write (prefix: "zimp." or "zimpheap."), for white-box tests. */
struct segmap { void *base; size_t size; };
struct segmap map_shm_file(const char *prefix, const char *name);

/* ---- pipes ---- */
struct tpipe { int r, w; };
void tpipe_open(struct tpipe *p);
void tpipe_close(struct tpipe *p);
void put_bytes(int fd, const void *buf, size_t n);
/* Reads exactly n bytes within timeout_ms: 0, or -1 on timeout/EOF. */
int get_bytes(int fd, void *buf, size_t n, long timeout_ms);
void signal_byte(struct tpipe *p);
int wait_bytes(struct tpipe *p, int count, long timeout_ms);

/* ---- messages ---- */
struct tmsg {                       /* header of every test message */
    uint32_t sender;
    uint32_t len;
    uint64_t seq;
};
/* Writes a message of len bytes (len >= sizeof header, or 0..15 raw). */
void msg_fill(void *buf, size_t len, uint32_t sender, uint64_t seq);
/* 1 if buf holds the message msg_fill(buf, len, sender, seq) would write. */
int msg_check(const void *buf, size_t len, uint32_t *sender, uint64_t *seq);

enum { MODE_COPY = 0, MODE_ZC = 1 };
/* Send with zimp_send (copy) or zimp_loan + zimp_publish (zc). */
int send_msg(zimp_sender *s, int mode, uint32_t sender, uint64_t seq,
             size_t len, int64_t timeout_ns);
/* Receive with zimp_recv (copy) or zimp_read + zimp_release (zc) into buf. */
ssize_t recv_msg(zimp_receiver *r, int mode, void *buf, size_t cap, int64_t timeout_ns);
/* Receives within timeout_ns and asserts it is message (id, seq) of msg_fill. */
void expect_msg(zimp_receiver *r, uint32_t id, uint64_t seq, int64_t timeout_ns);

/* Bytes that depend on their index and a seed: fill a buffer, find its first wrong byte (len: none). */
void pattern_fill(void *buf, size_t len, uint64_t seed);
size_t pattern_mismatch(const void *buf, size_t len, uint64_t seed);

uint64_t hash_step(uint64_t h, uint64_t v);
#define HASH_INIT 1469598103934665603ULL

struct xrand { uint64_t s; };
uint64_t xrand_next(struct xrand *x);
uint64_t xrand_below(struct xrand *x, uint64_t n);

/*
 * Receivers join channel `name` again and again while one sender streams
 * 32-byte messages into it as fast as it can (busy-waiting if spin): each
 * receiver's messages must start around its open (nothing completed before
 * it missed, nothing begun after it) and follow without a gap. `rounds`
 * joins, each reading `msgs` messages (1..msgs at random if vary), with up
 * to pause_ns between joins.
 */
struct join_plan { int rounds, msgs; int vary; int64_t pause_ns; int spin; };
void join_while_streaming(const char *name, const struct join_plan *plan);

/* Creates a channel, asserting success. */
void create_chan(const char *name, uint32_t slots, uint32_t slot_size,
                 uint32_t max_senders, uint32_t max_receivers);
/*
 * The new image of a test's child that exec()ed (zimp-tests --exec-member):
 * joins channel `name` as role "r" (receiver), "s" (sender) or "-" (none),
 * writes one byte to descriptor fd, then waits to be killed.
 */
int exec_member(const char *role, const char *name, int fd);
/* An epoll instance watching r's notification descriptor for EPOLLIN (asserts on failure). */
int epoll_watch(zimp_receiver *r);
/* The member record of process pid in role (ZIMP_MEMBER_*) of channel name: 0, or -1 if none. */
int find_member(const char *name, uint32_t role, pid_t pid, struct zimp_member_info *out);
/* An epoll set watching descriptor fd for input. */
int epoll_watch_fd(int fd);
/*
 * Receives with timeout 0, waiting on epoll set `ep` between tries (spurious
 * readiness allowed): the first result other than -EAGAIN, or -ETIMEDOUT after ms.
 */
ssize_t epoll_receive(zimp_receiver *r, int ep, void *buf, size_t cap, long ms);

#endif
