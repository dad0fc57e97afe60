/*
 * Tracing tests: every event type in the OTF2 archive (read back with
 * otf2-print) and in the exported JSON (parsed by python3), levels filter,
 * off makes no file, kill -9 leaves readable archives up to the last flush,
 * threads tracing at once, ZIMP_TRACE from the environment, LTTng.
 *   zimp-trace-tests NAME     runs one test: exit 0 pass, 1 fail, 77 skip
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zimp/trace.h>
#include <zimp/zimp.h>

#define SKIP 77
#define MS 1000000LL

static char tmp[256];              /* this test's scratch directory */
static char self_exe[4096];

static void cleanup(void)
{
    if (tmp[0]) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", tmp);
    }
}

#define CHECK(expr, ...)                                                        \
    do {                                                                        \
        if (!(expr)) {                                                          \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #expr); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, " [%s]\n", zimp_last_detail());                     \
            exit(1);                                                            \
        }                                                                       \
    } while (0)
#define OK(call) CHECK((call) >= 0, "%s", #call)

static const char *names[] = { NULL, "start", "stop", "create", "unlink", "open", "close", "send",
                               "recv", "error", "crash", "stall", "evict", "sleep", "wake", "spin",
                               "mark", "flush", "alloc", "free" };
#define NTYPES 20

static void path_in(char *out, size_t cap, const char *leaf)
{
    snprintf(out, cap, "%s/%s", tmp, leaf);
}

static void chan_name(char *out, size_t cap, const char *what)
{
    snprintf(out, cap, "trace-%d-%s", (int)getpid(), what);
}

/* ---- reading a trace back ---- */

struct counts { int type[NTYPES]; int lines; };

/* Exports path as text and counts each event type; also fills `text` if asked. */
static int count_events(const char *path, struct counts *c, char **text)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f, "open_memstream");
    int n = zimp_trace_export(path, f, ZIMP_TRACE_TEXT);
    fclose(f);
    memset(c, 0, sizeof *c);
    if (n < 0) {
        free(buf);
        return n;
    }
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        double t;
        int pid;
        unsigned tid;
        char name[32];
        if (sscanf(line, "%lf %d/%u %31s", &t, &pid, &tid, name) != 4)
            continue;
        c->lines++;
        for (int k = 1; k < NTYPES; k++)
            if (!strcmp(name, names[k]))
                c->type[k]++;
        if (next)
            next[-1] = '\n';
    }
    if (text)
        *text = buf;
    else
        free(buf);
    return n;
}

/* otf2-print reads every archive under dir without a complaint; regions seen are flagged. */
static void otf2_print_all(const char *dir, bool seen[NTYPES], int *archives)
{
    char cmd[4096], out[512], err[512];
    path_in(out, sizeof out, "otf2-print.out");
    path_in(err, sizeof err, "otf2-print.err");
    snprintf(cmd, sizeof cmd, "find '%s' -name traces.otf2 | sort > '%s.list'", dir, out);
    CHECK(system(cmd) == 0, "find");
    char list[600];
    snprintf(list, sizeof list, "%s.list", out);
    FILE *l = fopen(list, "r");
    CHECK(l, "list");
    char anchor[1024];
    *archives = 0;
    while (fgets(anchor, sizeof anchor, l)) {
        anchor[strcspn(anchor, "\n")] = '\0';
        snprintf(cmd, sizeof cmd, "otf2-print '%s' > '%s' 2> '%s'", anchor, out, err);
        int st = system(cmd);
        CHECK(st == 0, "otf2-print %s exited %d", anchor, st);
        struct stat sb;
        CHECK(stat(err, &sb) == 0 && sb.st_size == 0, "otf2-print %s complained (see %s)", anchor, err);
        FILE *o = fopen(out, "r");
        CHECK(o, "otf2-print output");
        char line[2048];
        while (fgets(line, sizeof line, o)) {
            char *r = strstr(line, "Region: \"");
            if (!strncmp(line, "ENTER", 5) && r)
                for (int k = 1; k < NTYPES; k++) {
                    char want[40];
                    snprintf(want, sizeof want, "Region: \"%s\"", names[k]);
                    if (!strncmp(r, want, strlen(want)))
                        seen[k] = true;
                }
        }
        fclose(o);
        ++*archives;
    }
    fclose(l);
}

static bool have_otf2_print(void) { return system("command -v otf2-print > /dev/null 2>&1") == 0; }

/* The JSON export parses and names every expected event type. */
static void json_check(const char *dir, const bool want[NTYPES])
{
    char json[512], cmd[2048], expect[512] = "";
    path_in(json, sizeof json, "trace.json");
    FILE *f = fopen(json, "w");
    CHECK(f, "json file");
    OK(zimp_trace_export(dir, f, ZIMP_TRACE_JSON));
    fclose(f);
    for (int k = 1; k < NTYPES; k++)
        if (want[k])
            snprintf(expect + strlen(expect), sizeof expect - strlen(expect), "'%s',", names[k]);
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import json,sys; d=json.load(open('%s')); ev=d['traceEvents'];"
             " seen={e['name'] for e in ev if e.get('ph') in ('i','X')};"
             " assert all(isinstance(e['ts'],(int,float)) and 'pid' in e for e in ev if e['ph']!='M');"
             " miss=[n for n in [%s] if n not in seen];"
             " sys.exit('missing: %%s' %% miss if miss else 0)\"",
             json, expect);
    CHECK(system(cmd) == 0, "JSON export %s does not parse or lacks events", json);
}

/* ---- workloads ---- */

struct delayed { zimp_sender *s; int64_t delay_ns; const char *msg; };

static void *send_later(void *arg)
{
    struct delayed *d = arg;
    struct timespec ts = { d->delay_ns / 1000000000LL, d->delay_ns % 1000000000LL };
    nanosleep(&ts, NULL);
    if (zimp_send(d->s, d->msg, strlen(d->msg), -1) != 0)
        fprintf(stderr, "send_later failed\n");
    return NULL;
}

/* A sender in a child process that sends one message and dies by SIGKILL. */
static void crash_sender(const char *ch)
{
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        zimp_trace_set(ZIMP_TRACE_OFF, NULL);
        zimp_sender *s;
        if (zimp_sender_open(ch, &s) != 0 || zimp_send(s, "last", 4, -1) != 0)
            _exit(2);
        raise(SIGKILL);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st), "crash child");
}

/* Every event type, in this process (level test records them all). */
static void every_event(bool stall_and_evict)
{
    char ch[64], ch2[64], buf[64];
    chan_name(ch, sizeof ch, "a");
    chan_name(ch2, sizeof ch2, "b");
    struct zimp_config cfg = { .slots = 4, .slot_size = 256, .stall_timeout_ns = 50 * MS };
    OK(zimp_create(ch, &cfg));                                         /* create */
    zimp_sender *s;
    CHECK(zimp_sender_open("trace-no-such-channel", &s) == -ENOENT, "error");   /* error */
    zimp_trace_mark("every event");                                    /* mark */
    zimp_receiver *r;
    OK(zimp_receiver_open(ch, &r));                                    /* open */
    OK(zimp_sender_open(ch, &s));
    OK(zimp_send(s, "hello", 5, -1));                                  /* send */
    CHECK(zimp_recv(r, buf, sizeof buf, -1) == 5, "recv");             /* recv */
    OK(zimp_send(s, "zero-copy", 9, -1));
    const void *p;
    size_t len;
    OK(zimp_read(r, &p, &len, -1));
    OK(zimp_release(r));
    /* sleep and wake: a blocking receiver, a message 30 ms later */
    OK(zimp_receiver_set_spin(r, 0));
    pthread_t t;
    struct delayed d = { s, 30 * MS, "late" };
    CHECK(pthread_create(&t, NULL, send_later, &d) == 0, "thread");
    CHECK(zimp_recv(r, buf, sizeof buf, 5000 * MS) == 4, "sleeping recv");
    pthread_join(t, NULL);
    /* spin: a busy-waiting receiver, a message a little later (growing delays: a
     * loaded machine may run the sender before the receiver starts waiting) */
    OK(zimp_receiver_set_spin(r, UINT64_MAX));
    d.msg = "soon";
    for (int i = 0; i < 5; i++) {
        static const int64_t delay_ms[] = { 5, 20, 50, 100, 200 };
        d.delay_ns = delay_ms[i] * MS;
        CHECK(pthread_create(&t, NULL, send_later, &d) == 0, "thread");
        CHECK(zimp_recv(r, buf, sizeof buf, 5000 * MS) == 4, "spinning recv");
        pthread_join(t, NULL);
    }
    zimp_receiver_close(r);                                            /* close */
    if (stall_and_evict) {
        /* stall: a receiver that never reads holds the 4-slot ring */
        OK(zimp_receiver_open(ch, &r));
        for (int i = 0; i < 4; i++)
            OK(zimp_send(s, "fill", 4, -1));
        CHECK(zimp_send(s, "more", 4, 5000 * MS) == -ETIMEDOUT, "stall");   /* stall */
        unsigned idx[4];
        CHECK(zimp_stalled(s, idx, 4) == 1, "stalled");
        OK(zimp_evict(s, idx[0]));                                     /* evict */
        CHECK(zimp_recv(r, buf, sizeof buf, 0) == -ECONNRESET, "evicted recv");
        zimp_receiver_close(r);
    }
    zimp_sender_close(s);
    /* crash: a sender killed -9; its receiver finds it dead */
    OK(zimp_create(ch2, NULL));
    OK(zimp_receiver_open(ch2, &r));
    crash_sender(ch2);
    CHECK(zimp_recv(r, buf, sizeof buf, 5000 * MS) == 4, "message of the crashed sender");
    CHECK(zimp_recv(r, buf, sizeof buf, 5000 * MS) == -EPIPE, "drained after the crash");   /* crash */
    zimp_receiver_close(r);
    OK(zimp_unlink(ch));                                               /* unlink */
    OK(zimp_unlink(ch2));
    /* a heap's life: create, open, a block allocated and freed, close, unlink */
    char hn[64];
    chan_name(hn, sizeof hn, "heap");
    struct zimp_heap_config hc = { .size = 1 << 20 };
    OK(zimp_heap_create(hn, &hc));
    zimp_heap *h;
    OK(zimp_heap_open(hn, &h));
    void *blk;
    struct zimp_ref ref;
    OK(zimp_heap_alloc(h, 1000, &blk, &ref));                          /* alloc */
    OK(zimp_heap_release(h, &ref));                                    /* free */
    zimp_heap_close(h);
    OK(zimp_heap_unlink(hn));
}

/* ---- tests ---- */

static int test_every_event(void)
{
    if (!(zimp_trace_outputs() & ZIMP_TRACE_HAVE_OTF2) || !have_otf2_print())
        return SKIP;
    char dir[512], opts[600];
    path_in(dir, sizeof dir, "t");
    snprintf(opts, sizeof opts, "file=%s,buffer=4K", dir);
    OK(zimp_trace_set(ZIMP_TRACE_TEST, opts));                         /* start */
    every_event(true);
    OK(zimp_trace_set(ZIMP_TRACE_OFF, NULL));                          /* stop, flush */
    bool seen[NTYPES] = { false }, want[NTYPES];
    int archives;
    otf2_print_all(dir, seen, &archives);
    CHECK(archives > 1, "a 4 KiB buffer flushes several archives, got %d", archives);
    for (int k = 1; k < NTYPES; k++) {
        CHECK(seen[k], "otf2-print shows no \"%s\" event", names[k]);
        want[k] = true;
    }
    json_check(dir, want);
    /* the fields the thesis asks for, in the text export */
    char *text;
    struct counts c;
    OK(count_events(dir, &c, &text));
    CHECK(strstr(text, "send   channel=trace-") && strstr(text, "position=0 length=5 bytes=68656c6c6f"),
          "send fields:\n%s", text);
    CHECK(strstr(text, "recv   channel=trace-") && strstr(text, "receiver=0"), "recv fields");
    CHECK(strstr(text, "open   channel=trace-") && strstr(text, "slots=4 slot_size=256"), "open resources");
    CHECK(strstr(text, "open   heap=trace-") && strstr(text, "size=1048576"), "heap open:\n%s", text);
    CHECK(strstr(text, "alloc  heap=trace-") && strstr(text, "offset=0 length=1000"), "heap alloc");
    CHECK(strstr(text, "free   heap=trace-"), "heap free");
    CHECK(strstr(text, "error=-2 \"no channel 'trace-no-such-channel'\""), "error reason");
    CHECK(strstr(text, "error=-110") && strstr(text, "error=-32"), "stall and EPIPE errors returned");
    free(text);
    /* merged into one archive: same events, one reading */
    char merged[512];
    path_in(merged, sizeof merged, "merged");
    int n = zimp_trace_merge(dir, merged);
    CHECK(n == c.lines, "merge wrote %d events, the parts hold %d", n, c.lines);
    bool seen2[NTYPES] = { false };
    otf2_print_all(merged, seen2, &archives);
    CHECK(archives == 1, "one merged archive");
    CHECK(zimp_trace_merge(dir, merged) == -EEXIST, "merge refuses an existing directory");
    return 0;
}

/* Runs a small workload at `level` in a child that exits normally. */
static void traced_child(int level, const char *dir)
{
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        char opts[600];
        snprintf(opts, sizeof opts, "file=%s", dir);
        if (zimp_trace_set(level, opts) != 0)
            _exit(3);
        char ch[64], buf[16];
        chan_name(ch, sizeof ch, "lv");
        zimp_sender *s;
        zimp_receiver *r;
        if (zimp_create(ch, NULL) != 0 || zimp_receiver_open(ch, &r) != 0 || zimp_sender_open(ch, &s) != 0)
            _exit(4);
        zimp_receiver_set_spin(r, 0);
        zimp_recv(r, buf, sizeof buf, 20 * MS);          /* times out: sleeps, an error */
        zimp_send(s, "x", 1, -1);
        zimp_recv(r, buf, sizeof buf, -1);
        zimp_sender *bad;
        zimp_sender_open("trace-no-such-channel", &bad); /* error */
        zimp_trace_mark("levels");
        zimp_sender_close(s);
        zimp_receiver_close(r);
        zimp_unlink(ch);
        exit(0);                                          /* the destructor flushes */
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
}

static int test_levels(void)
{
    if (!(zimp_trace_outputs() & ZIMP_TRACE_HAVE_OTF2))
        return SKIP;
    CHECK(zimp_trace_level_of("debug") == ZIMP_TRACE_DEBUG && zimp_trace_level_of("OFF") == 0 &&
          zimp_trace_level_of("4") == 4 && zimp_trace_level_of("verbose") == -EINVAL, "level names");
    CHECK(zimp_trace_set(5, NULL) == -EINVAL && zimp_trace_set(-1, NULL) == -EINVAL, "bad levels");
    CHECK(zimp_trace_set(ZIMP_TRACE_INFO, "colour=red") == -EINVAL, "bad option");
    CHECK(zimp_trace_set(ZIMP_TRACE_INFO, "buffer=12") == -EINVAL, "tiny buffer");
    /* sizes whose suffix shift wraps to a valid size, and sizes past strtoull */
    CHECK(zimp_trace_set(ZIMP_TRACE_INFO, "buffer=17592186044417M") == -EINVAL, "wrapping buffer size");
    CHECK(zimp_trace_set(ZIMP_TRACE_INFO, "buffer=18014398509481985K") == -EINVAL, "wrapping buffer size");
    CHECK(zimp_trace_set(ZIMP_TRACE_INFO, "buffer=99999999999999999999999") == -EINVAL, "huge buffer size");
    CHECK(zimp_trace_set(ZIMP_TRACE_INFO, "buffer=1025M") == -EINVAL, "buffer over 1 GiB");
    CHECK(zimp_trace_level() == ZIMP_TRACE_OFF, "refused settings change nothing");
    static const struct { int level; const char *must[6]; const char *never[6]; } cases[] = {
        { ZIMP_TRACE_ERROR, { "error", "mark" }, { "open", "start", "send", "sleep", "create" } },
        { ZIMP_TRACE_INFO, { "error", "open", "close", "create", "start", "stop" }, { "send", "recv", "sleep", "wake", "spin" } },
        { ZIMP_TRACE_DEBUG, { "send", "recv", "sleep", "open", "error" }, { "spin", "flush" } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[512], leaf[16];
        snprintf(leaf, sizeof leaf, "level%d", cases[i].level);
        path_in(dir, sizeof dir, leaf);
        traced_child(cases[i].level, dir);
        struct counts c;
        OK(count_events(dir, &c, NULL));
        for (int k = 0; k < 6 && cases[i].must[k]; k++)
            for (int t = 1; t < NTYPES; t++)
                if (!strcmp(names[t], cases[i].must[k]))
                    CHECK(c.type[t] > 0, "level %d records no %s", cases[i].level, names[t]);
        for (int k = 0; k < 6 && cases[i].never[k]; k++)
            for (int t = 1; t < NTYPES; t++)
                if (!strcmp(names[t], cases[i].never[k]))
                    CHECK(c.type[t] == 0, "level %d records %d %s", cases[i].level, c.type[t], names[t]);
    }
    return 0;
}

static int test_off_no_file(void)
{
    CHECK(zimp_trace_level() == ZIMP_TRACE_OFF, "off by default (ZIMP_TRACE unset)");
    char dir[512];
    path_in(dir, sizeof dir, "off");
    CHECK(mkdir(dir, 0777) == 0, "mkdir");
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) != 0 || zimp_trace_set(ZIMP_TRACE_OFF, "file=elsewhere") != 0)
            _exit(3);
        every_event(false);
        zimp_trace_mark("not recorded");
        if (zimp_trace_flush() != 0)
            _exit(4);
        exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
    CHECK(system(cmd) == 0, "tracing off wrote files in %s", dir);
    CHECK(zimp_trace_export(dir, stdout, ZIMP_TRACE_TEXT) == -ENOENT, "nothing to export");
    return 0;
}

/* A child traces, flushes after `flushed` messages, records more, and is killed -9. */
static int test_kill9(void)
{
    if (!(zimp_trace_outputs() & ZIMP_TRACE_HAVE_OTF2) || !have_otf2_print())
        return SKIP;
    enum { FLUSHED = 100, LATE = 50 };
    for (int round = 0; round < 2; round++) {
        char dir[512], opts[600];
        path_in(dir, sizeof dir, round ? "kill-auto" : "kill-explicit");
        snprintf(opts, sizeof opts, "file=%s%s", dir, round ? ",buffer=4K" : "");
        int pfd[2];
        CHECK(pipe(pfd) == 0, "pipe");
        pid_t pid = fork();
        if (pid == 0) {
            char ch[64], buf[32], msg[32];
            chan_name(ch, sizeof ch, "k");
            zimp_sender *s;
            zimp_receiver *r;
            if (zimp_trace_set(ZIMP_TRACE_DEBUG, opts) != 0 || zimp_create(ch, NULL) != 0 ||
                zimp_receiver_open(ch, &r) != 0 || zimp_sender_open(ch, &s) != 0)
                _exit(3);
            zimp_unlink(ch);
            for (int i = 0; i < FLUSHED + LATE; i++) {
                if (i == FLUSHED && round == 0 && zimp_trace_flush() < 0)
                    _exit(4);
                snprintf(msg, sizeof msg, "%s%05d", i < FLUSHED ? "early" : "late", i);
                if (zimp_send(s, msg, strlen(msg), -1) != 0 || zimp_recv(r, buf, sizeof buf, -1) < 0)
                    _exit(5);
            }
            if (write(pfd[1], "k", 1) != 1)
                _exit(6);
            pause();
            _exit(7);
        }
        close(pfd[1]);
        char b;
        CHECK(read(pfd[0], &b, 1) == 1, "child ready");
        close(pfd[0]);
        kill(pid, SIGKILL);
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st), "killed");
        bool seen[NTYPES] = { false };
        int archives;
        otf2_print_all(dir, seen, &archives);
        CHECK(archives >= 1, "no archive left by the killed process");
        struct counts c;
        char *text;
        OK(count_events(dir, &c, &text));
        if (round == 0) {
            /* exactly what was flushed: the early messages, none of the late ones */
            CHECK(c.type[7] == FLUSHED && c.type[8] == FLUSHED, "send %d recv %d, want %d each",
                  c.type[7], c.type[8], FLUSHED);
            CHECK(!strstr(text, "6c617465"), "an unflushed (late) message reached the archive");
        } else {
            /* full 4 KiB buffers were written as they filled: a prefix of the run */
            CHECK(archives > 2 && c.type[7] > 0 && c.type[7] < FLUSHED + LATE, "send %d in %d archives",
                  c.type[7], archives);
            /* A kill in the middle of a flush leaves an archive cut short (an
             * empty traces.otf2): the other archives must still be read. */
            char cut[600], file[700];
            snprintf(cut, sizeof cut, "%s/%d-%d-999999", dir, (int)pid, (int)pid);
            snprintf(file, sizeof file, "%s/traces.otf2", cut);
            CHECK(mkdir(cut, 0700) == 0 && creat(file, 0600) >= 0, "making a cut-short archive");
            struct counts c2;
            OK(count_events(dir, &c2, NULL));
            CHECK(c2.type[7] == c.type[7] && c2.lines == c.lines, "%d lines with a cut-short archive, %d without",
                  c2.lines, c.lines);
            CHECK(strstr(zimp_last_detail(), "skipped") && strstr(zimp_last_detail(), "999999"),
                  "the skipped archive is not named: '%s'", zimp_last_detail());
            CHECK(count_events(cut, &c2, NULL) == -EIO, "the cut-short archive alone is an error");
            /* A FIFO among an archive's files (OTF2 opens them blocking: the
             * reader hung) and a link to the directory (its events counted
             * twice): the first is skipped, the second not followed. */
            char sh[4096];
            snprintf(sh, sizeof sh,
                     "a=$(ls -d '%s'/*-*-0 | head -1) && cp -a \"$a\" '%s/zz-fifo' && "
                     "for f in '%s'/zz-fifo/traces/*.evt; do rm \"$f\" && mkfifo \"$f\"; done && "
                     "ln -s . '%s/self'", dir, dir, dir, dir);
            CHECK(system(sh) == 0, "making a FIFO archive and a link: %s", sh);
            OK(count_events(dir, &c2, NULL));
            CHECK(c2.lines == c.lines, "%d lines with a FIFO archive and a link, %d without", c2.lines, c.lines);
            CHECK(strstr(zimp_last_detail(), "2 of") && strstr(zimp_last_detail(), "skipped"),
                  "two archives skipped (cut short, FIFO): '%s'", zimp_last_detail());
        }
        free(text);
    }
    return 0;
}

enum { THREADS = 4, PER_THREAD = 300 };

static void *thread_work(void *arg)
{
    long i = (long)arg;
    char ch[64], buf[32], msg[32];
    snprintf(ch, sizeof ch, "trace-%d-th%ld", (int)getpid(), i);
    zimp_sender *s;
    zimp_receiver *r;
    if (zimp_create(ch, NULL) != 0 || zimp_receiver_open(ch, &r) != 0 || zimp_sender_open(ch, &s) != 0)
        return (void *)1;
    zimp_unlink(ch);
    for (int k = 0; k < PER_THREAD; k++) {
        snprintf(msg, sizeof msg, "t%ld-%d", i, k);
        if (zimp_send(s, msg, strlen(msg), -1) != 0 || zimp_recv(r, buf, sizeof buf, -1) < 0)
            return (void *)2;
        zimp_trace_mark(msg);
    }
    zimp_sender_close(s);
    zimp_receiver_close(r);
    return NULL;
}

static int test_threads(void)
{
    if (!(zimp_trace_outputs() & ZIMP_TRACE_HAVE_OTF2) || !have_otf2_print())
        return SKIP;
    char dir[512], opts[600];
    path_in(dir, sizeof dir, "threads");
    snprintf(opts, sizeof opts, "file=%s,buffer=8K", dir);
    OK(zimp_trace_set(ZIMP_TRACE_DEBUG, opts));
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, thread_work, (void *)i) == 0, "thread");
    /* meanwhile, flushes from the main thread too */
    for (int i = 0; i < 20; i++) {
        OK(zimp_trace_flush());
        usleep(1000);
    }
    for (int i = 0; i < THREADS; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        CHECK(rv == NULL, "thread %d failed (%ld)", i, (long)rv);
    }
    OK(zimp_trace_set(ZIMP_TRACE_OFF, NULL));
    bool seen[NTYPES] = { false };
    int archives;
    otf2_print_all(dir, seen, &archives);
    struct counts c;
    char *text;
    OK(count_events(dir, &c, &text));
    CHECK(c.type[7] == THREADS * PER_THREAD && c.type[8] == THREADS * PER_THREAD &&
          c.type[16] == THREADS * PER_THREAD, "send %d recv %d mark %d", c.type[7], c.type[8], c.type[16]);
    /* each thread's events are its own, none lost or doubled */
    for (int i = 0; i < THREADS; i++)
        for (int k = 0; k < PER_THREAD; k += 37) {
            char want[48];
            snprintf(want, sizeof want, "\"t%d-%d\"\n", i, k);
            char *at = strstr(text, want);
            CHECK(at && !strstr(at + 1, want), "mark %s appears once", want);
        }
    free(text);
    return 0;
}

/* ZIMP_TRACE in the environment of a program that never calls the trace API. */
static int test_env(void)
{
    if (!(zimp_trace_outputs() & ZIMP_TRACE_HAVE_OTF2))
        return SKIP;
    char dir[512], env[600], bad[512], cmd[10240];
    path_in(dir, sizeof dir, "env");
    path_in(bad, sizeof bad, "bad");
    snprintf(env, sizeof env, "ZIMP_TRACE=info,file=%s", dir);
    snprintf(cmd, sizeof cmd, "%s '%s' role-open && ZIMP_TRACE=loud,file=%s '%s' role-open", env, self_exe,
             bad, self_exe);
    CHECK(system(cmd) == 0, "%s", cmd);
    struct counts c;
    OK(count_events(dir, &c, NULL));
    CHECK(c.type[1] == 1 && c.type[2] == 1 && c.type[5] == 2 && c.type[6] == 2 && c.type[7] == 0,
          "start %d stop %d open %d close %d send %d", c.type[1], c.type[2], c.type[5], c.type[6], c.type[7]);
    struct stat st;
    CHECK(stat(bad, &st) != 0, "a bad level traced anyway");
    return 0;
}

static int role_open(void)
{
    char ch[64];
    chan_name(ch, sizeof ch, "env");
    zimp_sender *s;
    zimp_receiver *r;
    if (zimp_create(ch, NULL) || zimp_receiver_open(ch, &r) || zimp_sender_open(ch, &s))
        return 1;
    zimp_send(s, "x", 1, -1);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    zimp_unlink(ch);
    return 0;
}

/* The LTTng-UST provider loads and registers; with a session daemon, a session records zimp. */
static int test_lttng(void)
{
    if (!(zimp_trace_outputs() & ZIMP_TRACE_HAVE_LTTNG))
        return SKIP;
    char dir[512];
    path_in(dir, sizeof dir, "no-otf2");
    char opts[600];
    snprintf(opts, sizeof opts, "lttng=1,otf2=0,file=%s", dir);
    int rc = zimp_trace_set(ZIMP_TRACE_DEBUG, opts);
    CHECK(rc == 0, "lttng=1 refused: %d", rc);
    unsigned o = zimp_trace_outputs();
    CHECK((o & ZIMP_TRACE_USE_LTTNG) && !(o & ZIMP_TRACE_USE_OTF2), "outputs 0x%x", o);
    every_event(false);
    OK(zimp_trace_set(ZIMP_TRACE_OFF, NULL));
    struct stat st;
    CHECK(stat(dir, &st) != 0, "otf2=0 wrote an archive");
    return 0;
}

static const struct { const char *name; int (*fn)(void); } tests[] = {
    { "trace_every_event", test_every_event }, { "trace_levels", test_levels },
    { "trace_off_no_file", test_off_no_file }, { "trace_kill9", test_kill9 },
    { "trace_threads", test_threads },         { "trace_env", test_env },
    { "trace_lttng", test_lttng },
};

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    self_exe[n > 0 ? n : 0] = '\0';
    if (argc == 2 && !strcmp(argv[1], "role-open"))
        return role_open();
    if (argc != 2) {
        fprintf(stderr, "usage: zimp-trace-tests NAME\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (strcmp(argv[1], tests[i].name))
            continue;
        snprintf(tmp, sizeof tmp, "/tmp/zimp-%s-XXXXXX", tests[i].name);
        if (!mkdtemp(tmp)) {
            perror("mkdtemp");
            return 1;
        }
        int rc = tests[i].fn();
        if (rc == 0 || getenv("ZIMP_TRACE_TEST_KEEP") == NULL)
            cleanup();
        else
            fprintf(stderr, "kept %s\n", tmp);
        return rc;
    }
    fprintf(stderr, "no test %s\n", argv[1]);
    return 2;
}
