/* MPI hello world: the README's example. Build: zimpcc hello.c -o hello; run: zimprun -n 4 ./hello */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, token = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        token = 42;
    MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);   /* on zimp: one write, every rank reads it */
    printf("hello from rank %d of %d, token %d\n", rank, size, token);
    MPI_Finalize();
    return 0;
}
