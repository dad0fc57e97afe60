/* Per-receiver descriptor pairs (pipes, sockets): the shared part of the
 * kernel-copy mechanisms. Setup makes tx[i] (sender side) and rx[i]
 * (receiver i); sending to N receivers is N system calls. */
#ifndef ZIMP_BENCH_FDCHAN_H
#define ZIMP_BENCH_FDCHAN_H
#include "../mech.h"

struct fdchan {
    int dgram;                  /* 1: one message per send/recv call */
    int tx[MECH_MAX_RECV];
    int rx[MECH_MAX_RECV];
};

/* Allocates c->shared as a struct fdchan with every descriptor -1. */
struct fdchan *fdchan_new(struct mech_chan *c, int dgram);
int  fdchan_sender_attach(struct mech_chan *c);
int  fdchan_receiver_attach(struct mech_chan *c, unsigned idx);
int  fdchan_send_begin(struct mech_chan *c, size_t len, void **buf);
int  fdchan_send_end(struct mech_chan *c, int dst, void *buf, size_t len);
int  fdchan_recv_begin(struct mech_chan *c, size_t len, const void **buf, size_t *got);
void fdchan_recv_end(struct mech_chan *c);
void fdchan_detach(struct mech_chan *c);
void fdchan_teardown(struct mech_chan *c);
#endif
