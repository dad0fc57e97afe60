/*
 * pi by the midpoint rule, the classic MPI example: the root broadcasts the
 * number of intervals, every rank sums its share, a reduction adds them up.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, n = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        n = 1000000;
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    double h = 1.0 / n, part = 0.0, pi = 0.0;
    for (int i = rank; i < n; i += size) {
        double x = h * (i + 0.5);
        part += 4.0 / (1.0 + x * x);
    }
    part *= h;
    MPI_Reduce(&part, &pi, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    int ok = 1;
    if (rank == 0) {
        ok = fabs(pi - 3.141592653589793) < 1e-9;
        printf("pi is about %.12f (%s)\n", pi, ok ? "ok" : "WRONG");
    }
    MPI_Finalize();
    return ok ? 0 : 1;
}
