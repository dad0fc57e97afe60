/*
 * Measurements driving any struct mech in forked processes: one-to-many
 * streaming throughput, one-to-one ping-pong latency, and the cache-line
 * ping-pong probe. Each call forks its own processes and reaps them; a run
 * that does not finish in time is killed and reported as an error.
 */
#ifndef ZIMP_BENCH_RUN_H
#define ZIMP_BENCH_RUN_H

#include "mech.h"

struct run_opts {
    double seconds;        /* measured streaming / ping-pong time */
    int full_check;        /* sender fills every byte, receivers check every byte */
    uint64_t max_msgs;     /* stop after this many messages (0: time only) */
};

struct stream_result {
    int status;            /* 0 ok, 1 not applicable, <0 error */
    char note[160];        /* why n/a, or what failed */
    int pinned;            /* one process per core */
    double msgs_per_s;     /* per receiver, mean over receivers */
    double min_msgs_per_s; /* slowest receiver */
    double mb_per_s;       /* per receiver, 1 MB = 1e6 B */
    double loss;           /* fraction of messages lost (lossy mechanisms) */
    double send_p50_ns;    /* sender: send_begin..send_end incl. waiting for room, median */
    uint64_t msgs;         /* messages delivered to each receiver (mean) */
};

struct lat_result {
    int status;            /* as above */
    char note[160];
    int pinned;
    double p50, p99, p999, max, mean;   /* one-way ns = round trip / 2 */
    double send_p50_ns;    /* pinger: send_begin..send_end (never waits for room) */
    uint64_t samples;
};

int  run_stream(const struct mech *m, unsigned nrecv, size_t size,
                const struct run_opts *o, struct stream_result *out);
int  run_pingpong(const struct mech *m, size_t size,
                  const struct run_opts *o, struct lat_result *out);
/* One-way cache-line transfer time between two pinned processes (ns);
 * NAN with fewer than two usable cores. */
double run_probe(double seconds);

double run_now_s(void);

#endif
