/*
 * A sender's cost with a stopped lossy receiver next to its cost with no
 * receiver at all: zimp_send of 64 B in a loop, one process, the lossy
 * receiver opened and never read (it never holds the sender back, so the
 * two should cost the same). Both channel kinds (one sender record, two).
 * Prints the median over --reps runs of each, and their ratio.
 *
 *   zimp_lossy_cost [--reps N] [--messages N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zimp/zimp.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ns per zimp_send of 64 B on a fresh channel, with or without a stopped lossy receiver. */
static double run(int lossy, unsigned max_senders, long messages)
{
    char name[64];
    snprintf(name, sizeof name, "lossy-cost-%d", (int)getpid());
    zimp_unlink(name);
    struct zimp_config c = { .slot_size = 64, .max_senders = max_senders };
    zimp_receiver *r = NULL;
    zimp_sender *s = NULL;
    if (zimp_create(name, &c) != 0 || (lossy && zimp_receiver_open_lossy(name, &r) != 0) ||
        zimp_sender_open(name, &s) != 0) {
        fprintf(stderr, "zimp_lossy_cost: %s\n", zimp_last_detail());
        exit(1);
    }
    char msg[64];
    memset(msg, 1, sizeof msg);
    for (long i = 0; i < messages / 10; i++)          /* warm-up: several rings */
        zimp_send(s, msg, sizeof msg, -1);
    double t0 = now_s();
    for (long i = 0; i < messages; i++)
        if (zimp_send(s, msg, sizeof msg, -1) != 0) {
            fprintf(stderr, "zimp_lossy_cost: zimp_send failed\n");
            exit(1);
        }
    double ns = (now_s() - t0) / (double)messages * 1e9;
    zimp_sender_close(s);
    zimp_receiver_close(r);
    zimp_unlink(name);
    return ns;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int reps = 7;
    long messages = 2000000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--messages"))
            messages = atol(argv[i + 1]);
    }
    if (reps < 1 || reps > 101 || messages < 1) {
        fprintf(stderr, "usage: zimp_lossy_cost [--reps 1..101] [--messages N]\n");
        return 2;
    }
    printf("zimp_send of 64 B, ns per message, median of %d runs of %ld\n", reps, messages);
    printf("%-12s %14s %20s %7s\n", "max_senders", "no receiver", "stopped lossy rx", "ratio");
    for (unsigned ms = 1; ms <= 2; ms++) {
        double none[101], lossy[101];
        for (int k = 0; k < reps; k++) {               /* interleaved: same conditions */
            none[k] = run(0, ms, messages);
            lossy[k] = run(1, ms, messages);
        }
        qsort(none, (size_t)reps, sizeof *none, cmp);
        qsort(lossy, (size_t)reps, sizeof *lossy, cmp);
        double a = none[reps / 2], b = lossy[reps / 2];
        printf("%-12u %14.1f %20.1f %7.2f\n", ms, a, b, b / a);
    }
    return 0;
}
