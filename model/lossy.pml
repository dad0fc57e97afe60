/*
 * lossy.pml: lossy receivers next to lossless ones (model/lossy.md), for SPIN.
 *
 * The claim and publish steps of docs/protocol.md with the additions of
 * model/lossy.md: S0(a) counts lossless heads only; a sender marks its
 * slot BUSY (B1) before writing it; a lossy receiver copies (or reads in
 * place) and re-checks seq (Y2-Y3), and jumps over positions whose slot was
 * claimed again (Y4), reporting how many. Senders may die or be evicted at
 * any step (E1-E3 with the quarantine of Q1, retried whenever due); a lossy
 * receiver may stop for good at any step (it must hold nobody back).
 *
 * Data: a message is two words, written one after the other (a torn copy
 * shows two different values); a sender writes its position in both.
 *
 * Variants that must fail (each shows why a rule of model/lossy.md is there):
 *   -DNOBUSY   the sender writes the slot without marking it first (B1)
 *   -DZERO     ZIMP_ZERO_ON_RELEASE: the lossless reader zeroes the message
 *              it read last; with -DFIX_Z it marks seq ZERO first (Z4).
 * The other way to see a rewrite (model/lossy.md, "The tail check"):
 *   -DTAILCHECK no B1; Y3 re-checks seq and that tail <= pos + slots (a
 *              writer of pos's slot claimed pos + slots first).
 *   -DHALF     Y4 goes on at tail - slots/2 instead of tail - slots (must
 *              fail the check that every missed position's slot was claimed
 *              again: it counts readable positions as missed).
 */
#ifdef TAILCHECK
#define NOBUSY
#define TAIL_OK(p)      (tail <= (p) + SLOTS)
#else
#define TAIL_OK(p)      1
#endif
#ifndef NS
#define NS 2            /* senders */
#endif
#ifndef NY
#define NY 1            /* lossy receivers */
#endif
#ifndef SLOTS
#define SLOTS 2
#endif
#ifndef MSGS
#define MSGS 2          /* messages per sender */
#endif
#ifndef CRASHES
#define CRASHES 1       /* senders that die */
#endif
#ifndef EVICTS
#define EVICTS 0        /* zimp_evict_sender calls */
#endif
#ifndef YSTOPS
#define YSTOPS 1        /* lossy receivers stopped for good */
#endif
#ifndef LOSSLESS
#define LOSSLESS 1      /* 0: no lossless receiver */
#endif

#define NONE    255
#define MAXPOS  16
#define ZV      254             /* zeroed data */
#define FREE    0
#define ACTIVE  1
#define EVICTED 2
#define BIT(p)  (1 << (p))

/* shared memory */
byte tail;
byte seqpos[SLOTS];             /* position + 1 */
bit  seqskip[SLOTS], seqquar[SLOTS], seqbusy[SLOTS], seqzero[SLOTS];
byte d1[SLOTS], d2[SLOTS];      /* the message: two words */
byte sstate[NS], intent[NS];
bit  salive[NS];
byte lhead;                     /* the lossless receiver's head */

/* ghost */
bit  sdone[NS];
byte loan_slot[NS];
int  published;                 /* positions published */
int  lgot;                      /* delivered to the lossless receiver */
byte crash_left = CRASHES, evict_left = EVICTS, ystop_left = YSTOPS;
byte ypos[NY];

/* position p is final in slot k: published or skipped at p or later (B1's BUSY(p) is not) */
#define FINAL_GE(k, p)  (seqpos[k] > (p) + 1 || (seqpos[k] == (p) + 1 && !seqbusy[k]))
#define SLIVE(i)        (sstate[i] != FREE && salive[i])
#define CL(i, q)        (SLIVE(i) && intent[i] == (q))
#define CLAIM_LIVE(q)   (CL(0, q) || CL(1, q) || (NS > 2 && CL(2, q)))
#define ACL(i, q)       (sstate[i] == ACTIVE && salive[i] && intent[i] == (q))
#define ACTIVE_CLAIM(q) (ACL(0, q) || ACL(1, q) || (NS > 2 && ACL(2, q)))
#define ROOM_A(t)       (!LOSSLESS || lhead + SLOTS > (t))     /* lossless heads only */
#define ROOM_B(t)       ((t) < SLOTS || FINAL_GE((t) % SLOTS, (t) - SLOTS) || !CLAIM_LIVE((t) - SLOTS))
#define HB(i, k, t)     (SLIVE(i) && intent[i] != NONE && intent[i] < (t) && intent[i] % SLOTS == (k))
#define QHOLDS_T(k, t)  (seqquar[k] && (HB(0, k, t) || HB(1, k, t) || (NS > 2 && HB(2, k, t))))
#define SGONE(i)        (sdone[i] || !salive[i])
#define ALLDONE         (SGONE(0) && SGONE(1) && (NS < 3 || SGONE(2)))

/* a sender writes slot k for position p: nobody else may, and lossless heads are past p - slots (I2) */
inline check_write(me, k, p)
{
	for (ii : 0 .. NS - 1) {
		assert(ii == me || !salive[ii] || loan_slot[ii] != k)
	}
	assert(ROOM_A(p))
}

#define FP(me)  if :: d_step { crash_left > 0 -> crash_left--; salive[me] = 0 }; goto dead :: true fi

proctype sender(byte me)
{
	byte t, k, m, ii;
	bit ok;

	d_step { sstate[me] = ACTIVE; intent[me] = NONE }
	do
	:: m == MSGS -> break
	:: else ->
S0:		FP(me);
		if                                      /* membership */
		:: sstate[me] == EVICTED -> goto close
		:: else
		fi;
		atomic {                                /* S0 (waits until room), S1 */
			ROOM_A(tail) && ROOM_B(tail) -> t = tail; intent[me] = t
		}
		FP(me);
S2:		skip;
		d_step {
			if
			:: tail == t -> tail++; ok = 1
			:: else -> ok = 0; intent[me] = NONE
			fi
		}
		if
		:: !ok -> goto S0
		:: else
		fi;
		FP(me);
S4:		d_step {
			k = t % SLOTS;
			if
			:: FINAL_GE(k, t) -> ok = 0            /* t skipped (E3): -ECONNRESET */
			:: !FINAL_GE(k, t) && QHOLDS_T(k, t) ->
				seqpos[k] = t + 1; seqskip[k] = 1; seqquar[k] = 1; seqbusy[k] = 0;
				intent[me] = NONE; ok = 0
			:: !FINAL_GE(k, t) && !QHOLDS_T(k, t) ->
				loan_slot[me] = k;
				check_write(me, k, t);
#ifndef NOBUSY
				/* B1: CAS seq -> BUSY(t) before the loan is handed out */
				seqpos[k] = t + 1; seqbusy[k] = 1; seqskip[k] = 0; seqquar[k] = 0; seqzero[k] = 0;
#endif
				ok = 1
			fi
		}
		if
		:: !ok && intent[me] != NONE -> goto close      /* -ECONNRESET */
		:: !ok && intent[me] == NONE -> goto S0        /* skipped a quarantined slot */
		:: else
		fi;
		FP(me);
W1:		d1[k] = t;                              /* the caller writes the loan */
		FP(me);
W2:		d2[k] = t;
		FP(me);
P2:		d_step {                                /* P0, P2, P3 */
			if
			:: sstate[me] == ACTIVE && !FINAL_GE(k, t) ->
				seqpos[k] = t + 1; seqbusy[k] = 0; seqskip[k] = 0; seqquar[k] = 0; seqzero[k] = 0;
				published = published | BIT(t);
				ok = 1
			:: else -> ok = 0
			fi;
			intent[me] = NONE; loan_slot[me] = NONE
		}
		if
		:: !ok -> goto close
		:: else -> m++; ok = 0; t = 0; k = 0
		fi
	od;
close:	skip;
	d_step { intent[me] = NONE; sstate[me] = FREE; loan_slot[me] = NONE; sdone[me] = 1 }
dead:	skip
}

/* zimp_evict_sender: E1, and E2-E3 (also retried whenever it would act) */
#define E3_DUE(v)       (sstate[v] == EVICTED && salive[v] && intent[v] != NONE && intent[v] < tail && \
			 !FINAL_GE(intent[v] % SLOTS, intent[v]) && !ACTIVE_CLAIM(intent[v]) && \
			 ROOM_A(intent[v]))
proctype evictor()
{
	byte v, q;
end:
	do
	:: d_step { evict_left > 0 && SLIVE(0) && sstate[0] == ACTIVE -> evict_left--; sstate[0] = EVICTED }
	:: d_step { evict_left > 0 && SLIVE(1) && sstate[1] == ACTIVE -> evict_left--; sstate[1] = EVICTED }
	:: d_step {
		(E3_DUE(0) || E3_DUE(1)) ->
		if
		:: E3_DUE(0) -> v = 0
		:: E3_DUE(1) -> v = 1
		fi;
		q = intent[v];
		/* CAS seq upward (BUSY(q) included) to SKIP(q)|QUAR */
		seqpos[q % SLOTS] = q + 1; seqskip[q % SLOTS] = 1; seqquar[q % SLOTS] = 1;
		seqbusy[q % SLOTS] = 0; seqzero[q % SLOTS] = 0;
		v = 0; q = 0
	   }
	od
}

/* the lossless receiver: R1-R5 (open at the start; holds the ring) */
proctype lossless()
{
	byte pos, k, c1, c2;
end:
	do
	:: d_step {                                     /* R1: published */
		seqpos[pos % SLOTS] == pos + 1 && !seqskip[pos % SLOTS] && !seqbusy[pos % SLOTS] ->
		k = pos % SLOTS; c1 = d1[k]; c2 = d2[k]
	   }
		assert(c1 == pos && c2 == pos);         /* the slot held this message (R2) */
		assert(!(lgot & BIT(pos)));
		lgot = lgot | BIT(pos);
#ifdef ZERO
		/* Z0: the last lossless reader zeroes q before releasing it */
#ifdef FIX_Z
		d_step {                                /* Z4: CAS seq q+1 -> q+1|ZERO first */
			if
			:: seqpos[k] == pos + 1 && !seqbusy[k] && !seqskip[k] -> seqzero[k] = 1
			:: else -> assert(false)        /* we hold the slot */
			fi
		}
#endif
		d1[k] = ZV;
		d2[k] = ZV;
#endif
		d_step { pos++; lhead = pos; c1 = 0; c2 = 0 }   /* R3 */
	:: d_step {                                     /* R1: skipped */
		seqpos[pos % SLOTS] == pos + 1 && seqskip[pos % SLOTS] ->
		assert(!(published & BIT(pos)));
		pos++; lhead = pos
	   }
	:: d_step {                                     /* R5: abandoned */
		!FINAL_GE(pos % SLOTS, pos) && tail > pos && !CLAIM_LIVE(pos) ->
		assert(!(published & BIT(pos)));
		pos++; lhead = pos
	   }
	:: d_step {                                     /* -EPIPE: every publication delivered */
		ALLDONE && tail == pos ->
		assert(lgot == published)
	   }; break
	od
}

/*
 * A lossy receiver: Y1-Y5 of model/lossy.md. It starts at the tail; it
 * delivers increasing positions, each the published message of its position,
 * never torn; every other position it passes is a skip, an abandoned claim,
 * or counted in a gap, and it counts in a gap only positions whose slot was
 * claimed again (so their content was no longer guaranteed).
 */
proctype lossy(byte y)
{
	byte pos, k, sp, t, c1, c2, p;
	bit sk, sb, sz, lost;
	int ygot, gaps, skips;
	byte start;

	start = tail; pos = start;
top:	skip;
end:	do
	:: d_step { ystop_left > 0 -> ystop_left-- }; goto stopped
	:: d_step {                                     /* Y1: s := seq (acquire) */
		FINAL_GE(pos % SLOTS, pos) || (tail > pos && !CLAIM_LIVE(pos)) ->
		k = pos % SLOTS;
		sp = seqpos[k]; sk = seqskip[k]; sb = seqbusy[k]; sz = seqzero[k]
	   }
		if
		:: sp == pos + 1 && !sk && !sb && !sz ->       /* published: Y2 */
Y2:			c1 = d1[k];                     /* copy out (or read in place) */
			c2 = d2[k];
Y3:			d_step {                        /* re-check seq (zimp_release for an in-place read) */
				if
				:: seqpos[k] == sp && seqskip[k] == sk && seqbusy[k] == sb && seqzero[k] == sz &&
				   TAIL_OK(pos) ->
					assert(c1 == pos && c2 == pos);         /* never torn, never another's */
					assert(published & BIT(pos));
					ygot = ygot | BIT(pos);
					pos++
				:: else -> lost = 1             /* overwritten while we read: missed */
				fi
			}
			if
			:: lost -> lost = 0; goto gap
			:: else
			fi
		:: sp == pos + 1 && sk ->                       /* skipped */
			d_step { assert(!(published & BIT(pos))); skips = skips | BIT(pos); pos++ }
		:: sp == pos + 1 && sz ->                       /* zeroed (Z4): its content is gone */
			goto gap
		:: sp > pos + 1 -> goto gap                     /* lapped: the slot holds a later position */
		:: sp < pos + 1 || (sp == pos + 1 && sb) ->     /* not yet: R5 found it abandoned */
			d_step { assert(!(published & BIT(pos))); skips = skips | BIT(pos); pos++ }
		fi;
		d_step { sp = 0; sk = 0; sb = 0; sz = 0; c1 = 0; c2 = 0 }
	od;
gap:	skip;   /* Y4: t := tail; every position below t - slots may be rewritten; report the gap */
	d_step {
		t = tail;
		p = pos;
#ifdef HALF
#define BACK (SLOTS / 2)
#else
#define BACK SLOTS
#endif
		if
		:: t > BACK && t - BACK > pos + 1 -> pos = t - BACK
		:: else -> pos = pos + 1
		fi;
		do
		:: p < pos ->
			/* missed only if its slot was claimed again (or its data zeroed) */
			assert(p + SLOTS < t || (seqpos[p % SLOTS] == p + 1 && seqzero[p % SLOTS]));
			assert(!(ygot & BIT(p)));
			gaps = gaps | BIT(p);
			p++
		:: else -> break
		od;
		assert(pos <= t);
		sp = 0; sk = 0; sb = 0; sz = 0; c1 = 0; c2 = 0; p = 0; t = 0
	}
	goto top;
stopped:
	skip
}

/* no sender waits on a lossy receiver: once nothing moves, every live sender finished */
proctype watchdog()
{
	byte i;
	timeout ->
	d_step {
		for (i : 0 .. NS - 1) {
			assert(!salive[i] || sdone[i])
		}
		i = 0
	}
}

init {
	byte i;
	atomic {
		for (i : 0 .. NS - 1) {
			salive[i] = 1;
			loan_slot[i] = NONE;
			run sender(i)
		}
#if LOSSLESS
		run lossless();
#endif
		for (i : 0 .. NY - 1) {
			run lossy(i)
		}
		run evictor();
		run watchdog();
		i = 0
	}
}
