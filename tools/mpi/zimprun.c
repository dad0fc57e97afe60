/*
 * zimprun: starts N ranks of an MPI program built with zimpcc.
 *
 *   zimprun -n N [--grace SECONDS] [--job NAME] [--] program [args...]
 *
 * Each rank learns its rank, the job size and the job name (the prefix of
 * every channel the job makes) from the environment. The ranks make and
 * unlink their channels themselves as soon as every rank has opened them;
 * a cleanup process started first removes whatever is left with the job's
 * prefix once zimprun is gone, however it went (kill -9 included). Ranks
 * die with zimprun (PR_SET_PDEATHSIG).
 *
 * SIGINT, SIGTERM and SIGHUP are forwarded to every rank. The first rank to
 * fail (non-zero exit, or a signal) is reported on stderr with how it
 * failed; the others get `--grace` seconds (default 2) to finish on their
 * own (their MPI calls fail, or abort, within the detection bound), then
 * SIGTERM, then SIGKILL. A rank calling MPI_Abort ends the job at once.
 * Exit status: that of the first failing rank (128 + signal for a signal),
 * 0 if every rank exited with 0.
 */
#define _GNU_SOURCE
#include <zimp/zimp.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct rank {
    pid_t pid;
    bool done;
    int status;
};

static struct rank *ranks;
static int nranks;
static char job[96];

static void usage(void)
{
    fprintf(stderr, "usage: zimprun -n N [--grace SECONDS] [--job NAME] [--] program [args...]\n");
    exit(2);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- removing the job's channels ---- */

static int unlink_if_ours(const char *name, void *arg)
{
    (void)arg;
    size_t n = strlen(job);
    if (strncmp(name, job, n) == 0 && name[n] == '.')
        zimp_unlink(name);
    return 0;
}

static void sweep_channels(void)
{
    zimp_list(unlink_if_ours, NULL);
}

static bool pid_gone(pid_t pid)
{
    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');   /* a zombie is dead */
}

/*
 * The cleanup process: reads rank pids from the pipe until zimprun is gone
 * (end of file), waits (bounded) for those ranks to die, then unlinks every
 * channel of the job. It ignores terminal signals so Ctrl-C cannot stop it.
 */
static void cleanup_process(int fd) __attribute__((noreturn));
static void cleanup_process(int fd)
{
    setsid();
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {              /* hold no one's terminal or pipe open (ctest waits for those) */
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        close(null);
    }
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    pid_t pids[4096];
    size_t npids = 0;
    int32_t pid;
    while (read(fd, &pid, sizeof pid) == sizeof pid)
        if (npids < sizeof pids / sizeof pids[0])
            pids[npids++] = pid;
    double deadline = now_s() + 10.0;
    for (size_t i = 0; i < npids; i++)
        while (!pid_gone(pids[i]) && now_s() < deadline)
            usleep(10000);
    sweep_channels();
    _exit(0);
}

static int start_cleanup(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /*
         * A fresh image of ourselves runs the cleanup: a forked copy of an
         * instrumented (sanitizer) process is not safe to keep running.
         */
        close(p[1]);
        fcntl(p[0], F_SETFD, 0);
        char fd[16];
        snprintf(fd, sizeof fd, "%d", p[0]);
        execl("/proc/self/exe", "zimprun", "--cleanup", job, fd, (char *)NULL);
        cleanup_process(p[0]);            /* no /proc: do it in this copy */
    }
    close(p[0]);
    return p[1];
}

/* ---- ranks ---- */

static void child_exec(int r, pid_t parent, const sigset_t *oldmask, char **argv)
{
    char buf[32];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)              /* zimprun died before the line above */
        _exit(127);
    /* A launcher started in the background ignores SIGINT: its ranks must not, or forwarding is moot. */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    sigprocmask(SIG_SETMASK, oldmask, NULL);
    snprintf(buf, sizeof buf, "%d", r);
    setenv("ZIMP_MPI_RANK", buf, 1);
    snprintf(buf, sizeof buf, "%d", nranks);
    setenv("ZIMP_MPI_SIZE", buf, 1);
    snprintf(buf, sizeof buf, "%d", (int)parent);
    setenv("ZIMP_MPI_LAUNCHER", buf, 1);
    setenv("ZIMP_MPI_JOB", job, 1);
    execvp(argv[0], argv);
    fprintf(stderr, "zimprun: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static void signal_all(int sig)
{
    for (int r = 0; r < nranks; r++)
        if (ranks[r].pid > 0 && !ranks[r].done)
            kill(ranks[r].pid, sig);
}

static int live_ranks(void)
{
    int n = 0;
    for (int r = 0; r < nranks; r++)
        n += ranks[r].pid > 0 && !ranks[r].done;
    return n;
}

static int exit_code(int status)
{
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static bool failed(int status)
{
    return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

static void report(int r, int status)
{
    if (WIFSIGNALED(status))
        fprintf(stderr, "zimprun: rank %d (pid %d) was killed by signal %d (%s)\n", r, (int)ranks[r].pid,
                WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        fprintf(stderr, "zimprun: rank %d (pid %d) exited with status %d\n", r, (int)ranks[r].pid,
                WEXITSTATUS(status));
}

/* ---- the main loop ---- */

struct job_state {
    int first_failed;     /* rank, or -1 */
    int first_status;
    double term_at, kill_at;  /* when to send SIGTERM / SIGKILL to the rest (0: not planned) */
    double grace;
};

/*
 * Ranks that are found dead in one batch died in an order waitpid does not
 * tell. A signal death is taken as the cause before a non-zero exit: the
 * ranks that abort because a peer failed exit with a status, after it.
 */
static bool worse(int status, int than)
{
    return WIFSIGNALED(status) && !WIFSIGNALED(than);
}

static void reap(struct job_state *js)
{
    int status, first = -1, first_status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int r = 0; r < nranks; r++) {
            if (ranks[r].pid != pid || ranks[r].done)
                continue;
            ranks[r].done = true;
            ranks[r].status = status;
            if (failed(status) && (first < 0 || worse(status, first_status))) {
                first = r;
                first_status = status;
            }
        }
    }
    if (first >= 0 && js->first_failed < 0) {
        js->first_failed = first;
        js->first_status = first_status;
        report(first, first_status);
        js->term_at = now_s() + js->grace;
    }
}

static void on_signal(struct job_state *js, int sig)
{
    if (sig == SIGUSR1) {                 /* a rank called MPI_Abort (or hit a fatal error) */
        double soon = now_s() + 0.2;      /* time for it to exit, so it is the one reported */
        if (!js->term_at || js->term_at > soon)
            js->term_at = soon;
        return;
    }
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        signal_all(sig);
        if (!js->kill_at)
            js->kill_at = now_s() + 5.0;
    }
}

static void escalate(struct job_state *js)
{
    double t = now_s();
    if (js->term_at && t >= js->term_at) {
        if (live_ranks())
            fprintf(stderr, "zimprun: terminating the %d remaining rank(s)\n", live_ranks());
        signal_all(SIGTERM);
        js->term_at = 0;
        js->kill_at = t + 1.0;
    }
    if (js->kill_at && t >= js->kill_at) {
        signal_all(SIGKILL);
        js->kill_at = 0;
    }
}

static int run_job(char **argv, double grace, int cleanup_fd)
{
    sigset_t set, old;
    sigemptyset(&set);
    int sigs[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1 };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&set, sigs[i]);
    sigprocmask(SIG_BLOCK, &set, &old);
    pid_t me = getpid();
    struct job_state js = { -1, 0, 0, 0, grace };
    for (int r = 0; r < nranks; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "zimprun: fork: %s\n", strerror(errno));
            js.first_failed = r;
            js.first_status = 1 << 8;
            js.term_at = now_s();
            break;
        }
        if (pid == 0)
            child_exec(r, me, &old, argv);
        ranks[r].pid = pid;
        int32_t p32 = (int32_t)pid;
        if (write(cleanup_fd, &p32, sizeof p32) != sizeof p32)
            fprintf(stderr, "zimprun: warning: the cleanup process did not get pid %d\n", (int)pid);
    }
    while (live_ranks() > 0) {
        struct timespec tick = { 0, 50 * 1000000L };
        int sig = sigtimedwait(&set, NULL, &tick);
        if (sig > 0)
            on_signal(&js, sig);
        reap(&js);
        escalate(&js);
    }
    return js.first_failed < 0 ? 0 : exit_code(js.first_status);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--cleanup") == 0) {     /* started by ourselves, above */
        snprintf(job, sizeof job, "%s", argv[2]);
        cleanup_process(atoi(argv[3]));
    }
    int n = 1, i = 1;
    double grace = 2.0;
    const char *name = NULL;
    for (; i < argc; i++) {
        if ((strcmp(argv[i], "-n") == 0 || strcmp(argv[i], "-np") == 0) && i + 1 < argc) {
            n = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--grace") == 0 && i + 1 < argc) {
            grace = atof(argv[++i]);
        } else if (strcmp(argv[i], "--job") == 0 && i + 1 < argc) {
            name = argv[++i];
        } else if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (argv[i][0] == '-') {
            usage();
        } else {
            break;
        }
    }
    if (i >= argc || n < 1 || n > 4096)
        usage();
    if (name)
        snprintf(job, sizeof job, "%s", name);
    else
        snprintf(job, sizeof job, "mpi.%d.%lx", (int)getpid(), (unsigned long)(now_s() * 1e6) & 0xffffff);
    nranks = n;
    ranks = calloc((size_t)n, sizeof *ranks);
    if (!ranks)
        return 1;
    fflush(stdout);
    fflush(stderr);
    int cleanup_fd = start_cleanup();
    if (cleanup_fd < 0) {
        fprintf(stderr, "zimprun: cannot start the cleanup process: %s\n", strerror(errno));
        return 1;
    }
    int rc = run_job(argv + i, grace, cleanup_fd);
    sweep_channels();
    close(cleanup_fd);                    /* the cleanup process sweeps once more and exits */
    return rc;
}
