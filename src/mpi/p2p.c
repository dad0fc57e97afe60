/*
 * Point-to-point: requests, the send protocols, receives, probes, the
 * wait/test family, persistent requests and buffered sends.
 *
 * Protocol by size (bytes of packed data):
 *   <= eager_max (a slot minus the header): EAGER, one inbox message,
 *      packed by the sender straight into the receiver's slot;
 *   larger, CMA available: RTS naming the sender's buffer; the receiver
 *      copies once (process_vm_readv), from 256 KiB on with the sender's
 *      help (coop.c), and answers FIN;
 *   larger, no CMA: STREAM + CHUNK messages through the inbox.
 * Self-sends are always delivered in place (any size); a buffered one
 * larger than a slot holds its space in the attached buffer until received.
 */
#include "mpi_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct zm_table zm_reqs;
static uint32_t req_serial;
static struct zm_table zm_msgs;          /* MPI_Message handles -> struct zm_unexp */

/* ---- requests ---- */

/* Freed requests are kept for reuse (a window of Isends makes one per message). */
static struct zm_spares req_spares = { sizeof(struct zm_req), sizeof(struct zm_req), 0, { 0 } };

struct zm_req *zm_req_new(enum zm_req_kind kind, struct zm_comm *comm)
{
    struct zm_req *r = zm_spare_get(&req_spares);
    if (!r)
        return NULL;
    int i = zm_table_add(&zm_reqs, r);
    if (i < 0) {
        zm_spare_put(&req_spares, r);
        return NULL;
    }
    r->kind = kind;
    r->handle = (MPI_Request)(ZM_K_REQ | (unsigned)i);
    r->serial = ++req_serial;
    r->active = true;
    r->comm = comm;
    r->peer_world = -1;
    if (comm)
        comm->refs++;
    return r;
}

struct zm_req *zm_req_get(MPI_Request h)
{
    return zm_table_get(&zm_reqs, h, ZM_K_REQ);
}

uint64_t zm_req_cookie(const struct zm_req *r)
{
    return (uint64_t)r->serial << 32 | ((unsigned)r->handle & ZM_INDEX_MASK);
}

struct zm_req *zm_req_by_cookie(uint64_t cookie)
{
    struct zm_req *r = zm_table_get(&zm_reqs, (int)(ZM_K_REQ | (cookie & ZM_INDEX_MASK)), ZM_K_REQ);
    return r && r->serial == (uint32_t)(cookie >> 32) ? r : NULL;
}

/* A generalized request's free_fn, once; its error code. */
static int greq_free(struct zm_req *r)
{
    MPI_Grequest_free_function *fn = r->greq_free;
    r->greq_free = NULL;
    return fn ? fn(r->greq_state) : MPI_SUCCESS;
}

/*
 * A buffered send above a slot: the program's request r completed when its
 * message was copied aside, and r->bsend_link names the message its carrier
 * sent. MPI_Cancel(r) asks the receiver to drop that message, and r, taken
 * back to incomplete, gets the answer here: from the receiver's reply, or,
 * should a live carrier end first (the message was taken), as "not
 * cancelled". The request of the program whose cancel asked about `cookie`:
 */
static struct zm_req *bsend_asker(uint64_t cookie)
{
    for (unsigned i = 1; i < zm_reqs.len; i++) {
        struct zm_req *u = zm_reqs.items[i];
        if (u && u->kind == ZM_R_SEND && !u->bsend_carrier && u->bsend_link == cookie && u->cancel_pending)
            return u;
    }
    return NULL;
}

void zm_bsend_cancel_answer(uint64_t cookie, bool cancelled)
{
    struct zm_req *u = bsend_asker(cookie);
    if (u)
        zm_cancel_answered(u, cancelled);
}

/*
 * The answer to a send's MPI_Cancel: cancelled (the message is never
 * received: the request completes, cancelled) or not (the send stands: a
 * request taken back to incomplete completes again; else its FIN or ACK will).
 */
void zm_cancel_answered(struct zm_req *r, bool cancelled)
{
    r->cancel_pending = false;
    if (cancelled) {
        r->cancelled = true;
        free(r->tmp);
        r->tmp = NULL;
        zm_set_status(&r->status, r->peer, r->tag, MPI_SUCCESS, 0);
        r->status.zimp_cancelled = 1;
        if (!r->complete)
            zm_req_complete(r, MPI_SUCCESS);
    } else if (r->cancel_undone && !r->complete) {
        zm_req_complete(r, MPI_SUCCESS);
    }
}

static bool tx_take_back(struct zm_req *c);

/*
 * MPI_Cancel of send r: asks the receiver about the message `cookie`; r is
 * incomplete until the answer. A message still queued here, none of it
 * sent (tx_take_back), is the receiver's to know nothing of: it is
 * cancelled at once.
 */
static int ask_cancel(struct zm_req *r, uint64_t cookie)
{
    struct zm_hdr h = { .kind = ZM_M_CANCEL, .src_world = zm.rank, .cookie = cookie };
    r->cancel_pending = true;
    r->cancel_undone = r->complete;
    r->complete = false;
    struct zm_req *c = zm_req_by_cookie(cookie);
    if (tx_take_back(c)) {
        if (c == r) {
            zm_cancel_answered(r, true);
        } else {                          /* a buffered send's carrier: it goes, with its space */
            c->cancel_pending = false;
            zm_bsend_cancel_answer(cookie, true);
            zm_req_complete(c, MPI_SUCCESS);
        }
        return MPI_SUCCESS;
    }
    zm_queue_ctl(r->peer_world, &h);
    zm_progress(false);
    return MPI_SUCCESS;
}

void zm_req_free(struct zm_req *r)
{
    if (r->bsend_carrier && r->cancel_pending)
        zm_bsend_cancel_answer(zm_req_cookie(r), false);
    if (r->kind == ZM_R_GREQ)
        greq_free(r);
    if (r->bsend_bytes)
        zm.bsend_used -= r->bsend_bytes;
    if (r->type)
        zm_type_unref(r->type);
    if (r->comm)
        zm_comm_unref(r->comm);
    free(r->tmp);
    zm_table_del(&zm_reqs, r->handle);
    zm_spare_put(&req_spares, r);
}

void zm_req_complete(struct zm_req *r, int error)
{
    if (r->tx_queued) {                   /* still queued: it completes when it leaves (tx_push) */
        r->tx_finish = true;
        r->tx_error = error;
        return;
    }
    if (r->claim)
        zm_coop_retire(r);            /* the receiver is done with the record (coop.c, C3) */
    r->complete = true;
    r->status.MPI_ERROR = error;
    if (r->user_freed && !r->persistent)
        zm_req_free(r);
}

void zm_set_status(MPI_Status *st, int src, int tag, int err, size_t bytes)
{
    st->MPI_SOURCE = src;
    st->MPI_TAG = tag;
    st->MPI_ERROR = err;
    st->zimp_cancelled = 0;
    st->zimp_bytes = (long long)bytes;
}

static bool status_wanted(const MPI_Status *st)
{
    return st && st != MPI_STATUS_IGNORE;
}

static bool req_done(void *arg)
{
    return ((struct zm_req *)arg)->complete;
}

/* ---- argument checks ---- */

static int check_buf(const void *buf, int count, MPI_Datatype dt, struct zm_type **t)
{
    if (count < 0)
        return MPI_ERR_COUNT;
    *t = zm_type_get(dt);
    if (!*t || !(*t)->committed)
        return MPI_ERR_TYPE;
    if (!buf && count > 0 && (*t)->size > 0 && (*t)->true_lb == 0)
        return MPI_ERR_BUFFER;
    return MPI_SUCCESS;
}

static int check_peer(struct zm_comm *c, int peer, bool any_ok)
{
    if (peer == MPI_PROC_NULL || (any_ok && peer == MPI_ANY_SOURCE))
        return MPI_SUCCESS;
    return peer >= 0 && peer < zm_comm_peer_size(c) ? MPI_SUCCESS : MPI_ERR_RANK;
}

static int check_tag(int tag, bool any_ok)
{
    if (any_ok && tag == MPI_ANY_TAG)
        return MPI_SUCCESS;
    return tag >= 0 && tag <= INT_MAX / 2 ? MPI_SUCCESS : MPI_ERR_TAG;
}

/* The arguments of a send, or of a receive (any_ok: MPI_ANY_SOURCE and
 * MPI_ANY_TAG allowed); *t is the buffer's type. An MPI error class. */
static int check_args(const void *buf, int count, MPI_Datatype dt, struct zm_comm *c, int peer, int tag,
                      bool any_ok, struct zm_type **t)
{
    int rc = check_buf(buf, count, dt, t);
    if (!rc)
        rc = check_peer(c, peer, any_ok);
    if (!rc)
        rc = check_tag(tag, any_ok);
    return rc;
}

/* ---- sending ---- */

/* The header of send r's message of `bytes` (sync: the receiver answers with an ACK). */
static struct zm_hdr send_hdr(const struct zm_req *r, size_t bytes, bool sync)
{
    return (struct zm_hdr){ .flags = sync ? ZM_F_SYNC : 0, .tag = r->tag, .src = r->comm->rank,
                            .ctx = r->ctx, .len = bytes, .src_world = zm.rank, .cookie = zm_req_cookie(r) };
}

/*
 * Sends queued per destination. A nonblocking or buffered send must not
 * wait for the receiver (MPI 3.1, 3.4, 3.7), whose inbox may be full, so a
 * send with a request that cannot go at once joins the queue of its
 * destination, and so does every send to that rank after it while the
 * queue is not empty (MPI's order). A message that fits a slot is one
 * EAGER; above a slot, a single-copy rendezvous is its RTS (the receiver's
 * FIN completes it), and without single-copy transfers a STREAM and CHUNKs
 * (the receiver takes the chunks of one stream per sender at a time, in
 * order). Each progress sends the queue on as far as the receiver's inbox
 * has room (zm_wire_try: never waiting). A blocking send without a request
 * waits for the queue first.
 */
static int tx_queued;                     /* ranks whose queue is not empty */

/* Sends what fits of rank `to`'s queue; each send completes once on the wire (a synchronous one at its ACK). */
static void tx_push(int to)
{
    struct zm_peer *p = &zm.peers[to];
    while (p->txq_head) {
        struct zm_req *c = p->txq_head;
        size_t bytes = zm_data_bytes(c->type, c->count);
        const char *src = c->tmp ? c->tmp : zm_contig_ptr(c->type, c->buf, (size_t)c->count);
        bool sync = c->mode == ZM_MODE_SYNC;
        int rc = zm_peer_dead(to) ? MPIX_ERR_PROC_FAILED : MPI_SUCCESS;
        if (rc == MPI_SUCCESS && c->tx_rts && !c->tx_started) {
            struct zm_hdr h = send_hdr(c, bytes, sync);
            h.kind = ZM_M_RTS;
            if (!zm_wire_try(to, &h, &c->tx_rts_msg, sizeof c->tx_rts_msg))
                return;
            c->tx_started = true;
            c->tx_sent = bytes;                /* the receiver reads it: its FIN completes c */
        }
        while (rc == MPI_SUCCESS && (c->tx_sent < bytes || (bytes == 0 && !c->tx_started))) {
            size_t n = bytes - c->tx_sent < zm.eager_max ? bytes - c->tx_sent : zm.eager_max;
            struct zm_hdr h = send_hdr(c, bytes, sync);
            h.kind = bytes <= zm.eager_max ? ZM_M_EAGER : ZM_M_STREAM;
            if (c->tx_started)
                h = (struct zm_hdr){ .kind = ZM_M_CHUNK, .src_world = zm.rank };
            if (!zm_wire_try(to, &h, src ? src + c->tx_sent : NULL, n))
                return;                   /* its inbox is full: the next progress goes on */
            c->tx_started = true;
            c->tx_sent += n;
        }
        p->txq_head = c->tx_next;
        if (!p->txq_head) {
            p->txq_tail = NULL;
            tx_queued--;
        }
        c->tx_queued = false;
        if (c->tx_finish)                 /* its ACK came before its last chunk left, or a death */
            zm_req_complete(c, rc != MPI_SUCCESS ? rc : c->tx_error);
        else if (rc != MPI_SUCCESS || (!sync && !c->tx_rts))
            zm_req_complete(c, rc);       /* a buffered one's space goes back to the attached buffer */
    }
}

bool zm_tx_push_all(void)
{
    for (int to = 0; tx_queued && to < zm.size; to++)
        if (zm.peers && zm.peers[to].txq_head)
            tx_push(to);
    return tx_queued > 0;
}

/* c's bytes in one run: its buffer if contiguous, else packed into c->tmp; NULL if out of memory. */
static const char *tx_bytes(struct zm_req *c, size_t bytes, bool copy)
{
    const char *src = c->tmp ? c->tmp : zm_contig_ptr(c->type, c->buf, (size_t)c->count);
    if (src && !(copy && !c->tmp))
        return src;
    if (!(c->tmp = malloc(bytes ? bytes : 1)))
        return NULL;
    struct zm_cursor cur;
    zm_cursor_init(&cur, c->type, c->buf, (size_t)c->count);
    zm_cursor_pack(&cur, c->tmp, bytes);
    return c->tmp;
}

/* Whether c, which fits a slot, went to rank `to` now: nothing queued before it, room in its inbox. */
static bool send_now(struct zm_req *c, int to, size_t bytes)
{
    if (zm.peers[to].txq_head || zm_peer_dead(to))
        return false;
    const char *src = tx_bytes(c, bytes, false);
    struct zm_hdr h = send_hdr(c, bytes, c->mode == ZM_MODE_SYNC);
    h.kind = ZM_M_EAGER;
    return src && zm_wire_try(to, &h, src, bytes);
}

/*
 * Sends c to rank `to` now if nothing waits for that rank and its inbox has
 * room (a message that fits a slot), else queues it. A message that fits a
 * slot is copied when it waits, as it would have been into the inbox: the
 * program's buffer is read when the call is made, as before there was a
 * queue (a program that changes it early still sends what it had).
 */
static void tx_enqueue(int to, struct zm_req *c, size_t bytes)
{
    struct zm_peer *p = &zm.peers[to];
    bool fits = bytes <= zm.eager_max;
    if (fits && send_now(c, to, bytes)) {
        if (c->mode != ZM_MODE_SYNC)
            zm_req_complete(c, MPI_SUCCESS);       /* a synchronous one: at its ACK */
        return;
    }
    const char *src = tx_bytes(c, bytes, fits);
    if (!src) {
        zm_req_complete(c, MPI_ERR_NO_MEM);
        return;
    }
    if (c->tx_rts) {                      /* the receiver reads src itself (or both copy: coop.c) */
        c->tx_rts_msg = (struct zm_rts){ (uint64_t)(uintptr_t)src, 0, -1 };
        zm_coop_offer(c, bytes, &c->tx_rts_msg);
    }
    c->tx_sent = 0;
    c->tx_started = false;
    c->tx_finish = false;
    c->tx_queued = true;
    c->tx_next = NULL;
    if (p->txq_tail)
        p->txq_tail->tx_next = c;
    else {
        p->txq_head = c;
        tx_queued++;
    }
    p->txq_tail = c;
    tx_push(to);
}

/* Takes send c out of its rank's queue if none of it is on the wire yet: whether it did. */
static bool tx_take_back(struct zm_req *c)
{
    if (!c || c->kind != ZM_R_SEND || c->tx_started || c->peer_world < 0 || c->peer_world == zm.rank)
        return false;
    struct zm_peer *p = &zm.peers[c->peer_world];
    for (struct zm_req *prev = NULL, *q = p->txq_head; q; prev = q, q = q->tx_next) {
        if (q != c)
            continue;
        if (prev)
            prev->tx_next = q->tx_next;
        else
            p->txq_head = q->tx_next;
        if (p->txq_tail == q)
            p->txq_tail = prev;
        if (!p->txq_head)
            tx_queued--;
        q->tx_queued = false;
        return true;
    }
    return false;
}

static bool tx_clear(void *arg)
{
    return !zm.peers[*(int *)arg].txq_head;
}

/* Before data to rank `to`: what is queued to it goes first (it needs the receiver's room). */
static void tx_wait_clear(int to)
{
    if (to >= 0 && to != zm.rank && zm.peers[to].txq_head)
        zm_wait_for(tx_clear, &to);
}

static bool tx_all_clear(void *arg)
{
    (void)arg;
    return !zm_tx_push_all() && !zm_ctl_pending();
}

void zm_tx_flush(void)
{
    if (!tx_all_clear(NULL))
        zm_wait_for(tx_all_clear, NULL);
}

/* Starts the transfer of an active send request (also persistent ones). */
void zm_start_send(struct zm_req *r)
{
    if (r->peer == MPI_PROC_NULL) {
        zm_req_complete(r, MPI_SUCCESS);
        return;
    }
    int to = r->peer_world;
    size_t bytes = zm_data_bytes(r->type, r->count);
    /* Each start of a persistent send is a message of its own: its own cookie, so
     * that a cancel (or a FIN) names this start, not an earlier one still queued. */
    if (r->persistent)
        r->serial = ++req_serial;
    zm_check_deaths_cheap();
    if (zm_peer_dead(to)) {
        zm_req_complete(r, MPIX_ERR_PROC_FAILED);
        return;
    }
    /* To another rank: at once when nothing waits and the inbox has room, else
     * through its queue (a single-copy rendezvous as its RTS). */
    r->tx_rts = bytes > zm.eager_max && zm.cma;
    if (to != zm.rank) {
        tx_enqueue(to, r, bytes);         /* local: progress takes it on */
        return;
    }
    /* To ourselves: delivered in place. A buffered message holds its space until
     * a receive takes it, as a peer's FIN holds it: the receive's ACK completes it. */
    bool sync = r->mode == ZM_MODE_SYNC || r->bsend_bytes;
    struct zm_hdr h = send_hdr(r, bytes, sync);
    h.kind = ZM_M_EAGER;
    struct zm_cursor cur;
    zm_cursor_init(&cur, r->type, r->tmp ? NULL : r->buf, (size_t)r->count);
    if (r->tmp)                           /* a buffered send: already packed */
        zm_cursor_init(&cur, zm_type_get(MPI_BYTE), r->tmp, bytes);
    int rc = zm_wire_send(to, &h, NULL, 0, &cur, bytes);
    if (rc != MPI_SUCCESS || !sync)
        zm_req_complete(r, rc);
}

static int send_prepare(const void *buf, int count, MPI_Datatype dt, int dest, int tag, struct zm_comm *c,
                        uint32_t ctx, enum zm_send_mode mode, struct zm_req **out)
{
    struct zm_type *t;
    int rc = check_args(buf, count, dt, c, dest, tag, false, &t);
    if (rc)
        return rc;
    struct zm_req *r = zm_req_new(ZM_R_SEND, c);
    if (!r)
        return MPI_ERR_NO_MEM;
    zm_type_ref(t);
    r->type = t;
    r->dtype = dt;
    r->buf = (void *)buf;
    r->count = count;
    r->peer = dest;
    r->peer_world = dest == MPI_PROC_NULL ? -1 : zm_comm_world_rank(c, dest);
    r->tag = tag;
    r->ctx = ctx;
    r->mode = mode;
    *out = r;
    return MPI_SUCCESS;
}

/*
 * A buffered send larger than a slot: copy it aside, charge the attached
 * buffer. Without room, the inbox is progressed once first: space comes
 * back with FINs that only progress reads, so a program that retries after
 * MPI_ERR_BUFFER, calling nothing else, would otherwise never get it. One
 * that fits a slot (`charge` false: it uses no attached buffer, as when it
 * goes out at once) is only copied.
 */
static int bsend_copy(struct zm_req *r, size_t bytes, bool charge)
{
    size_t need = bytes + MPI_BSEND_OVERHEAD;
    if (charge && zm.bsend_buf && need > zm.bsend_size - zm.bsend_used)
        zm_progress(false);
    if (charge && (!zm.bsend_buf || need > zm.bsend_size - zm.bsend_used))
        return MPI_ERR_BUFFER;
    if (!tx_bytes(r, bytes, true))
        return MPI_ERR_NO_MEM;
    if (charge) {
        r->bsend_bytes = need;
        zm.bsend_used += need;
    }
    return MPI_SUCCESS;
}

/*
 * Starts a buffered send: one that fits a slot goes out at once if it can;
 * else, and for larger ones, buffered mode is local (MPI 3.1, 3.4): r
 * completes as soon as the data is copied aside (and, above a slot,
 * charged to the attached buffer). A request of our own, with no handle the program
 * knows, carries the message on and gives the space back when it is freed:
 * at the receiver's FIN, the last chunk, or (to ourselves) the ACK of the
 * receive that takes it; MPI_Buffer_detach waits for that. MPI_ERR_BUFFER
 * when the space is not there, to a peer or to ourselves alike.
 */
static int bsend_start(struct zm_req *r, size_t bytes)
{
    bool fits = bytes <= zm.eager_max;
    if (fits && r->peer_world != zm.rank && send_now(r, r->peer_world, bytes)) {
        zm_req_complete(r, MPI_SUCCESS);
        return MPI_SUCCESS;
    }
    struct zm_req *t;
    int rc = send_prepare(r->buf, r->count, r->dtype, r->peer, r->tag, r->comm, r->ctx, r->mode, &t);
    if (rc)
        return rc;
    if ((rc = bsend_copy(t, bytes, !fits)) != MPI_SUCCESS) {
        zm_req_free(t);
        return rc;
    }
    /* MPI_Cancel of r asks about t's message; named before the send, whose
     * progress may deliver answers (an earlier start's must not match). */
    r->bsend_link = zm_req_cookie(t);
    t->bsend_carrier = true;
    zm_start_send(t);
    int err = t->complete ? t->status.MPI_ERROR : MPI_SUCCESS;   /* a dead peer, no memory */
    if (t->complete)
        zm_req_free(t);
    else
        t->user_freed = true;
    zm_req_complete(r, err);
    return MPI_SUCCESS;
}

int zm_isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, struct zm_comm *c,
             uint32_t ctx, enum zm_send_mode mode, struct zm_req **out)
{
    struct zm_req *r;
    int rc = send_prepare(buf, count, dt, dest, tag, c, ctx, mode, &r);
    if (rc)
        return rc;
    size_t bytes = zm_data_bytes(r->type, count);
    if (mode == ZM_MODE_BUFFERED && dest != MPI_PROC_NULL &&
        (bytes > zm.eager_max || r->peer_world != zm.rank)) {
        if ((rc = bsend_start(r, bytes)) != MPI_SUCCESS) {
            zm_req_free(r);
            return rc;
        }
    } else {
        zm_start_send(r);
    }
    *out = r;
    return MPI_SUCCESS;
}

/*
 * A blocking send in standard or ready mode of a message that fits one
 * inbox slot: no request at all. It is complete once it is in the
 * destination's inbox, so nothing can refer to it later (no ACK, no FIN).
 * Anything else (synchronous, buffered, larger, to ourselves) goes through
 * a request. Returns an MPI error class.
 */
int zm_send_blocking(const void *buf, int count, MPI_Datatype dt, int dest, int tag, struct zm_comm *c,
                     uint32_t ctx, enum zm_send_mode mode)
{
    struct zm_type *t;
    int rc = check_args(buf, count, dt, c, dest, tag, false, &t);
    if (rc)
        return rc;
    if (dest == MPI_PROC_NULL)
        return MPI_SUCCESS;
    int to = zm_comm_world_rank(c, dest);
    size_t bytes = zm_data_bytes(t, count);
    if ((mode != ZM_MODE_STD && mode != ZM_MODE_READY) || bytes > zm.eager_max || to == zm.rank) {
        struct zm_req *r;
        rc = zm_isend(buf, count, dt, dest, tag, c, ctx, mode, &r);
        return rc ? rc : zm_wait_free(r, MPI_STATUS_IGNORE);
    }
    zm_check_deaths_cheap();
    if (zm_peer_dead(to))
        return MPIX_ERR_PROC_FAILED;
    tx_wait_clear(to);
    struct zm_hdr h = { .kind = ZM_M_EAGER, .tag = tag, .src = c->rank, .ctx = ctx, .len = bytes,
                        .src_world = zm.rank };
    const char *p = zm_contig_ptr(t, buf, (size_t)count);
    if (p || bytes == 0)
        return zm_wire_send(to, &h, p, bytes, NULL, 0);
    struct zm_cursor cur;
    zm_cursor_init(&cur, t, buf, (size_t)count);
    return zm_wire_send(to, &h, NULL, 0, &cur, bytes);
}

/* ---- receiving ---- */

static int recv_prepare(void *buf, int count, MPI_Datatype dt, int src, int tag, struct zm_comm *c,
                        uint32_t ctx, struct zm_req **out)
{
    struct zm_type *t;
    int rc = check_args(buf, count, dt, c, src, tag, true, &t);
    if (rc)
        return rc;
    struct zm_req *r = zm_req_new(ZM_R_RECV, c);
    if (!r)
        return MPI_ERR_NO_MEM;
    zm_type_ref(t);
    r->type = t;
    r->dtype = dt;
    r->buf = buf;
    r->count = count;
    r->cap = zm_data_bytes(t, count);
    r->peer = src;
    r->peer_world = src >= 0 ? zm_comm_world_rank(c, src) : -1;
    r->tag = tag;
    r->ctx = ctx;
    *out = r;
    return MPI_SUCCESS;
}

/* Posts an active receive request (also persistent ones). */
static void start_recv(struct zm_req *r)
{
    if (r->peer == MPI_PROC_NULL) {
        zm_set_status(&r->status, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0);
        zm_req_complete(r, MPI_SUCCESS);
        return;
    }
    zm_progress(false);
    zm_post_recv(r);
    if (!r->complete && r->peer_world >= 0 && zm_peer_dead(r->peer_world) && zm_cancel_recv(r))
        zm_req_complete(r, MPIX_ERR_PROC_FAILED);
}

/*
 * A blocking receive: its request lives on the stack and never gets a
 * handle (it cannot be named by MPI_Wait or MPI_Cancel, and it is gone
 * before the call returns). It joins the posted queue like any receive, so
 * matching order is the same, and zm_fail_dead finds it there. Returns an
 * MPI error class; *st as MPI_Recv fills it (MPI_ERROR untouched).
 */
int zm_recv_blocking(void *buf, int count, MPI_Datatype dt, int src, int tag, struct zm_comm *c,
                     uint32_t ctx, MPI_Status *st)
{
    struct zm_type *t;
    int rc = check_args(buf, count, dt, c, src, tag, true, &t);
    if (rc)
        return rc;
    struct zm_req r = { .kind = ZM_R_RECV, .active = true, .comm = c, .buf = buf, .count = count,
                        .dtype = dt, .type = t, .cap = zm_data_bytes(t, count), .peer = src,
                        .peer_world = src >= 0 ? zm_comm_world_rank(c, src) : -1, .tag = tag,
                        .ctx = ctx };
    if (src == MPI_PROC_NULL) {
        zm_set_status(&r.status, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0);
        r.complete = true;
    } else {
        zm_post_recv(&r);
        if (!r.complete && r.peer_world >= 0 && zm_peer_dead(r.peer_world) && zm_cancel_recv(&r)) {
            r.status.MPI_ERROR = MPIX_ERR_PROC_FAILED;
            r.complete = true;
        }
    }
    zm_wait_for(req_done, &r);
    if (status_wanted(st)) {
        int err = st->MPI_ERROR;
        *st = r.status;
        st->MPI_ERROR = err;
    }
    return r.status.MPI_ERROR;
}

int zm_irecv(void *buf, int count, MPI_Datatype dt, int src, int tag, struct zm_comm *c,
             uint32_t ctx, struct zm_req **out)
{
    struct zm_req *r;
    int rc = recv_prepare(buf, count, dt, src, tag, c, ctx, &r);
    if (rc)
        return rc;
    start_recv(r);
    *out = r;
    return MPI_SUCCESS;
}

/* ---- completion ---- */

static void copy_status(MPI_Status *dst, const struct zm_req *r, bool with_error)
{
    if (!status_wanted(dst))
        return;
    int err = dst->MPI_ERROR;
    *dst = r->status;
    if (!with_error)
        dst->MPI_ERROR = err;
}

static void empty_status(MPI_Status *st)
{
    if (status_wanted(st)) {
        int err = st->MPI_ERROR;
        zm_set_status(st, MPI_ANY_SOURCE, MPI_ANY_TAG, err, 0);
    }
}

/* A completed request hands its result over: freed, or made inactive if persistent. */
static int req_retire(MPI_Request *h, struct zm_req *r, MPI_Status *st, bool with_error)
{
    if (r->kind == ZM_R_GREQ) {
        /* query_fn fills the status (its return is the request's error), then free_fn */
        zm_set_status(&r->status, MPI_UNDEFINED, MPI_UNDEFINED, MPI_SUCCESS, 0);
        int qrc = r->greq_query(r->greq_state, &r->status);
        r->status.MPI_ERROR = qrc;
        int frc = greq_free(r);
        if (!qrc && frc)
            r->status.MPI_ERROR = frc;
    }
    int err = r->status.MPI_ERROR;
    if (r->kind == ZM_R_SEND && !r->cancelled) {
        MPI_Status s = r->status;         /* a send's status says nothing of the message */
        r->status.MPI_SOURCE = MPI_ANY_SOURCE;
        r->status.MPI_TAG = MPI_ANY_TAG;
        r->status.zimp_bytes = 0;
        copy_status(st, r, with_error);
        r->status = s;
    } else {
        copy_status(st, r, with_error);
    }
    if (r->persistent) {
        r->active = false;
    } else {
        zm_req_free(r);
        *h = MPI_REQUEST_NULL;
    }
    return err;
}

/* Whether *h names a request that can still complete (not NULL, not inactive). */
static int req_lookup(MPI_Request *h, struct zm_req **out)
{
    *out = NULL;
    if (!h)
        return MPI_ERR_REQUEST;
    if (*h == MPI_REQUEST_NULL)
        return MPI_SUCCESS;
    struct zm_req *r = zm_req_get(*h);
    if (!r)
        return MPI_ERR_REQUEST;
    if (r->active)
        *out = r;
    return MPI_SUCCESS;
}

static MPI_Comm req_comm(const struct zm_req *r)
{
    return r && r->comm ? r->comm->handle : MPI_COMM_WORLD;
}

int zm_wait_free(struct zm_req *r, MPI_Status *st)
{
    zm_wait_for(req_done, r);
    MPI_Request h = r->handle;
    return req_retire(&h, r, st, false);   /* single completion: MPI_ERROR untouched */
}

ZIMP_MPI_API int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    struct zm_req *r;
    int rc = req_lookup(request, &r);
    if (rc)
        return zm_raise(MPI_COMM_NULL, rc, "MPI_Wait");
    if (!r) {
        empty_status(status);
        return MPI_SUCCESS;
    }
    MPI_Comm comm = req_comm(r);
    zm_wait_for(req_done, r);
    rc = req_retire(request, r, status, false);
    return rc ? zm_raise(comm, rc, "MPI_Wait") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    struct zm_req *r;
    int rc = req_lookup(request, &r);
    if (rc || !flag)
        return zm_raise(MPI_COMM_NULL, rc ? rc : MPI_ERR_ARG, "MPI_Test");
    if (!r) {
        *flag = 1;
        empty_status(status);
        return MPI_SUCCESS;
    }
    if (!r->complete) {
        zm_progress(false);
        zm_check_deaths(false);
    }
    *flag = r->complete;
    if (!r->complete)
        return MPI_SUCCESS;
    MPI_Comm comm = req_comm(r);
    rc = req_retire(request, r, status, false);
    return rc ? zm_raise(comm, rc, "MPI_Test") : MPI_SUCCESS;
}

struct many {
    int count;
    MPI_Request *reqs;
    bool all;             /* wait for all, or for at least one */
    int next;             /* all: requests below it are complete or inactive */
};

/*
 * Called after every message a wait handles: for "all", it resumes where
 * the last call stopped (a request stays complete until it is retired,
 * after the wait), so a window of n requests costs O(n), not O(n^2).
 */
static bool many_done(void *arg)
{
    struct many *m = arg;
    if (m->all) {
        for (; m->next < m->count; m->next++) {
            MPI_Request h = m->reqs[m->next];
            struct zm_req *r = h == MPI_REQUEST_NULL ? NULL : zm_req_get(h);
            if (r && r->active && !r->complete)
                return false;
        }
        return true;
    }
    int active = 0;
    for (int i = 0; i < m->count; i++) {
        struct zm_req *r = m->reqs[i] == MPI_REQUEST_NULL ? NULL : zm_req_get(m->reqs[i]);
        if (!r || !r->active)
            continue;
        if (r->complete)
            return true;
        active++;
    }
    return active == 0;
}

static int check_array(int count, MPI_Request reqs[])
{
    if (count < 0 || (count > 0 && !reqs))
        return MPI_ERR_ARG;
    for (int i = 0; i < count; i++)
        if (reqs[i] != MPI_REQUEST_NULL && !zm_req_get(reqs[i]))
            return MPI_ERR_REQUEST;
    return MPI_SUCCESS;
}

static MPI_Status *status_at(MPI_Status *array, int i)
{
    return status_wanted(array) ? &array[i] : MPI_STATUS_IGNORE;
}

/* Retires every completed request of the array; the count of errors. */
static int retire_all(int count, MPI_Request reqs[], MPI_Status statuses[], MPI_Comm *err_comm)
{
    int errors = 0;
    for (int i = 0; i < count; i++) {
        struct zm_req *r;
        req_lookup(&reqs[i], &r);
        MPI_Status *st = status_at(statuses, i);
        if (!r) {
            empty_status(st);
            if (status_wanted(st))
                st->MPI_ERROR = MPI_SUCCESS;
            continue;
        }
        MPI_Comm c = req_comm(r);
        if (req_retire(&reqs[i], r, st, true) != MPI_SUCCESS) {
            errors++;
            *err_comm = c;
        }
    }
    return errors;
}

ZIMP_MPI_API int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[])
{
    int rc = check_array(count, array_of_requests);
    if (rc)
        return zm_raise(MPI_COMM_NULL, rc, "MPI_Waitall");
    struct many m = { count, array_of_requests, true, 0 };
    zm_wait_for(many_done, &m);
    MPI_Comm c = MPI_COMM_WORLD;
    if (retire_all(count, array_of_requests, array_of_statuses, &c))
        return zm_raise(c, MPI_ERR_IN_STATUS, "MPI_Waitall");
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                             MPI_Status array_of_statuses[])
{
    int rc = check_array(count, array_of_requests);
    if (rc || !flag)
        return zm_raise(MPI_COMM_NULL, rc ? rc : MPI_ERR_ARG, "MPI_Testall");
    zm_progress(false);
    zm_check_deaths(false);
    struct many m = { count, array_of_requests, true, 0 };
    *flag = many_done(&m);
    if (!*flag)
        return MPI_SUCCESS;
    MPI_Comm c = MPI_COMM_WORLD;
    if (retire_all(count, array_of_requests, array_of_statuses, &c))
        return zm_raise(c, MPI_ERR_IN_STATUS, "MPI_Testall");
    return MPI_SUCCESS;
}

/* The first completed active request of the array, or -1; *active counts them. */
static int first_complete(int count, MPI_Request reqs[], int *active)
{
    *active = 0;
    int found = -1;
    for (int i = 0; i < count; i++) {
        struct zm_req *r = reqs[i] == MPI_REQUEST_NULL ? NULL : zm_req_get(reqs[i]);
        if (!r || !r->active)
            continue;
        ++*active;
        if (r->complete && found < 0)
            found = i;
    }
    return found;
}

static int any_finish(int count, MPI_Request reqs[], int *index, MPI_Status *status, const char *fn)
{
    int active, i = first_complete(count, reqs, &active);
    if (i < 0) {
        *index = MPI_UNDEFINED;
        empty_status(status);
        return MPI_SUCCESS;
    }
    struct zm_req *r = zm_req_get(reqs[i]);
    MPI_Comm c = req_comm(r);
    *index = i;
    int rc = req_retire(&reqs[i], r, status, false);
    return rc ? zm_raise(c, rc, fn) : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status)
{
    int rc = check_array(count, array_of_requests);
    if (rc || !index)
        return zm_raise(MPI_COMM_NULL, rc ? rc : MPI_ERR_ARG, "MPI_Waitany");
    struct many m = { count, array_of_requests, false, 0 };
    zm_wait_for(many_done, &m);
    return any_finish(count, array_of_requests, index, status, "MPI_Waitany");
}

ZIMP_MPI_API int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                             MPI_Status *status)
{
    int rc = check_array(count, array_of_requests);
    if (rc || !index || !flag)
        return zm_raise(MPI_COMM_NULL, rc ? rc : MPI_ERR_ARG, "MPI_Testany");
    zm_progress(false);
    zm_check_deaths(false);
    int active, i = first_complete(count, array_of_requests, &active);
    *flag = i >= 0 || active == 0;
    if (!*flag) {
        *index = MPI_UNDEFINED;
        return MPI_SUCCESS;
    }
    return any_finish(count, array_of_requests, index, status, "MPI_Testany");
}

/* Retires every completed request; *outcount MPI_UNDEFINED if none is active. */
static int some_finish(int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[],
                       const char *fn)
{
    int n = 0, active = 0, errors = 0;
    MPI_Comm c = MPI_COMM_WORLD;
    for (int i = 0; i < incount; i++) {
        struct zm_req *r = reqs[i] == MPI_REQUEST_NULL ? NULL : zm_req_get(reqs[i]);
        if (!r || !r->active)
            continue;
        active++;
        if (!r->complete)
            continue;
        MPI_Comm rc_comm = req_comm(r);
        if (req_retire(&reqs[i], r, status_at(statuses, n), true) != MPI_SUCCESS) {
            errors++;
            c = rc_comm;
        }
        indices[n++] = i;
    }
    *outcount = active ? n : MPI_UNDEFINED;
    return errors ? zm_raise(c, MPI_ERR_IN_STATUS, fn) : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                              int array_of_indices[], MPI_Status array_of_statuses[])
{
    int rc = check_array(incount, array_of_requests);
    if (rc || !outcount || (incount > 0 && !array_of_indices))
        return zm_raise(MPI_COMM_NULL, rc ? rc : MPI_ERR_ARG, "MPI_Waitsome");
    struct many m = { incount, array_of_requests, false, 0 };
    zm_wait_for(many_done, &m);
    return some_finish(incount, array_of_requests, outcount, array_of_indices, array_of_statuses,
                       "MPI_Waitsome");
}

ZIMP_MPI_API int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                              int array_of_indices[], MPI_Status array_of_statuses[])
{
    int rc = check_array(incount, array_of_requests);
    if (rc || !outcount || (incount > 0 && !array_of_indices))
        return zm_raise(MPI_COMM_NULL, rc ? rc : MPI_ERR_ARG, "MPI_Testsome");
    zm_progress(false);
    zm_check_deaths(false);
    return some_finish(incount, array_of_requests, outcount, array_of_indices, array_of_statuses,
                       "MPI_Testsome");
}

ZIMP_MPI_API int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    if (!flag)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Request_get_status");
    struct zm_req *r;
    int rc = req_lookup(&request, &r);
    if (rc)
        return zm_raise(MPI_COMM_NULL, rc, "MPI_Request_get_status");
    if (r && !r->complete) {
        zm_progress(false);
        zm_check_deaths(false);
    }
    *flag = !r || r->complete;
    if (!r)
        empty_status(status);
    else if (r->complete && r->kind == ZM_R_GREQ) {
        /* query_fn even for MPI_STATUS_IGNORE; its error is this call's; no free_fn */
        MPI_Status own;
        int qrc = r->greq_query(r->greq_state, status_wanted(status) ? status : &own);
        if (qrc)
            return zm_raise(MPI_COMM_NULL, qrc, "MPI_Request_get_status");
    } else if (r->complete) {
        copy_status(status, r, false);
    }
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Request_free(MPI_Request *request)
{
    struct zm_req *r = request ? zm_req_get(*request) : NULL;
    if (!r)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_REQUEST, "MPI_Request_free");
    if (r->complete || (r->persistent && !r->active)) {
        zm_req_free(r);
    } else {
        r->persistent = false;            /* an active persistent one ends with this operation */
        r->user_freed = true;
    }
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Cancel(MPI_Request *request)
{
    struct zm_req *r = request ? zm_req_get(*request) : NULL;
    if (!r)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_REQUEST, "MPI_Cancel");
    /* A generalized request: the user's cancel_fn decides (it is told whether it completed). */
    if (r->kind == ZM_R_GREQ) {
        int rc = r->greq_cancel(r->greq_state, r->complete);
        return rc ? zm_raise(MPI_COMM_NULL, rc, "MPI_Cancel") : MPI_SUCCESS;
    }
    /*
     * A buffered send above a slot completed when its message was copied aside:
     * the receiver is asked to drop what its carrier sent (a carrier waiting
     * for its FIN, or one already done), and the request, while active (an
     * inactive persistent one has no message to take back), is incomplete
     * again until the answer (zm_bsend_cancel_answer).
     */
    if (r->kind == ZM_R_SEND && r->active && r->bsend_link && !r->cancelled && !r->cancel_pending &&
        r->peer_world >= 0 && r->status.MPI_ERROR == MPI_SUCCESS && !zm_peer_dead(r->peer_world)) {
        struct zm_req *t = zm_req_by_cookie(r->bsend_link);
        if (!t || !t->cancel_pending) {
            if (t)
                t->cancel_pending = true;
            return ask_cancel(r, r->bsend_link);
        }
    }
    /*
     * A send: its receiver is asked to drop it if no receive matched it yet
     * (match.c); the request completes with the answer, cancelled or not.
     * An eager send already complete is taken back to incomplete until then.
     */
    if (r->kind == ZM_R_SEND && r->active && !r->cancelled && !r->cancel_pending &&
        r->peer != MPI_PROC_NULL && r->peer_world >= 0 && r->status.MPI_ERROR == MPI_SUCCESS &&
        !zm_peer_dead(r->peer_world))
        return ask_cancel(r, zm_req_cookie(r));
    /* A receive can be cancelled until it is matched. */
    if (r->kind == ZM_R_RECV && r->active && !r->complete && zm_cancel_recv(r)) {
        r->cancelled = true;
        zm_set_status(&r->status, r->peer, r->tag, MPI_SUCCESS, 0);
        r->status.zimp_cancelled = 1;
        zm_req_complete(r, MPI_SUCCESS);
        r->status.zimp_cancelled = 1;
    }
    return MPI_SUCCESS;
}

/*
 * Generalized requests: an operation the program runs itself, which MPI's
 * wait and test calls see complete once MPI_Grequest_complete is called.
 */
ZIMP_MPI_API int MPI_Grequest_start(MPI_Grequest_query_function *query_fn, MPI_Grequest_free_function *free_fn,
                                    MPI_Grequest_cancel_function *cancel_fn, void *extra_state,
                                    MPI_Request *request)
{
    ZM_CHECK_INIT("MPI_Grequest_start");
    if (!query_fn || !free_fn || !cancel_fn || !request)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Grequest_start");
    struct zm_req *r = zm_req_new(ZM_R_GREQ, NULL);
    if (!r)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, "MPI_Grequest_start");
    r->greq_query = query_fn;
    r->greq_free = free_fn;
    r->greq_cancel = cancel_fn;
    r->greq_state = extra_state;
    *request = r->handle;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Grequest_complete(MPI_Request request)
{
    struct zm_req *r = zm_req_get(request);
    if (!r || r->kind != ZM_R_GREQ || r->complete)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_REQUEST, "MPI_Grequest_complete");
    zm_req_complete(r, MPI_SUCCESS);      /* freed here (free_fn called) if MPI_Request_free came first */
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Test_cancelled(const MPI_Status *status, int *flag)
{
    if (!status || !flag)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Test_cancelled");
    *flag = status->zimp_cancelled;
    return MPI_SUCCESS;
}

/* ---- the MPI calls ---- */

#define COMM_OR_RAISE(comm, c, fn)                                             \
    do {                                                                       \
        ZM_CHECK_INIT(fn);                                                     \
        int rc_ = zm_comm_check(comm, &c);                                     \
        if (rc_)                                                               \
            return zm_raise(comm, rc_, fn);                                    \
    } while (0)

static int isend_call(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
                      MPI_Request *request, enum zm_send_mode mode, const char *fn)
{
    struct zm_comm *c;
    COMM_OR_RAISE(comm, c, fn);
    if (!request)
        return zm_raise(comm, MPI_ERR_ARG, fn);
    if (zm_tracing(ZIMP_TRACE_DEBUG))
        zm_trace_p2p_typed(ZIMP_TRACE_MPI_SEND, fn, c, dest, tag, count, dt);
    struct zm_req *r;
    int rc = zm_isend(buf, count, dt, dest, tag, c, c->ctx, mode, &r);
    if (rc)
        return zm_raise(comm, rc, fn);
    *request = r->handle;
    return MPI_SUCCESS;
}

static int send_call(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
                     enum zm_send_mode mode, const char *fn)
{
    struct zm_comm *c;
    COMM_OR_RAISE(comm, c, fn);
    if (zm_tracing(ZIMP_TRACE_DEBUG))
        zm_trace_p2p_typed(ZIMP_TRACE_MPI_SEND, fn, c, dest, tag, count, dt);
    int rc = zm_send_blocking(buf, count, dt, dest, tag, c, c->ctx, mode);
    return rc ? zm_raise(comm, rc, fn) : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    return send_call(buf, count, datatype, dest, tag, comm, ZM_MODE_STD, "MPI_Send");
}

ZIMP_MPI_API int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    return send_call(buf, count, datatype, dest, tag, comm, ZM_MODE_SYNC, "MPI_Ssend");
}

ZIMP_MPI_API int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    return send_call(buf, count, datatype, dest, tag, comm, ZM_MODE_READY, "MPI_Rsend");
}

ZIMP_MPI_API int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;   /* set by the call when it succeeds */
    int rc = isend_call(buf, count, datatype, dest, tag, comm, &req, ZM_MODE_BUFFERED, "MPI_Bsend");
    if (rc)
        return rc;
    /* Failed at once (a rank known dead): say so, as every later call would. */
    struct zm_req *r = zm_req_get(req);
    int err = r && r->complete ? r->status.MPI_ERROR : MPI_SUCCESS;
    int rc_free = MPI_Request_free(&req); /* the data is safe in the buffer or delivered */
    return err ? zm_raise(comm, err, "MPI_Bsend") : rc_free;
}

ZIMP_MPI_API int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                           MPI_Request *request)
{
    return isend_call(buf, count, datatype, dest, tag, comm, request, ZM_MODE_STD, "MPI_Isend");
}

ZIMP_MPI_API int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                            MPI_Request *request)
{
    return isend_call(buf, count, datatype, dest, tag, comm, request, ZM_MODE_SYNC, "MPI_Issend");
}

ZIMP_MPI_API int MPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                            MPI_Request *request)
{
    return isend_call(buf, count, datatype, dest, tag, comm, request, ZM_MODE_READY, "MPI_Irsend");
}

ZIMP_MPI_API int MPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                            MPI_Request *request)
{
    return isend_call(buf, count, datatype, dest, tag, comm, request, ZM_MODE_BUFFERED, "MPI_Ibsend");
}

ZIMP_MPI_API int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                           MPI_Request *request)
{
    struct zm_comm *c;
    COMM_OR_RAISE(comm, c, "MPI_Irecv");
    if (!request)
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Irecv");
    if (zm_tracing(ZIMP_TRACE_DEBUG))
        zm_trace_p2p_typed(ZIMP_TRACE_MPI_RECV, "MPI_Irecv", c, source, tag, count, datatype);
    struct zm_req *r;
    int rc = zm_irecv(buf, count, datatype, source, tag, c, c->ctx, &r);
    if (rc)
        return zm_raise(comm, rc, "MPI_Irecv");
    *request = r->handle;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                          MPI_Status *status)
{
    struct zm_comm *c;
    COMM_OR_RAISE(comm, c, "MPI_Recv");
    if (!zm_tracing(ZIMP_TRACE_DEBUG)) {
        int rc = zm_recv_blocking(buf, count, datatype, source, tag, c, c->ctx, status);
        return rc ? zm_raise(comm, rc, "MPI_Recv") : MPI_SUCCESS;
    }
    /* Traced once received: the actual source, tag and length. */
    MPI_Status mine = { 0 }, *st = status_wanted(status) ? status : &mine;
    int rc = zm_recv_blocking(buf, count, datatype, source, tag, c, c->ctx, st);
    if (rc == MPI_SUCCESS)
        zm_trace_p2p(ZIMP_TRACE_MPI_RECV, "MPI_Recv", c, st->MPI_SOURCE, st->MPI_TAG, st->zimp_bytes);
    return rc ? zm_raise(comm, rc, "MPI_Recv") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                              void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                              MPI_Comm comm, MPI_Status *status)
{
    MPI_Request rr, sr;
    int rc = MPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &rr);
    if (rc)
        return rc;
    rc = MPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &sr);
    if (rc) {
        MPI_Cancel(&rr);
        MPI_Request_free(&rr);
        return rc;
    }
    int src = zm_wait_free(zm_req_get(sr), MPI_STATUS_IGNORE);
    int rrc = zm_wait_free(zm_req_get(rr), status);
    rc = src ? src : rrc;
    return rc ? zm_raise(comm, rc, "MPI_Sendrecv") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                                      int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    struct zm_type *t = zm_type_get(datatype);
    if (!t || count < 0)
        return zm_raise(comm, t ? MPI_ERR_COUNT : MPI_ERR_TYPE, "MPI_Sendrecv_replace");
    size_t bytes = zm_data_bytes(t, count);
    if (bytes > INT_MAX)
        return zm_raise(comm, MPI_ERR_COUNT, "MPI_Sendrecv_replace");
    char *tmp = malloc(bytes ? bytes : 1);
    if (!tmp)
        return zm_raise(comm, MPI_ERR_NO_MEM, "MPI_Sendrecv_replace");
    struct zm_cursor c;
    zm_cursor_init(&c, t, buf, (size_t)count);
    zm_cursor_pack(&c, tmp, bytes);
    int rc = MPI_Sendrecv(tmp, (int)bytes, MPI_BYTE, dest, sendtag, buf, count, datatype, source, recvtag,
                          comm, status);
    free(tmp);
    return rc;
}

ZIMP_MPI_API int MPI_Buffer_attach(void *buffer, int size)
{
    if (size < 0 || (!buffer && size > 0))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_BUFFER, "MPI_Buffer_attach");
    if (zm.bsend_buf)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_BUFFER, "MPI_Buffer_attach");
    zm.bsend_buf = buffer;
    zm.bsend_size = (size_t)size;
    zm.bsend_used = 0;
    return MPI_SUCCESS;
}

static bool bsends_done(void *arg)
{
    (void)arg;
    return zm.bsend_used == 0;
}

ZIMP_MPI_API int MPI_Buffer_detach(void *buffer_addr, int *size)
{
    if (!buffer_addr || !size)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Buffer_detach");
    /* Blocks until every buffered message has left (MPI 3.1, 3.6). */
    zm_wait_for(bsends_done, NULL);
    *(void **)buffer_addr = zm.bsend_buf;
    *size = (int)zm.bsend_size;
    zm.bsend_buf = NULL;
    zm.bsend_size = 0;
    return MPI_SUCCESS;
}

/* ---- persistent requests ---- */

static int persistent_init(const void *buf, int count, MPI_Datatype dt, int peer, int tag, MPI_Comm comm,
                           MPI_Request *request, int kind, enum zm_send_mode mode, const char *fn)
{
    struct zm_comm *c;
    COMM_OR_RAISE(comm, c, fn);
    if (!request)
        return zm_raise(comm, MPI_ERR_ARG, fn);
    struct zm_req *r;
    int rc = kind == ZM_R_SEND ? send_prepare(buf, count, dt, peer, tag, c, c->ctx, mode, &r)
                               : recv_prepare((void *)buf, count, dt, peer, tag, c, c->ctx, &r);
    if (rc)
        return zm_raise(comm, rc, fn);
    r->persistent = true;
    r->active = false;
    r->complete = true;
    *request = r->handle;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                               MPI_Request *request)
{
    return persistent_init(buf, count, datatype, dest, tag, comm, request, ZM_R_SEND, ZM_MODE_STD,
                           "MPI_Send_init");
}

ZIMP_MPI_API int MPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                                MPI_Request *request)
{
    return persistent_init(buf, count, datatype, dest, tag, comm, request, ZM_R_SEND, ZM_MODE_SYNC,
                           "MPI_Ssend_init");
}

ZIMP_MPI_API int MPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                                MPI_Request *request)
{
    return persistent_init(buf, count, datatype, dest, tag, comm, request, ZM_R_SEND, ZM_MODE_READY,
                           "MPI_Rsend_init");
}

ZIMP_MPI_API int MPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                                MPI_Request *request)
{
    return persistent_init(buf, count, datatype, dest, tag, comm, request, ZM_R_SEND, ZM_MODE_BUFFERED,
                           "MPI_Bsend_init");
}

ZIMP_MPI_API int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                               MPI_Request *request)
{
    return persistent_init(buf, count, datatype, source, tag, comm, request, ZM_R_RECV, ZM_MODE_STD,
                           "MPI_Recv_init");
}

ZIMP_MPI_API int MPI_Start(MPI_Request *request)
{
    struct zm_req *r = request ? zm_req_get(*request) : NULL;
    if (!r || !r->persistent || r->active)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_REQUEST, "MPI_Start");
    r->active = true;
    r->complete = false;
    r->cancelled = false;
    r->cancel_pending = r->cancel_undone = false;   /* a start's cancel is about that start only */
    r->bsend_link = 0;
    memset(&r->status, 0, sizeof r->status);
    if (zm_tracing(ZIMP_TRACE_DEBUG))
        zm_trace_p2p_typed(r->kind == ZM_R_RECV ? ZIMP_TRACE_MPI_RECV : ZIMP_TRACE_MPI_SEND, "MPI_Start",
                           r->comm, r->peer, r->tag, r->count, r->dtype);
    if (r->kind == ZM_R_RECV) {
        start_recv(r);
        return MPI_SUCCESS;
    }
    size_t bytes = zm_data_bytes(r->type, r->count);
    free(r->tmp);
    r->tmp = NULL;
    if (r->mode == ZM_MODE_BUFFERED && r->peer != MPI_PROC_NULL &&
        (bytes > zm.eager_max || r->peer_world != zm.rank)) {
        int rc = bsend_start(r, bytes);
        if (rc) {
            r->active = false;
            r->complete = true;
            return zm_raise(req_comm(r), rc, "MPI_Start");
        }
        return MPI_SUCCESS;
    }
    zm_start_send(r);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Startall(int count, MPI_Request array_of_requests[])
{
    if (count < 0 || (count && !array_of_requests))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Startall");
    for (int i = 0; i < count; i++) {
        int rc = MPI_Start(&array_of_requests[i]);
        if (rc)
            return rc;
    }
    return MPI_SUCCESS;
}

/* ---- probes ---- */

struct probe {
    uint32_t ctx;
    int src, tag, src_world;
    struct zm_comm *comm;
    struct zm_unexp *found;
    bool failed;
};

static bool probe_done(void *arg)
{
    struct probe *p = arg;
    p->found = zm_find_unexp(p->ctx, p->src, p->src_world, p->tag, false);
    if (p->found)
        return true;
    if (p->src_world >= 0)
        p->failed = zm_peer_dead(p->src_world);
    return p->failed;
}

static int probe_setup(int source, int tag, MPI_Comm comm, struct probe *p, const char *fn)
{
    struct zm_comm *c;
    COMM_OR_RAISE(comm, c, fn);
    int rc = check_peer(c, source, true);
    if (!rc)
        rc = check_tag(tag, true);
    if (rc)
        return zm_raise(comm, rc, fn);
    *p = (struct probe){ c->ctx, source, tag, source >= 0 ? zm_comm_world_rank(c, source) : -1, c, NULL, false };
    return MPI_SUCCESS;
}

static void probe_status(MPI_Status *st, const struct zm_unexp *u)
{
    if (status_wanted(st)) {
        int err = st->MPI_ERROR;
        zm_set_status(st, u->h.src, u->h.tag, err, (size_t)u->h.len);
    }
}

static void proc_null_status(MPI_Status *st)
{
    if (status_wanted(st)) {
        int err = st->MPI_ERROR;
        zm_set_status(st, MPI_PROC_NULL, MPI_ANY_TAG, err, 0);
    }
}

ZIMP_MPI_API int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    struct probe p;
    int rc = probe_setup(source, tag, comm, &p, "MPI_Probe");
    if (rc)
        return rc;
    if (source == MPI_PROC_NULL) {
        proc_null_status(status);
        return MPI_SUCCESS;
    }
    zm_wait_for(probe_done, &p);
    if (!p.found)
        return zm_raise(comm, MPIX_ERR_PROC_FAILED, "MPI_Probe");
    probe_status(status, p.found);
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    struct probe p;
    int rc = probe_setup(source, tag, comm, &p, "MPI_Iprobe");
    if (rc)
        return rc;
    if (!flag)
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Iprobe");
    if (source == MPI_PROC_NULL) {
        *flag = 1;
        proc_null_status(status);
        return MPI_SUCCESS;
    }
    zm_progress(false);
    zm_check_deaths(false);
    *flag = probe_done(&p) && p.found;
    if (p.found)
        probe_status(status, p.found);
    else if (p.failed)
        return zm_raise(comm, MPIX_ERR_PROC_FAILED, "MPI_Iprobe");
    return MPI_SUCCESS;
}

/* Takes the probed message out of the queue as an MPI_Message. */
static int message_of(struct probe *p, MPI_Message *message)
{
    if (!zm_msgs.len) {                   /* index 1 is MPI_MESSAGE_NO_PROC: keep it out */
        zm_table_add(&zm_msgs, &zm_msgs);
        zm_msgs.reserved = zm_msgs.len;
    }
    struct zm_unexp *u = zm_find_unexp(p->ctx, p->src, p->src_world, p->tag, true);
    int i = zm_table_add(&zm_msgs, u);
    if (i < 0)
        return MPI_ERR_NO_MEM;
    *message = (MPI_Message)(ZM_K_MSG | (unsigned)i);
    /* Remember the communicator: Mrecv has none. */
    u->mcomm = p->comm;
    p->comm->refs++;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    struct probe p;
    int rc = probe_setup(source, tag, comm, &p, "MPI_Mprobe");
    if (rc)
        return rc;
    if (!message)
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Mprobe");
    if (source == MPI_PROC_NULL) {
        *message = MPI_MESSAGE_NO_PROC;
        proc_null_status(status);
        return MPI_SUCCESS;
    }
    zm_wait_for(probe_done, &p);
    if (!p.found)
        return zm_raise(comm, MPIX_ERR_PROC_FAILED, "MPI_Mprobe");
    probe_status(status, p.found);
    rc = message_of(&p, message);
    return rc ? zm_raise(comm, rc, "MPI_Mprobe") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                             MPI_Status *status)
{
    struct probe p;
    int rc = probe_setup(source, tag, comm, &p, "MPI_Improbe");
    if (rc)
        return rc;
    if (!flag || !message)
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Improbe");
    if (source == MPI_PROC_NULL) {
        *flag = 1;
        *message = MPI_MESSAGE_NO_PROC;
        proc_null_status(status);
        return MPI_SUCCESS;
    }
    zm_progress(false);
    zm_check_deaths(false);
    *flag = probe_done(&p) && p.found;
    if (!p.found)
        return p.failed ? zm_raise(comm, MPIX_ERR_PROC_FAILED, "MPI_Improbe") : MPI_SUCCESS;
    probe_status(status, p.found);
    rc = message_of(&p, message);
    return rc ? zm_raise(comm, rc, "MPI_Improbe") : MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Imrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message,
                            MPI_Request *request)
{
    if (!message || !request)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Imrecv");
    if (*message == MPI_MESSAGE_NO_PROC) {
        struct zm_req *r = zm_req_new(ZM_R_RECV, NULL);
        if (!r)
            return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, "MPI_Imrecv");
        zm_set_status(&r->status, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0);
        *request = r->handle;             /* before completing: completion may free r */
        zm_req_complete(r, MPI_SUCCESS);
        *message = MPI_MESSAGE_NULL;
        return MPI_SUCCESS;
    }
    struct zm_unexp *u = zm_table_get(&zm_msgs, *message, ZM_K_MSG);
    if (!u)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_REQUEST, "MPI_Imrecv");
    struct zm_comm *c = u->mcomm;
    struct zm_req *r;
    int rc = recv_prepare(buf, count, datatype, u->h.src, u->h.tag, c, u->h.ctx, &r);
    if (rc)
        return zm_raise(c->handle, rc, "MPI_Imrecv");
    if (zm_tracing(ZIMP_TRACE_DEBUG))
        zm_trace_p2p(ZIMP_TRACE_MPI_RECV, "MPI_Imrecv", c, u->h.src, u->h.tag, (long long)u->h.len);
    zm_table_del(&zm_msgs, *message);
    *message = MPI_MESSAGE_NULL;
    u->mcomm = NULL;
    zm_comm_unref(c);
    zm_recv_from_unexp(r, u);
    *request = r->handle;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Mrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status)
{
    MPI_Request req = MPI_REQUEST_NULL;   /* set by the call when it succeeds */
    int rc = MPI_Imrecv(buf, count, datatype, message, &req);
    if (rc)
        return rc;
    rc = zm_wait_free(zm_req_get(req), status);
    return rc ? zm_raise(MPI_COMM_NULL, rc, "MPI_Mrecv") : MPI_SUCCESS;
}
