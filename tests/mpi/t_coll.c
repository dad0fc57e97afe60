/*
 * Collectives: every collective, every predefined op on int and double
 * (MINLOC/MAXLOC on their pair types), MPI_ERR_OP on every rank for an
 * operator the datatype lacks, MPI_IN_PLACE variants, every root,
 * non-commutative user operators (order), large broadcasts (many chunks),
 * barriers that hold everyone until the last arrives, whoever releases them
 * (and leave every rank's CPU mask as it was).
 */
#define _GNU_SOURCE                       /* sched_getaffinity */
#include "mpitest.h"

#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#define COUNT 5

/* What rank r contributes at position i for op index k. */
static int ival(int k, int r, int i)
{
    switch (k) {
    case 3: return r % 3 + 1 + (i % 2);          /* PROD: small factors */
    case 4: case 6: case 8: return (r + i) % 2;  /* logical */
    case 5: case 7: case 9: return (1 << (r % 16)) | (i << 20);   /* bitwise */
    default: return r * 7 - 3 + i;
    }
}

static int iexpect(int k, int n, int i)
{
    int acc = ival(k, 0, i);
    for (int r = 1; r < n; r++) {
        int v = ival(k, r, i);
        switch (k) {
        case 0: acc = v > acc ? v : acc; break;
        case 1: acc = v < acc ? v : acc; break;
        case 2: acc += v; break;
        case 3: acc *= v; break;
        case 4: acc = acc && v; break;
        case 5: acc &= v; break;
        case 6: acc = acc || v; break;
        case 7: acc |= v; break;
        case 8: acc = !acc != !v; break;
        case 9: acc ^= v; break;
        }
    }
    return acc;
}

static const MPI_Op int_ops[] = { MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD, MPI_LAND, MPI_BAND,
                                  MPI_LOR, MPI_BOR, MPI_LXOR, MPI_BXOR };

static void int_reductions(void)
{
    for (int k = 0; k < 10; k++) {
        int in[COUNT], out[COUNT], expect[COUNT];
        for (int i = 0; i < COUNT; i++) {
            in[i] = ival(k, mt_rank, i);
            expect[i] = iexpect(k, mt_size, i);
        }
        for (int root = 0; root < mt_size; root += mt_size > 1 ? mt_size - 1 : 1) {
            memset(out, 0, sizeof out);
            OK(MPI_Reduce(in, out, COUNT, MPI_INT, int_ops[k], root, MPI_COMM_WORLD));
            if (mt_rank == root)
                CHECK(memcmp(out, expect, sizeof out) == 0);
            int io[COUNT];                 /* in place at the root */
            memcpy(io, in, sizeof io);
            if (mt_rank == root)
                OK(MPI_Reduce(MPI_IN_PLACE, io, COUNT, MPI_INT, int_ops[k], root, MPI_COMM_WORLD));
            else
                OK(MPI_Reduce(io, NULL, COUNT, MPI_INT, int_ops[k], root, MPI_COMM_WORLD));
            if (mt_rank == root)
                CHECK(memcmp(io, expect, sizeof io) == 0);
        }
        OK(MPI_Allreduce(in, out, COUNT, MPI_INT, int_ops[k], MPI_COMM_WORLD));
        CHECK(memcmp(out, expect, sizeof out) == 0);
        memcpy(out, in, sizeof out);
        OK(MPI_Allreduce(MPI_IN_PLACE, out, COUNT, MPI_INT, int_ops[k], MPI_COMM_WORLD));
        CHECK(memcmp(out, expect, sizeof out) == 0);
    }
}

static void double_reductions(void)
{
    const MPI_Op ops[] = { MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD };
    for (int k = 0; k < 4; k++) {
        double in[COUNT], out[COUNT], expect[COUNT];
        for (int i = 0; i < COUNT; i++) {
            in[i] = (double)ival(k, mt_rank, i) * 0.5;
            double acc = (double)ival(k, 0, i) * 0.5;
            for (int r = 1; r < mt_size; r++) {
                double v = (double)ival(k, r, i) * 0.5;
                acc = k == 0 ? (v > acc ? v : acc) : k == 1 ? (v < acc ? v : acc) : k == 2 ? acc + v : acc * v;
            }
            expect[i] = acc;
        }
        OK(MPI_Allreduce(in, out, COUNT, MPI_DOUBLE, ops[k], MPI_COMM_WORLD));
        for (int i = 0; i < COUNT; i++)
            CHECK(out[i] == expect[i]);  /* exact: halves of small integers, rank order */
        OK(MPI_Reduce(in, out, COUNT, MPI_DOUBLE, ops[k], 0, MPI_COMM_WORLD));
        if (mt_rank == 0)
            for (int i = 0; i < COUNT; i++)
                CHECK(out[i] == expect[i]);
    }
}

static void loc_reductions(void)
{
    struct { int v, i; } in2 = { (mt_rank * 5) % 7, mt_rank }, out2;
    struct { double v; int i; } ind = { (double)((mt_rank * 3) % 4), mt_rank }, outd;
    OK(MPI_Allreduce(&in2, &out2, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD));
    int best = 1 << 30, at = -1;
    for (int r = 0; r < mt_size; r++)
        if ((r * 5) % 7 < best)
            best = (r * 5) % 7, at = r;
    CHECK(out2.v == best && out2.i == at);
    OK(MPI_Allreduce(&ind, &outd, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    double bd = -1;
    at = -1;
    for (int r = 0; r < mt_size; r++)
        if ((double)((r * 3) % 4) > bd)
            bd = (double)((r * 3) % 4), at = r;
    CHECK(outd.v == bd && outd.i == at);
}

/*
 * An operator not defined on the datatype is an error of the arguments every
 * member passes: every reduction returns MPI_ERR_OP on every rank, at entry,
 * on any communicator (also of size 1), and nothing is left half done (the
 * communicator still works). Before the fix rank 0 alone returned it and
 * the others hung; on one rank the calls succeeded.
 */
static void op_type_mismatch_on(MPI_Comm comm)
{
    int size;
    OK(MPI_Comm_size(comm, &size));
    MPI_Datatype fvec;
    OK(MPI_Type_vector(2, 1, 2, MPI_FLOAT, &fvec));
    OK(MPI_Type_commit(&fvec));
    struct { MPI_Datatype dt; MPI_Op op; } bad[] = {
        { MPI_FLOAT, MPI_BAND }, { MPI_DOUBLE_INT, MPI_SUM }, { MPI_INT, MPI_MINLOC },
        { MPI_DOUBLE, MPI_LXOR }, { fvec, MPI_BOR }, { MPI_2INT, MPI_PROD },
    };
    double in[64] = { 0 }, out[64];       /* room for 2 elements of any of them */
    int *counts = malloc(sizeof(int) * (size_t)size);
    CHECK(counts);
    for (int i = 0; i < size; i++)
        counts[i] = 1;
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        MPI_Datatype dt = bad[k].dt;
        MPI_Op op = bad[k].op;
        MPI_Request r = MPI_REQUEST_NULL;
        CHECK(mt_class(MPI_Reduce(in, out, 2, dt, op, 0, comm)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Allreduce(in, out, 2, dt, op, comm)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Allreduce(MPI_IN_PLACE, out, 2, dt, op, comm)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Reduce_scatter_block(in, out, 1, dt, op, comm)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Reduce_scatter(in, out, counts, dt, op, comm)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Scan(in, out, 2, dt, op, comm)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Exscan(in, out, 2, dt, op, comm)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Ireduce(in, out, 2, dt, op, 0, comm, &r)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Iallreduce(in, out, 2, dt, op, comm, &r)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Ireduce_scatter_block(in, out, 1, dt, op, comm, &r)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Ireduce_scatter(in, out, counts, dt, op, comm, &r)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Iscan(in, out, 2, dt, op, comm, &r)) == MPI_ERR_OP);
        CHECK(mt_class(MPI_Iexscan(in, out, 2, dt, op, comm, &r)) == MPI_ERR_OP);
        CHECK(r == MPI_REQUEST_NULL);
    }
    int one = 1, sum = 0;
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm));
    CHECK(sum == size);
    free(counts);
    OK(MPI_Type_free(&fvec));
}

static void op_type_mismatch(void)
{
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    op_type_mismatch_on(dup);
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    op_type_mismatch_on(MPI_COMM_SELF);
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
}

/* x op y = x and x op y = y: associative, not commutative; MPI's order decides. */
static void first_fn(void *in, void *io, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++)
        ((int *)io)[i] = ((int *)in)[i];
}

static void last_fn(void *in, void *io, int *len, MPI_Datatype *dt)
{
    (void)in, (void)io, (void)len, (void)dt;
}

static void user_ops(void)
{
    MPI_Op first, last;
    OK(MPI_Op_create(first_fn, 0, &first));
    OK(MPI_Op_create(last_fn, 0, &last));
    int v = mt_rank + 10, out;
    OK(MPI_Allreduce(&v, &out, 1, MPI_INT, first, MPI_COMM_WORLD));
    CHECK(out == 10);
    OK(MPI_Allreduce(&v, &out, 1, MPI_INT, last, MPI_COMM_WORLD));
    CHECK(out == mt_size - 1 + 10);
    OK(MPI_Scan(&v, &out, 1, MPI_INT, first, MPI_COMM_WORLD));
    CHECK(out == 10);
    int commute;
    OK(MPI_Op_commutative(first, &commute));
    CHECK(!commute);
    OK(MPI_Op_free(&first));
    OK(MPI_Op_free(&last));
    int a[3] = { 1, 2, 3 }, b[3] = { 10, 20, 30 };
    OK(MPI_Reduce_local(a, b, 3, MPI_INT, MPI_SUM));
    CHECK(b[0] == 11 && b[2] == 33);
}

static void bcasts(void)
{
    int sizes[] = { 0, 1, 7, 4090, 8192, 100000, 1 << 20 };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        double *buf = malloc(sizeof(double) * (size_t)(n + 1));
        CHECK(buf != NULL);
        for (int root = 0; root < mt_size; root += mt_size > 2 ? mt_size / 2 : 1) {
            for (int i = 0; i < n; i++)
                buf[i] = mt_rank == root ? i * 1.5 + root : -1;
            OK(MPI_Bcast(buf, n, MPI_DOUBLE, root, MPI_COMM_WORLD));
            for (int i = 0; i < n; i++)
                CHECK(buf[i] == i * 1.5 + root);
        }
        free(buf);
    }
    for (int i = 0; i < 100; i++)
        OK(MPI_Barrier(MPI_COMM_WORLD));
}

/*
 * MPI_Barrier really waits for everyone: each rank adds one to a counter in
 * memory every rank maps before each barrier, and after barrier k the
 * counter must be at least size * (k + 1). What follows each barrier (a
 * barrier, a broadcast or gather from a varying root, an allreduce, an
 * alltoall) changes who releases the next one (docs/mpi.md, Barrier), and
 * the rank that dawdles before arriving changes from one barrier to the next.
 */
static void barriers_on(MPI_Comm comm, _Atomic long *ctr)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *a = malloc(sizeof(int) * (size_t)size), *b = malloc(sizeof(int) * (size_t)size);
    CHECK(a && b);
    for (int k = 0; k < 300; k++) {
        if (rank == k % size)
            for (int y = 0; y < k % 4; y++)
                sched_yield();
        atomic_fetch_add(ctr, 1);
        OK(MPI_Barrier(comm));
        CHECK(atomic_load(ctr) >= (long)size * (k + 1));
        int root = (k / 5) % size, v = rank == root ? k : -1, sum = 0;
        switch (k % 5) {
        case 1:
            OK(MPI_Bcast(&v, 1, MPI_INT, root, comm));
            CHECK(v == k);
            break;
        case 2:
            v = rank + k;
            OK(MPI_Gather(&v, 1, MPI_INT, a, 1, MPI_INT, root, comm));
            for (int r = 0; rank == root && r < size; r++)
                CHECK(a[r] == r + k);
            break;
        case 3:
            OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, comm));
            CHECK(sum == size * (size - 1) / 2);
            break;
        case 4:
            for (int r = 0; r < size; r++)
                a[r] = rank * 1000 + r;
            OK(MPI_Alltoall(a, 1, MPI_INT, b, 1, MPI_INT, comm));
            for (int r = 0; r < size; r++)
                CHECK(b[r] == r * 1000 + rank);
            break;
        default:
            break;                        /* barrier after barrier */
        }
    }
    free(a);
    free(b);
}

static void barriers(void)
{
    /* A member that moves itself to even out the CPUs gives its CPU mask back. */
    cpu_set_t before, after;
    CHECK(sched_getaffinity(0, sizeof before, &before) == 0);
    char path[64] = "/tmp/zimp-t_coll-XXXXXX";
    int fd = -1;
    if (mt_rank == 0) {
        fd = mkstemp(path);
        CHECK(fd >= 0 && ftruncate(fd, 4096) == 0);
    }
    OK(MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD));
    if (mt_rank != 0)
        fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    _Atomic long *ctr = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(ctr != MAP_FAILED);
    close(fd);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (mt_rank == 0)
        unlink(path);
    barriers_on(MPI_COMM_WORLD, &ctr[0]);
    /* a communicator of its own (another page), ranks in reverse order */
    MPI_Comm rev;
    OK(MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &rev));
    barriers_on(rev, &ctr[8]);
    OK(MPI_Comm_free(&rev));
    munmap(ctr, 4096);
    CHECK(sched_getaffinity(0, sizeof after, &after) == 0);
    CHECK(CPU_EQUAL(&before, &after));
}

static void gathers(void)
{
    int n = mt_size, root = n - 1;
    int *all = calloc((size_t)n * 2, sizeof(int)), mine[2] = { mt_rank, -mt_rank };
    CHECK(all != NULL);
    OK(MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD));
    if (mt_rank == root)
        for (int r = 0; r < n; r++)
            CHECK(all[2 * r] == r && all[2 * r + 1] == -r);
    memset(all, 0, sizeof(int) * 2 * (size_t)n);
    OK(MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < n; r++)
        CHECK(all[2 * r] == r && all[2 * r + 1] == -r);
    memset(all, 0, sizeof(int) * 2 * (size_t)n);
    all[2 * mt_rank] = mt_rank;
    all[2 * mt_rank + 1] = -mt_rank;
    OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < n; r++)
        CHECK(all[2 * r] == r && all[2 * r + 1] == -r);
    /* v-variants: rank r contributes r+1 ints at displacement r*(r+1)/2 + r (a gap). */
    int total = n * (n + 1) / 2 + n;
    int *counts = malloc(sizeof(int) * (size_t)n), *displs = malloc(sizeof(int) * (size_t)n);
    int *vbuf = malloc(sizeof(int) * (size_t)total), *minev = malloc(sizeof(int) * (size_t)(n + 1));
    for (int r = 0; r < n; r++) {
        counts[r] = r + 1;
        displs[r] = r * (r + 1) / 2 + r;
    }
    for (int i = 0; i <= mt_rank; i++)
        minev[i] = mt_rank * 100 + i;
    for (int i = 0; i < total; i++)
        vbuf[i] = -7;
    OK(MPI_Gatherv(minev, mt_rank + 1, MPI_INT, vbuf, counts, displs, MPI_INT, 0, MPI_COMM_WORLD));
    if (mt_rank == 0)
        for (int r = 0; r < n; r++)
            for (int i = 0; i <= r; i++)
                CHECK(vbuf[displs[r] + i] == r * 100 + i);
    for (int i = 0; i < total; i++)
        vbuf[i] = -7;
    OK(MPI_Allgatherv(minev, mt_rank + 1, MPI_INT, vbuf, counts, displs, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < n; r++) {
        for (int i = 0; i <= r; i++)
            CHECK(vbuf[displs[r] + i] == r * 100 + i);
        if (r > 0)
            CHECK(vbuf[displs[r] - 1] == -7);   /* the gap is left alone */
    }
    /* Scatterv: the reverse. */
    int got[64];
    OK(MPI_Scatterv(vbuf, counts, displs, MPI_INT, got, mt_rank + 1, MPI_INT, 0, MPI_COMM_WORLD));
    for (int i = 0; i <= mt_rank; i++)
        CHECK(got[i] == mt_rank * 100 + i);
    int sc[2];
    OK(MPI_Scatter(all, 2, MPI_INT, sc, 2, MPI_INT, 0, MPI_COMM_WORLD));
    CHECK(sc[0] == mt_rank && sc[1] == -mt_rank);
    if (mt_rank == 0)
        OK(MPI_Scatter(all, 2, MPI_INT, MPI_IN_PLACE, 2, MPI_INT, 0, MPI_COMM_WORLD));
    else
        OK(MPI_Scatter(NULL, 2, MPI_INT, sc, 2, MPI_INT, 0, MPI_COMM_WORLD));
    free(all);
    free(counts);
    free(displs);
    free(vbuf);
    free(minev);
}

static void alltoalls(void)
{
    int n = mt_size;
    int *s = malloc(sizeof(int) * (size_t)n * 2), *r = malloc(sizeof(int) * (size_t)n * 2);
    for (int i = 0; i < 2 * n; i++)
        s[i] = mt_rank * 1000 + i;
    OK(MPI_Alltoall(s, 2, MPI_INT, r, 2, MPI_INT, MPI_COMM_WORLD));
    for (int p = 0; p < n; p++)
        CHECK(r[2 * p] == p * 1000 + 2 * mt_rank && r[2 * p + 1] == p * 1000 + 2 * mt_rank + 1);
    memcpy(r, s, sizeof(int) * 2 * (size_t)n);
    OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, 2, MPI_INT, MPI_COMM_WORLD));
    for (int p = 0; p < n; p++)
        CHECK(r[2 * p] == p * 1000 + 2 * mt_rank);
    /* Alltoallv: rank p gets (p % 2) + 1 ints from everyone. */
    int *sc = malloc(sizeof(int) * (size_t)n), *sd = malloc(sizeof(int) * (size_t)n);
    int *rc = malloc(sizeof(int) * (size_t)n), *rd = malloc(sizeof(int) * (size_t)n);
    for (int p = 0, off = 0; p < n; p++) {
        sc[p] = p % 2 + 1;
        sd[p] = off;
        off += 2;
        rc[p] = mt_rank % 2 + 1;
        rd[p] = 2 * p;
    }
    for (int i = 0; i < 2 * n; i++)
        r[i] = -1;
    OK(MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, MPI_COMM_WORLD));
    for (int p = 0; p < n; p++)
        for (int k = 0; k < rc[p]; k++)
            CHECK(r[rd[p] + k] == p * 1000 + 2 * mt_rank + k);
    free(s);
    free(r);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

static void scans_and_scatters(void)
{
    int n = mt_size;
    int v[2] = { mt_rank + 1, 2 }, out[2];
    OK(MPI_Scan(v, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(out[0] == (mt_rank + 1) * (mt_rank + 2) / 2 && out[1] == 2 * (mt_rank + 1));
    out[0] = v[0];
    out[1] = v[1];
    OK(MPI_Scan(MPI_IN_PLACE, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(out[0] == (mt_rank + 1) * (mt_rank + 2) / 2);
    OK(MPI_Exscan(v, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (mt_rank > 0)
        CHECK(out[0] == mt_rank * (mt_rank + 1) / 2 && out[1] == 2 * mt_rank);
    double dv = mt_rank + 0.5, dout = 0;
    OK(MPI_Scan(&dv, &dout, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    CHECK(dout == mt_rank + 0.5);
    /* Reduce_scatter_block: everyone gives i at position i; rank p gets n*(2p), n*(2p+1). */
    int *in = malloc(sizeof(int) * 2 * (size_t)n), got[2];
    for (int i = 0; i < 2 * n; i++)
        in[i] = i;
    OK(MPI_Reduce_scatter_block(in, got, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(got[0] == n * 2 * mt_rank && got[1] == n * (2 * mt_rank + 1));
    OK(MPI_Reduce_scatter_block(MPI_IN_PLACE, in, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(in[0] == n * 2 * mt_rank && in[1] == n * (2 * mt_rank + 1));
    int *counts = malloc(sizeof(int) * (size_t)n), total = 0;
    for (int p = 0; p < n; p++)
        total += counts[p] = p % 2 + 1;
    int *big = malloc(sizeof(int) * (size_t)total), off = 0;
    for (int i = 0; i < total; i++)
        big[i] = i;
    for (int p = 0; p < mt_rank; p++)
        off += counts[p];
    OK(MPI_Reduce_scatter(big, got, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (int k = 0; k < counts[mt_rank]; k++)
        CHECK(got[k] == n * (off + k));
    free(in);
    free(counts);
    free(big);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    int_reductions();
    double_reductions();
    loc_reductions();
    op_type_mismatch();
    user_ops();
    bcasts();
    barriers();
    gathers();
    alltoalls();
    scans_and_scatters();
    return mt_done("t_coll");
}
