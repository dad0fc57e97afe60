/*
 * The C counterpart of python/bench/pingpong.py: the same two channels (64 slots
 * of 64 B), the same calls (zimp_send, then zimp_recv waiting forever), the same
 * waiting policy, two processes (fork), so that the difference between the two
 * programs is the binding's cost. Also times the calls the binding's per-call
 * overhead is measured on, in one process.
 *
 *   pingpong_c [--mode busy|block|adaptive] [--rounds N] [--slice-ns NS]
 *              [--cpus PING,ECHO]
 *
 * --slice-ns makes every wait a loop of calls with that timeout, retried on
 * -ETIMEDOUT, as the binding waits with timeout=None (a long NS does not
 * change the latency; a short one exercises the library's timeout path).
 * --cpus pins the pinging process and the echo to those CPUs (the same CPU: a
 * wake-up is a context switch; two CPUs: it crosses to the other one).
 *
 * Prints one JSON object: one-way latency (half a round trip) p50/p99 in us,
 * and ns per call of zimp_recv on an empty channel, of zimp_sender_index, and
 * of a zimp_send + zimp_recv pair in one process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zimp/zimp.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t slice_ns = -1;     /* -1: wait forever in one call */

/* zimp_send / zimp_recv waiting forever, in calls of slice_ns when it is set. */
static int send_wait(zimp_sender *tx, const void *buf, size_t len)
{
    int rc;
    while ((rc = zimp_send(tx, buf, len, slice_ns)) == -ETIMEDOUT && slice_ns >= 0)
        ;
    return rc;
}

static ssize_t recv_wait(zimp_receiver *rx, void *buf, size_t cap)
{
    ssize_t n;
    while ((n = zimp_recv(rx, buf, cap, slice_ns)) == -ETIMEDOUT && slice_ns >= 0)
        ;
    return n;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static char ping[64], pong[64];     /* the channels' names */

/* Pins the calling process to `cpu` (negative: leaves it as it is). */
static void pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) < 0) {
        perror("pingpong_c: sched_setaffinity");
        exit(1);
    }
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "pingpong_c: %s: %s\n", what, zimp_strerror(rc));
    zimp_unlink(ping);
    zimp_unlink(pong);
    exit(1);
}

/* Opens a sender on `tx_name` and (unless *rx is open) a receiver on `rx_name`,
 * with `spin` on both. */
static void join(const char *tx_name, const char *rx_name, uint64_t spin,
                 zimp_sender **tx, zimp_receiver **rx)
{
    int rc = *rx ? 0 : zimp_receiver_open(rx_name, rx);
    if (rc < 0)
        die("receiver open", rc);
    if ((rc = zimp_sender_open(tx_name, tx)) < 0)
        die("sender open", rc);
    zimp_sender_set_spin(*tx, spin);
    zimp_receiver_set_spin(*rx, spin);
}

/* The echo process: answers each ping with the message it got. */
static void echo(const char *ping, const char *pong, uint64_t spin, long rounds)
{
    zimp_sender *tx;
    zimp_receiver *rx = NULL;
    join(pong, ping, spin, &tx, &rx);
    char buf[64] = "joined";
    int rc = send_wait(tx, buf, 7);     /* our receiver gets every ping from now on */
    if (rc < 0)
        die("echo send", rc);
    for (long i = 0; i < rounds; i++) {
        ssize_t n = recv_wait(rx, buf, sizeof buf);
        if (n < 0)
            die("echo recv", (int)n);
        rc = send_wait(tx, buf, (size_t)n);
        if (rc < 0)
            die("echo send", rc);
    }
    zimp_sender_close(tx);
    zimp_receiver_close(rx);
}

/* ns per iteration of `body` over n rounds, the median of 5 runs. */
#define PER_CALL(out, n, body)                                              \
    do {                                                                    \
        int64_t t_[5];                                                      \
        for (int k_ = 0; k_ < 5; k_++) {                                    \
            int64_t t0_ = now_ns();                                         \
            for (long i_ = 0; i_ < (n); i_++) {                             \
                body;                                                       \
            }                                                               \
            t_[k_] = now_ns() - t0_;                                        \
        }                                                                   \
        qsort(t_, 5, sizeof t_[0], cmp_i64);                                \
        (out) = (double)t_[2] / (double)(n);                                \
    } while (0)

/* Costs of single calls in this process (what the binding adds its overhead to). */
static void per_call(const char *name, double *recv_empty, double *index, double *pair)
{
    zimp_sender *tx;
    zimp_receiver *rx = NULL;
    join(name, name, UINT64_MAX, &tx, &rx);
    char msg[64] = { 0 }, buf[64];
    volatile long sink = 0;
    PER_CALL(*recv_empty, 200000, sink += zimp_recv(rx, buf, sizeof buf, 0));
    PER_CALL(*index, 200000, sink += zimp_sender_index(tx));
    PER_CALL(*pair, 200000, {
        zimp_send(tx, msg, sizeof msg, 0);
        sink += zimp_recv(rx, buf, sizeof buf, 0);
    });
    (void)sink;
    zimp_sender_close(tx);
    zimp_receiver_close(rx);
}

int main(int argc, char **argv)
{
    const char *mode = "busy";
    long rounds = 20000;
    int cpu_ping = -1, cpu_echo = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mode") && i + 1 < argc)
            mode = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atol(argv[++i]);
        else if (!strcmp(argv[i], "--slice-ns") && i + 1 < argc)
            slice_ns = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--cpus") && i + 1 < argc &&
                 sscanf(argv[++i], "%d,%d", &cpu_ping, &cpu_echo) == 2)
            ;
        else {
            fprintf(stderr, "usage: pingpong_c [--mode busy|block|adaptive] [--rounds N] "
                    "[--slice-ns NS] [--cpus PING,ECHO]\n");
            return 2;
        }
    }
    uint64_t spin = !strcmp(mode, "busy") ? UINT64_MAX
                    : !strcmp(mode, "block") ? 0 : ZIMP_SPIN_ADAPTIVE;
    if (rounds < 1 || (strcmp(mode, "busy") && strcmp(mode, "block") && strcmp(mode, "adaptive"))) {
        fprintf(stderr, "pingpong_c: bad --mode or --rounds\n");
        return 2;
    }

    snprintf(ping, sizeof ping, "pingpong-c-%d-ping", (int)getpid());
    snprintf(pong, sizeof pong, "pingpong-c-%d-pong", (int)getpid());
    struct zimp_config cfg = { .slots = 64, .slot_size = 64 };
    int rc = zimp_create(ping, &cfg);
    if (rc < 0 || (rc = zimp_create(pong, &cfg)) < 0)
        die("create", rc);

    /* Our receiver of the echo's replies is open before the echo exists. */
    zimp_receiver *rx = NULL;
    if ((rc = zimp_receiver_open(pong, &rx)) < 0)
        die("receiver open", rc);
    pid_t pid = fork();
    if (pid == 0) {
        pin(cpu_echo);
        echo(ping, pong, spin, rounds);
        _exit(0);
    }
    pin(cpu_ping);
    zimp_sender *tx;
    join(ping, pong, spin, &tx, &rx);
    /*
     * Wait for the echo's hello, not for zimp_info's receiver count: that counts
     * a receiver still inside zimp_receiver_open, which may start after a
     * message sent meanwhile.
     */
    char msg[64] = { 0 }, buf[64];
    zimp_receiver_set_spin(rx, 0);
    if ((rc = (int)zimp_recv(rx, buf, sizeof buf, 60000000000)) < 0)
        die("hello", rc);
    zimp_receiver_set_spin(rx, spin);

    int64_t *rtt = malloc(sizeof *rtt * (size_t)rounds);
    for (long i = 0; i < rounds; i++) {
        int64_t t0 = now_ns();
        if ((rc = send_wait(tx, msg, sizeof msg)) < 0)
            die("send", rc);
        ssize_t n = recv_wait(rx, buf, sizeof buf);
        if (n < 0)
            die("recv", (int)n);
        rtt[i] = now_ns() - t0;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    zimp_sender_close(tx);
    zimp_receiver_close(rx);

    double recv_empty, index, pair;
    per_call(ping, &recv_empty, &index, &pair);
    zimp_unlink(ping);
    zimp_unlink(pong);

    qsort(rtt, (size_t)rounds, sizeof *rtt, cmp_i64);
    double load[3] = { 0 };
    if (getloadavg(load, 3) < 0)
        load[0] = load[1] = load[2] = -1;
    printf("{\"impl\": \"c\", \"mode\": \"%s\", \"rounds\": %ld, "
           "\"one_way_p50_us\": %.3f, \"one_way_p99_us\": %.3f, "
           "\"recv_empty_ns\": %.1f, \"sender_index_ns\": %.1f, \"send_recv_pair_ns\": %.1f, "
           "\"loadavg\": [%.2f, %.2f, %.2f]}\n",
           mode, rounds, (double)rtt[rounds / 2] / 2e3, (double)rtt[rounds * 99 / 100] / 2e3,
           recv_empty, index, pair, load[0], load[1], load[2]);
    free(rtt);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
