/*
 * Intercommunicators (point-to-point, Intercomm_merge, Comm_dup and a
 * Comm_idup that does not block, non-blocking collectives refused), Comm_create_group, groups from ranges and set
 * operations, Type_get_envelope/contents, Status_set_elements and the _x
 * calls, Alloc_mem; attribute callbacks: a failing copy callback leaves
 * MPI_Comm_dup without a communicator, MPI_Finalize deletes MPI_COMM_SELF's
 * attributes newest first. Any number of ranks (the intercommunicator parts
 * need 2).
 */
#include "mpitest.h"

/* Even ranks against odd ranks: every rank exchanges with its partner across. */
/* Barrier and Bcast (each side roots once, from its rank 1 where it has one) on an intercommunicator. */
static void inter_colls(MPI_Comm inter, int color, int hrank, int hsize, int rsize)
{
    OK(MPI_Barrier(inter));
    for (int rootside = 0; rootside < 2; rootside++) {
        int buf[3] = { -1, -1, -1 };
        if (color == rootside) {
            int root = hrank == (hsize > 1) ? MPI_ROOT : MPI_PROC_NULL;
            if (root == MPI_ROOT)
                buf[0] = 7, buf[1] = rootside, buf[2] = 9;
            OK(MPI_Bcast(buf, 3, MPI_INT, root, inter));
            if (root == MPI_PROC_NULL)
                CHECK(buf[0] == -1);      /* untouched */
        } else {
            OK(MPI_Bcast(buf, 3, MPI_INT, rsize > 1, inter));
            CHECK(buf[0] == 7 && buf[1] == rootside && buf[2] == 9);
        }
    }
    /* Allreduce: every member gets the reduction of the other side's contributions */
    int lsize = 0, sum = -1, want = 0;
    MPI_Comm_size(inter, &lsize);
    (void)lsize;
    int mine = 100 * color + hrank;
    OK(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, inter));
    for (int i = 0; i < rsize; i++)
        want += 100 * (1 - color) + i;
    CHECK(sum == want);
    OK(MPI_Barrier(inter));
}

/* World rank of rank r of comm's remote group. */
static int remote_world(MPI_Comm comm, int r)
{
    MPI_Group rg, wg;
    int w = -1;
    MPI_Comm_remote_group(comm, &rg);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(rg, 1, &r, wg, &w);
    MPI_Group_free(&rg);
    MPI_Group_free(&wg);
    return w;
}

/* Comm_split and Comm_create on an intercommunicator. */
static void inter_split_create(MPI_Comm inter, int color, int hrank, int hsize, int rsize)
{
    /* split by local rank parity: the new remote group holds the remote ranks of my parity */
    MPI_Comm sub;
    OK(MPI_Comm_split(inter, hrank % 2, hsize - hrank, &sub));   /* key: reversed order */
    int want_remote = (rsize + 1 - hrank % 2) / 2;
    if (want_remote == 0) {
        CHECK(sub == MPI_COMM_NULL);
    } else {
        CHECK(sub != MPI_COMM_NULL);
        int flag = 0, ls = 0, rs = 0, r = -1;
        MPI_Comm_test_inter(sub, &flag);
        MPI_Comm_size(sub, &ls);
        MPI_Comm_remote_size(sub, &rs);
        MPI_Comm_rank(sub, &r);
        CHECK(flag == 1 && ls == (hsize + 1 - hrank % 2) / 2 && rs == want_remote);
        CHECK(r == ls - 1 - hrank / 2);
        /* side 0's new leader sends its world rank across */
        int wr = mt_rank;
        if (color == 0) {
            OK(MPI_Bcast(&wr, 1, MPI_INT, r == 0 ? MPI_ROOT : MPI_PROC_NULL, sub));
        } else {
            OK(MPI_Bcast(&wr, 1, MPI_INT, 0, sub));
            CHECK(wr == remote_world(sub, 0));
        }
        OK(MPI_Barrier(sub));
        OK(MPI_Comm_free(&sub));
    }
    OK(MPI_Comm_split(inter, MPI_UNDEFINED, 0, &sub));
    CHECK(sub == MPI_COMM_NULL);
    /* create: each side keeps its local ranks 1.. (its only member when it has one) */
    MPI_Group lg, g;
    MPI_Comm_group(inter, &lg);
    int range[1][3] = { { hsize > 1, hsize - 1, 1 } };
    OK(MPI_Group_range_incl(lg, 1, range, &g));
    MPI_Comm cc;
    OK(MPI_Comm_create(inter, g, &cc));
    CHECK((hsize == 1 || hrank >= 1) == (cc != MPI_COMM_NULL));
    if (cc != MPI_COMM_NULL) {
        int ls = 0, rs = 0;
        MPI_Comm_size(cc, &ls);
        MPI_Comm_remote_size(cc, &rs);
        CHECK(ls == (hsize == 1 ? 1 : hsize - 1) && rs == (rsize == 1 ? 1 : rsize - 1));
        CHECK(remote_world(cc, 0) == remote_world(inter, rsize > 1));
        OK(MPI_Barrier(cc));
        OK(MPI_Comm_free(&cc));
    }
    MPI_Group_free(&g);
    MPI_Group_free(&lg);
}

static void inter_idup(MPI_Comm inter, MPI_Comm half, int color, int hrank, int rsize);

static void intercomm(void)
{
    if (mt_size < 2)
        return;
    MPI_Comm half, inter, merged, idup;
    int color = mt_rank % 2;
    OK(MPI_Comm_split(MPI_COMM_WORLD, color, mt_rank, &half));
    int hrank, hsize;
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    /* leaders: world rank 0 (evens) and world rank 1 (odds) */
    OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 77, &inter));
    int flag = 0, rsize = 0, lsize = 0;
    OK(MPI_Comm_test_inter(inter, &flag));
    OK(MPI_Comm_remote_size(inter, &rsize));
    OK(MPI_Comm_size(inter, &lsize));
    int evens = (mt_size + 1) / 2, odds = mt_size / 2;
    CHECK(flag == 1 && lsize == hsize && rsize == (color ? evens : odds));
    MPI_Group rg;
    OK(MPI_Comm_remote_group(inter, &rg));
    int rgs = 0;
    MPI_Group_size(rg, &rgs);
    CHECK(rgs == rsize);
    MPI_Group_free(&rg);
    /* point to point: rank i of each side sends to rank i of the other, if it exists */
    for (int pass = 0; pass < 2; pass++) {
        MPI_Comm c = inter;
        if (pass == 1) {
            OK(MPI_Comm_dup(inter, &idup));
            c = idup;
        }
        if (hrank < rsize) {
            int out = mt_rank * 10 + pass, in = -1;
            MPI_Status st;
            OK(MPI_Sendrecv(&out, 1, MPI_INT, hrank, 5, &in, 1, MPI_INT, MPI_ANY_SOURCE, 5, c, &st));
            CHECK(st.MPI_SOURCE == hrank && st.MPI_TAG == 5);
            int partner = color ? 2 * hrank : 2 * hrank + 1;
            CHECK(in == partner * 10 + pass);
        }
    }
    /* a rank that names a remote rank past the remote group is refused */
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    int v = 0;
    CHECK(mt_class(MPI_Send(&v, 1, MPI_INT, rsize, 0, inter)) == MPI_ERR_RANK);
    /* non-blocking collectives on an intercommunicator: not provided, an error (never a silent success) */
    MPI_Request req = MPI_REQUEST_NULL;
    CHECK(mt_class(MPI_Ibarrier(inter, &req)) == MPI_ERR_COMM);
    /* an operator the datatype lacks: MPI_ERR_OP on every rank, before any message */
    float f = 1, g = 0;
    CHECK(mt_class(MPI_Allreduce(&f, &g, 1, MPI_FLOAT, MPI_BAND, inter)) == MPI_ERR_OP);
    inter_colls(inter, color, hrank, hsize, rsize);
    inter_idup(inter, half, color, hrank, rsize);
    inter_split_create(inter, color, hrank, hsize, rsize);
    /* merge: odds pass high = 1, so the evens come first */
    OK(MPI_Intercomm_merge(inter, color, &merged));
    int mrank, msize, mflag = 1;
    MPI_Comm_rank(merged, &mrank);
    MPI_Comm_size(merged, &msize);
    MPI_Comm_test_inter(merged, &mflag);
    CHECK(msize == mt_size && mflag == 0);
    CHECK(mrank == (color ? evens + hrank : hrank));
    int sum = 0;
    OK(MPI_Allreduce(&mt_rank, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK(sum == mt_size * (mt_size - 1) / 2);
    OK(MPI_Comm_free(&merged));
    OK(MPI_Comm_free(&idup));
    OK(MPI_Comm_free(&inter));
    OK(MPI_Comm_free(&half));
}

/*
 * MPI_Comm_idup of an intercommunicator does not block: every member but
 * each side's leader starts it, then synchronously sends to the other
 * side's leader, which receives those messages before it starts its own
 * idup (MPICH's comm_idup pattern; a blocking dup inside idup deadlocks
 * here). Meanwhile an idup of the local intracommunicator runs too.
 */
static void inter_idup(MPI_Comm inter, MPI_Comm half, int color, int hrank, int rsize)
{
    MPI_Comm d = MPI_COMM_NULL, hd = MPI_COMM_NULL;
    MPI_Request req[2];
    int buf = -1;
    if (hrank == 0) {
        for (int i = 1; i < rsize; i++) {
            OK(MPI_Recv(&buf, 1, MPI_INT, i, 3, inter, MPI_STATUS_IGNORE));
            CHECK(buf == i);
        }
        OK(MPI_Comm_idup(inter, &d, &req[0]));
    } else {
        OK(MPI_Comm_idup(inter, &d, &req[0]));
        OK(MPI_Ssend(&hrank, 1, MPI_INT, 0, 3, inter));
    }
    OK(MPI_Comm_idup(half, &hd, &req[1]));
    OK(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    int flag = 0, rs = 0, cmp = MPI_UNEQUAL;
    OK(MPI_Comm_test_inter(d, &flag));
    OK(MPI_Comm_remote_size(d, &rs));
    OK(MPI_Comm_compare(d, inter, &cmp));
    CHECK(flag == 1 && rs == rsize && cmp == MPI_CONGRUENT);
    /* it works, apart from the originals: a reduction across, a message to the partner */
    int mine = 100 * color + hrank, sum = -1, want = 0;
    OK(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, d));
    for (int i = 0; i < rsize; i++)
        want += 100 * (1 - color) + i;
    CHECK(sum == want);
    if (hrank < rsize) {
        int out = 1000 + mt_rank, in = -1;
        OK(MPI_Sendrecv(&out, 1, MPI_INT, hrank, 4, &in, 1, MPI_INT, hrank, 4, d, MPI_STATUS_IGNORE));
        CHECK(in == 1000 + (color ? 2 * hrank : 2 * hrank + 1));
    }
    int hs = 0;
    OK(MPI_Allreduce(&mt_rank, &hs, 1, MPI_INT, MPI_SUM, hd));
    OK(MPI_Comm_free(&hd));
    OK(MPI_Comm_free(&d));
}

/* Comm_create_group over the even ranks only; the odd ranks do something else meanwhile. */
static void create_group(void)
{
    MPI_Group world, evens;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int ranges[1][3] = { { 0, mt_size - 1, 2 } };
    OK(MPI_Group_range_incl(world, 1, ranges, &evens));
    int n = 0;
    MPI_Group_size(evens, &n);
    CHECK(n == (mt_size + 1) / 2);
    if (mt_rank % 2 == 0) {
        MPI_Comm c;
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, evens, 3, &c));
        int r, s, sum = 0;
        MPI_Comm_rank(c, &r);
        MPI_Comm_size(c, &s);
        CHECK(r == mt_rank / 2 && s == n);
        OK(MPI_Allreduce(&mt_rank, &sum, 1, MPI_INT, MPI_SUM, c));
        CHECK(sum == (n - 1) * n);                /* 0 + 2 + ... + 2(n-1) */
        OK(MPI_Comm_free(&c));
    }
    /* set operations */
    MPI_Group odds, u, in, d;
    OK(MPI_Group_range_excl(world, 1, ranges, &odds));
    OK(MPI_Group_union(evens, odds, &u));
    OK(MPI_Group_intersection(evens, odds, &in));
    OK(MPI_Group_difference(world, odds, &d));
    int su = 0, si = -1, cmp = -1;
    MPI_Group_size(u, &su);
    MPI_Group_size(in, &si);
    MPI_Group_compare(d, evens, &cmp);
    CHECK(su == mt_size && si == 0 && cmp == MPI_IDENT);
    MPI_Group_compare(u, world, &cmp);
    CHECK(cmp == (mt_size > 2 ? MPI_SIMILAR : MPI_IDENT));
    int bad[1][3] = { { 0, mt_size, 1 } };
    MPI_Group x;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(mt_class(MPI_Group_range_incl(world, 1, bad, &x)) == MPI_ERR_RANK);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Group_free(&odds);
    MPI_Group_free(&u);
    if (in != MPI_GROUP_EMPTY)
        MPI_Group_free(&in);
    MPI_Group_free(&d);
    MPI_Group_free(&evens);
    MPI_Group_free(&world);
}

static void envelopes(void)
{
    int ni, na, nd, comb;
    OK(MPI_Type_get_envelope(MPI_INT, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_NAMED);
    MPI_Datatype vec, st, res, dup;
    OK(MPI_Type_vector(3, 2, 5, MPI_DOUBLE, &vec));
    OK(MPI_Type_get_envelope(vec, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nd == 1);
    int ints[8];
    MPI_Aint addrs[4];
    MPI_Datatype types[4];
    OK(MPI_Type_get_contents(vec, 8, 4, 4, ints, addrs, types));
    CHECK(ints[0] == 3 && ints[1] == 2 && ints[2] == 5 && types[0] == MPI_DOUBLE);
    int bl[2] = { 1, 2 };
    MPI_Aint di[2] = { 0, 16 };
    MPI_Datatype ty[2] = { MPI_INT, vec };
    OK(MPI_Type_create_struct(2, bl, di, ty, &st));
    OK(MPI_Type_free(&vec));                     /* st keeps what it was made of */
    OK(MPI_Type_get_envelope(st, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_STRUCT && ni == 3 && na == 2 && nd == 2);
    OK(MPI_Type_get_contents(st, 8, 4, 4, ints, addrs, types));
    CHECK(ints[0] == 2 && ints[1] == 1 && ints[2] == 2 && addrs[1] == 16 && types[0] == MPI_INT);
    OK(MPI_Type_get_envelope(types[1], &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR);
    int sz = 0;
    MPI_Type_size(types[1], &sz);
    CHECK(sz == 6 * (int)sizeof(double));
    OK(MPI_Type_free(&types[1]));                /* a handle of its own: st still works */
    OK(MPI_Type_create_resized(st, -8, 200, &res));
    OK(MPI_Type_get_contents(res, 8, 4, 4, ints, addrs, types));
    CHECK(addrs[0] == -8 && addrs[1] == 200 && types[0] != MPI_DATATYPE_NULL);
    OK(MPI_Type_free(&types[0]));
    OK(MPI_Type_dup(res, &dup));
    OK(MPI_Type_get_envelope(dup, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_DUP && nd == 1);
    MPI_Datatype hb;
    MPI_Aint hd[2] = { 0, 64 };
    OK(MPI_Type_create_hindexed_block(2, 3, hd, MPI_INT, &hb));
    OK(MPI_Type_get_envelope(hb, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_HINDEXED_BLOCK && ni == 2 && na == 2);
    MPI_Count c, lb, ext;
    OK(MPI_Type_size_x(hb, &c));
    OK(MPI_Type_get_extent_x(hb, &lb, &ext));
    CHECK(c == 6 * (MPI_Count)sizeof(int) && lb == 0 && ext == 64 + 3 * (MPI_Count)sizeof(int));
    /* Status_set_elements then Get_count / Get_elements(_x) */
    MPI_Status s;
    OK(MPI_Status_set_elements(&s, MPI_DOUBLE, 7));
    int n = 0;
    OK(MPI_Get_count(&s, MPI_DOUBLE, &n));
    CHECK(n == 7);
    OK(MPI_Status_set_elements_x(&s, hb, 4));    /* one whole element and one int more */
    OK(MPI_Get_elements_x(&s, hb, &c));
    CHECK(c == 4);
    OK(MPI_Get_count(&s, hb, &n));
    CHECK(n == MPI_UNDEFINED);
    OK(MPI_Status_set_cancelled(&s, 1));
    int fl = 0;
    OK(MPI_Test_cancelled(&s, &fl));
    CHECK(fl == 1);
    MPI_Type_free(&hb);
    MPI_Type_free(&dup);
    MPI_Type_free(&res);
    MPI_Type_free(&st);
    double *mem = NULL;
    OK(MPI_Alloc_mem(1024, MPI_INFO_NULL, &mem));
    CHECK(mem != NULL);
    mem[127] = 1.0;
    OK(MPI_Free_mem(mem));
}

static int failing_copy(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
    (void)c, (void)k, (void)extra, (void)in, (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}

static int deleted[3], ndeleted;

static int note_delete(MPI_Comm c, int k, void *value, void *extra)
{
    (void)c, (void)k, (void)extra;
    deleted[ndeleted++ % 3] = (int)(long)value;
    return MPI_SUCCESS;
}

static void attributes(void)
{
    int k;
    OK(MPI_Comm_create_keyval(failing_copy, MPI_COMM_NULL_DELETE_FN, &k, NULL));
    OK(MPI_Comm_set_attr(MPI_COMM_WORLD, k, NULL));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm dup = MPI_COMM_WORLD;
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup) != MPI_SUCCESS && dup == MPI_COMM_NULL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    OK(MPI_Comm_delete_attr(MPI_COMM_WORLD, k));
    OK(MPI_Comm_free_keyval(&k));
    for (long i = 0; i < 3; i++) {
        OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, note_delete, &k, NULL));
        OK(MPI_Comm_set_attr(MPI_COMM_SELF, k, (void *)(i + 1)));
        OK(MPI_Comm_free_keyval(&k));
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    for (int i = 0; i < 3; i++)
        intercomm();
    create_group();
    envelopes();
    attributes();
    mt_done("t_inter");
    /* MPI_Finalize deleted MPI_COMM_SELF's attributes, newest first */
    if (ndeleted != 3 || deleted[0] != 3 || deleted[1] != 2 || deleted[2] != 1) {
        fprintf(stderr, "rank %d: MPI_COMM_SELF's attributes: %d deleted (%d %d %d)\n", mt_rank, ndeleted,
                deleted[0], deleted[1], deleted[2]);
        return 1;
    }
    return 0;
}
