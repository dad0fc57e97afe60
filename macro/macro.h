/*
 * Macro-benchmarks over any mechanism of bench/mech.h (after the ZIMP
 * report, Section IV-C, and REICoM, Sections V-B and V-C):
 *
 *   PaxosInside: client -> leader -> active acceptor -> 3 learners -> client.
 *     Per consensus: request (1:1), accept (1:1), decision (1:many, one
 *     send_end(MECH_ALL)), one reply per learner (1:1, to the client).
 *     Open loop: the leader forwards without waiting; the client keeps at
 *     most `window` consensus outstanding so no channel overfills.
 *   Snapshot: an initiator multicasts a 128 B request to n-1 nodes (1:many),
 *     each answers with its latest checkpoint (1:1); closed loop.
 *
 * Every role runs in its own forked process. Both protocols check
 * themselves: every learner learns the same sequence (count and hash), every
 * snapshot holds one checkpoint per node from that round. A run that does
 * not finish within timeout_s is killed and reported as an error.
 */
#ifndef ZIMP_MACRO_H
#define ZIMP_MACRO_H

#include <stddef.h>
#include <stdint.h>

#include "../bench/mech.h"

#define PAXOS_LEARNERS 3
#define SNAP_REQ_LEN   128
#define SNAP_MAX_NODES (MECH_MAX_RECV + 1)

struct paxos_opts {
    size_t size;        /* request (= accept = decision) bytes, >= 64 */
    uint64_t count;     /* decided values to wait for */
    unsigned window;    /* outstanding consensus, 0: default for the mechanism */
    double max_s;       /* > 0: stop proposing after this long (slow mechanisms) */
    double timeout_s;
};

struct paxos_result {
    int status;          /* 0 ok, 1 not applicable, <0 error */
    char note[160];
    double secs;         /* client: first request .. last reply */
    double per_s;        /* decided values per second */
    uint64_t decided;    /* count, or fewer if max_s cut the run short */
    uint64_t learned[PAXOS_LEARNERS];
    uint64_t hash[PAXOS_LEARNERS];
    unsigned window;
};

struct snap_opts {
    unsigned nodes;      /* initiator included, 2..SNAP_MAX_NODES */
    size_t ckpt;         /* checkpoint bytes, >= 64 */
    uint64_t count;      /* measured snapshots (after a short warm-up) */
    double max_s;        /* > 0: stop after this long (slow mechanisms) */
    double timeout_s;
};

struct snap_result {
    int status;
    char note[160];
    double mean_us, p50_us, p99_us;
    uint64_t done;       /* measured snapshots, fewer than count if max_s cut short */
    int oversubscribed;  /* more processes than cores */
};

int macro_paxos(const struct mech *m, const struct paxos_opts *o, struct paxos_result *r);
int macro_snapshot(const struct mech *m, const struct snap_opts *o, struct snap_result *r);
/* Mechanisms the macro-benchmarks run: every built-in one except external
 * (MPI, iceoryx2) and lossy (UDP) mechanisms. */
int macro_mech_usable(const struct mech *m);
double macro_now_s(void);

#endif
