/*
 * closed.pml: L1's `closed` words (docs/protocol.md), for SPIN.
 *
 * One member record (sender or receiver: the words are the same): the
 * owner word (generation, state, pid), and `closed`, one bit per
 * generation modulo GB (64 in the code; GB = 4 here, so that the bits wrap
 * after a few joins, as they do after 64 in the code). As src/core/channel.c
 * and src/core/watch.c do it:
 *
 *   join (J0)   CAS owner: FREE (pass 0), or a dead member's word (pass 1,
 *               D2) -> (gen + 1, ACTIVE, pid); then clear bit(gen + 1)
 *               (relaxed fetch_and, after the CAS); then ident_of.
 *   leave (L1)  set bit(gen) (release fetch_or); then CAS owner -> FREE with
 *               pid 0 (else EVICTED -> FREE, same generation).
 *   D1          a sender frees a dead receiver's record: CAS -> FREE, its pid
 *               kept.
 *   evict       CAS ACTIVE -> EVICTED (ER, E1).
 *   watcher     zimp_watch: keeps the owner word it last saw; when the record
 *               shows another member (or none), the old one LEFT if its bit is
 *               set and fewer than GB generations passed, or if its process
 *               still runs; else it DIED.
 *
 * Members are processes that join, maybe leave (a clean close), and may die
 * at any step; a process may join again after a close (same pid, next
 * generation). The watcher's verdicts are checked against what happened:
 * LEFT only for a member that closed (its close began: the bit is set as its
 * first step), DIED only for one that died (a member that dies inside its
 * close may be told either way).
 *
 * -DFIX_CLOSED: the fix of model/README.md (finding 6): `closed` holds the
 * generation of the newest clean close and, below it, one bit for each of
 * the W generations before that one; a leave updates both by one CAS loop;
 * nobody else writes the word, so no bit is ever stale and none is cleared.
 */
#ifndef NM
#define NM 2            /* member processes */
#endif
#ifndef JOINS
#define JOINS 3         /* joins per process */
#endif
#ifndef GB
#define GB 4            /* bits in `closed` (64 in the code) */
#endif
#define WINDOW GB
#define W 4             /* FIX_CLOSED: generations before the newest clean close kept */
#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef MAXGEN
#define MAXGEN 8
#endif

#define FREE    0
#define ACTIVE  1
#define EVICTED 2
#define NOPID   255
#define GBIT(g) (1 << ((g) % GB))

/* shared memory: one record */
byte ogen;                      /* owner: generation */
byte ostate;                    /* owner: state */
byte opid = NOPID;              /* owner: pid (a process number; NOPID: 0) */
byte closed;                    /* the closed bits */
byte cgen;                      /* FIX_CLOSED: generation of the newest clean close (0: none) */

bit  alive[NM];
byte crash_left = CRASHES;

/* ghost: what happened to the member of each generation */
bit  g_closed[MAXGEN];          /* its close began */
bit  g_died[MAXGEN];            /* its process died while it was a member */

#define ODEAD   (ostate != FREE && opid != NOPID && !alive[opid])

proctype member(byte me)
{
	byte j = JOINS, g, og, os, op;
	bit ok;

	do
	:: j > 0 ->
		j--;
		/* J0: read the owner word, then CAS it */
		d_step { og = ogen; os = ostate; op = opid }
		d_step {
			ok = (ogen == og && ostate == os && opid == op) &&
			     (os == FREE || (op != NOPID && !alive[op]));      /* pass 0, pass 1 (D2) */
			if
			:: ok ->
				if
				:: os != FREE && op != NOPID -> g_died[og] = 1   /* the old member's death */
				:: else
				fi;
				ogen = og + 1; ostate = ACTIVE; opid = me; g = og + 1;
				assert(g < MAXGEN)
			:: else
			fi
		}
		if
		:: !ok -> goto next
		:: else
		fi;
		if
		:: crash_left > 0 -> d_step { crash_left--; alive[me] = 0 }; goto dead
		:: true
		fi;
#ifndef FIX_CLOSED
		closed = closed & ~GBIT(g);             /* clear our generation's bit (after the CAS) */
#endif
		if
		:: crash_left > 0 -> d_step { crash_left--; alive[me] = 0 }; goto dead
		:: true
		fi;
		/* L1: a clean close */
#ifdef FIX_CLOSED
		d_step {                                /* one CAS loop on the closed word */
			if
			:: g > cgen -> closed = ((closed << 1) | 1) << (g - cgen - 1); cgen = g
			:: g < cgen && cgen - g <= W -> closed = closed | (1 << (cgen - g - 1))
			:: else
			fi;
			closed = closed & ((1 << W) - 1);
			g_closed[g] = 1
		}
#else
		d_step { closed = closed | GBIT(g); g_closed[g] = 1 }
#endif
		if
		:: crash_left > 0 -> d_step { crash_left--; alive[me] = 0 }; goto dead
		:: true
		fi;
		d_step {
			if
			:: ogen == g && opid == me && ostate != FREE -> ostate = FREE; opid = NOPID
			:: else
			fi
		}
next:		skip
	:: else -> break
	od;
dead:	skip
}

/* evictions and D1 (by senders) */
proctype others()
{
	byte og, os, op;
end:
	do
	:: d_step { ostate == ACTIVE -> ostate = EVICTED }              /* ER, E1 */
	:: d_step { ODEAD -> og = ogen; os = ostate; op = opid }        /* D1: a dead member */
		d_step {
			if
			:: ogen == og && ostate == os && opid == op ->
				g_died[og] = 1;
				ostate = FREE           /* its pid stays in the free word */
			:: else
			fi;
			og = 0; os = 0; op = 0
		}
	od
}

/* zimp_watch: diff_record on every look (owner word, then the closed word, then the pidfd) */
proctype watcher()
{
	byte xg, xp = NOPID, ng, ns, np, cw, gap;
	bit have, cl;
end:
	do
	:: d_step { ng = ogen; ns = ostate; np = opid }                 /* owner (acquire) */
		if
		:: have && ns != FREE && ng == xg && np == xp               /* the same member */
		:: else ->
			if
			:: have ->
#ifdef FIX_CLOSED
				d_step {                                /* closed (acquire): one word */
					cl = (cgen == xg || (cgen > xg && cgen - xg <= W &&
					      (closed & (1 << (cgen - xg - 1))))) || alive[xp];
					if
					:: cl -> assert(g_closed[xg])                   /* LEFT */
					:: else -> assert(!g_closed[xg] || g_died[xg] || cgen - xg > W)     /* DIED (or beyond W) */
					fi;
					cl = 0
				}
#else
				cw = closed;                            /* closed (acquire) */
				d_step {
					/* generations since: counted from a re-read of owner (with a small GB,
					 * joins between the loads could clear the bit; 64 in the code) */
					gap = (ogen - xg + 256) % 256;
					cl = ((cw & GBIT(xg)) && gap < WINDOW) || alive[xp];
					if
					:: cl -> assert(g_closed[xg])                   /* LEFT */
					:: else -> assert(!g_closed[xg] || g_died[xg] || gap >= WINDOW)   /* DIED */
					fi;
					cl = 0; cw = 0; gap = 0
				}
#endif
			:: else
			fi;
			d_step { have = (ns != FREE); xg = ng; xp = np }
		fi
	od
}

init {
	byte i;
	atomic {
		for (i : 0 .. NM - 1) {
			alive[i] = 1
		}
		for (i : 0 .. NM - 1) {
			run member(i)
		}
		run others();
		run watcher()
	}
}
