/*
 * zimp_bench: one sender to N receivers, every mechanism behind struct mech
 * plus external programs (MPI, iceoryx2), interleaved and repeated, each
 * measurement next to a cache-line ping-pong probe taken just before it.
 * Writes a table to stdout, raw.csv, summary.csv and results.json to the
 * output folder; progress on stderr. `--test MECH` is a correctness check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mech.h"
#include "run.h"

#ifndef BENCH_OPENMPI_BIN
#define BENCH_OPENMPI_BIN ""
#endif
#ifndef BENCH_MPICH_BIN
#define BENCH_MPICH_BIN ""
#endif
#ifndef BENCH_ICEORYX2_BIN
#define BENCH_ICEORYX2_BIN ""
#endif

/* ---------- records ---------- */

struct rec {
    char group[12], kind[12], mech[32], label[64];
    unsigned nrecv;
    size_t size;
    int rep, pinned, status;
    double probe_ns;
    char note[160];
    double msgs_per_s, min_msgs_per_s, mb_per_s, loss, send_p50_ns;
    double p50, p99, p999, max, mean;
    uint64_t samples;
};

static struct rec *recs;
static size_t nrecs, caprecs;

static struct rec *rec_new(const char *group, const char *kind, const char *mech,
                           const char *label, unsigned nrecv, size_t size, int rep, double probe)
{
    if (nrecs == caprecs) {
        caprecs = caprecs ? caprecs * 2 : 256;
        recs = realloc(recs, caprecs * sizeof *recs);
        if (!recs) {
            perror("realloc");
            exit(2);
        }
    }
    struct rec *r = &recs[nrecs++];
    memset(r, 0, sizeof *r);
    snprintf(r->group, sizeof r->group, "%s", group);
    snprintf(r->kind, sizeof r->kind, "%s", kind);
    snprintf(r->mech, sizeof r->mech, "%s", mech);
    snprintf(r->label, sizeof r->label, "%s", label);
    r->nrecv = nrecv;
    r->size = size;
    r->rep = rep;
    r->probe_ns = probe;
    r->p50 = r->p99 = r->p999 = r->max = r->mean = NAN;
    r->send_p50_ns = NAN;
    return r;
}

/* ---------- options ---------- */

static struct {
    int full, repeat, no_micro, no_compare, no_external;
    int transfer_only;        /* 1: write and check 16 bytes per message, not every byte */
    double micro_s, compare_s, probe_s;
    unsigned nrecv_list[16], n_nrecv;
    size_t sizes[16];
    unsigned n_sizes;
    const char *mechs;        /* comma list or NULL: all */
    const char *out;
    const char *openmpi, *mpich, *iceoryx2;
    const char *test;
} opt;

static const size_t default_sizes[] = { 1, 64, 128, 512, 1024, 4096, 10240, 102400, 1048576 };
static const char *const micro_mechs[] = {
    "zimp", "zimp-copy", "bmp", "ring", "cma", "pipe", "vmsplice", "unix-stream",
    "unix-dgram", "tcp", "udp", "sysv-mq", "posix-mq", NULL,
};
static const char *const kernel_mechs[] = {
    "pipe", "vmsplice", "unix-stream", "unix-dgram", "tcp", "udp", "sysv-mq", "posix-mq", "cma", NULL,
};

static int wanted(const char *name)
{
    if (!opt.mechs)
        return 1;
    size_t n = strlen(name);
    for (const char *p = opt.mechs; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && strncmp(p, name, n) == 0)
            return 1;
        p += l + (e ? 1 : 0);
    }
    return 0;
}

static const char *const external_mechs[] = { "openmpi", "mpich", "iceoryx2", "iceoryx2-event", NULL };

static int listed(const char *const *list, const char *name, size_t n)
{
    for (int i = 0; list[i]; i++)
        if (strlen(list[i]) == n && strncmp(list[i], name, n) == 0)
            return 1;
    return 0;
}

/*
 * --mechs: every name must be a mechanism (zimp_bench --list). One with no
 * micro-benchmark row (a waiting policy measured in the comparison only)
 * is said so when the micro-benchmark runs, instead of leaving its row out
 * without a word.
 */
static int check_mechs(void)
{
    for (const char *p = opt.mechs; p && *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(l < sizeof name ? l : sizeof name - 1), p);
        if (l && !mech_find(name) && !listed(external_mechs, p, l)) {
            fprintf(stderr, "zimp_bench: unknown mechanism '%.*s' in --mechs (zimp_bench --list names them)\n",
                    (int)l, p);
            return -1;
        }
        if (l && !opt.no_micro && !listed(micro_mechs, p, l) && !listed(external_mechs, p, l))
            fprintf(stderr, "zimp_bench: note: %.*s has no micro-benchmark row; %s\n", (int)l, p,
                    opt.no_compare ? "--no-compare leaves it out altogether" : "it is measured in the comparison only");
        p += l + (e ? 1 : 0);
    }
    return 0;
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'k' || *end == 'K')
        v *= 1024;
    else if (*end == 'm' || *end == 'M')
        v *= 1048576;
    return (size_t)v;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: zimp_bench [--full] [--out DIR] [--repeat R] [--seconds S]\n"
            "                  [--nrecv 1,4] [--sizes 1,64,4k,1m] [--mechs a,b]\n"
            "                  [--no-micro] [--no-compare] [--no-external] [--transfer-only]\n"
            "                  [--openmpi BIN] [--mpich BIN] [--iceoryx2 BIN]\n"
            "       zimp_bench --test MECH    correctness check of one mechanism\n"
            "       zimp_bench --list\n");
    exit(2);
}

/* ---------- helpers ---------- */

/* What each message costs the application in this run (tables, CSV, JSON, plots say it). */
static const char *level_name(void) { return opt.transfer_only ? "transfer-only" : "application"; }
static const char *level_text(void)
{
    return opt.transfer_only
               ? "level: transfer cost only (the sender writes and each receiver checks 16 bytes "
                 "per message; zero-copy rows do not touch the rest)"
               : "level: application (the sender writes every byte of each message and each "
                 "receiver verifies every byte)";
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i]))
            v[k++] = v[i];
    if (!k)
        return NAN;
    qsort(v, k, sizeof *v, cmp_d);
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

static const struct mech *need(const char *name)
{
    const struct mech *m = mech_find(name);
    return m && wanted(name) ? m : NULL;
}

static const char *label_of(const char *name)
{
    const struct mech *m = mech_find(name);
    if (m)
        return m->label;
    if (!strcmp(name, "openmpi-bcast"))
        return "Open MPI MPI_Bcast";
    if (!strcmp(name, "openmpi-send"))
        return "Open MPI MPI_Send x N";
    if (!strcmp(name, "mpich-bcast"))
        return "MPICH MPI_Bcast";
    if (!strcmp(name, "mpich-send"))
        return "MPICH MPI_Send x N";
    if (!strcmp(name, "iceoryx2"))
        return "iceoryx2 (polling subscribers)";
    if (!strcmp(name, "iceoryx2-event"))
        return "iceoryx2 (event-based, blocking)";
    return name;
}

/* ---------- progress ---------- */

static size_t done_items, total_items;
static double t_start;

static void progress(const char *what)
{
    double el = run_now_s() - t_start;
    double eta = done_items ? el / (double)done_items * (double)(total_items - done_items) : 0;
    fprintf(stderr, "\r\033[K[%3zu/%zu %3.0fs eta %3.0fs] %s", done_items, total_items, el, eta, what);
    if (!isatty(2))
        fputc('\n', stderr);
    fflush(stderr);
}

/* ---------- measuring ---------- */

static void do_stream(const char *group, const struct mech *m, unsigned n, size_t size, int rep,
                      double secs)
{
    char what[160];
    snprintf(what, sizeof what, "rep %d %s stream N=%u %zu B %s", rep + 1, group, n, size, m->name);
    progress(what);
    double probe = run_probe(opt.probe_s);
    struct run_opts o = { .seconds = secs, .full_check = !opt.transfer_only };
    struct stream_result s;
    run_stream(m, n, size, &o, &s);
    struct rec *r = rec_new(group, "stream", m->name, m->label, n, size, rep, probe);
    r->status = s.status;
    r->pinned = s.pinned;
    snprintf(r->note, sizeof r->note, "%s", s.note);
    r->msgs_per_s = s.msgs_per_s;
    r->min_msgs_per_s = s.min_msgs_per_s;
    r->mb_per_s = s.mb_per_s;
    r->loss = s.loss;
    r->send_p50_ns = s.send_p50_ns;
    done_items++;
}

static void do_pingpong(const char *group, const struct mech *m, size_t size, int rep, double secs,
                        int full)
{
    char what[160];
    snprintf(what, sizeof what, "rep %d %s ping-pong %zu B %s", rep + 1, group, size, m->name);
    progress(what);
    double probe = run_probe(opt.probe_s);
    struct run_opts o = { .seconds = secs, .full_check = full };
    struct lat_result l;
    run_pingpong(m, size, &o, &l);
    struct rec *r = rec_new(group, "pingpong", m->name, m->label, 1, size, rep, probe);
    r->status = l.status;
    r->pinned = l.pinned;
    snprintf(r->note, sizeof r->note, "%s", l.note);
    r->p50 = l.p50;
    r->p99 = l.p99;
    r->p999 = l.p999;
    r->max = l.max;
    r->mean = l.mean;
    r->samples = l.samples;
    r->send_p50_ns = l.send_p50_ns;
    done_items++;
}

/*
 * External program protocol (one line each on stdout):
 *   stream,<mech>,<nrecv>,<size>,<msgs_per_s>,<min_msgs_per_s>,<loss>,<send_p50_ns>,<note>
 *   pingpong,<mech>,<size>,<p50>,<p99>,<p999>,<max>,<mean>,<samples>,<note>
 * note is "ok" or the reason a value is missing.
 */
/* The iceoryx2 peer runs as `iceoryx2` (polling) and `iceoryx2-event` (its --events mode). */
static int is_iceoryx2(const char *impl)
{
    return strncmp(impl, "iceoryx2", 8) == 0;
}

static void do_external(const char *impl, const char *bin, unsigned n, int rep, double secs)
{
    char what[160], cmd[2048], sizes[256] = "";
    snprintf(what, sizeof what, "rep %d micro N=%u %s (external)", rep + 1, n, impl);
    progress(what);
    for (unsigned i = 0; i < opt.n_sizes; i++)
        snprintf(sizes + strlen(sizes), sizeof sizes - strlen(sizes), "%s%zu", i ? "," : "",
                 opt.sizes[i]);
    double probe = run_probe(opt.probe_s);
    int ok_bin = bin && *bin && access(bin, X_OK) == 0;
    int ext_limit = opt.full ? 120 : 60;   /* busy-polling peers crawl when oversubscribed */
    int max_n = mech_nprocs_online() - 1 > 4 ? mech_nprocs_online() - 1 : 4;
    int np = (int)n + 1;
    const char *check = opt.transfer_only ? "" : " --check";   /* every byte, as ours */
    if (!strcmp(impl, "openmpi"))
        snprintf(cmd, sizeof cmd,
                 "timeout %d mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none "
                 "--mca btl self,vader -np %d %s --seconds %g --sizes %s --label openmpi%s 2>&1",
                 ext_limit, np, bin, secs, sizes, check);
    else if (!strcmp(impl, "mpich"))
        snprintf(cmd, sizeof cmd,
                 "timeout %d mpiexec.mpich -n %d %s --seconds %g --sizes %s --label mpich%s 2>&1",
                 ext_limit, np, bin, secs, sizes, check);
    else
        snprintf(cmd, sizeof cmd, "timeout %d %s --nrecv %u --seconds %g --sizes %s%s%s 2>&1",
                 ext_limit, bin, n, secs, sizes, check,
                 strcmp(impl, "iceoryx2-event") ? "" : " --events");
    int got = 0;
    char why[160] = "";
    if (!ok_bin) {
        snprintf(why, sizeof why, "n/a (%s benchmark not built)", impl);
    } else if ((int)n > max_n && !is_iceoryx2(impl)) {   /* MPI ranks busy-poll */
        snprintf(why, sizeof why, "n/a (not run above N=%d: %d busy-polling processes on %d cores)",
                 max_n, np, mech_nprocs_online());
    } else {
        FILE *p = popen(cmd, "r");
        char line[1024];
        while (p && fgets(line, sizeof line, p)) {
            char mech[32], note[160] = "ok";
            unsigned nr;
            size_t sz;
            double a, b, c, d, e;
            unsigned long long smp;
            line[strcspn(line, "\n")] = 0;
            if (sscanf(line, "stream,%31[^,],%u,%zu,%lf,%lf,%lf,%lf,%159[^\n]", mech, &nr, &sz, &a,
                       &b, &c, &d, note) >= 8) {
                if (nr != n)
                    continue;
                struct rec *r = rec_new("micro", "stream", mech, label_of(mech), n, sz, rep, probe);
                r->status = strcmp(note, "ok") ? (strncmp(note, "n/a", 3) ? -EIO : 1) : 0;
                snprintf(r->note, sizeof r->note, "%s", r->status ? note : "");
                r->pinned = np <= mech_nprocs_online();
                r->msgs_per_s = a;
                r->min_msgs_per_s = b;
                r->mb_per_s = a * (double)sz / 1e6;
                r->loss = c;
                r->send_p50_ns = d;
                got++;
            } else if (sscanf(line, "pingpong,%31[^,],%zu,%lf,%lf,%lf,%lf,%lf,%llu,%159[^\n]", mech,
                              &sz, &a, &b, &c, &d, &e, &smp, note) >= 9) {
                if (n != 1)
                    continue;   /* ping-pong once, with the N=1 launch */
                char pl[64];
                snprintf(pl, sizeof pl, "%s", label_of(mech));
                if (strstr(pl, " x N"))
                    strcpy(strstr(pl, " x N"), "/MPI_Recv");
                struct rec *r = rec_new("micro", "pingpong", mech, pl, 1, sz, rep, probe);
                r->status = strcmp(note, "ok") ? (strncmp(note, "n/a", 3) ? -EIO : 1) : 0;
                snprintf(r->note, sizeof r->note, "%s", r->status ? note : "");
                r->pinned = mech_nprocs_online() >= 2;
                r->p50 = a, r->p99 = b, r->p999 = c, r->max = d, r->mean = e;
                r->samples = smp;
                got++;
            } else if (!why[0] && line[0]) {
                snprintf(why, sizeof why, "error: %.140s", line);
            }
        }
        int st = p ? pclose(p) : -1;
        if (st != 0 && WIFEXITED(st) && WEXITSTATUS(st) == 124)
            snprintf(why, sizeof why, "error: stopped after %d s (sizes without a row did not finish)",
                     ext_limit);
        else if (!got || st != 0) {
            if (!why[0])
                snprintf(why, sizeof why, "error: exit status %d", st);
        } else {
            why[0] = 0;
        }
    }
    if (why[0]) {
        char name[40];
        snprintf(name, sizeof name, "%s%s", impl, is_iceoryx2(impl) ? "" : "-bcast");
        struct rec *r = rec_new("micro", "stream", name, label_of(name), n, 0, rep, probe);
        r->status = strncmp(why, "n/a", 3) ? -EIO : 1;
        snprintf(r->note, sizeof r->note, "%s", why);
    }
    done_items++;
}

/* ---------- summary ---------- */

struct sum {
    const char *group, *kind, *mech, *label;
    unsigned nrecv;
    size_t size;
    int pinned, reps, nok;
    char note[160];
    double probe, msgs, min_msgs, mb, loss, send_p50, speedup_pipe, units;
    double p50, p99, p999, max;
};
static struct sum *sums;
static size_t nsums;

static const struct rec *find_rec(const char *group, const char *kind, const char *mech,
                                  unsigned n, size_t size, int rep)
{
    for (size_t i = 0; i < nrecs; i++) {
        const struct rec *r = &recs[i];
        if (r->rep == rep && r->nrecv == n && r->size == size && !strcmp(r->group, group) &&
            !strcmp(r->kind, kind) && !strcmp(r->mech, mech))
            return r;
    }
    return NULL;
}

static void summarize(void)
{
    sums = calloc(nrecs + 1, sizeof *sums);
    for (size_t i = 0; i < nrecs; i++) {
        const struct rec *r = &recs[i];
        size_t j;
        for (j = 0; j < nsums; j++)
            if (sums[j].nrecv == r->nrecv && sums[j].size == r->size &&
                !strcmp(sums[j].group, r->group) && !strcmp(sums[j].kind, r->kind) &&
                !strcmp(sums[j].mech, r->mech))
                break;
        if (j < nsums)
            continue;
        struct sum *s = &sums[nsums++];
        s->group = r->group, s->kind = r->kind, s->mech = r->mech, s->label = r->label;
        s->nrecv = r->nrecv, s->size = r->size, s->pinned = r->pinned;
        double v[9][64];
        int k = 0;
        for (size_t q = i; q < nrecs && k < 64; q++) {
            const struct rec *x = &recs[q];
            if (x->nrecv != r->nrecv || x->size != r->size || strcmp(x->group, r->group) ||
                strcmp(x->kind, r->kind) || strcmp(x->mech, r->mech))
                continue;
            s->reps++;
            if (x->status != 0) {
                if (!s->note[0])
                    snprintf(s->note, sizeof s->note, "%s", x->note);
                continue;
            }
            const struct rec *pipe = find_rec(x->group, x->kind, "pipe", x->nrecv, x->size, x->rep);
            int stream = !strcmp(x->kind, "stream");
            v[0][k] = x->probe_ns;
            v[1][k] = x->msgs_per_s;
            v[2][k] = x->min_msgs_per_s;
            v[3][k] = x->loss;
            v[4][k] = x->send_p50_ns;
            v[5][k] = NAN;
            if (pipe && pipe->status == 0)
                v[5][k] = stream ? x->msgs_per_s / pipe->msgs_per_s : pipe->p50 / x->p50;
            v[6][k] = stream ? 1e9 / x->msgs_per_s / x->probe_ns : x->p50 / x->probe_ns;
            v[7][k] = x->p50;
            v[8][k] = x->p99;
            k++;
            s->nok++;
            /* tails: the worst over repeats is what a user meets */
            s->p999 = fmax(isnan(s->p999) ? 0 : s->p999, x->p999);
            s->max = fmax(isnan(s->max) ? 0 : s->max, x->max);
        }
        s->probe = median(v[0], k);
        s->msgs = median(v[1], k);
        s->min_msgs = median(v[2], k);
        s->mb = s->msgs * (double)s->size / 1e6;
        s->loss = median(v[3], k);
        s->send_p50 = median(v[4], k);
        s->speedup_pipe = median(v[5], k);
        s->units = median(v[6], k);
        s->p50 = median(v[7], k);
        s->p99 = median(v[8], k);
        if (!s->nok)
            s->p999 = s->max = NAN;
    }
}

static const struct sum *get(const char *group, const char *kind, const char *mech, unsigned n,
                             size_t size)
{
    for (size_t j = 0; j < nsums; j++)
        if (sums[j].nrecv == n && sums[j].size == size && !strcmp(sums[j].group, group) &&
            !strcmp(sums[j].kind, kind) && !strcmp(sums[j].mech, mech))
            return &sums[j];
    return NULL;
}

/* Median over repeats of a(rep)/b(rep) for two mechanisms in the same group. */
static double ratio(const char *group, const char *kind, const char *a, const char *b, unsigned n,
                    size_t size, const char *field)
{
    double v[64];
    int k = 0;
    for (int rep = 0; rep < opt.repeat && k < 64; rep++) {
        const struct rec *x = find_rec(group, kind, a, n, size, rep);
        const struct rec *y = find_rec(group, kind, b, n, size, rep);
        if (!x || !y || x->status || y->status)
            continue;
        if (!strcmp(field, "msgs"))
            v[k++] = x->msgs_per_s / y->msgs_per_s;
        else if (!strcmp(field, "p50"))
            v[k++] = x->p50 / y->p50;
        else if (!strcmp(field, "send"))
            v[k++] = x->send_p50_ns / y->send_p50_ns;
    }
    return median(v, k);
}

/* Median over repeats of send_p50(size a) / send_p50(size b) for one mechanism. */
static double ratio2(const char *group, const char *kind, const char *mech, size_t a, size_t b)
{
    double v[64];
    int k = 0;
    for (int rep = 0; rep < opt.repeat && k < 64; rep++) {
        const struct rec *x = find_rec(group, kind, mech, 1, a, rep);
        const struct rec *y = find_rec(group, kind, mech, 1, b, rep);
        if (x && y && !x->status && !y->status)
            v[k++] = x->send_p50_ns / y->send_p50_ns;
    }
    return median(v, k);
}

/* ---------- output ---------- */

static FILE *tee_f;

static void outf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void outf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (tee_f) {
        va_start(ap, fmt);
        vfprintf(tee_f, fmt, ap);
        va_end(ap);
    }
}

static const char *human_size(size_t s, char *buf)
{
    if (s >= 1048576 && s % 1048576 == 0)
        sprintf(buf, "%zuMiB", s / 1048576);
    else if (s >= 1024 && s % 1024 == 0)
        sprintf(buf, "%zuKiB", s / 1024);
    else
        sprintf(buf, "%zuB", s);
    return buf;
}

static const char *rate(double v, char *buf)
{
    if (isnan(v))
        strcpy(buf, "-");
    else if (v >= 1e6)
        sprintf(buf, "%.2fM", v / 1e6);
    else if (v >= 1e3)
        sprintf(buf, "%.1fk", v / 1e3);
    else
        sprintf(buf, "%.0f", v);
    return buf;
}

struct target {
    const char *what;
    double value, limit;
    int le;   /* 1: value <= limit wanted, 0: value >= limit */
};
static struct target targets[8];
static int ntargets;

static void add_target(const char *what, double v, double limit, int le)
{
    targets[ntargets++] = (struct target){ what, v, limit, le };
}

static const char *verdict(const struct target *t)
{
    if (isnan(t->value))
        return "not measured";
    return (t->le ? t->value <= t->limit : t->value >= t->limit) ? "MET" : "MISSED";
}

static double probe_med, probe_min, probe_max;
static char cpu_model[128] = "unknown";
static struct utsname uts;
static double load_before[3], load_after[3];

static void machine_info(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) {
                p += 2;
                p[strcspn(p, "\n")] = 0;
                snprintf(cpu_model, sizeof cpu_model, "%s", p);
            }
            break;
        }
    }
    if (f)
        fclose(f);
    uname(&uts);
}

static void print_report(void)
{
    char a[32], b[32], c[32];
    double pv[4096];
    size_t np = 0;
    for (size_t i = 0; i < nrecs && np < 4096; i++)
        if (!isnan(recs[i].probe_ns))
            pv[np++] = recs[i].probe_ns;
    qsort(pv, np, sizeof *pv, cmp_d);
    probe_min = np ? pv[0] : NAN;
    probe_max = np ? pv[np - 1] : NAN;
    probe_med = median(pv, np);

    outf("\nzimp benchmark  (%s mode, %d repeats; medians over repeats)\n",
         opt.full ? "full" : "quick", opt.repeat);
    outf("%s\n", level_text());
    outf("machine: %d cores, %s, Linux %s; load %.2f before, %.2f after\n",
         mech_nprocs_online(), cpu_model, uts.release, load_before[0], load_after[0]);
    outf("probe (cache line one-way, before each measurement): median %.0f ns, min %.0f, max %.0f\n",
         probe_med, probe_min, probe_max);
    outf("pinned = one process per core; 'over' = more processes than cores (oversubscribed)\n");

    if (!opt.no_compare) {
        outf("\n== Quick comparisons (same run, interleaved) ==\n");
        outf("\n1->1 one-way latency, 64 B (ping-pong / 2), ns:\n");
        outf("  %-40s %9s %9s %9s %9s %8s\n", "mechanism", "p50", "p99", "p99.9", "max", "p50/probe");
        const char *lm[] = { "zimp-spin", "ring", "zimp-block", "futex", "zimp", "pipe", NULL };
        for (int i = 0; lm[i]; i++) {
            const struct sum *s = get("compare", "pingpong", lm[i], 1, 64);
            if (!s)
                continue;
            if (!s->nok) {
                outf("  %-40.40s %s\n", s->label, s->note);
                continue;
            }
            outf("  %-40.40s %9.0f %9.0f %9.0f %9.0f %8.1f\n", s->label, s->p50, s->p99, s->p999,
                 s->max, s->units);
        }
        outf("\nsender cost in ping-pong (send_begin + write + send_end, p50 ns; the 1 MiB message "
             "writes 16 B at every level: the cost of the mechanism):\n");
        const char *cm[] = { "zimp-spin", "ring", NULL };
        for (int i = 0; cm[i]; i++) {
            const struct sum *s0 = get("compare", "pingpong", cm[i], 1, 64);
            const struct sum *s1 = get("compare", "pingpong", cm[i], 1, 1048576);
            if (s0 && s1)
                outf("  %-40.40s 64 B: %6.0f   1 MiB: %6.0f   (1 MiB one-way p50 %.0f ns)\n",
                     s0->label, s0->send_p50, s1->send_p50, s1->p50);
        }
        outf("\n1->1 streaming throughput, messages/s (MB/s):\n");
        outf("  %-40s %18s %18s %18s\n", "mechanism", "64 B", "4 KiB", "1 MiB");
        const char *sm[] = { "zimp-spin", "zimp", "zimp-zero", "ring", "pipe", NULL };
        const size_t ss[] = { 64, 4096, 1048576 };
        for (int i = 0; sm[i]; i++) {
            const struct sum *s0 = get("compare", "stream", sm[i], 1, 64);
            if (!s0)
                continue;
            outf("  %-40.40s", s0->label);
            for (int j = 0; j < 3; j++) {
                const struct sum *s = get("compare", "stream", sm[i], 1, ss[j]);
                char cell[40];
                if (s && s->nok)
                    snprintf(cell, sizeof cell, "%s (%.0f)", rate(s->msgs, a), s->mb);
                else
                    snprintf(cell, sizeof cell, "%s", s ? "error" : "-");
                outf(" %18s", cell);
            }
            outf("\n");
        }
        outf("\n1->4 throughput per receiver, 64 B, blocking mechanisms (%s):\n",
             mech_nprocs_online() >= 5 ? "one process per core" : "oversubscribed here");
        const char *bm[] = { "zimp-block", "zimp", "futex", "pipe", "vmsplice", "unix-stream",
                             "unix-dgram", "tcp", "udp", "sysv-mq", "posix-mq", "cma", NULL };
        for (int i = 0; bm[i]; i++) {
            const struct sum *s = get("compare", "stream", bm[i], 4, 64);
            if (!s)
                continue;
            if (!s->nok)
                outf("  %-40.40s %s\n", s->label, s->note);
            else
                outf("  %-40.40s %10s msg/s  x%.2f pipe%s\n", s->label, rate(s->msgs, a),
                     s->speedup_pipe, s->loss > 0 ? "  (lossy)" : "");
        }
        /* targets */
        double best_k = 0;
        const char *best_name = "none";
        for (int i = 0; kernel_mechs[i]; i++) {
            const struct sum *s = get("compare", "stream", kernel_mechs[i], 4, 64);
            if (s && s->nok && s->loss < 0.01 && s->msgs > best_k) {
                best_k = s->msgs;
                best_name = kernel_mechs[i];
            }
        }
        static char best_what[128];
        snprintf(best_what, sizeof best_what,
                 "64 B N=4 blocking per-receiver throughput vs best kernel (%s)", best_name);
        ntargets = 0;
        add_target("64 B one-way latency busy-wait, zimp / SPSC ring",
                   ratio("compare", "pingpong", "zimp-spin", "ring", 1, 64, "p50"), 1.5, 1);
        add_target("64 B 1->1 streaming, zimp / SPSC ring",
                   ratio("compare", "stream", "zimp-spin", "ring", 1, 64, "msgs"), 0.7, 0);
        add_target("64 B 1->1 streaming, zimp / pipe",
                   ratio("compare", "stream", "zimp-spin", "pipe", 1, 64, "msgs"), 5, 0);
        add_target("blocking wake-up (64 B one-way p50), zimp / raw futex",
                   ratio("compare", "pingpong", "zimp-block", "futex", 1, 64, "p50"), 1.2, 1);
        add_target("64 B N=4 blocking per-receiver throughput, zimp / pipe",
                   ratio("compare", "stream", "zimp-block", "pipe", 4, 64, "msgs"), 5, 0);
        add_target(best_what,
                   ratio("compare", "stream", "zimp-block", best_name, 4, 64, "msgs"), 2, 0);
        add_target("zero-copy sender cost (loan+write+publish p50, ping-pong), 1 MiB / 64 B",
                   ratio2("compare", "pingpong", "zimp-spin", 1048576, 64), 2, 1);
        outf("\nTargets (ratios are medians of per-repeat ratios):\n");
        for (int i = 0; i < ntargets; i++)
            outf("  %-72s %7.2f  (want %s %.2f)  %s\n", targets[i].what, targets[i].value,
                 targets[i].le ? "<=" : ">=", targets[i].limit, verdict(&targets[i]));
    }

    if (!opt.no_micro) {
        outf("\n== Micro-benchmark: 1 sender -> N receivers, messages/s per receiver ==\n");
        for (unsigned ni = 0; ni < opt.n_nrecv; ni++) {
            unsigned n = opt.nrecv_list[ni];
            outf("\nN = %u receiver%s (%s)\n", n, n > 1 ? "s" : "",
                 (int)n + 1 <= mech_nprocs_online() ? "pinned, one per core" : "oversubscribed");
            outf("  %-34s", "mechanism");
            for (unsigned si = 0; si < opt.n_sizes; si++)
                outf(" %8s", human_size(opt.sizes[si], a));
            outf("\n");
            const char *seen[64];
            int nseen = 0;
            for (size_t j = 0; j < nsums; j++) {
                const struct sum *s = &sums[j];
                if (strcmp(s->group, "micro") || strcmp(s->kind, "stream") || s->nrecv != n)
                    continue;
                int dup = 0;
                for (int q = 0; q < nseen; q++)
                    dup |= !strcmp(seen[q], s->mech);
                if (dup || nseen == 64)
                    continue;
                seen[nseen++] = s->mech;
                outf("  %-34.34s", s->label);
                const char *note = NULL;
                for (unsigned si = 0; si < opt.n_sizes; si++) {
                    const struct sum *x = get("micro", "stream", s->mech, n, opt.sizes[si]);
                    if (x && x->nok)
                        outf(" %8s", rate(x->msgs, b));
                    else {
                        outf(" %8s", x ? (x->note[0] == 'n' ? "n/a" : "err") : "-");
                        if (x && !note)
                            note = x->note;
                    }
                }
                const struct sum *z = get("micro", "stream", s->mech, n, 0);
                if (z && !z->nok)
                    note = z->note;
                outf("%s%s\n", note ? "  " : "", note ? note : "");
            }
            outf("  speed-up of zimp over each mechanism (x):\n");
            for (int q = 0; q < nseen; q++) {
                if (!strcmp(seen[q], "zimp"))
                    continue;
                outf("  %-34.34s", label_of(seen[q]));
                for (unsigned si = 0; si < opt.n_sizes; si++) {
                    double r = ratio("micro", "stream", "zimp", seen[q], n, opt.sizes[si], "msgs");
                    if (isnan(r))
                        outf(" %8s", "-");
                    else
                        outf(" %8.2f", r);
                }
                outf("\n");
            }
        }
        outf("\n1->1 ping-pong one-way latency (ns):\n");
        outf("  %-40s %6s %9s %9s %9s %9s %8s\n", "mechanism", "size", "p50", "p99", "p99.9",
             "max", "p50/probe");
        for (size_t j = 0; j < nsums; j++) {
            const struct sum *s = &sums[j];
            if (strcmp(s->group, "micro") || strcmp(s->kind, "pingpong"))
                continue;
            if (!s->nok)
                outf("  %-40.40s %6s %s\n", s->label, human_size(s->size, c), s->note);
            else
                outf("  %-40.40s %6s %9.0f %9.0f %9.0f %9.0f %8.1f\n", s->label,
                     human_size(s->size, c), s->p50, s->p99, s->p999, s->max, s->units);
        }
    }
}

static void csv_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isnan(v) || isinf(v))
        fputs("null", f);
    else
        fprintf(f, "%.6g", v);
}

static void write_files(int argc, char **argv)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/raw.csv", opt.out);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "group,kind,mech,label,nrecv,size,rep,pinned,probe_ns,status,note,msgs_per_s,"
                   "min_msgs_per_s,mb_per_s,loss,send_p50_ns,p50_ns,p99_ns,p999_ns,max_ns,"
                   "mean_ns,samples,level\n");
        for (size_t i = 0; i < nrecs; i++) {
            const struct rec *r = &recs[i];
            fprintf(f, "%s,%s,%s,", r->group, r->kind, r->mech);
            csv_str(f, r->label);
            fprintf(f, ",%u,%zu,%d,%d,%.1f,%s,", r->nrecv, r->size, r->rep, r->pinned,
                    r->probe_ns, r->status == 0 ? "ok" : r->status == 1 ? "n/a" : "error");
            csv_str(f, r->note);
            fprintf(f, ",%.1f,%.1f,%.3f,%.6f,%.1f,%.0f,%.0f,%.0f,%.0f,%.1f,%llu,%s\n", r->msgs_per_s,
                    r->min_msgs_per_s, r->mb_per_s, r->loss, r->send_p50_ns, r->p50, r->p99,
                    r->p999, r->max, r->mean, (unsigned long long)r->samples, level_name());
        }
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/summary.csv", opt.out);
    f = fopen(path, "w");
    if (f) {
        fprintf(f, "group,kind,mech,label,nrecv,size,pinned,reps,ok,note,probe_ns,msgs_per_s,"
                   "min_msgs_per_s,mb_per_s,loss,send_p50_ns,speedup_vs_pipe,probe_units,p50_ns,"
                   "p99_ns,p999_ns,max_ns,level\n");
        for (size_t j = 0; j < nsums; j++) {
            const struct sum *s = &sums[j];
            fprintf(f, "%s,%s,%s,", s->group, s->kind, s->mech);
            csv_str(f, s->label);
            fprintf(f, ",%u,%zu,%d,%d,%d,", s->nrecv, s->size, s->pinned, s->reps, s->nok);
            csv_str(f, s->nok ? "" : s->note);
            fprintf(f, ",%.1f,%.1f,%.1f,%.3f,%.6f,%.1f,%.4f,%.3f,%.0f,%.0f,%.0f,%.0f,%s\n", s->probe,
                    s->msgs, s->min_msgs, s->mb, s->loss, s->send_p50, s->speedup_pipe, s->units,
                    s->p50, s->p99, s->p999, s->max, level_name());
        }
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/results.json", opt.out);
    f = fopen(path, "w");
    if (!f)
        return;
    char ts[64];
    time_t now = time(NULL);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(f, "{\n  \"timestamp\": \"%s\",\n  \"command\": \"", ts);
    for (int i = 0; i < argc; i++) {
        if (i)
            fputc(' ', f);
        for (const char *p = argv[i]; *p; p++) {
            if (*p == '"' || *p == '\\')
                fputc('\\', f);
            fputc(*p, f);
        }
    }
    fprintf(f, "\",\n  \"mode\": \"%s\",\n  \"repeats\": %d,\n", opt.full ? "full" : "quick",
            opt.repeat);
    fprintf(f, "  \"level\": \"%s\",\n", level_name());
    fprintf(f, "  \"seconds\": {\"micro\": %g, \"compare\": %g, \"probe\": %g},\n", opt.micro_s,
            opt.compare_s, opt.probe_s);
    fprintf(f, "  \"machine\": {\"nproc\": %d, \"cpu_model\": ", mech_nprocs_online());
    json_str(f, cpu_model);
    fprintf(f, ", \"kernel\": ");
    json_str(f, uts.release);
    fprintf(f, ", \"machine\": ");
    json_str(f, uts.machine);
    fprintf(f, ", \"load_before\": [%.2f, %.2f, %.2f], \"load_after\": [%.2f, %.2f, %.2f]",
            load_before[0], load_before[1], load_before[2], load_after[0], load_after[1],
            load_after[2]);
    fprintf(f, ", \"mqueue_msgsize_max\": %ld, \"msgmax\": %ld},\n",
            mech_read_sysctl("/proc/sys/fs/mqueue/msgsize_max"),
            mech_read_sysctl("/proc/sys/kernel/msgmax"));
    fprintf(f, "  \"probe_ns\": {\"median\": ");
    json_num(f, probe_med);
    fprintf(f, ", \"min\": ");
    json_num(f, probe_min);
    fprintf(f, ", \"max\": ");
    json_num(f, probe_max);
    fprintf(f, "},\n  \"targets\": [\n");
    for (int i = 0; i < ntargets; i++) {
        fprintf(f, "    {\"what\": ");
        json_str(f, targets[i].what);
        fprintf(f, ", \"value\": ");
        json_num(f, targets[i].value);
        fprintf(f, ", \"want\": \"%s %.2f\", \"verdict\": \"%s\"}%s\n", targets[i].le ? "<=" : ">=",
                targets[i].limit, verdict(&targets[i]), i + 1 < ntargets ? "," : "");
    }
    fprintf(f, "  ],\n  \"summary\": [\n");
    for (size_t j = 0; j < nsums; j++) {
        const struct sum *s = &sums[j];
        fprintf(f, "    {\"group\": \"%s\", \"kind\": \"%s\", \"mech\": ", s->group, s->kind);
        json_str(f, s->mech);
        fprintf(f, ", \"label\": ");
        json_str(f, s->label);
        fprintf(f, ", \"nrecv\": %u, \"size\": %zu, \"pinned\": %s, \"reps\": %d, \"ok\": %d",
                s->nrecv, s->size, s->pinned ? "true" : "false", s->reps, s->nok);
        if (!s->nok) {
            fprintf(f, ", \"note\": ");
            json_str(f, s->note);
        }
        const char *names[] = { "probe_ns", "msgs_per_s", "mb_per_s", "loss", "send_p50_ns",
                                "speedup_vs_pipe", "probe_units", "p50_ns", "p99_ns",
                                "p999_ns", "max_ns" };
        double vals[] = { s->probe, s->msgs, s->mb, s->loss, s->send_p50, s->speedup_pipe,
                          s->units, s->p50, s->p99, s->p999, s->max };
        for (int q = 0; q < 11; q++) {
            fprintf(f, ", \"%s\": ", names[q]);
            json_num(f, vals[q]);
        }
        fprintf(f, "}%s\n", j + 1 < nsums ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    fclose(f);
}

/* ---------- correctness test of one mechanism ---------- */

static int run_test(const char *name)
{
    const struct mech *m = mech_find(name);
    if (!m) {
        fprintf(stderr, "unknown mechanism %s\n", name);
        return 2;
    }
    const size_t sizes[] = { 1, 64, 5000, 100000 };
    const unsigned ns[] = { 1, 3 };
    int bad = 0;
    /* Counted runs: the time bound only stops a hang (a failure either way). */
    struct run_opts o = { .seconds = 100, .full_check = 1 };
    for (unsigned i = 0; i < 2; i++) {
        for (unsigned j = 0; j < 4; j++) {
            struct stream_result s;
            uint64_t want = sizes[j] > 65536 ? 40 : 300;
            o.max_msgs = want;
            run_stream(m, ns[i], sizes[j], &o, &s);
            int ok = s.status == 1 || (s.status == 0 && s.msgs == want);
            if (s.status == 0 && (m->flags & MECH_LOSSY))   /* delivered + lost = sent */
                ok = s.msgs + (uint64_t)(s.loss / (1 - s.loss) * (double)s.msgs + 0.5) == want;
            printf("%-12s stream N=%u %6zu B: %s %s (%llu of %llu msgs each, loss %.1f%%)\n", name,
                   ns[i], sizes[j], ok ? "ok" : "FAIL", s.note, (unsigned long long)s.msgs,
                   (unsigned long long)want, s.loss * 100);
            bad |= !ok;
        }
    }
    struct lat_result l;
    o.max_msgs = 500;
    run_pingpong(m, 64, &o, &l);
    int ok = l.status == 1 || (l.status == 0 && l.samples == 300);
    printf("%-12s ping-pong 64 B: %s %s (%llu round trips timed)\n", name, ok ? "ok" : "FAIL", l.note,
           (unsigned long long)l.samples);
    bad |= !ok;
    return bad;
}

/* ---------- main ---------- */

static void parse_list_u(const char *s, unsigned *out, unsigned *n)
{
    *n = 0;
    for (char *e; *s && *n < 16; s = *e ? e + 1 : e)
        out[(*n)++] = (unsigned)strtoul(s, &e, 10);
}

int main(int argc, char **argv)
{
    opt.repeat = 0;
    opt.out = NULL;
    opt.openmpi = BENCH_OPENMPI_BIN;
    opt.mpich = BENCH_MPICH_BIN;
    opt.iceoryx2 = BENCH_ICEORYX2_BIN;
    double seconds = 0;
    const char *nrecv_s = NULL, *sizes_s = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && (i++, 1))
        if (!strcmp(a, "--full"))
            opt.full = 1;
        else if (!strcmp(a, "--quick"))
            opt.full = 0;
        else if (!strcmp(a, "--no-micro"))
            opt.no_micro = 1;
        else if (!strcmp(a, "--no-compare"))
            opt.no_compare = 1;
        else if (!strcmp(a, "--no-external"))
            opt.no_external = 1;
        else if (!strcmp(a, "--transfer-only"))
            opt.transfer_only = 1;
        else if (!strcmp(a, "--list")) {
            for (int k = 0; mech_all[k]; k++)
                printf("%-16s %s\n", mech_all[k]->name, mech_all[k]->label);
            printf("%-16s %s\n%-16s %s\n%-16s %s\n%-16s %s\n", "openmpi", "Open MPI (external)",
                   "mpich", "MPICH (external)", "iceoryx2", "iceoryx2, polling (external)",
                   "iceoryx2-event", "iceoryx2, event-based (external)");
            return 0;
        } else if (ARG("--out"))
            opt.out = v;
        else if (ARG("--repeat"))
            opt.repeat = atoi(v);
        else if (ARG("--seconds"))
            seconds = atof(v);
        else if (ARG("--nrecv"))
            nrecv_s = v;
        else if (ARG("--sizes"))
            sizes_s = v;
        else if (ARG("--mechs"))
            opt.mechs = v;
        else if (ARG("--openmpi"))
            opt.openmpi = v;
        else if (ARG("--mpich"))
            opt.mpich = v;
        else if (ARG("--iceoryx2"))
            opt.iceoryx2 = v;
        else if (ARG("--test"))
            opt.test = v;
        else
            usage();
#undef ARG
    }
    if (opt.test)
        return run_test(opt.test);
    if (check_mechs() != 0)
        return 2;

    int ncpu = mech_nprocs_online();
    if (!opt.repeat)
        opt.repeat = opt.full ? 5 : 3;
    opt.micro_s = seconds > 0 ? seconds : opt.full ? 0.5 : 0.1;
    opt.compare_s = seconds > 0 ? seconds : opt.full ? 1.0 : 0.3;
    opt.probe_s = opt.full ? 0.05 : 0.02;
    if (nrecv_s) {
        parse_list_u(nrecv_s, opt.nrecv_list, &opt.n_nrecv);
    } else if (opt.full) {
        unsigned l[] = { 1, 2, 3, 4, 8, 16 };
        for (unsigned k = 0; k < 6; k++)
            opt.nrecv_list[opt.n_nrecv++] = l[k];
        if (ncpu > 2)
            opt.nrecv_list[1] = (unsigned)ncpu - 1;
    } else {
        opt.nrecv_list[opt.n_nrecv++] = 1;
        opt.nrecv_list[opt.n_nrecv++] = ncpu - 1 > 4 ? (unsigned)ncpu - 1 : 4;
    }
    if (sizes_s) {
        for (const char *s = sizes_s; *s && opt.n_sizes < 16;) {
            opt.sizes[opt.n_sizes++] = parse_size(s);
            const char *e = strchr(s, ',');
            s = e ? e + 1 : s + strlen(s);
        }
    } else {
        for (unsigned k = 0; k < sizeof default_sizes / sizeof *default_sizes; k++)
            opt.sizes[opt.n_sizes++] = default_sizes[k];
    }
    static char outbuf[512];
    if (!opt.out) {
        char ts[32];
        time_t now = time(NULL);
        strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", gmtime(&now));
        snprintf(outbuf, sizeof outbuf, "bench/results/%s-%s", ts, opt.full ? "full" : "quick");
        opt.out = outbuf;
    }
    {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", opt.out);
        if (system(cmd) != 0) {
            fprintf(stderr, "cannot create %s\n", opt.out);
            return 2;
        }
    }
    machine_info();
    getloadavg(load_before, 3);

    /* count the work for the progress line */
    const char *lat_cmp[] = { "zimp-spin", "ring", "zimp-block", "futex", "zimp", "pipe", NULL };
    const char *str_cmp[] = { "zimp-spin", "zimp", "zimp-zero", "ring", "pipe", NULL };
    const int n_str_cmp = (int)(sizeof str_cmp / sizeof str_cmp[0]) - 1;
    const char *big_cmp[] = { "zimp-spin", "ring", NULL };
    const size_t str_sizes[] = { 64, 4096, 1048576 };
    const char *n4_cmp[] = { "zimp-block", "zimp", "futex", "pipe", "vmsplice", "unix-stream",
                             "unix-dgram", "tcp", "udp", "sysv-mq", "posix-mq", "cma", NULL };
    const char *const *externals = external_mechs;
    const char *ext_bin[] = { opt.openmpi, opt.mpich, opt.iceoryx2, opt.iceoryx2 };
    for (int rep = 0; rep < opt.repeat; rep++) {
        if (!opt.no_compare) {
            for (int i = 0; lat_cmp[i]; i++)
                total_items += need(lat_cmp[i]) != NULL;
            for (int i = 0; big_cmp[i]; i++)
                total_items += need(big_cmp[i]) != NULL;
            for (int i = 0; str_cmp[i]; i++)
                total_items += 3 * (need(str_cmp[i]) != NULL);
            for (int i = 0; n4_cmp[i]; i++)
                total_items += need(n4_cmp[i]) != NULL;
        }
        if (!opt.no_micro) {
            for (int i = 0; micro_mechs[i]; i++)
                total_items += (opt.n_nrecv * opt.n_sizes + 1) * (need(micro_mechs[i]) != NULL);
            if (!opt.no_external)
                for (int e = 0; externals[e]; e++)
                    total_items += wanted(externals[e]) ? opt.n_nrecv : 0;
        }
    }
    t_start = run_now_s();
    for (int rep = 0; rep < opt.repeat; rep++) {
        if (!opt.no_compare) {
            for (int i = 0; lat_cmp[i]; i++) {
                const struct mech *m = need(lat_cmp[(i + rep) % 6]);
                if (m)
                    do_pingpong("compare", m, 64, rep, opt.compare_s, !opt.transfer_only);
            }
            for (int i = 0; big_cmp[i]; i++) {      /* sender cost of a large message */
                const struct mech *m = need(big_cmp[(i + rep) % 2]);
                if (m)
                    /* the cost of the mechanism itself: 16 bytes written, at every level */
                    do_pingpong("compare", m, 1048576, rep, opt.compare_s, 0);
            }
            for (int j = 0; j < 3; j++)
                for (int i = 0; str_cmp[i]; i++) {
                    const struct mech *m = need(str_cmp[(i + rep) % n_str_cmp]);
                    if (m)
                        do_stream("compare", m, 1, str_sizes[j], rep, opt.compare_s);
                }
            for (int i = 0; n4_cmp[i]; i++) {
                const struct mech *m = need(n4_cmp[(i + rep) % 12]);
                if (m)
                    do_stream("compare", m, 4, 64, rep, opt.compare_s);
            }
        }
        if (!opt.no_micro) {
            int nm = 0;
            while (micro_mechs[nm])
                nm++;
            for (int i = 0; i < nm; i++) {
                const struct mech *m = need(micro_mechs[(i + rep) % nm]);
                if (m)
                    do_pingpong("micro", m, 64, rep, opt.micro_s, !opt.transfer_only);
            }
            for (unsigned ni = 0; ni < opt.n_nrecv; ni++) {
                for (unsigned si = 0; si < opt.n_sizes; si++)
                    for (int i = 0; i < nm; i++) {
                        const struct mech *m = need(micro_mechs[(i + rep) % nm]);
                        if (m)
                            do_stream("micro", m, opt.nrecv_list[ni], opt.sizes[si], rep,
                                      opt.micro_s);
                    }
                if (!opt.no_external)
                    for (int e = 0; externals[e]; e++)
                        if (wanted(externals[e]))
                            do_external(externals[e], ext_bin[e], opt.nrecv_list[ni], rep,
                                        opt.micro_s);
            }
        }
    }
    fprintf(stderr, "\r\033[Kdone in %.0f s\n", run_now_s() - t_start);
    getloadavg(load_after, 3);
    summarize();
    char path[600];
    snprintf(path, sizeof path, "%s/table.txt", opt.out);
    tee_f = fopen(path, "w");
    print_report();
    write_files(argc, argv);
    outf("\nresults: %s/{raw.csv,summary.csv,results.json,table.txt}\n", opt.out);
    if (tee_f)
        fclose(tee_f);
    return 0;
}
