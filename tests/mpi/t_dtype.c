/*
 * Datatypes: sizes, extents and true extents of derived types, padding of
 * structs, resized types, Pack/Unpack, Get_elements, derived types on the
 * wire (point-to-point, broadcast) and in reductions.
 */
#include "mpitest.h"

#include <complex.h>

#include <stddef.h>
#include <stdint.h>

struct particle {
    double x, y;
    int id;
    char tag;
};

static void shapes(void)
{
    MPI_Datatype vec, idx, hv, st, rs, dup, contig;
    MPI_Aint lb, ext, tlb, text;
    int size;
    OK(MPI_Type_vector(3, 2, 4, MPI_INT, &vec));
    OK(MPI_Type_size(vec, &size));
    OK(MPI_Type_get_extent(vec, &lb, &ext));
    CHECK(size == 24 && lb == 0 && ext == (2 * 4 + 2) * 4);
    int bl[3] = { 1, 2, 1 }, dp[3] = { 5, 0, 9 };
    OK(MPI_Type_indexed(3, bl, dp, MPI_DOUBLE, &idx));
    OK(MPI_Type_size(idx, &size));
    OK(MPI_Type_get_extent(idx, &lb, &ext));
    OK(MPI_Type_get_true_extent(idx, &tlb, &text));
    CHECK(size == 32 && lb == 0 && ext == 80 && tlb == 0 && text == 80);
    OK(MPI_Type_create_hvector(2, 1, 100, MPI_CHAR, &hv));
    OK(MPI_Type_get_extent(hv, &lb, &ext));
    CHECK(ext == 101);
    int sbl[3] = { 2, 1, 1 };
    MPI_Aint sdp[3] = { offsetof(struct particle, x), offsetof(struct particle, id),
                        offsetof(struct particle, tag) };
    MPI_Datatype sty[3] = { MPI_DOUBLE, MPI_INT, MPI_CHAR };
    OK(MPI_Type_create_struct(3, sbl, sdp, sty, &st));
    OK(MPI_Type_size(st, &size));
    OK(MPI_Type_get_extent(st, &lb, &ext));
    CHECK(size == 21 && ext == (MPI_Aint)sizeof(struct particle));
    OK(MPI_Type_create_resized(MPI_INT, -4, 16, &rs));
    OK(MPI_Type_get_extent(rs, &lb, &ext));
    OK(MPI_Type_get_true_extent(rs, &tlb, &text));
    CHECK(lb == -4 && ext == 16 && tlb == 0 && text == 4);
    OK(MPI_Type_dup(st, &dup));
    OK(MPI_Type_size(dup, &size));
    CHECK(size == 21);
    OK(MPI_Type_contiguous(0, MPI_INT, &contig));
    OK(MPI_Type_size(contig, &size));
    CHECK(size == 0);
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Type_get_name(MPI_DOUBLE, name, &len));
    CHECK(strcmp(name, "MPI_DOUBLE") == 0);
    OK(MPI_Type_set_name(vec, "myvec"));
    OK(MPI_Type_get_name(vec, name, &len));
    CHECK(strcmp(name, "myvec") == 0);
    OK(MPI_Type_size(MPI_DOUBLE_INT, &size));
    CHECK(size == 12);
    MPI_Datatype all[] = { vec, idx, hv, st, rs, dup, contig };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        OK(MPI_Type_free(&all[i]));
    CHECK(all[0] == MPI_DATATYPE_NULL);
}

static void pack(void)
{
    MPI_Datatype vec;
    OK(MPI_Type_vector(4, 1, 3, MPI_SHORT, &vec));
    OK(MPI_Type_commit(&vec));
    short src[12], dst[12] = { 0 };
    for (int i = 0; i < 12; i++)
        src[i] = (short)(i + 1);
    char buf[64];
    int pos = 0, psize;
    OK(MPI_Pack_size(1, vec, MPI_COMM_WORLD, &psize));
    CHECK(psize == 8);
    OK(MPI_Pack(src, 1, vec, buf, (int)sizeof buf, &pos, MPI_COMM_WORLD));
    int extra = 77;
    OK(MPI_Pack(&extra, 1, MPI_INT, buf, (int)sizeof buf, &pos, MPI_COMM_WORLD));
    CHECK(pos == 12);
    int got = 0;
    pos = 0;
    OK(MPI_Unpack(buf, 12, &pos, dst, 1, vec, MPI_COMM_WORLD));
    OK(MPI_Unpack(buf, 12, &pos, &got, 1, MPI_INT, MPI_COMM_WORLD));
    CHECK(got == 77 && dst[0] == 1 && dst[3] == 4 && dst[9] == 10 && dst[1] == 0);
    /* Get_elements counts basic elements, also of a partial element. */
    MPI_Status st;
    memset(&st, 0, sizeof st);
    st.zimp_bytes = 6;
    int count, elems;
    OK(MPI_Get_count(&st, vec, &count));
    OK(MPI_Get_elements(&st, vec, &elems));
    CHECK(count == MPI_UNDEFINED && elems == 3);
    OK(MPI_Type_free(&vec));
    MPI_Aint a1, a2;
    OK(MPI_Get_address(&src[0], &a1));
    OK(MPI_Get_address(&src[5], &a2));
    CHECK(a2 - a1 == 5 * (MPI_Aint)sizeof(short));
}

static void on_the_wire(void)
{
    int sbl[3] = { 2, 1, 1 };
    MPI_Aint sdp[3] = { offsetof(struct particle, x), offsetof(struct particle, id),
                        offsetof(struct particle, tag) };
    MPI_Datatype sty[3] = { MPI_DOUBLE, MPI_INT, MPI_CHAR }, pt;
    OK(MPI_Type_create_struct(3, sbl, sdp, sty, &pt));
    OK(MPI_Type_commit(&pt));
    enum { N = 2000 };                     /* 2000 x 21 bytes: more than one slot and chunk */
    static struct particle ps[N];
    for (int i = 0; i < N; i++)
        ps[i] = mt_rank == 0 ? (struct particle){ i, -i, i * 3, (char)i } : (struct particle){ 0, 0, 0, 0 };
    OK(MPI_Bcast(ps, N, pt, 0, MPI_COMM_WORLD));
    for (int i = 0; i < N; i++)
        CHECK(ps[i].x == i && ps[i].y == -i && ps[i].id == i * 3 && ps[i].tag == (char)i);
    if (mt_size >= 2 && mt_rank < 2) {
        int p = 1 - mt_rank;
        if (mt_rank == 0)
            OK(MPI_Send(ps, N, pt, p, 1, MPI_COMM_WORLD));
        else {
            memset(ps, 0, sizeof ps);
            MPI_Status st;
            OK(MPI_Recv(ps, N, pt, p, 1, MPI_COMM_WORLD, &st));
            int count;
            OK(MPI_Get_count(&st, pt, &count));
            CHECK(count == N && ps[N - 1].id == 3 * (N - 1));
        }
    }
    OK(MPI_Type_free(&pt));
    /* A reduction over a vector of ints: only the selected elements change. */
    MPI_Datatype vec;
    OK(MPI_Type_vector(3, 1, 2, MPI_INT, &vec));
    OK(MPI_Type_commit(&vec));
    int in[5] = { 1, 100, 2, 100, 3 }, out[5] = { -1, -1, -1, -1, -1 };
    OK(MPI_Allreduce(in, out, 1, vec, MPI_SUM, MPI_COMM_WORLD));
    CHECK(out[0] == mt_size && out[2] == 2 * mt_size && out[4] == 3 * mt_size && out[1] == -1);
    OK(MPI_Type_free(&vec));
}

/* Fortran and C++ named types, MPI_Type_match_size, handle conversions. */
static void named_types(void)
{
    int sz = 0;
    MPI_Datatype t = MPI_DATATYPE_NULL;
    OK(MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &t));
    CHECK(t == MPI_REAL8);
    OK(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 2, &t));
    CHECK(t == MPI_INTEGER2);
    OK(MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, 16, &t));
    MPI_Type_size(t, &sz);
    CHECK(t == MPI_COMPLEX16 && sz == 16);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(mt_class(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 3, &t)) == MPI_ERR_ARG);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    char name[MPI_MAX_OBJECT_NAME];
    int len = 0;
    OK(MPI_Type_get_name(MPI_DOUBLE_COMPLEX, name, &len));
    CHECK(strcmp(name, "MPI_DOUBLE_COMPLEX") == 0 && len == 18);
    MPI_Type_size(MPI_CXX_BOOL, &sz);
    CHECK(sz == (int)sizeof(_Bool));
    /* SUM and PROD on the complex types reach every rank */
    double _Complex z = (double)(mt_rank + 1) + 1.0 * _Complex_I * (double)mt_rank, sum = 0;
    OK(MPI_Allreduce(&z, &sum, 1, MPI_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD));
    CHECK(__real__ sum == mt_size * (mt_size + 1) / 2.0 && __imag__ sum == mt_size * (mt_size - 1) / 2.0);
    float _Complex f = 1.0f * _Complex_I, prod = 0;
    OK(MPI_Allreduce(&f, &prod, 1, MPI_CXX_FLOAT_COMPLEX, MPI_PROD, MPI_COMM_WORLD));
    float _Complex want = 1;
    for (int i = 0; i < mt_size; i++)
        want *= 1.0f * _Complex_I;
    CHECK(prod == want);
    long long i8 = mt_rank, imax = -1;
    OK(MPI_Allreduce(&i8, &imax, 1, MPI_INTEGER8, MPI_MAX, MPI_COMM_WORLD));
    CHECK(imax == mt_size - 1);
    /* MPI_C_COMPLEX: a handle and a name of its own, float complex arithmetic */
    char tname[MPI_MAX_OBJECT_NAME];
    int tlen;
    OK(MPI_Type_get_name(MPI_C_COMPLEX, tname, &tlen));
    CHECK(strcmp(tname, "MPI_C_COMPLEX") == 0 && MPI_C_COMPLEX != MPI_C_FLOAT_COMPLEX);
    float _Complex one = 1.0f + 2.0f * _Complex_I, csum = 0;
    OK(MPI_Allreduce(&one, &csum, 1, MPI_C_COMPLEX, MPI_SUM, MPI_COMM_WORLD));
    CHECK(__real__ csum == (float)mt_size && __imag__ csum == 2.0f * (float)mt_size);
    /* MPI_INTEGER16: 16 bytes, sums past 2^64 */
    __extension__ __int128 big = (__extension__ (__int128)1 << 70) + mt_rank, bsum = 0;
    OK(MPI_Type_size(MPI_INTEGER16, &sz));
    CHECK(sz == 16);
    OK(MPI_Allreduce(&big, &bsum, 1, MPI_INTEGER16, MPI_SUM, MPI_COMM_WORLD));
    CHECK(bsum == (__extension__ (__int128)mt_size << 70) + mt_size * (mt_size - 1) / 2);
    MPI_Datatype matched;
    OK(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 16, &matched));
    CHECK(matched == MPI_INTEGER16);
    CHECK(MPI_Comm_f2c(MPI_Comm_c2f(MPI_COMM_WORLD)) == MPI_COMM_WORLD);
    CHECK(MPI_Type_f2c(MPI_Type_c2f(MPI_DOUBLE)) == MPI_DOUBLE);
    CHECK(MPI_Message_f2c(MPI_Message_c2f(MPI_MESSAGE_NO_PROC)) == MPI_MESSAGE_NO_PROC);
    CHECK(MPI_Op_f2c(MPI_Op_c2f(MPI_SUM)) == MPI_SUM);
}

/* count elements of dt at `in` pack to exactly the n bytes `want` in external32, and
 * unpack into `back`. */
static void ext32_round_trip(const void *in, int count, MPI_Datatype dt, const unsigned char *want, int n,
                             void *back)
{
    unsigned char ext[32];
    MPI_Aint pos = 0, size = 0;
    OK(MPI_Pack_external_size("external32", count, dt, &size));
    CHECK(size == n);
    OK(MPI_Pack_external("external32", in, count, dt, ext, sizeof ext, &pos));
    CHECK(pos == n && memcmp(ext, want, (size_t)n) == 0);
    pos = 0;
    OK(MPI_Unpack_external("external32", ext, sizeof ext, &pos, back, count, dt));
    CHECK(pos == n);
}

/* Subarrays, distributed arrays, external32: what MPI_Pack gives and where the bytes land. */
static void arrays(void)
{
    int a[4][5], got[20], pos = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            a[i][j] = 10 * i + j;
    /* rows 1-2, columns 1-3 of a 4x5 C array */
    MPI_Datatype sub;
    int sizes[2] = { 4, 5 }, subs[2] = { 2, 3 }, starts[2] = { 1, 1 };
    OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub));
    OK(MPI_Type_commit(&sub));
    MPI_Aint lb, ext;
    int sz;
    MPI_Type_get_extent(sub, &lb, &ext);
    MPI_Type_size(sub, &sz);
    CHECK(lb == 0 && ext == (MPI_Aint)sizeof a && sz == 6 * (int)sizeof(int));
    OK(MPI_Pack(a, 1, sub, got, sizeof got, &pos, MPI_COMM_WORLD));
    const int want_sub[6] = { 11, 12, 13, 21, 22, 23 };
    CHECK(pos == 6 * (int)sizeof(int) && memcmp(got, want_sub, sizeof want_sub) == 0);
    int ni, na, nd, comb;
    MPI_Type_get_envelope(sub, &ni, &na, &nd, &comb);
    CHECK(comb == MPI_COMBINER_SUBARRAY && ni == 8 && na == 0 && nd == 1);
    MPI_Type_free(&sub);
    /* the same rows in Fortran order: a 5x4 column-major array, columns 1-2 */
    int fs[2] = { 5, 4 }, fsub[2] = { 3, 2 }, fst[2] = { 1, 1 };
    OK(MPI_Type_create_subarray(2, fs, fsub, fst, MPI_ORDER_FORTRAN, MPI_INT, &sub));
    OK(MPI_Type_commit(&sub));
    pos = 0;
    OK(MPI_Pack(a, 1, sub, got, sizeof got, &pos, MPI_COMM_WORLD));
    CHECK(memcmp(got, want_sub, sizeof want_sub) == 0);
    MPI_Type_free(&sub);
    /* darray: the 4x5 array, block rows over 2 processes x cyclic columns over 2 */
    const int want_darray[4][6] = { { 0, 2, 4, 10, 12, 14 }, { 1, 3, 11, 13 },
                                    { 20, 22, 24, 30, 32, 34 }, { 21, 23, 31, 33 } };
    const int nwant[4] = { 6, 4, 6, 4 };
    int dist[2] = { MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC };
    int dargs[2] = { MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG }, ps[2] = { 2, 2 };
    for (int r = 0; r < 4; r++) {
        MPI_Datatype d;
        OK(MPI_Type_create_darray(4, r, 2, sizes, dist, dargs, ps, MPI_ORDER_C, MPI_INT, &d));
        OK(MPI_Type_commit(&d));
        MPI_Type_size(d, &sz);
        MPI_Type_get_extent(d, &lb, &ext);
        CHECK(sz == nwant[r] * (int)sizeof(int) && lb == 0 && ext == (MPI_Aint)sizeof a);
        pos = 0;
        OK(MPI_Pack(a, 1, d, got, sizeof got, &pos, MPI_COMM_WORLD));
        CHECK(memcmp(got, want_darray[r], sizeof(int) * (size_t)nwant[r]) == 0);
        MPI_Type_free(&d);
    }
    /* cyclic(2) over 3 processes of 7 elements: process 1 owns 2, 3 */
    int g7 = 7, cyc = MPI_DISTRIBUTE_CYCLIC, two = 2, three = 3, row[7] = { 0, 1, 2, 3, 4, 5, 6 };
    MPI_Datatype d;
    OK(MPI_Type_create_darray(3, 1, 1, &g7, &cyc, &two, &three, MPI_ORDER_C, MPI_INT, &d));
    OK(MPI_Type_commit(&d));
    pos = 0;
    OK(MPI_Pack(row, 1, d, got, sizeof got, &pos, MPI_COMM_WORLD));
    CHECK(pos == 2 * (int)sizeof(int) && got[0] == 2 && got[1] == 3);
    MPI_Type_free(&d);
    /* external32: big-endian, and back */
    int v[2] = { 0x01020304, -2 }, back[2] = { 0, 0 };
    ext32_round_trip(v, 2, MPI_INT, (const unsigned char[]){ 1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe }, 8, back);
    CHECK(back[0] == v[0] && back[1] == v[1]);
    /* external32's MPI_LONG is 4 bytes (8 here), sign kept; MPI_LONG_INT is 4 + 4 */
    long lv[2] = { 1, -1 }, lback[2] = { 0, 0 };
    ext32_round_trip(lv, 2, MPI_LONG, (const unsigned char[]){ 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff }, 8, lback);
    CHECK(lback[0] == 1 && lback[1] == -1);
    struct { long v; int i; } li = { -5, 7 }, liback = { 0, 0 };
    ext32_round_trip(&li, 1, MPI_LONG_INT, (const unsigned char[]){ 0xff, 0xff, 0xff, 0xfb, 0, 0, 0, 7 }, 8,
                     &liback);
    CHECK(liback.v == -5 && liback.i == 7);
}

static int tdeleted, tcopy_fail;

static int tdelete(MPI_Datatype t, int k, void *value, void *extra)
{
    (void)t, (void)k, (void)extra;
    tdeleted += (int)(intptr_t)value;
    return MPI_SUCCESS;
}

static int tcopy(MPI_Datatype t, int k, void *extra, void *in, void *out, int *flag)
{
    (void)t, (void)k, (void)extra;
    *(void **)out = (void *)((intptr_t)in * 10);
    *flag = 1;
    return tcopy_fail ? MPI_ERR_OTHER : MPI_SUCCESS;
}

/* Attributes on datatypes: set, get, replace, copy on dup, delete on free, failing copy. */
static void type_attributes(void)
{
    int k, k2, flag = 0;
    void *v = NULL;
    MPI_Datatype t, d;
    OK(MPI_Type_contiguous(2, MPI_INT, &t));
    OK(MPI_Type_create_keyval(tcopy, tdelete, &k, NULL));
    OK(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &k2, NULL));
    OK(MPI_Type_get_attr(t, k, &v, &flag));
    CHECK(flag == 0);
    OK(MPI_Type_set_attr(t, k, (void *)1));
    OK(MPI_Type_set_attr(t, k, (void *)2));           /* replaces: the old value's delete runs */
    CHECK(tdeleted == 1);
    OK(MPI_Type_set_attr(t, k2, (void *)7));
    OK(MPI_Type_get_attr(t, k, &v, &flag));
    CHECK(flag == 1 && v == (void *)2);
    OK(MPI_Type_dup(t, &d));                         /* k copied (x10), k2 not */
    OK(MPI_Type_get_attr(d, k, &v, &flag));
    CHECK(flag == 1 && v == (void *)20);
    OK(MPI_Type_get_attr(d, k2, &v, &flag));
    CHECK(flag == 0);
    OK(MPI_Type_free(&d));
    CHECK(tdeleted == 21);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    tcopy_fail = 1;
    d = MPI_INT;
    CHECK(MPI_Type_dup(t, &d) != MPI_SUCCESS && d == MPI_DATATYPE_NULL);
    tcopy_fail = 0;
    int comm_key;
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &comm_key, NULL));
    CHECK(mt_class(MPI_Type_set_attr(t, comm_key, NULL)) == MPI_ERR_KEYVAL);   /* a communicator keyval */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    OK(MPI_Comm_free_keyval(&comm_key));
    OK(MPI_Type_delete_attr(t, k2));
    int kcopy = k;
    OK(MPI_Type_free_keyval(&k));                    /* still used by t's attribute */
    int again = kcopy;
    OK(MPI_Type_free_keyval(&again));                /* freed again while in use: a no-op */
    OK(MPI_Type_free(&t));
    CHECK(tdeleted == 23);                           /* its delete callback still ran */
    OK(MPI_Type_free_keyval(&k2));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    again = kcopy;
    CHECK(mt_class(MPI_Type_free_keyval(&again)) == MPI_ERR_KEYVAL);   /* gone now */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    shapes();
    pack();
    on_the_wire();
    named_types();
    arrays();
    type_attributes();
    return mt_done("t_dtype");
}
