/*
 * The environment: Init_thread levels (argument "level N": an invalid
 * required level N), Initialized/Finalized, versions,
 * processor name, clocks, COMM_SELF, statuses of empty requests.
 */
#include "mpitest.h"

int main(int argc, char **argv)
{
    int flag = 1;
    CHECK(MPI_Initialized(&flag) == MPI_SUCCESS && !flag);
    /* "level N": required N, which is none of the four levels: SINGLE, as in MPICH */
    int bad = argc > 2 && strcmp(argv[1], "level") == 0;
    int required = bad ? atoi(argv[2]) : MPI_THREAD_MULTIPLE;
    int expect = bad ? MPI_THREAD_SINGLE : MPI_THREAD_SERIALIZED;
    int provided = -99;
    CHECK(MPI_Init_thread(&argc, &argv, required, &provided) == MPI_SUCCESS);
    CHECK(provided == expect);
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    OK(MPI_Query_thread(&provided));
    CHECK(provided == expect);
    OK(MPI_Initialized(&flag));
    CHECK(flag);
    int v, sv;
    OK(MPI_Get_version(&v, &sv));
    CHECK(v == 3 && sv == 1);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING], host[MPI_MAX_PROCESSOR_NAME];
    int len;
    OK(MPI_Get_library_version(lib, &len));
    CHECK(len > 0 && strstr(lib, "zimp") != NULL);
    OK(MPI_Get_processor_name(host, &len));
    CHECK(len > 0 && (int)strlen(host) == len);
    double t0 = MPI_Wtime(), t1 = MPI_Wtime();
    CHECK(t1 >= t0 && MPI_Wtick() > 0 && MPI_Wtick() < 1);
    int r, s;
    OK(MPI_Comm_rank(MPI_COMM_SELF, &r));
    OK(MPI_Comm_size(MPI_COMM_SELF, &s));
    CHECK(r == 0 && s == 1);
    int x = 3, y = 0;
    OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF));
    CHECK(y == 3);
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Status st;
    OK(MPI_Wait(&req, &st));
    CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG);
    OK(MPI_Test(&req, &flag, &st));
    CHECK(flag);
    mt_done("t_env");
    OK(MPI_Finalized(&flag));
    CHECK(flag);
    return 0;
}
