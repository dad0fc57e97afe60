/*
 * Communicators, groups, attributes and keyvals, info objects, Cartesian
 * topologies.
 *
 * Context ids: a new communicator's id is the largest "next id" of the
 * members of its parent (an all-reduce), and every member moves past it.
 * So no rank is ever in two communicators with the same id, while disjoint
 * groups made by one split may share an id (their messages never meet).
 */
#include "mpi_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct zm_table zm_comms, zm_groups;

/* ---- groups ---- */

struct zm_group *zm_group_new(int size)
{
    struct zm_group *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->world = calloc((size_t)(size > 0 ? size : 1), sizeof *g->world);
    if (!g->world) {
        free(g);
        return NULL;
    }
    g->size = size;
    g->refs = 1;
    return g;
}

void zm_group_unref(struct zm_group *g)
{
    if (g && --g->refs == 0) {
        free(g->world);
        free(g);
    }
}

int zm_group_rank_of_world(const struct zm_group *g, int world_rank)
{
    for (int i = 0; i < g->size; i++)
        if (g->world[i] == world_rank)
            return i;
    return MPI_UNDEFINED;
}

static struct zm_group empty_group = { 1, 0, NULL };

static struct zm_group *group_get(MPI_Group h)
{
    return zm_table_get(&zm_groups, h, ZM_K_GROUP);
}

/* A new handle for g (one reference taken). */
static int group_handle(struct zm_group *g, MPI_Group *out)
{
    int i = zm_table_add(&zm_groups, g);
    if (i < 0)
        return MPI_ERR_NO_MEM;
    *out = (MPI_Group)(ZM_K_GROUP | (unsigned)i);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Group_size(MPI_Group group, int *size)
{
    struct zm_group *g = group_get(group);
    if (!g || !size)
        return zm_raise(MPI_COMM_NULL, g ? MPI_ERR_ARG : MPI_ERR_GROUP, "MPI_Group_size");
    *size = g->size;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Group_rank(MPI_Group group, int *rank)
{
    struct zm_group *g = group_get(group);
    if (!g || !rank)
        return zm_raise(MPI_COMM_NULL, g ? MPI_ERR_ARG : MPI_ERR_GROUP, "MPI_Group_rank");
    *rank = zm_group_rank_of_world(g, zm.rank);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Group_free(MPI_Group *group)
{
    struct zm_group *g = group ? group_get(*group) : NULL;
    if (!g)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_GROUP, "MPI_Group_free");
    if (g == &empty_group) {              /* what Group_incl/excl return for no ranks */
        *group = MPI_GROUP_NULL;
        return MPI_SUCCESS;
    }
    zm_table_del(&zm_groups, *group);
    zm_group_unref(g);
    *group = MPI_GROUP_NULL;
    return MPI_SUCCESS;
}

static int make_subgroup(struct zm_group *g, int n, const int *ranks, MPI_Group *out)
{
    if (n == 0) {
        *out = MPI_GROUP_EMPTY;
        return MPI_SUCCESS;
    }
    struct zm_group *ng = zm_group_new(n);
    if (!ng)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < n; i++)
        ng->world[i] = g->world[ranks[i]];
    int rc = group_handle(ng, out);
    if (rc)
        zm_group_unref(ng);
    return rc;
}

ZIMP_MPI_API int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
    struct zm_group *g = group_get(group);
    if (!g || n < 0 || n > g->size || !newgroup || (n && !ranks))
        return zm_raise(MPI_COMM_NULL, g ? MPI_ERR_ARG : MPI_ERR_GROUP, "MPI_Group_incl");
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= g->size)
            return zm_raise(MPI_COMM_NULL, MPI_ERR_RANK, "MPI_Group_incl");
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i])
                return zm_raise(MPI_COMM_NULL, MPI_ERR_RANK, "MPI_Group_incl");
    }
    int rc = make_subgroup(g, n, ranks, newgroup);
    return rc ? zm_raise(MPI_COMM_NULL, rc, "MPI_Group_incl") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
    struct zm_group *g = group_get(group);
    if (!g || n < 0 || n > g->size || !newgroup || (n && !ranks))
        return zm_raise(MPI_COMM_NULL, g ? MPI_ERR_ARG : MPI_ERR_GROUP, "MPI_Group_excl");
    char *drop = calloc((size_t)g->size + 1, 1);
    int *keep = calloc((size_t)g->size + 1, sizeof *keep);
    int k = 0, rc = drop && keep ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    for (int i = 0; i < n && !rc; i++) {
        if (ranks[i] < 0 || ranks[i] >= g->size || drop[ranks[i]])
            rc = MPI_ERR_RANK;
        else
            drop[ranks[i]] = 1;
    }
    for (int i = 0; i < g->size && !rc; i++)
        if (!drop[i])
            keep[k++] = i;
    if (!rc)
        rc = make_subgroup(g, k, keep, newgroup);
    free(drop);
    free(keep);
    return rc ? zm_raise(MPI_COMM_NULL, rc, "MPI_Group_excl") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                                           int ranks2[])
{
    struct zm_group *a = group_get(group1), *b = group_get(group2);
    if (!a || !b || n < 0 || (n && (!ranks1 || !ranks2)))
        return zm_raise(MPI_COMM_NULL, a && b ? MPI_ERR_ARG : MPI_ERR_GROUP, "MPI_Group_translate_ranks");
    for (int i = 0; i < n; i++) {
        if (ranks1[i] == MPI_PROC_NULL) {
            ranks2[i] = MPI_PROC_NULL;
            continue;
        }
        if (ranks1[i] < 0 || ranks1[i] >= a->size)
            return zm_raise(MPI_COMM_NULL, MPI_ERR_RANK, "MPI_Group_translate_ranks");
        ranks2[i] = zm_group_rank_of_world(b, a->world[ranks1[i]]);
    }
    return MPI_SUCCESS;
}

static int group_compare(const struct zm_group *a, const struct zm_group *b)
{
    if (a->size != b->size)
        return MPI_UNEQUAL;
    bool same_order = true;
    for (int i = 0; i < a->size; i++) {
        if (a->world[i] != b->world[i])
            same_order = false;
        if (zm_group_rank_of_world(b, a->world[i]) == MPI_UNDEFINED)
            return MPI_UNEQUAL;
    }
    return same_order ? MPI_IDENT : MPI_SIMILAR;
}

ZIMP_MPI_API int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result)
{
    struct zm_group *a = group_get(group1), *b = group_get(group2);
    if (!a || !b || !result)
        return zm_raise(MPI_COMM_NULL, a && b ? MPI_ERR_ARG : MPI_ERR_GROUP, "MPI_Group_compare");
    *result = group_compare(a, b);
    return MPI_SUCCESS;
}

/* ---- keyvals and attributes ---- */

struct keyval {
    MPI_Comm_copy_attr_function *copy;
    MPI_Comm_delete_attr_function *del;
    void *extra;
    int refs;             /* the keyval itself (until freed) + attributes using it */
    bool freed;           /* MPI_Comm_free_keyval called: its own reference is gone */
};
static struct zm_table keyvals;
#define ZM_K_KEYVAL 0x24000000u

static int tag_ub = 0x3fffffff, host_attr = MPI_PROC_NULL, io_attr, wtime_global = 1, universe, appnum,
           last_code = MPI_ERR_LASTCODE;   /* no user error classes: the last predefined one */

/* The predefined attributes of MPI_COMM_WORLD (MPI 3.1, 8.1.2). */
static int *predefined_attr(int keyval)
{
    switch (keyval) {
    case MPI_TAG_UB: return &tag_ub;
    case MPI_HOST: return &host_attr;
    case MPI_IO: return &io_attr;
    case MPI_WTIME_IS_GLOBAL: return &wtime_global;
    case MPI_UNIVERSE_SIZE: return &universe;
    case MPI_APPNUM: return &appnum;
    case MPI_LASTUSEDCODE: return &last_code;
    default: return NULL;
    }
}

static struct keyval *keyval_get(int k)
{
    return zm_table_get(&keyvals, k, ZM_K_KEYVAL);
}

static void keyval_unref(int k)
{
    struct keyval *kv = keyval_get(k);
    if (kv && --kv->refs == 0) {
        zm_table_del(&keyvals, k);
        free(kv);
    }
}

ZIMP_MPI_API int zimp_mpi_null_copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
    (void)c, (void)k, (void)extra, (void)in, (void)out;
    *flag = 0;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int zimp_mpi_dup_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
    (void)c, (void)k, (void)extra;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int zimp_mpi_null_delete_fn(MPI_Comm c, int k, void *value, void *extra)
{
    (void)c, (void)k, (void)value, (void)extra;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *copy_fn,
                                        MPI_Comm_delete_attr_function *delete_fn, int *keyval,
                                        void *extra_state)
{
    if (!keyval)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Comm_create_keyval");
    struct keyval *kv = calloc(1, sizeof *kv);
    int i = kv ? zm_table_add(&keyvals, kv) : -1;
    if (i < 0) {
        free(kv);
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, "MPI_Comm_create_keyval");
    }
    kv->copy = copy_fn ? copy_fn : MPI_COMM_NULL_COPY_FN;
    kv->del = delete_fn ? delete_fn : MPI_COMM_NULL_DELETE_FN;
    kv->extra = extra_state;
    kv->refs = 1;
    *keyval = (int)(ZM_K_KEYVAL | (unsigned)i);
    return MPI_SUCCESS;
}

/*
 * A keyval freed while attributes use it lives on until they are deleted
 * (MPI 3.1, 6.7.2). Freeing it again meanwhile (through a copy of the
 * handle, or from its own delete callback) is a no-op, as in MPICH: only
 * the first free drops the keyval's own reference.
 */
ZIMP_MPI_API int MPI_Comm_free_keyval(int *keyval)
{
    struct keyval *kv = keyval ? keyval_get(*keyval) : NULL;
    if (!kv)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_KEYVAL, "MPI_Comm_free_keyval");
    if (!kv->freed) {
        kv->freed = true;
        keyval_unref(*keyval);
    }
    *keyval = MPI_KEYVAL_INVALID;
    return MPI_SUCCESS;
}

static struct zm_attr **attr_find(struct zm_comm *c, int keyval)
{
    struct zm_attr **a = &c->attrs;
    while (*a && (*a)->keyval != keyval)
        a = &(*a)->next;
    return a;
}

/* Runs the delete callback and removes the attribute. */
static int attr_delete(struct zm_comm *c, struct zm_attr **a)
{
    struct zm_attr *at = *a;
    struct keyval *kv = keyval_get(at->keyval);
    int rc = kv ? kv->del(c->handle, at->keyval, at->value, kv->extra) : MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        return rc;
    *a = at->next;
    keyval_unref(at->keyval);
    free(at);
    return MPI_SUCCESS;
}

static int attr_set(struct zm_comm *c, int keyval, void *value)
{
    struct keyval *kv = keyval_get(keyval);
    if (!kv)
        return MPI_ERR_KEYVAL;
    struct zm_attr **a = attr_find(c, keyval);
    if (*a) {
        int rc = attr_delete(c, a);
        if (rc)
            return rc;
    }
    struct zm_attr *at = calloc(1, sizeof *at);
    if (!at)
        return MPI_ERR_NO_MEM;
    at->keyval = keyval;
    at->value = value;
    at->next = c->attrs;
    c->attrs = at;
    kv->refs++;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_set_attr(MPI_Comm comm, int keyval, void *attribute_val)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (!rc)
        rc = attr_set(c, keyval, attribute_val);
    return rc ? zm_raise(comm, rc, "MPI_Comm_set_attr") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_get_attr(MPI_Comm comm, int keyval, void *attribute_val, int *flag)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (rc || !attribute_val || !flag)
        return zm_raise(comm, rc ? rc : MPI_ERR_ARG, "MPI_Comm_get_attr");
    int *pre = predefined_attr(keyval);
    if (pre) {
        *flag = c->handle == MPI_COMM_WORLD || keyval == MPI_TAG_UB || keyval == MPI_WTIME_IS_GLOBAL;
        universe = zm.size;
        if (*flag)
            *(void **)attribute_val = pre;
        return MPI_SUCCESS;
    }
    if (!keyval_get(keyval))
        return zm_raise(comm, MPI_ERR_KEYVAL, "MPI_Comm_get_attr");
    struct zm_attr *a = *attr_find(c, keyval);
    *flag = a != NULL;
    if (a)
        *(void **)attribute_val = a->value;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_delete_attr(MPI_Comm comm, int keyval)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (!rc && !keyval_get(keyval))
        rc = MPI_ERR_KEYVAL;
    struct zm_attr **a = rc ? NULL : attr_find(c, keyval);
    if (!rc && !*a)
        rc = MPI_ERR_KEYVAL;
    if (!rc)
        rc = attr_delete(c, a);
    return rc ? zm_raise(comm, rc, "MPI_Comm_delete_attr") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Keyval_create(MPI_Copy_function *copy_fn, MPI_Delete_function *delete_fn, int *keyval,
                                   void *extra_state)
{
    return MPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state);
}

ZIMP_MPI_API int MPI_Keyval_free(int *keyval)
{
    return MPI_Comm_free_keyval(keyval);
}

ZIMP_MPI_API int MPI_Attr_put(MPI_Comm comm, int keyval, void *attribute_val)
{
    return MPI_Comm_set_attr(comm, keyval, attribute_val);
}

ZIMP_MPI_API int MPI_Attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag)
{
    return MPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}

ZIMP_MPI_API int MPI_Attr_delete(MPI_Comm comm, int keyval)
{
    return MPI_Comm_delete_attr(comm, keyval);
}

/* Copies old's attributes onto new through their copy callbacks (MPI_Comm_dup). */
static int attrs_copy(struct zm_comm *old, struct zm_comm *nc)
{
    for (struct zm_attr *a = old->attrs; a; a = a->next) {
        struct keyval *kv = keyval_get(a->keyval);
        void *out = NULL;
        int flag = 0;
        if (!kv)
            continue;
        int rc = kv->copy(old->handle, a->keyval, kv->extra, a->value, &out, &flag);
        if (rc != MPI_SUCCESS)
            return rc;
        if (flag && (rc = attr_set(nc, a->keyval, out)) != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* ---- communicators ---- */

struct zm_comm *zm_comm_get(MPI_Comm c)
{
    struct zm_comm *cc = zm_table_get(&zm_comms, c, ZM_K_COMM);
    return cc && !cc->freed ? cc : NULL;
}

int zm_comm_check(MPI_Comm c, struct zm_comm **out)
{
    *out = zm_comm_get(c);
    return *out ? MPI_SUCCESS : MPI_ERR_COMM;
}

static void comm_destroy(struct zm_comm *c)
{
    zm_bcast_close(c);
    zm_group_unref(c->group);
    zm_group_unref(c->remote);
    if (c->local) {
        c->local->freed = true;
        zm_table_del(&zm_comms, c->local->handle);
        zm_comm_unref(c->local);
    }
    zm_errh_unref(c->errh);
    if (c->cart) {
        free(c->cart->dims);
        free(c->cart->periods);
        free(c->cart);
    }
    free(c);
}

void zm_comm_unref(struct zm_comm *c)
{
    if (--c->refs == 0)
        comm_destroy(c);
}

int zm_comm_world_rank(const struct zm_comm *c, int rank)
{
    return c->remote ? c->remote->world[rank] : c->group->world[rank];
}

int zm_comm_peer_size(const struct zm_comm *c)
{
    return c->remote ? c->remote->size : c->size;
}

static struct zm_comm *comm_alloc(struct zm_group *g, uint32_t ctx, MPI_Errhandler errh)
{
    struct zm_comm *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->group = g;
    c->ctx = ctx;
    c->size = g->size;
    c->rank = zm_group_rank_of_world(g, zm.rank);
    c->errh = errh;
    zm_errh_ref(errh);
    c->refs = 1;
    return c;
}

int zm_comm_make(struct zm_group *group, uint32_t ctx, const struct zm_comm *parent, MPI_Comm *out)
{
    int rc = zm_comm_make_deferred(group, ctx, parent, out);
    /*
     * Every member calls this at the same point, so the one-to-many
     * channel is made now, collectively: later non-blocking collectives
     * then never have to block for it.
     */
    return rc ? rc : zm_bcast_setup(zm_comm_get(*out));
}

int zm_comm_make_deferred(struct zm_group *group, uint32_t ctx, const struct zm_comm *parent, MPI_Comm *out)
{
    struct zm_comm *c = comm_alloc(group, ctx, parent->errh);
    if (!c)
        return MPI_ERR_NO_MEM;
    int i = zm_table_add(&zm_comms, c);
    if (i < 0) {
        c->group = NULL;
        comm_destroy(c);
        return MPI_ERR_NO_MEM;
    }
    c->handle = (MPI_Comm)(ZM_K_COMM | (unsigned)i);
    *out = c->handle;
    return MPI_SUCCESS;
}

int zm_comms_init(void)
{
    struct zm_group *wg = zm_group_new(zm.size), *sg = zm_group_new(1);
    if (!wg || !sg)
        return MPI_ERR_NO_MEM;
    for (int r = 0; r < zm.size; r++)
        wg->world[r] = r;
    sg->world[0] = zm.rank;
    struct zm_comm *w = comm_alloc(wg, 0, MPI_ERRORS_ARE_FATAL), *s = comm_alloc(sg, 2, MPI_ERRORS_ARE_FATAL);
    if (!w || !s)
        return MPI_ERR_NO_MEM;
    w->handle = MPI_COMM_WORLD;
    s->handle = MPI_COMM_SELF;
    snprintf(w->name, sizeof w->name, "MPI_COMM_WORLD");
    snprintf(s->name, sizeof s->name, "MPI_COMM_SELF");
    if (zm_table_add(&zm_comms, w) != 1 || zm_table_add(&zm_comms, s) != 2)
        return MPI_ERR_NO_MEM;
    zm_comms.reserved = zm_comms.len;
    zm.next_ctx = 4;
    zm.next_ictx = ZM_ICTX_BASE;
    if (!zm_groups.len) {
        zm_table_add(&zm_groups, &empty_group);
        zm_groups.reserved = zm_groups.len;
    }
    return MPI_SUCCESS;
}

void zm_comms_fini(void)
{
    for (unsigned i = 1; i < zm_comms.len; i++) {
        struct zm_comm *c = zm_comms.items[i];
        if (c)
            zm_bcast_close(c);
    }
}

int zm_ctx_agree(struct zm_comm *comm, uint32_t *ctx)
{
    uint32_t v = zm.next_ctx;
    int rc = zm_allreduce_max_u32(comm, &v);
    if (rc)
        return rc;
    *ctx = v;
    zm.next_ctx = v + 2;
    return MPI_SUCCESS;
}

/* ---- intercommunicators ---- */

/* Sends nout ints to peer and receives nin from it on context ctx of c. */
static int exchange(struct zm_comm *c, uint32_t ctx, int peer, int tag, const int *out, int nout, int *in, int nin)
{
    struct zm_req *rr, *sr;
    int rc = zm_irecv(in, nin, MPI_INT, peer, tag, c, ctx, &rr);
    if (rc)
        return rc;
    rc = zm_isend(out, nout, MPI_INT, peer, tag, c, ctx, ZM_MODE_STD, &sr);
    int src = rc ? MPI_SUCCESS : zm_wait_free(sr, MPI_STATUS_IGNORE);
    if (rc)
        zm_cancel_recv(rr);
    int rrc = zm_wait_free(rr, MPI_STATUS_IGNORE);
    return rc ? rc : src ? src : rrc;
}

static uint32_t max_u32(uint32_t a, uint32_t b)
{
    return a > b ? a : b;
}

/*
 * An intercommunicator over local (taken) and remote (taken) with context
 * ctx, and its intracommunicator over the local group with context ctx + 2
 * (its channel made collectively by the local group now, or, if deferred,
 * by its first collective).
 */
int zm_inter_make(struct zm_group *local, struct zm_group *remote, uint32_t ctx, const struct zm_comm *parent,
                  bool deferred, MPI_Comm *out)
{
    MPI_Comm lh;
    local->refs++;
    int rc = deferred ? zm_comm_make_deferred(local, ctx + 2, parent, &lh) : zm_comm_make(local, ctx + 2, parent, &lh);
    if (rc) {
        local->refs--;                    /* the helper's reference, then the one taken */
        zm_group_unref(local);
        zm_group_unref(remote);
        return rc;
    }
    struct zm_comm *c = comm_alloc(local, ctx, parent->errh);
    int i = c ? zm_table_add(&zm_comms, c) : -1;
    if (i < 0) {
        free(c);
        zm_group_unref(local);
        zm_group_unref(remote);
        MPI_Comm_free(&lh);
        return MPI_ERR_NO_MEM;
    }
    c->handle = (MPI_Comm)(ZM_K_COMM | (unsigned)i);
    c->remote = remote;
    c->local = zm_comm_get(lh);           /* its handle is never given out; freed with c */
    *out = c->handle;
    return MPI_SUCCESS;
}

/*
 * A context id fresh for every member of both groups of ic: the largest
 * "next id" of each side, exchanged by the leaders (rank 0 of each side) on
 * ic's collective context and broadcast in each side. The leaders also
 * exchange `n` ints (out -> in, the same on every member afterwards).
 */
static int inter_agree(struct zm_comm *ic, uint32_t *ctx, const int *out, int n, int *in)
{
    uint32_t v = zm.next_ctx;
    int tag = zm_coll_tag(ic->coll_seq++);
    int rc = zm_allreduce_max_u32(ic->local, &v);
    int *msg = malloc(sizeof(int) * (size_t)(n + 1)), *got = malloc(sizeof(int) * (size_t)(n + 1));
    if (!rc && (!msg || !got))
        rc = MPI_ERR_NO_MEM;
    if (!rc && ic->rank == 0) {
        msg[0] = (int)v;
        if (n)
            memcpy(msg + 1, out, sizeof(int) * (size_t)n);
        rc = exchange(ic, ic->ctx + 1, 0, tag, msg, n + 1, got, n + 1);
        got[0] = (int)max_u32(v, (uint32_t)got[0]);
    }
    if (!rc)
        rc = MPI_Bcast(got, n + 1, MPI_INT, 0, ic->local->handle);
    if (!rc) {
        *ctx = (uint32_t)got[0];
        if (n)
            memcpy(in, got + 1, sizeof(int) * (size_t)n);
        zm.next_ctx = max_u32(zm.next_ctx, *ctx + 4);
    }
    free(msg);
    free(got);
    return rc;
}

static int inter_dup(struct zm_comm *ic, MPI_Comm *out)
{
    uint32_t ctx;
    int rc = inter_agree(ic, &ctx, NULL, 0, NULL);
    if (rc)
        return rc;
    ic->group->refs++;
    ic->remote->refs++;
    return zm_inter_make(ic->group, ic->remote, ctx, ic, false, out);
}

ZIMP_MPI_API int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm,
                                      int remote_leader, int tag, MPI_Comm *newintercomm)
{
    const char *fn = "MPI_Intercomm_create";
    struct zm_comm *lc, *pc = NULL;
    ZM_CHECK_INIT(fn);
    int rc = zm_comm_check(local_comm, &lc);
    if (!rc && (lc->remote || !newintercomm))
        rc = lc->remote ? MPI_ERR_COMM : MPI_ERR_ARG;
    if (!rc && (local_leader < 0 || local_leader >= lc->size))
        rc = MPI_ERR_RANK;
    if (rc)
        return zm_raise(local_comm, rc, fn);
    uint32_t v = zm.next_ctx;
    rc = zm_allreduce_max_u32(lc, &v);
    int hdr[2] = { 0, 0 };                /* context, remote size */
    int *rworld = NULL;
    if (!rc && lc->rank == local_leader) {
        rc = zm_comm_check(peer_comm, &pc);
        if (!rc && (remote_leader < 0 || remote_leader >= zm_comm_peer_size(pc)))
            rc = MPI_ERR_RANK;
        int mine[2] = { (int)v, lc->size };
        if (!rc)
            rc = exchange(pc, pc->ctx, remote_leader, tag, mine, 2, hdr, 2);
        if (!rc && hdr[1] <= 0)
            rc = MPI_ERR_INTERN;
        if (!rc && !(rworld = malloc(sizeof(int) * (size_t)hdr[1])))
            rc = MPI_ERR_NO_MEM;
        if (!rc)
            rc = exchange(pc, pc->ctx, remote_leader, tag, lc->group->world, lc->size, rworld, hdr[1]);
        hdr[0] = (int)max_u32(v, (uint32_t)hdr[0]);
        if (rc)
            hdr[1] = -1;                  /* tells the others it failed */
    }
    if (!rc || lc->rank == local_leader) {
        int brc = MPI_Bcast(hdr, 2, MPI_INT, local_leader, local_comm);
        rc = rc ? rc : brc;
    }
    if (!rc && hdr[1] <= 0)
        rc = MPI_ERR_OTHER;
    if (!rc && lc->rank != local_leader && !(rworld = malloc(sizeof(int) * (size_t)hdr[1])))
        rc = MPI_ERR_NO_MEM;
    if (!rc)
        rc = MPI_Bcast(rworld, hdr[1], MPI_INT, local_leader, local_comm);
    struct zm_group *rg = rc ? NULL : zm_group_new(hdr[1]);
    if (!rc && !rg)
        rc = MPI_ERR_NO_MEM;
    if (!rc) {
        memcpy(rg->world, rworld, sizeof(int) * (size_t)hdr[1]);
        zm.next_ctx = max_u32(zm.next_ctx, (uint32_t)hdr[0] + 4);
        lc->group->refs++;
        rc = zm_inter_make(lc->group, rg, (uint32_t)hdr[0], lc, false, newintercomm);
    }
    free(rworld);
    return rc ? zm_raise(local_comm, rc, fn) : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm)
{
    const char *fn = "MPI_Intercomm_merge";
    struct zm_comm *ic;
    ZM_CHECK_INIT(fn);
    int rc = zm_comm_check(intercomm, &ic);
    if (!rc && (!ic->remote || !newintracomm))
        rc = ic->remote ? MPI_ERR_ARG : MPI_ERR_COMM;
    if (rc)
        return zm_raise(intercomm, rc, fn);
    /* The side that passed high = false comes first; on a tie, the side of the lower leader. */
    int mine[2] = { high ? 1 : 0, ic->group->world[0] }, theirs[2];
    uint32_t ctx;
    rc = inter_agree(ic, &ctx, mine, 2, theirs);
    if (rc)
        return zm_raise(intercomm, rc, fn);
    bool local_first = mine[0] != theirs[0] ? !mine[0] : mine[1] < theirs[1];
    const struct zm_group *a = local_first ? ic->group : ic->remote, *b = local_first ? ic->remote : ic->group;
    struct zm_group *g = zm_group_new(a->size + b->size);
    if (!g)
        return zm_raise(intercomm, MPI_ERR_NO_MEM, fn);
    memcpy(g->world, a->world, sizeof(int) * (size_t)a->size);
    memcpy(g->world + a->size, b->world, sizeof(int) * (size_t)b->size);
    rc = zm_comm_make(g, ctx, ic, newintracomm);
    if (rc)
        zm_group_unref(g);
    return rc ? zm_raise(intercomm, rc, fn) : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_remote_size(MPI_Comm comm, int *size)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (!rc && (!c->remote || !size))
        rc = c->remote ? MPI_ERR_ARG : MPI_ERR_COMM;
    if (rc)
        return zm_raise(comm, rc, "MPI_Comm_remote_size");
    *size = c->remote->size;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group *group)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (!rc && (!c->remote || !group))
        rc = c->remote ? MPI_ERR_ARG : MPI_ERR_COMM;
    if (!rc) {
        c->remote->refs++;
        if ((rc = group_handle(c->remote, group)) != MPI_SUCCESS)
            c->remote->refs--;
    }
    return rc ? zm_raise(comm, rc, "MPI_Comm_remote_group") : MPI_SUCCESS;
}

/*
 * MPI_Comm_create_group: only the group's members take part. They agree on
 * a context id through point-to-point messages on a context of their own
 * (the parent's with the top bit set) and the caller's tag: each member
 * sends its "next id" to the group's rank 0, which answers the largest.
 */
ZIMP_MPI_API int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
    const char *fn = "MPI_Comm_create_group";
    struct zm_comm *c;
    ZM_CHECK_INIT(fn);
    int rc = zm_comm_check(comm, &c);
    struct zm_group *g = rc ? NULL : group_get(group);
    if (!rc && c->remote)
        rc = MPI_ERR_COMM;
    if (!rc && !g)
        rc = MPI_ERR_GROUP;
    if (!rc && (!newcomm || tag < 0))
        rc = newcomm ? MPI_ERR_TAG : MPI_ERR_ARG;
    for (int i = 0; !rc && i < g->size; i++)
        if (zm_group_rank_of_world(c->group, g->world[i]) == MPI_UNDEFINED)
            rc = MPI_ERR_GROUP;
    if (!rc && zm_group_rank_of_world(g, zm.rank) == MPI_UNDEFINED)
        rc = MPI_ERR_GROUP;               /* only members call it */
    if (rc)
        return zm_raise(comm, rc, fn);
    if (g->size == 0 || g == &empty_group) {
        *newcomm = MPI_COMM_NULL;
        return MPI_SUCCESS;
    }
    g->refs++;
    struct zm_comm *t = comm_alloc(g, c->ctx | 0x80000000u, c->errh);
    if (!t) {
        zm_group_unref(g);
        return zm_raise(comm, MPI_ERR_NO_MEM, fn);
    }
    uint32_t tctx = t->ctx, v = zm.next_ctx;
    int mine = (int)v, best = (int)v;
    if (t->rank != 0) {
        rc = exchange(t, tctx, 0, tag, &mine, 1, &best, 1);
    } else {
        int *all = malloc(sizeof(int) * (size_t)g->size);
        struct zm_req **rr = calloc((size_t)g->size, sizeof *rr);
        rc = all && rr ? MPI_SUCCESS : MPI_ERR_NO_MEM;
        for (int i = 1; i < g->size && !rc; i++)
            rc = zm_irecv(&all[i], 1, MPI_INT, i, tag, t, tctx, &rr[i]);
        for (int i = 1; rr && i < g->size; i++)
            if (rr[i]) {
                if (rc)
                    zm_cancel_recv(rr[i]);
                int wrc = zm_wait_free(rr[i], MPI_STATUS_IGNORE);
                rc = rc ? rc : wrc;
                if (!rc)
                    best = (int)max_u32((uint32_t)best, (uint32_t)all[i]);
            }
        for (int i = 1; i < g->size && !rc; i++) {
            struct zm_req *sr;
            rc = zm_isend(&best, 1, MPI_INT, i, tag, t, tctx, ZM_MODE_STD, &sr);
            if (!rc)
                rc = zm_wait_free(sr, MPI_STATUS_IGNORE);
        }
        free(all);
        free(rr);
    }
    zm_comm_unref(t);
    if (rc)
        return zm_raise(comm, rc, fn);
    zm.next_ctx = max_u32(zm.next_ctx, (uint32_t)best + 2);
    g->refs++;
    rc = zm_comm_make(g, (uint32_t)best, c, newcomm);
    if (rc)
        zm_group_unref(g);
    return rc ? zm_raise(comm, rc, fn) : MPI_SUCCESS;
}

/* ---- groups from ranges and set operations ---- */

/* The ranks of n (first, last, stride) triplets, in order, into a new array. */
static int expand_ranges(const struct zm_group *g, int n, int ranges[][3], int **out, int *count)
{
    long total = 0;
    for (int i = 0; i < n; i++) {
        int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
        if (stride == 0 || first < 0 || first >= g->size || last < 0 || last >= g->size)
            return MPI_ERR_RANK;
        if ((stride > 0 && last >= first) || (stride < 0 && last <= first))
            total += (last - first) / stride + 1;
    }
    if (total > g->size)
        return MPI_ERR_RANK;
    int *r = malloc(sizeof(int) * (size_t)(total + 1));
    char *seen = calloc((size_t)g->size + 1, 1);
    if (!r || !seen) {
        free(r);
        free(seen);
        return MPI_ERR_NO_MEM;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
        for (int x = first; stride > 0 ? x <= last : x >= last; x += stride) {
            if (seen[x]) {
                free(r);
                free(seen);
                return MPI_ERR_RANK;
            }
            seen[x] = 1;
            r[k++] = x;
        }
    }
    free(seen);
    *out = r;
    *count = k;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
    struct zm_group *g = group_get(group);
    if (!g || n < 0 || !newgroup || (n && !ranges))
        return zm_raise(MPI_COMM_NULL, g ? MPI_ERR_ARG : MPI_ERR_GROUP, "MPI_Group_range_incl");
    int *r = NULL, k = 0;
    int rc = expand_ranges(g, n, ranges, &r, &k);
    if (!rc)
        rc = make_subgroup(g, k, r, newgroup);
    free(r);
    return rc ? zm_raise(MPI_COMM_NULL, rc, "MPI_Group_range_incl") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
    struct zm_group *g = group_get(group);
    if (!g || n < 0 || !newgroup || (n && !ranges))
        return zm_raise(MPI_COMM_NULL, g ? MPI_ERR_ARG : MPI_ERR_GROUP, "MPI_Group_range_excl");
    int *r = NULL, k = 0;
    int rc = expand_ranges(g, n, ranges, &r, &k);
    if (!rc)
        rc = MPI_Group_excl(group, k, r, newgroup);
    free(r);
    return rc ? zm_raise(MPI_COMM_NULL, rc, "MPI_Group_range_excl") : MPI_SUCCESS;
}

/* Members of a (in a's order) whose presence in b is `in_b`, then (with_b) b's members not in a. */
static int group_combine(MPI_Group group1, MPI_Group group2, bool in_b, bool keep_all_a, bool with_b,
                         MPI_Group *newgroup, const char *fn)
{
    struct zm_group *a = group_get(group1), *b = group_get(group2);
    if (!a || !b || !newgroup)
        return zm_raise(MPI_COMM_NULL, a && b ? MPI_ERR_ARG : MPI_ERR_GROUP, fn);
    struct zm_group *ng = zm_group_new(a->size + b->size);
    if (!ng)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, fn);
    int k = 0;
    for (int i = 0; i < a->size; i++)
        if (keep_all_a || (zm_group_rank_of_world(b, a->world[i]) != MPI_UNDEFINED) == in_b)
            ng->world[k++] = a->world[i];
    for (int i = 0; with_b && i < b->size; i++)
        if (zm_group_rank_of_world(a, b->world[i]) == MPI_UNDEFINED)
            ng->world[k++] = b->world[i];
    ng->size = k;
    if (k == 0) {
        zm_group_unref(ng);
        *newgroup = MPI_GROUP_EMPTY;
        return MPI_SUCCESS;
    }
    int rc = group_handle(ng, newgroup);
    if (rc)
        zm_group_unref(ng);
    return rc ? zm_raise(MPI_COMM_NULL, rc, fn) : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    return group_combine(group1, group2, true, true, true, newgroup, "MPI_Group_union");
}

ZIMP_MPI_API int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    return group_combine(group1, group2, true, false, false, newgroup, "MPI_Group_intersection");
}

ZIMP_MPI_API int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    return group_combine(group1, group2, false, false, false, newgroup, "MPI_Group_difference");
}

/* ---- memory ---- */

ZIMP_MPI_API int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
    (void)info;
    if (size < 0 || !baseptr)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Alloc_mem");
    void *p = malloc(size ? (size_t)size : 1);
    if (!p)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, "MPI_Alloc_mem");
    memcpy(baseptr, &p, sizeof p);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Free_mem(void *base)
{
    free(base);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (rc || !rank)
        return zm_raise(comm, rc ? rc : MPI_ERR_ARG, "MPI_Comm_rank");
    *rank = c->rank;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_size(MPI_Comm comm, int *size)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (rc || !size)
        return zm_raise(comm, rc ? rc : MPI_ERR_ARG, "MPI_Comm_size");
    *size = c->size;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    struct zm_comm *c;
    ZM_CHECK_INIT("MPI_Comm_dup");
    int rc = zm_comm_check(comm, &c);
    if (rc || !newcomm)
        return zm_raise(comm, rc ? rc : MPI_ERR_ARG, "MPI_Comm_dup");
    if (c->remote) {
        rc = inter_dup(c, newcomm);
        if (!rc && (rc = attrs_copy(c, zm_comm_get(*newcomm))) != MPI_SUCCESS) {
            MPI_Comm_free(newcomm);
            *newcomm = MPI_COMM_NULL;
        }
        return rc ? zm_raise(comm, rc, "MPI_Comm_dup") : MPI_SUCCESS;
    }
    uint32_t ctx;
    if ((rc = zm_ctx_agree(c, &ctx)) != MPI_SUCCESS)
        return zm_raise(comm, rc, "MPI_Comm_dup");
    c->group->refs++;
    if ((rc = zm_comm_make(c->group, ctx, c, newcomm)) != MPI_SUCCESS) {
        zm_group_unref(c->group);
        return zm_raise(comm, rc, "MPI_Comm_dup");
    }
    rc = zm_comm_dup_extras(c, zm_comm_get(*newcomm));
    if (rc) {                             /* a copy callback failed: no new communicator */
        MPI_Comm_free(newcomm);
        *newcomm = MPI_COMM_NULL;
    }
    return rc ? zm_raise(comm, rc, "MPI_Comm_dup") : MPI_SUCCESS;
}

int zm_comm_dup_extras(struct zm_comm *c, struct zm_comm *nc)
{
    if (c->cart) {
        nc->cart = calloc(1, sizeof *nc->cart);
        if (nc->cart) {
            nc->cart->ndims = c->cart->ndims;
            nc->cart->dims = malloc(sizeof(int) * (size_t)(c->cart->ndims + 1));
            nc->cart->periods = malloc(sizeof(int) * (size_t)(c->cart->ndims + 1));
            if (nc->cart->dims && nc->cart->periods) {
                memcpy(nc->cart->dims, c->cart->dims, sizeof(int) * (size_t)c->cart->ndims);
                memcpy(nc->cart->periods, c->cart->periods, sizeof(int) * (size_t)c->cart->ndims);
            }
        }
    }
    return attrs_copy(c, nc);
}

int zm_comm_self_attrs_delete(void)
{
    struct zm_comm *c = zm_comm_get(MPI_COMM_SELF);
    while (c && c->attrs) {               /* newest first: the list is kept that way */
        int rc = attr_delete(c, &c->attrs);
        if (rc)
            return rc;
    }
    return MPI_SUCCESS;
}

struct split_entry {
    int color, key, rank;
};

static int split_cmp(const void *a, const void *b)
{
    const struct split_entry *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* The members of grp (n of them) of my color, ordered by (key, old rank), as a group. */
static int split_members(const struct zm_group *grp, const int *all, int color, struct zm_group **out)
{
    struct split_entry *e = calloc((size_t)grp->size + 1, sizeof *e);
    if (!e)
        return MPI_ERR_NO_MEM;
    int n = 0;
    for (int r = 0; r < grp->size; r++)
        if (all[2 * r] == color)
            e[n++] = (struct split_entry){ color, all[2 * r + 1], r };
    qsort(e, (size_t)n, sizeof *e, split_cmp);
    struct zm_group *g = zm_group_new(n);
    if (!g) {
        free(e);
        return MPI_ERR_NO_MEM;
    }
    for (int i = 0; i < n; i++)
        g->world[i] = grp->world[e[i].rank];
    free(e);
    *out = g;
    return MPI_SUCCESS;
}

static int split_group(struct zm_comm *c, const int *all, int color, struct zm_group **out)
{
    return split_members(c->group, all, color, out);
}

/*
 * The leaders of ic's two sides swap nout ints (out) for the other side's
 * (*in, *nin: malloc'd, the same on every member of a side afterwards), and
 * every member gets a context id fresh for both sides (inter_agree).
 */
static int inter_swap(struct zm_comm *ic, uint32_t *ctx, const int *out, int nout, int **in, int *nin)
{
    int theirs = 0;
    *in = NULL;
    int rc = inter_agree(ic, ctx, &nout, 1, &theirs);
    if (!rc && theirs < 0)
        rc = MPI_ERR_INTERN;
    int *got = rc ? NULL : malloc(sizeof(int) * ((size_t)theirs + 1));
    if (!rc && !got)
        rc = MPI_ERR_NO_MEM;
    int tag = zm_coll_tag(ic->coll_seq++);
    if (!rc && ic->rank == 0)
        rc = exchange(ic, ic->ctx + 1, 0, tag, out, nout, got, theirs);
    if (!rc)
        rc = MPI_Bcast(got, theirs, MPI_INT, 0, ic->local->handle);
    if (rc) {
        free(got);
        return rc;
    }
    *in = got;
    *nin = theirs;
    return MPI_SUCCESS;
}

/* MPI_Comm_split on an intercommunicator: each side split by color; a color on one side only gets MPI_COMM_NULL. */
static int inter_split(struct zm_comm *ic, int color, int key, MPI_Comm *newcomm)
{
    int mine[2] = { color, key }, *rall = NULL, nr = 0;
    int *lall = malloc(sizeof(int) * 2 * (size_t)ic->size);
    if (!lall)
        return MPI_ERR_NO_MEM;
    int rc = zm_allgather_ints(ic->local, mine, 2, lall);
    uint32_t ctx = 0;
    if (!rc)
        rc = inter_swap(ic, &ctx, lall, 2 * ic->size, &rall, &nr);
    if (!rc && nr != 2 * ic->remote->size)
        rc = MPI_ERR_INTERN;
    struct zm_group *lg = NULL, *rg = NULL;
    if (!rc && color != MPI_UNDEFINED)
        rc = split_members(ic->group, lall, color, &lg);
    if (!rc && color != MPI_UNDEFINED)
        rc = split_members(ic->remote, rall, color, &rg);
    free(lall);
    free(rall);
    *newcomm = MPI_COMM_NULL;
    if (rc || !lg || !rg || rg->size == 0) {
        if (lg)
            zm_group_unref(lg);
        if (rg)
            zm_group_unref(rg);
        return rc;
    }
    return zm_inter_make(lg, rg, ctx, ic, false, newcomm);
}

/* MPI_Comm_create on an intercommunicator: group is a subgroup of each side's local group. */
static int inter_create(struct zm_comm *ic, const struct zm_group *g, MPI_Comm *newcomm)
{
    int *rworld = NULL, nr = 0;
    uint32_t ctx = 0;
    int rc = inter_swap(ic, &ctx, g->world, g->size, &rworld, &nr);
    *newcomm = MPI_COMM_NULL;
    if (rc || nr == 0 || g->size == 0 || zm_group_rank_of_world(g, zm.rank) == MPI_UNDEFINED) {
        free(rworld);
        return rc;
    }
    struct zm_group *lg = zm_group_new(g->size), *rg = zm_group_new(nr);
    if (!lg || !rg) {
        if (lg)
            zm_group_unref(lg);
        if (rg)
            zm_group_unref(rg);
        free(rworld);
        return MPI_ERR_NO_MEM;
    }
    memcpy(lg->world, g->world, sizeof(int) * (size_t)g->size);
    memcpy(rg->world, rworld, sizeof(int) * (size_t)nr);
    free(rworld);
    return zm_inter_make(lg, rg, ctx, ic, false, newcomm);
}

static int comm_split(struct zm_comm *c, int color, int key, MPI_Comm *newcomm)
{
    int mine[2] = { color, key };
    int *all = malloc(sizeof(int) * 2 * (size_t)c->size);
    if (!all)
        return MPI_ERR_NO_MEM;
    int rc = zm_allgather_ints(c, mine, 2, all);
    uint32_t ctx = 0;
    if (!rc)
        rc = zm_ctx_agree(c, &ctx);
    struct zm_group *g = NULL;
    if (!rc && color != MPI_UNDEFINED)
        rc = split_group(c, all, color, &g);
    free(all);
    if (rc)
        return rc;
    *newcomm = MPI_COMM_NULL;
    if (color == MPI_UNDEFINED)
        return MPI_SUCCESS;
    rc = zm_comm_make(g, ctx, c, newcomm);
    if (rc)
        zm_group_unref(g);
    return rc;
}

ZIMP_MPI_API int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    struct zm_comm *c;
    ZM_CHECK_INIT("MPI_Comm_split");
    int rc = zm_comm_check(comm, &c);
    if (!rc && (!newcomm || (color < 0 && color != MPI_UNDEFINED)))
        rc = MPI_ERR_ARG;
    if (!rc)
        rc = c->remote ? inter_split(c, color, key, newcomm) : comm_split(c, color, key, newcomm);
    return rc ? zm_raise(comm, rc, "MPI_Comm_split") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    (void)info;
    struct zm_comm *c;
    ZM_CHECK_INIT("MPI_Comm_split_type");
    int rc = zm_comm_check(comm, &c);
    if (!rc && c->remote)
        rc = MPI_ERR_COMM;                /* intercommunicators: not supported here */
    if (!rc && (!newcomm || (split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED)))
        rc = MPI_ERR_ARG;
    /* Every rank of a zimp job shares memory: one color for all. */
    if (!rc)
        rc = comm_split(c, split_type == MPI_UNDEFINED ? MPI_UNDEFINED : 0, key, newcomm);
    return rc ? zm_raise(comm, rc, "MPI_Comm_split_type") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    struct zm_comm *c;
    ZM_CHECK_INIT("MPI_Comm_create");
    int rc = zm_comm_check(comm, &c);
    struct zm_group *g = group_get(group);
    if (!rc && !g)
        rc = MPI_ERR_GROUP;
    if (!rc && !newcomm)
        rc = MPI_ERR_ARG;
    if (!rc && c->remote) {
        for (int i = 0; !rc && i < g->size; i++)
            if (zm_group_rank_of_world(c->group, g->world[i]) == MPI_UNDEFINED)
                rc = MPI_ERR_GROUP;
        if (!rc)
            rc = inter_create(c, g, newcomm);
        return rc ? zm_raise(comm, rc, "MPI_Comm_create") : MPI_SUCCESS;
    }
    for (int i = 0; !rc && g && i < g->size; i++)
        if (zm_group_rank_of_world(c->group, g->world[i]) == MPI_UNDEFINED)
            rc = MPI_ERR_GROUP;
    uint32_t ctx = 0;
    if (!rc)
        rc = zm_ctx_agree(c, &ctx);
    if (rc)
        return zm_raise(comm, rc, "MPI_Comm_create");
    *newcomm = MPI_COMM_NULL;
    if (zm_group_rank_of_world(g, zm.rank) == MPI_UNDEFINED)
        return MPI_SUCCESS;
    g->refs++;
    rc = zm_comm_make(g, ctx, c, newcomm);
    if (rc)
        zm_group_unref(g);
    return rc ? zm_raise(comm, rc, "MPI_Comm_create") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_free(MPI_Comm *comm)
{
    struct zm_comm *c = comm ? zm_comm_get(*comm) : NULL;
    if (!c || c->handle == MPI_COMM_WORLD || c->handle == MPI_COMM_SELF)
        return zm_raise(comm ? *comm : MPI_COMM_NULL, MPI_ERR_COMM, "MPI_Comm_free");
    while (c->attrs) {
        int rc = attr_delete(c, &c->attrs);
        if (rc)
            return zm_raise(*comm, rc, "MPI_Comm_free");
    }
    c->freed = true;
    zm_table_del(&zm_comms, c->handle);
    zm_comm_unref(c);
    *comm = MPI_COMM_NULL;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result)
{
    struct zm_comm *a = zm_comm_get(comm1), *b = zm_comm_get(comm2);
    if (!a || !b || !result)
        return zm_raise(MPI_COMM_NULL, a && b ? MPI_ERR_ARG : MPI_ERR_COMM, "MPI_Comm_compare");
    if (a == b) {
        *result = MPI_IDENT;
        return MPI_SUCCESS;
    }
    int g = group_compare(a->group, b->group);
    *result = g == MPI_IDENT ? MPI_CONGRUENT : g;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_test_inter(MPI_Comm comm, int *flag)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (rc || !flag)
        return zm_raise(comm, rc ? rc : MPI_ERR_ARG, "MPI_Comm_test_inter");
    *flag = c->remote != NULL;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_set_name(MPI_Comm comm, const char *comm_name)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (rc || !comm_name)
        return zm_raise(comm, rc ? rc : MPI_ERR_ARG, "MPI_Comm_set_name");
    snprintf(c->name, sizeof c->name, "%s", comm_name);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_get_name(MPI_Comm comm, char *comm_name, int *resultlen)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (rc || !comm_name || !resultlen)
        return zm_raise(comm, rc ? rc : MPI_ERR_ARG, "MPI_Comm_get_name");
    *resultlen = snprintf(comm_name, MPI_MAX_OBJECT_NAME, "%s", c->name);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_group(MPI_Comm comm, MPI_Group *group)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (rc || !group)
        return zm_raise(comm, rc ? rc : MPI_ERR_ARG, "MPI_Comm_group");
    c->group->refs++;
    if ((rc = group_handle(c->group, group)) != MPI_SUCCESS) {
        c->group->refs--;
        return zm_raise(comm, rc, "MPI_Comm_group");
    }
    return MPI_SUCCESS;
}

/* ---- info objects ---- */

struct info_entry {
    char *key, *value;
    struct info_entry *next;
};
struct info {
    struct info_entry *head;
};
static struct zm_table infos;
static struct info env_info;

static struct info *info_get(MPI_Info h)
{
    if (!infos.len) {
        zm_table_add(&infos, &env_info);
        infos.reserved = infos.len;
    }
    return zm_table_get(&infos, h, ZM_K_INFO);
}

ZIMP_MPI_API int MPI_Info_create(MPI_Info *info)
{
    if (!info)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Info_create");
    info_get(MPI_INFO_NULL);
    struct info *in = calloc(1, sizeof *in);
    int i = in ? zm_table_add(&infos, in) : -1;
    if (i < 0) {
        free(in);
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, "MPI_Info_create");
    }
    *info = (MPI_Info)(ZM_K_INFO | (unsigned)i);
    return MPI_SUCCESS;
}

static struct info_entry **info_find(struct info *in, const char *key)
{
    struct info_entry **e = &in->head;
    while (*e && strcmp((*e)->key, key) != 0)
        e = &(*e)->next;
    return e;
}

ZIMP_MPI_API int MPI_Info_set(MPI_Info info, const char *key, const char *value)
{
    struct info *in = info_get(info);
    if (!in || in == &env_info)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_INFO, "MPI_Info_set");
    if (!key || !*key || strlen(key) > MPI_MAX_INFO_KEY)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_INFO_KEY, "MPI_Info_set");
    if (!value || strlen(value) > MPI_MAX_INFO_VAL)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_INFO_VALUE, "MPI_Info_set");
    struct info_entry **e = info_find(in, key);
    char *v = strdup(value);
    if (!v)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, "MPI_Info_set");
    if (*e) {
        free((*e)->value);
        (*e)->value = v;
        return MPI_SUCCESS;
    }
    struct info_entry *ne = calloc(1, sizeof *ne);
    if (!ne || !(ne->key = strdup(key))) {
        free(ne);
        free(v);
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, "MPI_Info_set");
    }
    ne->value = v;
    *e = ne;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Info_get(MPI_Info info, const char *key, int valuelen, char *value, int *flag)
{
    struct info *in = info_get(info);
    if (!in || !key || !value || !flag || valuelen < 0)
        return zm_raise(MPI_COMM_NULL, in ? MPI_ERR_ARG : MPI_ERR_INFO, "MPI_Info_get");
    struct info_entry *e = *info_find(in, key);
    *flag = e != NULL;
    if (e) {
        snprintf(value, (size_t)valuelen + 1, "%s", e->value);
    }
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Info_delete(MPI_Info info, const char *key)
{
    struct info *in = info_get(info);
    if (!in || !key)
        return zm_raise(MPI_COMM_NULL, in ? MPI_ERR_ARG : MPI_ERR_INFO, "MPI_Info_delete");
    struct info_entry **e = info_find(in, key);
    if (!*e)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_INFO_NOKEY, "MPI_Info_delete");
    struct info_entry *d = *e;
    *e = d->next;
    free(d->key);
    free(d->value);
    free(d);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Info_get_nkeys(MPI_Info info, int *nkeys)
{
    struct info *in = info_get(info);
    if (!in || !nkeys)
        return zm_raise(MPI_COMM_NULL, in ? MPI_ERR_ARG : MPI_ERR_INFO, "MPI_Info_get_nkeys");
    int n = 0;
    for (struct info_entry *e = in->head; e; e = e->next)
        n++;
    *nkeys = n;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Info_free(MPI_Info *info)
{
    struct info *in = info ? info_get(*info) : NULL;
    if (!in || in == &env_info)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_INFO, "MPI_Info_free");
    while (in->head)
        MPI_Info_delete(*info, in->head->key);
    zm_table_del(&infos, *info);
    free(in);
    *info = MPI_INFO_NULL;
    return MPI_SUCCESS;
}

/* ---- Cartesian topologies ---- */

ZIMP_MPI_API int MPI_Dims_create(int nnodes, int ndims, int dims[])
{
    if (nnodes <= 0 || ndims < 0 || (ndims && !dims))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Dims_create");
    int fixed = 1, free_dims = 0;
    for (int i = 0; i < ndims; i++) {
        if (dims[i] < 0)
            return zm_raise(MPI_COMM_NULL, MPI_ERR_DIMS, "MPI_Dims_create");
        if (dims[i] > 0)
            fixed *= dims[i];
        else
            free_dims++;
    }
    if (nnodes % fixed)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_DIMS, "MPI_Dims_create");
    int left = nnodes / fixed;
    if (!free_dims)
        return left == 1 ? MPI_SUCCESS : zm_raise(MPI_COMM_NULL, MPI_ERR_DIMS, "MPI_Dims_create");
    /* Deal prime factors, largest first, to the smallest free dimension: balanced, non-increasing. */
    int f[64], nf = 0;
    for (int p = 2; left > 1 && nf < 64;) {
        if (left % p == 0) {
            f[nf++] = p;
            left /= p;
        } else {
            p++;
        }
    }
    int *d = calloc((size_t)free_dims, sizeof *d);
    if (!d)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, "MPI_Dims_create");
    for (int i = 0; i < free_dims; i++)
        d[i] = 1;
    for (int i = nf - 1; i >= 0; i--) {
        int m = 0;
        for (int j = 1; j < free_dims; j++)
            if (d[j] < d[m])
                m = j;
        d[m] *= f[i];
    }
    /* Sort descending. */
    for (int i = 0; i < free_dims; i++)
        for (int j = i + 1; j < free_dims; j++)
            if (d[j] > d[i]) {
                int t = d[i];
                d[i] = d[j];
                d[j] = t;
            }
    for (int i = 0, k = 0; i < ndims; i++)
        if (dims[i] == 0)
            dims[i] = d[k++];
    free(d);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                                 int reorder, MPI_Comm *comm_cart)
{
    (void)reorder;                        /* ranks keep their order: one node, all equal */
    struct zm_comm *c;
    ZM_CHECK_INIT("MPI_Cart_create");
    int rc = zm_comm_check(comm_old, &c);
    if (rc)
        return zm_raise(comm_old, rc, "MPI_Cart_create");
    if (ndims < 0 || !comm_cart || (ndims && (!dims || !periods)))
        return zm_raise(comm_old, MPI_ERR_ARG, "MPI_Cart_create");
    long prod = 1;
    for (int i = 0; i < ndims; i++) {
        if (dims[i] <= 0)
            return zm_raise(comm_old, MPI_ERR_DIMS, "MPI_Cart_create");
        prod *= dims[i];
        if (prod > c->size)
            return zm_raise(comm_old, MPI_ERR_TOPOLOGY, "MPI_Cart_create");
    }
    rc = comm_split(c, c->rank < prod ? 0 : MPI_UNDEFINED, c->rank, comm_cart);
    if (rc)
        return zm_raise(comm_old, rc, "MPI_Cart_create");
    if (*comm_cart == MPI_COMM_NULL)
        return MPI_SUCCESS;
    struct zm_comm *nc = zm_comm_get(*comm_cart);
    struct zm_cart *cart = calloc(1, sizeof *cart);
    if (cart) {
        cart->dims = malloc(sizeof(int) * (size_t)(ndims + 1));
        cart->periods = malloc(sizeof(int) * (size_t)(ndims + 1));
    }
    if (!cart || !cart->dims || !cart->periods) {
        if (cart) {
            free(cart->dims);
            free(cart->periods);
        }
        free(cart);
        return zm_raise(comm_old, MPI_ERR_NO_MEM, "MPI_Cart_create");
    }
    cart->ndims = ndims;
    for (int i = 0; i < ndims; i++) {
        cart->dims[i] = dims[i];
        cart->periods[i] = periods[i] != 0;
    }
    nc->cart = cart;
    return MPI_SUCCESS;
}

static int cart_of(MPI_Comm comm, struct zm_comm **c, const char *fn)
{
    int rc = zm_comm_check(comm, c);
    if (rc)
        return zm_raise(comm, rc, fn);
    if (!(*c)->cart)
        return zm_raise(comm, MPI_ERR_TOPOLOGY, fn);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[])
{
    struct zm_comm *c;
    int rc = cart_of(comm, &c, "MPI_Cart_coords");
    if (rc)
        return rc;
    if (rank < 0 || rank >= c->size)
        return zm_raise(comm, MPI_ERR_RANK, "MPI_Cart_coords");
    if (maxdims < c->cart->ndims || (c->cart->ndims && !coords))
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Cart_coords");
    for (int i = c->cart->ndims - 1; i >= 0; i--) {   /* row-major: the last dimension varies fastest */
        coords[i] = rank % c->cart->dims[i];
        rank /= c->cart->dims[i];
    }
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank)
{
    struct zm_comm *c;
    int rc = cart_of(comm, &c, "MPI_Cart_rank");
    if (rc)
        return rc;
    if (!rank || (c->cart->ndims && !coords))
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Cart_rank");
    int r = 0;
    for (int i = 0; i < c->cart->ndims; i++) {
        int d = c->cart->dims[i], x = coords[i];
        if (c->cart->periods[i])
            x = ((x % d) + d) % d;
        else if (x < 0 || x >= d)
            return zm_raise(comm, MPI_ERR_ARG, "MPI_Cart_rank");
        r = r * d + x;
    }
    *rank = r;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *rank_source, int *rank_dest)
{
    struct zm_comm *c;
    int rc = cart_of(comm, &c, "MPI_Cart_shift");
    if (rc)
        return rc;
    if (direction < 0 || direction >= c->cart->ndims || !rank_source || !rank_dest)
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Cart_shift");
    int nd = c->cart->ndims;
    int *coords = calloc((size_t)nd, sizeof *coords);
    if (!coords)
        return zm_raise(comm, MPI_ERR_NO_MEM, "MPI_Cart_shift");
    MPI_Cart_coords(comm, c->rank, nd, coords);
    int d = c->cart->dims[direction], me = coords[direction];
    int out[2];
    for (int k = 0; k < 2; k++) {
        int x = me + (k ? disp : -disp);
        if (!c->cart->periods[direction] && (x < 0 || x >= d)) {
            out[k] = MPI_PROC_NULL;
            continue;
        }
        coords[direction] = ((x % d) + d) % d;
        MPI_Cart_rank(comm, coords, &out[k]);
    }
    free(coords);
    *rank_source = out[0];
    *rank_dest = out[1];
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[])
{
    struct zm_comm *c;
    int rc = cart_of(comm, &c, "MPI_Cart_get");
    if (rc)
        return rc;
    int nd = c->cart->ndims;
    if (maxdims < nd || (nd && (!dims || !periods || !coords)))
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Cart_get");
    for (int i = 0; i < nd; i++) {
        dims[i] = c->cart->dims[i];
        periods[i] = c->cart->periods[i];
    }
    return MPI_Cart_coords(comm, c->rank, maxdims, coords);
}

ZIMP_MPI_API int MPI_Cartdim_get(MPI_Comm comm, int *ndims)
{
    struct zm_comm *c;
    int rc = cart_of(comm, &c, "MPI_Cartdim_get");
    if (rc)
        return rc;
    if (!ndims)
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Cartdim_get");
    *ndims = c->cart->ndims;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Topo_test(MPI_Comm comm, int *status)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (rc || !status)
        return zm_raise(comm, rc ? rc : MPI_ERR_ARG, "MPI_Topo_test");
    *status = c->cart ? MPI_CART : MPI_UNDEFINED;
    return MPI_SUCCESS;
}
