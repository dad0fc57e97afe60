/*
 * Failure behaviour, driven by run-kill.sh. The last rank is the victim
 * (rank 0 in barrier0):
 *   recv   it dies (SIGKILL) while the others wait for it in MPI_Recv under
 *          MPI_ERRORS_RETURN: their pending and later calls must fail.
 *   bcast  it dies during a loop of large broadcasts (ERRORS_RETURN).
 *   barrier it dies during a loop of barriers (ERRORS_RETURN): the survivors
 *          wait on the shared barrier page and must fail, not hang.
 *   barrier0 the same with rank 0 as the victim.
 *   barrier_lead the same with each barrier followed by a broadcast from
 *          rank 0, so rank 0 releases every barrier, and rank 0 dies.
 *   nbc    it dies during a loop of non-blocking collectives (Iallreduce,
 *          Igather, Ialltoall of 1 MiB and more, ERRORS_RETURN): the
 *          survivors' waits fail.
 *   coop   it sends a stream of 16 MiB messages, each copied by both ranks
 *          (src/mpi/coop.c), to rank 0 and dies amid them: rank 0's
 *          receive must fail, not wait for a chunk the dead sender took.
 *   stream it starts an 8 MiB send to rank 0 and dies while it streams
 *          (run with ZIMP_MPI_CMA=0); rank 0 saw the message begin
 *          (MPI_Iprobe) and noticed the death before it posts its receive,
 *          which must fail, not wait for the rest of the stream.
 *   fds    as recv, after every rank closed every descriptor from 3 to
 *          1023 (the pidfds the library watches its peers with among
 *          them): the death must still be seen.
 *   fatal  as recv, with the default MPI_ERRORS_ARE_FATAL: the job aborts.
 *   hang   nobody dies: every rank waits forever in MPI_Recv (for the
 *          launcher tests: kill -9 of zimprun, signal forwarding).
 * Survivors print "survivor R: ..." once their calls have failed.
 */
#include "mpitest.h"

#include <signal.h>
#include <stdbool.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static void die_now(int sig)
{
    (void)sig;
    kill(getpid(), SIGKILL);
}

/* The victim dies `ms` milliseconds from now, whatever call it is in. */
static void die_in(int ms)
{
    signal(SIGALRM, die_now);
    struct itimerval it = { { 0, 0 }, { ms / 1000, (ms % 1000) * 1000 } };
    setitimer(ITIMER_REAL, &it, NULL);
}

static void survivor(const char *what, int rc, double t0)
{
    printf("survivor %d: %s failed with class %d after %.0f ms\n", mt_rank, what, mt_class(rc),
           (MPI_Wtime() - t0) * 1e3);
    fflush(stdout);
}

static void later_calls_fail(int victim)
{
    int v = 0;
    CHECK(MPI_Send(&v, 1, MPI_INT, victim, 1, MPI_COMM_WORLD) != MPI_SUCCESS);
    /* buffered too (MPI_Bsend dropped the message and answered MPI_SUCCESS) */
    static char buf[1024];
    CHECK(MPI_Buffer_attach(buf, sizeof buf) == MPI_SUCCESS);
    CHECK(mt_class(MPI_Bsend(&v, 1, MPI_INT, victim, 1, MPI_COMM_WORLD)) == MPIX_ERR_PROC_FAILED);
    void *b;
    int n;
    CHECK(MPI_Buffer_detach(&b, &n) == MPI_SUCCESS);
    CHECK(MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS);
    CHECK(MPI_Allreduce(&v, &v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS);
}

static void mode_recv(int victim, bool fatal)
{
    if (!fatal)
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == victim) {
        die_in(100);
        for (;;)
            pause();
    }
    double t0 = MPI_Wtime();
    int v, rc;
    if (mt_rank == 0)
        rc = MPI_Recv(&v, 1, MPI_INT, victim, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        rc = MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(!fatal);                         /* the fatal handler never returns */
    CHECK(mt_class(rc) == MPIX_ERR_PROC_FAILED);
    later_calls_fail(victim);
    survivor("MPI_Recv", rc, t0);
}

static void mode_bcast(int victim)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    enum { N = 1 << 20 };
    static double buf[N];
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == victim)
        die_in(50);
    double t0 = MPI_Wtime();
    for (long i = 0;; i++) {
        int rc = MPI_Bcast(buf, N, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            CHECK(mt_class(rc) == MPIX_ERR_PROC_FAILED);
            later_calls_fail(victim);
            survivor("MPI_Bcast", rc, t0);
            return;
        }
    }
}

static void mode_coop(int victim)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    enum { N = 16 << 20 };
    char *buf = malloc(N);
    CHECK(buf != NULL);
    memset(buf, 1, N);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == victim) {
        die_in(100);
        for (;;)
            MPI_Send(buf, N, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
    }
    double t0 = MPI_Wtime();
    for (long i = 0; mt_rank == 0; i++) {
        int rc = MPI_Recv(buf, N, MPI_CHAR, victim, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            CHECK(mt_class(rc) == MPIX_ERR_PROC_FAILED);
            later_calls_fail(victim);
            survivor("MPI_Recv of 16 MiB", rc, t0);
            break;
        }
    }
    free(buf);
}

static void mode_stream(int victim)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    enum { N = 8 << 20 };
    char *buf = malloc(N);
    CHECK(buf != NULL);
    memset(buf, 1, N);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == victim) {
        MPI_Request r;
        MPI_Isend(buf, N, MPI_CHAR, 0, 8, MPI_COMM_WORLD, &r);
        die_in(3);
        for (int flag;;)
            MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    }
    if (mt_rank == 0) {
        double t0 = MPI_Wtime();
        int flag = 0;
        while (!flag)
            MPI_Iprobe(victim, 8, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        usleep(300000);                    /* it is dead by now: progress sees it */
        for (double t = MPI_Wtime(); MPI_Wtime() - t < 0.1;)
            MPI_Iprobe(0, 999, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        int rc = MPI_Recv(buf, N, MPI_CHAR, victim, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(mt_class(rc) == MPIX_ERR_PROC_FAILED);
        survivor("MPI_Recv of a stream its sender died in", rc, t0);
    }
    free(buf);
}

static void mode_barrier(int victim, bool lead)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == victim)
        die_in(50);
    double t0 = MPI_Wtime();
    for (long i = 0;; i++) {
        int v = 0, rc = MPI_Barrier(MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS && lead)
            rc = MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            CHECK(mt_class(rc) == MPIX_ERR_PROC_FAILED);
            later_calls_fail(victim);
            survivor("MPI_Barrier", rc, t0);
            return;
        }
    }
}

static void mode_nbc(int victim)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    enum { N = 1 << 17 };
    static double a[N], b[N * 8], c[N];
    CHECK(mt_size <= 8);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == victim)
        die_in(50);
    double t0 = MPI_Wtime();
    for (long i = 0;; i++) {
        MPI_Request r[3];
        int rc = MPI_Iallreduce(a, c, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r[0]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Igather(a, N, MPI_DOUBLE, b, N, MPI_DOUBLE, 0, MPI_COMM_WORLD, &r[1]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Ialltoall(b, N / 8, MPI_DOUBLE, b + N * 4, N / 8, MPI_DOUBLE, MPI_COMM_WORLD, &r[2]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Waitall(3, r, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            CHECK(mt_class(rc) == MPIX_ERR_PROC_FAILED || mt_class(rc) == MPI_ERR_IN_STATUS);
            later_calls_fail(victim);
            survivor("non-blocking collectives", rc, t0);
            return;
        }
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "recv";
    bool lead = strcmp(mode, "barrier_lead") == 0;
    int victim = strcmp(mode, "barrier0") == 0 || lead ? 0 : mt_size - 1;
    CHECK(mt_size >= 2 || strcmp(mode, "hang") == 0);
    if (strcmp(mode, "fds") == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        mode_recv(victim, false);
    } else if (strcmp(mode, "recv") == 0 || strcmp(mode, "fatal") == 0) {
        mode_recv(victim, strcmp(mode, "fatal") == 0);
    } else if (strcmp(mode, "bcast") == 0) {
        mode_bcast(victim);
    } else if (strcmp(mode, "barrier") == 0 || strcmp(mode, "barrier0") == 0 || lead) {
        mode_barrier(victim, lead);
    } else if (strcmp(mode, "nbc") == 0) {
        mode_nbc(victim);
    } else if (strcmp(mode, "coop") == 0) {
        mode_coop(victim);
    } else if (strcmp(mode, "stream") == 0) {
        mode_stream(victim);
    } else {
        int v;
        MPI_Barrier(MPI_COMM_WORLD);
        printf("ready %d\n", mt_rank);
        fflush(stdout);
        MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return 0;                              /* no MPI_Finalize: its barrier would fail too */
}
