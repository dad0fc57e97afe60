/*
 * The CPU a message costs the library, without a cache line moving between
 * CPUs: one sender and N receivers in one process, one thread. Each message
 * is loaned, written, published, then read, checked and released by every
 * receiver in turn. Prints ns per message, the best of --reps runs: what a
 * crowded machine pays per message (with more processes than CPUs every
 * receiver's instructions are serial time), and a steady number to compare
 * two builds of the library (LD_LIBRARY_PATH=...).
 *
 *   zimp_cpu_cost [--size BYTES] [--receivers N] [--messages N] [--reps N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zimp/zimp.h>

enum { MAX_RECEIVERS = 64 };

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "zimp_cpu_cost: %s: %s (%s)\n", what, zimp_strerror(rc), zimp_last_detail());
    exit(1);
}

static long arg(int argc, char **argv, const char *name, long dflt, long lo, long hi)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) {
            char *end;
            long v = strtol(argv[i + 1], &end, 0);
            if (*end || v < lo || v > hi) {
                fprintf(stderr, "zimp_cpu_cost: %s wants %ld..%ld\n", name, lo, hi);
                exit(2);
            }
            return v;
        }
    return dflt;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i += 2)
        if (strcmp(argv[i], "--size") && strcmp(argv[i], "--receivers") && strcmp(argv[i], "--messages") &&
            strcmp(argv[i], "--reps")) {
            fprintf(stderr, "usage: zimp_cpu_cost [--size BYTES] [--receivers N] [--messages N] [--reps N]\n");
            return 2;
        }
    size_t size = (size_t)arg(argc, argv, "--size", 1, 1, 1 << 20);
    int nrecv = (int)arg(argc, argv, "--receivers", 1, 1, MAX_RECEIVERS);
    long messages = arg(argc, argv, "--messages", 2000000, 1, 1L << 40);
    int reps = (int)arg(argc, argv, "--reps", 7, 1, 1000);

    char name[64];
    snprintf(name, sizeof name, "zimp-cpu-cost-%d", (int)getpid());
    struct zimp_config cfg = { .slots = 256, .slot_size = (uint32_t)(size < 64 ? 64 : size),
                               .max_senders = 1, .max_receivers = MAX_RECEIVERS };
    int rc = zimp_create(name, &cfg);
    if (rc)
        die("zimp_create", rc);
    zimp_sender *s;
    zimp_receiver *r[MAX_RECEIVERS];
    if ((rc = zimp_sender_open(name, &s)))
        die("zimp_sender_open", rc);
    for (int k = 0; k < nrecv; k++)
        if ((rc = zimp_receiver_open(name, &r[k])))
            die("zimp_receiver_open", rc);

    double best = 0;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now_ns();
        for (long i = 0; i < messages; i++) {
            void *buf;
            if ((rc = zimp_loan(s, size, &buf, -1)))
                die("zimp_loan", rc);
            memset(buf, (int)(i & 0xff), size);
            if ((rc = zimp_publish(s, buf, size)))
                die("zimp_publish", rc);
            for (int k = 0; k < nrecv; k++) {
                const void *m;
                size_t got;
                if ((rc = zimp_read(r[k], &m, &got, -1)))
                    die("zimp_read", rc);
                const unsigned char *b = m;
                if (got != size || b[0] != (unsigned char)i || b[got - 1] != (unsigned char)i) {
                    fprintf(stderr, "zimp_cpu_cost: message %ld arrived wrong\n", i);
                    return 1;
                }
                if ((rc = zimp_release(r[k])))
                    die("zimp_release", rc);
            }
        }
        double ns = (now_ns() - t0) / (double)messages;
        if (rep == 0 || ns < best)
            best = ns;
    }
    printf("%zu B, %d receiver%s: %.1f ns of CPU per message (best of %d runs of %ld)\n", size, nrecv,
           nrecv == 1 ? "" : "s", best, reps, messages);
    zimp_sender_close(s);
    for (int k = 0; k < nrecv; k++)
        zimp_receiver_close(r[k]);
    zimp_unlink(name);
    return 0;
}
