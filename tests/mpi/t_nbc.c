/*
 * Non-blocking collectives: Ibarrier and Ibcast, overlapping with
 * point-to-point traffic that only completes if they do not block, several
 * in flight at once with different roots, a large Ibcast. Then every other
 * non-blocking collective against its blocking twin (int and double, SUM,
 * MAX and a non-commutative user operator freed while the reduction is
 * pending), MPI_IN_PLACE, all of them in flight at once, completed in
 * reverse order, and large enough to take the rendezvous path.
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

/* The value rank r contributes at index i (distinct per rank and index). */
static int val(int r, int i)
{
    return (r + 1) * 1000 + i;
}

/* A non-commutative operator: 2x2 integer matrix product, in[i] * inout[i]. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        int c[4] = { a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                     a[2] * b[1] + a[3] * b[3] };
        memcpy(b, c, sizeof c);
    }
}

/* Every reduction-type call at count n, checked against the blocking one. */
static void reductions(int n)
{
    int size = mt_size, rank = mt_rank;
    int *in = malloc(sizeof(int) * (size_t)n * size), *a = calloc((size_t)n * size, sizeof(int)),
        *b = calloc((size_t)n * size, sizeof(int));
    double *din = malloc(sizeof(double) * (size_t)n), *da = calloc((size_t)n, sizeof(double)),
           *db = calloc((size_t)n, sizeof(double));
    CHECK(in && a && b && din && da && db);
    for (int i = 0; i < n * size; i++)
        in[i] = val(rank, i) % 97;
    for (int i = 0; i < n; i++)
        din[i] = rank * 0.5 + i;
    MPI_Request r;
    int root = size - 1;
    /* Ireduce, int SUM, to the last rank */
    OK(MPI_Ireduce(in, a, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD, &r));
    OK(MPI_Reduce(in, b, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    if (rank == root)
        for (int i = 0; i < n; i++)
            CHECK(a[i] == b[i]);
    /* Iallreduce, double MAX, and in place */
    OK(MPI_Iallreduce(din, da, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++)
        CHECK(da[i] == (size - 1) * 0.5 + i);
    memcpy(a, in, sizeof(int) * (size_t)n);
    OK(MPI_Iallreduce(MPI_IN_PLACE, a, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r));
    OK(MPI_Allreduce(in, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++)
        CHECK(a[i] == b[i]);
    /* Ireduce_scatter_block and Ireduce_scatter (counts 1, 2, ...) */
    OK(MPI_Ireduce_scatter_block(in, a, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) {
        long want = 0;
        for (int q = 0; q < size; q++)
            want += val(q, rank * n + i) % 97;
        CHECK(a[i] == want);
    }
    int *counts = malloc(sizeof(int) * (size_t)size), total = 0, off = 0;
    CHECK(counts);
    for (int q = 0; q < size; q++) {
        counts[q] = q + 1;
        total += q + 1;
        if (q < rank)
            off += q + 1;
    }
    if (total <= n * size) {
        OK(MPI_Ireduce_scatter(in, a, counts, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int i = 0; i < counts[rank]; i++) {
            int want = val(0, off + i) % 97;
            for (int q = 1; q < size; q++)
                if (val(q, off + i) % 97 > want)
                    want = val(q, off + i) % 97;
            CHECK(a[i] == want);
        }
    }
    free(counts);
    /* Iscan and Iexscan against Scan and Exscan */
    OK(MPI_Iscan(in, a, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r));
    OK(MPI_Scan(in, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++)
        CHECK(a[i] == b[i]);
    OK(MPI_Iexscan(din, da, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r));
    OK(MPI_Exscan(din, db, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < n && rank > 0; i++)
        CHECK(da[i] == db[i]);
    free(in);
    free(a);
    free(b);
    free(din);
    free(da);
    free(db);
}

/* A non-commutative user operator, freed (op and type) while the reductions are pending. */
static void noncommutative(void)
{
    MPI_Op op;
    MPI_Datatype mat;
    OK(MPI_Op_create(matmul, 0, &op));
    OK(MPI_Type_contiguous(4, MPI_INT, &mat));
    OK(MPI_Type_commit(&mat));
    int m[4] = { 1, mt_rank + 1, 0, 1 }, red[4] = { 0 }, all[4] = { 0 }, scan[4] = { 0 };
    MPI_Request r[3];
    OK(MPI_Ireduce(m, red, 1, mat, op, 0, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Iallreduce(m, all, 1, mat, op, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Iscan(m, scan, 1, mat, op, MPI_COMM_WORLD, &r[2]));
    OK(MPI_Op_free(&op));
    OK(MPI_Type_free(&mat));
    OK(MPI_Waitall(3, r, MPI_STATUSES_IGNORE));
    /* [[1, a], [0, 1]] * [[1, b], [0, 1]] = [[1, a + b], [0, 1]]: commutative in the sum, so
       also check the order with the upper-left entry built to differ: here it stays 1. */
    int sum = mt_size * (mt_size + 1) / 2, pre = (mt_rank + 1) * (mt_rank + 2) / 2;
    if (mt_rank == 0)
        CHECK(red[0] == 1 && red[1] == sum && red[2] == 0 && red[3] == 1);
    CHECK(all[0] == 1 && all[1] == sum && all[3] == 1);
    CHECK(scan[1] == pre);
}

/* Rank order matters: a0 op a1 op ... with op(a, b) = a (the first operand wins). */
static void first_wins(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    memcpy(inout, in, sizeof(int) * (size_t)*len);
}

static void order(void)
{
    MPI_Op op;
    OK(MPI_Op_create(first_wins, 0, &op));
    int v = mt_rank + 10, out = -1;
    MPI_Request r;
    OK(MPI_Iallreduce(&v, &out, 1, MPI_INT, op, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(out == 10);                      /* a0 op (a1 op ...) = a0 */
    OK(MPI_Op_free(&op));
}

/* Gathers, scatters, allgathers and all-to-alls at n ints per rank, against the blocking calls. */
static void movers(int n)
{
    int size = mt_size, rank = mt_rank, root = size / 2;
    size_t all = (size_t)n * size;
    int *mine = malloc(sizeof(int) * all), *a = malloc(sizeof(int) * all), *b = malloc(sizeof(int) * all);
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    CHECK(mine && a && b && counts && displs);
    for (size_t i = 0; i < all; i++)
        mine[i] = val(rank, (int)i);
    MPI_Request r[8];
    /* Igather / Gather */
    memset(a, 0, sizeof(int) * all);
    OK(MPI_Igather(mine, n, MPI_INT, a, n, MPI_INT, root, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    if (rank == root)
        for (int q = 0; q < size; q++)
            for (int i = 0; i < n; i++)
                CHECK(a[q * n + i] == val(q, i));
    /* Igatherv with counts q % n + ... and reversed displacements */
    int off = 0;
    for (int q = size - 1; q >= 0; q--) {
        counts[q] = n ? (q % n) + 1 : 0;
        if (counts[q] > n)
            counts[q] = n;
        displs[q] = off;
        off += counts[q];
    }
    memset(a, 0, sizeof(int) * all);
    OK(MPI_Igatherv(mine, counts[rank], MPI_INT, a, counts, displs, MPI_INT, root, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    if (rank == root)
        for (int q = 0; q < size; q++)
            for (int i = 0; i < counts[q]; i++)
                CHECK(a[displs[q] + i] == val(q, i));
    /* Iscatter, Iscatterv (from the root's mine) */
    OK(MPI_Iscatter(mine, n, MPI_INT, a, n, MPI_INT, root, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++)
        CHECK(a[i] == val(root, rank * n + i));
    OK(MPI_Iscatterv(mine, counts, displs, MPI_INT, a, counts[rank], MPI_INT, root, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    for (int i = 0; i < counts[rank]; i++)
        CHECK(a[i] == val(root, displs[rank] + i));
    /* Iallgather (and in place), Iallgatherv */
    OK(MPI_Iallgather(mine, n, MPI_INT, a, n, MPI_INT, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Allgather(mine, n, MPI_INT, b, n, MPI_INT, MPI_COMM_WORLD));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK(memcmp(a, b, sizeof(int) * all) == 0);
    memset(a, 0, sizeof(int) * all);
    memcpy(a + (size_t)rank * n, mine, sizeof(int) * (size_t)n);
    OK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, n, MPI_INT, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK(memcmp(a, b, sizeof(int) * all) == 0);
    OK(MPI_Iallgatherv(mine, counts[rank], MPI_INT, a, counts, displs, MPI_INT, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    for (int q = 0; q < size; q++)
        for (int i = 0; i < counts[q]; i++)
            CHECK(a[displs[q] + i] == val(q, i));
    /* Ialltoall (and in place), Ialltoallv, Ialltoallw against Alltoall */
    OK(MPI_Ialltoall(mine, n, MPI_INT, a, n, MPI_INT, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Alltoall(mine, n, MPI_INT, b, n, MPI_INT, MPI_COMM_WORLD));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK(memcmp(a, b, sizeof(int) * all) == 0);
    for (int q = 0; q < size; q++)
        for (int i = 0; i < n; i++)
            CHECK(a[q * n + i] == val(q, rank * n + i));
    memcpy(a, mine, sizeof(int) * all);
    OK(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, n, MPI_INT, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK(memcmp(a, b, sizeof(int) * all) == 0);
    int *sc = malloc(sizeof(int) * (size_t)size), *sd = malloc(sizeof(int) * (size_t)size);
    int *bd = malloc(sizeof(int) * (size_t)size);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)size);
    CHECK(sc && sd && bd && types);
    for (int q = 0; q < size; q++) {
        sc[q] = n;
        sd[q] = q * n;
        bd[q] = q * n * (int)sizeof(int);
        types[q] = MPI_INT;
    }
    memset(a, 0, sizeof(int) * all);
    OK(MPI_Ialltoallv(mine, sc, sd, MPI_INT, a, sc, sd, MPI_INT, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK(memcmp(a, b, sizeof(int) * all) == 0);
    memset(a, 0, sizeof(int) * all);
    OK(MPI_Ialltoallw(mine, sc, bd, types, a, sc, bd, types, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK(memcmp(a, b, sizeof(int) * all) == 0);
    memset(a, 0, sizeof(int) * all);
    OK(MPI_Alltoallw(mine, sc, bd, types, a, sc, bd, types, MPI_COMM_WORLD));
    CHECK(memcmp(a, b, sizeof(int) * all) == 0);
    free(sc);
    free(sd);
    free(bd);
    free(types);
    free(mine);
    free(a);
    free(b);
    free(counts);
    free(displs);
}

/* Many in flight at once on two communicators, completed in reverse order. */
static void in_flight(void)
{
    enum { K = 6 };
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    int one = 1, sums[K], gath[K][64], bar = 0, ks[K];
    MPI_Request r[2 * K + 1];
    for (int k = 0; k < K; k++) {
        ks[k] = k;                        /* a send buffer stays as it is until its operation completes */
        OK(MPI_Iallreduce(&one, &sums[k], 1, MPI_INT, MPI_SUM, k % 2 ? dup : MPI_COMM_WORLD, &r[2 * k]));
        OK(MPI_Iallgather(&ks[k], 1, MPI_INT, gath[k], 1, MPI_INT, k % 2 ? MPI_COMM_WORLD : dup, &r[2 * k + 1]));
    }
    OK(MPI_Ibarrier(dup, &r[2 * K]));
    for (int i = 2 * K; i >= 0; i--)
        OK(MPI_Wait(&r[i], MPI_STATUS_IGNORE));
    for (int k = 0; k < K; k++) {
        CHECK(sums[k] == mt_size);
        for (int q = 0; q < mt_size; q++)
            CHECK(gath[k][q] == k);
    }
    CHECK(bar == 0);
    OK(MPI_Comm_free(&dup));
}

/*
 * A wait for a non-blocking collective whose next message comes on the
 * communicator's channel, not the inbox: it must be woken (nudged) by the
 * rank that publishes, not sleep out its slice, as it did (5 ms a call).
 * The ctest entry mpi_t_nbc_woken_n4 raises the slice to 3 s
 * (ZIMP_MPI_SLICE_NS): a wait that nobody wakes then takes seconds, which
 * the bound below (1 s for one wait) catches on any machine; woken waits
 * take microseconds idle and a few milliseconds under load.
 */
static void waits_wake(void)
{
    enum { N = 1000 };
    int x = mt_rank, y = 0, b = mt_rank;
    for (int kind = 0; kind < 3; kind++) {
        OK(MPI_Barrier(MPI_COMM_WORLD));
        double longest = 0;
        for (int i = 0; i < N; i++) {
            MPI_Request r;
            double t0 = MPI_Wtime();
            if (kind == 0)
                OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
            else if (kind == 1)
                OK(MPI_Ibcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD, &r));
            else
                OK(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r));
            OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            double dt = MPI_Wtime() - t0;
            longest = dt > longest ? dt : longest;
        }
        if (longest >= 1.0)
            fprintf(stderr, "rank %d: a wait of kind %d took %.2f s\n", mt_rank, kind, longest);
        CHECK(longest < 1.0);
        CHECK(kind != 1 || b == 0);
        CHECK(kind != 2 || y == mt_size * (mt_size - 1) / 2);
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    CHECK(mt_size <= 64);
    for (int i = 0; i < 20; i++)
        ibarrier_overlap();
    ibcasts();
    for (int n = 0; n <= 3; n++)
        reductions(n);
    reductions(5000);                      /* 20 KB per rank: past an inbox slot, rendezvous */
    noncommutative();
    order();
    for (int n = 0; n <= 2; n++)
        movers(n);
    movers(5000);
    in_flight();
    if (mt_size <= 4)
        waits_wake();
    return mt_done("t_nbc");
}
