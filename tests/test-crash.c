/*
 * Crash injection: many short trials, each with a few senders and receivers
 * of which some are killed with SIGKILL at random points (inside a loan,
 * inside a borrow, inside open, or after a random delay). Survivors must
 * neither hang nor lose, duplicate or reorder a message, and no segment
 * may remain once the channel is unlinked and everyone exited.
 *
 * ZIMP_CRASH_TRIALS sets the number of trials, ZIMP_CRASH_SEED the seed;
 * ZIMP_CRASH_ONLY=N replays trial N of that seed alone; ZIMP_CRASH_KILLS=0
 * runs the same trials without killing anyone.
 */
#include "task.h"

#include <sys/wait.h>

#define MAXS 3                  /* senders per trial (incl. a late one) */
#define MAXR 4                  /* receivers per trial (incl. a late one) */
#define WORKERS 4

enum kill_mode { K_NONE, K_POINT, K_DELAY, K_EARLY };

struct role {
    int is_sender;
    uint32_t id;
    int mode;                   /* MODE_COPY, MODE_ZC, 2: alternate */
    int kill;                   /* enum kill_mode */
    long point;                 /* K_POINT: stop inside message `point` */
    long delay_us;              /* K_DELAY / K_EARLY */
    int late;                   /* joins after the others (K_EARLY victims) */
};

struct rx_result {
    int done;
    int err;                    /* 0, or a negative errno seen */
    long bad_at;                /* message index of a failed check, -1 */
    char why[96];
    uint64_t first[MAXS], count[MAXS];
    uint64_t hash;
};

struct trial {
    char name[128];
    long nmsg;                  /* per sender */
    uint32_t ns;                /* senders open before the start; a late one has id ns */
    int nroles;
    struct role roles[MAXS + MAXR];
    struct rx_result res[MAXS + MAXR];
    struct tpipe ready, go, point;
};

static int64_t io_timeout(void) { return (under_sanitizer() ? 20 : 5) * NS_PER_S; }

static void rx_fail(struct rx_result *res, long i, const char *why)
{
    res->bad_at = i;
    snprintf(res->why, sizeof res->why, "%s", why);
    _exit(3);
}

static void crash_rx(struct trial *t, int k)
{
    struct role *ro = &t->roles[k];
    struct rx_result *res = &t->res[k];
    zimp_receiver *r;
    int rc = zimp_receiver_open(t->name, &r);
    if (rc) {
        res->err = rc;
        _exit(2);
    }
    if (!ro->late)
        signal_byte(&t->ready);
    char idx = (char)k;
    uint64_t next[MAXS] = { 0 }, h = HASH_INIT;
    int seen[MAXS] = { 0 };
    uint8_t buf[128];
    for (long i = 0;; i++) {
        int mode = ro->mode == 2 ? (int)(i & 1) : ro->mode;
        ssize_t n;
        if (ro->kill == K_POINT && i == ro->point) {
            const void *rb;
            size_t len;
            n = zimp_read(r, &rb, &len, io_timeout());
            if (n == 0) {
                put_bytes(t->point.w, &idx, 1);  /* die holding the borrow */
                for (;;)
                    pause();
            }
        } else {
            n = recv_msg(r, mode, buf, sizeof buf, io_timeout());
        }
        if (n == -EPIPE) {
            if (ro->kill == K_POINT && i <= ro->point)
                put_bytes(t->point.w, &idx, 1);  /* ended before the point */
            break;
        }
        if (n < 0) {
            res->err = (int)n;
            res->bad_at = i;
            _exit(2);
        }
        uint32_t snd;
        uint64_t seq;
        if (!msg_check(buf, (size_t)n, &snd, &seq) || snd >= MAXS)
            rx_fail(res, i, "corrupt or unpublished message");
        if (!seen[snd] && !ro->late && seq != 0)
            rx_fail(res, i, "first message of a sender is not its seq 0");
        if (seen[snd] && seq != next[snd]) {
            char why[96];
            snprintf(why, sizeof why, "%s: sender %u seq %llu after %llu",
                     seq < next[snd] ? "duplicate or reordered" : "gap", snd,
                     (unsigned long long)seq, (unsigned long long)next[snd] - 1);
            rx_fail(res, i, why);
        }
        if (!seen[snd])
            res->first[snd] = seq;
        seen[snd] = 1;
        next[snd] = seq + 1;
        res->count[snd]++;
        if (snd < t->ns)                 /* order of the senders present throughout */
            h = hash_step(h, ((uint64_t)snd << 48) | seq);
    }
    res->hash = h;
    res->done = 1;
    zimp_receiver_close(r);
    _exit(0);
}

static void crash_tx(struct trial *t, int k)
{
    struct role *ro = &t->roles[k];
    zimp_sender *s;
    int rc = zimp_sender_open(t->name, &s);
    if (rc) {
        t->res[k].err = rc;
        _exit(2);
    }
    if (!ro->late) {
        signal_byte(&t->ready);
        if (wait_bytes(&t->go, 1, 30000))
            _exit(4);
    }
    for (long i = 0; i < t->nmsg; i++) {
        int mode = ro->mode == 2 ? (int)(i & 1) : ro->mode;
        size_t len = sizeof(struct tmsg) + (size_t)((uint64_t)i * 7 % 40);
        if (ro->kill == K_POINT && i == ro->point) {
            void *lb;
            rc = zimp_loan(s, len, &lb, io_timeout());
            if (rc == 0) {
                char idx = (char)k;
                memset(lb, 0xDD, len);       /* die inside the loan */
                put_bytes(t->point.w, &idx, 1);
                for (;;)
                    pause();
            }
        } else {
            rc = send_msg(s, mode, ro->id, (uint64_t)i, len, io_timeout());
        }
        if (rc) {
            t->res[k].err = rc;
            t->res[k].bad_at = i;
            _exit(2);
        }
    }
    zimp_sender_close(s);
    _exit(0);
}

static pid_t start(struct trial *t, int k)
{
    fflush(stderr);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        if (t->roles[k].is_sender)
            crash_tx(t, k);
        else
            crash_rx(t, k);
    }
    return pid;
}

/* One trial; returns 0 or prints why it failed and returns 1. */
static int run_trial(struct trial *t, uint64_t seed, long trial, int worker)
{
    struct xrand rnd = { seed };
    char tag[48];
    snprintf(tag, sizeof tag, "cr%d-%ld", worker, trial);
    chan_name(t->name, sizeof t->name, tag);
    static const uint32_t slot_choices[] = { 4, 8, 16 };
    struct zimp_config cfg = { .slots = slot_choices[xrand_below(&rnd, 3)], .slot_size = 64,
                               .max_senders = MAXS, .max_receivers = MAXR };
    int rc = zimp_create(t->name, &cfg);
    if (rc) {
        fprintf(stderr, "trial %ld: create: %s\n", trial, err_text(rc));
        return 1;
    }
    t->nmsg = 10 + (long)xrand_below(&rnd, 150);
    int ns = 1 + (int)xrand_below(&rnd, 2), nr = 1 + (int)xrand_below(&rnd, 3);
    int late_s = xrand_below(&rnd, 4) == 0, late_r = xrand_below(&rnd, 4) == 0;
    t->ns = (uint32_t)ns;
    t->nroles = 0;
    memset(t->roles, 0, sizeof t->roles);
    memset(t->res, 0, sizeof t->res);
    for (int i = 0; i < ns + late_s; i++)
        t->roles[t->nroles++] = (struct role){ 1, (uint32_t)i, (int)xrand_below(&rnd, 3),
                                               K_NONE, 0, 0, i >= ns };
    for (int i = 0; i < nr + late_r; i++)
        t->roles[t->nroles++] = (struct role){ 0, 0, (int)xrand_below(&rnd, 3), K_NONE, 0, 0,
                                               i >= nr };
    /* victims: the late ones die early; one or two others at a point or a delay */
    int nvict = 1 + (int)xrand_below(&rnd, 2);
    int kills = (int)env_long("ZIMP_CRASH_KILLS", 1);   /* 0: no victims (a control run) */
    if (!kills)
        nvict = 0;
    for (int k = 0; k < t->nroles; k++) {
        struct role *ro = &t->roles[k];
        ro->point = (long)xrand_below(&rnd, (uint64_t)t->nmsg);
        if (ro->late) {
            ro->kill = kills && xrand_below(&rnd, 3) ? K_EARLY : K_NONE;
            ro->delay_us = (long)xrand_below(&rnd, 3000);
        }
    }
    for (int v = 0; v < nvict; v++) {
        int k = (int)xrand_below(&rnd, (uint64_t)t->nroles);
        if (t->roles[k].late || t->roles[k].kill != K_NONE)
            continue;
        t->roles[k].kill = xrand_below(&rnd, 2) ? K_POINT : K_DELAY;
        t->roles[k].delay_us = (long)xrand_below(&rnd, 2000);
    }
    for (int k = 0; k < t->nroles; k++)
        t->res[k].bad_at = -1;

    pid_t pids[MAXS + MAXR] = { 0 };
    int nearly = 0, npoint = 0, nsenders_ready = 0, nrx_ready = 0;
    /* receivers first, then senders (all open before any sends) */
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < t->nroles; k++) {
            struct role *ro = &t->roles[k];
            if (ro->late || ro->is_sender != pass)
                continue;
            pids[k] = start(t, k);
            if (pass)
                nsenders_ready++;
            else
                nrx_ready++;
            if (ro->kill == K_POINT)
                npoint++;
        }
        if (wait_bytes(&t->ready, pass ? nsenders_ready : nrx_ready, tmo(20000))) {
            fprintf(stderr, "trial %ld: members did not open\n", trial);
            return 1;
        }
    }
    char gob[MAXS] = { 0 };
    put_bytes(t->go.w, gob, (size_t)nsenders_ready);
    int64_t t_go = now_ns();
    for (int k = 0; k < t->nroles; k++) {
        if (t->roles[k].late) {
            pids[k] = start(t, k);
            if (t->roles[k].kill == K_EARLY) {
                sleep_ns(t->roles[k].delay_us * 1000);
                kill(pids[k], SIGKILL);
                nearly++;
            }
        }
    }
    /* delayed victims, in order of their delay */
    for (long us = 0; us <= 2000; us += 50) {
        for (int k = 0; k < t->nroles; k++)
            if (t->roles[k].kill == K_DELAY && t->roles[k].delay_us / 50 == us / 50) {
                int64_t at = t_go + t->roles[k].delay_us * 1000;
                if (now_ns() < at)
                    sleep_ns(at - now_ns());
                kill(pids[k], SIGKILL);
            }
    }
    /* point victims signal once inside their loan or borrow */
    for (int i = 0; i < npoint; i++) {
        char who;
        if (get_bytes(t->point.r, &who, 1, tmo(20000))) {
            fprintf(stderr, "trial %ld: a victim never reached its kill point\n", trial);
            for (int k = 0; k < t->nroles; k++)
                kill(pids[k], SIGKILL);
            for (int k = 0; k < t->nroles; k++)
                wait_child(pids[k], 5000);
            zimp_unlink(t->name);
            return 1;
        }
        ASSERT(who >= 0 && who < t->nroles && t->roles[(int)who].kill == K_POINT);
        kill(pids[(int)who], SIGKILL);
    }

    int status[MAXS + MAXR], failed = 0;
    for (int k = 0; k < t->nroles; k++) {
        status[k] = wait_child(pids[k], tmo(30000));
        if (status[k] == -1) {
            fprintf(stderr, "trial %ld: %s %d hung\n", trial,
                    t->roles[k].is_sender ? "sender" : "receiver", k);
            failed = 1;
        }
    }
    (void)nearly;
    /* survivors exit 0; victims may have finished before their signal */
    int completed[MAXS] = { 0 }, ref = -1;
    for (int k = 0; k < t->nroles; k++) {
        struct role *ro = &t->roles[k];
        int killed = status[k] == 128 + SIGKILL && ro->kill != K_NONE;
        if (!killed && status[k] != 0) {
            fprintf(stderr, "trial %ld: %s %d (kill mode %d) exit %d err %s at %ld: %s\n",
                    trial, ro->is_sender ? "sender" : "receiver", k, ro->kill, status[k],
                    err_text(t->res[k].err), t->res[k].bad_at, t->res[k].why);
            failed = 1;
        }
        if (ro->is_sender && status[k] == 0)
            completed[ro->id] = 1;
    }
    for (int k = 0; k < t->nroles && !failed; k++) {
        struct role *ro = &t->roles[k];
        struct rx_result *res = &t->res[k];
        if (ro->is_sender || status[k] != 0)
            continue;
        for (int j = 0; j < MAXS; j++) {
            uint64_t last = res->count[j] ? res->first[j] + res->count[j] : 0;
            /* a late sender may open after every receiver saw -EPIPE: all or nothing */
            int all_or_none = (uint32_t)j >= t->ns && res->count[j] == 0;
            if (completed[j] && !ro->late && !all_or_none && res->count[j] != (uint64_t)t->nmsg) {
                fprintf(stderr, "trial %ld: receiver %d got %llu of %ld from completed sender %d\n",
                        trial, k, (unsigned long long)res->count[j], t->nmsg, j);
                failed = 1;
            }
            if (completed[j] && ro->late && res->count[j] && last != (uint64_t)t->nmsg) {
                fprintf(stderr, "trial %ld: late receiver %d lost the tail of sender %d\n",
                        trial, k, j);
                failed = 1;
            }
        }
        if (ro->late)
            continue;
        if (ref < 0) {
            ref = k;
            continue;
        }
        if (memcmp(res->count, t->res[ref].count, t->ns * sizeof res->count[0]) ||
            res->hash != t->res[ref].hash) {
            fprintf(stderr, "trial %ld: receivers %d and %d disagree on the messages or their order\n",
                    trial, ref, k);
            failed = 1;
        }
    }
    rc = zimp_unlink(t->name);
    if (rc) {
        fprintf(stderr, "trial %ld: unlink: %s\n", trial, err_text(rc));
        failed = 1;
    }
    if (shm_exists(t->name)) {
        fprintf(stderr, "trial %ld: segment remains\n", trial);
        failed = 1;
    }
    if (failed) {
        fprintf(stderr, "  trial %ld seed %llu: slots %u, %ld msgs; roles:", trial,
                (unsigned long long)seed, cfg.slots, t->nmsg);
        for (int k = 0; k < t->nroles; k++)
            fprintf(stderr, " [%c%s mode %d kill %d point %ld delay %ldus status %d]",
                    t->roles[k].is_sender ? 'S' : 'R', t->roles[k].late ? " late" : "",
                    t->roles[k].mode, t->roles[k].kill, t->roles[k].point,
                    t->roles[k].delay_us, status[k]);
        fprintf(stderr, "\n");
    }
    return failed;
}

struct worker_args { int worker, nworkers; long first, trials; uint64_t seed; long *done; };

static void worker_role(void *p)
{
    struct worker_args *a = p;
    struct trial *t = shared_alloc(sizeof *t);
    int failures = 0;
    for (long i = a->first + a->worker; i < a->trials; i += a->nworkers) {
        /* fresh pipes: a killed child may have left bytes in the old ones */
        tpipe_open(&t->ready);
        tpipe_open(&t->go);
        tpipe_open(&t->point);
        if (run_trial(t, a->seed + (uint64_t)i * 0x9E3779B97F4A7C15ULL, i, a->worker))
            failures++;
        __atomic_add_fetch(a->done, 1, __ATOMIC_RELAXED);
        tpipe_close(&t->ready);
        tpipe_close(&t->go);
        tpipe_close(&t->point);
        if (failures >= 5)
            break;
    }
    _exit(failures ? 1 : 0);
}

TEST_IMPL(crash_injection)
{
    long trials = env_long("ZIMP_CRASH_TRIALS", under_sanitizer() ? 500 : 2000);
    uint64_t seed = (uint64_t)env_long("ZIMP_CRASH_SEED", (long)getpid());
    long only = env_long("ZIMP_CRASH_ONLY", -1);
    int nworkers = only >= 0 ? 1 : WORKERS;
    long first = only >= 0 ? only : 0;
    if (only >= 0)
        trials = only + 1;
    long *done = shared_alloc(4096);
    pid_t w[WORKERS];
    int64_t t0 = now_ns();
    for (int i = 0; i < nworkers; i++) {
        struct worker_args a = { i, nworkers, first, trials, seed, done };
        w[i] = spawn(worker_role, &a);
    }
    int bad = 0;
    for (int i = 0; i < nworkers; i++)
        bad |= wait_child(w[i], tmo(110000)) != 0;
    fprintf(stderr, "crash_injection: %ld trials in %.1f s (ZIMP_CRASH_SEED=%llu)\n",
            *done, (double)(now_ns() - t0) / 1e9, (unsigned long long)seed);
    ASSERT_MSG(!bad, "failing trials (see above)");
    ASSERT_EQ(*done, trials - first);
    shared_free(done, 4096);
    return 0;
}
