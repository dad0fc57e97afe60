/*
 * Datatypes. A type's typemap is kept flattened: one element is a list of
 * blocks (offset, length, predefined type), adjacent blocks of the same
 * predefined type merged. Packing walks the list with a cursor, so a
 * message can be packed or unpacked a chunk at a time (streams, bcast
 * chunks) without rescanning from the start.
 */
#include "mpi_int.h"

#include <complex.h>
#include <limits.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct zm_table zm_types;

/* The pair types of MINLOC/MAXLOC, laid out as the C compiler lays them. */
struct zm_float_int { float v; int i; };
struct zm_double_int { double v; int i; };
struct zm_long_int { long v; int i; };
struct zm_2int { int v; int i; };
struct zm_short_int { short v; int i; };
struct zm_long_double_int { long double v; int i; };

struct predef {
    const char *name;
    size_t size, extent, align;
    int first, second;    /* pair types: the types of their two fields */
    size_t second_off;
};

#define P(n, t) [(n) & ZM_INDEX_MASK] = { #n, sizeof(t), sizeof(t), alignof(t), 0, 0, 0 }
#define PAIR(n, s, a, b)                                                                  \
    [(n) & ZM_INDEX_MASK] = { #n, sizeof(((s *)0)->v) + sizeof(int), sizeof(s), alignof(s), \
                              (a) & ZM_INDEX_MASK, (b) & ZM_INDEX_MASK, offsetof(s, i) }

static const struct predef predefs[ZIMP_MPI_NUM_PREDEFINED_TYPES] = {
    P(MPI_CHAR, char), P(MPI_SIGNED_CHAR, signed char), P(MPI_UNSIGNED_CHAR, unsigned char),
    P(MPI_BYTE, unsigned char), P(MPI_WCHAR, wchar_t), P(MPI_SHORT, short),
    P(MPI_UNSIGNED_SHORT, unsigned short), P(MPI_INT, int), P(MPI_UNSIGNED, unsigned),
    P(MPI_LONG, long), P(MPI_UNSIGNED_LONG, unsigned long), P(MPI_LONG_LONG_INT, long long),
    P(MPI_UNSIGNED_LONG_LONG, unsigned long long), P(MPI_FLOAT, float), P(MPI_DOUBLE, double),
    P(MPI_LONG_DOUBLE, long double), P(MPI_C_BOOL, _Bool), P(MPI_INT8_T, int8_t),
    P(MPI_INT16_T, int16_t), P(MPI_INT32_T, int32_t), P(MPI_INT64_T, int64_t),
    P(MPI_UINT8_T, uint8_t), P(MPI_UINT16_T, uint16_t), P(MPI_UINT32_T, uint32_t),
    P(MPI_UINT64_T, uint64_t), P(MPI_AINT, MPI_Aint), P(MPI_OFFSET, MPI_Offset),
    P(MPI_COUNT, MPI_Count), P(MPI_C_FLOAT_COMPLEX, float _Complex),
    P(MPI_C_DOUBLE_COMPLEX, double _Complex), P(MPI_C_LONG_DOUBLE_COMPLEX, long double _Complex),
    P(MPI_PACKED, unsigned char),
    PAIR(MPI_FLOAT_INT, struct zm_float_int, MPI_FLOAT, MPI_INT),
    PAIR(MPI_DOUBLE_INT, struct zm_double_int, MPI_DOUBLE, MPI_INT),
    PAIR(MPI_LONG_INT, struct zm_long_int, MPI_LONG, MPI_INT),
    PAIR(MPI_2INT, struct zm_2int, MPI_INT, MPI_INT),
    PAIR(MPI_SHORT_INT, struct zm_short_int, MPI_SHORT, MPI_INT),
    PAIR(MPI_LONG_DOUBLE_INT, struct zm_long_double_int, MPI_LONG_DOUBLE, MPI_INT),
    P(MPI_CHARACTER, char), P(MPI_INTEGER, int), P(MPI_REAL, float),
    P(MPI_DOUBLE_PRECISION, double), P(MPI_LOGICAL, int),
    PAIR(MPI_2INTEGER, struct zm_2int, MPI_INT, MPI_INT),
    [MPI_2REAL & ZM_INDEX_MASK] = { "MPI_2REAL", 2 * sizeof(float), 2 * sizeof(float),
                                    alignof(float), MPI_REAL & ZM_INDEX_MASK,
                                    MPI_REAL & ZM_INDEX_MASK, sizeof(float) },
    [MPI_2DOUBLE_PRECISION & ZM_INDEX_MASK] = { "MPI_2DOUBLE_PRECISION", 2 * sizeof(double),
                                                2 * sizeof(double), alignof(double),
                                                MPI_DOUBLE_PRECISION & ZM_INDEX_MASK,
                                                MPI_DOUBLE_PRECISION & ZM_INDEX_MASK, sizeof(double) },
    P(MPI_COMPLEX, float _Complex), P(MPI_DOUBLE_COMPLEX, double _Complex),
    P(MPI_INTEGER1, int8_t), P(MPI_INTEGER2, int16_t), P(MPI_INTEGER4, int32_t),
    P(MPI_INTEGER8, int64_t), P(MPI_REAL4, float), P(MPI_REAL8, double),
    P(MPI_REAL16, long double), P(MPI_COMPLEX8, float _Complex), P(MPI_COMPLEX16, double _Complex),
    P(MPI_COMPLEX32, long double _Complex), P(MPI_CXX_BOOL, _Bool),
    P(MPI_CXX_FLOAT_COMPLEX, float _Complex), P(MPI_CXX_DOUBLE_COMPLEX, double _Complex),
    P(MPI_CXX_LONG_DOUBLE_COMPLEX, long double _Complex),
    P(MPI_C_COMPLEX, float _Complex), P(MPI_INTEGER16, zm_int128),
};

static struct zm_type predef_types[ZIMP_MPI_NUM_PREDEFINED_TYPES];
static struct zm_block predef_blocks[ZIMP_MPI_NUM_PREDEFINED_TYPES][2];

size_t zm_basic_size(int basic)
{
    return basic > 0 && basic < ZIMP_MPI_NUM_PREDEFINED_TYPES ? predefs[basic].size : 0;
}

static void predef_init(int i)
{
    const struct predef *p = &predefs[i];
    struct zm_type *t = &predef_types[i];
    memset(t, 0, sizeof *t);
    t->refs = 1;
    t->predefined = t->committed = true;
    t->size = p->size;
    t->extent = t->true_extent = (MPI_Aint)p->extent;
    t->align = p->align;
    t->basic = i;
    t->basic_size = p->size;
    t->nelems = 1;
    t->blocks = predef_blocks[i];
    if (p->first) {                       /* a pair: two blocks */
        size_t first = p->size - sizeof(int);
        if (p->first == p->second)
            first = p->size / 2;
        t->blocks[0] = (struct zm_block){ 0, first, p->first };
        t->blocks[1] = (struct zm_block){ (MPI_Aint)p->second_off, p->size - first, p->second };
        t->nblocks = 2;
        t->nelems = 2;
        t->true_extent = (MPI_Aint)(p->second_off + p->size - first);
    } else {
        t->blocks[0] = (struct zm_block){ 0, p->size, i };
        t->nblocks = 1;
    }
    t->contig = t->nblocks == 1 && (MPI_Aint)t->size == t->extent;
    snprintf(t->name, sizeof t->name, "%s", p->name);
}

int zm_types_init(void)
{
    if (zm_types.len)
        return MPI_SUCCESS;
    for (int i = 1; i < ZIMP_MPI_NUM_PREDEFINED_TYPES; i++) {
        predef_init(i);
        if (zm_table_add(&zm_types, &predef_types[i]) != i)
            return MPI_ERR_NO_MEM;
    }
    zm_types.reserved = zm_types.len;
    return MPI_SUCCESS;
}

void zm_types_fini(void)
{
    for (unsigned i = zm_types.reserved; i < zm_types.len; i++) {
        struct zm_type *t = zm_types.items[i];
        if (t) {
            free(t->blocks);
            free(t);
        }
    }
    zm_table_fini(&zm_types);
}

struct zm_type *zm_type_get(MPI_Datatype dt)
{
    return zm_table_get(&zm_types, dt, ZM_K_TYPE);
}

int zm_type_check(MPI_Datatype dt, bool need_commit)
{
    struct zm_type *t = zm_type_get(dt);
    if (!t || (need_commit && !t->committed))
        return MPI_ERR_TYPE;
    return MPI_SUCCESS;
}

void zm_type_ref(struct zm_type *t)
{
    t->refs++;
}

static void tattrs_drop(struct zm_type *t);

void zm_type_unref(struct zm_type *t)
{
    if (t->predefined || --t->refs > 0)
        return;
    tattrs_drop(t);                       /* a type that was never freed by MPI_Type_free */
    for (int i = 0; i < t->nd; i++)
        zm_type_unref(t->olds[i]);
    free(t->ints);
    free(t->addrs);
    free(t->olds);
    free(t->blocks);
    free(t);
}

/* ---- the cursor ---- */

void zm_cursor_init(struct zm_cursor *c, const struct zm_type *t, const void *buf, size_t count)
{
    memset(c, 0, sizeof *c);
    c->t = t;
    c->base = (char *)buf;
    c->count = t->nblocks ? count : 0;
}

/* The next run of at most n bytes: where it is and how long. */
static size_t cursor_run(struct zm_cursor *c, size_t n, char **at)
{
    const struct zm_type *t = c->t;
    if (c->elem >= c->count)
        return 0;
    if (t->contig) {                      /* the whole buffer is one run */
        size_t pos = c->elem * t->size + c->boff;
        size_t left = c->count * t->size - pos;
        size_t take = n < left ? n : left;
        *at = c->base + pos;
        c->boff += take;
        c->elem += c->boff / t->size;
        c->boff %= t->size;
        return take;
    }
    const struct zm_block *b = &t->blocks[c->blk];
    size_t left = b->len - c->boff;
    size_t take = n < left ? n : left;
    *at = c->base + (MPI_Aint)c->elem * t->extent + b->off + (MPI_Aint)c->boff;
    c->boff += take;
    if (c->boff == b->len) {
        c->boff = 0;
        if (++c->blk == t->nblocks) {
            c->blk = 0;
            c->elem++;
        }
    }
    return take;
}

void zm_cursor_pack(struct zm_cursor *c, void *out, size_t n)
{
    char *o = out, *at;
    size_t k;
    while (n && (k = cursor_run(c, n, &at)) > 0) {
        memcpy(o, at, k);
        o += k;
        n -= k;
    }
}

void zm_cursor_unpack(struct zm_cursor *c, const void *in, size_t n)
{
    const char *i = in;
    char *at;
    size_t k;
    while (n && (k = cursor_run(c, n, &at)) > 0) {
        memcpy(at, i, k);
        i += k;
        n -= k;
    }
}

char *zm_contig_ptr(const struct zm_type *t, const void *buf, size_t count)
{
    if (t->contig || count == 0 || t->size == 0)
        return (char *)buf;
    if (count == 1 && t->nblocks == 1)
        return (char *)buf + t->blocks[0].off;
    return NULL;
}

size_t zm_data_bytes(const struct zm_type *t, int count)
{
    if (count < 0)
        return SIZE_MAX;
    if (t->size && (size_t)count > SIZE_MAX / t->size)
        return SIZE_MAX;
    return t->size * (size_t)count;
}

void *zm_layout_alloc(const struct zm_type *t, size_t count, char **base)
{
    size_t span = count ? (count - 1) * (size_t)t->extent + (size_t)t->true_extent : 0;
    if (t->extent > 0 && span < count * (size_t)t->extent)
        span = count * (size_t)t->extent;     /* pair types are copied as whole structs */
    char *block = malloc(span ? span : 1);
    if (block)
        *base = (char *)((uintptr_t)block - (uintptr_t)t->true_lb);
    return block;
}

void zm_copy_typed(const void *src, const struct zm_type *st, size_t scount,
                   void *dst, const struct zm_type *dt, size_t dcount)
{
    size_t n = st->size * scount, dn = dt->size * dcount;
    if (dn < n)
        n = dn;
    struct zm_cursor in, out;
    zm_cursor_init(&in, st, src, scount);
    zm_cursor_init(&out, dt, dst, dcount);
    char chunk[16384];
    while (n) {
        size_t k = n < sizeof chunk ? n : sizeof chunk;
        zm_cursor_pack(&in, chunk, k);
        zm_cursor_unpack(&out, chunk, k);
        n -= k;
    }
}

/* ---- building derived types ---- */

struct builder {
    struct zm_type *t;
    size_t cap;
    bool any;             /* a replica was added (lb/ub are meaningful) */
    MPI_Aint lb, ub;
    int basic;            /* -2: none yet, -1: mixed */
};

static int builder_init(struct builder *b)
{
    memset(b, 0, sizeof *b);
    b->basic = -2;
    b->t = calloc(1, sizeof *b->t);
    if (!b->t)
        return MPI_ERR_NO_MEM;
    b->t->refs = 1;
    return MPI_SUCCESS;
}

static int push_block(struct builder *b, MPI_Aint off, size_t len, int basic)
{
    struct zm_type *t = b->t;
    if (len == 0)
        return MPI_SUCCESS;
    if (t->nblocks) {
        struct zm_block *last = &t->blocks[t->nblocks - 1];
        if (last->off + (MPI_Aint)last->len == off && last->basic == basic) {
            last->len += len;
            return MPI_SUCCESS;
        }
    }
    if (t->nblocks == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 8;
        struct zm_block *nb = realloc(t->blocks, cap * sizeof *nb);
        if (!nb)
            return MPI_ERR_NO_MEM;
        t->blocks = nb;
        b->cap = cap;
    }
    t->blocks[t->nblocks++] = (struct zm_block){ off, len, basic };
    return MPI_SUCCESS;
}

/* Appends one copy of `old` displaced by disp bytes. */
static int add_replica(struct builder *b, const struct zm_type *old, MPI_Aint disp)
{
    for (size_t i = 0; i < old->nblocks; i++) {
        int rc = push_block(b, disp + old->blocks[i].off, old->blocks[i].len, old->blocks[i].basic);
        if (rc)
            return rc;
    }
    MPI_Aint lb = disp + old->lb, ub = lb + old->extent;
    if (!b->any || lb < b->lb)
        b->lb = lb;
    if (!b->any || ub > b->ub)
        b->ub = ub;
    b->any = true;
    b->t->size += old->size;
    b->t->nelems += old->nelems;
    if (old->align > b->t->align)
        b->t->align = old->align;
    if (b->basic == -2)
        b->basic = old->basic;
    else if (b->basic != old->basic)
        b->basic = -1;
    return MPI_SUCCESS;
}

static int add_replicas(struct builder *b, const struct zm_type *old, MPI_Aint disp, int n)
{
    for (int j = 0; j < n; j++) {
        int rc = add_replica(b, old, disp + (MPI_Aint)j * old->extent);
        if (rc)
            return rc;
    }
    return MPI_SUCCESS;
}

/* Finishes the type, pads a struct's extent to its alignment, hands out a handle. */
static int builder_done(struct builder *b, bool pad, MPI_Datatype *out)
{
    struct zm_type *t = b->t;
    t->lb = b->any ? b->lb : 0;
    t->extent = b->any ? b->ub - b->lb : 0;
    if (pad && t->align > 1 && t->extent % (MPI_Aint)t->align)
        t->extent += (MPI_Aint)t->align - t->extent % (MPI_Aint)t->align;
    if (t->nblocks) {
        MPI_Aint lo = t->blocks[0].off, hi = lo;
        for (size_t i = 0; i < t->nblocks; i++) {
            if (t->blocks[i].off < lo)
                lo = t->blocks[i].off;
            if (t->blocks[i].off + (MPI_Aint)t->blocks[i].len > hi)
                hi = t->blocks[i].off + (MPI_Aint)t->blocks[i].len;
        }
        t->true_lb = lo;
        t->true_extent = hi - lo;
    }
    t->basic = b->basic >= 0 ? b->basic : -1;
    t->basic_size = t->basic >= 0 ? zm_basic_size(t->basic) : 0;
    t->contig = t->nblocks == 1 && t->blocks[0].off == 0 && t->lb == 0 &&
                (MPI_Aint)t->size == t->extent;
    int i = zm_table_add(&zm_types, t);
    if (i < 0) {
        free(t->blocks);
        free(t);
        return MPI_ERR_NO_MEM;
    }
    *out = (MPI_Datatype)(ZM_K_TYPE | (unsigned)i);
    return MPI_SUCCESS;
}

static int builder_fail(struct builder *b, int rc, const char *fn)
{
    free(b->t->blocks);
    free(b->t);
    return zm_raise(MPI_COMM_NULL, rc, fn);
}

static int old_type(MPI_Datatype dt, struct zm_type **out)
{
    *out = zm_type_get(dt);
    return *out ? MPI_SUCCESS : MPI_ERR_TYPE;
}

/*
 * Records how *h was made, for MPI_Type_get_envelope/contents. On failure
 * the new type is freed and the error returned (raised by the caller).
 */
static int envelope(MPI_Datatype *h, int combiner, int ni, const int *ints, int na, const MPI_Aint *addrs,
                    int nd, const MPI_Datatype *olds)
{
    struct zm_type *t = zm_type_get(*h);
    t->combiner = combiner;
    t->ints = ni ? malloc(sizeof(int) * (size_t)ni) : NULL;
    t->addrs = na ? malloc(sizeof(MPI_Aint) * (size_t)na) : NULL;
    t->olds = nd ? malloc(sizeof(struct zm_type *) * (size_t)nd) : NULL;
    if ((ni && !t->ints) || (na && !t->addrs) || (nd && !t->olds)) {
        MPI_Type_free(h);
        return MPI_ERR_NO_MEM;
    }
    t->ni = ni;
    t->na = na;
    if (ni)
        memcpy(t->ints, ints, sizeof(int) * (size_t)ni);
    if (na)
        memcpy(t->addrs, addrs, sizeof(MPI_Aint) * (size_t)na);
    for (int i = 0; i < nd; i++) {
        t->olds[i] = zm_type_get(olds[i]);
        zm_type_ref(t->olds[i]);
        t->nd = i + 1;
    }
    return MPI_SUCCESS;
}

/* The envelope of a constructor whose integers are (count, then two arrays of count or a scalar). */
static int envelope_arrays(MPI_Datatype *h, int combiner, int count, const int *a1, int scalar, const int *a2,
                           int na, const MPI_Aint *addrs, int nd, const MPI_Datatype *olds)
{
    int n = 1 + (a1 ? count : 1) + (a2 ? count : 0);
    int *ints = malloc(sizeof(int) * (size_t)n);
    if (!ints) {
        MPI_Type_free(h);
        return MPI_ERR_NO_MEM;
    }
    int k = 0;
    ints[k++] = count;
    if (a1)
        for (int i = 0; i < count; i++)
            ints[k++] = a1[i];
    else
        ints[k++] = scalar;
    if (a2)
        for (int i = 0; i < count; i++)
            ints[k++] = a2[i];
    int rc = envelope(h, combiner, k, ints, na, addrs, nd, olds);
    free(ints);
    return rc;
}

static int recorded(int rc, const char *fn)
{
    return rc ? zm_raise(MPI_COMM_NULL, rc, fn) : MPI_SUCCESS;
}

/* hvector with a byte stride: the common core of the vector constructors. */
static int make_hvector(int count, int blocklen, MPI_Aint stride, MPI_Datatype oldtype,
                        MPI_Datatype *newtype, const char *fn)
{
    struct zm_type *old;
    if (old_type(oldtype, &old))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_TYPE, fn);
    if (count < 0 || blocklen < 0 || !newtype)
        return zm_raise(MPI_COMM_NULL, count < 0 || blocklen < 0 ? MPI_ERR_COUNT : MPI_ERR_ARG, fn);
    struct builder b;
    if (builder_init(&b))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, fn);
    for (int i = 0; i < count; i++) {
        int rc = add_replicas(&b, old, (MPI_Aint)i * stride, blocklen);
        if (rc)
            return builder_fail(&b, rc, fn);
    }
    int rc = builder_done(&b, false, newtype);
    return rc ? zm_raise(MPI_COMM_NULL, rc, fn) : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype *newtype)
{
    struct zm_type *old = zm_type_get(oldtype);
    MPI_Aint ext = old ? old->extent : 0;
    int rc = make_hvector(1, count, ext, oldtype, newtype, "MPI_Type_contiguous");
    if (rc)
        return rc;
    return recorded(envelope(newtype, MPI_COMBINER_CONTIGUOUS, 1, &count, 0, NULL, 1, &oldtype),
                    "MPI_Type_contiguous");
}

ZIMP_MPI_API int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                                 MPI_Datatype *newtype)
{
    struct zm_type *old = zm_type_get(oldtype);
    MPI_Aint ext = old ? old->extent : 0;
    int rc = make_hvector(count, blocklength, (MPI_Aint)stride * ext, oldtype, newtype, "MPI_Type_vector");
    if (rc)
        return rc;
    int ints[3] = { count, blocklength, stride };
    return recorded(envelope(newtype, MPI_COMBINER_VECTOR, 3, ints, 0, NULL, 1, &oldtype), "MPI_Type_vector");
}

ZIMP_MPI_API int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                                         MPI_Datatype *newtype)
{
    int rc = make_hvector(count, blocklength, stride, oldtype, newtype, "MPI_Type_create_hvector");
    if (rc)
        return rc;
    int ints[2] = { count, blocklength };
    return recorded(envelope(newtype, MPI_COMBINER_HVECTOR, 2, ints, 1, &stride, 1, &oldtype), "MPI_Type_create_hvector");
}

ZIMP_MPI_API int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                                  MPI_Datatype *newtype)
{
    int rc = make_hvector(count, blocklength, stride, oldtype, newtype, "MPI_Type_hvector");
    if (rc)
        return rc;
    int ints[2] = { count, blocklength };
    return recorded(envelope(newtype, MPI_COMBINER_HVECTOR, 2, ints, 1, &stride, 1, &oldtype), "MPI_Type_hvector");
}

/* hindexed with byte displacements (disp_unit 1) or element ones. */
static int make_hindexed(int count, const int *blens, int same_blen, const int *idisps,
                         const MPI_Aint *adisps, MPI_Datatype oldtype, MPI_Datatype *newtype,
                         const char *fn)
{
    struct zm_type *old;
    if (old_type(oldtype, &old))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_TYPE, fn);
    if (count < 0 || !newtype || (count > 0 && ((!blens && same_blen < 0) || (!idisps && !adisps))))
        return zm_raise(MPI_COMM_NULL, count < 0 ? MPI_ERR_COUNT : MPI_ERR_ARG, fn);
    struct builder b;
    if (builder_init(&b))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, fn);
    for (int i = 0; i < count; i++) {
        int n = blens ? blens[i] : same_blen;
        if (n < 0)
            return builder_fail(&b, MPI_ERR_COUNT, fn);
        MPI_Aint d = adisps ? adisps[i] : (MPI_Aint)idisps[i] * old->extent;
        int rc = add_replicas(&b, old, d, n);
        if (rc)
            return builder_fail(&b, rc, fn);
    }
    int rc = builder_done(&b, false, newtype);
    return rc ? zm_raise(MPI_COMM_NULL, rc, fn) : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_indexed(int count, const int array_of_blocklengths[],
                                  const int array_of_displacements[], MPI_Datatype oldtype,
                                  MPI_Datatype *newtype)
{
    int rc = make_hindexed(count, array_of_blocklengths, -1, array_of_displacements, NULL, oldtype, newtype,
                           "MPI_Type_indexed");
    if (rc)
        return rc;
    return recorded(envelope_arrays(newtype, MPI_COMBINER_INDEXED, count, array_of_blocklengths, 0,
                                    array_of_displacements, 0, NULL, 1, &oldtype),
                    "MPI_Type_indexed");
}

ZIMP_MPI_API int MPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[],
                                               MPI_Datatype oldtype, MPI_Datatype *newtype)
{
    if (blocklength < 0)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_COUNT, "MPI_Type_create_indexed_block");
    int rc = make_hindexed(count, NULL, blocklength, array_of_displacements, NULL, oldtype, newtype,
                           "MPI_Type_create_indexed_block");
    if (rc)
        return rc;
    return recorded(envelope_arrays(newtype, MPI_COMBINER_INDEXED_BLOCK, count, NULL, blocklength,
                                    array_of_displacements, 0, NULL, 1, &oldtype),
                    "MPI_Type_create_indexed_block");
}

ZIMP_MPI_API int MPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint array_of_displacements[],
                                                MPI_Datatype oldtype, MPI_Datatype *newtype)
{
    const char *fn = "MPI_Type_create_hindexed_block";
    if (blocklength < 0)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_COUNT, fn);
    int rc = make_hindexed(count, NULL, blocklength, NULL, array_of_displacements, oldtype, newtype, fn);
    if (rc)
        return rc;
    int ints[2] = { count, blocklength };
    return recorded(envelope(newtype, MPI_COMBINER_HINDEXED_BLOCK, 2, ints, count, array_of_displacements, 1,
                             &oldtype),
                    fn);
}

ZIMP_MPI_API int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[],
                                          const MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                                          MPI_Datatype *newtype)
{
    int rc = make_hindexed(count, array_of_blocklengths, -1, NULL, array_of_displacements, oldtype, newtype,
                           "MPI_Type_create_hindexed");
    if (rc)
        return rc;
    return recorded(envelope_arrays(newtype, MPI_COMBINER_HINDEXED, count, array_of_blocklengths, 0, NULL, count,
                                    array_of_displacements, 1, &oldtype),
                    "MPI_Type_create_hindexed");
}

ZIMP_MPI_API int MPI_Type_hindexed(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype *newtype)
{
    int rc = make_hindexed(count, array_of_blocklengths, -1, NULL, array_of_displacements, oldtype, newtype,
                           "MPI_Type_hindexed");
    if (rc)
        return rc;
    return recorded(envelope_arrays(newtype, MPI_COMBINER_HINDEXED, count, array_of_blocklengths, 0, NULL, count,
                                    array_of_displacements, 1, &oldtype),
                    "MPI_Type_hindexed");
}

ZIMP_MPI_API int MPI_Type_create_struct(int count, const int array_of_blocklengths[],
                                        const MPI_Aint array_of_displacements[],
                                        const MPI_Datatype array_of_types[], MPI_Datatype *newtype)
{
    const char *fn = "MPI_Type_create_struct";
    if (count < 0 || !newtype || (count > 0 && (!array_of_blocklengths || !array_of_displacements ||
                                                 !array_of_types)))
        return zm_raise(MPI_COMM_NULL, count < 0 ? MPI_ERR_COUNT : MPI_ERR_ARG, fn);
    struct builder b;
    if (builder_init(&b))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, fn);
    for (int i = 0; i < count; i++) {
        struct zm_type *old;
        if (old_type(array_of_types[i], &old))
            return builder_fail(&b, MPI_ERR_TYPE, fn);
        if (array_of_blocklengths[i] < 0)
            return builder_fail(&b, MPI_ERR_COUNT, fn);
        int rc = add_replicas(&b, old, array_of_displacements[i], array_of_blocklengths[i]);
        if (rc)
            return builder_fail(&b, rc, fn);
    }
    int rc = builder_done(&b, true, newtype);
    if (rc)
        return zm_raise(MPI_COMM_NULL, rc, fn);
    return recorded(envelope_arrays(newtype, MPI_COMBINER_STRUCT, count, array_of_blocklengths, 0, NULL, count,
                                    array_of_displacements, count, array_of_types),
                    fn);
}

ZIMP_MPI_API int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                                         MPI_Datatype *newtype)
{
    const char *fn = "MPI_Type_create_resized";
    struct zm_type *old;
    if (old_type(oldtype, &old) || !newtype)
        return zm_raise(MPI_COMM_NULL, newtype ? MPI_ERR_TYPE : MPI_ERR_ARG, fn);
    struct builder b;
    if (builder_init(&b))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, fn);
    int rc = add_replica(&b, old, 0);
    if (rc)
        return builder_fail(&b, rc, fn);
    b.any = true;
    b.lb = lb;
    b.ub = lb + extent;
    rc = builder_done(&b, false, newtype);
    if (rc)
        return zm_raise(MPI_COMM_NULL, rc, fn);
    MPI_Aint addrs[2] = { lb, extent };
    return recorded(envelope(newtype, MPI_COMBINER_RESIZED, 0, NULL, 2, addrs, 1, &oldtype), fn);
}

/* ---- attributes on datatypes (keyvals of their own, not the communicators') ---- */

struct zm_tattr {
    int keyval;
    void *value;
    struct zm_tattr *next;
};

struct tkeyval {
    MPI_Type_copy_attr_function *copy;
    MPI_Type_delete_attr_function *del;
    void *extra;
    int refs;             /* the keyval itself (until freed) + attributes using it */
    bool freed;           /* MPI_Type_free_keyval called (again: a no-op, as for communicators) */
};
static struct zm_table tkeyvals;
#define ZM_K_TKEYVAL 0x25000000u

static struct tkeyval *tkeyval_get(int k)
{
    return zm_table_get(&tkeyvals, k, ZM_K_TKEYVAL);
}

static void tkeyval_unref(int k)
{
    struct tkeyval *kv = tkeyval_get(k);
    if (kv && --kv->refs == 0) {
        zm_table_del(&tkeyvals, k);
        free(kv);
    }
}

ZIMP_MPI_API int MPI_Type_create_keyval(MPI_Type_copy_attr_function *type_copy_attr_fn,
                                        MPI_Type_delete_attr_function *type_delete_attr_fn, int *type_keyval,
                                        void *extra_state)
{
    if (!type_keyval)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Type_create_keyval");
    struct tkeyval *kv = calloc(1, sizeof *kv);
    int i = kv ? zm_table_add(&tkeyvals, kv) : -1;
    if (i < 0) {
        free(kv);
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, "MPI_Type_create_keyval");
    }
    kv->copy = type_copy_attr_fn ? type_copy_attr_fn : MPI_TYPE_NULL_COPY_FN;
    kv->del = type_delete_attr_fn ? type_delete_attr_fn : MPI_TYPE_NULL_DELETE_FN;
    kv->extra = extra_state;
    kv->refs = 1;
    *type_keyval = (int)(ZM_K_TKEYVAL | (unsigned)i);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_free_keyval(int *type_keyval)
{
    struct tkeyval *kv = type_keyval ? tkeyval_get(*type_keyval) : NULL;
    if (!kv)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_KEYVAL, "MPI_Type_free_keyval");
    if (!kv->freed) {
        kv->freed = true;
        tkeyval_unref(*type_keyval);
    }
    *type_keyval = MPI_KEYVAL_INVALID;
    return MPI_SUCCESS;
}

static struct zm_tattr **tattr_find(struct zm_type *t, int keyval)
{
    struct zm_tattr **a = &t->attrs;
    while (*a && (*a)->keyval != keyval)
        a = &(*a)->next;
    return a;
}

/* Runs the delete callback; removes the attribute only if it succeeded. */
static int tattr_delete(MPI_Datatype h, struct zm_type *t, struct zm_tattr **a)
{
    struct zm_tattr *at = *a;
    struct tkeyval *kv = tkeyval_get(at->keyval);
    int rc = kv ? kv->del(h, at->keyval, at->value, kv->extra) : MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        return rc;
    (void)t;
    *a = at->next;
    tkeyval_unref(at->keyval);
    free(at);
    return MPI_SUCCESS;
}

static int tattr_set(MPI_Datatype h, struct zm_type *t, int keyval, void *value)
{
    struct tkeyval *kv = tkeyval_get(keyval);
    if (!kv)
        return MPI_ERR_KEYVAL;
    struct zm_tattr **a = tattr_find(t, keyval);
    if (*a) {
        int rc = tattr_delete(h, t, a);
        if (rc)
            return rc;
    }
    struct zm_tattr *at = calloc(1, sizeof *at);
    if (!at)
        return MPI_ERR_NO_MEM;
    at->keyval = keyval;
    at->value = value;
    at->next = t->attrs;
    t->attrs = at;
    kv->refs++;
    return MPI_SUCCESS;
}

static void tattrs_drop(struct zm_type *t)
{
    while (t->attrs) {
        struct zm_tattr *a = t->attrs;
        t->attrs = a->next;
        tkeyval_unref(a->keyval);
        free(a);
    }
}

/* MPI_Type_free: every attribute's delete callback, newest first; the first failure stops it. */
static int tattrs_delete_all(MPI_Datatype h, struct zm_type *t)
{
    while (t->attrs) {
        int rc = tattr_delete(h, t, &t->attrs);
        if (rc)
            return rc;
    }
    return MPI_SUCCESS;
}

/* MPI_Type_dup: the copy callbacks decide what the new type gets. */
static int tattrs_copy(MPI_Datatype oldh, struct zm_type *old, MPI_Datatype newh, struct zm_type *nt)
{
    for (struct zm_tattr *a = old->attrs; a; a = a->next) {
        struct tkeyval *kv = tkeyval_get(a->keyval);
        void *out = NULL;
        int flag = 0;
        if (!kv)
            continue;
        int rc = kv->copy(oldh, a->keyval, kv->extra, a->value, &out, &flag);
        if (rc != MPI_SUCCESS)
            return rc;
        if (flag && (rc = tattr_set(newh, nt, a->keyval, out)) != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_set_attr(MPI_Datatype datatype, int type_keyval, void *attribute_val)
{
    struct zm_type *t = zm_type_get(datatype);
    int rc = t ? tattr_set(datatype, t, type_keyval, attribute_val) : MPI_ERR_TYPE;
    return rc ? zm_raise(MPI_COMM_NULL, rc, "MPI_Type_set_attr") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_get_attr(MPI_Datatype datatype, int type_keyval, void *attribute_val, int *flag)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !attribute_val || !flag)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Type_get_attr");
    if (!tkeyval_get(type_keyval))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_KEYVAL, "MPI_Type_get_attr");
    struct zm_tattr **a = tattr_find(t, type_keyval);
    *flag = *a != NULL;
    if (*a)
        *(void **)attribute_val = (*a)->value;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_delete_attr(MPI_Datatype datatype, int type_keyval)
{
    struct zm_type *t = zm_type_get(datatype);
    int rc = t ? MPI_SUCCESS : MPI_ERR_TYPE;
    if (!rc && !tkeyval_get(type_keyval))
        rc = MPI_ERR_KEYVAL;
    struct zm_tattr **a = rc ? NULL : tattr_find(t, type_keyval);
    if (!rc && !*a)
        rc = MPI_ERR_KEYVAL;          /* no such attribute on this type */
    if (!rc)
        rc = tattr_delete(datatype, t, a);
    return rc ? zm_raise(MPI_COMM_NULL, rc, "MPI_Type_delete_attr") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype)
{
    struct zm_type *old;
    if (old_type(oldtype, &old) || !newtype)
        return zm_raise(MPI_COMM_NULL, newtype ? MPI_ERR_TYPE : MPI_ERR_ARG, "MPI_Type_dup");
    int rc = MPI_Type_create_resized(oldtype, old->lb, old->extent, newtype);
    if (rc == MPI_SUCCESS) {
        struct zm_type *t = zm_type_get(*newtype);
        t->committed = old->committed;
        memcpy(t->name, old->name, sizeof t->name);
        for (int i = 0; i < t->nd; i++)      /* made as a resize: recorded as a dup instead */
            zm_type_unref(t->olds[i]);
        free(t->addrs);
        free(t->olds);
        t->addrs = NULL;
        t->olds = NULL;
        t->na = t->nd = 0;
        rc = recorded(envelope(newtype, MPI_COMBINER_DUP, 0, NULL, 0, NULL, 1, &oldtype), "MPI_Type_dup");
    }
    if (rc == MPI_SUCCESS && old->attrs) {
        rc = tattrs_copy(oldtype, old, *newtype, zm_type_get(*newtype));
        if (rc) {                         /* a copy callback failed: no new type */
            struct zm_type *t = zm_type_get(*newtype);
            tattrs_drop(t);               /* what was copied goes, without callbacks */
            zm_table_del(&zm_types, *newtype);
            zm_type_unref(t);
            *newtype = MPI_DATATYPE_NULL;
            return zm_raise(MPI_COMM_NULL, rc, "MPI_Type_dup");
        }
    }
    return rc;
}

ZIMP_MPI_API int MPI_Type_get_envelope(MPI_Datatype datatype, int *num_integers, int *num_addresses,
                                       int *num_datatypes, int *combiner)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !num_integers || !num_addresses || !num_datatypes || !combiner)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Type_get_envelope");
    *combiner = t->predefined ? MPI_COMBINER_NAMED : t->combiner;
    *num_integers = t->ni;
    *num_addresses = t->na;
    *num_datatypes = t->nd;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses,
                                       int max_datatypes, int array_of_integers[],
                                       MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[])
{
    const char *fn = "MPI_Type_get_contents";
    struct zm_type *t = zm_type_get(datatype);
    if (!t || t->predefined)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_TYPE, fn);
    if (max_integers < t->ni || max_addresses < t->na || max_datatypes < t->nd ||
        (t->ni && !array_of_integers) || (t->na && !array_of_addresses) || (t->nd && !array_of_datatypes))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, fn);
    if (t->ni)
        memcpy(array_of_integers, t->ints, sizeof(int) * (size_t)t->ni);
    if (t->na)
        memcpy(array_of_addresses, t->addrs, sizeof(MPI_Aint) * (size_t)t->na);
    for (int i = 0; i < t->nd; i++) {
        struct zm_type *o = t->olds[i];
        if (o->predefined) {                /* predefined types keep their own handle */
            array_of_datatypes[i] = (MPI_Datatype)(ZM_K_TYPE | (unsigned)(o - predef_types));
            continue;
        }
        int k = zm_table_add(&zm_types, o);   /* a new handle of the same type, freed by the caller */
        if (k < 0)
            return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, fn);
        zm_type_ref(o);
        array_of_datatypes[i] = (MPI_Datatype)(ZM_K_TYPE | (unsigned)k);
    }
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_commit(MPI_Datatype *datatype)
{
    struct zm_type *t = datatype ? zm_type_get(*datatype) : NULL;
    if (!t)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_TYPE, "MPI_Type_commit");
    t->committed = true;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_free(MPI_Datatype *datatype)
{
    struct zm_type *t = datatype ? zm_type_get(*datatype) : NULL;
    if (!t || t->predefined)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_TYPE, "MPI_Type_free");
    int rc = tattrs_delete_all(*datatype, t);
    if (rc)
        return zm_raise(MPI_COMM_NULL, rc, "MPI_Type_free");
    /* Pending operations hold their own reference: the memory stays until they end. */
    zm_table_del(&zm_types, *datatype);
    zm_type_unref(t);
    *datatype = MPI_DATATYPE_NULL;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_size(MPI_Datatype datatype, int *size)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !size)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Type_size");
    *size = t->size > INT_MAX ? MPI_UNDEFINED : (int)t->size;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !lb || !extent)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Type_get_extent");
    *lb = t->lb;
    *extent = t->extent;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *true_lb, MPI_Aint *true_extent)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !true_lb || !true_extent)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Type_get_true_extent");
    *true_lb = t->true_lb;
    *true_extent = t->true_extent;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_get_name(MPI_Datatype datatype, char *type_name, int *resultlen)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !type_name || !resultlen)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Type_get_name");
    *resultlen = snprintf(type_name, MPI_MAX_OBJECT_NAME, "%s", t->name);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_set_name(MPI_Datatype datatype, const char *type_name)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !type_name)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Type_set_name");
    snprintf(t->name, sizeof t->name, "%s", type_name);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Get_address(const void *location, MPI_Aint *address)
{
    if (!address)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Get_address");
    *address = (MPI_Aint)(uintptr_t)location;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Address(void *location, MPI_Aint *address)
{
    return MPI_Get_address(location, address);
}

/* ---- MPI_Pack / MPI_Unpack: the packed format is the bytes in typemap order ---- */

ZIMP_MPI_API int MPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize,
                          int *position, MPI_Comm comm)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t)
        return zm_raise(comm, MPI_ERR_TYPE, "MPI_Pack");
    if (incount < 0 || !position || *position < 0 || outsize < 0)
        return zm_raise(comm, incount < 0 ? MPI_ERR_COUNT : MPI_ERR_ARG, "MPI_Pack");
    size_t n = zm_data_bytes(t, incount);
    if (n > (size_t)(outsize - *position))
        return zm_raise(comm, MPI_ERR_TRUNCATE, "MPI_Pack");
    struct zm_cursor c;
    zm_cursor_init(&c, t, inbuf, (size_t)incount);
    zm_cursor_pack(&c, (char *)outbuf + *position, n);
    *position += (int)n;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount,
                            MPI_Datatype datatype, MPI_Comm comm)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t)
        return zm_raise(comm, MPI_ERR_TYPE, "MPI_Unpack");
    if (outcount < 0 || !position || *position < 0 || insize < 0)
        return zm_raise(comm, outcount < 0 ? MPI_ERR_COUNT : MPI_ERR_ARG, "MPI_Unpack");
    size_t n = zm_data_bytes(t, outcount);
    if (n > (size_t)(insize - *position))
        return zm_raise(comm, MPI_ERR_TRUNCATE, "MPI_Unpack");
    struct zm_cursor c;
    zm_cursor_init(&c, t, outbuf, (size_t)outcount);
    zm_cursor_unpack(&c, (const char *)inbuf + *position, n);
    *position += (int)n;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int *size)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || incount < 0 || !size)
        return zm_raise(comm, !t ? MPI_ERR_TYPE : incount < 0 ? MPI_ERR_COUNT : MPI_ERR_ARG,
                        "MPI_Pack_size");
    size_t n = zm_data_bytes(t, incount);
    *size = n > INT_MAX ? MPI_UNDEFINED : (int)n;
    return MPI_SUCCESS;
}

/* ---- counts from a status ---- */

ZIMP_MPI_API int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !status || !count)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Get_count");
    long long bytes = status->zimp_bytes;
    if (t->size == 0)
        *count = bytes == 0 ? 0 : MPI_UNDEFINED;
    else if (bytes % (long long)t->size || bytes / (long long)t->size > INT_MAX)
        *count = MPI_UNDEFINED;
    else
        *count = (int)(bytes / (long long)t->size);
    return MPI_SUCCESS;
}

/* Predefined elements in `bytes` of t's typemap, or -1 when they end inside one. */
static long long elements_in(const struct zm_type *t, size_t bytes)
{
    if (t->size == 0)
        return 0;
    size_t n = bytes / t->size * t->nelems, rem = bytes % t->size;
    for (size_t i = 0; i < t->nblocks && rem; i++) {
        size_t bs = zm_basic_size(t->blocks[i].basic);
        size_t take = rem < t->blocks[i].len ? rem : t->blocks[i].len;
        if (!bs || take % bs)
            return -1;
        n += take / bs;
        rem -= take;
    }
    return (long long)n;
}

ZIMP_MPI_API int MPI_Get_elements(const MPI_Status *status, MPI_Datatype datatype, int *count)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !status || !count)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Get_elements");
    long long n = elements_in(t, (size_t)status->zimp_bytes);
    *count = n < 0 || n > INT_MAX ? MPI_UNDEFINED : (int)n;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Get_elements_x(const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !status || !count)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Get_elements_x");
    long long n = elements_in(t, (size_t)status->zimp_bytes);
    *count = n < 0 ? MPI_UNDEFINED : n;
    return MPI_SUCCESS;
}

/*
 * The bytes that `count` predefined elements of t fill, walking its typemap
 * (whole elements first, then the blocks of a partial one).
 */
static int bytes_of_elements(const struct zm_type *t, MPI_Count count, long long *bytes)
{
    if (count < 0)
        return MPI_ERR_COUNT;
    if (t->nelems == 0) {
        *bytes = 0;
        return MPI_SUCCESS;
    }
    long long b = count / (MPI_Count)t->nelems * (long long)t->size;
    MPI_Count rem = count % (MPI_Count)t->nelems;
    for (size_t i = 0; i < t->nblocks && rem; i++) {
        size_t bs = zm_basic_size(t->blocks[i].basic);
        MPI_Count in_block = bs ? (MPI_Count)(t->blocks[i].len / bs) : 0;
        MPI_Count take = rem < in_block ? rem : in_block;
        b += take * (long long)bs;
        rem -= take;
    }
    *bytes = b;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Status_set_elements_x(MPI_Status *status, MPI_Datatype datatype, MPI_Count count)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !status)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Status_set_elements_x");
    long long bytes;
    int rc = bytes_of_elements(t, count, &bytes);
    if (rc)
        return zm_raise(MPI_COMM_NULL, rc, "MPI_Status_set_elements_x");
    status->zimp_bytes = bytes;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Status_set_elements(MPI_Status *status, MPI_Datatype datatype, int count)
{
    return MPI_Status_set_elements_x(status, datatype, count);
}

ZIMP_MPI_API int MPI_Status_set_cancelled(MPI_Status *status, int flag)
{
    if (!status)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Status_set_cancelled");
    status->zimp_cancelled = flag != 0;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count *size)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !size)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Type_size_x");
    *size = (MPI_Count)t->size;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !lb || !extent)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Type_get_extent_x");
    *lb = t->lb;
    *extent = t->extent;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count *true_lb, MPI_Count *true_extent)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !true_lb || !true_extent)
        return zm_raise(MPI_COMM_NULL, t ? MPI_ERR_ARG : MPI_ERR_TYPE, "MPI_Type_get_true_extent_x");
    *true_lb = t->true_lb;
    *true_extent = t->true_extent;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Type_match_size(int typeclass, int size, MPI_Datatype *datatype)
{
    static const struct {
        int cls;
        MPI_Datatype t;
    } fortran[] = {
        { MPI_TYPECLASS_REAL, MPI_REAL4 },        { MPI_TYPECLASS_REAL, MPI_REAL8 },
        { MPI_TYPECLASS_REAL, MPI_REAL16 },       { MPI_TYPECLASS_INTEGER, MPI_INTEGER1 },
        { MPI_TYPECLASS_INTEGER, MPI_INTEGER2 },  { MPI_TYPECLASS_INTEGER, MPI_INTEGER4 },
        { MPI_TYPECLASS_INTEGER, MPI_INTEGER8 },  { MPI_TYPECLASS_INTEGER, MPI_INTEGER16 },
        { MPI_TYPECLASS_COMPLEX, MPI_COMPLEX8 },
        { MPI_TYPECLASS_COMPLEX, MPI_COMPLEX16 }, { MPI_TYPECLASS_COMPLEX, MPI_COMPLEX32 },
    };
    if (!datatype)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Type_match_size");
    if (typeclass < MPI_TYPECLASS_REAL || typeclass > MPI_TYPECLASS_COMPLEX)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Type_match_size");
    for (size_t i = 0; i < sizeof fortran / sizeof fortran[0]; i++)
        if (fortran[i].cls == typeclass && size >= 0 &&
            predefs[fortran[i].t & ZM_INDEX_MASK].size == (size_t)size) {
            *datatype = fortran[i].t;
            return MPI_SUCCESS;
        }
    return zm_raise_detail(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Type_match_size",
                           "no type of class %d has %d bytes", typeclass, size);
}

/*
 * ---- external32 ----
 * Every basic element big-endian, in the sizes of MPI's external32 table:
 * the native ones, except MPI_LONG and MPI_UNSIGNED_LONG, which are 4 bytes
 * there (8 here): a value that does not fit is MPI_ERR_CONVERSION.
 */

static bool is_complex(int basic)
{
    static const MPI_Datatype cplx[] = { MPI_C_FLOAT_COMPLEX, MPI_C_COMPLEX, MPI_C_DOUBLE_COMPLEX, MPI_C_LONG_DOUBLE_COMPLEX,
                                         MPI_COMPLEX, MPI_DOUBLE_COMPLEX, MPI_COMPLEX8, MPI_COMPLEX16,
                                         MPI_COMPLEX32, MPI_CXX_FLOAT_COMPLEX, MPI_CXX_DOUBLE_COMPLEX,
                                         MPI_CXX_LONG_DOUBLE_COMPLEX };
    for (size_t i = 0; i < sizeof cplx / sizeof cplx[0]; i++)
        if ((int)(cplx[i] & ZM_INDEX_MASK) == basic)
            return true;
    return false;
}

/* A basic element's unit (a complex number's part) here and in external32. */
static size_t native_unit(int basic)
{
    return zm_basic_size(basic) / (is_complex(basic) ? 2 : 1);
}

static bool is_long(int basic, bool *is_unsigned)
{
    *is_unsigned = basic == (int)(MPI_UNSIGNED_LONG & ZM_INDEX_MASK);
    return *is_unsigned || basic == (int)(MPI_LONG & ZM_INDEX_MASK);
}

static size_t ext_unit(int basic)
{
    bool u;
    return is_long(basic, &u) ? 4 : native_unit(basic);
}

/* Bytes of count elements of t in external32. */
static size_t ext_bytes(const struct zm_type *t, size_t count)
{
    size_t per = 0;
    for (size_t b = 0; b < t->nblocks; b++) {
        const struct zm_block *k = &t->blocks[b];
        size_t unit = native_unit(k->basic);
        per += unit ? k->len / unit * ext_unit(k->basic) : k->len;
    }
    return per * count;
}

/* Copies `unit` bytes from src to dst in the other byte order on a little-endian host. */
static void to_big_endian(char *dst, const char *src, size_t unit)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (size_t i = 0; i < unit; i++)
        dst[i] = src[unit - 1 - i];
#else
    memcpy(dst, src, unit);
#endif
}

/*
 * Converts count elements of t from src to dst: from their packed native
 * form to external32 when `pack`, the other way otherwise; MPI_ERR_CONVERSION
 * if a long does not fit 4 bytes (converted truncated anyway).
 */
static int ext_convert(const struct zm_type *t, size_t count, const char *src, char *dst, bool pack)
{
    int rc = MPI_SUCCESS;
    for (size_t e = 0; e < count; e++)
        for (size_t b = 0; b < t->nblocks; b++) {
            const struct zm_block *k = &t->blocks[b];
            size_t unit = native_unit(k->basic), eunit = ext_unit(k->basic);
            size_t in = pack ? unit : eunit, out = pack ? eunit : unit;
            bool uns;
            if (!unit) {                        /* not a basic type: bytes as they are */
                memcpy(dst, src, k->len);
                src += k->len;
                dst += k->len;
                continue;
            }
            for (size_t n = k->len / unit; n > 0; n--, src += in, dst += out) {
                if (!is_long(k->basic, &uns)) {
                    to_big_endian(dst, src, unit);
                    continue;
                }
                long v;
                uint32_t w;
                if (pack) {
                    memcpy(&v, src, sizeof v);
                    if (uns ? (unsigned long)v > 0xffffffffUL : (v < INT32_MIN || v > INT32_MAX))
                        rc = MPI_ERR_CONVERSION;
                    w = (uint32_t)v;
                    to_big_endian(dst, (const char *)&w, 4);
                } else {
                    to_big_endian((char *)&w, src, 4);
                    v = uns ? (long)w : (long)(int32_t)w;
                    memcpy(dst, &v, sizeof v);
                }
            }
        }
    return rc;
}

static int external_check(const char *datarep, const struct zm_type *t, int count)
{
    if (!datarep || strcmp(datarep, "external32") != 0)
        return MPI_ERR_ARG;
    if (!t)
        return MPI_ERR_TYPE;
    return count < 0 ? MPI_ERR_COUNT : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Pack_external_size(const char datarep[], int incount, MPI_Datatype datatype, MPI_Aint *size)
{
    struct zm_type *t = zm_type_get(datatype);
    int rc = external_check(datarep, t, incount);
    if (!rc && !size)
        rc = MPI_ERR_ARG;
    if (rc)
        return zm_raise(MPI_COMM_NULL, rc, "MPI_Pack_external_size");
    *size = (MPI_Aint)ext_bytes(t, (size_t)incount);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Pack_external(const char datarep[], const void *inbuf, int incount, MPI_Datatype datatype,
                                   void *outbuf, MPI_Aint outsize, MPI_Aint *position)
{
    struct zm_type *t = zm_type_get(datatype);
    int rc = external_check(datarep, t, incount);
    if (!rc && (!position || *position < 0 || outsize < 0))
        rc = MPI_ERR_ARG;
    size_t n = rc ? 0 : zm_data_bytes(t, incount), en = rc ? 0 : ext_bytes(t, (size_t)incount);
    if (!rc && (*position > outsize || en > (size_t)(outsize - *position)))
        rc = MPI_ERR_TRUNCATE;
    char *tmp = rc || !n ? NULL : malloc(n);
    if (!rc && n && !tmp)
        rc = MPI_ERR_NO_MEM;
    if (rc)
        return zm_raise(MPI_COMM_NULL, rc, "MPI_Pack_external");
    struct zm_cursor c;
    zm_cursor_init(&c, t, inbuf, (size_t)incount);
    zm_cursor_pack(&c, tmp, n);
    rc = ext_convert(t, (size_t)incount, tmp, (char *)outbuf + *position, true);
    free(tmp);
    *position += (MPI_Aint)en;
    return rc ? zm_raise(MPI_COMM_NULL, rc, "MPI_Pack_external") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Unpack_external(const char datarep[], const void *inbuf, MPI_Aint insize, MPI_Aint *position,
                                     void *outbuf, int outcount, MPI_Datatype datatype)
{
    struct zm_type *t = zm_type_get(datatype);
    int rc = external_check(datarep, t, outcount);
    if (!rc && (!position || *position < 0 || insize < 0))
        rc = MPI_ERR_ARG;
    size_t n = rc ? 0 : zm_data_bytes(t, outcount), en = rc ? 0 : ext_bytes(t, (size_t)outcount);
    if (!rc && (*position > insize || en > (size_t)(insize - *position)))
        rc = MPI_ERR_TRUNCATE;
    char *tmp = rc || !n ? NULL : malloc(n);
    if (!rc && n && !tmp)
        rc = MPI_ERR_NO_MEM;
    if (rc)
        return zm_raise(MPI_COMM_NULL, rc, "MPI_Unpack_external");
    ext_convert(t, (size_t)outcount, (const char *)inbuf + *position, tmp, false);
    struct zm_cursor c;
    zm_cursor_init(&c, t, outbuf, (size_t)outcount);
    zm_cursor_unpack(&c, tmp, n);
    free(tmp);
    *position += (MPI_Aint)en;
    return MPI_SUCCESS;
}

/* ---- subarrays and distributed arrays ---- */

/* Drops the envelope a type got from the constructors that built it. */
static void envelope_clear(struct zm_type *t)
{
    for (int i = 0; i < t->nd; i++)
        zm_type_unref(t->olds[i]);
    free(t->ints);
    free(t->addrs);
    free(t->olds);
    t->ints = NULL;
    t->addrs = NULL;
    t->olds = NULL;
    t->ni = t->na = t->nd = 0;
}

/* One dimension, in place: *cur becomes count blocks of blklen elements, `every` elements apart. */
struct nd_build {
    MPI_Datatype cur;     /* the type so far (starts at offset 0) */
    bool own;             /* cur is ours to free */
    MPI_Aint elem;        /* bytes between two neighbours in the current dimension */
    MPI_Aint disp;        /* where the first element of the result lies */
};

static void nd_dim(struct nd_build *b, int count, int blklen, int every, int rem, int start, int gsize)
{
    MPI_Datatype r, v, out;
    MPI_Type_create_resized(b->cur, 0, b->elem, &r);
    MPI_Type_create_hvector(count, blklen, (MPI_Aint)every * b->elem, r, &v);
    if (rem) {
        int lens[2] = { 1, rem };
        MPI_Aint disps[2] = { 0, (MPI_Aint)count * every * b->elem };
        MPI_Datatype types[2] = { v, r };
        MPI_Type_create_struct(2, lens, disps, types, &out);
        MPI_Type_free(&v);
    } else {
        out = v;
    }
    MPI_Type_free(&r);
    if (b->own)
        MPI_Type_free(&b->cur);
    b->cur = out;
    b->own = true;
    b->disp += (MPI_Aint)start * b->elem;
    b->elem *= gsize;
}

/* The result: cur placed at disp, lb 0, extent of the whole array; with its envelope. */
static int nd_finish(struct nd_build *b, MPI_Datatype *newtype, int combiner, int ni, const int *ints,
                     MPI_Datatype oldtype)
{
    MPI_Datatype placed;
    int one = 1;
    MPI_Type_create_hindexed(1, &one, &b->disp, b->cur, &placed);
    if (b->own)
        MPI_Type_free(&b->cur);
    MPI_Type_create_resized(placed, 0, b->elem, newtype);
    MPI_Type_free(&placed);
    envelope_clear(zm_type_get(*newtype));
    return envelope(newtype, combiner, ni, ints, 0, NULL, 1, &oldtype);
}

/* The dimensions from the fastest-varying to the slowest. */
static int nd_dim_at(int i, int ndims, int order)
{
    return order == MPI_ORDER_C ? ndims - 1 - i : i;
}

ZIMP_MPI_API int MPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                                          const int array_of_starts[], int order, MPI_Datatype oldtype,
                                          MPI_Datatype *newtype)
{
    const char *fn = "MPI_Type_create_subarray";
    struct zm_type *old = zm_type_get(oldtype);
    if (!old)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_TYPE, fn);
    if (ndims < 1 || !newtype || !array_of_sizes || !array_of_subsizes || !array_of_starts ||
        (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, fn);
    for (int d = 0; d < ndims; d++)
        if (array_of_sizes[d] < 1 || array_of_subsizes[d] < 1 || array_of_starts[d] < 0 ||
            array_of_starts[d] > array_of_sizes[d] - array_of_subsizes[d])
            return zm_raise_detail(MPI_COMM_NULL, MPI_ERR_ARG, fn, "dimension %d: size %d, subsize %d, start %d",
                                   d, array_of_sizes[d], array_of_subsizes[d], array_of_starts[d]);
    int *ints = malloc(sizeof(int) * (3 * (size_t)ndims + 2));
    if (!ints)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, fn);
    struct nd_build b = { oldtype, false, old->extent, 0 };
    for (int i = 0; i < ndims; i++) {
        int d = nd_dim_at(i, ndims, order);
        nd_dim(&b, 1, array_of_subsizes[d], 1, 0, array_of_starts[d], array_of_sizes[d]);
    }
    ints[0] = ndims;
    for (int d = 0; d < ndims; d++) {
        ints[1 + d] = array_of_sizes[d];
        ints[1 + ndims + d] = array_of_subsizes[d];
        ints[1 + 2 * ndims + d] = array_of_starts[d];
    }
    ints[1 + 3 * ndims] = order;
    int rc = nd_finish(&b, newtype, MPI_COMBINER_SUBARRAY, 3 * ndims + 2, ints, oldtype);
    free(ints);
    return recorded(rc, fn);
}

ZIMP_MPI_API int MPI_Type_create_darray(int size, int rank, int ndims, const int array_of_gsizes[],
                                        const int array_of_distribs[], const int array_of_dargs[],
                                        const int array_of_psizes[], int order, MPI_Datatype oldtype,
                                        MPI_Datatype *newtype)
{
    const char *fn = "MPI_Type_create_darray";
    struct zm_type *old = zm_type_get(oldtype);
    if (!old)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_TYPE, fn);
    if (size < 1 || rank < 0 || rank >= size || ndims < 1 || !newtype || !array_of_gsizes ||
        !array_of_distribs || !array_of_dargs || !array_of_psizes ||
        (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, fn);
    long procs = 1;
    for (int d = 0; d < ndims; d++) {
        int g = array_of_gsizes[d], p = array_of_psizes[d], dist = array_of_distribs[d], darg = array_of_dargs[d];
        bool ok = g >= 1 && p >= 1 && (darg == MPI_DISTRIBUTE_DFLT_DARG || darg >= 1);
        if (dist == MPI_DISTRIBUTE_NONE)
            ok = ok && p == 1;
        else if (dist == MPI_DISTRIBUTE_BLOCK)
            ok = ok && (darg == MPI_DISTRIBUTE_DFLT_DARG || (long)darg * p >= g);
        else if (dist != MPI_DISTRIBUTE_CYCLIC)
            ok = false;
        if (!ok)
            return zm_raise_detail(MPI_COMM_NULL, MPI_ERR_ARG, fn, "dimension %d: invalid distribution", d);
        procs *= p;
    }
    if (procs != size)
        return zm_raise_detail(MPI_COMM_NULL, MPI_ERR_ARG, fn, "the process grid has %ld processes, not %d",
                               procs, size);
    int *ints = malloc(sizeof(int) * (4 * (size_t)ndims + 4));
    int *coords = malloc(sizeof(int) * (size_t)ndims);
    if (!ints || !coords) {
        free(ints);
        free(coords);
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, fn);
    }
    /* the process grid is row-major whatever the array's order */
    for (int d = 0, left = rank, rest = size; d < ndims; d++) {
        rest /= array_of_psizes[d];
        coords[d] = left / rest;
        left %= rest;
    }
    struct nd_build b = { oldtype, false, old->extent, 0 };
    for (int i = 0; i < ndims; i++) {
        int d = nd_dim_at(i, ndims, order);
        int g = array_of_gsizes[d], p = array_of_psizes[d], c = coords[d], darg = array_of_dargs[d];
        if (array_of_distribs[d] == MPI_DISTRIBUTE_CYCLIC) {
            int blk = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
            long first = (long)c * blk, mine = 0;
            if (first < g) {
                long span = (long)p * blk;
                mine = (g - first) / span * blk;
                mine += (g - first) % span < blk ? (g - first) % span : blk;
            }
            nd_dim(&b, (int)(mine / blk), blk, p * blk, (int)(mine % blk), mine ? (int)first : 0, g);
        } else {                          /* BLOCK, or NONE: one block of everything */
            int blk = array_of_distribs[d] == MPI_DISTRIBUTE_NONE ? g
                      : darg == MPI_DISTRIBUTE_DFLT_DARG      ? (g + p - 1) / p
                                                              : darg;
            long mine = g - (long)blk * c;
            mine = mine < 0 ? 0 : mine > blk ? blk : mine;
            nd_dim(&b, 1, (int)mine, 1, 0, mine ? blk * c : 0, g);
        }
    }
    int k = 0;
    ints[k++] = size;
    ints[k++] = rank;
    ints[k++] = ndims;
    for (int d = 0; d < ndims; d++)
        ints[k++] = array_of_gsizes[d];
    for (int d = 0; d < ndims; d++)
        ints[k++] = array_of_distribs[d];
    for (int d = 0; d < ndims; d++)
        ints[k++] = array_of_dargs[d];
    for (int d = 0; d < ndims; d++)
        ints[k++] = array_of_psizes[d];
    ints[k++] = order;
    int rc = nd_finish(&b, newtype, MPI_COMBINER_DARRAY, k, ints, oldtype);
    free(ints);
    free(coords);
    return recorded(rc, fn);
}
