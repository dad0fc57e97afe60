/*
 * MPI peer of zimp_bench, built once per MPI implementation. Rank 0 sends,
 * ranks 1..N receive. For each size: one-to-many with MPI_Bcast and with N
 * MPI_Send calls, then (ranks 0 and 1) MPI_Send/MPI_Recv ping-pong at 64 B.
 * A short calibration burst fixes the message count so every rank runs the
 * same loop. Every message is sequence-checked (bench/msg.h). Prints the
 * zimp_bench external-program lines on rank 0.
 *   mpirun -np N+1 bench_mpi --seconds S --sizes 1,64,... --label NAME [--check]
 */
#define _GNU_SOURCE
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../msg.h"

static int rank, world, full;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs count messages of len bytes; returns this receiver's errors. */
static long stream(int bcast, size_t len, long count, unsigned char *buf, double *secs)
{
    long bad = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long s = 0; s < count; s++) {
        if (rank == 0)
            msg_write(buf, len, (uint64_t)s, full);
        if (bcast) {
            MPI_Bcast(buf, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD);
        } else if (rank == 0) {
            for (int r = 1; r < world; r++)
                MPI_Send(buf, (int)len, MPI_BYTE, r, 1, MPI_COMM_WORLD);
        } else {
            MPI_Recv(buf, (int)len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        if (rank > 0 && msg_check(buf, len, (uint64_t)s, full) < 0)
            bad++;
    }
    *secs = MPI_Wtime() - t0;
    return bad;
}

static void run_size(int bcast, size_t len, double seconds, const char *label)
{
    unsigned char *buf = malloc(len ? len : 1);
    double secs;
    long count = 4;
    stream(bcast, len, count, buf, &secs);              /* calibration: 4, then ~10% */
    for (int pass = 0; pass < 2; pass++) {
        if (rank == 0) {
            double per = secs / (double)count;
            double want = pass == 0 ? seconds / 10 : seconds;
            count = per > 0 ? (long)(want / per) : 100000;
            count = count < 4 ? 4 : count > 20000000 ? 20000000 : count;
        }
        MPI_Bcast(&count, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        if (pass == 0)
            stream(bcast, len, count, buf, &secs);
    }
    long bad = stream(bcast, len, count, buf, &secs);
    double mine[2] = { rank ? (double)count / secs : 0, (double)bad };
    double *all = rank == 0 ? malloc(sizeof(double) * 2 * (size_t)world) : NULL;
    MPI_Gather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double sum = 0, mn = INFINITY, errs = 0;
        for (int r = 1; r < world; r++) {
            sum += all[2 * r];
            mn = all[2 * r] < mn ? all[2 * r] : mn;
            errs += all[2 * r + 1];
        }
        if (errs > 0)
            printf("stream,%s-%s,%d,%zu,0,0,0,nan,error: %.0f messages failed the check\n", label,
                   bcast ? "bcast" : "send", world - 1, len, errs);
        else
            printf("stream,%s-%s,%d,%zu,%.1f,%.1f,0,%.1f,ok\n", label, bcast ? "bcast" : "send",
                   world - 1, len, sum / (world - 1), mn, secs / (double)count * 1e9);
        fflush(stdout);
        free(all);
    }
    free(buf);
}

static void pingpong(size_t len, double seconds, const char *label)
{
    unsigned char *buf = malloc(len);
    long count = 200;
    double *samp = NULL;
    long bad = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && rank == 0)
            samp = malloc(sizeof(double) * (size_t)count);
        MPI_Barrier(MPI_COMM_WORLD);
        double t_start = MPI_Wtime();
        for (long s = 0; s < count && rank < 2; s++) {
            if (rank == 0) {
                double t0 = MPI_Wtime();
                msg_write(buf, len, (uint64_t)s, full);
                MPI_Send(buf, (int)len, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)len, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                bad += msg_check(buf, len, (uint64_t)s, full) < 0;
                if (samp)
                    samp[s] = (MPI_Wtime() - t0) / 2 * 1e9;
            } else {
                MPI_Recv(buf, (int)len, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                bad += msg_check(buf, len, (uint64_t)s, full) < 0;
                MPI_Send(buf, (int)len, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
            }
        }
        if (pass == 0 && rank == 0) {
            double per = (MPI_Wtime() - t_start) / (double)count;
            count = per > 0 ? (long)(seconds / per) : 100000;
            count = count < 100 ? 100 : count > 2000000 ? 2000000 : count;
        }
        MPI_Bcast(&count, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    }
    long total_bad = 0;
    MPI_Reduce(&bad, &total_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(samp, (size_t)count, sizeof *samp, cmp_d);
        double sum = 0;
        for (long i = 0; i < count; i++)
            sum += samp[i];
        if (total_bad)
            printf("pingpong,%s-send,%zu,0,0,0,0,0,0,error: %ld messages failed the check\n", label,
                   len, total_bad);
        else
            printf("pingpong,%s-send,%zu,%.0f,%.0f,%.0f,%.0f,%.1f,%ld,ok\n", label, len,
                   samp[count / 2], samp[(long)(0.99 * (double)(count - 1))],
                   samp[(long)(0.999 * (double)(count - 1))], samp[count - 1], sum / (double)count,
                   count);
        fflush(stdout);
    }
    free(samp);
    free(buf);
}

int main(int argc, char **argv)
{
    double seconds = 0.1;
    const char *sizes = "1,64,4096", *label = "mpi";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
            sizes = argv[++i];
        else if (!strcmp(argv[i], "--label") && i + 1 < argc)
            label = argv[++i];
        else if (!strcmp(argv[i], "--check"))
            full = 1;
    }
    if (world < 2) {
        if (rank == 0)
            printf("stream,%s-bcast,0,0,0,0,0,nan,n/a (needs at least 2 ranks)\n", label);
        MPI_Finalize();
        return 0;
    }
    for (const char *p = sizes; *p;) {
        size_t len = strtoul(p, NULL, 10);
        run_size(1, len, seconds, label);
        run_size(0, len, seconds, label);
        const char *c = strchr(p, ',');
        p = c ? c + 1 : p + strlen(p);
    }
    if (world - 1 == 1)
        pingpong(64, seconds, label);
    MPI_Finalize();
    return 0;
}
