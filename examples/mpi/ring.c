/*
 * A token goes once around a ring of ranks (point-to-point), then every
 * rank checks an all-reduce. Prints one line from rank 0; exits non-zero
 * on a wrong result. Standard MPI only: builds with any mpicc.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, token;
    if (rank == 0) {
        token = 1;
        MPI_Send(&token, 1, MPI_INT, next, 0, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&token, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        token++;
        MPI_Send(&token, 1, MPI_INT, next, 0, MPI_COMM_WORLD);
    }
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int ok = sum == size * (size - 1) / 2 && (rank != 0 || token == size);
    if (rank == 0)
        printf("ring: token visited %d ranks, allreduce %s\n", token, ok ? "ok" : "WRONG");
    MPI_Finalize();
    return ok ? 0 : 1;
}
