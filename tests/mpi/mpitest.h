/*
 * Helpers of the MPI test programs: CHECK aborts the job (MPI_Abort) with
 * the rank, file and line, so zimprun reports the failing rank and exits
 * non-zero. Each program runs at any number of ranks.
 */
#ifndef ZIMP_MPITEST_H
#define ZIMP_MPITEST_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mt_rank, mt_size;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", mt_rank, __FILE__,     \
                    __LINE__, #cond);                                                   \
            fflush(stderr);                                                             \
            MPI_Abort(MPI_COMM_WORLD, 1);                                               \
        }                                                                               \
    } while (0)

/* A call that must succeed (under MPI_ERRORS_RETURN it would return the error). */
#define OK(call) CHECK((call) == MPI_SUCCESS)

static inline int mt_class(int rc)
{
    int cls = -1;
    MPI_Error_class(rc, &cls);
    return cls;
}

static inline void mt_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
}

static inline int mt_done(const char *name)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 0)
        printf("%s: passed on %d rank(s)\n", name, mt_size);
    MPI_Finalize();
    return 0;
}

#endif
