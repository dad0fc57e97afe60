/*
 * Non-blocking collectives. Each is a request with a step function that the
 * progress engine calls (from MPI_Test, the waits and every other blocking
 * call) until it reports completion. A step posts a round of point-to-point
 * requests on the communicator's collective context (tagged with the
 * collective's sequence number, like the blocking collectives), and when
 * they have all completed does the local work of that round (a reduction, a
 * copy) and posts the next; data every member needs goes through the
 * communicator's one-to-many channel (zm_bcast_op). The algorithms are the
 * blocking ones of coll.c cut into rounds:
 *
 *   Ibarrier                  tokens to rank 0, one release on the channel
 *   Ibcast                    one write on the channel
 *   Ireduce                   contributions to the root, reduced in rank order
 *   Iallreduce                Ireduce to rank 0, then one write on the channel
 *   Igather(v), Iscatter(v)   linear to/from the root
 *   Iallgather(v)             Igatherv to rank 0, then one write on the channel
 *   Ialltoall(v,w)            every pair at once
 *   Ireduce_scatter(_block)   Ireduce to rank 0, then each part to its rank
 *   Iscan, Iexscan            a chain along the ranks
 */
#include "mpi_int.h"

#include <stdlib.h>
#include <string.h>

struct nbc {
    struct zm_comm *c;
    uint32_t seq;
    int phase;
    struct zm_req **reqs; /* the round's requests (NULL entries done or unused) */
    int nreqs, capreqs;
    struct zm_bcast_op *bc;
    /* the call's arguments */
    const void *sendbuf;
    void *recvbuf;
    int count, root;
    MPI_Datatype dt;      /* a handle of our own for t, valid even if the caller frees theirs */
    struct zm_type *t;    /* referenced while the operation runs */
    struct zm_op *op;
    const int *counts, *displs;   /* the v-calls' root-side arrays (the caller keeps them) */
    int *own_counts, *own_displs; /* regular calls: made here */
    /* scratch */
    void *mem[3];
    char *buf[3];
    char **parts;         /* Ireduce at the root: one contribution per rank */
    void **parts_mem;
    MPI_Datatype derived; /* Iallgather(v): the result as one indexed type */
};

static void nbc_list_remove(struct zm_req *r)
{
    for (struct zm_req **p = &zm.nbc_head; *p; p = &(*p)->next_nbc)
        if (*p == r) {
            *p = r->next_nbc;
            return;
        }
}

static void reqs_release(struct nbc *n)
{
    for (int i = 0; i < n->nreqs; i++)
        if (n->reqs[i]) {
            if (!n->reqs[i]->complete && n->reqs[i]->kind == ZM_R_RECV)
                zm_cancel_recv(n->reqs[i]);   /* out of the posted queue before it goes */
            zm_req_free(n->reqs[i]);
            n->reqs[i] = NULL;
        }
    n->nreqs = 0;
}

static void nbc_free(struct nbc *n)
{
    if (!n)
        return;
    if (n->reqs)
        reqs_release(n);
    free(n->reqs);
    zm_bcast_op_free(n->bc);
    if (n->t) {
        if (!n->t->predefined)
            zm_table_del(&zm_types, n->dt);
        zm_type_unref(n->t);
    }
    if (n->op)
        zm_op_unref(n->op);
    for (int i = 0; i < 3; i++)
        free(n->mem[i]);
    if (n->parts_mem)
        for (int i = 0; i < n->c->size; i++)
            free(n->parts_mem[i]);
    free(n->parts_mem);
    free(n->parts);
    free(n->own_counts);
    free(n->own_displs);
    if (n->derived != MPI_DATATYPE_NULL)
        MPI_Type_free(&n->derived);
    free(n);
}

/*
 * A step posts requests, and posting may progress the inbox; that progress
 * must not step non-blocking collectives again (the one running would post
 * its round twice, and one completed there could be freed under the loop
 * below). So steps never nest.
 */
static bool stepping;

/* Runs one step of r; on completion takes it off the list and completes it. */
static void nbc_run(struct zm_req *r)
{
    stepping = true;
    int rc = r->step(r);
    stepping = false;
    if (rc == 0)
        return;
    nbc_list_remove(r);
    nbc_free(r->nbc);
    r->nbc = NULL;
    zm_set_status(&r->status, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_SUCCESS, 0);
    zm_req_complete(r, rc < 0 ? -rc : MPI_SUCCESS);
}

void zm_nbc_progress(void)
{
    if (stepping)
        return;
    struct zm_req *r = zm.nbc_head;
    while (r) {
        struct zm_req *next = r->next_nbc;
        nbc_run(r);
        r = next;
    }
}

/* Errors go back negated so that 0 and 1 keep meaning "pending" and "done". */
static int fail(int rc)
{
    return rc ? -rc : 0;
}

/* Room for n more requests in the current round. */
static int reqs_reserve(struct nbc *n, int more)
{
    if (n->nreqs + more <= n->capreqs)
        return MPI_SUCCESS;
    int cap = n->nreqs + more + 4;
    struct zm_req **r = realloc(n->reqs, sizeof *r * (size_t)cap);
    if (!r)
        return MPI_ERR_NO_MEM;
    for (int i = n->capreqs; i < cap; i++)
        r[i] = NULL;
    n->reqs = r;
    n->capreqs = cap;
    return MPI_SUCCESS;
}

static int post_send(struct nbc *n, const void *buf, int count, MPI_Datatype dt, int to)
{
    int rc = reqs_reserve(n, 1);
    if (!rc)
        rc = zm_isend(buf, count, dt, to, zm_coll_tag(n->seq), n->c, n->c->ctx + 1, ZM_MODE_STD,
                      &n->reqs[n->nreqs]);
    if (!rc)
        n->nreqs++;
    return rc;
}

static int post_recv(struct nbc *n, void *buf, int count, MPI_Datatype dt, int from)
{
    int rc = reqs_reserve(n, 1);
    if (!rc)
        rc = zm_irecv(buf, count, dt, from, zm_coll_tag(n->seq), n->c, n->c->ctx + 1, &n->reqs[n->nreqs]);
    if (!rc)
        n->nreqs++;
    return rc;
}

/* The round's requests: 0 some pending, 1 all done (and released), -(error class). */
static int round_done(struct nbc *n)
{
    for (int i = 0; i < n->nreqs; i++) {
        if (!n->reqs[i])
            continue;
        if (!n->reqs[i]->complete)
            return 0;
        int err = n->reqs[i]->status.MPI_ERROR;
        if (err)
            return fail(err);
    }
    reqs_release(n);
    return 1;
}

/* The channel's write of (buf, count, t) from root, started when first stepped. */
static int bcast_step(struct nbc *n, int root, void *buf, int count, struct zm_type *t)
{
    if (!n->bc && !(n->bc = zm_bcast_op_new(n->c, n->seq, root, buf, count, t)))
        return fail(MPI_ERR_NO_MEM);
    return zm_bcast_op_step(n->bc);
}

static char *at(const void *buf, const struct zm_type *t, MPI_Aint index)
{
    return (char *)buf + index * t->extent;
}

/* ---- Ibarrier, Ibcast ---- */

static int ibarrier_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    struct zm_comm *c = n->c;
    int rc;
    if (n->phase == 0) {
        for (int i = 1; i < c->size && c->rank == 0; i++)
            if ((rc = post_recv(n, NULL, 0, MPI_BYTE, i)) != MPI_SUCCESS)
                return fail(rc);
        if (c->rank != 0 && (rc = post_send(n, NULL, 0, MPI_BYTE, 0)) != MPI_SUCCESS)
            return fail(rc);
        n->phase = 1;
    }
    if (n->phase == 1) {                  /* tokens in (rank 0) or ours out (the others) */
        if ((rc = round_done(n)) != 1)
            return rc;
        n->phase = 2;
    }
    return bcast_step(n, 0, NULL, 0, zm_type_get(MPI_BYTE));
}

static int ibcast_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    return bcast_step(n, n->root, n->recvbuf, n->count, n->t);
}

/* ---- reductions ---- */

/*
 * Ireduce's rounds into `into` at `root` (phases 0 and 1; 1 when the result
 * is there): the root receives every other member's contribution into a
 * buffer of its own, then reduces a0 op (a1 op (... op an-1)) like coll.c.
 */
static int reduce_rounds(struct nbc *n, const void *sendbuf, void *into, int root)
{
    struct zm_comm *c = n->c;
    int rc, count = n->count;
    if (n->phase == 0) {
        if (c->rank != root) {
            if ((rc = post_send(n, sendbuf, count, n->dt, root)) != MPI_SUCCESS)
                return fail(rc);
        } else {
            n->parts = calloc((size_t)c->size, sizeof *n->parts);
            n->parts_mem = calloc((size_t)c->size, sizeof *n->parts_mem);
            if (!n->parts || !n->parts_mem)
                return fail(MPI_ERR_NO_MEM);
            for (int i = 0; i < c->size; i++) {
                if (!(n->parts_mem[i] = zm_layout_alloc(n->t, (size_t)count, &n->parts[i])))
                    return fail(MPI_ERR_NO_MEM);
                if (i == root)
                    zm_copy_typed(sendbuf, n->t, (size_t)count, n->parts[i], n->t, (size_t)count);
                else if ((rc = post_recv(n, n->parts[i], count, n->dt, i)) != MPI_SUCCESS)
                    return fail(rc);
            }
        }
        n->phase = 1;
    }
    if ((rc = round_done(n)) != 1)
        return rc;
    if (c->rank == root) {
        char *acc = n->parts[c->size - 1];
        for (int i = c->size - 2; i >= 0; i--)
            if ((rc = zm_op_apply(n->op, n->parts[i], acc, count, n->dt)) != MPI_SUCCESS)
                return fail(rc);
        zm_copy_typed(acc, n->t, (size_t)count, into, n->t, (size_t)count);
        for (int i = 0; i < c->size; i++) {
            free(n->parts_mem[i]);
            n->parts_mem[i] = NULL;
        }
    }
    return 1;
}

static int ireduce_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    return n->phase < 2 ? reduce_rounds(n, n->sendbuf, n->recvbuf, n->root) : 1;
}

static int iallreduce_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    if (n->phase < 2) {
        int rc = reduce_rounds(n, n->sendbuf, n->recvbuf, 0);
        if (rc != 1)
            return rc;
        n->phase = 2;
    }
    return bcast_step(n, 0, n->recvbuf, n->count, n->t);
}

/* Ireduce_scatter(_block): the reduction of every part at rank 0, then each part to its rank. */
static int ireduce_scatter_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    struct zm_comm *c = n->c;
    int rc;
    if (n->phase < 2) {
        if ((rc = reduce_rounds(n, n->sendbuf, n->buf[0], 0)) != 1)
            return rc;
        if (c->rank == 0) {
            for (int i = 1, off = n->counts[0]; i < c->size; off += n->counts[i], i++)
                if ((rc = post_send(n, at(n->buf[0], n->t, off), n->counts[i], n->dt, i)) != MPI_SUCCESS)
                    return fail(rc);
            zm_copy_typed(n->buf[0], n->t, (size_t)n->counts[0], n->recvbuf, n->t, (size_t)n->counts[0]);
        } else if ((rc = post_recv(n, n->recvbuf, n->counts[c->rank], n->dt, 0)) != MPI_SUCCESS) {
            return fail(rc);
        }
        n->phase = 2;
    }
    return round_done(n);
}

/* Iscan, Iexscan: the prefix from rank - 1, ours combined with it, passed on to rank + 1. */
static int iscan_step(struct zm_req *r, bool inclusive)
{
    struct nbc *n = r->nbc;
    struct zm_comm *c = n->c;
    char *mine = n->buf[0], *prefix = n->buf[1];
    size_t count = (size_t)n->count;
    int rc;
    if (n->phase == 0) {
        zm_copy_typed(n->sendbuf == MPI_IN_PLACE ? n->recvbuf : n->sendbuf, n->t, count, mine, n->t, count);
        if (c->rank > 0 && (rc = post_recv(n, prefix, n->count, n->dt, c->rank - 1)) != MPI_SUCCESS)
            return fail(rc);
        n->phase = 1;
    }
    if (n->phase == 1) {
        if ((rc = round_done(n)) != 1)
            return rc;
        if (c->rank > 0) {
            if ((rc = zm_op_apply(n->op, prefix, mine, n->count, n->dt)) != MPI_SUCCESS)
                return fail(rc);
            if (!inclusive)
                zm_copy_typed(prefix, n->t, count, n->recvbuf, n->t, count);
        }
        if (inclusive)
            zm_copy_typed(mine, n->t, count, n->recvbuf, n->t, count);
        if (c->rank + 1 < c->size && (rc = post_send(n, mine, n->count, n->dt, c->rank + 1)) != MPI_SUCCESS)
            return fail(rc);
        n->phase = 2;
    }
    return round_done(n);
}

static int iscan_incl_step(struct zm_req *r)
{
    return iscan_step(r, true);
}

static int iscan_excl_step(struct zm_req *r)
{
    return iscan_step(r, false);
}

/* ---- gather, scatter, allgather ---- */

struct vargs {
    const void *sbuf;
    int scount;
    MPI_Datatype st;
    void *rbuf;
    int rcount;
    MPI_Datatype rt;
    const int *counts, *displs;
};

static struct vargs *vargs_of(struct nbc *n)
{
    return (struct vargs *)n->mem[2];
}

/* Gatherv rounds at root (phase 0 posts, then 1 when all arrived). */
static int gatherv_rounds(struct nbc *n, struct vargs *a, int root)
{
    struct zm_comm *c = n->c;
    int rc;
    if (n->phase == 0) {
        if (c->rank != root) {
            if ((rc = post_send(n, a->sbuf, a->scount, a->st, root)) != MPI_SUCCESS)
                return fail(rc);
        } else {
            struct zm_type *rtt = zm_type_get(a->rt);
            for (int i = 0; i < c->size; i++) {
                if (i != root)
                    rc = post_recv(n, at(a->rbuf, rtt, a->displs[i]), a->counts[i], a->rt, i);
                else if (a->sbuf != MPI_IN_PLACE)
                    rc = (zm_copy_typed(a->sbuf, zm_type_get(a->st), (size_t)a->scount,
                                        at(a->rbuf, rtt, a->displs[i]), rtt, (size_t)a->counts[i]),
                          MPI_SUCCESS);
                if (rc)
                    return fail(rc);
            }
        }
        n->phase = 1;
    }
    return round_done(n);
}

static int igatherv_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    return gatherv_rounds(n, vargs_of(n), n->root);
}

static int iscatterv_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    struct zm_comm *c = n->c;
    struct vargs *a = vargs_of(n);
    int rc = MPI_SUCCESS;
    if (n->phase == 0) {
        if (c->rank != n->root) {
            if ((rc = post_recv(n, a->rbuf, a->rcount, a->rt, n->root)) != MPI_SUCCESS)
                return fail(rc);
        } else {
            struct zm_type *stt = zm_type_get(a->st);
            for (int i = 0; i < c->size; i++) {
                if (i != n->root)
                    rc = post_send(n, at(a->sbuf, stt, a->displs[i]), a->counts[i], a->st, i);
                else if (a->rbuf != MPI_IN_PLACE)
                    zm_copy_typed(at(a->sbuf, stt, a->displs[i]), stt, (size_t)a->counts[i], a->rbuf,
                                  zm_type_get(a->rt), (size_t)a->rcount);
                if (rc)
                    return fail(rc);
            }
        }
        n->phase = 1;
    }
    return round_done(n);
}

static int iallgatherv_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    struct vargs *a = vargs_of(n);
    if (n->phase < 2) {
        int rc = gatherv_rounds(n, a, 0);
        if (rc != 1)
            return rc;
        n->phase = 2;
    }
    return bcast_step(n, 0, a->rbuf, 1, zm_type_get(n->derived));
}

/* ---- all to all ---- */

struct wargs {
    const void *sbuf;
    void *rbuf;
    const int *scounts, *sdispls, *rcounts, *rdispls;   /* displacements in bytes */
    MPI_Datatype *st, *rt;                              /* one type per peer */
};

static int ialltoallw_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    struct zm_comm *c = n->c;
    struct wargs *a = (struct wargs *)n->mem[2];
    int rc;
    if (n->phase == 0) {
        for (int k = 1; k < c->size; k++) {
            int from = (c->rank - k + c->size) % c->size, to = (c->rank + k) % c->size;
            rc = post_recv(n, (char *)a->rbuf + a->rdispls[from], a->rcounts[from], a->rt[from], from);
            if (!rc)
                rc = post_send(n, (const char *)a->sbuf + a->sdispls[to], a->scounts[to], a->st[to], to);
            if (rc)
                return fail(rc);
        }
        int me = c->rank;
        zm_copy_typed((const char *)a->sbuf + a->sdispls[me], zm_type_get(a->st[me]), (size_t)a->scounts[me],
                      (char *)a->rbuf + a->rdispls[me], zm_type_get(a->rt[me]), (size_t)a->rcounts[me]);
        n->phase = 1;
    }
    return round_done(n);
}

static struct zm_req *nbc_start(struct zm_comm *c, zm_nbc_step_fn *step, struct nbc *n)
{
    struct zm_req *r = zm_req_new(ZM_R_NBC, c);
    if (!r)
        return NULL;
    r->step = step;
    r->nbc = n;
    r->next_nbc = zm.nbc_head;
    zm.nbc_head = r;
    nbc_run(r);
    return r;
}

static int nbc_enter(MPI_Comm comm, MPI_Request *request, struct zm_comm **c, struct nbc **n)
{
    ZM_CHECK_INIT("non-blocking collective");
    int rc = zm_comm_check(comm, c);
    if (rc)
        return rc;
    if (!request)
        return MPI_ERR_ARG;
    if ((*c)->remote)
        return MPI_ERR_COMM;              /* no collectives on intercommunicators */
    *n = calloc(1, sizeof **n);
    if (!*n)
        return MPI_ERR_NO_MEM;
    (*n)->c = *c;
    (*n)->seq = (*c)->coll_seq++;
    (*n)->derived = MPI_DATATYPE_NULL;
    zm_check_deaths(false);
    rc = MPI_SUCCESS;
    for (int i = 0; i < (*c)->size && !rc; i++)
        if (zm_peer_dead((*c)->group->world[i]))
            rc = MPIX_ERR_PROC_FAILED;
    if (!rc)
        rc = zm_bcast_setup(*c);          /* a no-op but on a communicator from MPI_Comm_idup */
    if (rc) {
        free(*n);
        *n = NULL;
    }
    return rc;
}


/* Starts n (which it owns from here) as the request *request. */
static int nbc_launch(MPI_Comm comm, struct nbc *n, zm_nbc_step_fn *step, MPI_Request *request, const char *fn)
{
    struct zm_req *r = nbc_start(n->c, step, n);
    if (!r) {
        nbc_free(n);
        return zm_raise(comm, MPI_ERR_NO_MEM, fn);
    }
    *request = r->handle;
    return MPI_SUCCESS;
}

/* Ends a call that failed before it started anything. */
static int nbc_refuse(MPI_Comm comm, struct nbc *n, int rc, const char *fn)
{
    nbc_free(n);
    return zm_raise(comm, rc, fn);
}

/* A committed type (referenced for the operation), or an error class. */
static int take_type(struct nbc *n, MPI_Datatype dt, int count)
{
    struct zm_type *t = zm_type_get(dt);
    if (!t || !t->committed)
        return MPI_ERR_TYPE;
    if (count < 0)
        return MPI_ERR_COUNT;
    if (!t->predefined) {
        int k = zm_table_add(&zm_types, t);
        if (k < 0)
            return MPI_ERR_NO_MEM;
        dt = (MPI_Datatype)(ZM_K_TYPE | (unsigned)k);
    }
    zm_type_ref(t);
    n->t = t;
    n->dt = dt;
    n->count = count;
    return MPI_SUCCESS;
}

static int valid_type(MPI_Datatype dt, int count)
{
    struct zm_type *t = zm_type_get(dt);
    if (!t || !t->committed)
        return MPI_ERR_TYPE;
    return count < 0 ? MPI_ERR_COUNT : MPI_SUCCESS;
}

/* counts[r] = k and displs[r] = r * k, owned by n. */
static int regular(struct nbc *n, int k)
{
    int size = n->c->size;
    n->own_counts = malloc(sizeof(int) * (size_t)size);
    n->own_displs = malloc(sizeof(int) * (size_t)size);
    if (!n->own_counts || !n->own_displs)
        return MPI_ERR_NO_MEM;
    for (int r = 0; r < size; r++) {
        n->own_counts[r] = k;
        n->own_displs[r] = r * k;
    }
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Ibarrier", comm, -1, 0, MPI_BYTE);
    struct zm_comm *c;
    struct nbc *n = NULL;
    int rc = nbc_enter(comm, request, &c, &n);
    if (rc)
        return zm_raise(comm, rc, "MPI_Ibarrier");
    return nbc_launch(comm, n, ibarrier_step, request, "MPI_Ibarrier");
}

ZIMP_MPI_API int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                            MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Ibcast", comm, root, count, datatype);
    struct zm_comm *c;
    struct nbc *n = NULL;
    int rc = nbc_enter(comm, request, &c, &n);
    if (rc)
        return zm_raise(comm, rc, "MPI_Ibcast");
    if ((rc = take_type(n, datatype, count)) != MPI_SUCCESS)
        return nbc_refuse(comm, n, rc, "MPI_Ibcast");
    if (root < 0 || root >= c->size)
        return nbc_refuse(comm, n, MPI_ERR_ROOT, "MPI_Ibcast");
    n->root = root;
    n->recvbuf = buffer;
    return nbc_launch(comm, n, ibcast_step, request, "MPI_Ibcast");
}

/* The checks and arguments every reduction shares. */
static int reduce_enter(MPI_Comm comm, MPI_Request *request, const void *sendbuf, void *recvbuf, int count,
                        MPI_Datatype dt, MPI_Op op, struct nbc **n)
{
    struct zm_comm *c;
    int rc = nbc_enter(comm, request, &c, n);
    if (rc)
        return rc;
    if ((rc = take_type(*n, dt, count)) == MPI_SUCCESS) {
        struct zm_op *o = zm_op_get(op);
        rc = o ? zm_op_check(o, dt) : MPI_ERR_OP;
        if (!rc) {
            zm_op_ref(o);
            (*n)->op = o;
        }
    }
    if (rc) {
        nbc_free(*n);
        *n = NULL;
        return rc;
    }
    (*n)->sendbuf = sendbuf;
    (*n)->recvbuf = recvbuf;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                             int root, MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Ireduce", comm, root, count, datatype);
    struct nbc *n;
    int rc = reduce_enter(comm, request, sendbuf, recvbuf, count, datatype, op, &n);
    if (rc)
        return zm_raise(comm, rc, "MPI_Ireduce");
    if (root < 0 || root >= n->c->size)
        return nbc_refuse(comm, n, MPI_ERR_ROOT, "MPI_Ireduce");
    n->root = root;
    if (sendbuf == MPI_IN_PLACE)
        n->sendbuf = n->c->rank == root ? recvbuf : NULL;
    return nbc_launch(comm, n, ireduce_step, request, "MPI_Ireduce");
}

ZIMP_MPI_API int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                                MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Iallreduce", comm, -1, count, datatype);
    struct nbc *n;
    int rc = reduce_enter(comm, request, sendbuf, recvbuf, count, datatype, op, &n);
    if (rc)
        return zm_raise(comm, rc, "MPI_Iallreduce");
    if (sendbuf == MPI_IN_PLACE)
        n->sendbuf = recvbuf;
    return nbc_launch(comm, n, iallreduce_step, request, "MPI_Iallreduce");
}

/* Both reduce-scatters: counts (every rank's part) set, n->count becomes their sum. */
static int ireduce_scatter(struct nbc *n, MPI_Comm comm, MPI_Request *request, const int *counts,
                           const char *fn)
{
    long total = 0;
    for (int r = 0; r < n->c->size; r++) {
        if (counts[r] < 0)
            return nbc_refuse(comm, n, MPI_ERR_COUNT, fn);
        total += counts[r];
    }
    if (total > 0x7fffffff)
        return nbc_refuse(comm, n, MPI_ERR_COUNT, fn);
    n->counts = counts;
    n->count = (int)total;
    if (n->sendbuf == MPI_IN_PLACE)
        n->sendbuf = n->recvbuf;
    if (n->c->rank == 0 && !(n->mem[0] = zm_layout_alloc(n->t, (size_t)total, &n->buf[0])))
        return nbc_refuse(comm, n, MPI_ERR_NO_MEM, fn);
    return nbc_launch(comm, n, ireduce_scatter_step, request, fn);
}

ZIMP_MPI_API int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                           MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                           MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Ireduce_scatter_block", comm, -1, recvcount, datatype);
    struct nbc *n;
    int rc = reduce_enter(comm, request, sendbuf, recvbuf, recvcount, datatype, op, &n);
    if (rc)
        return zm_raise(comm, rc, "MPI_Ireduce_scatter_block");
    if ((rc = regular(n, recvcount)) != MPI_SUCCESS)
        return nbc_refuse(comm, n, rc, "MPI_Ireduce_scatter_block");
    return ireduce_scatter(n, comm, request, n->own_counts, "MPI_Ireduce_scatter_block");
}

ZIMP_MPI_API int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Ireduce_scatter", comm, -1, 0, MPI_DATATYPE_NULL);
    struct nbc *n;
    int rc = reduce_enter(comm, request, sendbuf, recvbuf, 0, datatype, op, &n);
    if (rc)
        return zm_raise(comm, rc, "MPI_Ireduce_scatter");
    if (!recvcounts)
        return nbc_refuse(comm, n, MPI_ERR_ARG, "MPI_Ireduce_scatter");
    return ireduce_scatter(n, comm, request, recvcounts, "MPI_Ireduce_scatter");
}

static int iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                 MPI_Comm comm, MPI_Request *request, bool inclusive, const char *fn)
{
    struct nbc *n;
    int rc = reduce_enter(comm, request, sendbuf, recvbuf, count, datatype, op, &n);
    if (rc)
        return zm_raise(comm, rc, fn);
    for (int i = 0; i < 2; i++)
        if (!(n->mem[i] = zm_layout_alloc(n->t, (size_t)count, &n->buf[i])))
            return nbc_refuse(comm, n, MPI_ERR_NO_MEM, fn);
    return nbc_launch(comm, n, inclusive ? iscan_incl_step : iscan_excl_step, request, fn);
}

ZIMP_MPI_API int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                           MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Iscan", comm, -1, count, datatype);
    return iscan(sendbuf, recvbuf, count, datatype, op, comm, request, true, "MPI_Iscan");
}

ZIMP_MPI_API int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Iexscan", comm, -1, count, datatype);
    return iscan(sendbuf, recvbuf, count, datatype, op, comm, request, false, "MPI_Iexscan");
}

/* ---- gather, scatter, allgather ---- */

static int vargs_enter(MPI_Comm comm, MPI_Request *request, struct nbc **n, struct vargs **a)
{
    struct zm_comm *c;
    int rc = nbc_enter(comm, request, &c, n);
    if (rc)
        return rc;
    if (!((*n)->mem[2] = *a = calloc(1, sizeof **a))) {
        nbc_free(*n);
        return MPI_ERR_NO_MEM;
    }
    return MPI_SUCCESS;
}

/* Gather and Gatherv once their counts are known (root: counts, displs). */
static int igatherv(struct nbc *n, struct vargs *a, int root, MPI_Comm comm, MPI_Request *request, const char *fn)
{
    struct zm_comm *c = n->c;
    int rc = root >= 0 && root < c->size ? MPI_SUCCESS : MPI_ERR_ROOT;
    if (!rc && (c->rank != root || a->sbuf != MPI_IN_PLACE))
        rc = valid_type(a->st, a->scount);
    if (!rc && c->rank == root) {
        if (!a->counts || !a->displs)
            rc = MPI_ERR_ARG;
        for (int i = 0; !rc && i < c->size; i++)
            rc = valid_type(a->rt, a->counts[i]);
    }
    if (rc)
        return nbc_refuse(comm, n, rc, fn);
    n->root = root;
    return nbc_launch(comm, n, igatherv_step, request, fn);
}

ZIMP_MPI_API int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                             int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Igather", comm, root, sendcount, sendtype);
    struct nbc *n;
    struct vargs *a;
    int rc = vargs_enter(comm, request, &n, &a);
    if (rc)
        return zm_raise(comm, rc, "MPI_Igather");
    *a = (struct vargs){ sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, NULL, NULL };
    if ((rc = regular(n, recvcount)) != MPI_SUCCESS)
        return nbc_refuse(comm, n, rc, "MPI_Igather");
    a->counts = n->own_counts;
    a->displs = n->own_displs;
    return igatherv(n, a, root, comm, request, "MPI_Igather");
}

ZIMP_MPI_API int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                              const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                              MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Igatherv", comm, root, sendcount, sendtype);
    struct nbc *n;
    struct vargs *a;
    int rc = vargs_enter(comm, request, &n, &a);
    if (rc)
        return zm_raise(comm, rc, "MPI_Igatherv");
    *a = (struct vargs){ sendbuf, sendcount, sendtype, recvbuf, 0, recvtype, recvcounts, displs };
    return igatherv(n, a, root, comm, request, "MPI_Igatherv");
}

static int iscatterv(struct nbc *n, struct vargs *a, int root, MPI_Comm comm, MPI_Request *request,
                     const char *fn)
{
    struct zm_comm *c = n->c;
    int rc = root >= 0 && root < c->size ? MPI_SUCCESS : MPI_ERR_ROOT;
    if (!rc && (c->rank != root || a->rbuf != MPI_IN_PLACE))
        rc = valid_type(a->rt, a->rcount);
    if (!rc && c->rank == root) {
        if (!a->counts || !a->displs)
            rc = MPI_ERR_ARG;
        for (int i = 0; !rc && i < c->size; i++)
            rc = valid_type(a->st, a->counts[i]);
    }
    if (rc)
        return nbc_refuse(comm, n, rc, fn);
    n->root = root;
    return nbc_launch(comm, n, iscatterv_step, request, fn);
}

ZIMP_MPI_API int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                              int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Iscatter", comm, root, recvcount, recvtype);
    struct nbc *n;
    struct vargs *a;
    int rc = vargs_enter(comm, request, &n, &a);
    if (rc)
        return zm_raise(comm, rc, "MPI_Iscatter");
    *a = (struct vargs){ sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, NULL, NULL };
    if ((rc = regular(n, sendcount)) != MPI_SUCCESS)
        return nbc_refuse(comm, n, rc, "MPI_Iscatter");
    a->counts = n->own_counts;
    a->displs = n->own_displs;
    return iscatterv(n, a, root, comm, request, "MPI_Iscatter");
}

ZIMP_MPI_API int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                               MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                               int root, MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Iscatterv", comm, root, recvcount, recvtype);
    struct nbc *n;
    struct vargs *a;
    int rc = vargs_enter(comm, request, &n, &a);
    if (rc)
        return zm_raise(comm, rc, "MPI_Iscatterv");
    *a = (struct vargs){ sendbuf, 0, sendtype, recvbuf, recvcount, recvtype, sendcounts, displs };
    return iscatterv(n, a, root, comm, request, "MPI_Iscatterv");
}

/* Allgather and Allgatherv: Igatherv to rank 0, then the result as one indexed type on the channel. */
static int iallgatherv(struct nbc *n, struct vargs *a, MPI_Comm comm, MPI_Request *request, const char *fn)
{
    struct zm_comm *c = n->c;
    int rc = a->counts && a->displs ? MPI_SUCCESS : MPI_ERR_ARG;
    for (int i = 0; !rc && i < c->size; i++)
        rc = valid_type(a->rt, a->counts[i]);
    if (!rc && a->sbuf != MPI_IN_PLACE)
        rc = valid_type(a->st, a->scount);
    if (!rc && a->sbuf == MPI_IN_PLACE) {
        struct zm_type *rtt = zm_type_get(a->rt);
        a->sbuf = c->rank == 0 ? MPI_IN_PLACE : at(a->rbuf, rtt, a->displs[c->rank]);
        a->scount = a->counts[c->rank];
        a->st = a->rt;
    }
    if (!rc)
        rc = MPI_Type_indexed(c->size, a->counts, a->displs, a->rt, &n->derived);
    if (!rc)
        rc = MPI_Type_commit(&n->derived);
    if (rc)
        return nbc_refuse(comm, n, rc, fn);
    n->root = 0;
    return nbc_launch(comm, n, iallgatherv_step, request, fn);
}

ZIMP_MPI_API int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Iallgather", comm, -1, sendcount, sendtype);
    struct nbc *n;
    struct vargs *a;
    int rc = vargs_enter(comm, request, &n, &a);
    if (rc)
        return zm_raise(comm, rc, "MPI_Iallgather");
    *a = (struct vargs){ sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, NULL, NULL };
    if ((rc = regular(n, recvcount)) != MPI_SUCCESS)
        return nbc_refuse(comm, n, rc, "MPI_Iallgather");
    a->counts = n->own_counts;
    a->displs = n->own_displs;
    return iallgatherv(n, a, comm, request, "MPI_Iallgather");
}

ZIMP_MPI_API int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                 const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                                 MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Iallgatherv", comm, -1, sendcount, sendtype);
    struct nbc *n;
    struct vargs *a;
    int rc = vargs_enter(comm, request, &n, &a);
    if (rc)
        return zm_raise(comm, rc, "MPI_Iallgatherv");
    *a = (struct vargs){ sendbuf, sendcount, sendtype, recvbuf, 0, recvtype, recvcounts, displs };
    return iallgatherv(n, a, comm, request, "MPI_Iallgatherv");
}

/* ---- all to all ---- */

/* Room for the w-form arguments: 4 int arrays and 2 type arrays of size entries, in n->mem[1]. */
static int wargs_alloc(struct nbc *n, struct wargs *a, int **sc, int **sd, int **rc, int **rd)
{
    size_t size = (size_t)n->c->size;
    char *m = malloc(size * (4 * sizeof(int) + 2 * sizeof(MPI_Datatype)) + 1);
    if (!m)
        return MPI_ERR_NO_MEM;
    n->mem[1] = m;
    *sc = (int *)m;
    *sd = *sc + size;
    *rc = *sd + size;
    *rd = *rc + size;
    a->st = (MPI_Datatype *)(*rd + size);
    a->rt = a->st + size;
    a->scounts = *sc;
    a->sdispls = *sd;
    a->rcounts = *rc;
    a->rdispls = *rd;
    return MPI_SUCCESS;
}

/* Checks the w-form arguments, copies recvbuf aside for MPI_IN_PLACE, and starts. */
static int ialltoallw(struct nbc *n, struct wargs *a, MPI_Comm comm, MPI_Request *request, const char *fn)
{
    int size = n->c->size, rc = MPI_SUCCESS;
    for (int i = 0; i < size && !rc; i++) {
        rc = valid_type(a->rt[i], a->rcounts[i]);
        if (!rc && a->sbuf != MPI_IN_PLACE)
            rc = valid_type(a->st[i], a->scounts[i]);
    }
    if (!rc && a->sbuf == MPI_IN_PLACE) {     /* send from a copy of what recvbuf holds now */
        MPI_Aint hi = 0;
        for (int i = 0; i < size; i++) {
            struct zm_type *t = zm_type_get(a->rt[i]);
            MPI_Aint end = a->rcounts[i] ? a->rdispls[i] + t->true_lb + (a->rcounts[i] - 1) * t->extent +
                                               t->true_extent
                                         : 0;
            if (end > hi)
                hi = end;
        }
        if (!(n->mem[0] = malloc((size_t)hi + 1)))
            rc = MPI_ERR_NO_MEM;
        else {
            memcpy(n->mem[0], a->rbuf, (size_t)hi);
            a->sbuf = n->mem[0];
            a->scounts = a->rcounts;
            a->sdispls = a->rdispls;
            a->st = a->rt;
        }
    }
    if (rc)
        return nbc_refuse(comm, n, rc, fn);
    return nbc_launch(comm, n, ialltoallw_step, request, fn);
}

static int wargs_enter(MPI_Comm comm, MPI_Request *request, struct nbc **n, struct wargs **a)
{
    struct zm_comm *c;
    int rc = nbc_enter(comm, request, &c, n);
    if (rc)
        return rc;
    if (!((*n)->mem[2] = *a = calloc(1, sizeof **a))) {
        nbc_free(*n);
        return MPI_ERR_NO_MEM;
    }
    return MPI_SUCCESS;
}

/* Alltoall and Alltoallv in the w-form: displacements scaled to bytes, one type for all peers. */
static int ialltoallv(const void *sendbuf, const int *scounts, const int *sdispls, MPI_Datatype st,
                      void *recvbuf, const int *rcounts, const int *rdispls, MPI_Datatype rt, int sk, int rk,
                      MPI_Comm comm, MPI_Request *request, const char *fn)
{
    struct nbc *n;
    struct wargs *a;
    int rc = wargs_enter(comm, request, &n, &a);
    if (rc)
        return zm_raise(comm, rc, fn);
    int *sc, *sd, *rcn, *rd;
    if ((rc = wargs_alloc(n, a, &sc, &sd, &rcn, &rd)) != MPI_SUCCESS)
        return nbc_refuse(comm, n, rc, fn);
    struct zm_type *stt = zm_type_get(st), *rtt = zm_type_get(rt);
    if (!rtt || (sendbuf != MPI_IN_PLACE && !stt))
        return nbc_refuse(comm, n, MPI_ERR_TYPE, fn);
    bool regular_call = !rcounts;
    if (!regular_call && (!rdispls || (sendbuf != MPI_IN_PLACE && (!scounts || !sdispls))))
        return nbc_refuse(comm, n, MPI_ERR_ARG, fn);
    a->sbuf = sendbuf;
    a->rbuf = recvbuf;
    for (int i = 0; i < n->c->size; i++) {
        rcn[i] = regular_call ? rk : rcounts[i];
        rd[i] = (int)((regular_call ? (MPI_Aint)i * rk : rdispls[i]) * rtt->extent);
        a->rt[i] = rt;
        if (sendbuf != MPI_IN_PLACE) {
            sc[i] = regular_call ? sk : scounts[i];
            sd[i] = (int)((regular_call ? (MPI_Aint)i * sk : sdispls[i]) * stt->extent);
            a->st[i] = st;
        }
    }
    return ialltoallw(n, a, comm, request, fn);
}

ZIMP_MPI_API int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                               int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Ialltoall", comm, -1, sendcount, sendtype);
    return ialltoallv(sendbuf, NULL, NULL, sendtype, recvbuf, NULL, NULL, recvtype, sendcount, recvcount, comm,
                      request, "MPI_Ialltoall");
}

ZIMP_MPI_API int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                                const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Ialltoallv", comm, -1, 0, MPI_DATATYPE_NULL);
    if (!recvcounts)
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Ialltoallv");
    return ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, 0, 0, comm,
                      request, "MPI_Ialltoallv");
}

ZIMP_MPI_API int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                                const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                                MPI_Request *request)
{
    ZM_TRACE_COLL("MPI_Ialltoallw", comm, -1, 0, MPI_DATATYPE_NULL);
    struct nbc *n;
    struct wargs *a;
    int rc = wargs_enter(comm, request, &n, &a);
    if (rc)
        return zm_raise(comm, rc, "MPI_Ialltoallw");
    if (!recvcounts || !rdispls || !recvtypes ||
        (sendbuf != MPI_IN_PLACE && (!sendcounts || !sdispls || !sendtypes)))
        return nbc_refuse(comm, n, MPI_ERR_ARG, "MPI_Ialltoallw");
    *a = (struct wargs){ sendbuf, recvbuf, sendcounts, sdispls, recvcounts, rdispls,
                         (MPI_Datatype *)sendtypes, (MPI_Datatype *)recvtypes };
    return ialltoallw(n, a, comm, request, "MPI_Ialltoallw");
}

ZIMP_MPI_API int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                               const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                               const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Alltoallw", comm, -1, 0, MPI_DATATYPE_NULL);
    MPI_Request r;
    int rc = MPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                            comm, &r);
    return rc ? rc : MPI_Wait(&r, MPI_STATUS_IGNORE);
}

/* ---- MPI_Comm_idup ---- */

/*
 * The new context comes from rounds of non-blocking agreement on the
 * parent: the largest proposal of the members (from zm.next_ictx, a range
 * the blocking calls never use), then whether any member already uses or
 * has claimed that value for another MPI_Comm_idup in flight (idups on
 * overlapping communicators run at once); if one has, everyone tries again
 * above it. The new communicator's one-to-many channel is made by its
 * first collective, so no step ever blocks.
 */
struct idup {
    uint32_t prop, result, taken, any_taken, floor;
    int stage;
    bool claimed;
    MPI_Comm *out;
    /*
     * An intercommunicator's: the rounds run in its local group (the nbc's
     * communicator), and between a round's reduction and its broadcast the
     * two groups' leaders swap their results over ic (tagged with ic's
     * collective sequence number, taken at the call on both sides).
     */
    struct zm_comm *ic;
    uint32_t ic_seq, remote_value;
};

static uint32_t *claims;
static size_t nclaims, capclaims;

static bool ctx_taken(uint32_t ctx)
{
    for (size_t i = 0; i < nclaims; i++)
        if (claims[i] == ctx)
            return true;
    for (unsigned i = 0; i < zm_comms.len; i++) {
        const struct zm_comm *c = zm_comms.items[i];
        if (c && c->ctx == ctx)
            return true;
    }
    return false;
}

static bool claim(uint32_t ctx)
{
    if (nclaims == capclaims) {
        size_t cap = capclaims ? 2 * capclaims : 8;
        uint32_t *p = realloc(claims, cap * sizeof *p);
        if (!p)
            return false;
        claims = p;
        capclaims = cap;
    }
    claims[nclaims++] = ctx;
    if (zm.next_ictx < ctx + 2)
        zm.next_ictx = ctx + 2;
    return true;
}

static void unclaim(uint32_t ctx)
{
    for (size_t i = 0; i < nclaims; i++)
        if (claims[i] == ctx) {
            claims[i] = claims[--nclaims];
            return;
        }
}

/*
 * Claims the k contexts ctx, ctx + 2, ... (an intercommunicator needs two:
 * its own and its local group's). True if any is taken (then none is claimed).
 */
static bool claim_range(uint32_t ctx, int k)
{
    if (ctx < ZM_ICTX_BASE)
        return true;
    for (int i = 0; i < k; i++)
        if (ctx_taken(ctx + 2 * (uint32_t)i))
            return true;
    for (int i = 0; i < k; i++)
        if (!claim(ctx + 2 * (uint32_t)i)) {
            while (i-- > 0)
                unclaim(ctx + 2 * (uint32_t)i);
            return true;
        }
    return false;
}

static void unclaim_range(uint32_t ctx, int k)
{
    for (int i = 0; i < k; i++)
        unclaim(ctx + 2 * (uint32_t)i);
}

/*
 * One MAX agreement of *in into *out over the parent (reduce to rank 0, then
 * the channel): 1 when done. For an intercommunicator, rank 0 of each group
 * swaps its group's result with the other's in between, so both groups end
 * with the maximum over all members.
 */
static int agree_round(struct nbc *n, struct idup *s, uint32_t *in, uint32_t *out)
{
    int rc;
    if (n->phase < 2) {
        if ((rc = reduce_rounds(n, in, out, 0)) != 1)
            return rc;
        n->phase = 2;
        free(n->parts);
        free(n->parts_mem);
        n->parts = NULL;
        n->parts_mem = NULL;
    }
    if (n->phase == 2 && s->ic && n->c->rank == 0) {
        int tag = zm_coll_tag(s->ic_seq);
        if ((rc = reqs_reserve(n, 2)) != MPI_SUCCESS ||
            (rc = zm_isend(out, 1, MPI_UINT32_T, 0, tag, s->ic, s->ic->ctx + 1, ZM_MODE_STD,
                           &n->reqs[n->nreqs++])) != MPI_SUCCESS ||
            (rc = zm_irecv(&s->remote_value, 1, MPI_UINT32_T, 0, tag, s->ic, s->ic->ctx + 1,
                           &n->reqs[n->nreqs++])) != MPI_SUCCESS)
            return fail(rc);
        n->phase = 3;
    }
    if (n->phase == 3) {
        if ((rc = round_done(n)) != 1)
            return rc;
        if (s->remote_value > *out)
            *out = s->remote_value;
        n->phase = 4;
    }
    rc = bcast_step(n, 0, out, 1, n->t);
    if (rc != 1)
        return rc;
    zm_bcast_op_free(n->bc);
    n->bc = NULL;
    n->phase = 0;
    return 1;
}

static int idup_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    struct idup *s = n->mem[0];
    int rc;
    for (;;) {
        if (s->stage == 0) {
            s->prop = zm.next_ictx > s->floor ? zm.next_ictx : s->floor;
            s->stage = 1;
        }
        if (s->stage == 1) {
            if ((rc = agree_round(n, s, &s->prop, &s->result)) != 1)
                return rc;
            s->taken = claim_range(s->result, s->ic ? 2 : 1);
            s->claimed = !s->taken;
            s->stage = 2;
        }
        if ((rc = agree_round(n, s, &s->taken, &s->any_taken)) != 1)
            return rc;
        if (s->any_taken) {               /* someone has it: all try again above it */
            if (s->claimed)
                unclaim_range(s->result, s->ic ? 2 : 1);
            s->claimed = false;
            s->floor = s->result + (s->ic ? 4 : 2);
            s->stage = 0;
            continue;
        }
        struct zm_comm *c = s->ic ? s->ic : n->c;
        MPI_Comm h;
        c->group->refs++;
        if (s->ic) {
            c->remote->refs++;
            rc = zm_inter_make(c->group, c->remote, s->result, c, true, &h);
        } else if ((rc = zm_comm_make_deferred(c->group, s->result, c, &h)) != MPI_SUCCESS) {
            zm_group_unref(c->group);
        }
        unclaim_range(s->result, s->ic ? 2 : 1);   /* the communicators hold them now */
        s->claimed = false;
        if (rc)
            return fail(rc);
        if ((rc = zm_comm_dup_extras(c, zm_comm_get(h))) != MPI_SUCCESS) {
            MPI_Comm_free(&h);
            h = MPI_COMM_NULL;
        }
        *s->out = h;
        return rc ? fail(rc) : 1;
    }
}

ZIMP_MPI_API int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request)
{
    const char *fn = "MPI_Comm_idup";
    struct zm_comm *c;
    ZM_CHECK_INIT(fn);
    int rc = zm_comm_check(comm, &c);
    if (!rc && (!newcomm || !request))
        rc = MPI_ERR_ARG;
    if (rc)
        return zm_raise(comm, rc, fn);
    if (!c->remote && c->size == 1) {
        /* a single member: a blocking MPI_Comm_dup (it waits for nobody), then a completed request */
        if ((rc = MPI_Comm_dup(comm, newcomm)) != MPI_SUCCESS)
            return rc;
        struct zm_req *r = zm_req_new(ZM_R_NBC, c);
        if (!r)
            return zm_raise(comm, MPI_ERR_NO_MEM, fn);
        zm_set_status(&r->status, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_SUCCESS, 0);
        zm_req_complete(r, MPI_SUCCESS);
        *request = r->handle;
        return MPI_SUCCESS;
    }
    struct nbc *n = NULL;
    struct zm_comm *ic = c->remote ? c : NULL;
    if ((rc = nbc_enter(ic ? ic->local->handle : comm, request, &c, &n)) != MPI_SUCCESS)
        return zm_raise(comm, rc, fn);
    struct idup *s = calloc(1, sizeof *s);
    n->mem[0] = s;
    if (s && ic) {
        s->ic = ic;
        s->ic_seq = ic->coll_seq++;
    }
    if (!s || (rc = take_type(n, MPI_UINT32_T, 1)) != MPI_SUCCESS)
        return nbc_refuse(comm, n, s ? rc : MPI_ERR_NO_MEM, fn);
    n->op = zm_op_get(MPI_MAX);
    zm_op_ref(n->op);
    s->out = newcomm;
    *newcomm = MPI_COMM_NULL;
    return nbc_launch(comm, n, idup_step, request, fn);
}
