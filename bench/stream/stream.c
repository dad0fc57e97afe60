/*
 * The per-message cost of a 1 -> 1 stream with nothing else around it: a
 * sender process loans, writes every byte and publishes; a receiver
 * process reads in place, checks every byte and releases. Both busy-wait,
 * each on its own CPU. Prints ns per message, the median of --reps runs.
 * Small enough to compare two builds of the library run after run
 * (LD_LIBRARY_PATH=...), which the full benchmark's harness is too noisy for.
 *
 *   zimp_stream [--size BYTES] [--messages N] [--reps N] [--senders MAX]
 *
 * --senders is the channel's max_senders (1: the one-sender path, the default).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zimp/zimp.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);      /* fails with one CPU: both then share it */
}

static void die(const char *what)
{
    fprintf(stderr, "zimp_stream: %s: %s\n", what, zimp_last_detail());
    exit(1);
}

static void sender(const char *name, size_t size, long messages)
{
    pin(1);
    zimp_sender *s;
    if (zimp_sender_open(name, &s) != 0 || zimp_sender_set_spin(s, UINT64_MAX) != 0)
        die("sender");
    for (long i = 0; i <= messages; i++) {
        void *buf;
        if (zimp_loan(s, size, &buf, -1) != 0)
            die("zimp_loan");
        memset(buf, (int)(i & 0xff), size);
        if (zimp_publish(s, buf, size) != 0)
            die("zimp_publish");
    }
    zimp_sender_close(s);
    _exit(0);
}

/* ns per message of one run; -1 if a byte was wrong. */
static double run(size_t size, long messages, unsigned max_senders)
{
    char name[64];
    snprintf(name, sizeof name, "stream-%d", (int)getpid());
    zimp_unlink(name);
    struct zimp_config c = { .slot_size = size < 64 ? 64 : (uint32_t)size, .max_senders = max_senders };
    zimp_receiver *r;
    if (zimp_create(name, &c) != 0 || zimp_receiver_open(name, &r) != 0 ||
        zimp_receiver_set_spin(r, UINT64_MAX) != 0)
        die("channel");
    /* The child starts on its own CPU: under a real-time policy (chrt) a
     * child queued behind its spinning parent would never run to pin itself. */
    pin(1);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0)
        sender(name, size, messages);
    pin(0);
    const void *data;
    size_t len;
    long bad = 0;
    double t0 = 0;
    for (long i = 0; i <= messages; i++) {
        if (zimp_read(r, &data, &len, -1) != 0)
            die("zimp_read");
        if (i == 0)
            t0 = now_s();         /* from the first message on: both sides are running */
        const unsigned char *p = data;
        for (size_t k = 0; k < len; k++)
            bad += p[k] != (unsigned char)(i & 0xff);
        bad += len != size;
        if (zimp_release(r) != 0)
            die("zimp_release");
    }
    double t = now_s() - t0;
    waitpid(pid, NULL, 0);
    zimp_receiver_close(r);
    zimp_unlink(name);
    return bad ? -1 : t / (double)messages * 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t size = 1;
    long messages = 4000000;
    int reps = 5;
    unsigned max_senders = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size"))
            size = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--messages"))
            messages = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--senders"))
            max_senders = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else
            break;
    }
    if (argc % 2 == 0 || size == 0 || size > 65536 || messages < 1 || reps < 1 || reps > 99 ||
        max_senders < 1) {
        fprintf(stderr, "usage: zimp_stream [--size 1..65536] [--messages N] [--reps 1..99] [--senders MAX]\n");
        return 2;
    }
    double ns[99];
    for (int k = 0; k < reps; k++) {
        ns[k] = run(size, messages, max_senders);
        if (ns[k] < 0) {
            fprintf(stderr, "zimp_stream: a message arrived with wrong bytes\n");
            return 1;
        }
    }
    qsort(ns, (size_t)reps, sizeof *ns, cmp_double);
    printf("%zu B, max_senders %u: %.1f ns/message (median of %d; min %.1f, max %.1f)\n", size, max_senders,
           ns[reps / 2], reps, ns[0], ns[reps - 1]);
    return 0;
}
