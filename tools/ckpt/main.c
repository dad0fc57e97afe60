/* zimp-ckpt - checkpoint-size meter: how large would a checkpoint of PID be,
 * with and without zero-page detection and compression. See docs/zerofree.md. */
#define _GNU_SOURCE
#include "common/json_out.h"
#include "ckpt_int.h"
#include "zimp_zerofree.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
        "usage: zimp-ckpt [options] PID\n"
        "Reads PID's memory like a process checkpointer and reports its size.\n"
        "  --json               JSON instead of a table\n"
        "  --only KINDS         heap,stack,anon,file,shared or all (default all)\n"
        "  --addr ADDR          only the mapping containing ADDR (hex)\n"
        "  --all-pages          count never-touched pages too (VM view: they are zero pages)\n"
        "  --codecs LIST        compressors, default zstd-1,zstd-3,zstd-9,lz4-1,lz4hc-9\n"
        "                       (lz4-N: acceleration N); \"none\" for no compression\n"
        "  --stop               SIGSTOP the process while measuring, SIGCONT after\n"
        "  --prepare[=SIG]      first ask libzimp-zerofree to prepare (default SIGUSR2)\n"
        "                       and wait for its answer\n"
        "  --prepare-timeout S  seconds to wait for that answer, 0 to 3600 (default 10)\n"
        "Pages counted: present or swapped pages of the selected mappings (of private\n"
        "file mappings only the copied-on-write ones). 'zero' pages are skipped by zero\n"
        "detection; 'partial' pages are non-zero pages with a zero 64-byte line.\n"
        "PID: digits only, 1 to %d; --stop of zimp-ckpt's own PID is refused.\n"
        "Exit status: 0 ok, 1 error, 2 usage.\n", INT_MAX);
}

#define PREP_TIMEOUT_MAX 3600.0   /* seconds; more is a typo, not a wait */

/* s as a number from 1 to max, or 0. Digits only: strtol alone takes "-5",
 * " 7" and "12abc", and a long cast to pid_t wraps (4294967295 is -1, and
 * kill(-1, SIGSTOP) stops every process we may signal). */
static long parse_count(const char *s, long max)
{
    if (!*s || s[strspn(s, "0123456789")])
        return 0;
    errno = 0;
    long v = strtol(s, NULL, 10);
    return errno || v < 1 || v > max ? 0 : v;
}

/* "USR1", "SIGUSR2", "12": a signal number, or 0. */
static int parse_signal(const char *s)
{
    if (!strncmp(s, "SIG", 3))
        s += 3;
    if (!strcmp(s, "USR1"))
        return SIGUSR1;
    if (!strcmp(s, "USR2"))
        return SIGUSR2;
    return (int)parse_count(s, NSIG - 1);
}

/* --addr: hex digits (0x optional), nothing else ("zz" measured everything). 0 or -1. */
static int parse_addr(const char *s, uintptr_t *out)
{
    if (!strncmp(s, "0x", 2) || !strncmp(s, "0X", 2))
        s += 2;
    if (!*s || s[strspn(s, "0123456789abcdefABCDEF")])
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 16);
    if (errno || v == 0 || v > UINTPTR_MAX)
        return -1;
    *out = (uintptr_t)v;
    return 0;
}

/* --prepare-timeout: finite, 0 to PREP_TIMEOUT_MAX. nan or inf would reach
 * sigtimedwait as an invalid timespec. Returns 0 or -1. */
static int parse_timeout(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || v < 0 || v > PREP_TIMEOUT_MAX)
        return -1;
    *out = v;
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Whether pid has a handler for sig (SigCgt in /proc/PID/status): sending an
 * uncaught SIGUSR2 would kill it. */
static int catches(pid_t pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned long long mask = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "SigCgt: %llx", &mask) == 1)
            break;
    fclose(f);
    return (mask >> (sig - 1)) & 1;
}

/* Sends SIG with the acknowledgement request and waits for the answer.
 * Returns 0, or -ETIMEDOUT / -errno. */
static int prepare(pid_t pid, int sig, double timeout)
{
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_BLOCK, &set, &old);
    /* An answer after the timeout must not terminate us (the default action
     * of SIGUSR1/2). Blocked, the signal still reaches sigtimedwait. */
    signal(sig, SIG_IGN);
    union sigval v = { .sival_int = ZIMP_ZEROFREE_ACK_REQUEST };
    int rc = 0;
    if (sigqueue(pid, sig, v) != 0) {
        rc = -errno;
        goto out;
    }
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        double left = timeout - ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9);
        if (left <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        struct timespec ts = { (time_t)left, (long)((left - (time_t)left) * 1e9) };
        if (ts.tv_nsec > 999999999)
            ts.tv_nsec = 999999999;      /* rounding must not make it invalid */
        siginfo_t si;
        int got = sigtimedwait(&set, &si, &ts);
        if (got == sig && si.si_pid == pid && si.si_value.sival_int == ZIMP_ZEROFREE_ACK_DONE)
            break;
        /* EAGAIN: timed out, the loop ends it; EINTR: retry; anything else
         * would come back at once, every time: give up rather than spin */
        if (got < 0 && errno != EAGAIN && errno != EINTR) {
            rc = -errno;
            break;
        }
    }
out:
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static double mib(uint64_t bytes)
{
    return bytes / 1048576.0;
}


static void print_json_counts(const struct ckpt_counts *c, const struct ckpt_opts *o, size_t page)
{
    printf("{\"mappings\": %llu, \"mapped_bytes\": %llu, \"resident_pages\": %llu, "
           "\"swapped_pages\": %llu, \"dumped_pages\": %llu, \"zero_pages\": %llu, "
           "\"partial_pages\": %llu, \"nonzero_pages\": %llu, \"zero_bytes_in_nonzero\": %llu, "
           "\"unreadable_pages\": %llu, \"dumped_bytes\": %llu, \"nonzero_bytes\": %llu, "
           "\"compressed\": {",
           (unsigned long long)c->mappings, (unsigned long long)c->mapped_bytes,
           (unsigned long long)c->resident_pages, (unsigned long long)c->swapped_pages,
           (unsigned long long)c->dumped_pages, (unsigned long long)c->zero_pages,
           (unsigned long long)c->partial_pages, (unsigned long long)c->nonzero_pages,
           (unsigned long long)c->zero_bytes_in_nonzero, (unsigned long long)c->unreadable_pages,
           (unsigned long long)(c->dumped_pages * page), (unsigned long long)(c->nonzero_pages * page));
    for (int i = 0; i < o->ncodecs; i++) {
        printf("%s", i ? ", " : "");
        json_string(stdout, o->codecs[i].name);
        printf(": %llu", (unsigned long long)c->compressed[i]);
    }
    printf("}}");
}

static void print_json(const struct ckpt_result *r, const struct ckpt_opts *o, int prepared)
{
    printf("{\"pid\": %d, \"comm\": ", (int)r->pid);
    json_string(stdout, r->comm);
    printf(", \"page_size\": %zu, \"prepared\": %s, \"all_pages\": %s, \"kinds\": {",
           r->page_size, prepared ? "true" : "false", o->all_pages ? "true" : "false");
    int first = 1;
    for (int k = 0; k < CKPT_NKINDS; k++) {
        if (!r->kind[k].mappings)
            continue;
        printf("%s", first ? "" : ", ");
        json_string(stdout, ckpt_kind_names[k]);
        printf(": ");
        print_json_counts(&r->kind[k], o, r->page_size);
        first = 0;
    }
    printf("}, \"total\": ");
    print_json_counts(&r->total, o, r->page_size);
    printf("}\n");
}

static void print_row(const char *name, const struct ckpt_counts *c, const struct ckpt_opts *o, size_t page)
{
    printf("%-7s %9.1f %9.1f %9llu %9llu %9llu %9.2f", name, mib(c->mapped_bytes),
           mib(c->resident_pages * page), (unsigned long long)c->dumped_pages,
           (unsigned long long)c->zero_pages, (unsigned long long)c->partial_pages,
           mib(c->nonzero_pages * page));
    for (int i = 0; i < o->ncodecs; i++)
        printf(" %9.2f", mib(c->compressed[i]));
    printf("\n");
}

static void print_table(const struct ckpt_result *r, const struct ckpt_opts *o, int prepared)
{
    char comm[4 * sizeof r->comm + 1];   /* a process names itself with any bytes: json_out.h */
    printf("pid %d (%s)%s, page %zu B; sizes in MiB, counts in pages\n", (int)r->pid,
           text_name(r->comm, comm, sizeof comm),
           prepared ? ", prepared" : "", r->page_size);
    printf("%-7s %9s %9s %9s %9s %9s %9s", "kind", "mapped", "resident", "dumped", "zero",
           "partial", "nonzero");
    for (int i = 0; i < o->ncodecs; i++)
        printf(" %9s", o->codecs[i].name);
    printf("\n");
    for (int k = 0; k < CKPT_NKINDS; k++)
        if (r->kind[k].mappings)
            print_row(ckpt_kind_names[k], &r->kind[k], o, r->page_size);
    print_row("total", &r->total, o, r->page_size);
    if (r->total.unreadable_pages)
        printf("(%llu present pages could not be read and were skipped)\n",
               (unsigned long long)r->total.unreadable_pages);
}

int main(int argc, char **argv)
{
    struct ckpt_opts o = { 0 };
    int json = 0, stop = 0, prep_sig = 0;
    double prep_timeout = 10;
    ckpt_parse_codecs(&o, "zstd-1,zstd-3,zstd-9,lz4-1,lz4hc-9");
    enum { O_JSON = 256, O_ONLY, O_ADDR, O_ALL, O_CODECS, O_STOP, O_PREP, O_PREP_TO, O_HELP };
    static const struct option opts[] = {
        { "json", no_argument, 0, O_JSON },
        { "only", required_argument, 0, O_ONLY },
        { "addr", required_argument, 0, O_ADDR },
        { "all-pages", no_argument, 0, O_ALL },
        { "codecs", required_argument, 0, O_CODECS },
        { "stop", no_argument, 0, O_STOP },
        { "prepare", optional_argument, 0, O_PREP },
        { "prepare-timeout", required_argument, 0, O_PREP_TO },
        { "help", no_argument, 0, O_HELP },
        { 0, 0, 0, 0 } };
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_JSON: json = 1; break;
        case O_ONLY:
            if (ckpt_parse_kinds(&o, optarg)) {
                fprintf(stderr, "zimp-ckpt: --only takes heap,stack,anon,file,shared or all\n");
                return 2;
            }
            break;
        case O_ADDR:
            if (parse_addr(optarg, &o.addr)) {
                fprintf(stderr, "zimp-ckpt: bad --addr '%s' (a hex address, 0x optional)\n", optarg);
                return 2;
            }
            break;
        case O_ALL: o.all_pages = 1; break;
        case O_CODECS:
            if (!strcmp(optarg, "none")) o.ncodecs = 0;
            else if (ckpt_parse_codecs(&o, optarg)) {
                fprintf(stderr, "zimp-ckpt: bad --codecs list '%s' (e.g. zstd-3,lz4-1,lz4hc-9)\n", optarg);
                return 2;
            }
            break;
        case O_STOP: stop = 1; break;
        case O_PREP:
            prep_sig = optarg ? parse_signal(optarg) : SIGUSR2;
            if (!prep_sig) {
                fprintf(stderr, "zimp-ckpt: bad signal '%s'\n", optarg);
                return 2;
            }
            break;
        case O_PREP_TO:
            if (parse_timeout(optarg, &prep_timeout)) {
                fprintf(stderr, "zimp-ckpt: bad --prepare-timeout '%s' (seconds, 0 to %.0f)\n",
                        optarg, PREP_TIMEOUT_MAX);
                return 2;
            }
            break;
        case 'h': case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    /* from here on pid >= 1: kill() never sees 0 or a negative group id */
    pid_t pid = (pid_t)parse_count(argv[optind], INT_MAX);
    if (!pid) {
        fprintf(stderr, "zimp-ckpt: '%s' is not a process id (digits only, 1 to %d)\n",
                argv[optind], INT_MAX);
        return 2;
    }
    if (stop && pid == getpid()) {
        fprintf(stderr, "zimp-ckpt: --stop of zimp-ckpt itself (%d): nobody would resume it; "
                "measure it without --stop\n", pid);
        return 2;
    }
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        fprintf(stderr, "zimp-ckpt: no such process: %d\n", pid);
        return 1;
    }
    if (ckpt_gone(pid)) {
        fprintf(stderr, "zimp-ckpt: no such process: %d (it exited)\n", pid);
        return 1;
    }
    int prepared = 0;
    if (prep_sig && !catches(pid, prep_sig)) {
        fprintf(stderr, "zimp-ckpt: process %d does not catch signal %d (is libzimp-zerofree.so "
                "preloaded, with ZIMP_ZEROFREE not off?); not sending it, measuring anyway\n",
                pid, prep_sig);
    } else if (prep_sig) {
        int rc = prepare(pid, prep_sig, prep_timeout);
        if (rc == 0)
            prepared = 1;
        else
            fprintf(stderr, "zimp-ckpt: no answer to the prepare request (%s); is "
                    "libzimp-zerofree.so preloaded, with ZIMP_ZEROFREE not off and signal %d "
                    "not the program's own? measuring anyway\n",
                    rc == -ETIMEDOUT ? "timed out" : strerror(-rc), prep_sig);
    }
    int stopped = 0;
    if (stop && ckpt_proc_state(pid) != 'T') {
        if (kill(pid, SIGSTOP) != 0) {
            fprintf(stderr, "zimp-ckpt: cannot stop process %d: %s\n", pid, strerror(errno));
            return 1;
        }
        stopped = 1;
        for (int i = 0; i < 2000 && ckpt_proc_state(pid) != 'T'; i++)
            sleep_ms(1);
    }
    struct ckpt_result r;
    char err[512] = "";
    int rc = ckpt_scan(pid, &o, &r, err, sizeof err);
    if (stopped)
        kill(pid, SIGCONT);
    if (rc != 0) {
        fprintf(stderr, "zimp-ckpt: %s\n", err);
        return 1;
    }
    if (json)
        print_json(&r, &o, prepared);
    else
        print_table(&r, &o, prepared);
    return 0;
}
