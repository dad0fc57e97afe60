/*
 * Reduction operators: the predefined ones on the predefined C types (a
 * table of loops generated below), user operators, MPI_Reduce_local.
 *
 * Buffers are always in memory layout (the datatype's own), never packed:
 * a derived datatype is reduced block by block, each block a run of one
 * predefined type.
 */
#include "mpi_int.h"

#include <complex.h>
#include <stdlib.h>
#include <string.h>

struct zm_table zm_ops;

typedef void basic_fn(const void *in, void *inout, size_t n);

enum { OP_MAX = 1, OP_MIN, OP_SUM, OP_PROD, OP_LAND, OP_BAND, OP_LOR, OP_BOR, OP_LXOR, OP_BXOR,
       OP_MINLOC, OP_MAXLOC, OP_REPLACE, OP_COUNT };

static basic_fn *table[ZIMP_MPI_NUM_PREDEFINED_TYPES][OP_COUNT];

#define DEF_OP(T, tn, on, expr)                                          \
    static void on##_##tn(const void *in_, void *io_, size_t n)          \
    {                                                                    \
        const T *in = in_;                                               \
        T *io = io_;                                                     \
        for (size_t i = 0; i < n; i++) {                                 \
            T a = in[i], b = io[i];                                      \
            io[i] = (T)(expr);                                           \
        }                                                                \
    }

#define DEF_ARITH(T, tn)                                                 \
    DEF_OP(T, tn, max, a > b ? a : b)                                    \
    DEF_OP(T, tn, min, a < b ? a : b)                                    \
    DEF_OP(T, tn, sum, a + b)                                            \
    DEF_OP(T, tn, prod, a * b)

#define DEF_INT(T, tn)                                                   \
    DEF_ARITH(T, tn)                                                     \
    DEF_OP(T, tn, land, a && b)                                          \
    DEF_OP(T, tn, lor, a || b)                                           \
    DEF_OP(T, tn, lxor, !a != !b)                                        \
    DEF_OP(T, tn, band, a & b)                                           \
    DEF_OP(T, tn, bor, a | b)                                            \
    DEF_OP(T, tn, bxor, a ^ b)

DEF_INT(char, char)
DEF_INT(signed char, schar)
DEF_INT(unsigned char, uchar)
DEF_INT(wchar_t, wchar)
DEF_INT(short, short)
DEF_INT(unsigned short, ushort)
DEF_INT(int, int)
DEF_INT(unsigned, uint)
DEF_INT(long, long)
DEF_INT(unsigned long, ulong)
DEF_INT(long long, llong)
DEF_INT(unsigned long long, ullong)
DEF_INT(int8_t, i8)
DEF_INT(int16_t, i16)
DEF_INT(int32_t, i32)
DEF_INT(int64_t, i64)
DEF_INT(uint8_t, u8)
DEF_INT(uint16_t, u16)
DEF_INT(uint32_t, u32)
DEF_INT(uint64_t, u64)
DEF_INT(zm_int128, i128)
DEF_ARITH(float, float)
DEF_ARITH(double, double)
DEF_ARITH(long double, ldouble)
DEF_OP(float _Complex, fcplx, sum, a + b)
DEF_OP(float _Complex, fcplx, prod, a * b)
DEF_OP(double _Complex, dcplx, sum, a + b)
DEF_OP(double _Complex, dcplx, prod, a * b)
DEF_OP(long double _Complex, ldcplx, sum, a + b)
DEF_OP(long double _Complex, ldcplx, prod, a * b)
DEF_OP(_Bool, bool, land, a && b)
DEF_OP(_Bool, bool, lor, a || b)
DEF_OP(_Bool, bool, lxor, a != b)

/* MINLOC/MAXLOC: the smaller (larger) value; on a tie, the smaller index. */
#define DEF_LOC(VT, tn)                                                  \
    struct loc_##tn { VT v; int i; };                                    \
    static void minloc_##tn(const void *in_, void *io_, size_t n)        \
    {                                                                    \
        const struct loc_##tn *in = in_;                                 \
        struct loc_##tn *io = io_;                                       \
        for (size_t k = 0; k < n; k++) {                                 \
            if (in[k].v < io[k].v)                                       \
                io[k] = in[k];                                           \
            else if (in[k].v == io[k].v && in[k].i < io[k].i)            \
                io[k].i = in[k].i;                                       \
        }                                                                \
    }                                                                    \
    static void maxloc_##tn(const void *in_, void *io_, size_t n)        \
    {                                                                    \
        const struct loc_##tn *in = in_;                                 \
        struct loc_##tn *io = io_;                                       \
        for (size_t k = 0; k < n; k++) {                                 \
            if (in[k].v > io[k].v)                                       \
                io[k] = in[k];                                           \
            else if (in[k].v == io[k].v && in[k].i < io[k].i)            \
                io[k].i = in[k].i;                                       \
        }                                                                \
    }

DEF_LOC(float, float)
DEF_LOC(double, double)
DEF_LOC(long, long)
DEF_LOC(int, int)
DEF_LOC(short, short)
DEF_LOC(long double, ldouble)

/* Two-float and two-double pairs (MPI_2REAL, MPI_2DOUBLE_PRECISION): the index is a number too. */
#define DEF_LOC2(VT, tn)                                                 \
    static void minloc_##tn(const void *in_, void *io_, size_t n)        \
    {                                                                    \
        const VT *in = in_;                                              \
        VT *io = io_;                                                    \
        for (size_t k = 0; k < 2 * n; k += 2) {                          \
            if (in[k] < io[k]) {                                         \
                io[k] = in[k];                                           \
                io[k + 1] = in[k + 1];                                   \
            } else if (in[k] == io[k] && in[k + 1] < io[k + 1])          \
                io[k + 1] = in[k + 1];                                   \
        }                                                                \
    }                                                                    \
    static void maxloc_##tn(const void *in_, void *io_, size_t n)        \
    {                                                                    \
        const VT *in = in_;                                              \
        VT *io = io_;                                                    \
        for (size_t k = 0; k < 2 * n; k += 2) {                          \
            if (in[k] > io[k]) {                                         \
                io[k] = in[k];                                           \
                io[k + 1] = in[k + 1];                                   \
            } else if (in[k] == io[k] && in[k + 1] < io[k + 1])          \
                io[k + 1] = in[k + 1];                                   \
        }                                                                \
    }
DEF_LOC2(float, 2float)
DEF_LOC2(double, 2double)

#define IDX(dt) ((dt) & ZM_INDEX_MASK)
#define REG_ARITH(dt, tn)                                                \
    do {                                                                 \
        table[IDX(dt)][OP_MAX] = max_##tn;                               \
        table[IDX(dt)][OP_MIN] = min_##tn;                               \
        table[IDX(dt)][OP_SUM] = sum_##tn;                               \
        table[IDX(dt)][OP_PROD] = prod_##tn;                             \
    } while (0)
#define REG_LOGIC(dt, tn)                                                \
    do {                                                                 \
        table[IDX(dt)][OP_LAND] = land_##tn;                             \
        table[IDX(dt)][OP_LOR] = lor_##tn;                               \
        table[IDX(dt)][OP_LXOR] = lxor_##tn;                             \
    } while (0)
#define REG_BITS(dt, tn)                                                 \
    do {                                                                 \
        table[IDX(dt)][OP_BAND] = band_##tn;                             \
        table[IDX(dt)][OP_BOR] = bor_##tn;                               \
        table[IDX(dt)][OP_BXOR] = bxor_##tn;                             \
    } while (0)
#define REG_INT(dt, tn)                                                  \
    do {                                                                 \
        REG_ARITH(dt, tn);                                               \
        REG_LOGIC(dt, tn);                                               \
        REG_BITS(dt, tn);                                                \
    } while (0)
#define REG_LOC(dt, tn)                                                  \
    do {                                                                 \
        table[IDX(dt)][OP_MINLOC] = minloc_##tn;                         \
        table[IDX(dt)][OP_MAXLOC] = maxloc_##tn;                         \
    } while (0)

static void table_init(void)
{
    REG_INT(MPI_CHAR, char);
    REG_INT(MPI_SIGNED_CHAR, schar);
    REG_INT(MPI_UNSIGNED_CHAR, uchar);
    REG_BITS(MPI_BYTE, uchar);
    REG_INT(MPI_WCHAR, wchar);
    REG_INT(MPI_SHORT, short);
    REG_INT(MPI_UNSIGNED_SHORT, ushort);
    REG_INT(MPI_INT, int);
    REG_INT(MPI_UNSIGNED, uint);
    REG_INT(MPI_LONG, long);
    REG_INT(MPI_UNSIGNED_LONG, ulong);
    REG_INT(MPI_LONG_LONG_INT, llong);
    REG_INT(MPI_UNSIGNED_LONG_LONG, ullong);
    REG_INT(MPI_INT8_T, i8);
    REG_INT(MPI_INT16_T, i16);
    REG_INT(MPI_INT32_T, i32);
    REG_INT(MPI_INT64_T, i64);
    REG_INT(MPI_UINT8_T, u8);
    REG_INT(MPI_UINT16_T, u16);
    REG_INT(MPI_UINT32_T, u32);
    REG_INT(MPI_UINT64_T, u64);
    REG_INT(MPI_AINT, long);
    REG_INT(MPI_OFFSET, llong);
    REG_INT(MPI_COUNT, llong);
    REG_INT(MPI_INTEGER, int);
    REG_LOGIC(MPI_LOGICAL, int);
    REG_ARITH(MPI_FLOAT, float);
    REG_ARITH(MPI_REAL, float);
    REG_ARITH(MPI_DOUBLE, double);
    REG_ARITH(MPI_DOUBLE_PRECISION, double);
    REG_ARITH(MPI_LONG_DOUBLE, ldouble);
    table[IDX(MPI_C_FLOAT_COMPLEX)][OP_SUM] = sum_fcplx;
    table[IDX(MPI_C_FLOAT_COMPLEX)][OP_PROD] = prod_fcplx;
    table[IDX(MPI_C_DOUBLE_COMPLEX)][OP_SUM] = sum_dcplx;
    table[IDX(MPI_C_DOUBLE_COMPLEX)][OP_PROD] = prod_dcplx;
    table[IDX(MPI_C_LONG_DOUBLE_COMPLEX)][OP_SUM] = sum_ldcplx;
    table[IDX(MPI_C_LONG_DOUBLE_COMPLEX)][OP_PROD] = prod_ldcplx;
    REG_LOGIC(MPI_C_BOOL, bool);
    REG_LOGIC(MPI_CXX_BOOL, bool);
    REG_INT(MPI_INTEGER1, i8);
    REG_INT(MPI_INTEGER2, i16);
    REG_INT(MPI_INTEGER4, i32);
    REG_INT(MPI_INTEGER8, i64);
    REG_INT(MPI_INTEGER16, i128);
    REG_ARITH(MPI_REAL4, float);
    REG_ARITH(MPI_REAL8, double);
    REG_ARITH(MPI_REAL16, ldouble);
    static const MPI_Datatype fc[] = { MPI_COMPLEX, MPI_COMPLEX8, MPI_CXX_FLOAT_COMPLEX, MPI_C_COMPLEX },
                              dc[] = { MPI_DOUBLE_COMPLEX, MPI_COMPLEX16, MPI_CXX_DOUBLE_COMPLEX },
                              lc[] = { MPI_COMPLEX32, MPI_CXX_LONG_DOUBLE_COMPLEX };
    for (size_t i = 0; i < sizeof fc / sizeof fc[0]; i++) {
        table[IDX(fc[i])][OP_SUM] = sum_fcplx;
        table[IDX(fc[i])][OP_PROD] = prod_fcplx;
    }
    for (size_t i = 0; i < sizeof dc / sizeof dc[0]; i++) {
        table[IDX(dc[i])][OP_SUM] = sum_dcplx;
        table[IDX(dc[i])][OP_PROD] = prod_dcplx;
    }
    for (size_t i = 0; i < 2; i++) {
        table[IDX(lc[i])][OP_SUM] = sum_ldcplx;
        table[IDX(lc[i])][OP_PROD] = prod_ldcplx;
    }
    REG_LOC(MPI_FLOAT_INT, float);
    REG_LOC(MPI_DOUBLE_INT, double);
    REG_LOC(MPI_LONG_INT, long);
    REG_LOC(MPI_2INT, int);
    REG_LOC(MPI_2INTEGER, int);
    REG_LOC(MPI_SHORT_INT, short);
    REG_LOC(MPI_LONG_DOUBLE_INT, ldouble);
    REG_LOC(MPI_2REAL, 2float);
    REG_LOC(MPI_2DOUBLE_PRECISION, 2double);
}

static struct zm_op builtin_ops[OP_COUNT];

int zm_ops_init(void)
{
    if (zm_ops.len)
        return MPI_SUCCESS;
    table_init();
    for (int i = 1; i < OP_COUNT; i++) {
        builtin_ops[i] = (struct zm_op){ NULL, i, true, 1 };
        if (zm_table_add(&zm_ops, &builtin_ops[i]) != i)
            return MPI_ERR_NO_MEM;
    }
    zm_ops.reserved = zm_ops.len;
    return MPI_SUCCESS;
}

struct zm_op *zm_op_get(MPI_Op op)
{
    return zm_table_get(&zm_ops, op, ZM_K_OP);
}

/* One run of n values of predefined type `basic` (pairs: n pairs). */
static int apply_basic(int op, int basic, const void *in, void *inout, size_t n)
{
    if (op == OP_REPLACE) {
        memmove(inout, in, n * (size_t)zm_type_get((MPI_Datatype)(ZM_K_TYPE | (unsigned)basic))->extent);
        return MPI_SUCCESS;
    }
    basic_fn *fn = table[basic][op];
    if (!fn)
        return MPI_ERR_OP;
    fn(in, inout, n);
    return MPI_SUCCESS;
}

int zm_op_check(const struct zm_op *op, MPI_Datatype dt)
{
    if (op->fn)
        return MPI_SUCCESS;               /* a user operator takes any type */
    struct zm_type *t = zm_type_get(dt);
    if (!t)
        return MPI_ERR_TYPE;
    int o = op->builtin;
    if (t->predefined)
        return o == OP_REPLACE || table[t->basic][o] ? MPI_SUCCESS : MPI_ERR_OP;
    /* A derived type: as zm_op_apply takes it, block by block, no pairs. */
    for (size_t k = 0; k < t->nblocks; k++) {
        int b = t->blocks[k].basic;
        if (zm_type_get((MPI_Datatype)(ZM_K_TYPE | (unsigned)b))->nblocks != 1 ||
            (o != OP_REPLACE && !table[b][o]))
            return MPI_ERR_OP;
    }
    return MPI_SUCCESS;
}

int zm_op_apply(struct zm_op *op, const void *in, void *inout, int count, MPI_Datatype dt)
{
    if (op->fn) {
        MPI_Datatype d = dt;
        int n = count;
        op->fn((void *)in, inout, &n, &d);
        return MPI_SUCCESS;
    }
    struct zm_type *t = zm_type_get(dt);
    if (!t)
        return MPI_ERR_TYPE;
    if (t->predefined)
        return apply_basic(op->builtin, t->basic, in, inout, (size_t)count);
    /* A derived type: every block is a run of one predefined type (not a pair). */
    for (int e = 0; e < count; e++)
        for (size_t k = 0; k < t->nblocks; k++) {
            const struct zm_block *b = &t->blocks[k];
            MPI_Aint at = (MPI_Aint)e * t->extent + b->off;
            size_t bs = zm_basic_size(b->basic);
            if (zm_type_get((MPI_Datatype)(ZM_K_TYPE | (unsigned)b->basic))->nblocks != 1)
                return MPI_ERR_OP;
            int rc = apply_basic(op->builtin, b->basic, (const char *)in + at, (char *)inout + at, b->len / bs);
            if (rc)
                return rc;
        }
    return MPI_SUCCESS;
}

void zm_op_ref(struct zm_op *o)
{
    if (o->fn)
        o->refs++;
}

void zm_op_unref(struct zm_op *o)
{
    if (o->fn && --o->refs == 0)
        free(o);
}

ZIMP_MPI_API int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op)
{
    if (!user_fn || !op)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Op_create");
    zm_ops_init();
    struct zm_op *o = calloc(1, sizeof *o);
    int i = o ? zm_table_add(&zm_ops, o) : -1;
    if (i < 0) {
        free(o);
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, "MPI_Op_create");
    }
    o->fn = user_fn;
    o->commute = commute != 0;
    o->refs = 1;
    *op = (MPI_Op)(ZM_K_OP | (unsigned)i);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Op_free(MPI_Op *op)
{
    struct zm_op *o = op ? zm_op_get(*op) : NULL;
    if (!o || !o->fn)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_OP, "MPI_Op_free");
    zm_table_del(&zm_ops, *op);
    zm_op_unref(o);                       /* pending non-blocking reductions hold their own */
    *op = MPI_OP_NULL;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Op_commutative(MPI_Op op, int *commute)
{
    struct zm_op *o = zm_op_get(op);
    if (!o || !commute)
        return zm_raise(MPI_COMM_NULL, o ? MPI_ERR_ARG : MPI_ERR_OP, "MPI_Op_commutative");
    *commute = o->commute;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype, MPI_Op op)
{
    struct zm_op *o = zm_op_get(op);
    if (!o)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_OP, "MPI_Reduce_local");
    if (zm_type_check(datatype, false) || count < 0)
        return zm_raise(MPI_COMM_NULL, count < 0 ? MPI_ERR_COUNT : MPI_ERR_TYPE, "MPI_Reduce_local");
    int rc = zm_op_apply(o, inbuf, inoutbuf, count, datatype);
    return rc ? zm_raise(MPI_COMM_NULL, rc, "MPI_Reduce_local") : MPI_SUCCESS;
}
