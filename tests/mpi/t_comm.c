/*
 * Communicators and what hangs on them: dup/split/split_type/create/free/
 * compare, isolation (the same tag on two communicators never crosses),
 * groups, attributes and keyvals (MPI-2 and MPI-1 names), names, info,
 * Cartesian topologies and their neighborhood collectives, error handlers and error classes, MPI_Comm_create_group
 * over changing groups at once.
 */
#include "mpitest.h"

static void isolation(void)
{
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
    int a = 'A', b = 'B', got_a = 0, got_b = 0;
    MPI_Request r[2];
    OK(MPI_Isend(&a, 1, MPI_INT, right, 7, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Isend(&b, 1, MPI_INT, right, 7, dup, &r[1]));
    /* Receive on the dup first: it must get the dup's message, not the earlier one. */
    OK(MPI_Recv(&got_b, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, MPI_STATUS_IGNORE));
    OK(MPI_Recv(&got_a, 1, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    CHECK(got_a == 'A' && got_b == 'B');
    int cmp;
    OK(MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp));
    CHECK(cmp == MPI_CONGRUENT);
    OK(MPI_Comm_compare(dup, dup, &cmp));
    CHECK(cmp == MPI_IDENT);
    OK(MPI_Comm_free(&dup));
    CHECK(dup == MPI_COMM_NULL);
}

static void splits(void)
{
    MPI_Comm half, rev, shared;
    OK(MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, -mt_rank, &half));
    int hr, hs;
    OK(MPI_Comm_rank(half, &hr));
    OK(MPI_Comm_size(half, &hs));
    CHECK(hs == (mt_size + 1 - mt_rank % 2) / 2);
    CHECK(hr == hs - 1 - mt_rank / 2);        /* key -rank reverses the order */
    int sum = 0;
    OK(MPI_Allreduce(&mt_rank, &sum, 1, MPI_INT, MPI_SUM, half));
    int expect = 0;
    for (int r = mt_rank % 2; r < mt_size; r += 2)
        expect += r;
    CHECK(sum == expect);
    int v = hr == 0 ? 1000 + mt_rank % 2 : 0;
    OK(MPI_Bcast(&v, 1, MPI_INT, 0, half));
    CHECK(v == 1000 + mt_rank % 2);
    OK(MPI_Comm_split(MPI_COMM_WORLD, mt_rank == 0 ? MPI_UNDEFINED : 0, 0, &rev));
    CHECK((mt_rank == 0) == (rev == MPI_COMM_NULL));
    if (rev != MPI_COMM_NULL) {
        OK(MPI_Barrier(rev));
        OK(MPI_Comm_free(&rev));
    }
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mt_rank, MPI_INFO_NULL, &shared));
    int cmp;
    OK(MPI_Comm_compare(MPI_COMM_WORLD, shared, &cmp));
    CHECK(cmp == MPI_CONGRUENT);
    if (mt_size > 1) {
        OK(MPI_Comm_compare(MPI_COMM_WORLD, half, &cmp));
        CHECK(cmp == MPI_UNEQUAL);
    }
    OK(MPI_Comm_free(&shared));
    OK(MPI_Comm_free(&half));
}

static void groups_and_create(void)
{
    MPI_Group world, evens;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int n = (mt_size + 1) / 2, ranks[64];
    for (int i = 0; i < n; i++)
        ranks[i] = 2 * i;
    OK(MPI_Group_incl(world, n, ranks, &evens));
    int gs, gr;
    OK(MPI_Group_size(evens, &gs));
    OK(MPI_Group_rank(evens, &gr));
    CHECK(gs == n && gr == (mt_rank % 2 ? MPI_UNDEFINED : mt_rank / 2));
    int back[64];
    int in[2] = { 0, n - 1 };
    OK(MPI_Group_translate_ranks(evens, 2, in, world, back));
    CHECK(back[0] == 0 && back[1] == 2 * (n - 1));
    MPI_Group odds;
    OK(MPI_Group_excl(world, n, ranks, &odds));
    OK(MPI_Group_size(odds, &gs));
    CHECK(gs == mt_size - n);
    int cmp;
    OK(MPI_Group_compare(world, world, &cmp));
    CHECK(cmp == MPI_IDENT);
    MPI_Comm ec;
    OK(MPI_Comm_create(MPI_COMM_WORLD, evens, &ec));
    CHECK((mt_rank % 2 == 0) == (ec != MPI_COMM_NULL));
    if (ec != MPI_COMM_NULL) {
        int r, x = 1, s = 0;
        OK(MPI_Comm_rank(ec, &r));
        CHECK(r == mt_rank / 2);
        OK(MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_SUM, ec));
        CHECK(s == n);
        OK(MPI_Comm_free(&ec));
    }
    OK(MPI_Group_free(&odds));
    OK(MPI_Group_free(&evens));
    OK(MPI_Group_free(&world));
}

static int deletes;

static int count_delete(MPI_Comm c, int k, void *v, void *extra)
{
    (void)c, (void)k, (void)v;
    deletes += *(int *)extra;
    return MPI_SUCCESS;
}

static void attributes(void)
{
    void *v;
    int flag;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    CHECK(flag && *(int *)v >= 32767);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &v, &flag));
    CHECK(flag);
    int one = 1, key, key1;
    OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, count_delete, &key, &one));
    static int value = 42;
    OK(MPI_Comm_set_attr(MPI_COMM_WORLD, key, &value));
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_get_attr(dup, key, &v, &flag));
    CHECK(flag && v == &value);
    OK(MPI_Comm_free(&dup));
    CHECK(deletes == 1);
    OK(MPI_Comm_delete_attr(MPI_COMM_WORLD, key));
    CHECK(deletes == 2);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, key, &v, &flag));
    CHECK(!flag);
    OK(MPI_Comm_free_keyval(&key));
    CHECK(key == MPI_KEYVAL_INVALID);
    /* MPI-1 names */
    OK(MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &key1, NULL));
    OK(MPI_Attr_put(MPI_COMM_WORLD, key1, &value));
    OK(MPI_Attr_get(MPI_COMM_WORLD, key1, &v, &flag));
    CHECK(flag && v == &value);
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Attr_get(dup, key1, &v, &flag));
    CHECK(!flag);                          /* MPI_NULL_COPY_FN: not copied */
    OK(MPI_Comm_free(&dup));
    OK(MPI_Attr_delete(MPI_COMM_WORLD, key1));
    OK(MPI_Keyval_free(&key1));

    /*
     * A keyval freed while an attribute uses it lives until the attribute is
     * deleted; freeing it again meanwhile (through a copy of the handle) is
     * a no-op, and the delete callback still runs. Once gone, a free fails.
     */
    int key2, copy;
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &key2, &one));
    copy = key2;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_set_attr(dup, key2, &value));
    OK(MPI_Comm_free_keyval(&key2));
    CHECK(key2 == MPI_KEYVAL_INVALID);
    int again = copy;
    OK(MPI_Comm_free_keyval(&again));              /* still in use: no-op */
    OK(MPI_Comm_get_attr(dup, copy, &v, &flag));
    CHECK(flag && v == &value);
    OK(MPI_Comm_free(&dup));
    CHECK(deletes == 3);                           /* the callback of a freed keyval ran */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    again = copy;
    CHECK(mt_class(MPI_Comm_free_keyval(&again)) == MPI_ERR_KEYVAL);   /* gone now */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void names_and_info(void)
{
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14);
    OK(MPI_Comm_set_name(MPI_COMM_SELF, "me"));
    OK(MPI_Comm_get_name(MPI_COMM_SELF, name, &len));
    CHECK(strcmp(name, "me") == 0);
    MPI_Info info;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "key", "value"));
    OK(MPI_Info_set(info, "k2", "v2"));
    char val[MPI_MAX_INFO_VAL];
    int flag, nk;
    OK(MPI_Info_get(info, "key", MPI_MAX_INFO_VAL - 1, val, &flag));
    CHECK(flag && strcmp(val, "value") == 0);
    OK(MPI_Info_get_nkeys(info, &nk));
    CHECK(nk == 2);
    OK(MPI_Info_delete(info, "key"));
    OK(MPI_Info_get(info, "key", MPI_MAX_INFO_VAL - 1, val, &flag));
    CHECK(!flag);
    OK(MPI_Info_free(&info));
    CHECK(info == MPI_INFO_NULL);
}

static void cartesian(void)
{
    int dims[2] = { 0, 0 };
    OK(MPI_Dims_create(mt_size, 2, dims));
    CHECK(dims[0] * dims[1] == mt_size && dims[0] >= dims[1]);
    int d12[3] = { 0, 0, 0 };
    OK(MPI_Dims_create(12, 3, d12));
    CHECK(d12[0] == 3 && d12[1] == 2 && d12[2] == 2);
    int periods[2] = { 1, 0 };
    MPI_Comm cart;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    int coords[2], r, st;
    OK(MPI_Cart_coords(cart, mt_rank, 2, coords));
    CHECK(coords[0] == mt_rank / dims[1] && coords[1] == mt_rank % dims[1]);
    OK(MPI_Cart_rank(cart, coords, &r));
    CHECK(r == mt_rank);
    int src, dst;
    OK(MPI_Cart_shift(cart, 0, 1, &src, &dst));
    CHECK(dst == ((coords[0] + 1) % dims[0]) * dims[1] + coords[1]);
    OK(MPI_Cart_shift(cart, 1, 1, &src, &dst));
    CHECK(coords[1] + 1 < dims[1] ? dst == mt_rank + 1 : dst == MPI_PROC_NULL);
    OK(MPI_Topo_test(cart, &st));
    CHECK(st == MPI_CART);
    int nd, gd[2], gp[2], gc[2];
    OK(MPI_Cartdim_get(cart, &nd));
    OK(MPI_Cart_get(cart, 2, gd, gp, gc));
    CHECK(nd == 2 && gd[0] == dims[0] && gp[0] == 1 && gp[1] == 0 && gc[1] == coords[1]);
    OK(MPI_Comm_free(&cart));
    OK(MPI_Topo_test(MPI_COMM_WORLD, &st));
    CHECK(st == MPI_UNDEFINED);
}

/*
 * Neighborhood collectives on a 2-D grid, periodic in dimension 0 only:
 * every neighbor's block arrives in its slot (a value that names the
 * sender and the direction it sent to), slots of missing neighbors
 * (MPI_PROC_NULL) are left alone, and a periodic dimension of size 1 or 2
 * (one peer on both sides) is told apart by direction.
 */
static int nb_value(int from, int toward) { return 1000 * from + toward; }

static void neighbors(void)
{
    int dims[2] = { 0, 0 }, periods[2] = { 1, 0 };
    OK(MPI_Dims_create(mt_size, 2, dims));
    MPI_Comm cart;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    int nb[4];
    OK(MPI_Cart_shift(cart, 0, 1, &nb[0], &nb[1]));
    OK(MPI_Cart_shift(cart, 1, 1, &nb[2], &nb[3]));
    int sbuf[8], rbuf[8], rbufv[8], one[2] = { 0, 0 }, gbuf[8];
    for (int k = 0; k < 4; k++) {
        sbuf[2 * k] = nb_value(mt_rank, k);
        sbuf[2 * k + 1] = -nb_value(mt_rank, k);
    }
    for (int i = 0; i < 8; i++)
        rbuf[i] = rbufv[i] = gbuf[i] = -7;
    OK(MPI_Neighbor_alltoall(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, cart));
    int counts[4] = { 2, 2, 2, 2 }, displs[4] = { 6, 4, 2, 0 };   /* reversed blocks */
    OK(MPI_Neighbor_alltoallv(sbuf, counts, (int[]){ 0, 2, 4, 6 }, MPI_INT, rbufv, counts, displs, MPI_INT,
                              cart));
    one[0] = mt_rank;
    one[1] = -mt_rank;
    OK(MPI_Neighbor_allgather(one, 2, MPI_INT, gbuf, 2, MPI_INT, cart));
    for (int j = 0; j < 4; j++) {
        int from = nb[j];
        int *a = &rbuf[2 * j], *v = &rbufv[displs[j]], *g = &gbuf[2 * j];
        if (from == MPI_PROC_NULL) {
            CHECK(a[0] == -7 && a[1] == -7 && v[0] == -7 && g[0] == -7);
            continue;
        }
        /* neighbor j sent this towards us: its direction j ^ 1 */
        CHECK(a[0] == nb_value(from, j ^ 1) && a[1] == -nb_value(from, j ^ 1));
        CHECK(v[0] == nb_value(from, j ^ 1) && v[1] == -nb_value(from, j ^ 1));
        CHECK(g[0] == from && g[1] == -from);
    }
    int gcount[4] = { 1, 1, 1, 1 }, gdispl[4] = { 3, 2, 1, 0 }, gv[4] = { -7, -7, -7, -7 };
    OK(MPI_Neighbor_allgatherv(&mt_rank, 1, MPI_INT, gv, gcount, gdispl, MPI_INT, cart));
    for (int j = 0; j < 4; j++)
        CHECK(gv[gdispl[j]] == (nb[j] == MPI_PROC_NULL ? -7 : nb[j]));
    OK(MPI_Comm_free(&cart));

    /* not a Cartesian communicator: MPI_ERR_TOPOLOGY, returned */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    int cls, rc = MPI_Neighbor_alltoall(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT, dup);
    OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_TOPOLOGY);
    OK(MPI_Comm_free(&dup));
}

static int handler_calls;

static void my_handler(MPI_Comm *c, int *code, ...)
{
    (void)c;
    handler_calls += *code != MPI_SUCCESS;
}

static void errors(void)
{
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    int v = 0;
    int rc = MPI_Send(&v, 1, MPI_INT, mt_size + 5, 0, dup);
    CHECK(mt_class(rc) == MPI_ERR_RANK);
    rc = MPI_Send(&v, 1, MPI_INT, 0, -5, dup);
    CHECK(mt_class(rc) == MPI_ERR_TAG);
    rc = MPI_Send(&v, -1, MPI_INT, 0, 0, dup);
    CHECK(mt_class(rc) == MPI_ERR_COUNT);
    rc = MPI_Send(&v, 1, MPI_DATATYPE_NULL, 0, 0, dup);
    CHECK(mt_class(rc) == MPI_ERR_TYPE);
    rc = MPI_Bcast(&v, 1, MPI_INT, mt_size, dup);
    CHECK(mt_class(rc) == MPI_ERR_ROOT);
    char s[MPI_MAX_ERROR_STRING];
    int len;
    for (int c = 0; c <= MPI_ERR_LASTCODE; c++) {   /* every code has a string (59-63 had none) */
        OK(MPI_Error_string(c, s, &len));
        CHECK(len > 0 && (int)strlen(s) == len);
        int cls;
        OK(MPI_Error_class(c, &cls));
        CHECK(cls == (c <= MPIX_ERR_PROC_FAILED ? c : MPI_ERR_UNKNOWN));
    }
    CHECK(MPI_Error_string(MPI_ERR_LASTCODE + 1, s, &len) == MPI_ERR_ARG);
    CHECK(MPI_Error_string(-1, s, &len) == MPI_ERR_ARG);
    MPI_Errhandler h, got;
    OK(MPI_Comm_create_errhandler(my_handler, &h));
    OK(MPI_Comm_set_errhandler(dup, h));
    OK(MPI_Comm_get_errhandler(dup, &got));
    CHECK(got == h);
    OK(MPI_Errhandler_free(&got));
    rc = MPI_Send(&v, 1, MPI_INT, mt_size + 5, 0, dup);
    CHECK(mt_class(rc) == MPI_ERR_RANK && handler_calls == 1);
    OK(MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER));
    CHECK(handler_calls == 2);
    OK(MPI_Errhandler_free(&h));
    OK(MPI_Comm_free(&dup));
}

/* Many communicators made and freed: contexts and channels do not leak or collide. */
static void churn(void)
{
    for (int i = 0; i < 20; i++) {
        MPI_Comm a, b;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
        OK(MPI_Comm_split(a, mt_rank % 3, mt_rank, &b));
        int x = 1, s = 0;
        OK(MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_SUM, b));
        int bs;
        OK(MPI_Comm_size(b, &bs));
        CHECK(s == bs);
        OK(MPI_Comm_free(&b));
        OK(MPI_Comm_free(&a));
    }
}

/*
 * MPI_Comm_create_group over a different subset of the ranks each round, with
 * the same tag every time: members of one round's group run ahead into the
 * next round while others are still in theirs, so two calls over different
 * groups run at once on one parent and must not take each other's messages.
 */
static void create_group_rounds(void)
{
    MPI_Group world;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    uint32_t seed = 12345;
    for (int round = 0; round < 300; round++) {
        int ranks[64], n = 0, in = 0, sum = 0;
        for (int r = 0; r < mt_size && r < 64; r++) {
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) & 1) {
                ranks[n++] = r;
                sum += r;
                in |= r == mt_rank;
            }
        }
        if (!in)
            continue;
        MPI_Group g;
        MPI_Comm c;
        OK(MPI_Group_incl(world, n, ranks, &g));
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, g, 0, &c));
        int size, got = 0;
        OK(MPI_Comm_size(c, &size));
        CHECK(size == n);
        OK(MPI_Allreduce(&mt_rank, &got, 1, MPI_INT, MPI_SUM, c));
        CHECK(got == sum);
        OK(MPI_Barrier(c));
        OK(MPI_Comm_free(&c));
        OK(MPI_Group_free(&g));
    }
    OK(MPI_Group_free(&world));
}

/*
 * MPI_Comm_idup never blocks: rank 0 starts its idup only after a
 * synchronous send from every other rank, which those start after theirs;
 * and idups on overlapping communicators, started in opposite orders.
 */
static void idup(void)
{
    MPI_Comm d;
    MPI_Request r;
    int v = 0;
    if (mt_rank == 0) {
        for (int i = 1; i < mt_size; i++)
            OK(MPI_Recv(&v, 1, MPI_INT, i, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Comm_idup(MPI_COMM_WORLD, &d, &r));
    } else {
        OK(MPI_Comm_idup(MPI_COMM_WORLD, &d, &r));
        OK(MPI_Ssend(&v, 1, MPI_INT, 0, 3, MPI_COMM_WORLD));
    }
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    int sum = 0, size = 0, cmp = -1;
    MPI_Comm_size(d, &size);
    MPI_Comm_compare(d, MPI_COMM_WORLD, &cmp);
    CHECK(size == mt_size && cmp == MPI_CONGRUENT);
    OK(MPI_Allreduce(&mt_rank, &sum, 1, MPI_INT, MPI_SUM, d));
    CHECK(sum == mt_size * (mt_size - 1) / 2);
    /* a message on the copy never matches a receive on the original */
    if (mt_size > 1) {
        int a = 1, b = 2, got = 0;
        if (mt_rank == 0) {
            OK(MPI_Send(&a, 1, MPI_INT, 1, 9, d));
            OK(MPI_Send(&b, 1, MPI_INT, 1, 9, MPI_COMM_WORLD));
        } else if (mt_rank == 1) {
            OK(MPI_Recv(&got, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(got == 2);
            OK(MPI_Recv(&got, 1, MPI_INT, 0, 9, d, MPI_STATUS_IGNORE));
            CHECK(got == 1);
        }
    }
    /* two copies of two communicators over the same ranks, in opposite orders */
    MPI_Comm a, b, da, db;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &b));
    MPI_Request rs[2];
    if (mt_rank % 2) {
        OK(MPI_Comm_idup(a, &da, &rs[0]));
        OK(MPI_Comm_idup(b, &db, &rs[1]));
    } else {
        OK(MPI_Comm_idup(b, &db, &rs[1]));
        OK(MPI_Comm_idup(a, &da, &rs[0]));
    }
    OK(MPI_Waitall(2, rs, MPI_STATUSES_IGNORE));
    int ia = -1, ib = -1;
    OK(MPI_Allreduce(&mt_rank, &ia, 1, MPI_INT, MPI_MAX, da));
    OK(MPI_Allreduce(&mt_rank, &ib, 1, MPI_INT, MPI_MIN, db));
    CHECK(ia == mt_size - 1 && ib == 0);
    OK(MPI_Barrier(db));
    MPI_Comm all[4] = { da, db, a, b };
    for (int i = 0; i < 4; i++)
        OK(MPI_Comm_free(&all[i]));
    OK(MPI_Comm_free(&d));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    isolation();
    splits();
    groups_and_create();
    attributes();
    names_and_info();
    cartesian();
    neighbors();
    errors();
    churn();
    create_group_rounds();
    idup();
    return mt_done("t_comm");
}
