/*
 * barrier.pml: the MPI layer's barrier on a communicator's shared page
 * (src/mpi/bcast.c: zm_shm_barrier, bar_release, bar_wait), for SPIN.
 *
 * The page's words: `arrived` (the arrival counter) and `gen` (the
 * generation). Each member, for each barrier:
 *
 *   read g := gen; arrived += 1 (fetch-add: n, its arrival's number);
 *   if n == N and (the barrier ends by last arrival, or we are its lead L)
 *      and bar_release(g): done;
 *   else if we are the releaser (L, or rank 0 by last arrival):
 *      wait until gen != g or arrived == N; if gen == g, bar_release(g),
 *      and wait again if that failed;
 *   else wait until gen != g.
 *
 *   bar_release(g): CAS arrived N -> 0; on success gen := g + 1.
 *
 * Which way a barrier ends (by its last arrival, or by its lead L) is the
 * same choice on every member (each makes it from the same history of
 * collectives, MPI's rule that they are called in the same order): here
 * chosen at random per barrier, once for all members. -DMISMATCH lets each
 * member choose on its own (a member disagreeing with the others): the
 * barrier then need not end, but it must still never end early or twice.
 *
 * Waits are blocking conditions: the code polls, yields or sleeps on the
 * futex in slices of 1 ms that re-check the condition, so a lost wake-up
 * costs a slice, never the barrier; the seats (hints for polling or
 * yielding) change no word modelled here.
 *
 * Checked (assertions; a watchdog asserts at a global deadlock that every
 * member finished, except with MISMATCH):
 *   B1  a member leaves barrier k only after all N arrived in it;
 *   B2  each barrier's generation moves exactly once;
 *   B3  the generation a member reads on arriving is its barrier's (it
 *       never reads a stale or a later one);
 *   B4  every member leaves every barrier (no deadlock).
 * -DBUG_LATEGEN reads the generation after the fetch-add instead of before
 * (and drops B3, which would name the cause at once): the model must find
 * what that does to the barrier itself (a member that read the next
 * generation waits for a move that never comes: B4).
 */
#ifndef N
#define N 3             /* members */
#endif
#ifndef B
#define B 3             /* barriers in a row */
#endif

byte arrived;
byte gen;
byte lead[B];           /* 0: by last arrival; L + 1: rank L ends it */
byte cnt[B];            /* ghost: arrivals in barrier k */
byte released[B];       /* ghost: generation moves of barrier k */
byte finished;          /* ghost: members past their last barrier */

inline bar_release(g, ok) {
  atomic {
    if
    :: arrived == N -> arrived = 0; ok = true; released[k]++; assert(released[k] == 1)   /* B2 */
    :: else -> ok = false
    fi
  }
  if
  :: ok -> gen = g + 1
  :: else
  fi
}

inline pick(v) {
  if
  :: v = 0
  :: v = 1
  :: v = 2
#if N > 2
  :: v = 3
#endif
#if N > 3
  :: v = 4
#endif
  fi
}

proctype member(byte me) {
  byte k = 0, g, n, L, rel;
  bool ok;
  do
  :: k < B ->
#ifdef MISMATCH
     pick(L);
#else
     L = lead[k];
#endif
     rel = (L == 0 -> 0 : L - 1);
#ifndef BUG_LATEGEN
     g = gen;
#endif
     atomic { arrived++; n = arrived; cnt[k]++ }
#ifdef BUG_LATEGEN
     g = gen;
#endif
#ifndef BUG_LATEGEN
     assert(g == k);                                        /* B3 */
#endif
     ok = false;
     if
     :: n == N && (L == 0 || me == L - 1) -> bar_release(g, ok)
     :: else
     fi;
     if
     :: ok
     :: !ok && me == rel ->
        do
        :: gen != g -> break
        :: gen == g && arrived == N ->
           bar_release(g, ok);
           if
           :: ok -> break
           :: else
           fi
        od
     :: !ok && me != rel -> gen != g
     fi;
     assert(cnt[k] == N);                                   /* B1 */
     k++
  :: k == B -> break
  od;
  finished++
}

init {
  byte i;
  atomic {
    i = 0;
    do
    :: i < B -> pick(lead[i]); i++
    :: i == B -> break
    od;
    i = 0;
    do
    :: i < N -> run member(i); i++
    :: i == N -> break
    od
  }
#ifndef MISMATCH
  timeout -> assert(finished == N)                          /* B4 */
#endif
}
