/*
 * OSU-style MPI micro-benchmark in standard MPI C, built once per MPI
 * implementation (zimpcc, mpicc.openmpi, mpicc.mpich) and run by
 * scripts/mpi_bench.sh side by side. Tests:
 *   lat        ping-pong between ranks 0 and 1, one-way = round trip / 2 (us)
 *   bw         rank 0 sends windows of MPI_Isend to rank 1, which answers each
 *              window with a 4-byte ack (MB/s, 1 MB = 10^6 B)
 *   bcast, barrier, allreduce (MPI_INT, MPI_SUM), gather (root 0): time of
 *              one call, measured by every rank with a barrier before each
 *              call (not timed), averaged over the ranks (us)
 * For each test and size: a calibration burst of 4 iterations and a warm-up
 * of a tenth of the chosen count (both untimed), then --reps repeats of
 * `iters` iterations sized to last about --target-ms each; the median of the
 * repeats is reported. Rank 0 prints one CSV line per test and size:
 *   label,test,np,size,value,unit,iters,min,max,status
 * With --check every iteration carries a fresh pattern that every receiver
 * verifies (outside the timed part); without it each receiver verifies the
 * data of the last iteration. A wrong byte makes the status "error: ..." and
 * the exit status 1.
 *   mpirun -np N osu [--tests lat,bw,bcast,barrier,allreduce,gather]
 *       [--min B] [--max B] [--step 2|4] [--reps R] [--target-ms T]
 *       [--budget S] [--check] [--label NAME]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum test { T_LAT, T_BW, T_BCAST, T_BARRIER, T_ALLREDUCE, T_GATHER, T_COUNT };
static const char *const test_names[T_COUNT] = { "lat", "bw", "bcast", "barrier", "allreduce",
                                                 "gather" };

#define BW_WINDOW 64
#define BW_WINDOW_BYTES (16u << 20)   /* receive buffers of one window, at most */
#define MIN_ITERS 3L
#define MAX_ITERS 100000L

static int rank, nranks;
static int check_all;                 /* --check: verify every iteration */

/* Buffers of one size, allocated once per test and size. */
struct bufs {
    unsigned char *a, *b;             /* send / receive (bw: b holds the window) */
    int *ia, *ib;                     /* allreduce */
    size_t size;
    int window;                       /* bw */
};

/* ---- data patterns ---- */

static unsigned char pat(size_t i, unsigned seed)
{
    return (unsigned char)(seed * 29u + i * 7u + (i >> 8));
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pat(i, seed);
}

static long verify(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(i, seed))
            return 1;
    return 0;
}

/* allreduce: rank r contributes i + r + seed; the sum is n*i + n(n-1)/2 + n*seed. */
static void fill_ints(int *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (int)((i & 0xffff) + (unsigned)rank + (seed & 0xff));
}

static long verify_sum(const int *p, size_t n, unsigned seed)
{
    long nr = nranks;
    for (size_t i = 0; i < n; i++)
        if (p[i] != (int)(nr * (long)(i & 0xffff) + nr * (nr - 1) / 2 + nr * (long)(seed & 0xff)))
            return 1;
    return 0;
}

/* ---- one burst of iterations ---- */

/*
 * Runs `iters` iterations of test t; seeds start at `seed`. Returns the time
 * this rank measured (seconds) and adds detected errors to *bad. Whether an
 * iteration checks data: every one with --check, else the last one only.
 */
static double burst(enum test t, struct bufs *B, long iters, unsigned seed, long *bad)
{
    size_t n = B->size;
    double timed = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    switch (t) {
    case T_LAT: {
        if (rank > 1)
            break;
        int peer = 1 - rank;
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            int chk = check_all || i == iters - 1;
            unsigned s = seed + (unsigned)i;
            if (rank == 0) {
                if (check_all)
                    fill(B->a, n, s);
                MPI_Send(B->a, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(B->a, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (chk)
                    *bad += verify(B->a, n, check_all ? s + 1 : seed);
            } else {
                MPI_Recv(B->a, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (chk)
                    *bad += verify(B->a, n, check_all ? s : seed);
                if (check_all)
                    fill(B->a, n, s + 1);
                MPI_Send(B->a, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
        }
        timed = MPI_Wtime() - t0;
        break;
    }
    case T_BW: {
        if (rank > 1)
            break;
        MPI_Request req[BW_WINDOW];
        MPI_Status st[BW_WINDOW];     /* not MPI_STATUSES_IGNORE: MPICH's (MPI_Status *)1 upsets GCC */
        int ack = 0;
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            int chk = check_all || i == iters - 1;
            unsigned s = seed + (unsigned)i;
            if (rank == 0) {
                if (check_all)
                    fill(B->a, n, s);
                for (int w = 0; w < B->window; w++)
                    MPI_Isend(B->a, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &req[w]);
                MPI_Waitall(B->window, req, st);
                MPI_Recv(&ack, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                for (int w = 0; w < B->window; w++)
                    MPI_Irecv(B->b + (size_t)w * n, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &req[w]);
                MPI_Waitall(B->window, req, st);
                if (chk)
                    for (int w = 0; w < B->window; w++)
                        *bad += verify(B->b + (size_t)w * n, n, check_all ? s : seed);
                MPI_Send(&ack, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
            }
        }
        timed = MPI_Wtime() - t0;
        break;
    }
    case T_BCAST:
        for (long i = 0; i < iters; i++) {
            unsigned s = seed + (unsigned)i;
            if (check_all) {
                if (rank == 0)
                    fill(B->a, n, s);
                else
                    memset(B->a, 0, n);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Bcast(B->a, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
            timed += MPI_Wtime() - t0;
            if (rank > 0 && (check_all || i == iters - 1))
                *bad += verify(B->a, n, check_all ? s : seed);
        }
        break;
    case T_BARRIER:
        for (long i = 0; i < iters; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Barrier(MPI_COMM_WORLD);
            timed += MPI_Wtime() - t0;
        }
        break;
    case T_ALLREDUCE: {
        size_t cnt = n / sizeof(int);
        for (long i = 0; i < iters; i++) {
            unsigned s = seed + (unsigned)i;
            if (check_all)
                fill_ints(B->ia, cnt, s);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(B->ia, B->ib, (int)cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            timed += MPI_Wtime() - t0;
            if (check_all || i == iters - 1)
                *bad += verify_sum(B->ib, cnt, check_all ? s : seed);
        }
        break;
    }
    case T_GATHER:
        for (long i = 0; i < iters; i++) {
            unsigned s = seed + (unsigned)i;
            if (check_all)
                fill(B->a, n, s + (unsigned)rank);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Gather(B->a, (int)n, MPI_BYTE, B->b, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
            timed += MPI_Wtime() - t0;
            if (rank == 0 && (check_all || i == iters - 1))
                for (int r = 0; r < nranks; r++)
                    *bad += verify(B->b + (size_t)r * n, n, (check_all ? s : seed) + (unsigned)r);
        }
        break;
    default:
        break;
    }
    return timed;
}

/* The figure of one burst, as rank 0 reports it (every rank must call this). */
static double figure(enum test t, const struct bufs *B, long iters, double mine)
{
    if (t == T_LAT)
        return mine / (double)iters / 2 * 1e6;
    if (t == T_BW)
        return mine > 0 ? (double)B->size * B->window * (double)iters / mine / 1e6 : 0;
    double sum = 0;
    MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    return sum / nranks / (double)iters * 1e6;
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static int alloc_bufs(enum test t, size_t n, struct bufs *B)
{
    memset(B, 0, sizeof *B);
    B->size = n;
    size_t one = n ? n : 1;
    B->a = malloc(one);
    if (t == T_BW) {
        size_t w = BW_WINDOW_BYTES / one;
        B->window = w >= BW_WINDOW ? BW_WINDOW : w < 1 ? 1 : (int)w;
        B->b = malloc(one * (size_t)B->window);
    } else if (t == T_GATHER) {
        B->b = malloc(one * (size_t)nranks);
    } else if (t == T_ALLREDUCE) {
        B->ia = malloc(one);
        B->ib = malloc(one);
    }
    if (!B->a || (t == T_BW && !B->b) || (t == T_GATHER && !B->b) ||
        (t == T_ALLREDUCE && (!B->ia || !B->ib)))
        return -1;
    return 0;
}

static void free_bufs(struct bufs *B)
{
    free(B->a);
    free(B->b);
    free(B->ia);
    free(B->ib);
}

/*
 * Sets the buffers up for the last-iteration check of a run without
 * --check: the senders' data carry `seed`, the receivers' buffers are
 * cleared, so the final check proves the data moved.
 */
static void prepare(enum test t, struct bufs *B, unsigned seed)
{
    size_t n = B->size;
    switch (t) {
    case T_LAT:
    case T_BCAST:
        if (rank == 0)
            fill(B->a, n, seed);
        else
            memset(B->a, 0, n ? n : 1);
        break;
    case T_BW:
        fill(B->a, n, seed);
        memset(B->b, 0, (n ? n : 1) * (size_t)B->window);
        break;
    case T_GATHER:
        fill(B->a, n, seed + (unsigned)rank);
        memset(B->b, 0, (n ? n : 1) * (size_t)nranks);
        break;
    case T_ALLREDUCE:
        fill_ints(B->ia, n / sizeof(int), seed);
        memset(B->ib, 0, n ? n : 1);
        break;
    default:
        break;
    }
}

struct opts {
    int reps;
    double target;        /* seconds per repeat */
    double budget;        /* seconds for the whole run; 0: none */
    const char *label;
};

/* Calibrates, warms up and measures one test at one size; prints the line on rank 0. */
static long run_one(enum test t, size_t n, const struct opts *o, double start, long *bad_total)
{
    struct bufs B;
    int ok = alloc_bufs(t, n, &B) == 0, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (rank == 0)
            printf("%s,%s,%d,%zu,nan,,0,nan,nan,n/a (out of memory)\n", o->label, test_names[t], nranks, n);
        free_bufs(&B);
        return 0;
    }
    unsigned seed = (unsigned)n * 3u + (unsigned)t;
    long bad = 0, iters = 4;
    double wall0 = MPI_Wtime();
    if (!check_all)
        prepare(t, &B, seed);
    burst(t, &B, iters, seed, &bad);                 /* calibration */
    double per = (MPI_Wtime() - wall0) / (double)iters;
    long plan[2] = { 0, 0 };                         /* iterations, stop (over budget) */
    if (rank == 0) {
        long it = per > 0 ? (long)(o->target / per) : MAX_ITERS;
        plan[0] = it < MIN_ITERS ? MIN_ITERS : it > MAX_ITERS ? MAX_ITERS : it;
        plan[1] = o->budget > 0 && MPI_Wtime() - start > o->budget;
    }
    MPI_Bcast(plan, 2, MPI_LONG, 0, MPI_COMM_WORLD);
    iters = plan[0];
    if (plan[1]) {
        if (rank == 0)
            printf("%s,%s,%d,%zu,nan,,0,nan,nan,n/a (over the run's budget of %.0f s)\n", o->label,
                   test_names[t], nranks, n, o->budget);
        free_bufs(&B);
        return 0;
    }
    burst(t, &B, iters / 10 > 1 ? iters / 10 : 1, seed, &bad);   /* warm-up */
    double *v = malloc(sizeof(double) * (size_t)o->reps);
    for (int r = 0; r < o->reps; r++) {
        double mine = burst(t, &B, iters, seed, &bad);
        double f = figure(t, &B, iters, mine);
        if (v)
            v[r] = f;
    }
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && v) {
        qsort(v, (size_t)o->reps, sizeof *v, cmp_d);
        const char *unit = t == T_BW ? "MB/s" : "us";
        if (bad_all)
            printf("%s,%s,%d,%zu,nan,%s,%ld,nan,nan,error: %ld bad buffers\n", o->label, test_names[t],
                   nranks, n, unit, iters, bad_all);
        else
            printf("%s,%s,%d,%zu,%.3f,%s,%ld,%.3f,%.3f,ok\n", o->label, test_names[t], nranks, n,
                   v[o->reps / 2], unit, iters, v[0], v[o->reps - 1]);
    }
    if (rank == 0)
        fflush(stdout);
    *bad_total += bad_all;
    free(v);
    free_bufs(&B);
    return iters;
}

static size_t parse_size(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K')
        v <<= 10;
    else if (*end == 'm' || *end == 'M')
        v <<= 20;
    return v;
}

int main(int argc, char **argv)
{
    struct opts o = { 3, 0.03, 0, "mpi" };
    const char *tests = "lat,bw,bcast,barrier,allreduce,gather";
    size_t min = 1, max = 4u << 20, step = 4;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check"))
            check_all = 1;
        else if (v && !strcmp(a, "--tests"))
            tests = v, i++;
        else if (v && !strcmp(a, "--min"))
            min = parse_size(v), i++;
        else if (v && !strcmp(a, "--max"))
            max = parse_size(v), i++;
        else if (v && !strcmp(a, "--step"))
            step = parse_size(v), i++;
        else if (v && !strcmp(a, "--reps"))
            o.reps = atoi(v), i++;
        else if (v && !strcmp(a, "--target-ms"))
            o.target = atof(v) / 1e3, i++;
        else if (v && !strcmp(a, "--budget"))
            o.budget = atof(v), i++;
        else if (v && !strcmp(a, "--label"))
            o.label = v, i++;
        else {
            if (rank == 0)
                fprintf(stderr, "osu: unknown argument %s\n", a);
            MPI_Finalize();
            return 2;
        }
    }
    if (o.reps < 1)
        o.reps = 1;
    if (step < 2)
        step = 2;
    if (max > (size_t)1 << 30)
        max = (size_t)1 << 30;    /* counts are ints */
    double start = MPI_Wtime();
    long bad = 0;
    for (int t = 0; t < T_COUNT; t++) {
        char want[32];
        snprintf(want, sizeof want, ",%s,", test_names[t]);
        char list[256];
        snprintf(list, sizeof list, ",%s,", tests);
        if (!strstr(list, want))
            continue;
        if ((t == T_LAT || t == T_BW) && nranks < 2) {
            if (rank == 0)
                printf("%s,%s,%d,0,nan,,0,nan,nan,n/a (needs 2 ranks)\n", o.label, test_names[t], nranks);
            continue;
        }
        if (t == T_BARRIER) {
            run_one(T_BARRIER, 0, &o, start, &bad);
            continue;
        }
        for (size_t n = min; n <= max; n = n ? n * step : 1) {
            if (t == T_ALLREDUCE && n < sizeof(int))
                continue;                    /* whole ints only, as OSU */
            run_one((enum test)t, n, &o, start, &bad);
        }
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}
