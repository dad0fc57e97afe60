/*
 * zero.pml: ZIMP_ZERO_ON_RELEASE (docs/protocol.md Z0-Z3, zero_if_last in
 * src/core/receiver.c, zeroing_holds in src/core/sender.c), for SPIN: the
 * last receiver to finish a message zeroes it, and nobody zeroes a message
 * that someone still reads or a slot that holds a newer one.
 *
 * Shared words: `tail`, `joins`, the sender's `intent`; per slot `seq`
 * (position + 1 of its last publication, and SKIP) and its data (position
 * + 1 of the message written there, 0 never written, ZV zeroed); per
 * receiver record its state (FREE, ACTIVE, EVICTED), `head`, `done` (Z1)
 * and `zeroing` (Z0); `recv_hwm` (1 + the highest record joined).
 *
 * Processes:
 *   sender    one sender, MSGS messages, each: S0 (room from its cached
 *             minimum head; rescanned when that says no or `joins` moved:
 *             the scan frees dead receivers' records (D1), skips EVICTED
 *             ones and notes one that is zeroing (zero_watch)), S1/S2,
 *             S3 (joins moved: rescan, wait holding t for room), Z3 (while
 *             zero_watch: a claim whose slot a live EVICTED receiver may be
 *             zeroing is skipped, and the sender claims again), the write,
 *             P2, P3; then it closes.
 *   receiver  NR0 receivers open before anything is sent; each reads every
 *             position: R1 (seq: published, skipped, or the stream ended),
 *             the data, R2's re-check (seq and membership), then Z1 (done
 *             := q + 1), Z2 (every other ACTIVE record below recv_hwm: head
 *             <= q and done <= q means it still reads q: not the last),
 *             Z0 (zeroing := q + 1; still a member and seq still q + 1:
 *             zero), the memset, zeroing := 0, R3 (head := q + 1).
 *   joiner    JOINERS (0 or 1) receivers opening at any time on record
 *             NR0: J0/J1 (ACTIVE, head 0), J2 (joins += 1), recv_hwm raised,
 *             J3 (t0 := tail, the sender's pending claim), Z5 (zero_passed:
 *             for each published position from t0 - SLOTS below its first,
 *             Z1, Z2, Z0 and the memset, as its last reader), done and head
 *             := its first position; then it reads like the others.
 *   evictor   EVICTS calls of zimp_evict on any ACTIVE receiver at any
 *             time, and, once nothing else can move, zimp_evict of every
 *             stopped receiver that still holds the ring (what a supervisor
 *             does when the sender's stall timeout fires: zimp_stalled).
 *   faults    a receiver stops for good (SIGSTOP: STOPS in all) or dies
 *             (CRASHES) before any of its steps, the memset included.
 *
 * Abstractions: sequential consistency (every word the steps use is
 * seq_cst or release/acquire in the code); one sender, never killed; a
 * memset is one step (a receiver stopped before it may be continued at any
 * later time, so a slot it may still zero must stay out of use: asserted
 * at every write, not only at the memset); liveness is exact (the pidfd).
 *
 * Checked:
 *   1. every message a receiver delivers (it is still a member and the
 *      slot's seq still names the position after the read) holds its data:
 *      never zeroed before its last reader finished, never overwritten;
 *   2. a memset finds the slot holding its message or already zeroed, and
 *      no sender writes a slot that a live receiver may still zero (Z0's
 *      check passed, the memset not done) for an older position (Z3);
 *   3. nobody is stuck: once nothing can move (and the stopped receivers
 *      that held the ring were evicted), the sender has
 *      sent every message and closed, and every receiver has ended, is
 *      stopped or is dead (asserted, so that it holds under pan -E too);
 *   4. with -DCOMPLETE (no faults, no evictions): once everyone finished,
 *      every slot's data is zeroed (each message had a last reader that
 *      zeroed it).
 *
 * Must-fail variants: -DBUG_NO_Z3 (the sender does not keep off a slot an
 * EVICTED receiver is zeroing), -DBUG_Z0_LATE (zeroing announced after the
 * membership check: an eviction in between hides it from the scans),
 * -DBUG_Z1_LATE (done stored after the scan: two last readers each see the
 * other still reading, and nobody zeroes), -DBUG_HWM_LATE (a joiner raises
 * recv_hwm after it reads tail: a scan that misses it zeroes a message it
 * is about to read), -DBUG_NO_STALL (nobody evicts the stalled: a stopped receiver
 * holds the ring, which property 3 must see), -DBUG_NO_SWEEP (no Z5: a
 * message the others finished while a receiver joined stays unzeroed, the
 * gap this model found in the code), -DBUG_SWEEP_RANGE (Z5 from position 0:
 * the joiner zeroes a slot that a sender claimed before it joined).
 */

#ifndef NR0
#define NR0 2           /* receivers open from the start: records 0..NR0-1 */
#endif
#ifndef JOINERS
#define JOINERS 0       /* 0 or 1: a receiver that joins at any time, on record NR0 */
#endif
#ifndef SLOTS
#define SLOTS 2
#endif
#ifndef MSGS
#define MSGS 3
#endif
#ifndef EVICTS
#define EVICTS 1
#endif
#ifndef STOPS
#define STOPS 1
#endif
#ifndef CRASHES
#define CRASHES 0
#endif

#define NREC    (NR0 + JOINERS)
#define NONE    255
#define ZV      254             /* zeroed data */
#define FREE    0
#define ACTIVE  1
#define EVICTED 2

byte tail;
byte joins;
byte intent = NONE;
bit  sender_closed;
byte seqpos[SLOTS];             /* position + 1 of the last publication (or skip) */
bit  seqskip[SLOTS];
byte data[SLOTS];               /* position + 1 of the message written there; ZV zeroed */

byte rstate[NREC], head[NREC], done[NREC], zeroing[NREC];
bit  alive[NREC];
byte hwm = NR0;

byte stops_left = STOPS, crashes_left = CRASHES;

/* ghosts */
bit  writing;                   /* the sender is between its write and P2 ... */
byte wslot;                     /* ... of this slot */
bit  zp[NREC];                  /* receiver between Z0's passed check and its memset ... */
byte zq[NREC];                  /* ... of this position */
bit  halted[NREC];
byte finished, nstopped, ndead; /* receivers that ended, stopped for good, died */

/* A live ACTIVE receiver holds position t's slot (S0(a)); dead ones are freed by D1. */
#define RH(i, t)        (rstate[i] == ACTIVE && alive[i] && head[i] + SLOTS <= (t))
#if NREC == 1
#define ROOM(t)         (!RH(0, t))
#define ZPEND(k, t)     (zp[0] && zq[0] % SLOTS == (k) && zq[0] != (t))
#elif NREC == 2
#define ROOM(t)         (!RH(0, t) && !RH(1, t))
#define ZPEND(k, t)     ((zp[0] && zq[0] % SLOTS == (k) && zq[0] != (t)) || \
                         (zp[1] && zq[1] % SLOTS == (k) && zq[1] != (t)))
#else
#define ROOM(t)         (!RH(0, t) && !RH(1, t) && !RH(2, t))
#define ZPEND(k, t)     ((zp[0] && zq[0] % SLOTS == (k) && zq[0] != (t)) || \
                         (zp[1] && zq[1] % SLOTS == (k) && zq[1] != (t)) || \
                         (zp[2] && zq[2] % SLOTS == (k) && zq[2] != (t)))
#endif

/*
 * zimp__min_head_of with the slow check: min over live ACTIVE heads (at
 * most t), D1 for dead ones, and zero_watch for EVICTED ones zeroing.
 */
inline scan(mh, zw, t)
{
	mh = t;
	i = 0;
	do
	:: i == NREC -> break
	:: i < NREC ->
		if
		:: rstate[i] == ACTIVE && !alive[i] -> rstate[i] = FREE          /* D1 */
		:: rstate[i] == ACTIVE && alive[i] && head[i] < mh -> mh = head[i]
#ifndef BUG_NO_Z3
		:: rstate[i] == EVICTED && zeroing[i] != 0 -> zw = 1
#endif
		:: else -> skip
		fi;
		i++
	od
}

/* Z3's zeroing_holds(t): a live EVICTED receiver may be zeroing t's slot. */
inline zeroing_holds(t, held, zw)
{
	held = 0;
	any = 0;
	i = 0;
	do
	:: i == NREC -> break
	:: i < NREC ->
		if
		:: rstate[i] == EVICTED && zeroing[i] != 0 ->
			if
			:: zeroing[i] - 1 < t && (t - (zeroing[i] - 1)) % SLOTS == 0 ->
				held = held || alive[i]
			:: else -> any = any || alive[i]
			fi
		:: else -> skip
		fi;
		i++
	od;
	if
	:: !held -> zw = any
	:: else -> skip
	fi
}

proctype sender()
{
	byte t, mh, jseen, k, m, i;
	bit zw, held, any;
	do
	:: m == MSGS -> break
	:: else ->
S0:		atomic {
			t = tail;
			if
			:: t < mh + SLOTS && joins == jseen -> skip
			:: else -> jseen = joins; scan(mh, zw, t)
			fi
		}
		if
		:: t >= mh + SLOTS ->
			/* S0 wait: until a rescan finds room (the futex, the 10 ms checks) */
			atomic { ROOM(t) -> jseen = joins; scan(mh, zw, t) };
			goto S0
		:: else -> skip
		fi;
		intent = t;                                                     /* S1 */
		tail = t + 1;                                                   /* S2, alone */
S3:		atomic {
			if
			:: joins != jseen -> jseen = joins; scan(mh, zw, t)
			:: else -> skip
			fi
		}
		if
		:: t >= mh + SLOTS ->
			atomic { ROOM(t) -> jseen = joins; scan(mh, zw, t) };
			goto S3
		:: else -> skip
		fi;
		k = t % SLOTS;
		if
		:: zw ->
			atomic {                                                /* Z3 */
				zeroing_holds(t, held, zw);
				if
				:: held ->                                      /* skip t, claim again */
					seqpos[k] = t + 1; seqskip[k] = 1; intent = NONE;
					assert(t < 40)
				:: else -> skip
				fi
			};
			if
			:: held -> goto S0
			:: else -> skip
			fi
		:: else -> skip
		fi;
		atomic {                                                        /* the loan's write */
			assert(!ZPEND(k, t));
			writing = 1; wslot = k;
			data[k] = t + 1
		};
		atomic {                                                        /* P2, P3 */
			seqpos[k] = t + 1; seqskip[k] = 0;
			writing = 0;
			intent = NONE
		};
		m++
	od;
	sender_closed = 1
}

/* Before a receiver's step: it may stop for good, or die, there. */
#define FAULT(r) \
	if \
	:: atomic { stops_left > 0 -> stops_left--; halted[r] = 1; nstopped++ }; goto halt \
	:: atomic { crashes_left > 0 -> crashes_left--; alive[r] = 0; zp[r] = 0; ndead++ }; goto dead \
	:: true -> skip \
	fi

/* Z1, Z2, Z0 and the memset for position qq (zero_if_last); `judge`: Z5 counts a dead reader as done. */
inline zero_if_last(qq, judge)
{
	zk = (qq) % SLOTS;
#ifndef BUG_Z1_LATE
	FAULT(r);
	done[r] = qq + 1;                                              /* Z1 */
#endif
	FAULT(r);
	n = hwm;                                                        /* Z2 */
	last = 1;
	i = 0;
	do
	:: i >= n -> break
	:: i < n && i == r -> i++
	:: i < n && i != r ->
		FAULT(r);
		a = rstate[i];
		if
		:: a != ACTIVE -> i++
		:: else ->
			FAULT(r);
			h = head[i];
			FAULT(r);
			d = done[i];
			if
			:: h <= qq && d <= qq && (!judge || alive[i]) -> last = 0; break   /* still reads qq (Z5: if alive) */
			:: else -> i++
			fi
		fi
	od;
#ifdef BUG_Z1_LATE
	FAULT(r);
	done[r] = qq + 1;
#endif
	if
	:: last ->
#ifndef BUG_Z0_LATE
		FAULT(r);
		zeroing[r] = qq + 1;                                   /* Z0 */
#endif
		FAULT(r);
		atomic {
			if
			:: rstate[r] == ACTIVE && seqpos[zk] == qq + 1 && !seqskip[zk] ->
				zp[r] = 1; zq[r] = qq
			:: else -> skip
			fi
		};
#ifdef BUG_Z0_LATE
		FAULT(r);
		zeroing[r] = qq + 1;
#endif
		FAULT(r);
		atomic {                                                /* the memset */
			if
			:: zp[r] ->
				assert(data[zk] == qq + 1 || data[zk] == ZV);
				assert(!(writing && wslot == zk));
				data[zk] = ZV;
				zp[r] = 0
			:: else -> skip
			fi
		};
		FAULT(r);
		zeroing[r] = 0
	:: else -> skip
	fi;
}

proctype receiver(byte r; bit joiner)
{
	byte pos, k, v, i, n, a, h, d, q, t0, zk;
	bit last;

	if
	:: joiner ->
		FAULT(r);
		atomic { rstate[r] = ACTIVE; head[r] = 0; done[r] = 0 };        /* J0, J1 */
		FAULT(r);
		joins++;                                                        /* J2 */
#ifndef BUG_HWM_LATE
		FAULT(r);
		atomic { if :: hwm < r + 1 -> hwm = r + 1 :: else -> skip fi };
#endif
		FAULT(r);
		atomic {                                                        /* J3 */
			pos = tail;
			t0 = pos;
			q = intent;
			if
			:: q != NONE && q < pos && pos - q <= SLOTS && seqpos[q % SLOTS] <= q -> pos = q
			:: else -> skip
			fi
		};
#ifdef BUG_HWM_LATE
		FAULT(r);
		atomic { if :: hwm < r + 1 -> hwm = r + 1 :: else -> skip fi };
#endif
#ifndef BUG_NO_SWEEP
		/* Z5 (zero_passed): every position from t0 - SLOTS below its first; its head 0 holds them */
		if
#ifndef BUG_SWEEP_RANGE
		:: t0 >= SLOTS -> q = t0 - SLOTS
#endif
		:: else -> q = 0
		fi;
		do
		:: q >= pos -> break
		:: q < pos ->
			FAULT(r);
			if
			:: seqpos[q % SLOTS] == q + 1 && !seqskip[q % SLOTS] -> zero_if_last(q, 1)
			:: else -> skip
			fi;
			q++
		od;
#endif
		FAULT(r);
		done[r] = pos;
		FAULT(r);
		head[r] = pos
	:: else -> skip
	fi;

	do
	:: FAULT(r);
		k = pos % SLOTS;
		atomic {                                                        /* R1 */
			if
			:: rstate[r] != ACTIVE -> goto gone                     /* -ECONNRESET */
			:: seqpos[k] == pos + 1 -> skip
			:: seqpos[k] != pos + 1 && sender_closed && tail == pos -> goto gone   /* -EPIPE */
			fi;
			assert(seqpos[k] <= pos + 1)                            /* I3: we hold pos */
		};
		if
		:: seqskip[k] -> goto release                           /* skipped (Z3, SKIP) */
		:: else -> skip
		fi;
		FAULT(r);
		v = data[k];                                                    /* the read */
		FAULT(r);
		atomic {                                                        /* R2 */
			if
			:: seqpos[k] == pos + 1 && rstate[r] == ACTIVE -> assert(v == pos + 1)
			:: else -> goto gone
			fi
		};
		zero_if_last(pos, 0);
release:	FAULT(r);
		head[r] = pos + 1;                                              /* R3 */
		pos++
	od;
gone:
	atomic { rstate[r] = FREE; finished++ };                                /* close */
	goto out;
halt:
end_stopped:
	false;
dead:
out:
	skip
}

/* zimp_evict at any time; once nothing else can move, the eviction of the stalled. */
proctype evictor()
{
	byte n, i;
end_evict:
	do
	:: atomic { n < EVICTS && rstate[0] == ACTIVE -> rstate[0] = EVICTED; n++ }
#if NREC > 1
	:: atomic { n < EVICTS && rstate[1] == ACTIVE -> rstate[1] = EVICTED; n++ }
#endif
#if NREC > 2
	:: atomic { n < EVICTS && rstate[2] == ACTIVE -> rstate[2] = EVICTED; n++ }
#endif
	:: timeout ->
		atomic {
			i = 0;
			n = 0;
			do
			:: i == NREC -> break
			:: i < NREC ->
				if
#ifndef BUG_NO_STALL
				:: rstate[i] == ACTIVE && halted[i] -> rstate[i] = EVICTED; n = 1
#endif
				:: else -> skip
				fi;
				i++
			od;
			if
			:: n == 0 -> goto ended
			:: else -> n = EVICTS
			fi
		}
	od;
ended:
	/* 3: nothing can move, and nobody is stuck: the sender sent everything and closed */
	assert(sender_closed && finished + nstopped + ndead == NREC);
#ifdef COMPLETE
	/* every receiver finished reading everything: each slot's message was zeroed */
	i = 0;
	do
	:: i == SLOTS -> break
	:: i < SLOTS -> assert(data[i] == ZV || data[i] == 0); i++
	od;
#endif
	skip
}

init
{
	byte r;
	atomic {
		r = 0;
		do
		:: r == NREC -> break
		:: r < NREC ->
			alive[r] = 1;
			if
			:: r < NR0 -> rstate[r] = ACTIVE
			:: else -> skip
			fi;
			r++
		od;
		run sender();
		r = 0;
		do
		:: r == NREC -> break
		:: r < NREC -> run receiver(r, r >= NR0); r++
		od;
		run evictor()
	}
}
