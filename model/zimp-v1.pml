/*
 * zimp-v1.pml: the channel protocol of layout 1 (src/core/sender.c and
 * receiver.c before commit b38264f), for SPIN: the model that shows why
 * docs/protocol.md replaced it. Same conventions as zimp.pml: one Promela
 * step is one atomic action on shared memory, ghost variables only feed
 * assertions, any process may die or stop at a fault point (FP).
 *
 * Layout 1, as the code did it:
 *   claim     S1 intent := t; S2 CAS tail t -> t+1 (a failed CAS retries with
 *             the new tail), THEN wait for room holding t: every live
 *             receiver's head > t - slots, and slot_vacated(t): t - slots
 *             published or no live ACTIVE sender has it as intent. A
 *             timeout returns -ETIMEDOUT and keeps the claim; closing the
 *             sender abandons it.
 *   publish   write data, seq := t + 1 (a plain store), intent := none.
 *   open      J1 head := 0, J2 joins++, find_start: t0 := tail; pending:
 *             intents q of live ACTIVE senders with t0 - q <= slots +
 *             max_senders, not published; start at the lowest.
 *   receive   seq == pos + 1: read; seq > pos + 1: -EPROTO; slow check:
 *             tail - pos > slots + max_senders + 1: -EPROTO; tail == pos
 *             and no live sender: -EPIPE; no live claimer: skip pos.
 *   evict     receivers only (zimp_evict); zimp_stalled names live
 *             receivers whose head is below held + 1 - slots.
 *
 * Each DEFECT selects the assertion of one check (model/check.sh):
 *   1  a healthy channel (no crash, no stop) reaches the receiver's
 *      "tail is impossible" -EPROTO;
 *   2  a message published after a receiver's open returned is not
 *      delivered to it (a loan held across the open);
 *   3  a stopped sender holding a claim keeps a live sender waiting for
 *      good, even after every receiver zimp_stalled names was evicted;
 *   4  a slot is written while an older loan on the same slot is still
 *      held (abandoned claims let later claims lap a held one).
 */

#ifndef NS
#define NS 2            /* senders = sender records (max_senders) */
#endif
#ifndef NR
#define NR 1            /* receiver processes = receiver records */
#endif
#ifndef SLOTS
#define SLOTS 2
#endif
#ifndef MSGS
#define MSGS 2          /* messages each sender process publishes at most */
#endif
#ifndef MSGS0
#define MSGS0 MSGS      /* ... sender 0 */
#endif
#ifndef REOPENS
#define REOPENS 1       /* per sender: close after a timeout and open again */
#endif
#ifndef TIMEOUTS
#define TIMEOUTS 1      /* waits per sender that end in -ETIMEDOUT */
#endif
#ifndef QUIET0
#define QUIET0 0        /* 1: sender 0 never times out or reopens */
#endif
#ifndef RJOINS
#define RJOINS 1        /* opens per receiver process */
#endif
#ifndef CRASHES
#define CRASHES 0
#endif
#ifndef STOPS
#define STOPS 0
#endif
#ifndef CRASHABLE
#define CRASHABLE 127
#endif
#ifndef PROGRESS
#define PROGRESS 0
#endif
#ifndef DEFECT
#define DEFECT 1
#endif

#define NPROC   (NS + NR)
#define RP(r)   (NS + (r))
#define NONE    255
#define MAXPOS  20
#define FREE    0
#define ACTIVE  1
#define EVICTED 2
#define BIT(p)  (1 << (p))

/* ---- shared memory ---- */
byte tail;
byte joins;
bit  opened;
byte seq[SLOTS];                /* position + 1 of the last publication (plain store) */
byte data[SLOTS];
byte sstate[NS];
byte intent[NS];
byte rstate[NR];
byte rown[NR];
byte head[NR];

bit  alive[NPROC];
bit  pstopped[NPROC];
bit  pdone[NPROC];

/* ---- ghost ---- */
byte loan_slot[NS];
byte held_of[NS];               /* the position sender i holds (for zimp_stalled) */
byte rrec[NR];
bit  rjoined[NR];
byte rpos[NR];
byte rstart[NR];
int  rpend[NR];
int  must[NR];
int  got[NR];
byte crash_left = CRASHES;
byte stop_left = STOPS;
bit  sweep_needed;

#define SALIVE(i)       (sstate[i] == ACTIVE && alive[i])
#define CL(i, q)        (SALIVE(i) && intent[i] == (q))
#if NS == 1
#define CLAIM_LIVE(q)   (CL(0, q))
#define ANY_ACTIVE      (SALIVE(0))
#elif NS == 2
#define CLAIM_LIVE(q)   (CL(0, q) || CL(1, q))
#define ANY_ACTIVE      (SALIVE(0) || SALIVE(1))
#elif NS == 3
#define CLAIM_LIVE(q)   (CL(0, q) || CL(1, q) || CL(2, q))
#define ANY_ACTIVE      (SALIVE(0) || SALIVE(1) || SALIVE(2))
#elif NS == 4
#define CLAIM_LIVE(q)   (CL(0, q) || CL(1, q) || CL(2, q) || CL(3, q))
#define ANY_ACTIVE      (SALIVE(0) || SALIVE(1) || SALIVE(2) || SALIVE(3))
#endif

/* zimp__min_head(held + 1, slow): a live ACTIVE receiver record holds p's slot */
#define RHOLDS(k, p)    (rstate[k] == ACTIVE && alive[RP(rown[k])] && head[k] + SLOTS <= (p))
#if NR == 1
#define ROOM_A(p)       (!RHOLDS(0, p))
#elif NR == 2
#define ROOM_A(p)       (!RHOLDS(0, p) && !RHOLDS(1, p))
#endif
/* slot_vacated(p, slow): p - slots published, or no live claimer of it */
#define VACATED(p)      ((p) < SLOTS || seq[(p) % SLOTS] >= (p) - SLOTS + 1 || !CLAIM_LIVE((p) - SLOTS))

#define MEMBER(r)       (rstate[rrec[r]] == ACTIVE && rown[rrec[r]] == (r))
#define OWED(r)         (rjoined[r] && alive[RP(r)] && MEMBER(r))
#define PASSED(r, p)    ((p) < rpos[r] || ((p) < rstart[r] && !(rpend[r] & BIT(p))))
#define BEFORE_START(r) (rpos[r] < rstart[r] && !(rpend[r] & BIT(rpos[r])))

inline min_head(mh, t)
{
	mh = t;
	for (ii : 0 .. NR - 1) {
		if
		:: rstate[ii] == ACTIVE && !alive[RP(rown[ii])] -> rstate[ii] = FREE
		:: rstate[ii] == ACTIVE && alive[RP(rown[ii])] && head[ii] < mh -> mh = head[ii]
		:: else
		fi
	}
	skip
}

/* DEFECT 2: p is published; no receiver owed it has passed it */
inline on_publish(p)
{
	for (ii : 0 .. NR - 1) {
		if
		:: OWED(ii) ->
#if DEFECT == 2
			assert(!PASSED(ii, p));
#endif
			must[ii] = must[ii] | BIT(p)
		:: else
		fi
	}
	skip
}

/* DEFECT 4: nobody else may still write a loan in slot k */
inline check_writer(me, k)
{
	for (ii : 0 .. NS - 1) {
#if DEFECT == 4
		assert(ii == me || !alive[ii] || loan_slot[ii] != k);
#endif
		skip
	}
	skip
}

#define CAN_FAULT(p)    (CRASHABLE & BIT(p))
#if CRASHES + STOPS > 0
#define FAULTS(p) \
	:: d_step { crash_left > 0 && CAN_FAULT(p) -> alive[p] = 0; crash_left-- }; goto dead \
	:: d_step { stop_left > 0 && CAN_FAULT(p) -> pstopped[p] = 1; stop_left--; sweep_needed = 1 }; goto dead
#define FP(p)           if FAULTS(p) :: true fi
#else
#define FAULTS(p)
#define FP(p)           skip
#endif

/* ---- sender: open; zimp_loan + write + zimp_publish; after a timeout, maybe close and open again ---- */
proctype sender(byte me)
{
	byte t, k, mh, jseen, m, ii;
	byte held = NONE;
	byte tmo = TIMEOUTS, reopen = REOPENS;
	bit ok;

	if
	:: QUIET0 && me == 0 -> tmo = 0; reopen = 0
	:: else
	fi;

open:	skip;
	d_step {
		sstate[me] = ACTIVE;
		intent[me] = NONE;
		opened = 1;
		jseen = joins;
		min_head(mh, tail);
		held = NONE; held_of[me] = NONE
	}
	do
	:: m == (me == 0 -> MSGS0 : MSGS) -> break
	:: else ->
		if
		:: held == NONE ->
			FP(me);
			t = tail;
S1:			FP(me);
			intent[me] = t;
			FP(me);
S2:			d_step {                        /* CAS tail; a failure reads the new tail */
				if
				:: tail == t -> tail++; ok = 1
				:: else -> t = tail; ok = 0
				fi
			}
			if
			:: !ok -> goto S1
			:: else -> d_step { held = t; held_of[me] = t; t = 0 }
			fi
		:: else
		fi;
		/* room: the cached view unless a receiver joined; else wait holding the claim */
		FP(me);
		d_step { ok = (held < mh + SLOTS && (held < SLOTS || seq[held % SLOTS] >= held - SLOTS + 1) &&
			       joins == jseen) }
		if
		:: !ok ->
wait:			if                              /* room_cond, with its 10 ms slow checks */
			:: ROOM_A(held) && VACATED(held) ->
				d_step { jseen = joins; min_head(mh, held + 1) }
			:: tmo > 0 && !(ROOM_A(held) && VACATED(held)) ->   /* -ETIMEDOUT: the claim stays held */
				tmo--;
				if
				:: goto wait            /* try again */
				:: reopen > 0 ->        /* close (abandons the claim), open again */
					reopen--;
					FP(me);
					d_step { intent[me] = NONE; sstate[me] = FREE; held = NONE; held_of[me] = NONE }
					goto open
				fi
			FAULTS(me)
			fi
		:: else
		fi;
		FP(me);
W:		d_step {                                /* the loan: the caller writes the data */
			k = held % SLOTS;
			check_writer(me, k);
			loan_slot[me] = k;
			data[k] = held
		}
		FP(me);
P2:		d_step {                                /* seq := p + 1 (plain store) */
			seq[k] = held + 1;
			on_publish(held);
			loan_slot[me] = NONE
		}
		FP(me);
P3:		d_step { intent[me] = NONE; held = NONE; held_of[me] = NONE; k = 0; m++ }
	od;
	FP(me);
	d_step { intent[me] = NONE; sstate[me] = FREE; pdone[me] = 1 }
dead:	skip
}

/* ---- receiver: zimp_receiver_open; zimp_recv until an error or -EPIPE ---- */
#define R_READ  1
#define R_ADV   2
#define R_END   3
#define R_WAIT  4

#define R_READY(r, k)   (seq[k] > rpos[r] || !MEMBER(r) || tail > rpos[r] + SLOTS + NS + 1 || \
			 (tail > rpos[r] && !CLAIM_LIVE(rpos[r])) || \
			 (tail == rpos[r] && !ANY_ACTIVE && opened))

proctype receiver(byte r)
{
	byte rec = NONE, k, q, ii, d, what;
	byte jl = RJOINS;
	int pend;

	do
	:: jl > 0 ->
		jl--;
		FP(RP(r));
J0:		d_step {
			rec = NONE;
			for (ii : 0 .. NR - 1) {
				if
				:: rec == NONE && rstate[ii] == FREE -> rec = ii
				:: else
				fi
			}
			for (ii : 0 .. NR - 1) {
				if
				:: rec == NONE && !alive[RP(rown[ii])] -> rec = ii
				:: else
				fi
			}
			if
			:: rec != NONE ->
				rstate[rec] = ACTIVE; rown[rec] = r; rrec[r] = rec;
				head[rec] = 0                           /* J1 */
			:: else
			fi
		}
		if
		:: rec == NONE -> goto next_open
		:: else
		fi;
		FP(RP(r));
J2:		joins++;
		FP(RP(r));
J3:		d_step {                                /* find_start */
			rstart[r] = tail;
			pend = 0;
			for (ii : 0 .. NS - 1) {
				q = intent[ii];
				if
				:: SALIVE(ii) && q != NONE && q < rstart[r] &&
				   rstart[r] - q <= SLOTS + NS &&           /* t0 - q > slots + max_senders: dropped */
				   seq[q % SLOTS] != q + 1 ->
					pend = pend | BIT(q)
				:: else
				fi
			}
			q = 0;
			rpos[r] = rstart[r];
			for (ii : 0 .. MAXPOS - 1) {
				if
				:: ii < rpos[r] && (pend & BIT(ii)) -> rpos[r] = ii
				:: else
				fi
			}
			rpend[r] = pend;
			head[rec] = rpos[r];
			rjoined[r] = 1; must[r] = 0; got[r] = 0;
			pend = 0
		}
		do
		:: true ->
R1:			FP(RP(r));
			d_step {                        /* ready_cond */
				k = rpos[r] % SLOTS;
				if
				:: BEFORE_START(r) -> what = R_ADV
				:: !BEFORE_START(r) && seq[k] == rpos[r] + 1 -> what = R_READ; d = data[k]
				:: !BEFORE_START(r) && seq[k] != rpos[r] + 1 ->
					if
					:: !MEMBER(r) -> what = R_END               /* -ECONNRESET */
					:: MEMBER(r) && seq[k] > rpos[r] + 1 -> what = R_END  /* -EPROTO: lapped */
					:: MEMBER(r) && seq[k] < rpos[r] + 1 ->
						if
						:: tail < rpos[r] || tail - rpos[r] > SLOTS + NS + 1 ->
#if DEFECT == 1
							assert(false);          /* -EPROTO on a healthy channel */
#endif
							what = R_END
						:: tail == rpos[r] && !ANY_ACTIVE && opened ->
#if DEFECT == 2
							assert((must[r] & ~got[r]) == 0);
#endif
							what = R_END            /* -EPIPE */
						:: tail == rpos[r] && !(!ANY_ACTIVE && opened) -> what = R_WAIT
						:: tail > rpos[r] && tail - rpos[r] <= SLOTS + NS + 1 && CLAIM_LIVE(rpos[r]) ->
							what = R_WAIT
						:: tail > rpos[r] && tail - rpos[r] <= SLOTS + NS + 1 && !CLAIM_LIVE(rpos[r]) ->
							what = R_ADV            /* its claimer is gone: skip */
						fi
					fi
				fi;
				if
				:: what == R_ADV ->
#if DEFECT == 2
					assert(!(must[r] & BIT(rpos[r])));
#endif
					rpos[r]++;
					head[rec] = rpos[r];
					what = 0
				:: else
				fi
			}
			if
			:: what == R_READ ->
				FP(RP(r));
R2:				d_step {                        /* still_valid; release */
					if
					:: seq[k] == rpos[r] + 1 && MEMBER(r) ->
#if DEFECT == 4
						assert(d == rpos[r]);
#endif
						got[r] = got[r] | BIT(rpos[r]);
						rpos[r]++;
						head[rec] = rpos[r];
						what = 0
					:: else -> what = R_END         /* -ECONNRESET or -EPROTO */
					fi;
					d = 0
				}
			:: what == R_WAIT ->
R_wait:				if
				:: R_READY(r, k) -> what = 0
				FAULTS(RP(r))
				fi
			:: else
			fi;
			if
			:: what == R_END -> break
			:: else
			fi
		od;
		FP(RP(r));
		d_step {                                /* close */
			if
			:: rstate[rec] != FREE && rown[rec] == r -> rstate[rec] = FREE
			:: else
			fi;
			rjoined[r] = 0; must[r] = 0; got[r] = 0; rpend[r] = 0;
			rpos[r] = 0; rstart[r] = 0; rec = NONE; k = 0; what = 0
		}
next_open:	skip
	:: else -> break
	od;
	pdone[RP(r)] = 1;
dead:	skip
}

#if PROGRESS
/*
 * Once nothing can move: the users of the blocked senders evict every
 * receiver zimp_stalled names (live, ACTIVE, head below held + 1 - slots).
 * Layout 1 has no sender eviction.
 */
proctype evictor()
{
	byte i, k;
end_evictor:
	do
	:: timeout && sweep_needed ->
		d_step {
			sweep_needed = 0;
			for (i : 0 .. NS - 1) {
				if
				:: alive[i] && !pstopped[i] && held_of[i] != NONE && held_of[i] + 1 > SLOTS ->
					for (k : 0 .. NR - 1) {
						if
						:: rstate[k] == ACTIVE && alive[RP(rown[k])] &&
						   head[k] < held_of[i] + 1 - SLOTS ->
							rstate[k] = EVICTED
						:: else
						fi
					}
				:: else
				fi
			}
			i = 0; k = 0
		}
	od
}

proctype quiet()
{
	d_step { crash_left = 0; stop_left = 0 }
}

/* DEFECT 3: once stuck and swept, every live sender that is not stopped has finished */
proctype watchdog()
{
	byte i;
	timeout && !sweep_needed ->
	d_step {
		for (i : 0 .. NS - 1) {
#if DEFECT == 3
			assert(!alive[i] || pstopped[i] || pdone[i]);
#endif
			skip
		}
		i = 0
	}
}
#endif

init {
	byte i;
	atomic {
		for (i : 0 .. NPROC - 1) {
			alive[i] = 1
		}
		for (i : 0 .. NS - 1) {
			loan_slot[i] = NONE;
			held_of[i] = NONE;
			run sender(i)
		}
		for (i : 0 .. NR - 1) {
			run receiver(i)
		}
#if PROGRESS
		run evictor();
		run quiet();
		run watchdog();
#endif
		i = 0
	}
}
