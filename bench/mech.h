/*
 * The benchmarks' common mechanism interface (after the common benchmarking
 * infrastructure of the SMP data-transfer study: init / register / copy /
 * finalize). One file per mechanism in bench/mech/ fills a struct mech.
 *
 * Life of a channel (one sender -> nrecv receivers):
 *   parent:   unsupported() -> setup()            (before fork)
 *   sender:   sender_attach() -> { send_begin() write send_end() }* -> detach()
 *   receiver: receiver_attach(i) -> { recv_begin() read recv_end() }* -> detach()
 *   parent:   teardown()                          (after every child exited)
 * Every call returns 0 or a negative errno value. Nothing prints.
 */
#ifndef ZIMP_BENCH_MECH_H
#define ZIMP_BENCH_MECH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MECH_ALL      (-1)   /* send_end destination: every receiver */
#define MECH_MAX_RECV 64

/* struct mech.flags */
#define MECH_LOSSY    0x01u  /* may drop messages when a receiver lags (UDP) */
#define MECH_SPINS    0x02u  /* receivers wait by spinning (yield when oversubscribed) */
#define MECH_ZEROCOPY 0x04u  /* send_begin hands out the shared memory itself */
#define MECH_EXTERNAL 0x08u  /* measured by a separate program (MPI, iceoryx2) */

struct mech;

/* One channel instance. The driver zero-fills it and sets m, nrecv, max_len. */
struct mech_chan {
    const struct mech *m;
    unsigned nrecv;          /* receivers, 1..MECH_MAX_RECV */
    size_t max_len;          /* largest message that will be sent */
    int oversubscribed;      /* more processes than cores: spinners must yield */
    int idx;                 /* this process's receiver index, -1 in the sender */
    void *shared;            /* made by setup(), inherited across fork */
    void *local;             /* made by *_attach(), this process only */
    long aux[8];             /* setup()'s small state (descriptors, ids) */
};

struct mech {
    const char *name;        /* short id used on the command line: "pipe" */
    const char *label;       /* for tables and plots */
    unsigned flags;
    uintptr_t variant;       /* private to the implementation */
    /* NULL when (nrecv, max_len) can run here, else why not ("> msgsize_max") */
    const char *(*unsupported)(const struct mech_chan *c);
    int  (*setup)(struct mech_chan *c);
    int  (*sender_attach)(struct mech_chan *c);
    int  (*receiver_attach)(struct mech_chan *c, unsigned idx);
    /* Sender: *buf = where to write the next message of len bytes. */
    int  (*send_begin)(struct mech_chan *c, size_t len, void **buf);
    /* Sender: deliver buf to every receiver (dst = MECH_ALL) or to receiver
     * dst only (-ENOTSUP where the mechanism only broadcasts and nrecv > 1). */
    int  (*send_end)(struct mech_chan *c, int dst, void *buf, size_t len);
    /* Receiver: next message, valid until recv_end. len is the run's message
     * size (stream mechanisms read exactly that much). -EAGAIN: nothing came
     * within the mechanism's poll interval (lossy mechanisms only). */
    int  (*recv_begin)(struct mech_chan *c, size_t len, const void **buf, size_t *got);
    void (*recv_end)(struct mech_chan *c);
    void (*detach)(struct mech_chan *c);
    void (*teardown)(struct mech_chan *c);
};

/* Registry (mech_list.c). */
extern const struct mech *const mech_all[];
const struct mech *mech_find(const char *name);

/* Helpers shared by the implementations (util.c). */
int  mech_nprocs_online(void);
void mech_relax(const struct mech_chan *c);     /* pause, or sched_yield if oversubscribed */
int  mech_write_all(int fd, const void *buf, size_t len);  /* -errno or 0 */
int  mech_read_all(int fd, void *buf, size_t len);         /* -errno, -EPIPE on EOF, or 0 */
void *mech_map_shared(size_t len);                         /* MAP_SHARED|ANON, NULL on failure */
void mech_unmap(void *p, size_t len);
long mech_read_sysctl(const char *path);                   /* -1 if unreadable */
void *mech_alloc_local(size_t len);                        /* page-aligned, zeroed, NULL on failure */

#endif
