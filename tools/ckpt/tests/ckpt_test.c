/* ckpt_test.c - tests of the checkpoint-size meter on a child with a known
 * memory image: one mapping of 100 pages with 37 random pages, 10 half-zero
 * pages and 53 touched zero pages, plus 20 never-touched pages.
 *   ckpt_test scan            scanner counts for that mapping
 *   ckpt_test cli ZIMP_CKPT   the command: JSON, --stop, errors
 *   ckpt_test args ZIMP_CKPT  the command's arguments: PIDs that wrap, --stop
 *                             of itself, --prepare-timeout, JSON escaping
 * Exit 0 pass, 1 fail. */
#define _GNU_SOURCE
#include "ckpt_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

#define NPAGES 100
#define NRANDOM 37
#define NPARTIAL 10
#define NUNTOUCHED 20

static pid_t child;
static uintptr_t region, untouched;
static size_t page;

static void fill_random(unsigned char *p, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(rand_r(seed) % 255 + 1);   /* never zero */
}

/* Starts the child; it builds its image, reports the addresses, sleeps. */
static void start_child(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    int fd[2];
    CHECK(pipe(fd) == 0);
    child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        close(fd[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* [guard][NPAGES rw][guard][NUNTOUCHED r][guard]: PROT_NONE guards keep
         * the kernel from merging our mappings with each other or with a
         * runtime's (sanitizers map memory of their own next to ours). */
        size_t total = NPAGES + NUNTOUCHED + 3;
        unsigned char *base = mmap(NULL, total * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
            _exit(1);
        unsigned char *m = base + page, *u = base + (NPAGES + 2) * page;
        if (mprotect(m, NPAGES * page, PROT_READ | PROT_WRITE) || mprotect(u, NUNTOUCHED * page, PROT_READ))
            _exit(1);
        unsigned seed = 42;
        for (size_t i = 0; i < NPAGES; i++) {
            unsigned char *p = m + i * page;
            if (i < NRANDOM)
                fill_random(p, page, &seed);
            else if (i < NRANDOM + NPARTIAL)
                fill_random(p, page / 2, &seed);     /* second half stays zero */
            else
                *(volatile unsigned char *)p = 0;    /* present, all zero */
        }
        uintptr_t a[2] = { (uintptr_t)m, (uintptr_t)u };
        if (write(fd[1], a, sizeof a) != sizeof a)
            _exit(1);
        for (;;)
            pause();
    }
    close(fd[1]);
    uintptr_t a[2];
    CHECK(read(fd[0], a, sizeof a) == sizeof a);
    close(fd[0]);
    region = a[0];
    untouched = a[1];
}

static void stop_child(void)
{
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

/* A child that has exited and is not reaped yet: a zombie, with no memory. */
static pid_t start_zombie(void)
{
    pid_t z = fork();
    CHECK(z >= 0);
    if (z == 0)
        _exit(0);
    siginfo_t si;
    CHECK(waitid(P_PID, (id_t)z, &si, WEXITED | WNOWAIT) == 0);   /* exited, still there */
    return z;
}

/* The hostile process name of the JSON test, and how the JSON must spell it:
 * quote, backslash, a control character, DEL (escaped too), two bytes that
 * are not UTF-8, a valid two-byte character (é). At most 15 bytes. */
#define ODD_COMM "r\"\\\x01" "\x7f\xff\xfe" "\xc3\xa9" "z"
#define ODD_JSON "\"comm\": \"r\\\"\\\\\\u0001" "\\u007f\\u00ff\\u00fe" "\xc3\xa9" "z\","

static void no_answer(int sig)
{
    (void)sig;
}

/* A child named ODD_COMM that catches SIGUSR2 and never answers it. */
static pid_t start_odd_child(void)
{
    int fd[2];
    CHECK(pipe(fd) == 0);
    pid_t p = fork();
    CHECK(p >= 0);
    if (p == 0) {
        close(fd[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        prctl(PR_SET_NAME, ODD_COMM);
        struct sigaction sa = { .sa_handler = no_answer };
        sigaction(SIGUSR2, &sa, NULL);
        if (write(fd[1], "r", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(fd[1]);
    char c;
    CHECK(read(fd[0], &c, 1) == 1);
    close(fd[0]);
    return p;
}

static int test_scan(void)
{
    struct ckpt_opts o = { 0 };
    CHECK(ckpt_parse_codecs(&o, "zstd-1,zstd-3,lz4-1,lz4hc-9") == 0 && o.ncodecs == 4);
    CHECK(ckpt_parse_codecs(&o, "gzip-1") == -EINVAL);
    CHECK(ckpt_parse_codecs(&o, "zstd-3,lz4-1") == 0);
    CHECK(ckpt_parse_kinds(&o, "heap,bogus") == -EINVAL);
    CHECK(ckpt_parse_kinds(&o, "anon") == 0 && o.kinds == 1u << CKPT_ANON);
    o.addr = region;
    struct ckpt_result r;
    char err[256];
    CHECK(ckpt_scan(child, &o, &r, err, sizeof err) == 0);
    const struct ckpt_counts *c = &r.kind[CKPT_ANON];
    fprintf(stderr, "mapping: dumped %llu zero %llu partial %llu nonzero %llu zstd-3 %llu lz4 %llu\n",
            (unsigned long long)c->dumped_pages, (unsigned long long)c->zero_pages,
            (unsigned long long)c->partial_pages, (unsigned long long)c->nonzero_pages,
            (unsigned long long)c->compressed[0], (unsigned long long)c->compressed[1]);
    CHECK(c->mappings == 1);
    CHECK(c->mapped_bytes == NPAGES * page);
    CHECK(c->resident_pages == NPAGES);
    CHECK(c->dumped_pages == NPAGES);
    CHECK(c->zero_pages == NPAGES - NRANDOM - NPARTIAL);
    CHECK(c->partial_pages == NPARTIAL);
    CHECK(c->nonzero_pages == NRANDOM + NPARTIAL);
    CHECK(c->zero_bytes_in_nonzero == NPARTIAL * page / 2);
    CHECK(c->unreadable_pages == 0);
    CHECK(r.total.dumped_pages == c->dumped_pages);
    /* bytes from 1..255: incompressible beyond ~1 bit/byte; half pages compress */
    uint64_t raw = c->nonzero_pages * page;
    for (int i = 0; i < o.ncodecs; i++) {
        CHECK(c->compressed[i] > (NRANDOM + NPARTIAL / 2) * page * 8 / 10);
        CHECK(c->compressed[i] < raw);
    }

    /* a never-touched mapping: nothing to dump, unless counted VM-style */
    o.addr = untouched;
    CHECK(ckpt_scan(child, &o, &r, err, sizeof err) == 0);
    CHECK(r.total.mapped_bytes == NUNTOUCHED * page && r.total.resident_pages == 0);
    CHECK(r.total.dumped_pages == 0);
    o.all_pages = 1;
    CHECK(ckpt_scan(child, &o, &r, err, sizeof err) == 0);
    CHECK(r.total.dumped_pages == NUNTOUCHED && r.total.zero_pages == NUNTOUCHED);

    /* kind filter: only heap selected, the anonymous mapping is not counted */
    o.all_pages = 0;
    o.addr = region;
    CHECK(ckpt_parse_kinds(&o, "heap") == 0);
    CHECK(ckpt_scan(child, &o, &r, err, sizeof err) == 0);
    CHECK(r.total.mappings == 0 && r.total.dumped_pages == 0);

    /* whole-process walk, limited to the stack: a sanitizer's shadow mappings
     * are terabytes of pagemap to walk */
    struct ckpt_opts all = { 0 };
    CHECK(ckpt_parse_kinds(&all, "stack") == 0);
    CHECK(ckpt_scan(child, &all, &r, err, sizeof err) == 0);
    CHECK(r.total.dumped_pages >= 1 && r.kind[CKPT_STACK].mappings == 1);
    CHECK(strlen(r.comm) > 0);

    /* no such mapping, no such process */
    o.kinds = 0;
    o.addr = 8;
    CHECK(ckpt_scan(child, &o, &r, err, sizeof err) == -ENOENT);
    stop_child();
    o.addr = 0;
    CHECK(ckpt_scan(child, &o, &r, err, sizeof err) == -ESRCH);
    CHECK(strstr(err, "no such process") != NULL);

    /* exited, not reaped: its /proc files open and read empty, which must not
     * pass for a process without memory */
    pid_t z = start_zombie();
    CHECK(ckpt_scan(z, &o, &r, err, sizeof err) == -ESRCH);
    CHECK(strstr(err, "no such process") && strstr(err, "(it exited)"));
    CHECK(ckpt_gone(z) && !ckpt_gone(getpid()));
    waitpid(z, NULL, 0);
    return 0;
}

#define CMD_TIMEOUT 10   /* seconds; a command that stopped itself hangs */

static volatile pid_t cmd_group;

static void cmd_timeout(int sig)
{
    (void)sig;
    kill(-cmd_group, SIGKILL);   /* cmd_group > 0: its own group, set below */
}

/* Runs a command in a process group of its own (a command that signals its
 * group reaches nobody else), kills it after CMD_TIMEOUT seconds, returns its
 * exit status (128: killed) and (truncated) stdout+stderr. An argument "@self"
 * is replaced by the command's own pid. argv[0] is searched in PATH. */
static int run_cmd(char *const argv[], char *out, size_t cap)
{
    int fd[2];
    CHECK(pipe(fd) == 0);
    pid_t p = fork();
    CHECK(p >= 0);
    if (p == 0) {
        setpgid(0, 0);
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        char self[32], *args[32];
        snprintf(self, sizeof self, "%d", (int)getpid());
        int i;
        for (i = 0; argv[i] && i < 31; i++)
            args[i] = strcmp(argv[i], "@self") ? argv[i] : self;
        args[i] = NULL;
        execvp(args[0], args);
        _exit(127);
    }
    setpgid(p, p);
    cmd_group = p;
    struct sigaction sa = { .sa_handler = cmd_timeout };   /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    alarm(CMD_TIMEOUT);
    close(fd[1]);
    size_t len = 0;
    ssize_t n;
    while (len < cap - 1 && (n = read(fd[0], out + len, cap - 1 - len)) != 0) {
        if (n > 0)
            len += (size_t)n;
        else if (errno != EINTR)
            break;
    }
    out[len] = 0;
    close(fd[0]);
    int st;
    while (waitpid(p, &st, 0) != p)
        CHECK(errno == EINTR);
    alarm(0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    CHECK(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strrchr(buf, ')')[2];
}

static int test_cli(char *exe)
{
    static char out[1 << 16];
    char pid[32], addr[32];
    snprintf(pid, sizeof pid, "%d", (int)child);
    snprintf(addr, sizeof addr, "%lx", (unsigned long)region);
    char *a1[] = { exe, "--json", "--stop", "--codecs", "zstd-3", "--addr", addr, pid, NULL };
    CHECK(run_cmd(a1, out, sizeof out) == 0);
    fprintf(stderr, "%s", out);
    CHECK(strstr(out, "\"zero_pages\": 53,") != NULL);
    CHECK(strstr(out, "\"partial_pages\": 10,") != NULL);
    CHECK(strstr(out, "\"nonzero_pages\": 47,") != NULL);
    CHECK(strstr(out, "\"dumped_pages\": 100,") != NULL);
    CHECK(strstr(out, "\"zstd-3\": ") != NULL);
    CHECK(proc_state(child) != 'T');             /* --stop resumed it */
    char *a2[] = { exe, "--codecs", "lz4-1", "--only", "stack,heap", pid, NULL };
    CHECK(run_cmd(a2, out, sizeof out) == 0);
    CHECK(strstr(out, "total") && strstr(out, "lz4-1"));
    char *a3[] = { exe, "--codecs", "snappy", pid, NULL };
    CHECK(run_cmd(a3, out, sizeof out) == 2);
    char *a3b[] = { exe, "--addr", "zz", "--codecs", "none", pid, NULL };     /* measured everything */
    CHECK(run_cmd(a3b, out, sizeof out) == 2 && strstr(out, "bad --addr"));
    char *a4[] = { exe, "--prepare", "--prepare-timeout", "0.2", "--codecs", "none", "--only", "stack",
                   pid, NULL };
    CHECK(run_cmd(a4, out, sizeof out) == 0);      /* no library there: warns, measures */
    CHECK(strstr(out, "does not catch") != NULL);
    CHECK(strstr(out, "ZIMP_ZEROFREE not off") && !strstr(out, "lazy mode"));  /* any active mode */
    CHECK(proc_state(child) != 'Z');               /* and did not kill it */
    stop_child();
    char *a5[] = { exe, pid, NULL };
    CHECK(run_cmd(a5, out, sizeof out) == 1);
    CHECK(strstr(out, "no such process") != NULL);
    char *a6[] = { exe, "notapid", NULL };
    CHECK(run_cmd(a6, out, sizeof out) == 2);

    /* a zombie: named as exited, not measured as an empty process */
    pid_t z = start_zombie();
    snprintf(pid, sizeof pid, "%d", (int)z);
    char *a7[] = { exe, "--codecs", "none", pid, NULL };
    CHECK(run_cmd(a7, out, sizeof out) == 1);
    CHECK(strstr(out, "no such process") && strstr(out, "(it exited)"));
    char *a8[] = { exe, "--stop", "--codecs", "none", pid, NULL };
    CHECK(run_cmd(a8, out, sizeof out) == 1);
    CHECK(strstr(out, "(it exited)") != NULL);
    waitpid(z, NULL, 0);
    return 0;
}

/* The prefix that runs a command in a new PID namespace of its own, or NULL.
 * There kill(-1, ...) reaches nobody (the command is its init): the PID tests
 * cannot stop the machine's processes even if the parsing regressed. */
static char **pid_namespace(void)
{
    static char out[4096];
    static char *root[] = { "unshare", "-p", "-f", "--mount-proc", NULL };
    static char *user[] = { "unshare", "-U", "-r", "-p", "-f", "--mount-proc", NULL };
    char *t1[] = { "unshare", "-p", "-f", "--mount-proc", "true", NULL };
    char *t2[] = { "unshare", "-U", "-r", "-p", "-f", "--mount-proc", "true", NULL };
    if (run_cmd(t1, out, sizeof out) == 0)
        return root;
    if (run_cmd(t2, out, sizeof out) == 0)
        return user;
    return NULL;
}

/* PIDs that strtol takes but that are not process ids: each must be a usage
 * error naming the argument, with or without --stop, before any kill(). */
static void test_bad_pids(char *exe)
{
    static char out[1 << 16];
    static char *bad[] = { "4294967295", "4294967296", "99999999999999999999", "-5", "12abc",
                           "0", "2147483648", " 7", "+7", "", NULL };
    char **ns = pid_namespace();
    if (!ns)
        fprintf(stderr, "no PID namespace (unshare): --stop PID tests skipped\n");
    for (int stop = 0; stop < 2; stop++) {
        if (stop && !ns)
            continue;
        for (int i = 0; bad[i]; i++) {
            char *argv[16];
            int n = 0;
            for (int k = 0; ns && ns[k]; k++)
                argv[n++] = ns[k];
            argv[n++] = exe;
            if (stop)
                argv[n++] = "--stop";
            char *rest[] = { "--codecs", "none", "--", bad[i], NULL };
            memcpy(argv + n, rest, sizeof rest);
            int rc = run_cmd(argv, out, sizeof out);
            fprintf(stderr, "%s'%s' -> %d: %s", stop ? "--stop " : "", bad[i], rc, out);
            char quoted[64];
            snprintf(quoted, sizeof quoted, "'%s' is not a process id", bad[i]);
            CHECK(rc == 2 && strstr(out, quoted));
        }
    }
    char *opt[] = { exe, "--stop", "-5", NULL };     /* without "--": an unknown option */
    CHECK(run_cmd(opt, out, sizeof out) == 2);
}

static int test_args(char *exe)
{
    static char out[1 << 16];
    test_bad_pids(exe);

    /* --stop of itself would never be resumed; measuring itself is fine */
    char *s1[] = { exe, "--stop", "--codecs", "none", "--only", "stack", "@self", NULL };
    CHECK(run_cmd(s1, out, sizeof out) == 2);
    CHECK(strstr(out, "--stop of zimp-ckpt itself") != NULL);
    char *s2[] = { exe, "--codecs", "none", "--only", "stack", "@self", NULL };
    CHECK(run_cmd(s2, out, sizeof out) == 0);

    /* a target that catches the signal and never answers: nan/inf used to
     * spin in sigtimedwait for ever, a negative timeout not to wait at all */
    pid_t odd = start_odd_child();
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)odd);
    static char *bad_to[] = { "nan", "inf", "-inf", "1e300", "-1", "3601", "5x", "", NULL };
    for (int i = 0; bad_to[i]; i++) {
        char *a[] = { exe, "--prepare", "--prepare-timeout", bad_to[i], "--codecs", "none",
                      "--only", "stack", pid, NULL };
        int rc = run_cmd(a, out, sizeof out);
        fprintf(stderr, "--prepare-timeout '%s' -> %d: %s", bad_to[i], rc, out);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "bad --prepare-timeout '%s'", bad_to[i]);
        CHECK(rc == 2 && strstr(out, quoted) && strstr(out, "0 to 3600"));
    }
    char *t1[] = { exe, "--prepare", "--prepare-timeout", "0.2", "--codecs", "none", "--only",
                   "stack", pid, NULL };
    CHECK(run_cmd(t1, out, sizeof out) == 0);    /* waits, says so, measures */
    CHECK(strstr(out, "no answer to the prepare request (timed out)") != NULL);
    CHECK(strstr(out, "ZIMP_ZEROFREE not off") && !strstr(out, "lazy mode"));

    /* JSON of a process named with quote, backslash, control and non-UTF-8 bytes */
    char *j[] = { exe, "--json", "--codecs", "zstd-3", "--only", "stack", pid, NULL };
    CHECK(run_cmd(j, out, sizeof out) == 0);
    fprintf(stderr, "%s", out);
    CHECK(strstr(out, ODD_JSON) != NULL);
    for (const unsigned char *p = (const unsigned char *)out; *p; p++)
        CHECK(*p >= 0x20 ? *p != 0xff && *p != 0xfe : *p == '\n');
    kill(odd, SIGKILL);
    waitpid(odd, NULL, 0);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "scan")) {
        start_child();
        return test_scan();
    }
    if (argc >= 3 && !strcmp(argv[1], "cli")) {
        start_child();
        return test_cli(argv[2]);
    }
    if (argc >= 3 && !strcmp(argv[1], "args"))
        return test_args(argv[2]);
    fprintf(stderr, "usage: %s scan | cli ZIMP_CKPT | args ZIMP_CKPT\n", argv[0]);
    return 2;
}
