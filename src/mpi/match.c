/*
 * Matching. Every data message names (context, source, tag); a posted
 * receive takes the first arrival that matches it, wildcards included, and
 * an arrival nobody waits for goes to the unexpected queue. Both queues are
 * FIFO and the inbox delivers one sender's messages in its sending order
 * (zimp's total order), so messages between a pair never overtake.
 *
 * Large messages: an RTS names the sender's buffer and the receiver copies
 * once with process_vm_readv, then answers FIN; without CMA the sender
 * streams the bytes as STREAM + CHUNK messages, which follow each other in
 * that sender's order (see docs/mpi.md).
 */
#include "mpi_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/*
 * A named source is checked by its world rank too: the context that
 * MPI_Comm_create_group's members agree on a context id with is shared by
 * every group created from the same parent, so two such calls over
 * different groups, running at once, send "rank 0" and "rank 1" of
 * different groups on one context (MPICH's comm_group_rand).
 */
static bool source_matches(int peer, int peer_world, const struct zm_hdr *h)
{
    return peer == MPI_ANY_SOURCE || (peer == h->src && (peer_world < 0 || peer_world == h->src_world));
}

static bool matches(const struct zm_req *r, const struct zm_hdr *h)
{
    return r->ctx == h->ctx && source_matches(r->peer, r->peer_world, h) &&
           (r->tag == MPI_ANY_TAG || r->tag == h->tag);
}

/* ---- the posted-receive queue ---- */

static void posted_append(struct zm_req *r)
{
    r->next = NULL;
    if (zm.posted_tail)
        zm.posted_tail->next = r;
    else
        zm.posted_head = r;
    zm.posted_tail = r;
}

static bool posted_remove(struct zm_req *r)
{
    struct zm_req *prev = NULL;
    for (struct zm_req *q = zm.posted_head; q; prev = q, q = q->next) {
        if (q != r)
            continue;
        if (prev)
            prev->next = q->next;
        else
            zm.posted_head = q->next;
        if (zm.posted_tail == q)
            zm.posted_tail = prev;
        q->next = NULL;
        return true;
    }
    return false;
}

static struct zm_req *posted_take(const struct zm_hdr *h)
{
    for (struct zm_req *q = zm.posted_head; q; q = q->next)
        if (matches(q, h)) {
            posted_remove(q);
            return q;
        }
    return NULL;
}

/* ---- the unexpected queue ---- */

/*
 * Unexpected messages come and go one per message when a sender runs ahead
 * of its receiver's posted receives: their records are kept for reuse (the
 * payload area is not cleared), and short payloads live in the record.
 */
static struct zm_spares unexp_spares = { sizeof(struct zm_unexp), offsetof(struct zm_unexp, small), 0, { 0 } };

void zm_unexp_free(struct zm_unexp *u)
{
    if (!u)
        return;
    if (u->data != u->small)
        free(u->data);
    zm_spare_put(&unexp_spares, u);
}

static void unexp_append(struct zm_unexp *u)
{
    u->next = NULL;
    if (zm.unexp_tail)
        zm.unexp_tail->next = u;
    else
        zm.unexp_head = u;
    zm.unexp_tail = u;
}

/* Takes u (whose predecessor is prev, NULL for the head) out of the unexpected queue. */
static void unexp_unlink(struct zm_unexp *prev, struct zm_unexp *u)
{
    if (prev)
        prev->next = u->next;
    else
        zm.unexp_head = u->next;
    if (zm.unexp_tail == u)
        zm.unexp_tail = prev;
    u->next = NULL;
}

struct zm_unexp *zm_find_unexp(uint32_t ctx, int src, int src_world, int tag, bool remove)
{
    struct zm_unexp *prev = NULL;
    for (struct zm_unexp *u = zm.unexp_head; u; prev = u, u = u->next) {
        if (u->h.ctx != ctx || !source_matches(src, src_world, &u->h) ||
            (tag != MPI_ANY_TAG && tag != u->h.tag))
            continue;
        if (remove)
            unexp_unlink(prev, u);
        return u;
    }
    return NULL;
}

/* ---- putting bytes into a receive ---- */

/* Starts delivery of a message described by h into r: status, truncation. */
static void req_begin(struct zm_req *r, const struct zm_hdr *h)
{
    size_t n = h->len < r->cap ? (size_t)h->len : r->cap;
    zm_set_status(&r->status, h->src, h->tag, h->len > r->cap ? MPI_ERR_TRUNCATE : MPI_SUCCESS, n);
    zm_cursor_init(&r->cur, r->type, r->buf, (size_t)r->count);
    r->got = 0;
    if (h->flags & ZM_F_SYNC) {
        struct zm_hdr ack = { .kind = ZM_M_ACK, .src_world = zm.rank, .cookie = h->cookie };
        zm_queue_ctl(h->src_world, &ack);
    }
}

/* The next n bytes of the message; what goes beyond the buffer is dropped. */
static void req_put(struct zm_req *r, const void *data, size_t n)
{
    size_t room = r->got < r->cap ? r->cap - r->got : 0;
    zm_cursor_unpack(&r->cur, data, n < room ? n : room);
    r->got += n;
}

static void req_finish(struct zm_req *r)
{
    zm_req_complete(r, r->status.MPI_ERROR);
}

/* RTS: copy the sender's bytes once (into a contiguous buffer, with its help: coop.c), tell it we are done. */
static void req_rendezvous(struct zm_req *r, const struct zm_hdr *h, const struct zm_rts *rts)
{
    size_t n = h->len < r->cap ? (size_t)h->len : r->cap;
    int rc = MPI_SUCCESS;
    char *dst = zm_contig_ptr(r->type, r->buf, (size_t)r->count);
    if (n && dst) {
        rc = zm_coop_read(h, rts, dst, n);
    } else if (n) {
        char *tmp = malloc(n);
        rc = tmp ? zm_cma_read(h->src_world, rts->addr, tmp, n) : MPI_ERR_NO_MEM;
        if (rc == MPI_SUCCESS)
            zm_cursor_unpack(&r->cur, tmp, n);
        free(tmp);
    }
    struct zm_hdr fin = { .kind = ZM_M_FIN, .src_world = zm.rank, .cookie = h->cookie };
    if (rc != MPI_SUCCESS)
        fin.flags = ZM_F_ERROR;
    zm_queue_ctl(h->src_world, &fin);
    if (rc != MPI_SUCCESS)
        r->status.MPI_ERROR = rc;
    req_finish(r);
}

static void stream_expect(int src_world, struct zm_req *r, struct zm_unexp *u, size_t left)
{
    struct zm_peer *p = &zm.peers[src_world];
    p->stream_req = r;
    p->stream_unexp = u;
    p->stream_left = left;
}

/* A data message (EAGER, RTS, STREAM) met a receive. */
static void deliver_to_req(struct zm_req *r, const struct zm_hdr *h, const void *payload, size_t plen)
{
    req_begin(r, h);
    if (h->kind == ZM_M_RTS) {
        struct zm_rts rts;
        memcpy(&rts, payload, sizeof rts);
        req_rendezvous(r, h, &rts);
        return;
    }
    char *dst = h->kind == ZM_M_EAGER ? zm_contig_ptr(r->type, r->buf, (size_t)r->count) : NULL;
    if (dst) {                            /* the whole message, into one run of bytes */
        memcpy(dst, payload, plen < r->cap ? plen : r->cap);
        req_finish(r);
        return;
    }
    req_put(r, payload, plen);
    if (h->kind == ZM_M_STREAM && plen < h->len) {
        stream_expect(h->src_world, r, NULL, (size_t)h->len - plen);
        return;
    }
    req_finish(r);
}

static void add_unexp(const struct zm_hdr *h, const void *payload, size_t plen)
{
    struct zm_unexp *u = zm_spare_get(&unexp_spares);
    if (!u)
        zm_abort_job(MPI_ERR_NO_MEM, "out of memory queueing an unexpected message");
    u->h = *h;
    if (h->kind == ZM_M_RTS) {
        memcpy(&u->rts, payload, sizeof u->rts);
        u->complete = true;
    } else {
        size_t want = h->kind == ZM_M_STREAM ? (size_t)h->len : plen;
        u->data = want <= sizeof u->small ? u->small : malloc(want);
        if (!u->data)
            zm_abort_job(MPI_ERR_NO_MEM, "out of memory queueing an unexpected message");
        memcpy(u->data, payload, plen);
        u->have = plen;
        u->complete = plen == want;
        if (!u->complete)
            stream_expect(h->src_world, NULL, u, want - plen);
    }
    unexp_append(u);
}

/* The next chunk of the stream its sender is sending us. */
static void deliver_chunk(const struct zm_hdr *h, const void *payload, size_t plen)
{
    if (h->src_world < 0 || h->src_world >= zm.size)
        return;
    struct zm_peer *p = &zm.peers[h->src_world];
    if (plen > p->stream_left)
        plen = p->stream_left;            /* never write past what the first chunk announced */
    p->stream_left -= plen;
    if (p->stream_req) {
        struct zm_req *r = p->stream_req;
        req_put(r, payload, plen);
        if (p->stream_left == 0) {
            p->stream_req = NULL;
            req_finish(r);
        }
    } else if (p->stream_unexp) {
        struct zm_unexp *u = p->stream_unexp;
        memcpy((char *)u->data + u->have, payload, plen);
        u->have += plen;
        if (p->stream_left == 0) {
            u->complete = true;
            p->stream_unexp = NULL;
        }
    }
}

static void deliver_ctl(const struct zm_hdr *h)
{
    struct zm_req *r = zm_req_by_cookie(h->cookie);
    if (!r || r->kind != ZM_R_SEND || r->complete)
        return;
    if (!r->tx_queued) {                  /* else chunks of it still go out from tmp */
        free(r->tmp);
        r->tmp = NULL;
    }
    zm_req_complete(r, (h->flags & ZM_F_ERROR) ? MPI_ERR_OTHER : MPI_SUCCESS);
}

/*
 * Send cancellation, the receiver's side: a message from h's sender with
 * h's cookie that no receive has matched (whole, in the unexpected queue)
 * is dropped, and the answer says whether it was. Messages between a pair
 * arrive in order, so the message itself was handled before this request.
 */
static void deliver_cancel(const struct zm_hdr *h)
{
    struct zm_unexp *prev = NULL, *u = zm.unexp_head;
    for (; u; prev = u, u = u->next)
        if (u->h.src_world == h->src_world && u->h.cookie == h->cookie && u->complete)
            break;
    struct zm_hdr reply = { .kind = ZM_M_CANCEL_REPLY, .src_world = zm.rank, .cookie = h->cookie };
    if (u) {
        unexp_unlink(prev, u);
        zm_unexp_free(u);
        reply.flags = ZM_F_CANCELLED;
    }
    if (h->src_world >= 0 && h->src_world < zm.size)
        zm_queue_ctl(h->src_world, &reply);
}

/* Send cancellation, the sender's side: the receiver's answer. */
static void deliver_cancel_reply(const struct zm_hdr *h)
{
    struct zm_req *r = zm_req_by_cookie(h->cookie);
    bool cancelled = (h->flags & ZM_F_CANCELLED) != 0;
    if (!r || r->bsend_carrier)           /* a buffered send's: the program's request, */
        zm_bsend_cancel_answer(h->cookie, cancelled);    /* before r completes (that frees r) */
    if (r && r->kind == ZM_R_SEND && r->cancel_pending)
        zm_cancel_answered(r, cancelled);
}

void zm_deliver(const struct zm_hdr *h, const void *payload, size_t plen)
{
    switch (h->kind) {
    case ZM_M_CANCEL:
        deliver_cancel(h);
        return;
    case ZM_M_CANCEL_REPLY:
        deliver_cancel_reply(h);
        return;
    case ZM_M_HELLO:
    case ZM_M_GO:
        zm_startup_msg(h, payload, plen);
        return;
    case ZM_M_NUDGE:                      /* it woke us: that was all */
        return;
    case ZM_M_CTS:
        zm_coop_cts(h, payload, plen);
        return;
    case ZM_M_FIN:
    case ZM_M_ACK:
        deliver_ctl(h);
        return;
    case ZM_M_CHUNK:
        deliver_chunk(h, payload, plen);
        return;
    case ZM_M_EAGER:
    case ZM_M_STREAM:
    case ZM_M_RTS:
        if (h->kind == ZM_M_RTS && plen < sizeof(struct zm_rts))
            return;
        if (h->kind == ZM_M_EAGER && plen != h->len)
            return;                       /* malformed: the length must be the payload's */
        break;
    default:
        return;
    }
    struct zm_req *r = posted_take(h);
    if (r)
        deliver_to_req(r, h, payload, plen);
    else
        add_unexp(h, payload, plen);
}

/* A receive takes an unexpected message (removed from the queue by the caller). */
void zm_recv_from_unexp(struct zm_req *r, struct zm_unexp *u)
{
    req_begin(r, &u->h);
    if (u->h.kind == ZM_M_RTS) {
        req_rendezvous(r, &u->h, &u->rts);
    } else {
        req_put(r, u->data, u->have);
        if (!u->complete && zm_peer_dead(u->h.src_world)) {
            /* Its sender died before the rest came: it never will. */
            struct zm_peer *p = &zm.peers[u->h.src_world];
            p->stream_unexp = NULL;
            p->stream_left = 0;
            r->status.MPI_ERROR = MPIX_ERR_PROC_FAILED;
            zm_req_complete(r, MPIX_ERR_PROC_FAILED);
        } else if (!u->complete) {
            /* The rest of the stream goes straight into this receive. */
            struct zm_peer *p = &zm.peers[u->h.src_world];
            stream_expect(u->h.src_world, r, NULL, p->stream_left);
        } else {
            req_finish(r);
        }
    }
    zm_unexp_free(u);
}

void zm_post_recv(struct zm_req *r)
{
    struct zm_unexp *u = zm_find_unexp(r->ctx, r->peer, r->peer_world, r->tag, true);
    if (u)
        zm_recv_from_unexp(r, u);
    else
        posted_append(r);
}

bool zm_cancel_recv(struct zm_req *r)
{
    return posted_remove(r);
}

/* Fails every pending request that waits on world rank w (which died). */
void zm_fail_dead(int w)
{
    struct zm_peer *p = &zm.peers[w];
    if (p->stream_req) {
        p->stream_req->status.MPI_ERROR = MPIX_ERR_PROC_FAILED;
        zm_req_complete(p->stream_req, MPIX_ERR_PROC_FAILED);
        p->stream_req = NULL;
    }
    /*
     * Receives still waiting are in the posted queue (blocking ones too,
     * which have no handle); a matched one has its data here already.
     */
    for (struct zm_req *r = zm.posted_head, *next; r; r = next) {
        next = r->next;
        bool depends = r->peer_world == w;
        if (r->peer == MPI_ANY_SOURCE && r->comm &&
            zm_group_rank_of_world(r->comm->remote ? r->comm->remote : r->comm->group, w) != MPI_UNDEFINED)
            depends = true;
        if (depends && posted_remove(r))
            zm_req_complete(r, MPIX_ERR_PROC_FAILED);
    }
    for (unsigned i = 1; i < zm_reqs.len; i++) {
        struct zm_req *r = zm_reqs.items[i];
        if (!r || r->complete || !r->active || r->kind != ZM_R_SEND || r->peer_world != w)
            continue;
        zm_req_complete(r, MPIX_ERR_PROC_FAILED);
    }
}
