/*
 * libzimp-mpi internals: shared by the files of src/mpi only.
 *
 * Layers inside the library, bottom up:
 *   handle.c    handle tables, error classes and error handlers
 *   datatype.c  typemaps as block lists, pack/unpack cursors
 *   op.c        reduction operators
 *   transport.c zimp channels: inboxes, startup handshake, waiting, deaths
 *   match.c     matching of arrivals against posted receives
 *   p2p.c       point-to-point calls and requests
 *   comm.c      communicators, groups, attributes, info, topologies
 *   bcast.c     one-to-many channel per communicator (Bcast, Barrier release)
 *   coll.c      collectives;  nbc.c  non-blocking collectives
 *   init.c      Init/Finalize and the environment calls
 *   tracing.c   the layer's events in libzimp's trace
 * docs/mpi.md describes the design.
 */
#ifndef ZIMP_MPI_INT_H
#define ZIMP_MPI_INT_H

#include <mpi.h>
#include <zimp/trace.h>
#include <zimp/zimp.h>

#include "../core/fdid.h"     /* shared with libzimp: descriptors the program may take */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* ---- handles (the kind lives in the high byte of every handle) ---- */
#define ZM_KIND_MASK 0xff000000u
#define ZM_INDEX_MASK 0x00ffffffu
#define ZM_K_COMM 0x44000000u
#define ZM_K_GROUP 0x48000000u
#define ZM_K_REQ 0x2c000000u
#define ZM_K_MSG 0x2d000000u
#define ZM_K_INFO 0x1c000000u
#define ZM_K_ERRH 0x14000000u
#define ZM_K_OP 0x18000000u
#define ZM_K_TYPE 0x4c000000u

/* A growable table of objects; index 0 is the kind's NULL handle. */
struct zm_table {
    void **items;
    unsigned len, cap;
    unsigned reserved;    /* indices below this are predefined, never reused */
    unsigned *free;       /* indices freed below len, reused last in, first out */
    unsigned nfree, free_cap;
};
int zm_table_add(struct zm_table *t, void *obj);         /* index, or -1 */
void *zm_table_get(const struct zm_table *t, int handle, unsigned kind);
void zm_table_del(struct zm_table *t, int handle);
void zm_table_fini(struct zm_table *t);                  /* frees the table, not the objects */

/*
 * Records of one kind made and dropped once per message (requests,
 * unexpected messages): freed ones are kept for reuse, since malloc and
 * free cost more than the rest of a small message's handling.
 */
#define ZM_SPARES_MAX 256
struct zm_spares {
    size_t size;          /* of a record */
    size_t clear;         /* bytes zeroed when one is reused (a prefix of it) */
    unsigned n;
    void *items[ZM_SPARES_MAX];
};
void *zm_spare_get(struct zm_spares *p);                 /* zeroed (its prefix), or NULL */
void zm_spare_put(struct zm_spares *p, void *obj);

/* ---- errors ---- */
/*
 * Raises `code` on comm's error handler (MPI_COMM_WORLD's where comm is
 * MPI_COMM_NULL): the fatal handler aborts the job, MPI_ERRORS_RETURN and
 * user handlers return the code to the caller.
 */
int zm_raise(MPI_Comm comm, int code, const char *fn);
int zm_raise_detail(MPI_Comm comm, int code, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Last detail string (thread-unsafe, like the rest: THREAD_SERIALIZED). */
extern char zm_detail[256];
void zm_abort_job(int errorcode, const char *why) __attribute__((noreturn));

struct zm_errhandler {
    MPI_Comm_errhandler_function *fn;
    int refs;
};
extern struct zm_table zm_errhandlers;
void zm_errh_ref(MPI_Errhandler h);
void zm_errh_unref(MPI_Errhandler h);

/* ---- datatypes ---- */
/* One contiguous run of bytes of a typemap, all of one predefined type. */
/* MPI_INTEGER16's C type (a GCC and Clang extension). */
__extension__ typedef __int128 zm_int128;

struct zm_block {
    MPI_Aint off;
    size_t len;
    int basic;            /* predefined type index of the bytes in this run */
};

struct zm_type {
    int refs;
    bool predefined, committed;
    size_t size;          /* data bytes of one element */
    MPI_Aint lb, extent;  /* extent = ub - lb */
    MPI_Aint true_lb, true_extent;
    size_t nblocks;
    struct zm_block *blocks;   /* one element's typemap, in typemap order */
    bool contig;          /* one block of `size` bytes at offset 0, extent == size */
    int basic;            /* homogeneous: the predefined type index, else -1 */
    size_t basic_size;    /* size of that basic type (0 if heterogeneous) */
    size_t nelems;        /* predefined elements in one element (MPI_Get_elements) */
    size_t align;         /* largest alignment of its basic types (struct padding) */
    char name[MPI_MAX_OBJECT_NAME];
    /* how it was made (MPI_Type_get_envelope/contents); the old types are referenced */
    int combiner;         /* MPI_COMBINER_NAMED for predefined types */
    int ni, na, nd;
    int *ints;
    MPI_Aint *addrs;
    struct zm_type **olds;
    struct zm_tattr *attrs;   /* MPI_Type_set_attr's, newest first */
};
extern struct zm_table zm_types;

int zm_types_init(void);
void zm_types_fini(void);
struct zm_type *zm_type_get(MPI_Datatype dt);   /* NULL if not a valid handle */
int zm_type_check(MPI_Datatype dt, bool need_commit);  /* MPI_SUCCESS or MPI_ERR_TYPE */
void zm_type_ref(struct zm_type *t);
void zm_type_unref(struct zm_type *t);
size_t zm_basic_size(int basic);

/* Walks count elements of a typemap as a stream of bytes (pack order). */
struct zm_cursor {
    const struct zm_type *t;
    char *base;           /* the user buffer */
    size_t count;         /* elements */
    size_t elem, blk, boff;  /* position: element, block in it, byte in block */
};
void zm_cursor_init(struct zm_cursor *c, const struct zm_type *t, const void *buf, size_t count);
/* Copies the next n bytes out of (pack) or into (unpack) the typemap. */
void zm_cursor_pack(struct zm_cursor *c, void *out, size_t n);
void zm_cursor_unpack(struct zm_cursor *c, const void *in, size_t n);
/* Where count elements start if they are one contiguous run of bytes, else NULL. */
char *zm_contig_ptr(const struct zm_type *t, const void *buf, size_t count);
/* Bytes of data in count elements, or SIZE_MAX on overflow. */
size_t zm_data_bytes(const struct zm_type *t, int count);
/* A buffer holding count elements in memory layout; *base is where element 0 starts. */
void *zm_layout_alloc(const struct zm_type *t, size_t count, char **base);
/* Copies count elements between two buffers of the same layout (by pack/unpack). */
void zm_copy_typed(const void *src, const struct zm_type *st, size_t scount,
                   void *dst, const struct zm_type *dt, size_t dcount);

/* ---- reduction operators ---- */
struct zm_op {
    MPI_User_function *fn;     /* user operator, or NULL for a predefined one */
    int builtin;               /* index of the predefined op (1..13), 0 for user */
    bool commute;
    int refs;
};
extern struct zm_table zm_ops;
int zm_ops_init(void);
struct zm_op *zm_op_get(MPI_Op op);
/* User operators are counted: MPI_Op_free and pending operations each hold a reference. */
void zm_op_ref(struct zm_op *o);
void zm_op_unref(struct zm_op *o);
/*
 * Whether op is defined on dt (MPI_ERR_OP if not): what every member of a
 * reduction checks at entry, before any message, so all of them agree.
 */
int zm_op_check(const struct zm_op *op, MPI_Datatype dt);
/* inout[i] = in[i] op inout[i] for count elements in memory layout. */
int zm_op_apply(struct zm_op *op, const void *in, void *inout, int count, MPI_Datatype dt);

/* ---- groups and communicators ---- */
struct zm_group {
    int refs;
    int size;
    int *world;           /* group rank -> world rank */
};
extern struct zm_table zm_groups;
struct zm_group *zm_group_new(int size);
void zm_group_unref(struct zm_group *g);
int zm_group_rank_of_world(const struct zm_group *g, int world_rank);   /* or MPI_UNDEFINED */

struct zm_attr {
    int keyval;
    void *value;
    struct zm_attr *next;
};

struct zm_bcast;          /* bcast.c */

struct zm_cart {
    int ndims;
    int *dims, *periods;
};

struct zm_comm {
    MPI_Comm handle;
    uint32_t ctx;         /* even: point-to-point; ctx + 1: collectives' messages */
    int rank, size;
    struct zm_group *group;
    MPI_Errhandler errh;
    struct zm_attr *attrs;
    char name[MPI_MAX_OBJECT_NAME];
    uint32_t coll_seq;    /* collectives started on this communicator */
    struct zm_bcast *bc;  /* its one-to-many channel, made at first use */
    /* the shared-page barrier's release order (coll.c's coll_enter, bcast.c) */
    bool bar_watch;       /* a barrier completed: the next collective sets bar_lead */
    int bar_lead;         /* 1 + the rank the next barrier releases first; 0: all at once */
    struct zm_cart *cart;
    /* intercommunicators: ranks name members of `remote`; `local` is an intracommunicator over group */
    struct zm_group *remote;
    struct zm_comm *local;
    int refs;             /* the handle + pending requests */
    bool freed;           /* MPI_Comm_free was called */
};
extern struct zm_table zm_comms;
struct zm_comm *zm_comm_get(MPI_Comm c);
int zm_comm_check(MPI_Comm c, struct zm_comm **out);   /* MPI_ERR_COMM if invalid */
void zm_comm_unref(struct zm_comm *c);
/* World rank of a peer rank (of the remote group on an intercommunicator). */
int zm_comm_world_rank(const struct zm_comm *c, int rank);
/* Number of ranks a point-to-point call may name (the remote group's size on an intercommunicator). */
int zm_comm_peer_size(const struct zm_comm *c);
int zm_comms_init(void);
/* MPI_Finalize's first step: MPI_COMM_SELF's attributes deleted, newest first (MPI 3.1, 8.7.1). */
int zm_comm_self_attrs_delete(void);
void zm_comms_fini(void);
/* A fresh context id agreed by every member of comm (collective). */
int zm_ctx_agree(struct zm_comm *comm, uint32_t *ctx);
/* Makes a communicator over `group` (taken) with context ctx, inheriting parent's handler. */
int zm_comm_make(struct zm_group *group, uint32_t ctx, const struct zm_comm *parent, MPI_Comm *out);
/* The same without the one-to-many channel: made by the first collective (zm_bcast_setup). */
int zm_comm_make_deferred(struct zm_group *group, uint32_t ctx, const struct zm_comm *parent, MPI_Comm *out);
/* An intercommunicator over local and remote (both taken), contexts ctx (and ctx + 1) and ctx + 2 (its local group). */
int zm_inter_make(struct zm_group *local, struct zm_group *remote, uint32_t ctx, const struct zm_comm *parent,
                  bool deferred, MPI_Comm *out);
/* What MPI_Comm_dup copies besides the group: topology, attributes (copy callbacks may fail). */
int zm_comm_dup_extras(struct zm_comm *c, struct zm_comm *nc);
/* Internal collectives on the collective context (coll.c). */
int zm_allgather_ints(struct zm_comm *c, const int *mine, int n, int *all);
int zm_allreduce_max_u32(struct zm_comm *c, uint32_t *v);
int zm_barrier(struct zm_comm *c);

/* ---- the wire format of inbox messages ---- */
enum zm_msg_kind {
    ZM_M_EAGER = 1,       /* header + the whole message */
    ZM_M_RTS,             /* rendezvous: payload is struct zm_rts; receiver reads, then FIN */
    ZM_M_FIN,             /* rendezvous done (cookie names the sender's request) */
    ZM_M_ACK,             /* a synchronous-mode message was matched (cookie) */
    ZM_M_STREAM,          /* first chunk of a message streamed through the inbox */
    ZM_M_CHUNK,           /* a following chunk of the sender's current stream */
    ZM_M_HELLO,           /* startup handshake (transport.c) */
    ZM_M_GO,
    ZM_M_CANCEL,          /* MPI_Cancel of a send (cookie): take it back if not matched yet */
    ZM_M_CANCEL_REPLY,    /* the answer (cookie); ZM_F_CANCELLED: it was taken back */
    ZM_M_NUDGE,           /* wakes a rank asleep on its inbox: its communicator's channel has news */
    ZM_M_CTS,             /* cooperative rendezvous: the receiver's buffer, for the sender to share the copy */
};
#define ZM_F_SYNC 0x1     /* answer ZM_M_ACK when matched */
#define ZM_F_ERROR 0x2    /* FIN: the receiver could not read the data */
#define ZM_F_CANCELLED 0x4    /* CANCEL_REPLY: the message was unmatched and is gone */

struct zm_hdr {
    uint8_t kind, flags;
    uint16_t reserved;
    int32_t tag;
    int32_t src;          /* sender's rank in the communicator */
    uint32_t ctx;
    uint64_t len;         /* bytes of the whole message */
    int32_t src_world;
    uint32_t reserved2;
    uint64_t cookie;      /* sender's request (SYNC, RTS) */
};
_Static_assert(sizeof(struct zm_hdr) == 40, "inbox header layout");

struct zm_rts {
    uint64_t addr;        /* where the sender's packed bytes are, in its address space */
    uint32_t claim;       /* 1 + the sender's claim record for a cooperative copy; 0: none (coop.c) */
    int32_t claims_fd;    /* the sender's claims page, a memfd (through /proc/PID/fd) */
};

/* ---- requests ---- */
enum zm_req_kind { ZM_R_SEND = 1, ZM_R_RECV, ZM_R_NBC, ZM_R_GREQ };
enum zm_send_mode { ZM_MODE_STD, ZM_MODE_SYNC, ZM_MODE_READY, ZM_MODE_BUFFERED };

struct zm_req;
typedef int zm_nbc_step_fn(struct zm_req *r);   /* 1 done, 0 not yet, -(MPI error class) */

struct zm_req {
    enum zm_req_kind kind;
    MPI_Request handle;
    uint32_t serial;      /* cookie = handle index | serial << 32 */
    bool complete, active, persistent, user_freed, cancelled;
    bool cancel_pending;  /* a send's MPI_Cancel asked its receiver; no answer yet */
    bool cancel_undone;   /* ... and its completion was taken back until the answer */
    struct zm_comm *comm;
    /* the operation */
    void *buf;
    int count;
    MPI_Datatype dtype;
    struct zm_type *type;
    int peer;             /* comm rank, MPI_ANY_SOURCE, MPI_PROC_NULL */
    int peer_world;       /* world rank of peer, -1 for any */
    int tag;
    enum zm_send_mode mode;
    uint32_t ctx;         /* ctx used on the wire (ctx or ctx + 1) */
    MPI_Status status;
    /* receive progress */
    size_t cap;           /* bytes the receive buffer takes */
    size_t got;           /* bytes delivered so far (streams) */
    struct zm_cursor cur; /* where the next delivered byte goes */
    /* send progress */
    void *tmp;            /* packed copy of a non-contiguous or buffered message */
    uint32_t claim;       /* a rendezvous copied by both ranks: 1 + its claim record (coop.c) */
    size_t bsend_bytes;   /* charged to the attached buffer */
    /* A buffered send that did not go at once: the program's request, complete once the
     * message is copied aside, names the message of the internal request that carries it. */
    uint64_t bsend_link;  /* that message's cookie (its carrier may be gone) */
    bool bsend_carrier;   /* this is the internal request */
    size_t tx_sent;       /* a send queued to its rank (p2p.c): bytes on the wire so far */
    bool tx_queued;       /* ... while it is in the queue (it completes only when it leaves) */
    bool tx_started;      /* ... its first message is */
    bool tx_finish;       /* ... completed meanwhile (an ACK, a death), with tx_error */
    int tx_error;
    bool tx_rts;          /* ... a single-copy rendezvous: its RTS (tx_rts_msg) goes, a FIN completes it */
    struct zm_rts tx_rts_msg;
    struct zm_req *tx_next;          /* ... and the next one queued to the same rank */
    /* non-blocking collectives */
    zm_nbc_step_fn *step;
    void *nbc;
    struct zm_req *next_nbc;
    struct zm_req *next;  /* posted-receive queue */
    /* generalized requests (MPI_Grequest_start): the user's callbacks */
    MPI_Grequest_query_function *greq_query;
    MPI_Grequest_free_function *greq_free;     /* NULL once called */
    MPI_Grequest_cancel_function *greq_cancel;
    void *greq_state;
};
extern struct zm_table zm_reqs;
struct zm_req *zm_req_new(enum zm_req_kind kind, struct zm_comm *comm);
struct zm_req *zm_req_get(MPI_Request h);
struct zm_req *zm_req_by_cookie(uint64_t cookie);
uint64_t zm_req_cookie(const struct zm_req *r);
void zm_req_free(struct zm_req *r);
void zm_req_complete(struct zm_req *r, int error);
/* The answer to a send's MPI_Cancel, for the send request r. */
void zm_cancel_answered(struct zm_req *r, bool cancelled);
/* The answer about a buffered send's message (`cookie`: its carrier's) to the program's MPI_Cancel. */
void zm_bsend_cancel_answer(uint64_t cookie, bool cancelled);

/* An arrival that no posted receive has taken yet (match.c). */
#define ZM_UNEXP_INLINE 64
struct zm_unexp {
    struct zm_hdr h;
    void *data;           /* EAGER: the payload; STREAM: the bytes so far (`small`, or malloc'd) */
    size_t have;          /* bytes of data present */
    struct zm_rts rts;    /* RTS: where to read */
    bool complete;        /* every byte arrived (STREAM) */
    struct zm_comm *mcomm;    /* taken by MPI_Mprobe: the communicator, for MPI_Mrecv */
    struct zm_unexp *next;
    unsigned char small[ZM_UNEXP_INLINE];   /* a payload this short: no second allocation */
};

/* ---- transport and progress ---- */
struct zm_peer {
    pid_t pid;
    int pidfd;            /* -1: none, or lost (the program closed or reused its number) */
    struct zimp_fdid pidfd_id;       /* what pidfd was when opened (../core/fdid.h) */
    unsigned long long start;        /* /proc/PID/stat start time at startup (0: unknown) */
    bool dead;
    /* process_vm_readv found no such process: it is exiting, its pidfd may
     * not be readable yet (the kernel releases the memory first) */
    bool gone;
    zimp_sender *tx;      /* into that rank's inbox */
    /* the stream this peer is sending us now (chunks follow in its order) */
    struct zm_req *stream_req;
    struct zm_unexp *stream_unexp;
    size_t stream_left;
    /* sends to this rank that could not go at once (p2p.c): the first may be
     * under way (a stream's chunks carry no stream id), the others wait */
    struct zm_req *txq_head, *txq_tail;
};

struct zm_world {
    bool initialized, finalized;
    int thread_level;
    int rank, size;
    char job[96];
    zimp_receiver *inbox;
    struct zm_peer *peers;
    bool cma;             /* process_vm_readv works between ranks */
    size_t eager_max;     /* payload bytes that fit in one inbox slot */
    uint32_t next_ctx;
    uint32_t next_ictx;   /* MPI_Comm_idup's contexts: from ZM_ICTX_BASE up, never met by next_ctx */
    struct zm_req *posted_head, *posted_tail;
    struct zm_unexp *unexp_head, *unexp_tail;
    struct zm_req *nbc_head;
    int progress_depth;   /* nesting of the progress engine */
    int64_t next_death_check;
    int64_t poll_ns;      /* how long a wait polls before it sleeps (0 with more ranks than CPUs) */
    int64_t slice_ns;     /* the longest sleep of a wait between liveness checks */
    bool poll_fixed;      /* ZIMP_MPI_POLL_NS set: the poll never learns past it */
    int64_t t0;
    pid_t launcher;
    /* MPI_Buffer_attach */
    void *bsend_buf;
    size_t bsend_size, bsend_used;
};
extern struct zm_world zm;

int64_t zm_now_ns(void);
int zm_transport_init(void);
void zm_spread_over_cpus(void);
void zm_transport_fini(void);
/* Channel name of this job's object `what` (inbox, bcast channel). */
void zm_chan_name(char *out, size_t cap, const char *what);

/*
 * Sends one inbox message (header + payload parts) to world rank `to`,
 * waiting for room while progressing our own inbox. Self-sends are
 * delivered in place. MPI_SUCCESS, MPIX_ERR_PROC_FAILED or MPI_ERR_OTHER.
 */
/* An empty ZM_M_NUDGE to rank `to` if its inbox has room now (if not, messages will wake it). */
void zm_nudge(int to);
int zm_wire_send(int to, const struct zm_hdr *h, const void *p1, size_t n1,
                 struct zm_cursor *cur, size_t ncur);
/* Handles every message waiting in the inbox (and bcast channels when full). */
void zm_progress(bool full);
/* Sends what fits now of the sends queued to each rank (p2p.c); whether any is left. */
bool zm_tx_push_all(void);
/* Progresses until every queued send and control message is on the wire (or its rank is dead). */
void zm_tx_flush(void);
/* Sends the control messages that fit now; whether some still wait for room (transport.c). */
bool zm_ctl_pending(void);
/*
 * Progresses until done(arg) holds, sleeping in zimp's blocking receive
 * between arrivals. Fails requests that depend on a rank found dead.
 */
void zm_wait_for(bool (*done)(void *), void *arg);
/*
 * Polls ready(arg) without yielding the CPU for up to zm.poll_ns (0: not at
 * all); whether it became true. The first step of every blocking wait.
 */
bool zm_poll_until(bool (*ready)(void *), void *arg);
/* A wait whose zm_poll_until gave up is over: lets the poll budget learn from it. */
void zm_poll_missed_end(void);
/*
 * With more ranks than CPUs (zm.poll_ns == 0): polls ready(arg) between
 * sched_yield calls for up to ns, so the ranks a wait depends on get the
 * CPU before it sleeps; whether it became true. Otherwise false at once.
 */
bool zm_yield_until(bool (*ready)(void *), void *arg, int64_t ns);
/* Re-checks which peers died (at most every few ms unless forced). */
void zm_check_deaths(bool force);
/*
 * The same on a fast path: the coarse clock (a few ns, one tick of
 * resolution, late by at most a tick) decides whether a check is due.
 */
static inline void zm_check_deaths_cheap(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    if ((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec >= zm.next_death_check)
        zm_check_deaths(false);
}
bool zm_peer_dead(int world_rank);
/* Whether world rank r's process has exited (or was found dead), checked now, without waiting. */
bool zm_peer_exited(int r);
/* Queues an ACK or FIN, sent once the inbox slot being handled is released. */
void zm_queue_ctl(int to, const struct zm_hdr *h);
/* HELLO and GO of the startup handshake (transport.c). */
void zm_startup_msg(const struct zm_hdr *h, const void *payload, size_t plen);
/* Steps the active non-blocking collectives (nbc.c). */
void zm_nbc_progress(void);
/* Reads len bytes at addr of world rank `from` (process_vm_readv). */
int zm_cma_read(int from, uint64_t addr, void *dst, size_t len);
/* Sends one message if `to`'s inbox has room now, without waiting or draining ours. */
bool zm_wire_try(int to, const struct zm_hdr *h, const void *p, size_t n);

/* ---- cooperative rendezvous (coop.c) ---- */
int zm_coop_init(void);
void zm_coop_fini(void);
/* The sender: a claim record for a rendezvous of `bytes`, named in *rts (or none). */
void zm_coop_offer(struct zm_req *r, size_t bytes, struct zm_rts *rts);
/* The send completed: its claim record is free again. */
void zm_coop_retire(struct zm_req *r);
/* The sender, on CTS: copies chunks into the receiver's buffer. */
void zm_coop_cts(const struct zm_hdr *h, const void *payload, size_t plen);
/* The receiver: the n bytes of an RTS into the contiguous dst, shared with the sender if it can. */
int zm_coop_read(const struct zm_hdr *h, const struct zm_rts *rts, char *dst, size_t n);

/* ---- matching (match.c) ---- */
void zm_deliver(const struct zm_hdr *h, const void *payload, size_t plen);
void zm_post_recv(struct zm_req *r);
bool zm_cancel_recv(struct zm_req *r);
struct zm_unexp *zm_find_unexp(uint32_t ctx, int src, int src_world, int tag, bool remove);
void zm_recv_from_unexp(struct zm_req *r, struct zm_unexp *u);
void zm_fail_dead(int world_rank);
void zm_unexp_free(struct zm_unexp *u);

/* ---- point to point building blocks (p2p.c) ---- */
int zm_isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, struct zm_comm *c,
             uint32_t ctx, enum zm_send_mode mode, struct zm_req **out);
int zm_irecv(void *buf, int count, MPI_Datatype dt, int src, int tag, struct zm_comm *c,
             uint32_t ctx, struct zm_req **out);
/* Blocking send and receive; no request object where none is needed. An MPI error class. */
int zm_send_blocking(const void *buf, int count, MPI_Datatype dt, int dest, int tag, struct zm_comm *c,
                     uint32_t ctx, enum zm_send_mode mode);
int zm_recv_blocking(void *buf, int count, MPI_Datatype dt, int src, int tag, struct zm_comm *c,
                     uint32_t ctx, MPI_Status *st);
/* Waits for r, frees it, returns its error (MPI_SUCCESS, ...). */
int zm_wait_free(struct zm_req *r, MPI_Status *st);
void zm_start_send(struct zm_req *r);
void zm_set_status(MPI_Status *st, int src, int tag, int err, size_t bytes);

/* ---- one-to-many channel per communicator (bcast.c) ---- */
/* Collective over c; a no-op once done (communicators from MPI_Comm_idup get it at their first collective). */
int zm_bcast_setup(struct zm_comm *c);
void zm_bcast_close(struct zm_comm *c);
void zm_bcast_drain_all(void);
/*
 * Marks (on) or unmarks this rank as asleep on its inbox on the barrier page
 * of every communicator with a pending non-blocking collective, so that a
 * publisher on that communicator's channel nudges it. false: some such
 * communicator has no page (or there are too many): sleep in short slices.
 */
bool zm_bcast_inbox_sleep(bool on);
/* Root: publishes n bytes of (buf, count, type) as collective `seq`. */
int zm_bcast_send(struct zm_comm *c, uint32_t seq, const void *buf, int count, struct zm_type *t);
int zm_bcast_recv(struct zm_comm *c, uint32_t seq, int root, void *buf, int count, struct zm_type *t);
/* MPI_Barrier on the communicator's shared page; MPI_ERR_UNSUPPORTED_OPERATION if it has none. */
int zm_shm_barrier(struct zm_comm *c);
/* Forgets how long c's last barrier wait took (MPI_Init's own says nothing of the program's). */
void zm_shm_barrier_forget(struct zm_comm *c);
/* Non-blocking pieces for MPI_Ibcast/Ibarrier: 1 done, 0 not yet, -(MPI error class). */
struct zm_bcast_op;
struct zm_bcast_op *zm_bcast_op_new(struct zm_comm *c, uint32_t seq, int root, void *buf, int count,
                                    struct zm_type *t);
int zm_bcast_op_step(struct zm_bcast_op *op);
void zm_bcast_op_free(struct zm_bcast_op *op);

/* ---- tracing (tracing.c): events in libzimp's trace ---- */
static inline bool zm_tracing(int level)
{
    return __builtin_expect(zimp_trace_level() >= level, 0);
}
/* ZIMP_TRACE_MPI_INIT or _FINALIZE of this rank. */
void zm_trace_life(int ev);
/* ZIMP_TRACE_MPI_SEND or _RECV: a call, its communicator, peer, tag and length in bytes. */
void zm_trace_p2p(int ev, const char *call, const struct zm_comm *c, int peer, int tag, long long len);
void zm_trace_p2p_typed(int ev, const char *call, const struct zm_comm *c, int peer, int tag, int count,
                        MPI_Datatype dt);
/* ZIMP_TRACE_MPI_COLL: a collective call, its root (-1: none) and this rank's bytes. */
void zm_trace_coll(const char *call, MPI_Comm comm, int root, int count, MPI_Datatype dt);
/* ZIMP_TRACE_MPI_ERROR: an error an MPI call returns (zm_raise). */
void zm_trace_error(MPI_Comm comm, int code, const char *fn);
#define ZM_TRACE_COLL(call, comm, root, count, dt)                             \
    do {                                                                       \
        if (zm_tracing(ZIMP_TRACE_DEBUG))                                      \
            zm_trace_coll(call, comm, root, count, dt);                        \
    } while (0)

#define ZM_ICTX_BASE 0x40000000u   /* below MPI_Comm_create_group's temporary contexts (top bit set) */

/*
 * Collective tags: one per collective call, so overlapping ones never mix.
 * Below 2^29 - 1: the neighborhood collectives add bit 29 (a message's
 * direction), and 2^30 - 1 is the communicator setup's tag (bcast.c).
 */
static inline int zm_coll_tag(uint32_t seq) { return (int)(seq % 0x1fffffffu); }

#define ZM_CHECK_INIT(fn)                                                      \
    do {                                                                       \
        if (!zm.initialized || zm.finalized)                                   \
            return zm_raise(MPI_COMM_NULL, MPI_ERR_OTHER, fn);                 \
    } while (0)

#endif /* ZIMP_MPI_INT_H */
