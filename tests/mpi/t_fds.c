/*
 * A program that takes the descriptors it did not open: right after
 * MPI_Init every rank puts /dev/null over every descriptor from 3 to 1023
 * (t_fds dup2), or closes them all (t_fds close), as daemons do. The pidfds
 * the library watches its peers with are then another file (which reads
 * ready: it looked like every peer had died) or no file (a real death would
 * never be seen: t_kill fds). Every call must still succeed, with every
 * byte right: point-to-point small and large (cooperative rendezvous),
 * collectives, and a new communicator; and after MPI_Finalize the
 * program's descriptors are all still open.
 */
#include "mpitest.h"

#include <fcntl.h>
#include <unistd.h>

/* Returns the number /dev/null was opened at (closed again after), -1 for close. */
static int take_descriptors(int replace)
{
    int devnull = replace ? open("/dev/null", O_RDONLY) : -1;
    for (int fd = 3; fd < 1024; fd++)
        if (fd != devnull)
            replace ? (void)dup2(devnull, fd) : (void)close(fd);
    if (devnull >= 0)
        close(devnull);
    return devnull;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int replace = !(argc > 1 && strcmp(argv[1], "close") == 0);
    int own = take_descriptors(replace);
    enum { BIG = 1 << 20 };
    unsigned char *out = malloc(BIG), *in = malloc(BIG);
    CHECK(out && in);
    int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < BIG; i++)
            out[i] = (unsigned char)(i * 13 + mt_rank + round);
        int n = round % 2 ? BIG : 64;
        OK(MPI_Sendrecv(out, n, MPI_BYTE, next, 1, in, n, MPI_BYTE, prev, 1, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
        for (int i = 0; i < n; i++)
            CHECK(in[i] == (unsigned char)(i * 13 + prev + round));
        if (mt_rank == 0)
            memcpy(in, out, BIG);
        OK(MPI_Bcast(in, BIG, MPI_BYTE, 0, MPI_COMM_WORLD));
        for (int i = 0; i < BIG; i += 4093)
            CHECK(in[i] == (unsigned char)(i * 13 + 0 + round));
        int one = 1, sum = 0;
        OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(sum == mt_size);
        OK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_Comm dup;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, dup));
        CHECK(sum == mt_size);
        OK(MPI_Comm_free(&dup));
    }
    free(out);
    free(in);
    mt_done("t_fds");
    /* The library closed none of the program's descriptors (all of 3..1023 but `own`, after dup2). */
    for (int fd = 3; replace && fd < 1024; fd++)
        if (fd != own && fcntl(fd, F_GETFD) < 0) {
            fprintf(stderr, "rank %d: descriptor %d, the program's, was closed by the library\n", mt_rank, fd);
            return 1;
        }
    return 0;
}
