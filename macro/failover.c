/*
 * PaxosInside fault tolerance on zimp (the API directly), and the same
 * failures on pipes for comparison.
 *
 * zimp topology (one process per role):
 *   leader  --acc-->   active acceptor A, backup acceptor B   (one-to-many)
 *   A       --decA-->  learners L0..L2 and B                  (one-to-many)
 *   B       --decB-->  learners L0..L2                        (used after takeover)
 *   Li      --ack_i--> leader                                 (one-to-one)
 * B reads every accept and every decision of A. When A dies, decA drains
 * and returns -EPIPE to B and to the learners (zimp's crash notification):
 * B decides, on decB, every accept past A's last decision, then every new
 * one; learners switch from decA to decB at the same point, so they learn
 * one sequence. A dead learner is dropped by the leader when its ack
 * channel returns -EPIPE; A's sends are not held back by it.
 *
 *   zimp_failover test acceptor|learner   kill -9 mid-run, assert, report
 *   zimp_failover pipes                   the same failures on pipes
 *   zimp_failover all                     both zimp runs, then pipes
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zimp/zimp.h>

#define NL      3
#define VAL     256
#define WINDOW  32
#define FIFO    4096
#define STOP    UINT64_MAX
#define KEY     0x9e3779b97f4a7c15ull

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct shared {
    alignas(64) _Atomic int ready;
    _Atomic int failed;
    char note[200];
    alignas(64) _Atomic uint64_t learned[NL];   /* progress, read by the parent */
    uint64_t count[NL], hash[NL];
    int done[NL];
    double t_kill;                               /* set by the parent */
    double t_first_b[NL];                        /* first decision from B */
    double max_gap[NL];                          /* longest wait after t_kill */
    uint64_t gap_at[NL];
    _Atomic int where[8];                        /* debug: what each role waits for */                         /* value after that wait (+1e9: from B) */
    double t_takeover;                           /* B saw -EPIPE on decA */
    uint64_t takeover_at;                        /* A's last decision */
};

static struct shared *sh;
static char names[4 + NL][64];   /* acc, decA, decB, ack0..ack2 */
static uint64_t total;

static int fail(const char *what, int rc)
{
    int zero = 0;
    if (atomic_compare_exchange_strong(&sh->failed, &zero, 1))
        snprintf(sh->note, sizeof sh->note, "%s: %s", what, zimp_strerror(rc));
    return 1;
}

static void barrier(int n)
{
    atomic_fetch_add(&sh->ready, 1);
    while (atomic_load(&sh->ready) < n && !atomic_load(&sh->failed))
        usleep(200);
}

static uint64_t get(const void *m, int i)
{
    uint64_t v;
    memcpy(&v, (const char *)m + 8 * i, 8);
    return v;
}

static void value(void *buf, uint64_t inst)
{
    uint64_t w[VAL / 8];
    for (int i = 0; i < VAL / 8; i++)
        w[i] = inst * KEY + (uint64_t)i;
    w[0] = inst;
    memcpy(buf, w, VAL);
}

static int value_ok(const void *buf, uint64_t inst)
{
    uint64_t w[VAL / 8];
    memcpy(w, buf, VAL);
    if (w[0] != inst)
        return 0;
    for (int i = 1; i < VAL / 8; i++)
        if (w[i] != inst * KEY + (uint64_t)i)
            return 0;
    return 1;
}

/* ---- roles ---- */

static int leader(void)
{
    zimp_sender *acc;
    zimp_receiver *ack[NL];
    int rc, live[NL] = { 1, 1, 1 };
    if ((rc = zimp_sender_open(names[0], &acc)) < 0)
        return fail("leader open", rc);
    for (int i = 0; i < NL; i++)
        if ((rc = zimp_receiver_open(names[3 + i], &ack[i])) < 0)
            return fail("leader open ack", rc);
    barrier(3 + NL);
    for (uint64_t inst = 1; inst <= total + WINDOW; inst++) {
        if (inst > WINDOW)
            for (int i = 0; i < NL; i++) {
                uint64_t a[2];
                if (!live[i])
                    continue;
                sh->where[0] = 10 + i;
                ssize_t n = zimp_recv(ack[i], a, sizeof a, -1);
                sh->where[0] = 0;
                if (n == -EPIPE) {       /* learner i died: carry on without it */
                    live[i] = 0;
                    continue;
                }
                if (n < 0)
                    return fail("leader recv ack", (int)n);
                if (a[0] != inst - WINDOW)
                    return fail("leader: ack out of order", -EBADMSG);
            }
        if (inst > total)
            continue;
        void *b;
        sh->where[0] = 1;
        if ((rc = zimp_loan(acc, VAL, &b, -1)) < 0)
            return fail("leader loan", rc);
        sh->where[0] = 0;
        value(b, inst);
        if ((rc = zimp_publish(acc, b, VAL)) < 0)
            return fail("leader publish", rc);
    }
    uint64_t stop[VAL / 8] = { STOP };
    if ((rc = zimp_send(acc, stop, VAL, -1)) < 0)
        return fail("leader stop", rc);
    zimp_sender_close(acc);
    for (int i = 0; i < NL; i++)
        zimp_receiver_close(ack[i]);
    return 0;
}

static int acceptor(void)
{
    zimp_receiver *acc;
    zimp_sender *dec;
    int rc;
    if ((rc = zimp_receiver_open(names[0], &acc)) < 0 || (rc = zimp_sender_open(names[1], &dec)) < 0)
        return fail("acceptor open", rc);
    barrier(3 + NL);
    for (uint64_t inst = 1;; inst++) {
        const void *m;
        size_t len;
        void *b;
        if ((rc = zimp_read(acc, &m, &len, -1)) < 0)
            return fail("acceptor read", rc);
        int stop = get(m, 0) == STOP;
        if (!stop && (len != VAL || !value_ok(m, inst)))
            return fail("acceptor: accept out of order", -EBADMSG);
        if ((rc = zimp_loan(dec, VAL, &b, -1)) < 0)
            return fail("acceptor loan", rc);
        memcpy(b, m, VAL);
        zimp_release(acc);
        if ((rc = zimp_publish(dec, b, VAL)) < 0)
            return fail("acceptor publish", rc);
        if (stop)
            break;
    }
    zimp_sender_close(dec);
    zimp_receiver_close(acc);
    return 0;
}

/* Backup acceptor: shadows A; takes over when decA reports -EPIPE. */
static int backup(void)
{
    zimp_receiver *acc, *deca;
    zimp_sender *decb;
    int rc;
    if ((rc = zimp_receiver_open(names[0], &acc)) < 0 || (rc = zimp_receiver_open(names[1], &deca)) < 0 ||
        (rc = zimp_sender_open(names[2], &decb)) < 0)
        return fail("backup open", rc);
    char (*fifo)[VAL] = malloc((size_t)FIFO * VAL);
    if (!fifo)
        return fail("backup", -ENOMEM);
    uint64_t head = 0, tail = 0, decided = 0;   /* fifo: accepts past `decided` */
    int active = 0, a_open = 1, acc_open = 1;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN };
    epoll_ctl(ep, EPOLL_CTL_ADD, zimp_receiver_fd(acc), &ev);
    epoll_ctl(ep, EPOLL_CTL_ADD, zimp_receiver_fd(deca), &ev);
    barrier(3 + NL);
    for (;;) {
        int progress = 0;
        while (a_open) {                        /* A's decisions */
            const void *m;
            size_t len;
            rc = zimp_read(deca, &m, &len, 0);
            if (rc == -EAGAIN)
                break;
            if (rc == -EPIPE) {                 /* A is gone and drained: take over */
                a_open = 0;
                active = 1;
                sh->t_takeover = now_s();
                sh->takeover_at = decided;
                epoll_ctl(ep, EPOLL_CTL_DEL, zimp_receiver_fd(deca), NULL);
                break;
            }
            if (rc < 0)
                return fail("backup read decA", rc);
            uint64_t d = get(m, 0);
            zimp_release(deca);
            if (d == STOP)
                goto out;                       /* A finished the run */
            decided = d;
            while (head < tail && get(fifo[head % FIFO], 0) <= d)
                head++;
            progress = 1;
        }
        while (acc_open && tail - head < FIFO) { /* accepts */
            const void *m;
            size_t len;
            rc = zimp_read(acc, &m, &len, 0);
            if (rc == -EAGAIN)
                break;
            if (rc == -EPIPE) {                 /* leader left after its STOP */
                acc_open = 0;
                epoll_ctl(ep, EPOLL_CTL_DEL, zimp_receiver_fd(acc), NULL);
                break;
            }
            if (rc < 0)
                return fail("backup read acc", rc);
            if (get(m, 0) > decided)
                memcpy(fifo[tail++ % FIFO], m, VAL);
            zimp_release(acc);
            progress = 1;
        }
        while (active && head < tail) {         /* decide, in order */
            void *b;
            const char *v = fifo[head++ % FIFO];
            uint64_t inst = get(v, 0);
            if (inst != STOP && inst != decided + 1)
                return fail("backup: gap in accepts", -EBADMSG);
            sh->where[2] = 1;
            if ((rc = zimp_loan(decb, VAL, &b, -1)) < 0)
                return fail("backup loan", rc);
            sh->where[2] = 0;
            memcpy(b, v, VAL);
            if ((rc = zimp_publish(decb, b, VAL)) < 0)
                return fail("backup publish", rc);
            if (inst == STOP)
                goto out;
            decided = inst;
            progress = 1;
        }
        if (!progress) {
            struct epoll_event out;
            sh->where[2] = 2;
            epoll_wait(ep, &out, 1, 10);
            sh->where[2] = 0;
        }
    }
out:
    free(fifo);
    close(ep);
    zimp_sender_close(decb);
    zimp_receiver_close(acc);
    zimp_receiver_close(deca);
    return 0;
}

static int learner(int i)
{
    zimp_receiver *dec[2];
    zimp_sender *ack;
    int rc;
    if ((rc = zimp_receiver_open(names[1], &dec[0])) < 0 || (rc = zimp_receiver_open(names[2], &dec[1])) < 0 ||
        (rc = zimp_sender_open(names[3 + i], &ack)) < 0)
        return fail("learner open", rc);
    barrier(3 + NL);
    uint64_t h = 0xcbf29ce484222325ull, n = 0;
    int from = 0;
    double last = now_s();
    for (uint64_t inst = 1;; inst++) {
        const void *m;
        size_t len;
        sh->where[3 + i] = 1 + from;
        rc = zimp_read(dec[from], &m, &len, -1);
        sh->where[3 + i] = 0;
        if (rc == -EPIPE && from == 0) {        /* A died: B's decisions follow */
            from = 1;
            inst--;
            continue;
        }
        if (rc < 0)
            return fail("learner read", rc);
        double t = now_s();
        if (sh->t_kill > 0 && t > sh->t_kill && t - last > sh->max_gap[i]) {
            sh->max_gap[i] = t - last;
            sh->gap_at[i] = inst + (uint64_t)from * 1000000000;
        }
        last = t;
        if (get(m, 0) == STOP) {
            zimp_release(dec[from]);
            break;
        }
        if (len != VAL || !value_ok(m, inst))
            return fail("learner: decision out of order", -EBADMSG);
        if (from == 1 && sh->t_first_b[i] == 0)
            sh->t_first_b[i] = t;
        for (int k = 0; k < VAL; k += 8)
            h = (h ^ get(m, k / 8)) * 0x100000001b3ull;
        zimp_release(dec[from]);
        n++;
        atomic_store(&sh->learned[i], n);
        uint64_t a[2] = { inst, (uint64_t)i };
        sh->where[3 + i] = 5;
        rc = zimp_send(ack, a, sizeof a, -1);
        sh->where[3 + i] = 0;
        if (rc < 0)
            return fail("learner ack", rc);
    }
    sh->count[i] = n;
    sh->hash[i] = h;
    sh->done[i] = 1;
    zimp_sender_close(ack);
    zimp_receiver_close(dec[0]);
    zimp_receiver_close(dec[1]);
    return 0;
}

/* ---- one zimp run: victim 'a' (acceptor) or 'l' (learner 2) ---- */

static int zimp_run(char victim, int quiet)
{
    memset(sh, 0, sizeof *sh);
    const char *tag[] = { "acc", "decA", "decB", "ack0", "ack1", "ack2" };
    for (int i = 0; i < 4 + NL - 1; i++) {
        snprintf(names[i], sizeof names[i], "macro-fo-%d-%s", (int)getpid(), tag[i]);
        struct zimp_config cfg = { .slots = i < 3 ? 256 : 64, .slot_size = i < 3 ? VAL : 16 };
        int rc = zimp_create(names[i], &cfg);
        if (rc < 0) {
            fprintf(stderr, "failover: create %s: %s\n", names[i], zimp_strerror(rc));
            return 1;
        }
    }
    enum { LEADER, ACC, BACKUP, L0 };
    pid_t pid[4 + NL - 1];
    int np = 3 + NL;
    fflush(NULL);
    for (int p = 0; p < np; p++) {
        pid[p] = fork();
        if (pid[p] == 0) {
            int rc = p == LEADER ? leader() : p == ACC ? acceptor() : p == BACKUP ? backup() : learner(p - L0);
            _exit(rc);
        }
    }
    int victim_idx = victim == 'a' ? ACC : L0 + 2;
    uint64_t at = victim == 'a' ? total / 3 : total / 2;
    double t0 = now_s(), deadline = t0 + (getenv("ZIMP_SANITIZER") ? 50 : 40);
    int killed = 0, bad = 0, left = np;
    while (left > 0) {
        if (!killed && atomic_load(&sh->learned[0]) >= at) {
            sh->t_kill = now_s();
            kill(pid[victim_idx], SIGKILL);
            killed = 1;
        }
        static uint64_t seen;
        static double since;
        if (getenv("MACRO_DEBUG") && atomic_load(&sh->learned[0]) != seen) {
            seen = atomic_load(&sh->learned[0]);
            since = now_s();
        } else if (getenv("MACRO_DEBUG") && since && now_s() - since > 1) {
            fprintf(stderr, "stuck at %llu: leader %d acceptor %d backup %d learners %d %d %d (%llu %llu %llu)\n",
                    (unsigned long long)seen, sh->where[0], sh->where[1], sh->where[2], sh->where[3],
                    sh->where[4], sh->where[5], (unsigned long long)sh->learned[0],
                    (unsigned long long)sh->learned[1], (unsigned long long)sh->learned[2]);
            since = now_s();
        }
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w > 0) {
            left--;
            int was_victim = killed && w == pid[victim_idx];
            if (!was_victim && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
                bad = 1;
            continue;
        }
        if (bad || atomic_load(&sh->failed) || now_s() > deadline) {
            if (!bad && !atomic_load(&sh->failed))
                snprintf(sh->note, sizeof sh->note, "hung: run did not finish in %.0f s", deadline - t0);
            for (int p = 0; p < np; p++)
                kill(pid[p], SIGKILL);
            bad = 1;
        }
        usleep(100);
    }
    double secs = now_s() - t0;
    for (int i = 0; i < 4 + NL - 1; i++)
        zimp_unlink(names[i]);
    if (bad || atomic_load(&sh->failed) || !killed) {
        printf("failover zimp kill-%s: FAILED: %s\n", victim == 'a' ? "acceptor" : "learner",
               sh->note[0] ? sh->note : "a role failed");
        return 1;
    }
    int live = victim == 'a' ? NL : NL - 1;
    for (int i = 0; i < live; i++)
        if (!sh->done[i] || sh->count[i] != total || sh->hash[i] != sh->hash[0]) {
            printf("failover zimp: FAILED: learner %d learned %llu values (hash %llx), learner 0 %llu (%llx)\n",
                   i, (unsigned long long)sh->count[i], (unsigned long long)sh->hash[i],
                   (unsigned long long)sh->count[0], (unsigned long long)sh->hash[0]);
            return 1;
        }
    double gap = 0;
    for (int i = 0; i < live; i++)
        gap = sh->max_gap[i] > gap ? sh->max_gap[i] : gap;
    if (getenv("MACRO_DEBUG"))
        for (int i = 0; i < live; i++)
            fprintf(stderr, "learner %d: longest gap %.1f ms before value %llu\n", i, sh->max_gap[i] * 1e3,
                    (unsigned long long)sh->gap_at[i]);
    if (victim == 'a') {
        double outage = 1e9;
        for (int i = 0; i < NL; i++)
            if (sh->t_first_b[i] > 0 && sh->t_first_b[i] - sh->t_kill < outage)
                outage = sh->t_first_b[i] - sh->t_kill;
        if (sh->t_takeover == 0 || outage > 1e8) {
            printf("failover zimp kill-acceptor: FAILED: the backup never decided (takeover %s)\n",
                   sh->t_takeover ? "seen" : "not seen");
            return 1;
        }
        printf("failover zimp kill-acceptor: %llu values learned identically by %d learners in %.2f s; "
               "A killed at learner 0's value %llu; B took over after A's decision %llu, "
               "%.1f ms after the kill; outage (kill -> first value decided by B, at a learner) %.1f ms; "
               "longest gap between two values at a learner %.1f ms\n",
               (unsigned long long)total, NL, secs, (unsigned long long)at,
               (unsigned long long)sh->takeover_at, (sh->t_takeover - sh->t_kill) * 1e3, outage * 1e3,
               gap * 1e3);
        double bound = getenv("ZIMP_SANITIZER") && *getenv("ZIMP_SANITIZER") ? 5.0 : 2.0;
        if (outage > bound) {
            printf("failover zimp kill-acceptor: FAILED: outage above the %.0f s hang bound\n", bound);
            return 1;
        }
    } else {
        printf("failover zimp kill-learner: %llu values learned identically by the %d live learners in %.2f s; "
               "learner 2 killed at learner 0's value %llu; longest gap between two values at a live "
               "learner after the kill %.1f ms\n",
               (unsigned long long)total, live, secs, (unsigned long long)at, gap * 1e3);
    }
    (void)quiet;
    return 0;
}

/* ---- the same failures on pipes ---- */

/* Acceptor writing 256 B decisions to NL learners over pipes. victim 'l':
 * learner 2 is killed; victim 'a': the acceptor is killed. hygiene: every
 * process closes the pipe ends it does not own. */
static void pipe_run(char victim, int sigpipe_ignored, int hygiene)
{
    int p[NL][2];
    for (int i = 0; i < NL; i++)
        if (pipe(p[i]) < 0) {
            perror("pipe");
            return;
        }
    memset(sh, 0, sizeof *sh);
    fflush(NULL);
    pid_t acc = fork();
    if (acc == 0) {
        if (sigpipe_ignored)
            signal(SIGPIPE, SIG_IGN);
        int live[NL] = { 1, 1, 1 };
        for (int i = 0; i < NL; i++)
            close(p[i][0]);
        char buf[VAL];
        for (uint64_t inst = 1; inst <= total; inst++) {
            value(buf, inst);
            for (int i = 0; i < NL; i++) {
                if (!live[i])
                    continue;
                if (write(p[i][1], buf, VAL) != VAL) {
                    if (errno == EPIPE) {      /* learner i gone: the acceptor must notice */
                        sh->t_takeover = now_s();
                        live[i] = 0;
                        continue;
                    }
                    _exit(1);
                }
            }
            if (inst % 256 == 0)
                usleep(50);                    /* keep the pipes from filling */
        }
        _exit(0);
    }
    pid_t l[NL];
    for (int i = 0; i < NL; i++) {
        l[i] = fork();
        if (l[i] == 0) {
            for (int j = 0; j < NL; j++) {
                if (hygiene || j != i)
                    close(p[j][1]);
                if (j != i)
                    close(p[j][0]);
            }
            char buf[VAL];
            uint64_t n = 0;
            for (;;) {
                ssize_t r = read(p[i][0], buf, VAL);   /* writes of VAL <= PIPE_BUF are atomic */
                if (r <= 0) {
                    sh->t_first_b[i] = now_s();     /* EOF: the writer is gone */
                    break;
                }
                atomic_store(&sh->learned[i], ++n);
            }
            sh->count[i] = n;
            _exit(0);
        }
    }
    for (int i = 0; i < NL; i++) {
        close(p[i][0]);
        close(p[i][1]);
    }
    pid_t victim_pid = victim == 'a' ? acc : l[2];
    uint64_t at = total / 3;
    while (atomic_load(&sh->learned[0]) < at)
        usleep(100);
    sh->t_kill = now_s();
    kill(victim_pid, SIGKILL);
    int st;
    waitpid(victim_pid, &st, 0);
    const char *label = victim == 'a' ? "kill-acceptor" : "kill-learner";
    if (victim == 'l') {
        double end = now_s() + 2;
        int r = 0;
        while (now_s() < end && (r = waitpid(acc, &st, WNOHANG)) == 0)
            usleep(200);
        if (r == 0) {
            printf("failover pipes %s (SIGPIPE %s): acceptor still writing 2 s after the kill "
                   "(its pipe to the dead learner is never read)\n",
                   label, sigpipe_ignored ? "ignored" : "default");
            kill(acc, SIGKILL);
            waitpid(acc, &st, 0);
        } else if (WIFSIGNALED(st)) {
            printf("failover pipes %s (SIGPIPE default): the acceptor was killed by signal %d (%s) at its "
                   "next write, %.2f ms after the learner's death; no further value is decided\n",
                   label, WTERMSIG(st), strsignal(WTERMSIG(st)), (now_s() - sh->t_kill) * 1e3);
        } else {
            printf("failover pipes %s (SIGPIPE ignored): write() returned EPIPE %.2f ms after the kill; the "
                   "acceptor dropped that learner and finished (exit %d); learners 0 and 1 got %llu and "
                   "%llu values\n",
                   label, sh->t_takeover > 0 ? (sh->t_takeover - sh->t_kill) * 1e3 : -1.0,
                   WEXITSTATUS(st), (unsigned long long)atomic_load(&sh->learned[0]),
                   (unsigned long long)atomic_load(&sh->learned[1]));
        }
        for (int i = 0; i < 2; i++)
            waitpid(l[i], &st, 0);
        return;
    }
    double end = now_s() + 2;
    int gone = 0;
    while (now_s() < end && gone < NL) {
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w > 0)
            gone++;
        else
            usleep(200);
    }
    if (gone == NL) {
        double eof = 0;
        for (int i = 0; i < NL; i++)
            eof = sh->t_first_b[i] - sh->t_kill > eof ? sh->t_first_b[i] - sh->t_kill : eof;
        printf("failover pipes %s (every unused pipe end closed): learners read EOF %.2f ms after the "
               "kill; a backup would have to be told by the same EOF\n", label, eof * 1e3);
    } else {
        printf("failover pipes %s (pipe ends inherited by siblings, as after a plain fork of the "
               "topology): %d of %d learners still blocked in read() 2 s after the kill: no EOF while "
               "another process holds a write end; detection needs the application's own timeout\n",
               label, NL - gone, NL);
        for (int i = 0; i < NL; i++)
            kill(l[i], SIGKILL);
        while (waitpid(-1, &st, 0) > 0)
            ;
    }
}

int main(int argc, char **argv)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    total = getenv("ZIMP_SANITIZER") && *getenv("ZIMP_SANITIZER") ? 3000 : 30000;
    const char *mode = argc > 1 ? argv[1] : "all";
    if (strcmp(mode, "test") == 0 && argc > 2)
        return zimp_run(argv[2][0] == 'a' ? 'a' : 'l', 0);
    if (strcmp(mode, "pipes") == 0 || strcmp(mode, "all") == 0) {
        int rc = 0;
        if (strcmp(mode, "all") == 0) {
            rc |= zimp_run('a', 0);
            rc |= zimp_run('l', 0);
        }
        pipe_run('l', 0, 1);
        pipe_run('l', 1, 1);
        pipe_run('a', 0, 1);
        pipe_run('a', 0, 0);
        return rc;
    }
    fprintf(stderr, "usage: %s test acceptor|learner | pipes | all\n", argv[0]);
    return 2;
}
