/*
 * The C counterpart of python/bench/pingpong.py: the same two channels (64 slots
 * of 64 B), the same calls (zimp_send, then zimp_recv waiting forever), the same
 * waiting policy, two processes (fork), so that the difference between the two
 * programs is the binding's cost. Also times the calls the binding's per-call
 * overhead is measured on, in one process.
 *
 *   pingpong_c [--mode busy|block|adaptive] [--rounds N]
 *
 * Prints one JSON object: one-way latency (half a round trip) p50/p99 in us,
 * and ns per call of zimp_recv on an empty channel, of zimp_sender_index, and
 * of a zimp_send + zimp_recv pair in one process.
 */
#define _GNU_SOURCE
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

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "pingpong_c: %s: %s\n", what, zimp_strerror(rc));
    exit(1);
}

/* Opens a sender on `tx_name` and a receiver on `rx_name`, with `spin` on both. */
static void join(const char *tx_name, const char *rx_name, uint64_t spin,
                 zimp_sender **tx, zimp_receiver **rx)
{
    int rc = zimp_receiver_open(rx_name, rx);
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
    zimp_receiver *rx;
    join(pong, ping, spin, &tx, &rx);
    char buf[64];
    for (long i = 0; i < rounds; i++) {
        ssize_t n = zimp_recv(rx, buf, sizeof buf, -1);
        if (n < 0)
            die("echo recv", (int)n);
        int rc = zimp_send(tx, buf, (size_t)n, -1);
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
    zimp_receiver *rx;
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
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mode") && i + 1 < argc)
            mode = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: pingpong_c [--mode busy|block|adaptive] [--rounds N]\n");
            return 2;
        }
    }
    uint64_t spin = !strcmp(mode, "busy") ? UINT64_MAX
                    : !strcmp(mode, "block") ? 0 : ZIMP_SPIN_ADAPTIVE;
    if (rounds < 1 || (strcmp(mode, "busy") && strcmp(mode, "block") && strcmp(mode, "adaptive"))) {
        fprintf(stderr, "pingpong_c: bad --mode or --rounds\n");
        return 2;
    }

    char ping[64], pong[64];
    snprintf(ping, sizeof ping, "pingpong-c-%d-ping", (int)getpid());
    snprintf(pong, sizeof pong, "pingpong-c-%d-pong", (int)getpid());
    struct zimp_config cfg = { .slots = 64, .slot_size = 64 };
    int rc = zimp_create(ping, &cfg);
    if (rc < 0 || (rc = zimp_create(pong, &cfg)) < 0)
        die("create", rc);

    pid_t pid = fork();
    if (pid == 0) {
        echo(ping, pong, spin, rounds);
        _exit(0);
    }
    zimp_sender *tx;
    zimp_receiver *rx;
    join(ping, pong, spin, &tx, &rx);
    struct zimp_info info;          /* a receiver gets what is sent after it joined */
    do {
        usleep(1000);
    } while (zimp_info(ping, &info) == 0 && info.receivers < 1);

    int64_t *rtt = malloc(sizeof *rtt * (size_t)rounds);
    char msg[64] = { 0 }, buf[64];
    for (long i = 0; i < rounds; i++) {
        int64_t t0 = now_ns();
        if ((rc = zimp_send(tx, msg, sizeof msg, -1)) < 0)
            die("send", rc);
        ssize_t n = zimp_recv(rx, buf, sizeof buf, -1);
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
