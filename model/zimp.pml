/*
 * zimp.pml: the channel protocol of docs/protocol.md (layout 2), for SPIN.
 *
 * Each step of docs/protocol.md is a labelled statement here (S0..S4,
 * P0..P4, R1..R5, J0..J4, L1, ER, E1..E3, D1, D2, Q1), so that the page and
 * the model read side by side. One Promela step is one atomic action on
 * shared memory; where a label names several steps of the page (S0-S1,
 * R1-R5), model/README.md says why reading them as one snapshot loses no
 * behaviour. model/check.sh runs the checks.
 *
 * Processes: NS senders (sender i owns sender record i); NR receivers (an
 * open takes a free record, or a dead member's); `evictor` (zimp_evict_sender
 * and zimp_evict at any time; for the progress check, every stopped process
 * once nothing else can move); for the progress check `quiet` and
 * `watchdog`. Any sender or receiver dies or stops for good at any step
 * (fault points FP). Positions are small integers: no wrap.
 *
 * Ghost variables (section "ghost") are written inside the steps they
 * describe and read only by assertions: they never steer the protocol.
 *
 * Variants: -DIMPL, the refinements src/core/sender.c makes to E3 and the
 * claim; -DQUAR_OWNER, the quarantine of the first layout 2 draft, tied to
 * one owner (model/README.md, finding 1: two senders write one slot), with
 * -DFIX_OWNSKIP for only the second half of its fix.
 */

/* ---- configuration: override with spin -DNAME=value ---- */
#ifndef NS
#define NS 3            /* senders (1..4) */
#endif
#ifndef NR
#define NR 2            /* receiver processes = receiver records (1..3) */
#endif
#ifndef SLOTS
#define SLOTS 2         /* 1..3 */
#endif
#ifndef MSGS
#define MSGS 2          /* messages each sender sends */
#endif
#ifndef RJOINS
#define RJOINS 1        /* opens per receiver process (0: never opens) */
#endif
#ifndef LEAVES
#define LEAVES 0        /* closes before the end, per receiver process */
#endif
#ifndef CRASHES
#define CRASHES 1       /* processes that die, at any step */
#endif
#ifndef CRASHABLE
#define CRASHABLE 127   /* bit p: process p may die or stop (senders 0..NS-1, then receivers) */
#endif
#ifndef STOPS
#define STOPS 0         /* processes stopped for good (SIGSTOP), at any step */
#endif
#ifndef EVICTS
#define EVICTS 1        /* zimp_evict_sender / zimp_evict calls, at any time */
#endif
#ifndef TIMEOUTS
#define TIMEOUTS 1      /* waits per sender that end in -ETIMEDOUT */
#endif
#ifndef MSGS0
#define MSGS0 MSGS      /* ... sender 0 */
#endif
#ifndef REOPENS
#define REOPENS 0       /* per sender: close holding a loan (or once evicted), open again */
#endif
#ifndef EVICTORS
#define EVICTORS 1      /* processes calling zimp_evict_sender / zimp_evict (share EVICTS) */
#endif
#ifndef PROGRESS
#define PROGRESS 0      /* 1: evict the stopped once stuck; then check who is stuck */
#endif
#ifndef UNLOANS
#define UNLOANS 0       /* per sender: loans given back with zimp_unloan (W1-W3) */
#endif
#ifndef SPARE
#define SPARE 0         /* 1: one more sender process, opening on a dead member's record (D2) */
#endif
/*
 * -DE3STEPS: E2-E3 as sender.c's skip_evicted runs them, one shared-memory
 * step at a time (owner word with generation, intent, the re-read of owner,
 * tail and seq, the ACTIVE claimers, room, the CAS), retried by any sender
 * call at any time (complete_evictions). -DFIX_E3SELF: its ACTIVE-claimer
 * test looks at the evicted record too (finding 4).
 * -DPENDING: who retries E3, as the code does it: evict_pending, set by an
 * E3 that waits for room and by a receiver waiting at an evicted claimer's
 * position, retried by sender calls (loan, publish) that find it set and by
 * blocked senders; nobody else (with PROGRESS: finding 5).
 * -DFIX_PENDING: zimp_evict and zimp_sender_close also retry it.
 */

#define NPROC   (NS + NR + SPARE)
#define SPARE_P (NS + NR)          /* process number of the spare sender */
#define RP(r)   (NS + (r))      /* process number of receiver r */
#define NONE    255
#define MAXPOS  20              /* positions stay below this (bit masks) */

#define FREE    0               /* owner states */
#define ACTIVE  1
#define EVICTED 2

/* ---- shared memory ---- */
byte tail;                      /* next position to claim */
byte joins;                     /* wait page: bumped by every receiver join */
bit  opened;                    /* header: some sender ever opened */

byte seqpos[SLOTS];             /* seq: position + 1 of the last publication or skip */
bit  seqskip[SLOTS];            /* seq flag SKIP */
bit  seqquar[SLOTS];            /* seq flag QUAR */
byte quar_idx[SLOTS];           /* quar_owner/quar_index: the evicted sender (Q1) */
byte data[SLOTS];               /* the slot's data: the position written into it */

byte sstate[NS];                /* sender record: owner state */
byte intent[NS];                /* sender record: intent */
byte sown[NS];                  /* sender record: owner process (the pid of owner) */
byte sgen[NS];                  /* sender record: owner generation */
bit  evict_pending;             /* wait page: an E3 skip waits for room (E3) */
byte rstate[NR];                /* receiver record: owner state */
byte rown[NR];                  /* receiver record: owner (receiver process) */
byte head[NR];                  /* receiver record: head */

/* ---- processes: liveness is exact (a pidfd verified against ident) ---- */
bit  alive[NPROC];
bit  pstopped[NPROC];            /* alive, never runs again */
bit  pdone[NPROC];               /* closed its handle for good */

/* ---- ghost ---- */
byte loan_slot[NS];             /* slot of record i's member's loan while it may write it */
bit  sev[NS];                   /* record i's member was evicted (E1 by a zimp_evict_sender) */
int  resolved;                  /* bit p: p published or skipped */
byte rrec[NR];                  /* record of receiver r's current open */
bit  rjoined[NR];               /* receiver r's open returned (J4), not closed since */
byte rpos[NR];                  /* receiver r's next position */
byte rstart[NR];                /* t0 of receiver r's join */
int  rpend[NR];                 /* positions pending at receiver r's join */
int  must[NR];                  /* published after receiver r's open returned */
int  got[NR];                   /* delivered to receiver r */
byte rwait[NR];                 /* receiver r waits in R_wait */
byte crash_left = CRASHES;
byte stop_left = STOPS;
byte evict_left = EVICTS;
bit  sweep_needed;              /* a process stopped since the last sweep */

/* ---- predicates, as the code evaluates them ---- */
#define BIT(p)          (1 << (p))
#define SLIVE(i)        (sstate[i] != FREE && alive[sown[i]])   /* live sender record */
#define CL(i, q)        (SLIVE(i) && intent[i] == (q))
#define ACL(i, q)       (sstate[i] == ACTIVE && alive[sown[i]] && intent[i] == (q))
#define SACT(i)         (sstate[i] == ACTIVE && alive[sown[i]])
#if NS == 1
#define CLAIM_LIVE(q)   (CL(0, q))
#define ACTIVE_CLAIM(q) (ACL(0, q))
#define ANY_ACTIVE      (SACT(0))
#elif NS == 2
#define CLAIM_LIVE(q)   (CL(0, q) || CL(1, q))
#define ACTIVE_CLAIM(q) (ACL(0, q) || ACL(1, q))
#define ANY_ACTIVE      (SACT(0) || SACT(1))
#elif NS == 3
#define CLAIM_LIVE(q)   (CL(0, q) || CL(1, q) || CL(2, q))
#define ACTIVE_CLAIM(q) (ACL(0, q) || ACL(1, q) || ACL(2, q))
#define ANY_ACTIVE      (SACT(0) || SACT(1) || SACT(2))
#elif NS == 4
#define CLAIM_LIVE(q)   (CL(0, q) || CL(1, q) || CL(2, q) || CL(3, q))
#define ACTIVE_CLAIM(q) (ACL(0, q) || ACL(1, q) || ACL(2, q) || ACL(3, q))
#define ANY_ACTIVE      (SACT(0) || SACT(1) || SACT(2) || SACT(3))
#endif

/* a live receiver record whose head holds the slot of position t */
#define RHOLDS(k, t)    (rstate[k] == ACTIVE && alive[RP(rown[k])] && head[k] + SLOTS <= (t))
#if NR == 1
#define ROOM_A(t)       (!RHOLDS(0, t))
#elif NR == 2
#define ROOM_A(t)       (!RHOLDS(0, t) && !RHOLDS(1, t))
#elif NR == 3
#define ROOM_A(t)       (!RHOLDS(0, t) && !RHOLDS(1, t) && !RHOLDS(2, t))
#endif
/* S0(b): t - slots resolved: seq position >= t - slots, or no live claimer */
#define ROOM_B(t)       ((t) < SLOTS || seqpos[(t) % SLOTS] > (t) - SLOTS || !CLAIM_LIVE((t) - SLOTS))

/* Q1: slot k is quarantined and its evicted sender is live and still holds its record */
#define QHOLDS(k)       (seqquar[k] && sstate[quar_idx[k]] == EVICTED && alive[quar_idx[k]])
#ifndef QUAR_OWNER
/*
 * Q1 (model/README.md, finding 1): no quarantine owner. A QUAR slot
 * k holds a claim at t while a live sender record has an intent below t in
 * that slot (the writer of a loan keeps its intent until P0/P2), and a
 * sender whose own position was skipped takes no loan.
 */
#define HB(i, k, t)     (SLIVE(i) && intent[i] != NONE && intent[i] < (t) && intent[i] % SLOTS == (k))
#if NS == 2
#define HOLDS_BELOW(k, t) (HB(0, k, t) || HB(1, k, t))
#elif NS == 3
#define HOLDS_BELOW(k, t) (HB(0, k, t) || HB(1, k, t) || HB(2, k, t))
#elif NS == 4
#define HOLDS_BELOW(k, t) (HB(0, k, t) || HB(1, k, t) || HB(2, k, t) || HB(3, k, t))
#endif
#undef QHOLDS
#define QHOLDS(k)       (seqquar[k] && HOLDS_BELOW(k, MAXPOS))
#define QHOLDS_T(k, t)  (seqquar[k] && HOLDS_BELOW(k, t))
#else
#define QHOLDS_T(k, t)  QHOLDS(k)
#endif
#if SLOTS == 1
#define ALL_QUAR        (QHOLDS(0))
#elif SLOTS == 2
#define ALL_QUAR        (QHOLDS(0) && QHOLDS(1))
#elif SLOTS == 3
#define ALL_QUAR        (QHOLDS(0) && QHOLDS(1) && QHOLDS(2))
#endif

#define MEMBER(r)       (rstate[rrec[r]] == ACTIVE && rown[rrec[r]] == (r))
/* receiver r is owed what is published now: its open returned, it is live, a member */
#define OWED(r)         (rjoined[r] && alive[RP(r)] && MEMBER(r))
/* receiver r will not read position p any more */
#define PASSED(r, p)    ((p) < rpos[r] || ((p) < rstart[r] && !(rpend[r] & BIT(p))))
#define BEFORE_START(r) (rpos[r] < rstart[r] && !(rpend[r] & BIT(rpos[r])))
/* docs/protocol.md's "resolved": published, skipped, or no live sender record has it as intent */
#define RESOLVED(q)     ((resolved & BIT(q)) || !CLAIM_LIVE(q))

/* ---- invariants, asserted where the state they speak of changes ---- */

/* I1: every position below tail - slots is resolved (after each claim, S2) */
inline check_I1()
{
	for (ii : 0 .. MAXPOS - 1) {
		assert(ii + SLOTS >= tail || RESOLVED(ii))
	}
	skip            /* a d_step may not end in a loop */
}

/* I6: tail - head <= 2 slots for every joined, live receiver (after S2 and J4) */
inline check_I6()
{
	for (ii : 0 .. NR - 1) {
		assert(!OWED(ii) || tail - head[rrec[ii]] <= 2 * SLOTS)
	}
	skip
}

/*
 * I2: the slot of position p is written (data or header) only when every
 * live receiver whose open returned is past p - slots, and p - slots is
 * resolved.
 */
inline check_I2(p)
{
	for (ii : 0 .. NR - 1) {
		assert(!OWED(ii) || head[rrec[ii]] + SLOTS > p)
	}
	assert(p < SLOTS || RESOLVED(p - SLOTS))
}

/*
 * Sender me writes slot k's data: no other process may still write a loan
 * there (a stopped one counts: SIGCONT lets it go on); I5: not while the
 * slot's quarantine holds for another evicted sender (Q1).
 */
inline check_writer(me, k)
{
	for (ii : 0 .. NS - 1) {
		assert(ii == me || !alive[sown[ii]] || loan_slot[ii] != k)
	}
#ifdef QUAR_OWNER
	assert(!QHOLDS(k) || quar_idx[k] == me);
#endif
	skip
}

/* I4 at P2: p is published; no receiver owed it has passed it */
inline on_publish(p)
{
	resolved = resolved | BIT(p);
	for (ii : 0 .. NR - 1) {
		if
		:: OWED(ii) ->
			assert(!PASSED(ii, p));
			must[ii] = must[ii] | BIT(p)
		:: else
		fi
	}
	skip
}

/* zimp__min_head, with D1: the lowest head among live receiver records */
inline min_head(mh, t)
{
	mh = t;
	for (ii : 0 .. NR - 1) {
		if
		:: rstate[ii] == ACTIVE && !alive[RP(rown[ii])] ->
			rstate[ii] = FREE                               /* D1 */
		:: rstate[ii] == ACTIVE && alive[RP(rown[ii])] && head[ii] < mh ->
			mh = head[ii]
		:: else
		fi
	}
	skip
}

/*
 * E2-E3 on evicted sender v: skip and quarantine the position it holds.
 * E2: q := intent; nothing to do if v's record no longer holds the evicted
 * owner (here: is no longer EVICTED), or q is none or >= tail. E3: nothing
 * either if a live ACTIVE record has intent q, or a live receiver's head is
 * <= q - slots (retried later: E3_DUE); else write quar_owner/quar_index unless
 * the slot's quarantine holds (then it is kept), and CAS seq upward to
 * SKIP(q)|QUAR.
 * IMPL, as src/core/sender.c does it: also nothing once seq is at q or
 * beyond, and the room test counts every ACTIVE record, live or not.
 */
#define RHOLDS_ANY(k, p) (rstate[k] == ACTIVE && head[k] + SLOTS <= (p))
#if NR == 1
#define ROOM_FAST(p)    (!RHOLDS_ANY(0, p))
#elif NR == 2
#define ROOM_FAST(p)    (!RHOLDS_ANY(0, p) && !RHOLDS_ANY(1, p))
#elif NR == 3
#define ROOM_FAST(p)    (!RHOLDS_ANY(0, p) && !RHOLDS_ANY(1, p) && !RHOLDS_ANY(2, p))
#endif
#ifdef IMPL
#define E3_ROOM(q)      (seqpos[(q) % SLOTS] <= (q) && ROOM_FAST(q))
#else
#define E3_ROOM(q)      (ROOM_A(q))
#endif
/* E2-E3 would skip sender i's claim now */
#define E3_DUE(i)       ((i) < NS && sstate[i] == EVICTED && alive[sown[i]] && intent[i] != NONE && \
			 intent[i] < tail && seqpos[intent[i] % SLOTS] <= intent[i] && \
			 !ACTIVE_CLAIM(intent[i]) && E3_ROOM(intent[i]))

inline skip_evicted(v)
{
	q = intent[v];                                          /* E2 */
	if
	:: sstate[v] == EVICTED && q != NONE && q < tail &&     /* E3 */
	   !ACTIVE_CLAIM(q) && E3_ROOM(q) ->
		k = q % SLOTS;
#ifdef QUAR_OWNER
		if
		:: !QHOLDS(k) -> quar_idx[k] = v                /* quar_owner, quar_index */
		:: else                                         /* an earlier quarantine is kept */
		fi;
#endif
		if
		:: seqpos[k] < q + 1 ->                         /* CAS seq upward */
			check_I2(q);
			seqpos[k] = q + 1; seqskip[k] = 1; seqquar[k] = 1;
			resolved = resolved | BIT(q)
		:: else
		fi
	:: else
	fi;
	q = 0; k = 0
}

/*
 * sender.c's E3 test for the ACTIVE claimers: every record but the evicted
 * one (`k != i` in skip_evicted); -DFIX_E3SELF: every record, the evicted
 * one included (it is not ACTIVE while its evicted owner holds it).
 */
#define ACLX(i, q, v)   (((i) != (v) || FIX_SELF) && ACL(i, q))
#ifdef FIX_E3SELF
#define FIX_SELF 1
#else
#define FIX_SELF 0
#endif
#if NS == 2
#define ACTIVE_CLAIM_X(q, v) (ACLX(0, q, v) || ACLX(1, q, v))
#elif NS == 3
#define ACTIVE_CLAIM_X(q, v) (ACLX(0, q, v) || ACLX(1, q, v) || ACLX(2, q, v))
#elif NS == 4
#define ACTIVE_CLAIM_X(q, v) (ACLX(0, q, v) || ACLX(1, q, v) || ACLX(2, q, v) || ACLX(3, q, v))
#endif

/*
 * skip_evicted of sender.c in one step (-DPENDING): E2, E3; a skip that
 * waits for room sets evict_pending (zimp_evict_sender, complete_evictions).
 */
#define E3_DUE_C(i)     ((i) < NS && sstate[i] == EVICTED && alive[sown[i]] && intent[i] != NONE && \
			 intent[i] < tail && seqpos[intent[i] % SLOTS] <= intent[i] && \
			 !ACTIVE_CLAIM_X(intent[i], i) && ROOM_A(intent[i]))
#define ANY_DUE_C       (E3_DUE_C(0) || E3_DUE_C(1) || E3_DUE_C(2) || E3_DUE_C(3))
#define EVCL(i, q)      ((i) < NS && sstate[i] == EVICTED && intent[i] == (q))
#define NUDGE(q)        (EVCL(0, q) || EVCL(1, q) || EVCL(2, q) || EVCL(3, q))

inline skip_evicted_c(v, eq, ek)
{
	eq = intent[v];
	if
	:: sstate[v] == EVICTED && alive[sown[v]] && eq != NONE && eq < tail &&
	   seqpos[eq % SLOTS] <= eq && !ACTIVE_CLAIM_X(eq, v) ->
		if
		:: !ROOM_A(eq) -> evict_pending = 1                      /* SKIP_WAITS */
		:: else ->
			ek = eq % SLOTS;
			check_I2(eq);
			seqpos[ek] = eq + 1; seqskip[ek] = 1; seqquar[ek] = 1;
			resolved = resolved | BIT(eq)
		fi
	:: else
	fi;
	eq = 0; ek = 0
}

/* complete_evictions: clear evict_pending, retry E3 for every live evicted sender */
inline complete_evictions(ei, eq, ek)
{
	evict_pending = 0;
	for (ei : 0 .. NS - 1) {
		skip_evicted_c(ei, eq, ek)
	}
	ei = 0
}

/*
 * Faults. A process dies (alive := 0) or stops for good (stopped := 1) at
 * any of its steps: FP is a fault point before each shared-memory step,
 * FAULTS are the same choices inside each wait. A process takes no step
 * after its fault, which is what a kill or SIGSTOP between two of its
 * steps does; its record stays as it was.
 */
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

/* ---- sender: zimp_sender_open; MSGS times zimp_loan, write, zimp_publish; zimp_sender_close ---- */
#define S_HELD    1
#define S_SKIPPED 2
#define S_RESET   3
#define S_LOANED  4

/* a record the spare sender may take: its member's process is dead (D2, J0 pass 2) */
#define SDEAD(i)        ((i) < NS && !alive[sown[i]])
#define PICK_D(i)       :: SDEAD(i) -> rec = i

proctype sender(byte me)
{
	byte t, k, mh, jseen, land, m, ii, what, rec = me;
	byte tmo = TIMEOUTS, reopen = REOPENS, unl = UNLOANS;
#ifdef PENDING
	byte ei, eq, ek;
#endif
	bit ok;

open:	skip;
#if SPARE
	if
	:: me == SPARE_P ->
		atomic {                                /* J0 pass 2: a dead member's record */
			(SDEAD(0) || SDEAD(1) || SDEAD(2) || SDEAD(3)) ->
			if
			PICK_D(0)
			PICK_D(1)
			PICK_D(2)
			PICK_D(3)
			fi
		}
	:: else
	fi;
#endif
	d_step {
		sstate[rec] = ACTIVE;                    /* its record (J0 for a sender) */
		sown[rec] = me;
		sev[rec] = 0;
		loan_slot[rec] = NONE;
#if defined(E3STEPS) || SPARE
		sgen[rec]++;                            /* the owner word's generation */
#endif
		intent[rec] = NONE;
		opened = 1;
		jseen = joins;
		min_head(mh, tail)
	}
	do
	:: m == (me == 0 -> MSGS0 : MSGS) -> break
	:: else ->
S0:		FP(me);
#ifdef PENDING
		if                                      /* pending_evictions: a sender call retries E3 */
		:: evict_pending -> d_step { complete_evictions(ei, eq, ek) }
		:: else
		fi;
#endif
#ifdef IMPL
		if                                      /* membership: an evicted sender claims nothing */
		:: sstate[rec] == EVICTED -> goto close
		:: else
		fi;
#endif
		d_step {
			t = tail;
			assert(t + 1 < MAXPOS);
			/* S0(a): the cached minimum head, rescanned when it says no or joins changed */
			if
			:: joins == jseen && t < mh + SLOTS
			:: else -> jseen = joins; min_head(mh, t)
			fi;
			/* S0(b): t - slots resolved (seq, else the slow check for a live claimer) */
			ok = (t < mh + SLOTS && ROOM_B(t));
			if
			:: ok -> intent[rec] = t         /* S1 */
			:: else -> intent[rec] = NONE    /* no room: nothing held while waiting */
			fi
		}
		if
		:: !ok ->
S0_wait:		if                              /* until S0 would find room (futex, 10 ms checks) */
			:: ((joins == jseen && tail < mh + SLOTS) || ROOM_A(tail)) && ROOM_B(tail) -> goto S0
#ifdef PENDING
			:: ANY_DUE_C -> d_step { complete_evictions(ei, eq, ek) }; goto S0_wait   /* blocked_slow */
#endif
			:: tmo > 0 && !(((joins == jseen && tail < mh + SLOTS) || ROOM_A(tail)) && ROOM_B(tail)) ->
				tmo--; m++; goto next   /* -ETIMEDOUT: not sent */
			FAULTS(me)
			fi
		:: else
		fi;
		FP(me);
S2:		d_step {                                /* CAS tail t -> t+1 */
			if
			:: tail == t -> tail++; ok = 1; check_I1(); check_I6()
			:: else ->
				ok = 0;
#ifdef IMPL
				intent[rec] = NONE               /* the claim failed: no stale intent */
#endif
			fi
		}
		if
		:: !ok -> goto S0                       /* back to S0 with the new tail */
		:: else
		fi;
#ifdef IMPL
		FP(me);
		if                                      /* evicted between the checks: never ours */
		:: sstate[rec] == EVICTED -> intent[rec] = NONE; goto close
		:: else
		fi;
#endif
S3:		FP(me);
		d_step {
			/* S3: a join since the view of S0: rescan */
			if
			:: joins != jseen -> jseen = joins; min_head(mh, t); ok = (t < mh + SLOTS)
			:: else -> ok = 1
			fi;
			k = t % SLOTS;
			if
			:: !ok -> what = S_HELD             /* a joiner holds the slot */
#if !defined(QUAR_OWNER) || defined(FIX_OWNSKIP)
			:: ok && seqpos[k] > t ->           /* t itself was skipped (E3): no loan */
				assert(sev[rec]);               /* -ECONNRESET only once evicted */
				intent[rec] = NONE;
				what = S_RESET
			:: ok && seqpos[k] <= t && QHOLDS_T(k, t) ->
#else
			:: ok && QHOLDS(k) ->               /* S4: quarantined for a live evicted sender */
#endif
				if
				:: seqpos[k] < t + 1 ->         /* skip t: CAS seq upward (P2's rule) */
					check_I2(t);
					seqpos[k] = t + 1; seqskip[k] = 1; seqquar[k] = 1;
					resolved = resolved | BIT(t)
				:: else
				fi;
				intent[rec] = NONE;
				land++;
				what = S_SKIPPED
#if !defined(QUAR_OWNER) || defined(FIX_OWNSKIP)
			:: ok && seqpos[k] <= t && !QHOLDS_T(k, t) ->
#else
			:: ok && !QHOLDS(k) ->
#endif
				/* the loan points at t's slot data; the caller writes it (W) */
				loan_slot[rec] = k;
				check_writer(rec, k);
				check_I2(t);
				data[k] = t;
				/* P0: evicted meanwhile: -ECONNRESET */
				if
				:: sstate[rec] == EVICTED ->
					intent[rec] = NONE; loan_slot[rec] = NONE;
					what = S_RESET
				:: else -> what = S_LOANED
				fi
			fi
		}
		if
		:: what == S_HELD ->                    /* S3: wait holding t */
S3_wait:		if
			:: ROOM_A(t) -> goto S3
#ifdef PENDING
			:: ANY_DUE_C -> d_step { complete_evictions(ei, eq, ek) }; goto S3_wait   /* blocked_slow */
#endif
			:: tmo > 0 && !ROOM_A(t) ->
				tmo--;
				intent[rec] = NONE;      /* -ETIMEDOUT: t is abandoned */
				m++;
				goto next
			FAULTS(me)
			fi
		:: what == S_SKIPPED ->                 /* S4: back to S0 */
			if
			:: land < SLOTS
			:: land >= SLOTS ->             /* a full ring of quarantined slots waits like no room */
SQ_wait:			if
				:: !ALL_QUAR -> land = 0
				:: tmo > 0 && ALL_QUAR -> tmo--; m++; goto next
#ifdef PENDING
				:: ANY_DUE_C -> d_step { complete_evictions(ei, eq, ek) }; goto SQ_wait
#endif
				FAULTS(me)
				fi
			fi;
			what = 0;
			goto S0
		:: what == S_RESET -> goto close
		:: what == S_LOANED
		:: what == S_LOANED && reopen > 0 -> goto close        /* closes holding the loan */
		:: what == S_LOANED && unl > 0 -> unl--; goto W1        /* zimp_unloan */
		fi;
		/* P1 (len, sender, crc: plain stores) belongs to W */
		FP(me);
P2:		d_step {                                /* CAS seq upward to t+1; P3 */
			/* past t only once evicted: skipped by E3, then later claims skipped by S4 */
			assert(seqpos[k] <= t + 1 || sstate[rec] == EVICTED);
			if
			:: seqpos[k] < t + 1 ->
				check_I2(t);
				seqpos[k] = t + 1; seqskip[k] = 0; seqquar[k] = 0;
				on_publish(t);
				ok = 1
			:: else -> ok = 0               /* position(seq) >= t: an evictor skipped t first */
			fi;
			loan_slot[rec] = NONE;
			intent[rec] = NONE;              /* P3 */
			t = 0; k = 0; land = 0; what = 0
		}
		/* P4: wake-ups are implicit: every wait blocks on its exact condition */
		if
		:: !ok -> assert(sev[rec]); goto close  /* -ECONNRESET, only once evicted */
		:: else -> m++; ok = 0
		fi;
#ifdef PENDING
		if                                      /* pending_evictions at the end of zimp_publish */
		:: evict_pending -> d_step { complete_evictions(ei, eq, ek) }
		:: else
		fi;
#endif
		goto next;
W1:		FP(me);
		d_step {                                /* W1: CAS seq upward to SKIP(t), no QUAR; W2 */
			assert(seqpos[k] <= t + 1 || sstate[rec] == EVICTED);
			if
			:: seqpos[k] < t + 1 ->
				check_I2(t);
				seqpos[k] = t + 1; seqskip[k] = 1; seqquar[k] = 0;
				resolved = resolved | BIT(t);
				ok = 1
			:: else -> ok = 0               /* an evictor skipped t first */
			fi;
			loan_slot[rec] = NONE;
			intent[rec] = NONE;              /* W2 */
			t = 0; k = 0; land = 0; what = 0
		}
		/* W3: wake-ups are implicit */
		if
		:: !ok -> assert(sev[rec]); goto close  /* -ECONNRESET, only once evicted */
		:: else -> m++; ok = 0
		fi;
next:		skip
	od;
close:
	FP(me);
#if defined(PENDING) && defined(FIX_PENDING)
	if                                              /* zimp_sender_close retries E3 first */
	:: evict_pending -> d_step { complete_evictions(ei, eq, ek) }
	:: else
	fi;
#endif
L1:	d_step {                                        /* a held claim becomes abandoned */
		intent[rec] = NONE; sstate[rec] = FREE; loan_slot[rec] = NONE; sev[rec] = 0;
		t = 0; k = 0; ok = 0; what = 0; land = 0
	}
	if
	:: reopen > 0 && m < (me == 0 -> MSGS0 : MSGS) -> reopen--; goto open
	:: else -> pdone[me] = 1
	fi;
dead:	skip
}

/* ---- receiver: zimp_receiver_open; zimp_recv until -EPIPE, -ECONNRESET or a close ---- */
#define R_READ    1
#define R_ADV     2
#define R_RESET   3
#define R_EPIPE   4
#define R_WAIT    5

/* the receiver's R1-R5 would not wait any more */
#define R_READY(r, k)   (seqpos[k] > rpos[r] || !MEMBER(r) || \
			 (tail > rpos[r] && !CLAIM_LIVE(rpos[r])) || \
			 (tail == rpos[r] && !ANY_ACTIVE && opened))

proctype receiver(byte r)
{
	byte rec = NONE, k, q, ii, d, what;
	byte jl = RJOINS, lv = LEAVES;
	int pend;

	do
	:: jl > 0 ->
		jl--;
		FP(RP(r));
J0:		d_step {                                /* a FREE record, else a dead member's */
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
				head[rec] = 0           /* J1: hold every slot until the start is known */
			:: else
			fi
		}
		if
		:: rec == NONE -> goto next_open        /* -EUSERS */
		:: else
		fi;
		FP(RP(r));
J2:		joins++;
		FP(RP(r));
J3:		d_step {                                /* t0 := tail; the claims pending below it */
			rstart[r] = tail;
			pend = 0;
			for (ii : 0 .. NS - 1) {
				q = intent[ii];
				if
				:: q != NONE && q < rstart[r] && rstart[r] - q <= SLOTS &&
				   seqpos[q % SLOTS] <= q && SLIVE(ii) ->
					pend = pend | BIT(q)
				:: else
				fi
			}
			q = 0;
			/* J4: head := min(pending, t0) */
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
			check_I6();
			pend = 0
		}
		/* the open returned: from here on every publication is owed (I4) */
		do
		:: lv > 0 -> lv--; goto leave           /* zimp_receiver_close */
		:: true ->
R1:			FP(RP(r));
			d_step {                        /* R1: s := seq of pos's slot; R5: the slow check */
				k = rpos[r] % SLOTS;
				if
				:: BEFORE_START(r) -> what = R_ADV      /* below t0, not pending at J3 */
				:: !BEFORE_START(r) && seqpos[k] == rpos[r] + 1 && !seqskip[k] ->
					what = R_READ;                  /* published */
					d = data[k]                     /* R2: read in place or copy out */
				:: !BEFORE_START(r) && seqpos[k] == rpos[r] + 1 && seqskip[k] ->
					what = R_ADV                    /* skipped */
				:: !BEFORE_START(r) && seqpos[k] > rpos[r] + 1 ->
					assert(!MEMBER(r));     /* reused under us: -EPROTO is impossible (I3) */
					what = R_RESET
				:: !BEFORE_START(r) && seqpos[k] < rpos[r] + 1 ->
					if
					:: !MEMBER(r) -> what = R_RESET
					:: else ->
						assert(tail >= rpos[r]);        /* R5: -EPROTO is impossible (I0) */
						if
						:: tail == rpos[r] && !ANY_ACTIVE && opened ->
							/* -EPIPE: everything owed was delivered */
							assert((must[r] & ~got[r]) == 0);
							rjoined[r] = 0; jl = 0;
							what = R_EPIPE
						:: tail == rpos[r] && !(!ANY_ACTIVE && opened) ->
							what = R_WAIT   /* nothing claimed */
						:: tail > rpos[r] && CLAIM_LIVE(rpos[r]) ->
#ifdef PENDING
							if      /* nudge_evicted: an evicted claimer: ask senders to retry E3 */
							:: NUDGE(rpos[r]) -> evict_pending = 1
							:: else
							fi;
#endif
							what = R_WAIT   /* a live claimer holds pos */
						:: tail > rpos[r] && !CLAIM_LIVE(rpos[r]) ->
							what = R_ADV    /* abandoned: advance */
						fi
					fi
				fi;
				if
				:: what == R_ADV ->             /* R3 at once: head := pos + 1 */
					assert(!(must[r] & BIT(rpos[r])));      /* I4: nothing owed is passed over */
					rpos[r]++;
					head[rec] = rpos[r];
					assert(rpos[r] <= tail);
					what = 0
				:: what == R_WAIT -> rwait[r] = 1
				:: else
				fi
			}
			if
			:: what == R_READ ->
R2:				FP(RP(r));
				d_step {                        /* R2: re-check seq and membership; R3 */
					if
					:: seqpos[k] == rpos[r] + 1 && !seqskip[k] && MEMBER(r) ->
						assert(d == rpos[r]);           /* the slot held this message */
						assert(!(got[r] & BIT(rpos[r])));  /* once */
						got[r] = got[r] | BIT(rpos[r]);
						rpos[r]++;
						head[rec] = rpos[r];    /* R3 */
						assert(rpos[r] <= tail);
						what = 0
					:: !MEMBER(r) -> what = R_RESET
					:: else -> assert(false)        /* changed under a member */
					fi;
					d = 0
				}
			:: what == R_WAIT ->
R_wait:				if                              /* futex, 10 ms liveness checks */
				:: R_READY(r, k) -> d_step { what = 0; rwait[r] = 0 }
				:: lv > 0 -> lv--; d_step { what = 0; rwait[r] = 0 }; goto leave
				FAULTS(RP(r))
				fi
			:: else
			fi;
			/* R4: wake-ups are implicit: every wait blocks on its exact condition */
			if
			:: what == R_RESET -> goto leave        /* -ECONNRESET: evicted; the caller closes */
			:: what == R_EPIPE -> goto leave        /* -EPIPE: the channel ended; close */
			:: else
			fi
		od;
leave:
		FP(RP(r));
L1:		d_step {
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
/* no more faults from now on: lets `timeout` see a system that is stuck for good */
proctype quiet()
{
	d_step { crash_left = 0; stop_left = 0 }
}
#endif

/* ---- evictor: zimp_evict_sender (E1-E3) and zimp_evict (ER), called by a sender not modelled ---- */
#define CAN_EVS(i)      ((i) < NS && SLIVE(i))
#define CAN_EVR(k)      ((k) < NR && rstate[k] == ACTIVE)
#define PICK_S(i)       :: CAN_EVS(i) -> v = i
#define PICK_R(k)       :: CAN_EVR(k) -> rstate[k] = EVICTED

/* the E3 retry of complete_evictions (-DE3STEPS: any live evicted sender, at any time) */
#define CAND(i)         ((i) < NS && sstate[i] == EVICTED && alive[sown[i]])
#ifdef PENDING
#define E3_SKIP(v)      skip_evicted_c(v, q, k)
#else
#define E3_SKIP(v)      skip_evicted(v)
#endif

proctype evictor()
{
	byte v, q, k, ii, jj, og;
	bit ok;

end_evictor:
	do
	:: atomic {
		evict_left > 0 && (CAN_EVS(0) || CAN_EVS(1) || CAN_EVS(2) || CAN_EVS(3)) ->
		evict_left--;
		if
		PICK_S(0)
		PICK_S(1)
		PICK_S(2)
		PICK_S(3)
		fi
	   }
E1:		d_step {                                /* CAS owner ACTIVE -> EVICTED (EVICTED: redo E2-E3) */
			if
			:: sstate[v] == ACTIVE -> sstate[v] = EVICTED; sev[v] = 1
			:: else
			fi;
			og = sgen[v];                   /* o: the evicted owner word */
			if
			:: sstate[v] == FREE || !alive[sown[v]] -> v = NONE  /* -ENOENT (dead: abandoned anyway) */
			:: else
			fi
		}
		if
		:: v == NONE -> v = 0; og = 0
		:: else ->
#ifdef E3STEPS
			goto e2
#else
E2:			d_step { E3_SKIP(v); v = 0; og = 0 }    /* E2, E3 */
#endif
		fi
#ifdef E3STEPS
	:: d_step {                                     /* complete_evictions: o := owner, a live evicted one */
		(CAND(0) || CAND(1) || CAND(2) || CAND(3)) ->
		if
		:: CAND(0) -> v = 0
		:: CAND(1) -> v = 1
		:: CAND(2) -> v = 2
		:: CAND(3) -> v = 3
		fi;
		og = sgen[v]
	   }
		goto e2
#elif !defined(PENDING)
	:: atomic {                                     /* E3 retried by a blocked sender's slow check */
		(E3_DUE(0) || E3_DUE(1) || E3_DUE(2) || E3_DUE(3)) ->
		if
		:: E3_DUE(0) -> v = 0
		:: E3_DUE(1) -> v = 1
		:: E3_DUE(2) -> v = 2
		:: E3_DUE(3) -> v = 3
		fi
	   }
E3:		d_step { skip_evicted(v); v = 0 }
#endif
	:: atomic {                                     /* ER: CAS owner ACTIVE -> EVICTED */
		evict_left > 0 && (CAN_EVR(0) || CAN_EVR(1) || CAN_EVR(2)) ->
		evict_left--;
		if
		PICK_R(0)
		PICK_R(1)
		PICK_R(2)
		fi
	   }
#if defined(PENDING) && defined(FIX_PENDING)
		d_step { complete_evictions(ii, q, k) }         /* zimp_evict retries E3 */
#endif
#if PROGRESS
	:: timeout && sweep_needed ->                   /* stuck: evict the stopped ones zimp_stalled* name */
		d_step {
			sweep_needed = 0;
			for (jj : 0 .. 1) {             /* twice: a repeated eviction redoes E2-E3 */
				for (v : 0 .. NS - 1) {
					if
					:: pstopped[sown[v]] && SLIVE(v) ->
						if
						:: sstate[v] == ACTIVE -> sstate[v] = EVICTED; sev[v] = 1  /* E1 */
						:: else
						fi;
						E3_SKIP(v)
					:: else
					fi
				}
			}
			for (v : 0 .. NR - 1) {
				if
				:: pstopped[RP(v)] && MEMBER(v) ->              /* joined (J0) or opened */
					rstate[rrec[v]] = EVICTED;      /* ER */
#if defined(PENDING) && defined(FIX_PENDING)
					complete_evictions(ii, q, k)    /* zimp_evict retries E3 */
#else
					skip
#endif
				:: else
				fi
			}
			v = 0
		}
#endif
	od;
#ifdef E3STEPS
	/* skip_evicted(s, v, o) of sender.c, one shared-memory access per step */
e2:	q = intent[v];                                  /* E2: q := intent */
	ok = (sstate[v] == EVICTED && sgen[v] == og);   /* E2: owner still o */
	if
	:: ok -> ok = (q != NONE && q < tail)           /* E2: q < tail */
	:: else
	fi;
	if
	:: ok -> ok = (seqpos[q % SLOTS] <= q)          /* E3: not published or skipped yet */
	:: else
	fi;
	if
	:: ok ->
E3a:		d_step {                                /* E3: no ACTIVE live claimer of q; room */
			ok = !ACTIVE_CLAIM_X(q, v);
			if
			:: ok && !ROOM_A(q) -> ok = 0   /* SKIP_WAITS: retried later */
			:: else
			fi
		}
		if
		:: ok ->
E3b:			d_step {                        /* CAS seq upward to SKIP(q)|QUAR */
				k = q % SLOTS;
				if
				:: seqpos[k] < q + 1 ->
					check_I2(q);
					seqpos[k] = q + 1; seqskip[k] = 1; seqquar[k] = 1;
					resolved = resolved | BIT(q)
				:: else
				fi
			}
		:: else
		fi
	:: else
	fi;
	d_step { v = 0; q = 0; k = 0; og = 0; ok = 0 };
	goto end_evictor
#endif
}

#if PROGRESS
/*
 * Progress: once nothing can move and every stopped process was evicted,
 * every live sender that is not stopped has finished, and no live receiver
 * that is not stopped waits for a claim (waiting with nothing claimed is
 * fine: a live sender may send more).
 */
proctype watchdog()
{
	byte i;
	timeout && !sweep_needed ->
	d_step {
		for (i : 0 .. NS - 1) {
			assert(!alive[i] || pstopped[i] || pdone[i])
		}
#if SPARE
		assert(!alive[SPARE_P] || pstopped[SPARE_P] || pdone[SPARE_P]);
#endif
		for (i : 0 .. NR - 1) {
			assert(!alive[RP(i)] || pstopped[RP(i)] || !rwait[i] || tail <= rpos[i])
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
			sown[i] = i;
			run sender(i)
		}
#if SPARE
		run sender(SPARE_P);
#endif
		for (i : 0 .. NR - 1) {
			run receiver(i)
		}
		run evictor();
#if EVICTORS > 1
		run evictor();
#endif
#if PROGRESS
		run quiet();
		run watchdog();
#endif
		i = 0
	}
}
