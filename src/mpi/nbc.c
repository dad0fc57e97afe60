/*
 * Non-blocking collectives: MPI_Ibarrier and MPI_Ibcast. Each is a request
 * with a step function that the progress engine calls (from MPI_Test, the
 * waits and every other blocking call) until it reports completion.
 */
#include "mpi_int.h"

#include <stdlib.h>

struct nbc {
    struct zm_comm *c;
    uint32_t seq;
    int phase;
    struct zm_req **reqs; /* Ibarrier at rank 0: one receive per member */
    struct zm_bcast_op *bc;
};

static void nbc_list_remove(struct zm_req *r)
{
    for (struct zm_req **p = &zm.nbc_head; *p; p = &(*p)->next_nbc)
        if (*p == r) {
            *p = r->next_nbc;
            return;
        }
}

static void nbc_free(struct nbc *n)
{
    if (!n)
        return;
    if (n->reqs)
        for (int i = 0; i < n->c->size; i++)
            if (n->reqs[i]) {
                if (!n->reqs[i]->complete && n->reqs[i]->kind == ZM_R_RECV)
                    zm_cancel_recv(n->reqs[i]);   /* out of the posted queue before it goes */
                zm_req_free(n->reqs[i]);
            }
    free(n->reqs);
    zm_bcast_op_free(n->bc);
    free(n);
}

/* Runs one step of r; on completion takes it off the list and completes it. */
static void nbc_run(struct zm_req *r)
{
    int rc = r->step(r);
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

static int ibarrier_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    struct zm_comm *c = n->c;
    if (n->phase == 0 && c->rank != 0) {
        struct zm_req *tok;
        int rc = zm_isend(NULL, 0, MPI_BYTE, 0, zm_coll_tag(n->seq), c, c->ctx + 1, ZM_MODE_STD, &tok);
        if (rc)
            return fail(rc);
        n->reqs = calloc((size_t)c->size, sizeof *n->reqs);
        if (!n->reqs)
            return fail(MPI_ERR_NO_MEM);
        n->reqs[0] = tok;
        n->phase = 1;
    }
    if (n->phase == 1) {                  /* tokens in (rank 0) or ours out (the others) */
        for (int i = 0; i < c->size; i++) {
            if (n->reqs[i] && !n->reqs[i]->complete)
                return 0;
            if (n->reqs[i] && n->reqs[i]->status.MPI_ERROR)
                return fail(n->reqs[i]->status.MPI_ERROR);
        }
        n->phase = 2;
    }
    return zm_bcast_op_step(n->bc);
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
    *n = calloc(1, sizeof **n);
    if (!*n)
        return MPI_ERR_NO_MEM;
    (*n)->c = *c;
    (*n)->seq = (*c)->coll_seq++;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    struct zm_comm *c;
    struct nbc *n = NULL;                 /* set by nbc_enter when it succeeds */
    int rc = nbc_enter(comm, request, &c, &n);
    if (rc)
        return zm_raise(comm, rc, "MPI_Ibarrier");
    n->bc = zm_bcast_op_new(c, n->seq, 0, NULL, 0, zm_type_get(MPI_BYTE));
    if (!n->bc)
        rc = MPI_ERR_NO_MEM;
    if (!rc && c->rank == 0) {
        n->reqs = calloc((size_t)c->size, sizeof *n->reqs);
        rc = n->reqs ? MPI_SUCCESS : MPI_ERR_NO_MEM;
        for (int i = 1; i < c->size && !rc; i++)
            rc = zm_irecv(NULL, 0, MPI_BYTE, i, zm_coll_tag(n->seq), c, c->ctx + 1, &n->reqs[i]);
        n->phase = 1;
    }
    struct zm_req *r = rc ? NULL : nbc_start(c, ibarrier_step, n);
    if (!r) {
        nbc_free(n);
        return zm_raise(comm, rc ? rc : MPI_ERR_NO_MEM, "MPI_Ibarrier");
    }
    *request = r->handle;
    return MPI_SUCCESS;
}

static int ibcast_step(struct zm_req *r)
{
    struct nbc *n = r->nbc;
    return zm_bcast_op_step(n->bc);
}

ZIMP_MPI_API int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                            MPI_Request *request)
{
    struct zm_comm *c;
    struct nbc *n = NULL;                 /* set by nbc_enter when it succeeds */
    struct zm_type *t = zm_type_get(datatype);
    if (!t || !t->committed || count < 0)
        return zm_raise(comm, t ? MPI_ERR_COUNT : MPI_ERR_TYPE, "MPI_Ibcast");
    int rc = nbc_enter(comm, request, &c, &n);
    if (rc)
        return zm_raise(comm, rc, "MPI_Ibcast");
    if (root < 0 || root >= c->size) {
        nbc_free(n);
        return zm_raise(comm, MPI_ERR_ROOT, "MPI_Ibcast");
    }
    n->bc = zm_bcast_op_new(c, n->seq, root, buffer, count, t);
    struct zm_req *r = n->bc ? nbc_start(c, ibcast_step, n) : NULL;
    if (!r) {
        nbc_free(n);
        return zm_raise(comm, MPI_ERR_NO_MEM, "MPI_Ibcast");
    }
    *request = r->handle;
    return MPI_SUCCESS;
}
