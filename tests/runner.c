/*
 * zimp-tests: with no argument lists the tests; with a name runs that test
 * in a forked child (own process group) under a timeout, then kills any
 * process the test left behind and checks that no segment of it remains.
 * Exit 0 pass, 1 fail, 77 skip. `zimp-tests --exec-member ROLE NAME FD` is
 * what a test's child exec()s into (exec_member in test-review.c).
 */
#include "task.h"

#include <sys/prctl.h>
#include <sys/wait.h>

#define TEST_ENTRY(name, timeout_s) TEST_IMPL(name);
#include "test-list.h"
#undef TEST_ENTRY

static const struct entry {
    const char *name;
    int (*fn)(void);
    int timeout_s;
} tests[] = {
#define TEST_ENTRY(name, timeout_s) { #name, run_test_##name, timeout_s },
#include "test-list.h"
#undef TEST_ENTRY
};

static int run(const struct entry *t)
{
    int timeout_s = t->timeout_s * (under_sanitizer() ? 4 : 1);
    int64_t start = now_ns();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        exit(t->fn());
    }
    setpgid(pid, pid);
    int st = 0, rc;
    int64_t end = start + (int64_t)timeout_s * NS_PER_S;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            if (WIFEXITED(st))
                rc = WEXITSTATUS(st);
            else {
                fprintf(stderr, "[%s] test process killed by signal %d\n", t->name,
                        WTERMSIG(st));
                rc = 1;
            }
            break;
        }
        if (now_ns() > end) {
            fprintf(stderr, "[%s] TIMEOUT after %d s\n", t->name, timeout_s);
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            rc = 1;
            break;
        }
        sleep_ns(NS_PER_MS);
    }
    /* stragglers of the test (its process group, or orphans we inherited) */
    kill(-pid, SIGKILL);
    while (waitpid(-1, &st, 0) > 0 || errno == EINTR)
        ;
    if (leftover_segments(1) && rc == 0) {
        fprintf(stderr, "[%s] FAIL: the test left shared-memory segments behind\n", t->name);
        rc = 1;
    }
    double secs = (double)(now_ns() - start) / 1e9;
    printf("%s %s (%.2f s)\n", rc == 0 ? "ok" : rc == TEST_SKIP ? "skip" : "FAIL",
           t->name, secs);
    return rc == 0 || rc == TEST_SKIP ? rc : 1;
}

int main(int argc, char **argv)
{
    size_t n = sizeof tests / sizeof tests[0];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 5 && strcmp(argv[1], "--exec-member") == 0)
        return exec_member(argv[2], argv[3], atoi(argv[4]));
    if (argc < 2) {
        for (size_t i = 0; i < n; i++)
            printf("%s\n", tests[i].name);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[1], tests[i].name))
            continue;
        task_name = tests[i].name;
        snprintf(task_prefix, sizeof task_prefix, "zt%d-%s", (int)getpid(), tests[i].name);
        for (char *c = task_prefix; *c; c++)   /* '_' is not a legal name char */
            if (*c == '_')
                *c = '-';
        return run(&tests[i]);
    }
    fprintf(stderr, "no test named %s\n", argv[1]);
    return 1;
}
