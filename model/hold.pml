/*
 * hold.pml: large messages on a channel created with a heap (docs/heap.md
 * H1-H5, docs/protocol.md "Large messages"), for SPIN: who may drop the
 * channel's hold on a heap block, and when.
 *
 * Shared words: the ring's `tail`, `joins`, the sender's `intent`, per slot
 * `seq` (position + 1 of the last publication) and its hold entry (`hpos`:
 * position + 1 or 0; the handle `hblk`, `hgen`); per receiver record its
 * state, liveness and `head`; per heap block its holders (SBIT: the
 * sender's reference, CHBIT: the channel's record), its generation (moved at
 * every free) and its data (the position whose message it carries).
 *
 * Processes:
 *   sender    one sender, MSGS large messages, each: H3 (reclaim_holds),
 *             allocate (full: H3 again; dropped nothing: -ENOMEM when the
 *             channel holds nothing, else wait for room), S0-S2 (room:
 *             every live head > t - slots), S3 (joins moved: wait holding t
 *             for room), S4 + H2 (drop the slot's old hold), the loan's
 *             write, H1 at publish (the channel's bit, the handle, hpos :=
 *             t + 1), P2 (seq := t + 1), P3 (intent := none), then the
 *             sender's own reference goes.
 *   receiver  NR0 receivers open before anything is sent (head 0); each
 *             reads every position: R1 (seq), H4 (hold entry: pos must be
 *             p + 1; then the handle), the block (gen, holders, data), R2's
 *             re-check, R3 (head := p + 1).
 *   joiner    JOINERS (0 or 1) receivers opening at any time: J0 (a FREE
 *             record, or with -DREUSE a dead receiver's record, its old head
 *             still there), J1 head := 0, J2 joins += 1, J3 t0 := tail, the
 *             sender's intent q, q's seq (pending: q in [t0 - slots, t0), not
 *             published, its sender live), J4 head := pending or t0; then
 *             reads like a receiver (positions below t0 not pending passed).
 *   outsider  H5: NOUT (1 or 2) other members of the heap whose allocation
 *             found it full (a direct allocator, a sender of another
 *             channel): PASSES passes of H3 from outside each, at any moment
 *             (a superset of "when full"); with -DOUTALLOC each pass is an
 *             allocation instead: a free block, else H5 and one more try,
 *             and a block it got is released later. It judges liveness
 *             itself, frees no record, counts no dead receiver.
 *   faults    a receiver dies before any of its steps (CRASHES in all,
 *             CRASHABLE: bit r for the receiver on record r): it reads
 *             nothing more and its head stops counting.
 *
 * Abstractions: sequential consistency; one sender (so S0(b) and S3 hold
 * by themselves: the claim of t follows the sender's own publication of
 * t - slots, and a joiner has at most one pending position, t0 - 1); no
 * evictions, no skips, no sender death; a kept block is a freed one (new
 * generation, free to every allocation); the heap's lock, bitmap and
 * FREEING state are one atomic step of the last holder.
 *
 * One reclaim pass (H3 and H5, zimp__reclaim_holds): per slot, load pos,
 * load seq: the hold is snapshotted if pos != 0 and seq >= pos (resolved);
 * then the scan (zimp__min_head_of): min := tail, per record: ACTIVE and
 * head < min: live -> min := head, dead -> D1 (the sender only: record
 * FREE) or skip; then per snapshotted hold with pos - 1 < min:
 * drop_hold_of: read the handle, CAS pos q + 1 -> 0, and the winner drops
 * the block's channel bit (the last holder frees it: new generation).
 *
 * Checked:
 *   1. a live receiver between its read of the hold entry and its release
 *      always finds its hold entry naming its position and the block still
 *      held by the channel, of the generation it read, with its data;
 *   2. each hold is dropped exactly once (ghost count per position), and
 *      its dropper finds the channel's bit on the block of the generation
 *      it read (no double drop, no drop of a block freed meanwhile); the
 *      channel's bit is never added twice, the sender's reference dropped
 *      once;
 *   3. no leak: when nothing can move, everyone has finished (no deadlock),
 *      and after one more H5 pass run alone, every block still allocated is
 *      held by the channel alone through a hold entry naming a position some
 *      live receiver has not passed, and every position all live receivers
 *      passed had its hold dropped exactly once;
 *   with -DENOMEM_CHECK: heap_loan's -ENOMEM ("the channel holds nothing
 *   it could give back") only if the channel held nothing either when the
 *   allocation failed (else the room its holds had may be free now: other
 *   members dropped them after the attempt); -DFIX_ENOMEM: the proposed
 *   fix (try again when the channel held something before the attempt).
 *
 * Must-fail variants: -DBUG_SCANFIRST (the pass scans the heads before it
 * snapshots which holds are resolved: a joiner that found the position
 * pending is missed), -DBUG_NOCAS (pos cleared by a load and a store:
 * two droppers of one hold).
 */
#ifndef SLOTS
#define SLOTS 2
#endif
#ifndef MSGS
#define MSGS 3          /* large messages sent */
#endif
#ifndef NB
#define NB 2            /* heap blocks */
#endif
#ifndef NR0
#define NR0 1           /* receivers open from the start */
#endif
#ifndef JOINERS
#define JOINERS 1       /* receivers opening at any time (0 or 1) */
#endif
#ifndef CRASHES
#define CRASHES 1       /* receiver deaths in all */
#endif
#ifndef CRASHABLE
#define CRASHABLE 7     /* bit r: the receiver on record r may die */
#endif
#ifndef PASSES
#define PASSES 1        /* H5 passes of the outside reclaimer */
#endif
#ifndef NOUT
#define NOUT 1          /* outside reclaimers (1 or 2) */
#endif
#define NREC (NR0 + JOINERS)
#if defined(REUSE) && (NR0 == 0 || JOINERS == 0)
#error "REUSE: a joiner takes a dead receiver's record (NR0 > 0, JOINERS = 1)"
#endif

#define NONE 255
#define FREE 0
#define ACTIVE 1
#define SBIT 1          /* holders: the sender's own reference */
#define CHBIT 2         /* holders: the channel's record */
#define OBIT 4          /* holders: an outside allocator (-DOUTALLOC; one at a time) */

byte tail;
byte joins;
byte intent = NONE;
byte seq[SLOTS];
byte hpos[SLOTS];
byte hblk[SLOTS];
byte hgen[SLOTS];
byte bhold[NB];
byte bgen[NB];
byte bdata[NB];
byte rstate[NREC];
bool ralive[NREC];
byte head[NREC];
byte crashes;
byte drops[MSGS];       /* ghost: drops of position q's hold */
bool sender_done;
byte outsiders_done;

/* Record r holds position q: ACTIVE, live, head at or below q. */
#define BELOW(r, q) (rstate[r] == ACTIVE && ralive[r] && head[r] <= (q))
#if NREC == 1
#define SOME_BELOW(q) (BELOW(0, q))
#elif NREC == 2
#define SOME_BELOW(q) (BELOW(0, q) || BELOW(1, q))
#elif NREC == 3
#define SOME_BELOW(q) (BELOW(0, q) || BELOW(1, q) || BELOW(2, q))
#else
#error "NREC: 1 to 3"
#endif
/* S0(a): every live receiver's head > t - slots */
#define ROOM(t) ((t) < SLOTS || !SOME_BELOW((t) - SLOTS))
/* A pass run now would drop slot i's hold. */
#define RECLAIMABLE(i) (hpos[i] != 0 && seq[i] >= hpos[i] && !SOME_BELOW(hpos[i] - 1))
#if SLOTS == 2
#define ANY_RECLAIMABLE (RECLAIMABLE(0) || RECLAIMABLE(1))
#define ANY_HOLD (hpos[0] != 0 || hpos[1] != 0)
#elif SLOTS == 3
#define ANY_RECLAIMABLE (RECLAIMABLE(0) || RECLAIMABLE(1) || RECLAIMABLE(2))
#define ANY_HOLD (hpos[0] != 0 || hpos[1] != 0 || hpos[2] != 0)
#else
#error "SLOTS: 2 or 3"
#endif
#if NB == 1
#define FREE_BLOCK (bhold[0] == 0)
#elif NB == 2
#define FREE_BLOCK (bhold[0] == 0 || bhold[1] == 0)
#elif NB == 3
#define FREE_BLOCK (bhold[0] == 0 || bhold[1] == 0 || bhold[2] == 0)
#else
#error "NB: 1 to 3"
#endif
/* The block b of generation g is held by the channel and carries position p. */
#define HELD(b, g, p) (bgen[b] == (g) && (bhold[b] & CHBIT) != 0 && bdata[b] == (p))

/* Drops holder bit `hbit` of block b; the last holder frees it (a new generation). */
inline unhold(b, hbit) {
  bhold[b] = bhold[b] - hbit;
  if
  :: bhold[b] == 0 -> bgen[b]++; bdata[b] = NONE
  :: else
  fi
}

/*
 * drop_hold_of(slot k, q1) if `cond`: the handle read first, then the CAS on
 * pos; the winner drops the channel's bit (zimp__heap_channel_drop: only a
 * block of the handle's generation whose bit is set; the model asserts that
 * it is). Needs locals rb, rg, won.
 */
inline drop_hold_if(cond, k, q1, n) {
  atomic {
    if
    :: cond -> rb = hblk[k]; rg = hgen[k]; won = true
    :: else -> won = false
    fi
  };
  if
  :: won ->
#ifdef BUG_NOCAS
     won = (hpos[k] == q1);
     if
     :: won -> hpos[k] = 0
     :: else
     fi;
#else
     atomic {
       if
       :: hpos[k] == q1 -> hpos[k] = 0
       :: else -> won = false
       fi
     };
#endif
     if
     :: won ->
        atomic {
          assert(drops[q1 - 1] == 0);                                  /* 2 */
          drops[q1 - 1]++;
          assert(bgen[rb] == rg && (bhold[rb] & CHBIT) != 0);           /* 2 */
          if
          :: bgen[rb] == rg && (bhold[rb] & CHBIT) != 0 -> unhold(rb, CHBIT)
          :: else
          fi;
          n++; rb = 0; rg = 0; won = false
        }
     :: else -> rb = 0; rg = 0
     fi
  :: else
  fi
}

/* Slot k's hold if its position is resolved (seq at or past it), else 0. */
inline snap1(k) {
  q1 = hpos[k];
  atomic { snap[k] = (q1 != 0 && seq[k] >= q1 -> q1 : 0); q1 = 0 }
}

/* One record of zimp__min_head_of; reap: D1 (a sender frees a dead receiver's record). */
inline scan1(k, reap) {
  atomic {
    if
    :: rstate[k] == ACTIVE && head[k] < mn ->
       if
       :: ralive[k] -> mn = head[k]
       :: !ralive[k] && reap -> rstate[k] = FREE
       :: else
       fi
    :: else
    fi
  }
}

inline snapshot() {
  snap1(0); snap1(1);
#if SLOTS > 2
  snap1(2);
#endif
}

inline scan(reap) {
  mn = tail;
  scan1(0, reap);
#if NREC > 1
  scan1(1, reap);
#endif
#if NREC > 2
  scan1(2, reap);
#endif
}

inline drop1(k, n) {
  drop_hold_if(snap[k] != 0 && snap[k] - 1 < mn, k, snap[k], n);
  snap[k] = 0
}

/*
 * zimp__reclaim_holds: n := holds dropped. Needs locals q1, mn, snap[], rb,
 * rg, won.
 */
inline reclaim(n, reap) {
  n = 0;
#ifdef BUG_SCANFIRST
  scan(reap);
  snapshot();
#else
  snapshot();
  scan(reap);
#endif
  drop1(0, n); drop1(1, n);
#if SLOTS > 2
  drop1(2, n);
#endif
  mn = 0
}

#define LOCALS byte q1, mn, rb, rg, n; bool won; byte snap[SLOTS]

proctype sender() {
  LOCALS;
  byte t, b, jseen;
#ifdef FIX_ENOMEM
  bool had;
#endif
#ifdef ENOMEM_CHECK
  bool seen;
#endif
  do
  :: t == MSGS -> break
  :: else ->
     /* H1: the block first (heap_loan) */
     reclaim(n, true);                                             /* H3 */
alloc:
#ifdef FIX_ENOMEM
     had = ANY_HOLD;                       /* oldest_hold_need, before the attempt */
#endif
     atomic {
       b = 0;
       do
       :: b < NB && bhold[b] != 0 -> b++
       :: else -> break
       od;
       if
       :: b < NB -> bhold[b] = SBIT
       :: else
       fi;
#ifdef ENOMEM_CHECK
       seen = ANY_HOLD                     /* ghost: the channel held something then */
#endif
     };
     if
     :: b == NB ->
        reclaim(n, true);                                          /* H3: full */
        if
        :: n > 0 -> goto alloc
        :: else
        fi;
        if
        :: !ANY_HOLD ->
#ifdef FIX_ENOMEM
           /* holds went since the attempt (another member dropped them): try again */
           if
           :: had -> goto alloc
           :: else
           fi;
#endif
           /* -ENOMEM: the channel holds nothing it could give back; nor
            * did it when the allocation failed. */
#ifdef ENOMEM_CHECK
           assert(!seen);
#endif
           skip                            /* and the caller tries again */
        :: else
        fi;
        /* wait (1 ms polls): until an allocation or a pass would succeed */
        (FREE_BLOCK || ANY_RECLAIMABLE);
        goto alloc
     :: else
     fi;
#ifdef FIX_ENOMEM
     had = false;
#endif
#ifdef ENOMEM_CHECK
     seen = false;
#endif
     /* S0-S2: room (the slow check: dead receivers hold nothing) */
     atomic { ROOM(tail) -> jseen = joins; assert(tail == t) };
     atomic { intent = t; tail = t + 1 };
     /* S3: a receiver joined since S0's view: wait holding t */
     atomic { joins == jseen || ROOM(t) };
     /* S4 (no evictions: nothing to find), H2: drop the slot's old hold */
     q1 = hpos[t % SLOTS];
     drop_hold_if(q1 != 0 && q1 - 1 < t, t % SLOTS, q1, n);
     q1 = 0;
     /* the loan's write; H1 at publish: the channel's bit, the handle, then pos */
     atomic {
       bdata[b] = t;
       assert((bhold[b] & SBIT) != 0 && (bhold[b] & CHBIT) == 0);
       bhold[b] = bhold[b] + CHBIT;
       hblk[t % SLOTS] = b; hgen[t % SLOTS] = bgen[b]
     };
     hpos[t % SLOTS] = t + 1;
     seq[t % SLOTS] = t + 1;                                       /* P2 */
     atomic {
       intent = NONE;                                              /* P3 */
       assert((bhold[b] & SBIT) != 0);                             /* the sender's reference goes */
       unhold(b, SBIT);
       b = 0; jseen = 0; n = 0;
       t++
     }
  od;
  sender_done = true
}

/* An alternative to a receiver's step: it dies there (CRASHES in all). */
#if CRASHES > 0
#define DIE(r) :: crashes < CRASHES && (CRASHABLE & (1 << r)) != 0 -> atomic { crashes++; ralive[r] = false }; goto dead
#else
#define DIE(r)
#endif

/*
 * Reads positions p .. MSGS - 1 on record r; below `start` only `pend`
 * (J3's pending claim) is read, the others are passed.
 */
inline receive(r, p, start, pend) {
  do
  :: p == MSGS -> break
  :: p < MSGS && p < start && p != pend ->
     if
     DIE(r)
     :: atomic { head[r] = p + 1; p++ }
     fi
  :: p < MSGS && (p >= start || p == pend) ->
     if
     DIE(r)
     :: atomic { seq[p % SLOTS] > p -> assert(seq[p % SLOTS] == p + 1) }      /* R1 */
     fi;
     if
     DIE(r)
     :: atomic {                                                    /* H4: the hold entry */
          assert(hpos[p % SLOTS] == p + 1);                          /* 1 */
          rb = hblk[p % SLOTS]; rg = hgen[p % SLOTS]
        }
     fi;
     if
     DIE(r)
     :: assert(HELD(rb, rg, p))                                      /* 1: the block read */
     fi;
     if
     DIE(r)
     :: assert(seq[p % SLOTS] == p + 1 && hpos[p % SLOTS] == p + 1 && HELD(rb, rg, p))  /* R2, 1 */
     fi;
     if
     DIE(r)
     :: atomic { head[r] = p + 1; p++; rb = 0; rg = 0 }             /* R3 */
     fi
  od
}

proctype receiver(byte r) {
  byte p, rb, rg;
  receive(r, p, 0, NONE);
dead:
  skip
}

proctype joiner() {
  byte r, p, rb, rg, t0, q, pend = NONE;
  /* J0: a FREE record (the spare), or a dead receiver's (D2, its old head still there) */
  atomic {
    if
    :: rstate[NR0] == FREE -> r = NR0
#ifdef REUSE
    :: rstate[0] == FREE || !ralive[0] -> r = 0
#if NR0 > 1
    :: rstate[1] == FREE || !ralive[1] -> r = 1
#endif
#endif
    fi;
    rstate[r] = ACTIVE; ralive[r] = true
  };
  if
  DIE(r)
  :: head[r] = 0                                                    /* J1 */
  fi;
  if
  DIE(r)
  :: joins++                                                        /* J2 */
  fi;
  if
  DIE(r)
  :: t0 = tail                                                      /* J3 */
  fi;
  if
  DIE(r)
  :: atomic { q = intent; q = (q != NONE && q < t0 && t0 - q <= SLOTS -> q : NONE) }
  fi;
  if
  :: q != NONE ->
     if
     DIE(r)
     :: atomic {
          if
          :: seq[q % SLOTS] <= q -> pend = q      /* not published; its sender lives */
          :: else
          fi;
          q = 0
        }
     fi
  :: else -> q = 0
  fi;
  if
  DIE(r)
  :: atomic { p = (pend != NONE -> pend : t0); head[r] = p }        /* J4 */
  fi;
  receive(r, p, t0, pend);
dead:
  skip
}

/*
 * H5. Without OUTALLOC: PASSES passes at any moment (a superset of "when
 * its allocation finds the heap full"). With OUTALLOC, each pass is an
 * allocation (zimp_heap_alloc): a free block, else H5 and one more try (its
 * -ENOMEM otherwise); a block it got is released later.
 */
proctype outsider() {
  LOCALS;
  byte k, ob;
  do
  :: k < PASSES ->
#ifdef OUTALLOC
     atomic {
       ob = 0;
       do
       :: ob < NB && bhold[ob] != 0 -> ob++
       :: else -> break
       od;
       if
       :: ob < NB -> bhold[ob] = OBIT
       :: else
       fi
     };
     if
     :: ob == NB ->
        reclaim(n, false);                                          /* H5 */
        atomic {
          n = 0; ob = 0;
          do
          :: ob < NB && bhold[ob] != 0 -> ob++
          :: else -> break
          od;
          if
          :: ob < NB -> bhold[ob] = OBIT
          :: else
          fi
        }
     :: else
     fi;
     if
     :: ob < NB -> atomic { unhold(ob, OBIT); ob = 0 }             /* its release */
     :: else -> ob = 0
     fi;
#else
     reclaim(n, false);                                             /* H5 */
     n = 0;
#endif
     k++
  :: else -> break
  od;
  atomic { outsiders_done++; k = 0 }
}

init {
  LOCALS;
  byte b, i;
  atomic {
    b = 0;
    do
    :: b < NB -> bgen[b] = 1; bdata[b] = NONE; b++
    :: else -> break
    od;
    b = 0;
    do
    :: b < NR0 -> rstate[b] = ACTIVE; ralive[b] = true; run receiver(b); b++
    :: else -> break
    od;
    b = 0;
    run sender();
#if JOINERS > 0
    run joiner();
#endif
    run outsider();
#if NOUT > 1
    run outsider();
#endif
  };
  /* Nothing can move: everyone finished (no deadlock). */
  timeout;
  assert(sender_done && outsiders_done == NOUT);
  b = 0;
  do
  :: b < NREC -> assert(!(rstate[b] == ACTIVE && ralive[b]) || head[b] == MSGS); b++
  :: else -> break
  od;
  /* 3: one more H5 pass, alone; then what is held is held for someone. */
  reclaim(n, false);
  b = 0;
  do
  :: b < NB ->
     if
     :: bhold[b] != 0 ->
        assert(bhold[b] == CHBIT);                                   /* 3 */
        i = 0;
        do
        :: i < SLOTS && !(hpos[i] != 0 && hblk[i] == b && hgen[i] == bgen[b]) -> i++
        :: else -> break
        od;
        assert(i < SLOTS && SOME_BELOW(hpos[i] - 1))                    /* 3 */
     :: else
     fi;
     b++
  :: else -> break
  od;
  b = 0;
  do
  :: b < MSGS -> assert(SOME_BELOW(b) || drops[b] == 1); b++              /* 2, 3 */
  :: else -> break
  od
}
