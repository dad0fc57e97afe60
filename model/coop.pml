/*
 * coop.pml: the MPI layer's cooperative rendezvous (src/mpi/coop.c), for
 * SPIN: a large message copied by its receiver and its sender at once,
 * chunk by chunk, through one claim record in the sender's claims page.
 *
 * The record's words: `next` (the next chunk nobody has taken), `copied`
 * (taken chunks that are finished), `redo` (1 + the chunk the sender could
 * not write). A message of NCH chunks:
 *
 *   receiver  sends CTS (or cannot: no room in the sender's inbox; then it
 *             copies alone); takes chunks by fetch-add on `next` and reads
 *             each one (after a failed read of its own it takes, and does
 *             not copy); adds 1 to `copied` per chunk taken;
 *             waits until `copied` == NCH or the sender is dead;
 *             reads the chunk `redo` names again; completes; sends FIN.
 *   sender    on CTS (if it ever gets to it: it may be busy outside MPI
 *             until the FIN): takes chunks the same way and writes each
 *             one; a failed write sets `redo` and it stops taking; adds 1
 *             to `copied` per chunk taken, written or not.
 *
 * A write is two steps (process_vm_writev copies for a while). The sender
 * may die at any step (-DCRASH), and its writes may fail (-DWRITEFAIL).
 *
 * Checked:
 *   C1  every chunk is taken by exactly one rank;
 *   C2  nobody writes into the receiver's buffer once the receive completed;
 *   C5  a receive that completes without an error holds every chunk;
 *   C6  the receive ends (the watchdog: at a global deadlock, the receiver
 *       has finished).
 * -DBUG_NOWAIT (the receiver does not wait for the sender's chunks) must
 * break C2 or C5; -DBUG_NOREDO (it ignores `redo`) must break C5 with
 * failing writes.
 */
#ifndef NCH
#define NCH 3           /* chunks in the message */
#endif

byte next;              /* the claim record */
byte copied;
byte redo;
byte buf[NCH];          /* the receiver's buffer: 1 = the chunk's bytes are there */
byte taken[NCH];        /* ghost: how many ranks took chunk c */
bool cts;               /* the CTS is in the sender's inbox */
bool completed;         /* the receive completed (C2 from here on) */
bool ok_end;            /* ... without an error */
bool sender_dead;
bool receiver_done;

/* -DCRASH: the sender may die before any step (then it does nothing more). */
inline step() {
#ifdef CRASH
  if
  :: sender_dead = true; goto dead
  :: true
  fi
#else
  skip
#endif
}

proctype sender() {
  byte off;
  bool failed;
  step();
  /* on CTS; or never (busy outside MPI, or the receiver sent none) */
  if
  :: cts ->
     do
     :: step();
        atomic { off = next; next++ };
        if
        :: off >= NCH -> break
        :: else
        fi;
        taken[off]++;
        assert(taken[off] == 1);                             /* C1 */
        step();
        assert(!completed);                                  /* C2: the write begins */
#ifdef WRITEFAIL
        if
        :: failed = false
        :: failed = true
        fi;
#endif
        step();
        if
        :: !failed -> assert(!completed); buf[off] = 1       /* C2: the write ends */
        :: failed -> redo = off + 1
        fi;
        step();
        copied++;
        if
        :: failed -> break
        :: else
        fi
     od
  :: true
  fi;
dead:
  skip
}

proctype receiver() {
  byte off;
  bool rc_ok = true;
  if
  :: cts = true
  :: true               /* no room for the CTS: the sender never helps */
  fi;
  do
  :: atomic { off = next; next++ };
     if
     :: off >= NCH -> break
     :: else
     fi;
     taken[off]++;
     assert(taken[off] == 1);                                /* C1 */
     if
     :: rc_ok -> buf[off] = 1
     :: rc_ok -> rc_ok = false       /* our own read failed: take, do not copy */
     :: !rc_ok
     fi;
     copied++
  od;
#ifndef BUG_NOWAIT
  if
  :: copied == NCH
  :: sender_dead -> rc_ok = false    /* MPIX_ERR_PROC_FAILED */
  fi;
#endif
#ifndef BUG_NOREDO
  if
  :: redo != 0 && rc_ok -> buf[redo - 1] = 1
  :: else
  fi;
#endif
  atomic { completed = true; ok_end = rc_ok }
  if
  :: ok_end ->
     byte c = 0;
     do
     :: c < NCH -> assert(buf[c] == 1); c++                  /* C5 */
     :: c == NCH -> break
     od
  :: else
  fi;
  receiver_done = true
}

init {
  atomic {
    run receiver();
    run sender()
  }
  timeout -> assert(receiver_done)                           /* C6 */
}
