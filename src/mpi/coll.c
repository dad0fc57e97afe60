/*
 * Collectives. Data that every member needs (Bcast, the results of
 * Barrier, Allreduce, Allgather(v)) goes through the communicator's
 * one-to-many channel: written once, read by all. Data that flows to or
 * from one rank (Gather, Scatter, Reduce's contributions, Alltoall) uses
 * point-to-point messages on the communicator's collective context, tagged
 * with the collective's sequence number so overlapping collectives (a
 * pending Ibarrier) never mix.
 *
 * Reductions run in rank order (a0 op a1 op ... op an-1) at rank 0 or the
 * root, so non-commutative user operators get the order MPI specifies.
 */
#include "mpi_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

/*
 * Every blocking collective on an intracommunicator starts here. `lead` is
 * the rank whose early start helps it most (its root, or rank 0 for those
 * that go through rank 0; -1 for none): the first collective after a
 * barrier tells the next barrier on the communicator whom to release first
 * (zm_shm_barrier). Every member calls the same collectives in the same
 * order, so every member makes the same choice.
 */
static int coll_enter(MPI_Comm comm, struct zm_comm **c, uint32_t *seq, int lead)
{
    if (!zm.initialized || zm.finalized)
        return MPI_ERR_OTHER;
    int rc = zm_comm_check(comm, c);
    if (rc)
        return rc;
    if ((*c)->remote)
        return MPI_ERR_COMM;              /* no collectives on intercommunicators */
    *seq = (*c)->coll_seq++;
    if ((*c)->bar_watch) {
        (*c)->bar_watch = false;
        (*c)->bar_lead = lead >= 0 && lead < (*c)->size ? lead + 1 : 0;
    }
    zm_check_deaths(false);
    for (int i = 0; i < (*c)->size; i++)
        if (zm_peer_dead((*c)->group->world[i]))
            return MPIX_ERR_PROC_FAILED;
    return zm_bcast_setup(*c);            /* a no-op but on a communicator from MPI_Comm_idup */
}

static int csend(struct zm_comm *c, const void *buf, int count, MPI_Datatype dt, int dest, uint32_t seq)
{
    return zm_send_blocking(buf, count, dt, dest, zm_coll_tag(seq), c, c->ctx + 1, ZM_MODE_STD);
}

static int crecv(struct zm_comm *c, void *buf, int count, MPI_Datatype dt, int src, uint32_t seq)
{
    return zm_recv_blocking(buf, count, dt, src, zm_coll_tag(seq), c, c->ctx + 1, MPI_STATUS_IGNORE);
}

static int post_send(struct zm_comm *c, const void *buf, int count, MPI_Datatype dt, int dest, uint32_t seq,
                     struct zm_req **r)
{
    return zm_isend(buf, count, dt, dest, zm_coll_tag(seq), c, c->ctx + 1, ZM_MODE_STD, r);
}

static int post_recv(struct zm_comm *c, void *buf, int count, MPI_Datatype dt, int src, uint32_t seq,
                     struct zm_req **r)
{
    return zm_irecv(buf, count, dt, src, zm_coll_tag(seq), c, c->ctx + 1, r);
}

/* Waits for and frees n requests (NULL entries skipped); the first error. */
static int wait_reqs(struct zm_req **r, int n)
{
    int err = MPI_SUCCESS;
    for (int i = 0; i < n; i++)
        if (r[i]) {
            int rc = zm_wait_free(r[i], MPI_STATUS_IGNORE);
            if (rc && !err)
                err = rc;
        }
    return err;
}

static struct zm_type *type_of(MPI_Datatype dt, int count, int *rc)
{
    struct zm_type *t = zm_type_get(dt);
    if (!t || !t->committed)
        *rc = MPI_ERR_TYPE;
    else if (count < 0)
        *rc = MPI_ERR_COUNT;
    return t;
}

static char *at(const void *buf, const struct zm_type *t, MPI_Aint index)
{
    return (char *)buf + index * t->extent;
}

/* ---- Barrier and Bcast ---- */

static int barrier_impl(struct zm_comm *c, uint32_t seq)
{
    if (c->size == 1)
        return MPI_SUCCESS;
    int shm = zm_shm_barrier(c);
    if (shm != MPI_ERR_UNSUPPORTED_OPERATION)
        return shm;
    struct zm_type *none = zm_type_get(MPI_BYTE);
    if (c->rank != 0) {
        int rc = csend(c, NULL, 0, MPI_BYTE, 0, seq);
        return rc ? rc : zm_bcast_recv(c, seq, 0, NULL, 0, none);
    }
    for (int r = 1; r < c->size; r++) {
        int rc = crecv(c, NULL, 0, MPI_BYTE, r, seq);
        if (rc)
            return rc;
    }
    return zm_bcast_send(c, seq, NULL, 0, none);
}

int zm_barrier(struct zm_comm *c)
{
    uint32_t seq = c->coll_seq++;
    int rc = zm_bcast_setup(c);
    return rc ? rc : barrier_impl(c, seq);
}

/*
 * Intercommunicators: the two sides meet through their leaders (rank 0 of
 * each local group) with point-to-point messages on the intercommunicator's
 * collective context; each side then uses its local intracommunicator.
 */
static bool inter_enter(MPI_Comm comm, struct zm_comm **c, uint32_t *seq)
{
    if (!zm.initialized || zm.finalized || zm_comm_check(comm, c) || !(*c)->remote)
        return false;
    *seq = (*c)->coll_seq++;
    return true;
}

/* Barrier: a local barrier, the leaders' exchange, a local barrier. */
static int inter_barrier(struct zm_comm *ic, uint32_t seq)
{
    int rc = zm_barrier(ic->local);
    if (!rc && ic->rank == 0) {
        struct zm_req *r;
        rc = post_recv(ic, NULL, 0, MPI_BYTE, 0, seq, &r);
        int src = rc ? rc : csend(ic, NULL, 0, MPI_BYTE, 0, seq);
        int rrc = rc ? rc : zm_wait_free(r, MPI_STATUS_IGNORE);
        rc = src ? src : rrc;
    }
    return rc ? rc : zm_barrier(ic->local);
}

/* Bcast: the root (MPI_ROOT) sends to the other side's leader, which broadcasts there. */
static int inter_bcast(struct zm_comm *ic, uint32_t seq, void *buf, int count, MPI_Datatype dt, int root)
{
    int rc = MPI_SUCCESS;
    type_of(dt, count, &rc);
    if (rc || root == MPI_PROC_NULL)
        return rc;
    if (root == MPI_ROOT)
        return csend(ic, buf, count, dt, 0, seq);
    if (root < 0 || root >= ic->remote->size)
        return MPI_ERR_ROOT;
    if (ic->rank == 0 && (rc = crecv(ic, buf, count, dt, root, seq)) != MPI_SUCCESS)
        return rc;
    return MPI_Bcast(buf, count, dt, 0, ic->local->handle);
}

ZIMP_MPI_API int MPI_Barrier(MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Barrier", comm, -1, 0, MPI_BYTE);
    struct zm_comm *c;
    uint32_t seq;
    if (inter_enter(comm, &c, &seq)) {
        int irc = inter_barrier(c, seq);
        return irc ? zm_raise(comm, irc, "MPI_Barrier") : MPI_SUCCESS;
    }
    int rc = coll_enter(comm, &c, &seq, -1);
    if (!rc)
        rc = barrier_impl(c, seq);
    return rc ? zm_raise(comm, rc, "MPI_Barrier") : MPI_SUCCESS;
}

static int bcast_impl(struct zm_comm *c, uint32_t seq, void *buf, int count, struct zm_type *t, int root)
{
    return c->rank == root ? zm_bcast_send(c, seq, buf, count, t) : zm_bcast_recv(c, seq, root, buf, count, t);
}

ZIMP_MPI_API int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Bcast", comm, root, count, datatype);
    struct zm_comm *c;
    uint32_t seq;
    if (inter_enter(comm, &c, &seq)) {
        int irc = inter_bcast(c, seq, buffer, count, datatype, root);
        return irc ? zm_raise(comm, irc, "MPI_Bcast") : MPI_SUCCESS;
    }
    int rc = coll_enter(comm, &c, &seq, root);
    struct zm_type *t = rc ? NULL : type_of(datatype, count, &rc);
    if (!rc && (root < 0 || root >= c->size))
        rc = MPI_ERR_ROOT;
    if (!rc)
        rc = bcast_impl(c, seq, buffer, count, t, root);
    return rc ? zm_raise(comm, rc, "MPI_Bcast") : MPI_SUCCESS;
}

/* ---- reductions ---- */

/*
 * The reduction of every member's sendbuf, in rank order, into recvbuf at
 * root. acc = a[n-1]; then acc = a[i] op acc for i = n-2 .. 0.
 */
static int reduce_impl(struct zm_comm *c, uint32_t seq, const void *sendbuf, void *recvbuf, int count,
                       MPI_Datatype dt, struct zm_type *t, struct zm_op *op, int root)
{
    if (c->rank != root)
        return csend(c, sendbuf, count, dt, root, seq);
    char *acc, *tmp;
    void *acc_mem = zm_layout_alloc(t, (size_t)count, &acc);
    void *tmp_mem = zm_layout_alloc(t, (size_t)count, &tmp);
    int rc = acc_mem && tmp_mem ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    for (int i = c->size - 1; i >= 0 && !rc; i--) {
        char *dst = i == c->size - 1 ? acc : tmp;
        if (i == root)
            zm_copy_typed(sendbuf, t, (size_t)count, dst, t, (size_t)count);
        else
            rc = crecv(c, dst, count, dt, i, seq);
        if (!rc && i != c->size - 1)
            rc = zm_op_apply(op, tmp, acc, count, dt);
    }
    if (!rc)
        zm_copy_typed(acc, t, (size_t)count, recvbuf, t, (size_t)count);
    free(acc_mem);
    free(tmp_mem);
    return rc;
}

static int reduce_args(MPI_Comm comm, MPI_Datatype dt, int count, MPI_Op op, int lead, struct zm_comm **c,
                       uint32_t *seq, struct zm_type **t, struct zm_op **o)
{
    int rc = coll_enter(comm, c, seq, lead);
    if (rc)
        return rc;
    *t = type_of(dt, count, &rc);
    if (rc)
        return rc;
    *o = zm_op_get(op);
    return *o ? zm_op_check(*o, dt) : MPI_ERR_OP;
}

ZIMP_MPI_API int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                            int root, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Reduce", comm, root, count, datatype);
    struct zm_comm *c;
    uint32_t seq;
    struct zm_type *t;
    struct zm_op *o;
    int rc = reduce_args(comm, datatype, count, op, root, &c, &seq, &t, &o);
    if (!rc && (root < 0 || root >= c->size))
        rc = MPI_ERR_ROOT;
    if (!rc) {
        if (sendbuf == MPI_IN_PLACE)
            sendbuf = c->rank == root ? recvbuf : NULL;
        rc = reduce_impl(c, seq, sendbuf, recvbuf, count, datatype, t, o, root);
    }
    return rc ? zm_raise(comm, rc, "MPI_Reduce") : MPI_SUCCESS;
}

/*
 * Allreduce on an intercommunicator: each side reduces to its leader, the
 * leaders swap their results, each leader broadcasts the other side's result
 * on its side (every member gets the reduction of the remote group's data).
 */
static int inter_allreduce(struct zm_comm *ic, uint32_t seq, const void *sendbuf, void *recvbuf, int count,
                           MPI_Datatype dt, MPI_Op op)
{
    int rc = MPI_SUCCESS;
    struct zm_type *t = type_of(dt, count, &rc);
    if (rc)
        return rc;
    if (sendbuf == MPI_IN_PLACE)
        return MPI_ERR_BUFFER;
    struct zm_op *o = zm_op_get(op);
    if (!o || (rc = zm_op_check(o, dt)) != MPI_SUCCESS)
        return o ? rc : MPI_ERR_OP;
    char *mine = NULL;
    void *mem = ic->rank == 0 ? zm_layout_alloc(t, (size_t)count, &mine) : NULL;
    if (ic->rank == 0 && !mem)
        return MPI_ERR_NO_MEM;
    rc = MPI_Reduce(sendbuf, mine, count, dt, op, 0, ic->local->handle);
    if (!rc && ic->rank == 0) {
        struct zm_req *r;
        rc = post_recv(ic, recvbuf, count, dt, 0, seq, &r);
        int src = rc ? rc : csend(ic, mine, count, dt, 0, seq);
        int rrc = rc ? rc : zm_wait_free(r, MPI_STATUS_IGNORE);
        rc = src ? src : rrc;
    }
    free(mem);
    return rc ? rc : MPI_Bcast(recvbuf, count, dt, 0, ic->local->handle);
}

ZIMP_MPI_API int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                               MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Allreduce", comm, -1, count, datatype);
    struct zm_comm *c;
    uint32_t seq;
    struct zm_type *t;
    struct zm_op *o;
    if (inter_enter(comm, &c, &seq)) {
        int irc = inter_allreduce(c, seq, sendbuf, recvbuf, count, datatype, op);
        return irc ? zm_raise(comm, irc, "MPI_Allreduce") : MPI_SUCCESS;
    }
    int rc = reduce_args(comm, datatype, count, op, 0, &c, &seq, &t, &o);
    if (!rc) {
        if (sendbuf == MPI_IN_PLACE)
            sendbuf = recvbuf;
        rc = reduce_impl(c, seq, sendbuf, recvbuf, count, datatype, t, o, 0);
    }
    if (!rc)
        rc = bcast_impl(c, seq, recvbuf, count, t, 0);
    return rc ? zm_raise(comm, rc, "MPI_Allreduce") : MPI_SUCCESS;
}

int zm_allreduce_max_u32(struct zm_comm *c, uint32_t *v)
{
    uint32_t seq = c->coll_seq++;
    uint32_t in = *v;
    struct zm_op *max = zm_op_get(MPI_MAX);
    struct zm_type *t = zm_type_get(MPI_UINT32_T);
    int rc = zm_bcast_setup(c);
    if (rc)
        return rc;
    rc = reduce_impl(c, seq, &in, v, 1, MPI_UINT32_T, t, max, 0);
    return rc ? rc : bcast_impl(c, seq, v, 1, t, 0);
}

/* Reduction to rank 0 into a scratch buffer, then each rank's part sent back. */
static int reduce_scatter_impl(struct zm_comm *c, uint32_t seq, const void *sendbuf, void *recvbuf,
                               const int *counts, MPI_Datatype dt, struct zm_type *t, struct zm_op *o)
{
    int total = 0;
    for (int r = 0; r < c->size; r++) {
        if (counts[r] < 0)
            return MPI_ERR_COUNT;
        total += counts[r];
    }
    if (sendbuf == MPI_IN_PLACE)
        sendbuf = recvbuf;
    char *all = NULL;
    void *mem = NULL;
    if (c->rank == 0 && !(mem = zm_layout_alloc(t, (size_t)total, &all)))
        return MPI_ERR_NO_MEM;
    int rc = reduce_impl(c, seq, sendbuf, all, total, dt, t, o, 0);
    if (!rc && c->rank == 0) {
        for (int r = 1, off = counts[0]; r < c->size && !rc; off += counts[r], r++)
            rc = csend(c, at(all, t, off), counts[r], dt, r, seq);
        if (!rc)
            zm_copy_typed(all, t, (size_t)counts[0], recvbuf, t, (size_t)counts[0]);
    } else if (!rc) {
        rc = crecv(c, recvbuf, counts[c->rank], dt, 0, seq);
    }
    free(mem);
    return rc;
}

ZIMP_MPI_API int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Reduce_scatter_block", comm, -1, recvcount, datatype);
    struct zm_comm *c;
    uint32_t seq;
    struct zm_type *t;
    struct zm_op *o;
    int rc = reduce_args(comm, datatype, recvcount, op, 0, &c, &seq, &t, &o);
    int *counts = rc ? NULL : malloc(sizeof(int) * (size_t)c->size);
    if (!rc && !counts)
        rc = MPI_ERR_NO_MEM;
    if (!rc) {
        for (int r = 0; r < c->size; r++)
            counts[r] = recvcount;
        rc = reduce_scatter_impl(c, seq, sendbuf, recvbuf, counts, datatype, t, o);
    }
    free(counts);
    return rc ? zm_raise(comm, rc, "MPI_Reduce_scatter_block") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Reduce_scatter", comm, -1, 0, MPI_DATATYPE_NULL);
    struct zm_comm *c;
    uint32_t seq;
    struct zm_type *t;
    struct zm_op *o;
    int rc = reduce_args(comm, datatype, 0, op, 0, &c, &seq, &t, &o);
    if (!rc && !recvcounts)
        rc = MPI_ERR_ARG;
    if (!rc)
        rc = reduce_scatter_impl(c, seq, sendbuf, recvbuf, recvcounts, datatype, t, o);
    return rc ? zm_raise(comm, rc, "MPI_Reduce_scatter") : MPI_SUCCESS;
}

/* Inclusive (Scan) or exclusive (Exscan) prefix reduction along the ranks. */
static int scan_impl(struct zm_comm *c, uint32_t seq, const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype dt, struct zm_type *t, struct zm_op *o, bool inclusive)
{
    char *mine, *prefix;
    void *mine_mem = zm_layout_alloc(t, (size_t)count, &mine);
    void *prefix_mem = zm_layout_alloc(t, (size_t)count, &prefix);
    int rc = mine_mem && prefix_mem ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    if (!rc)
        zm_copy_typed(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, t, (size_t)count, mine, t, (size_t)count);
    /* mine becomes a0 op ... op a(rank): what rank+1 needs. */
    if (!rc && c->rank > 0) {
        rc = crecv(c, prefix, count, dt, c->rank - 1, seq);
        if (!rc)
            rc = zm_op_apply(o, prefix, mine, count, dt);
        if (!rc && !inclusive)
            zm_copy_typed(prefix, t, (size_t)count, recvbuf, t, (size_t)count);
    }
    if (!rc && c->rank + 1 < c->size)
        rc = csend(c, mine, count, dt, c->rank + 1, seq);
    if (!rc && inclusive)
        zm_copy_typed(mine, t, (size_t)count, recvbuf, t, (size_t)count);
    free(mine_mem);
    free(prefix_mem);
    return rc;
}

ZIMP_MPI_API int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Scan", comm, -1, count, datatype);
    struct zm_comm *c;
    uint32_t seq;
    struct zm_type *t;
    struct zm_op *o;
    int rc = reduce_args(comm, datatype, count, op, -1, &c, &seq, &t, &o);
    if (!rc)
        rc = scan_impl(c, seq, sendbuf, recvbuf, count, datatype, t, o, true);
    return rc ? zm_raise(comm, rc, "MPI_Scan") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                            MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Exscan", comm, -1, count, datatype);
    struct zm_comm *c;
    uint32_t seq;
    struct zm_type *t;
    struct zm_op *o;
    int rc = reduce_args(comm, datatype, count, op, -1, &c, &seq, &t, &o);
    if (!rc)
        rc = scan_impl(c, seq, sendbuf, recvbuf, count, datatype, t, o, false);
    return rc ? zm_raise(comm, rc, "MPI_Exscan") : MPI_SUCCESS;
}

/* ---- gather and scatter ---- */

/* Root receives counts[r] elements of rt at displs[r] from every rank r. */
static int gatherv_impl(struct zm_comm *c, uint32_t seq, const void *sendbuf, int scount, MPI_Datatype st,
                        void *recvbuf, const int *counts, const int *displs, MPI_Datatype rt, int root)
{
    int rc = MPI_SUCCESS;
    if (c->rank != root)
        return csend(c, sendbuf, scount, st, root, seq);
    struct zm_type *rtt = zm_type_get(rt), *stt = zm_type_get(st);
    if (!rtt || (sendbuf != MPI_IN_PLACE && !stt))
        return MPI_ERR_TYPE;
    struct zm_req **reqs = calloc((size_t)c->size, sizeof *reqs);
    if (!reqs)
        return MPI_ERR_NO_MEM;
    for (int r = 0; r < c->size && !rc; r++) {
        if (r == root) {
            if (sendbuf != MPI_IN_PLACE)
                zm_copy_typed(sendbuf, stt, (size_t)scount, at(recvbuf, rtt, displs[r]), rtt, (size_t)counts[r]);
            continue;
        }
        rc = post_recv(c, at(recvbuf, rtt, displs[r]), counts[r], rt, r, seq, &reqs[r]);
    }
    int wrc = wait_reqs(reqs, c->size);
    free(reqs);
    return rc ? rc : wrc;
}

/* counts[r] = n and displs[r] = r * n: the regular case as a v-call. */
static int regular(int size, int n, int **counts, int **displs)
{
    *counts = malloc(sizeof(int) * (size_t)size);
    *displs = malloc(sizeof(int) * (size_t)size);
    if (!*counts || !*displs) {
        free(*counts);
        free(*displs);
        *counts = *displs = NULL;         /* the caller frees them too */
        return MPI_ERR_NO_MEM;
    }
    for (int r = 0; r < size; r++) {
        (*counts)[r] = n;
        (*displs)[r] = r * n;
    }
    return MPI_SUCCESS;
}

static int root_check(struct zm_comm *c, int root)
{
    return root >= 0 && root < c->size ? MPI_SUCCESS : MPI_ERR_ROOT;
}

ZIMP_MPI_API int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                            int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Gather", comm, root, sendcount, sendtype);
    struct zm_comm *c;
    uint32_t seq;
    int *counts = NULL, *displs = NULL;
    int rc = coll_enter(comm, &c, &seq, root);
    if (!rc)
        rc = root_check(c, root);
    if (!rc)
        rc = regular(c->size, recvcount, &counts, &displs);
    if (!rc)
        rc = gatherv_impl(c, seq, sendbuf, sendcount, sendtype, recvbuf, counts, displs, recvtype, root);
    free(counts);
    free(displs);
    return rc ? zm_raise(comm, rc, "MPI_Gather") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                             const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                             MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Gatherv", comm, root, sendcount, sendtype);
    struct zm_comm *c;
    uint32_t seq;
    int rc = coll_enter(comm, &c, &seq, root);
    if (!rc)
        rc = root_check(c, root);
    if (!rc && c->rank == root && (!recvcounts || !displs))
        rc = MPI_ERR_ARG;
    if (!rc)
        rc = gatherv_impl(c, seq, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root);
    return rc ? zm_raise(comm, rc, "MPI_Gatherv") : MPI_SUCCESS;
}

static int scatterv_impl(struct zm_comm *c, uint32_t seq, const void *sendbuf, const int *counts,
                         const int *displs, MPI_Datatype st, void *recvbuf, int rcount, MPI_Datatype rt, int root)
{
    if (c->rank != root)
        return crecv(c, recvbuf, rcount, rt, root, seq);
    struct zm_type *stt = zm_type_get(st), *rtt = zm_type_get(rt);
    if (!stt || (recvbuf != MPI_IN_PLACE && !rtt))
        return MPI_ERR_TYPE;
    struct zm_req **reqs = calloc((size_t)c->size, sizeof *reqs);
    if (!reqs)
        return MPI_ERR_NO_MEM;
    int rc = MPI_SUCCESS;
    for (int r = 0; r < c->size && !rc; r++) {
        if (r == root) {
            if (recvbuf != MPI_IN_PLACE)
                zm_copy_typed(at(sendbuf, stt, displs[r]), stt, (size_t)counts[r], recvbuf, rtt, (size_t)rcount);
            continue;
        }
        rc = post_send(c, at(sendbuf, stt, displs[r]), counts[r], st, r, seq, &reqs[r]);
    }
    int wrc = wait_reqs(reqs, c->size);
    free(reqs);
    return rc ? rc : wrc;
}

ZIMP_MPI_API int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                             int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Scatter", comm, root, recvcount, recvtype);
    struct zm_comm *c;
    uint32_t seq;
    int *counts = NULL, *displs = NULL;
    int rc = coll_enter(comm, &c, &seq, root);
    if (!rc)
        rc = root_check(c, root);
    if (!rc)
        rc = regular(c->size, sendcount, &counts, &displs);
    if (!rc)
        rc = scatterv_impl(c, seq, sendbuf, counts, displs, sendtype, recvbuf, recvcount, recvtype, root);
    free(counts);
    free(displs);
    return rc ? zm_raise(comm, rc, "MPI_Scatter") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                              MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                              int root, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Scatterv", comm, root, recvcount, recvtype);
    struct zm_comm *c;
    uint32_t seq;
    int rc = coll_enter(comm, &c, &seq, root);
    if (!rc)
        rc = root_check(c, root);
    if (!rc && c->rank == root && (!sendcounts || !displs))
        rc = MPI_ERR_ARG;
    if (!rc)
        rc = scatterv_impl(c, seq, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root);
    return rc ? zm_raise(comm, rc, "MPI_Scatterv") : MPI_SUCCESS;
}

/* ---- allgather ---- */

/*
 * Gather at rank 0, then one broadcast of the whole result, described as an
 * indexed type over recvtype so that displacements are honoured.
 */
static int allgatherv_impl(struct zm_comm *c, uint32_t seq, const void *sendbuf, int scount, MPI_Datatype st,
                           void *recvbuf, const int *counts, const int *displs, MPI_Datatype rt)
{
    struct zm_type *rtt = zm_type_get(rt);
    if (!rtt)
        return MPI_ERR_TYPE;
    if (sendbuf == MPI_IN_PLACE) {
        sendbuf = at(recvbuf, rtt, displs[c->rank]);
        scount = counts[c->rank];
        st = rt;
        if (c->rank == 0)
            sendbuf = MPI_IN_PLACE;
    }
    int rc = gatherv_impl(c, seq, sendbuf, scount, st, recvbuf, counts, displs, rt, 0);
    if (rc)
        return rc;
    MPI_Datatype all;
    rc = MPI_Type_indexed(c->size, counts, displs, rt, &all);
    if (rc)
        return rc;
    struct zm_type *t = zm_type_get(all);
    t->committed = true;
    rc = bcast_impl(c, seq, recvbuf, 1, t, 0);
    MPI_Type_free(&all);
    return rc;
}

ZIMP_MPI_API int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                               int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Allgather", comm, -1, sendcount, sendtype);
    struct zm_comm *c;
    uint32_t seq;
    int *counts = NULL, *displs = NULL;
    int rc = coll_enter(comm, &c, &seq, 0);
    if (!rc)
        rc = regular(c->size, recvcount, &counts, &displs);
    if (!rc)
        rc = allgatherv_impl(c, seq, sendbuf, sendcount, sendtype, recvbuf, counts, displs, recvtype);
    free(counts);
    free(displs);
    return rc ? zm_raise(comm, rc, "MPI_Allgather") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                                MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Allgatherv", comm, -1, sendcount, sendtype);
    struct zm_comm *c;
    uint32_t seq;
    int rc = coll_enter(comm, &c, &seq, 0);
    if (!rc && (!recvcounts || !displs))
        rc = MPI_ERR_ARG;
    if (!rc)
        rc = allgatherv_impl(c, seq, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype);
    return rc ? zm_raise(comm, rc, "MPI_Allgatherv") : MPI_SUCCESS;
}

int zm_allgather_ints(struct zm_comm *c, const int *mine, int n, int *all)
{
    uint32_t seq = c->coll_seq++;
    int *counts, *displs;
    int rc = zm_bcast_setup(c);
    if (rc)
        return rc;
    rc = regular(c->size, n, &counts, &displs);
    if (!rc)
        rc = allgatherv_impl(c, seq, mine, n, MPI_INT, all, counts, displs, MPI_INT);
    free(counts);
    free(displs);
    return rc;
}

/* ---- all to all ---- */

static int alltoallv_impl(struct zm_comm *c, uint32_t seq, const void *sendbuf, const int *scounts,
                          const int *sdispls, MPI_Datatype st, void *recvbuf, const int *rcounts,
                          const int *rdispls, MPI_Datatype rt)
{
    struct zm_type *stt = zm_type_get(st), *rtt = zm_type_get(rt);
    if (!rtt || (sendbuf != MPI_IN_PLACE && !stt))
        return MPI_ERR_TYPE;
    void *copy = NULL;
    if (sendbuf == MPI_IN_PLACE) {         /* send from a copy of what recvbuf holds now */
        MPI_Aint hi = 0;
        for (int r = 0; r < c->size; r++)
            if ((rdispls[r] + rcounts[r]) * rtt->extent > hi)
                hi = (rdispls[r] + rcounts[r]) * rtt->extent;
        copy = malloc((size_t)hi + 1);
        if (!copy)
            return MPI_ERR_NO_MEM;
        memcpy(copy, recvbuf, (size_t)hi);
        sendbuf = copy;
        scounts = rcounts;
        sdispls = rdispls;
        st = rt;
        stt = rtt;
    }
    struct zm_req **reqs = calloc(2 * (size_t)c->size, sizeof *reqs);
    int rc = reqs ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    for (int k = 1; k < c->size && !rc; k++) {   /* pairwise order spreads the load */
        int from = (c->rank - k + c->size) % c->size, to = (c->rank + k) % c->size;
        rc = post_recv(c, at(recvbuf, rtt, rdispls[from]), rcounts[from], rt, from, seq, &reqs[2 * k]);
        if (!rc)
            rc = post_send(c, at(sendbuf, stt, sdispls[to]), scounts[to], st, to, seq, &reqs[2 * k + 1]);
    }
    if (!rc)
        zm_copy_typed(at(sendbuf, stt, sdispls[c->rank]), stt, (size_t)scounts[c->rank],
                      at(recvbuf, rtt, rdispls[c->rank]), rtt, (size_t)rcounts[c->rank]);
    int wrc = reqs ? wait_reqs(reqs, 2 * c->size) : MPI_SUCCESS;
    free(reqs);
    free(copy);
    return rc ? rc : wrc;
}

ZIMP_MPI_API int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                              int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Alltoall", comm, -1, sendcount, sendtype);
    struct zm_comm *c;
    uint32_t seq;
    int *sc = NULL, *sd = NULL, *rcn = NULL, *rd = NULL;
    int rc = coll_enter(comm, &c, &seq, -1);
    if (!rc)
        rc = regular(c->size, sendcount, &sc, &sd);
    if (!rc)
        rc = regular(c->size, recvcount, &rcn, &rd);
    if (!rc)
        rc = alltoallv_impl(c, seq, sendbuf, sc, sd, sendtype, recvbuf, rcn, rd, recvtype);
    free(sc);
    free(sd);
    free(rcn);
    free(rd);
    return rc ? zm_raise(comm, rc, "MPI_Alltoall") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                               MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                               const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Alltoallv", comm, -1, 0, MPI_DATATYPE_NULL);
    struct zm_comm *c;
    uint32_t seq;
    int rc = coll_enter(comm, &c, &seq, -1);
    if (!rc && (!recvcounts || !rdispls || (sendbuf != MPI_IN_PLACE && (!sendcounts || !sdispls))))
        rc = MPI_ERR_ARG;
    if (!rc)
        rc = alltoallv_impl(c, seq, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                            recvtype);
    return rc ? zm_raise(comm, rc, "MPI_Alltoallv") : MPI_SUCCESS;
}

/* ---- Neighborhood collectives (Cartesian topologies) ---- */

/*
 * Neighbor k of a Cartesian communicator is, for dimension d = k / 2, the
 * source (k even) or destination (k odd) of MPI_Cart_shift(d, 1): MPI's
 * order. What a rank sends towards neighbor k arrives at that neighbor as
 * coming from its neighbor k ^ 1 (the sender is on the other side of it).
 * One peer can be several neighbors (a periodic dimension of size 1 or 2),
 * so a message's tag carries the parity of its direction: between one pair,
 * messages of one parity are sent and received in increasing k, and FIFO
 * order on (source, tag) pairs each with its slot.
 */
struct nbr_side {
    const char *buf;           /* NULL: nothing (a send of MPI_IN_PLACE is refused) */
    const int *counts, *displs;   /* per neighbor (v variants), or NULL */
    int count;                 /* every neighbor's count (counts == NULL) */
    bool same;                 /* every neighbor gets the same block (allgather's send) */
    MPI_Datatype dt;
};

/* Where neighbor k's block is, and its count; MPI_ERR_TYPE or MPI_ERR_COUNT if it is bad. */
static int nbr_block(const struct nbr_side *s, int k, const char **at_out, int *count_out)
{
    int rc = MPI_SUCCESS, count = s->counts ? s->counts[k] : s->count;
    const struct zm_type *t = type_of(s->dt, count, &rc);
    if (rc)
        return rc;
    MPI_Aint index = s->same ? 0 : s->displs ? s->displs[k] : (MPI_Aint)k * count;
    *at_out = s->buf ? at(s->buf, t, index) : NULL;
    *count_out = count;
    return MPI_SUCCESS;
}

static int neighbor_exchange(MPI_Comm comm, const struct nbr_side *snd, const struct nbr_side *rcv,
                             const char *fn)
{
    struct zm_comm *c;
    uint32_t seq;
    int rc = coll_enter(comm, &c, &seq, -1);
    if (rc)
        return zm_raise(comm, rc, fn);
    if (!c->cart)
        return zm_raise(comm, MPI_ERR_TOPOLOGY, fn);
    if (snd->buf == MPI_IN_PLACE || (!rcv->buf && rcv->count))
        return zm_raise(comm, MPI_ERR_BUFFER, fn);
    int n = 2 * c->cart->ndims;
    int *nb = malloc(sizeof(int) * (size_t)(n ? n : 1));
    struct zm_req **r = calloc((size_t)(2 * n + 1), sizeof *r);
    rc = nb && r ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    for (int d = 0; !rc && d < c->cart->ndims; d++)
        rc = MPI_Cart_shift(comm, d, 1, &nb[2 * d], &nb[2 * d + 1]);
    const char *p;
    int count;
    for (int k = 0; !rc && k < n; k++)       /* every argument checked before anything is posted */
        if (nb[k] != MPI_PROC_NULL && (rc = nbr_block(rcv, k, &p, &count)) == MPI_SUCCESS)
            rc = nbr_block(snd, k, &p, &count);
    /* The tag of what goes towards neighbor k: the call's, with k's direction in bit 29;
     * what comes from neighbor j was sent towards its neighbor j ^ 1. */
    int base = zm_coll_tag(seq);
#define NBR_TAG(k) (base | (((k) & 1) << 29))
    for (int j = 0; !rc && j < n; j++)
        if (nb[j] != MPI_PROC_NULL && (rc = nbr_block(rcv, j, &p, &count)) == MPI_SUCCESS)
            rc = zm_irecv((char *)p, count, rcv->dt, nb[j], NBR_TAG(j ^ 1), c, c->ctx + 1, &r[j]);
    for (int k = 0; !rc && k < n; k++)
        if (nb[k] != MPI_PROC_NULL && (rc = nbr_block(snd, k, &p, &count)) == MPI_SUCCESS)
            rc = zm_isend(p, count, snd->dt, nb[k], NBR_TAG(k), c, c->ctx + 1, ZM_MODE_STD, &r[n + k]);
#undef NBR_TAG
    if (rc)                                   /* what was posted is cancelled or finishes */
        for (int j = 0; r && j < n; j++)
            if (r[j])
                zm_cancel_recv(r[j]);
    int wrc = r ? wait_reqs(r, 2 * n) : MPI_SUCCESS;
    free(nb);
    free(r);
    rc = rc ? rc : wrc;
    return rc ? zm_raise(comm, rc, fn) : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Neighbor_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                       int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Neighbor_alltoall", comm, -1, sendcount, sendtype);
    struct nbr_side s = { .buf = sendbuf, .count = sendcount, .dt = sendtype };
    struct nbr_side r = { .buf = recvbuf, .count = recvcount, .dt = recvtype };
    return neighbor_exchange(comm, &s, &r, "MPI_Neighbor_alltoall");
}

ZIMP_MPI_API int MPI_Neighbor_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                        int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Neighbor_allgather", comm, -1, sendcount, sendtype);
    struct nbr_side s = { .buf = sendbuf, .count = sendcount, .same = true, .dt = sendtype };
    struct nbr_side r = { .buf = recvbuf, .count = recvcount, .dt = recvtype };
    return neighbor_exchange(comm, &s, &r, "MPI_Neighbor_allgather");
}

ZIMP_MPI_API int MPI_Neighbor_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                        MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                                        const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Neighbor_alltoallv", comm, -1, 0, MPI_DATATYPE_NULL);
    if (!sendcounts || !sdispls || !recvcounts || !rdispls)
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Neighbor_alltoallv");
    struct nbr_side s = { .buf = sendbuf, .counts = sendcounts, .displs = sdispls, .dt = sendtype };
    struct nbr_side r = { .buf = recvbuf, .counts = recvcounts, .displs = rdispls, .dt = recvtype };
    return neighbor_exchange(comm, &s, &r, "MPI_Neighbor_alltoallv");
}

ZIMP_MPI_API int MPI_Neighbor_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                         const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                                         MPI_Comm comm)
{
    ZM_TRACE_COLL("MPI_Neighbor_allgatherv", comm, -1, sendcount, sendtype);
    if (!recvcounts || !displs)
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Neighbor_allgatherv");
    struct nbr_side s = { .buf = sendbuf, .count = sendcount, .same = true, .dt = sendtype };
    struct nbr_side r = { .buf = recvbuf, .counts = recvcounts, .displs = displs, .dt = recvtype };
    return neighbor_exchange(comm, &s, &r, "MPI_Neighbor_allgatherv");
}
