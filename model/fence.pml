/*
 * The one-sender channel's store-load pairings under x86-TSO
 * (docs/protocol.md, "A channel with one sender record" and "membarrier").
 *
 * The sender publishes with plain stores (S2', P2'), which wait in its store
 * buffer: a FIFO that a drain process commits to memory, oldest first, at any
 * time; the sender's own loads see its newest buffered store of a word, other
 * loads see memory. A full fence (F, a locked instruction) empties the buffer.
 * Receivers' seq_cst stores go straight to memory.
 *
 * Two pairings rely on the sender's store-load order:
 *   P4  the sender loads `waiting` after publishing; a receiver sets `waiting`,
 *       then looks at seq before it sleeps. A receiver asleep for ever, its
 *       message in memory, is a lost wake-up.
 *   S3  the sender loads `joins` at each claim; a joiner adds to `joins` (J2),
 *       then reads tail (J3) and reads positions from there. A claim of p made
 *       with a view that missed J2 overwrites position p - SLOTS: that position
 *       must be below the joiner's start.
 * Who orders the sender's stores before its loads:
 *   -DMODE_F   the sender: F after each publication, before P4 (layout 3.3)
 *   -DMODE_MB  the receivers: membarrier (an atomic step that empties the
 *              sender's buffer between two of its steps: a full barrier
 *              wherever the sender's thread is) after setting `waiting`
 *              (M1) and after J2 (M2)
 *   -DMODE_ADAPT  M3: the sender fences or not, changing its mind at any claim
 *              with an exchange of `sender_fences` (a full fence); receivers
 *              and joiners issue membarrier only while it reads 0
 *   neither    must fail: the model sees the race the pairings close
 * -DWAKE_ONLY / -DJOIN_ONLY keep one pairing; -DBUG_LATE_V reads the futex
 * value after setting `waiting`, as layout 3.3 did: a wake-up meant for an
 * earlier message, landing in between, then cleared the flag of a receiver
 * that went on to sleep, and the next message's P4 did not wake it (a sleep
 * to the end of its 10 ms nap).
 */

#ifndef MSGS
#define MSGS 3
#endif
#ifndef SLOTS
#define SLOTS 1
#endif
#define BUF (2 * MSGS)

#define V_TAIL 0
#define V_SEQ  1

/* memory */
byte tail = 0;          /* positions claimed */
byte seq = 0;           /* positions published (one slot word stands for all) */
bit waiting = 0;
byte futex = 0;
bit joins = 0;
bit fencing = 1;        /* MODE_ADAPT: the sender fences each message now (sender_fences) */

/* the sender's store buffer */
byte bvar[BUF];
byte bval[BUF];
byte bhead = 0, blen = 0;

bit sender_done = 0;
bit asleep = 0;         /* the receiver sleeps on futex value sleep_v */
byte sleep_v = 0;
bit joined = 0;         /* the joiner read tail: it reads positions >= t0 */
byte t0 = 0;
bit stale = 0;          /* the sender claimed stale_p with a view that missed J2 */
byte stale_p = 0;

inline buffer_store(var, val)
{
    d_step {
        assert(blen < BUF);
        bvar[(bhead + blen) % BUF] = var;
        bval[(bhead + blen) % BUF] = val;
        blen++
    }
}

/* commits the oldest buffered store */
inline commit_one()
{
    if
    :: bvar[bhead] == V_TAIL -> tail = bval[bhead]
    :: else -> seq = bval[bhead]
    fi;
    bhead = (bhead + 1) % BUF;
    blen--
}

inline drain_all()
{
    do
    :: blen > 0 -> commit_one()
    :: else -> break
    od
}

/* the joiner's condition: no stale claim overwrote a position it reads */
inline check_join()
{
    assert(!(joined && stale && stale_p >= SLOTS && stale_p - SLOTS >= t0))
}

active proctype drainer()
{
end:
    do
    :: atomic { blen > 0 -> commit_one() }
    od
}

active proctype sender()
{
    byte p = 0;
    bit seen;
    do
    :: p < MSGS ->
#ifdef MODE_ADAPT
        /* M3: the sender starts or stops fencing whenever it likes (an exchange: a full fence) */
        if
#ifdef BUG_PLAIN_TOGGLE
        :: fencing = 1 - fencing                /* a plain store: the model must object */
#else
        :: atomic { drain_all(); fencing = 1 - fencing }
#endif
        :: skip
        fi;
#endif
        /* S0, S3: the claim's view of joins (memory: the sender never writes it) */
        seen = joins;
        /* S2': claim p */
        buffer_store(V_TAIL, p + 1);
        if
        :: !seen -> atomic { stale = 1; stale_p = p; check_join() }
        :: else -> skip
        fi;
        /* P2': publish p */
        buffer_store(V_SEQ, p + 1);
#ifdef MODE_F
        atomic { drain_all() };                 /* F, after P3 */
#endif
#ifdef MODE_ADAPT
        if
        :: fencing -> atomic { drain_all() }    /* F while sender_fences says so */
        :: else -> skip
        fi;
#endif
        /* P4: a sleeper to wake? (the wake's exchange of `waiting` is a locked instruction) */
        if
        :: waiting -> atomic { drain_all(); waiting = 0; futex++ }
        :: else -> skip
        fi;
        p++
    :: else -> break
    od;
    sender_done = 1
}

#ifndef JOIN_ONLY
/* A receiver that waits for every message, sleeping when it finds none. */
active proctype receiver()
{
    byte want = 1;
    byte v;
    do
    :: want > MSGS -> break
    :: want <= MSGS && seq >= want -> want++
    :: want <= MSGS && seq < want ->
#ifdef BUG_LATE_V
        waiting = 1;
        v = futex;          /* layout 3.3: a wake for an earlier message in between is lost */
#else
        v = futex;          /* before the flag: a wake from now on fails the futex_wait */
        waiting = 1;                            /* seq_cst store */
#endif
#ifdef MODE_MB
        atomic { drain_all() };                 /* M1: membarrier */
#endif
#ifdef MODE_ADAPT
        if
        :: fencing -> skip                      /* M1 unless the sender fences */
        :: else -> atomic { drain_all() }
        fi;
#endif
        if
        :: seq >= want -> skip                  /* the last look */
        :: else ->
            atomic { asleep = 1; sleep_v = v };
            (futex != v);                       /* futex_wait */
            asleep = 0
        fi
    od
}

#endif

#ifndef WAKE_ONLY
active proctype joiner()
{
    joins = 1;                                  /* J2, seq_cst */
#ifdef MODE_MB
    atomic { drain_all() };                     /* M2: membarrier */
#endif
#ifdef MODE_ADAPT
    if
    :: fencing -> skip                          /* M2 unless the sender fences */
    :: else -> atomic { drain_all() }
    fi;
#endif
    atomic { t0 = tail; joined = 1; check_join() }   /* J3 */
}
#endif

#ifndef JOIN_ONLY
/* A lost wake-up: the receiver sleeps, its message in memory, nobody left to wake it. */
active proctype observer()
{
    atomic {
        sender_done && blen == 0 && asleep && futex == sleep_v ->
        assert(seq < MSGS)
    }
}
#endif
