/*
 * Non-blocking collectives: Ibarrier and Ibcast, overlapping with
 * point-to-point traffic that only completes if they do not block, several
 * in flight at once with different roots, a large Ibcast.
 */
#include "mpitest.h"

/* Rank 0 starts an Ibarrier, then sends to rank 1, which receives before starting its own. */
static void ibarrier_overlap(void)
{
    MPI_Request r;
    int v = 5;
    if (mt_rank == 0) {
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
        if (mt_size > 1)
            OK(MPI_Send(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD));
    } else {
        if (mt_rank == 1)
            OK(MPI_Recv(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
    }
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(r == MPI_REQUEST_NULL && v == 5);
    int flag = 0;
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
    while (!flag)
        OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
}

static void ibcasts(void)
{
    enum { K = 4, BIG = 300000 };
    int vals[K];
    MPI_Request r[K + 1];
    for (int k = 0; k < K; k++) {
        int root = k % mt_size;
        vals[k] = mt_rank == root ? 100 + k : -1;
        OK(MPI_Ibcast(&vals[k], 1, MPI_INT, root, MPI_COMM_WORLD, &r[k]));
    }
    static double big[BIG];
    for (int i = 0; i < BIG; i++)
        big[i] = mt_rank == mt_size - 1 ? i * 0.25 : 0;
    OK(MPI_Ibcast(big, BIG, MPI_DOUBLE, mt_size - 1, MPI_COMM_WORLD, &r[K]));
    OK(MPI_Waitall(K + 1, r, MPI_STATUSES_IGNORE));
    for (int k = 0; k < K; k++)
        CHECK(vals[k] == 100 + k);
    for (int i = 0; i < BIG; i++)
        CHECK(big[i] == i * 0.25);
    /* A blocking collective while an Ibcast is pending. */
    int x = mt_rank == 0 ? 9 : 0, s = 0, one = 1;
    OK(MPI_Ibcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK(x == 9 && s == mt_size);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    for (int i = 0; i < 20; i++)
        ibarrier_overlap();
    ibcasts();
    return mt_done("t_nbc");
}
