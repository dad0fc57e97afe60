/*
 * zimp-trace-cost SIZE SECONDS [ROUNDS]: what a message costs the calling
 * thread. One thread sends a SIZE-byte message and receives it again on a
 * private channel (one sender, one receiver, no waiting) for SECONDS, ROUNDS
 * times; prints the best and the median messages/s. Run it with the library
 * built with and without trace hook sites (LD_LIBRARY_PATH), and with
 * ZIMP_TRACE set or not, to see what tracing costs (docs/tracing.md).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zimp/zimp.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: zimp-trace-cost SIZE SECONDS [ROUNDS]\n");
        return 2;
    }
    size_t size = strtoul(argv[1], NULL, 10);
    double secs = atof(argv[2]);
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    char name[64];
    snprintf(name, sizeof name, "trace-cost-%d", (int)getpid());
    struct zimp_config cfg = { .slots = 64, .slot_size = (uint32_t)(size > 64 ? size : 64) };
    zimp_sender *s;
    zimp_receiver *r;
    if (zimp_create(name, &cfg) || zimp_receiver_open(name, &r) || zimp_sender_open(name, &s)) {
        fprintf(stderr, "zimp-trace-cost: %s\n", zimp_last_detail());
        return 1;
    }
    zimp_unlink(name);
    char *msg = calloc(1, size + 1), *buf = malloc(size + 1);
    double *rate = calloc((size_t)rounds, sizeof *rate);
    long total = 0;
    for (int k = 0; k < rounds; k++) {
        long n = 0;
        double t0 = now(), t;
        do {
            for (int i = 0; i < 256; i++, n++) {
                memcpy(msg, &n, size < sizeof n ? size : sizeof n);
                if (zimp_send(s, msg, size, -1) != 0 || zimp_recv(r, buf, size, -1) != (ssize_t)size)
                    return 1;
            }
        } while ((t = now()) - t0 < secs);
        rate[k] = (double)n / (t - t0);
        total += n;
    }
    qsort(rate, (size_t)rounds, sizeof *rate, cmp);
    printf("%zu B: best %.0f msgs/s (%.1f ns/msg), median %.0f msgs/s (%.1f ns/msg), %ld messages\n",
           size, rate[rounds - 1], 1e9 / rate[rounds - 1], rate[rounds / 2], 1e9 / rate[rounds / 2], total);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    free(msg);
    free(buf);
    free(rate);
    return 0;
}
