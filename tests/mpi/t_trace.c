/*
 * The MPI layer's events in libzimp's trace, run at 2 ranks under
 * ZIMP_TRACE by run-trace.sh, which reads the archives back (zimp trace
 * show) and checks each event: MPI_Init and MPI_Finalize with the rank and
 * size, sends and receives with communicator, peer, tag and length, the
 * collectives with their root and length, and an error returned.
 */
#include "mpitest.h"

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    CHECK(mt_size == 2);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    char buf[64] = { 0 };
    int peer = 1 - mt_rank, v = mt_rank, sum = 0;
    if (mt_rank == 0) {
        OK(MPI_Send(buf, 64, MPI_BYTE, peer, 7, MPI_COMM_WORLD));
        OK(MPI_Recv(buf, 16, MPI_INT, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
        MPI_Request r;
        OK(MPI_Recv(buf, 64, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Isend(buf, 10, MPI_INT, peer, 8, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    OK(MPI_Bcast(&v, 1, MPI_INT, 1, MPI_COMM_WORLD));
    CHECK(v == 1);
    OK(MPI_Allreduce(&mt_rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == 1);
    int rc = MPI_Send(buf, 1, MPI_BYTE, 5, 0, MPI_COMM_WORLD);   /* no rank 5 */
    CHECK(mt_class(rc) == MPI_ERR_RANK);
    return mt_done("t_trace");
}
