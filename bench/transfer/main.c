/*
 * zimp_transfer: the SMP data-transfer study (seed 002) with today's
 * mechanisms. In order, as the study did: the copy routines (Figure 2),
 * the chunk size of each pipelined mechanism (Figure 3), then with those
 * choices latency and bandwidth against size (Table II, Figure 4), set-up
 * and tear-down (Table III) and cache disturbance (Table IV). Raw CSV files,
 * meta.json and table.txt go to --out DIR; tables also to stdout, progress
 * to stderr. `--test MECH` is a short correctness check (exit 77: n/a here).
 */
#define _GNU_SOURCE
#include "driver.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define NSIZES 14            /* 1 B, 4 B, ... 64 MiB: powers of 4 */
#define NOTE   200

static struct {
    const char *out, *mechs, *test, *copy;
    unsigned reps, fanout;
    int quick, tune;
    size_t span;             /* bytes buffers shift over before reuse */
    FILE *table;
} opt = { .reps = 3, .fanout = 4, .tune = 1, .copy = "auto" };

static size_t sizes[NSIZES];

/* Chosen chunk/depth per mechanism (Figure 3) and its time, indexed like xfer_all. */
static struct xfer_opts chosen[32];
static double chosen_ns[32];

/* ---------- output ---------- */

static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (opt.table) {
        va_start(ap, fmt);
        vfprintf(opt.table, fmt, ap);
        va_end(ap);
    }
}

static FILE *csv_open(const char *name, const char *header)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", opt.out, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "zimp_transfer: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    fprintf(f, "%s\n", header);
    return f;
}

static const char *human(size_t n, char *buf, size_t len)
{
    if (n >= 1048576 && n % 1048576 == 0)
        snprintf(buf, len, "%zu MiB", n >> 20);
    else if (n >= 1024 && n % 1024 == 0)
        snprintf(buf, len, "%zu KiB", n >> 10);
    else
        snprintf(buf, len, "%zu B", n);
    return buf;
}

static double mib_s(size_t bytes, double ns)
{
    return ns > 0 ? (double)bytes / 1048576.0 / (ns * 1e-9) : NAN;
}

static int wanted(const struct xfer *x)
{
    if (!opt.mechs)
        return 1;
    size_t n = strlen(x->name);
    for (const char *p = opt.mechs; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && strncmp(p, x->name, n) == 0)
            return 1;
        p += l + (e ? 1 : 0);
    }
    return 0;
}

static int xfer_index(const struct xfer *x)
{
    for (int i = 0; xfer_all[i]; i++)
        if (xfer_all[i] == x)
            return i;
    return 0;
}

static unsigned iters_for(size_t size, size_t budget, unsigned lo, unsigned hi)
{
    size_t n = budget / (size ? size : 1);
    return n < lo ? lo : n > hi ? hi : (unsigned)n;
}

static void load_avg(char *buf, size_t len)
{
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = 0;
    if (f) {
        double a, b, c;
        if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
            snprintf(buf, len, "%.2f %.2f %.2f", a, b, c);
        fclose(f);
    }
}

/* ---------- Figure 2: copy routines ---------- */

/* Mean ns per copy of `size` bytes over a batch that shifts through the
 * span (cold source and destination), optionally reading the copy back. */
static double copy_batch(copy_fn fn, unsigned char *dst, const unsigned char *src, size_t size,
                         int touch, uint64_t *sink)
{
    unsigned n = iters_for(size, (size_t)64 << 20, 3, 20000);
    size_t off = 0, stride = ((size + 63) & ~(size_t)63) + 64;
    double t0 = xfer_now_ns();
    for (unsigned i = 0; i < n; i++) {
        off = (off + stride) % opt.span;
        fn(dst + off, src + off, size);
        if (touch)
            *sink += xfer_touch(dst + off, size);
    }
    return (xfer_now_ns() - t0) / n;
}

static void copy_report(double med[][NSIZES][2]);

static void copy_study(void)
{
    size_t bytes = opt.span + sizes[NSIZES - 1];
    unsigned char *src = xfer_map_local(bytes), *dst = xfer_map_local(bytes);
    if (!src || !dst) {
        fprintf(stderr, "zimp_transfer: no memory for the copy study\n");
        exit(1);
    }
    memset(src, 0x5a, bytes);
    FILE *csv = csv_open("fig2_copy.csv", "routine,size,rep,copy_ns,copy_touch_ns");
    static double med[COPY_NKINDS][NSIZES][2];
    double *v[2] = { malloc(sizeof(double) * opt.reps), malloc(sizeof(double) * opt.reps) };
    uint64_t sink = 0;
    fprintf(stderr, "figure 2: copy routines\n");
    for (int k = 0; k < COPY_NKINDS; k++) {
        for (int j = 0; j < NSIZES; j++) {
            if (copy_unsupported((enum copy_kind)k)) {
                med[k][j][0] = med[k][j][1] = NAN;
                continue;
            }
            for (unsigned r = 0; r < opt.reps; r++) {
                copy_fn fn = copy_routine((enum copy_kind)k);
                v[0][r] = copy_batch(fn, dst, src, sizes[j], 0, &sink);
                v[1][r] = copy_batch(fn, dst, src, sizes[j], 1, &sink);
                fprintf(csv, "%s,%zu,%u,%.1f,%.1f\n", copy_name((enum copy_kind)k), sizes[j], r,
                        v[0][r], v[1][r]);
            }
            med[k][j][0] = xfer_median(v[0], opt.reps);
            med[k][j][1] = xfer_median(v[1], opt.reps);
        }
    }
    fclose(csv);
    free(v[0]);
    free(v[1]);
    xfer_unmap(src, bytes);
    xfer_unmap(dst, bytes);
    copy_report(med);
    if (sink == 42)
        fprintf(stderr, " ");   /* keeps the reads */
}

/* Best routine per measured size by copy + read-back time (what a consumer
 * that uses its data pays); size classes between measured sizes take the
 * measured size below them. */
static void copy_report(double med[][NSIZES][2])
{
    enum copy_kind best[COPY_CLASSES], cached[COPY_CLASSES];
    int win[NSIZES], win_cached[NSIZES];
    char h[32];
    say("\nFigure 2 - copy routines, MiB/s (copy only / copy + consumer reads it), median of %u\n",
        opt.reps);
    say("%10s", "size");
    for (int k = 0; k < COPY_NKINDS; k++)
        say(" %27s", copy_name((enum copy_kind)k));
    say("  chosen\n");
    for (int j = 0; j < NSIZES; j++) {
        win[j] = win_cached[j] = 0;
        say("%10s", human(sizes[j], h, sizeof h));
        for (int k = 0; k < COPY_NKINDS; k++) {
            say("   %11.0f / %11.0f", mib_s(sizes[j], med[k][j][0]), mib_s(sizes[j], med[k][j][1]));
            if (k == COPY_NT_AVX2 && sizes[j] < COPY_NT_MIN)
                continue;    /* that is memcpy again: its time differs only by noise */
            if (!isnan(med[k][j][1]) && med[k][j][1] < med[win[j]][j][1])
                win[j] = k;
            if (k != COPY_NT_AVX2 && med[k][j][1] < med[win_cached[j]][j][1])
                win_cached[j] = k;
        }
        say("  %s\n", copy_name((enum copy_kind)win[j]));
    }
    for (int c = 0; c < COPY_CLASSES; c++) {
        int j = c / 2 < NSIZES ? c / 2 : NSIZES - 1;
        best[c] = (enum copy_kind)win[j];
        cached[c] = (enum copy_kind)win_cached[j];
    }
    copy_choose(best, cached);
}

static void copy_setup(void)
{
    if (!strcmp(opt.copy, "auto")) {
        copy_study();
        return;
    }
    for (int k = 0; k < COPY_NKINDS; k++) {
        const char *n = k == COPY_LIBC ? "libc" : k == COPY_MOVSB ? "movsb" : "nt";
        if (!strcmp(opt.copy, n) && !copy_unsupported((enum copy_kind)k)) {
            copy_force((enum copy_kind)k);
            say("\ncopy routine forced: %s\n", copy_name((enum copy_kind)k));
            return;
        }
    }
    fprintf(stderr, "zimp_transfer: --copy %s: unknown or unsupported here\n", opt.copy);
    exit(2);
}

/* ---------- Figure 3: chunk size of the pipelined mechanisms ---------- */

struct series { const char *mech; unsigned depth; };
static const struct series tune_series[] = {
    { "shmbuf", 2 }, { "shmbuf", 4 }, { "zimp-chunk", 4 }, { "sysv-mq", 4 }, { "posix-mq", 4 },
};
static const size_t TUNE_SIZE = (size_t)4 << 20;   /* the study's Figure 3 transfer */
#define TUNE_N    12                  /* 1 KiB .. 2 MiB */

static double tune_point(const struct xfer *x, struct xfer_opts *o, FILE *csv, unsigned depth, size_t chunk)
{
    double *v = malloc(sizeof(double) * opt.reps);
    unsigned iters = opt.quick ? 8 : 24, ok = 0;
    for (unsigned r = 0; v && r < opt.reps; r++) {
        struct xfer_size_result res;
        char note[NOTE];
        o->chunk = chunk, o->depth = depth;
        int rc = xfer_run_sizes(x, o, &TUNE_SIZE, &iters, 1, &res, note, sizeof note);
        fprintf(csv, "%s,%u,%zu,%zu,%u,%u,%.1f,%.1f,%s\n", x->name, depth, chunk, o->chunk, o->depth, r,
                rc == 0 ? res.p50_ns : NAN, rc == 0 ? mib_s(TUNE_SIZE, res.p50_ns) : NAN,
                rc == 0 ? "ok" : note);
        if (rc == 0)
            v[ok++] = res.p50_ns;
        if (rc == 0 && o->chunk != chunk)
            break;           /* capped by a kernel limit: the point repeats a smaller chunk */
    }
    double m = ok ? xfer_median(v, ok) : NAN;
    free(v);
    return m;
}

static void tune_series_run(const struct series *s, FILE *csv)
{
    const struct xfer *x = xfer_find(s->mech);
    if (!x || !wanted(x))
        return;
    int at = xfer_index(x);
    char h[32];
    say("%-22s", s->mech);
    for (int i = 0; i < TUNE_N; i++) {
        size_t chunk = (size_t)1024 << i;
        struct xfer_opts o = { .span = 2 * xfer_llc_bytes(), .limit_s = 120 };
        double ns = tune_point(x, &o, csv, s->depth, chunk);
        say(" %7.0f", mib_s(TUNE_SIZE, ns));
        if (o.chunk != chunk) {
            say(" (capped at %s)", human(o.chunk, h, sizeof h));
            chunk = o.chunk;
        }
        if (!chosen[at].chunk || ns < chosen_ns[at]) {   /* best over every series of x */
            chosen_ns[at] = ns;
            chosen[at] = (struct xfer_opts){ .chunk = chunk, .depth = o.depth };
        }
        if (o.chunk < (size_t)1024 << i)
            break;
    }
    say("   depth %u\n", s->depth);
}

static void tune(void)
{
    fprintf(stderr, "figure 3: chunk sizes\n");
    FILE *csv = csv_open("fig3_chunk.csv", "mech,depth_asked,chunk_asked,chunk,depth,rep,p50_ns,mib_s,status");
    say("\nFigure 3 - %s transfer, MiB/s by chunk size 1 KiB .. 2 MiB (x2 per column), median of %u\n",
        "4 MiB", opt.reps);
    for (size_t i = 0; i < sizeof tune_series / sizeof *tune_series; i++)
        tune_series_run(&tune_series[i], csv);
    fclose(csv);
    char h[32];
    say("chosen:");
    for (int i = 0; xfer_all[i]; i++) {
        if (chosen[i].chunk)
            say("  %s %s x %u", xfer_all[i]->name, human(chosen[i].chunk, h, sizeof h), chosen[i].depth);
    }
    say("\n");
}

/* ---------- Table II, Figure 4: latency and bandwidth ---------- */

/* [fan][mech][size]: fan 0 one destination, fan 1 opt.fanout; medians over
 * repeats of each repeat's median ns: total, delivered, handed off, loan */
enum { M_TOTAL, M_DELIVER, M_HANDOFF, M_LOAN, M_N };
static double bw[2][32][NSIZES][M_N];
static char bw_note[2][32][NOTE];

static struct xfer_opts opts_for(const struct xfer *x, size_t span)
{
    struct xfer_opts o = chosen[xfer_index(x)];
    o.span = span;
    o.limit_s = 300;
    return o;
}

static unsigned fan_ndst(int fan)
{
    return fan ? opt.fanout : 1;
}

static void bandwidth(void)
{
    fprintf(stderr, "table II / figure 4: latency and bandwidth\n");
    FILE *csv = csv_open("transfer.csv", "rep,mech,size,chunk,depth,iters,p50_ns,min_ns,mib_s,status,"
                                         "ndst,deliver_ns,handoff_ns,loan_ns");
    static double v[2][32][NSIZES][M_N][16];
    unsigned iters[NSIZES];
    for (int j = 0; j < NSIZES; j++)
        iters[j] = iters_for(sizes[j], opt.quick ? (size_t)64 << 20 : (size_t)256 << 20, 5, 1000);
    for (unsigned r = 0; r < opt.reps && r < 16; r++) {          /* repeats outermost: noise hits all */
        for (int fan = 0; fan < (opt.fanout > 1 ? 2 : 1); fan++) {
            for (int i = 0; xfer_all[i]; i++) {
                const struct xfer *x = xfer_all[i];
                if (!wanted(x) || (fan && !(x->flags & XFER_FANOUT)))
                    continue;
                struct xfer_size_result res[NSIZES];
                struct xfer_opts o = opts_for(x, opt.span);
                o.ndst = fan_ndst(fan);
                fprintf(stderr, "  rep %u %s 1->%u\n", r, x->name, o.ndst);
                int rc = xfer_run_sizes(x, &o, sizes, iters, NSIZES, res, bw_note[fan][i], NOTE);
                for (int j = 0; j < NSIZES; j++) {
                    double *m = v[fan][i][j][0];
                    m[r] = rc == 0 ? res[j].p50_ns : NAN;
                    v[fan][i][j][M_DELIVER][r] = rc == 0 ? res[j].p50_deliver_ns : NAN;
                    v[fan][i][j][M_HANDOFF][r] = rc == 0 ? res[j].p50_handoff_ns : NAN;
                    v[fan][i][j][M_LOAN][r] = rc == 0 ? res[j].p50_loan_ns : NAN;
                    fprintf(csv, "%u,%s,%zu,%zu,%u,%u,%.1f,%.1f,%.1f,%s,%u,%.1f,%.1f,%.1f\n", r, x->name,
                            sizes[j], o.chunk, o.depth, rc == 0 ? res[j].iters : 0, m[r],
                            rc == 0 ? res[j].min_ns : NAN, mib_s(sizes[j], m[r]),
                            rc == 0 ? "ok" : bw_note[fan][i], o.ndst, v[fan][i][j][M_DELIVER][r],
                            v[fan][i][j][M_HANDOFF][r], v[fan][i][j][M_LOAN][r]);
                }
            }
        }
    }
    fclose(csv);
    for (int fan = 0; fan < 2; fan++)
        for (int i = 0; xfer_all[i]; i++)
            for (int j = 0; j < NSIZES; j++)
                for (int m = 0; m < M_N; m++)
                    bw[fan][i][j][m] = xfer_median(v[fan][i][j][m], opt.reps < 16 ? opt.reps : 16);
}

static void bandwidth_table(int fan)
{
    char h[32];
    say("%-12s", "mechanism");
    for (int j = 0; j < NSIZES; j += 1)
        say(" %8s", human(sizes[j], h, sizeof h));
    say("\n");
    for (int i = 0; xfer_all[i]; i++) {
        if (!wanted(xfer_all[i]) || (fan && !(xfer_all[i]->flags & XFER_FANOUT)))
            continue;
        say("%-12s", xfer_all[i]->name);
        for (int j = 0; j < NSIZES; j++)
            say(" %8.0f", mib_s(sizes[j], bw[fan][i][j][M_TOTAL]));
        say("%s%s\n", isnan(bw[fan][i][0][M_TOTAL]) ? "  " : "", isnan(bw[fan][i][0][M_TOTAL]) ? bw_note[fan][i] : "");
    }
}

static int size_index(size_t size)
{
    for (int j = 0; j < NSIZES; j++)
        if (sizes[j] == size)
            return j;
    return -1;
}

/* The zero-copy rows against the best copying mechanism, and the
 * zero-copy path's latency at 64 MiB against 64 B: goals.csv. */
static void goals_report(void)
{
    const struct xfer *zc = xfer_find("zimp-heap");
    static const char *const copying[] = { "shmbuf", "cma-get" };
    if (!zc || !wanted(zc))
        return;
    int z = xfer_index(zc);
    FILE *csv = csv_open("goals.csv", "what,ndst,size,zimp_heap_ns,best_copy,best_copy_ns,ratio");
    say("\nZero-copy against copying - time per transfer until every destination read every byte,\n"
        "  median of %u repeats; ratio = best copying time / zimp-heap time (goal: >= 1.5)\n", opt.reps);
    say("  %-6s %8s %14s %10s %14s %8s\n", "fan", "size", "zimp-heap us", "best copy", "its us", "ratio");
    const size_t gsizes[2] = { (size_t)1 << 20, (size_t)64 << 20 };
    for (int fan = 0; fan < (opt.fanout > 1 ? 2 : 1); fan++) {
        for (int g = 0; g < 2; g++) {
            int j = size_index(gsizes[g]);
            if (j < 0)
                continue;
            double zt = bw[fan][z][j][M_TOTAL], best = NAN;
            const char *who = "-";
            for (size_t k = 0; k < sizeof copying / sizeof *copying; k++) {
                const struct xfer *x = xfer_find(copying[k]);
                double t = x && wanted(x) ? bw[fan][xfer_index(x)][j][M_TOTAL] : NAN;
                if (!isnan(t) && (isnan(best) || t < best))
                    best = t, who = copying[k];
            }
            char h[32], f[16];
            snprintf(f, sizeof f, "1->%u", fan_ndst(fan));
            say("  %-6s %8s %14.1f %10s %14.1f %8.2f\n", f, human(gsizes[g], h, sizeof h), zt / 1000, who,
                best / 1000, best / zt);
            fprintf(csv, "bandwidth,%u,%zu,%.1f,%s,%.1f,%.3f\n", fan_ndst(fan), gsizes[g], zt, who, best,
                    best / zt);
        }
    }
    int small = size_index(64), big = size_index((size_t)64 << 20);
    if (small >= 0 && big >= 0) {
        say("\nZero-copy latency - until the last destination holds the message (before reading it), us,\n"
            "  median of %u repeats: with the loan (allocation) / from the publication on (the thesis's\n"
            "  Figures 9.2-9.3: pointer sent to pointer usable); goal: 64 MiB within 2x of 64 B\n", opt.reps);
        for (int fan = 0; fan < (opt.fanout > 1 ? 2 : 1); fan++) {
            double d0 = bw[fan][z][small][M_DELIVER], d1 = bw[fan][z][big][M_DELIVER];
            double h0 = bw[fan][z][small][M_HANDOFF], h1 = bw[fan][z][big][M_HANDOFF];
            say("  1->%u  64 B: %.2f / %.2f   64 MiB: %.2f / %.2f   ratio %.2f / %.2f   (loan of 64 MiB: %.2f)\n",
                fan_ndst(fan), d0 / 1000, h0 / 1000, d1 / 1000, h1 / 1000, d1 / d0, h1 / h0,
                bw[fan][z][big][M_LOAN] / 1000);
            fprintf(csv, "latency_with_loan,%u,%zu,%.1f,64B,%.1f,%.3f\n", fan_ndst(fan), (size_t)64 << 20, d1,
                    d0, d1 / d0);
            fprintf(csv, "latency_from_publish,%u,%zu,%.1f,64B,%.1f,%.3f\n", fan_ndst(fan), (size_t)64 << 20,
                    h1, h0, h1 / h0);
        }
    }
    fclose(csv);
}

static void bandwidth_report(void)
{
    say("\nTable II - one-byte transfer, us (from the source's start, or the destination's for a get, "
        "to the destination having read the byte), "
        "median of %u repeats\n", opt.reps);
    for (int i = 0; xfer_all[i]; i++) {
        if (!wanted(xfer_all[i]))
            continue;
        if (isnan(bw[0][i][0][M_TOTAL]))
            say("  %-44s %s\n", xfer_all[i]->label, bw_note[0][i]);
        else
            say("  %-44s %8.2f   (study row: %s)\n", xfer_all[i]->label, bw[0][i][0][M_TOTAL] / 1000,
                xfer_all[i]->study_row);
    }
    say("\nFigure 4 - bandwidth, MiB/s (1 MiB = 2^20 B), consumer reads every byte, median of %u\n",
        opt.reps);
    bandwidth_table(0);
    if (opt.fanout > 1) {
        say("\nFigure 4, one to %u - MiB/s of the message (not times %u), until every destination read "
            "every byte, median of %u\n", opt.fanout, opt.fanout, opt.reps);
        bandwidth_table(1);
    }
    goals_report();
}

/* ---------- Table III: set-up and tear-down ---------- */

static void setup_cost(void)
{
    fprintf(stderr, "table III: set-up and tear-down\n");
    FILE *csv = csv_open("setup.csv", "mech,max_len,chunk,depth,iters,setup_ns,teardown_ns,status");
    const size_t lens[2] = { (size_t)1 << 20, (size_t)64 << 20 };
    unsigned iters = opt.quick ? 20 : 100;
    say("\nTable III - set-up (init + attach both ends) and tear-down (detach both + finalize), us, "
        "median of %u\n  %-44s %10s %10s %10s %10s\n", iters, "mechanism", "set-up 1M", "tear 1M",
        "set-up 64M", "tear 64M");
    for (int i = 0; xfer_all[i]; i++) {
        const struct xfer *x = xfer_all[i];
        if (!wanted(x))
            continue;
        say("  %-44s", x->label);
        char note[NOTE] = "";
        for (int l = 0; l < 2; l++) {
            struct xfer_opts o = opts_for(x, opt.span);
            double s = NAN, t = NAN;
            int rc = xfer_run_setup(x, &o, lens[l], iters, &s, &t, note, sizeof note);
            fprintf(csv, "%s,%zu,%zu,%u,%u,%.1f,%.1f,%s\n", x->name, lens[l], o.chunk, o.depth, iters, s, t,
                    rc == 0 ? "ok" : note);
            say(" %10.1f %10.1f", s / 1000, t / 1000);
        }
        say("  %s\n", note);
    }
    fclose(csv);
}

/* ---------- Table IV: cache disturbance ---------- */

#define DIST_SIZE ((size_t)4 << 20)
#define DIST_WS   ((size_t)512 << 10)

static void disturbance(void)
{
    fprintf(stderr, "table IV: cache disturbance\n");
    FILE *csv = csv_open("disturb.csv", "mech,rep,role,idle_ns,after_ns,evicted_ns,status");
    unsigned rounds = opt.quick ? 5 : 15;
    say("\nTable IV proxy - one random walk over a %zu KiB working set right after a %zu MiB transfer,\n"
        "  slowdown vs. the same walk with no transfer (idle) and share of a full eviction\n"
        "  (after - idle) / (evicted - idle); median of %u repeats x %u rounds\n"
        "  %-44s %16s %16s\n", DIST_WS >> 10, DIST_SIZE >> 20, opt.reps, rounds, "mechanism",
        "source", "destination");
    for (int i = 0; xfer_all[i]; i++) {
        const struct xfer *x = xfer_all[i];
        if (!wanted(x))
            continue;
        double v[2][3][16];
        char note[NOTE] = "";
        unsigned ok = 0;
        for (unsigned r = 0; r < opt.reps && r < 16; r++) {
            struct xfer_opts o = opts_for(x, 2 * xfer_llc_bytes());
            struct xfer_disturb d;
            int rc = xfer_run_disturb(x, &o, DIST_SIZE, DIST_WS, rounds, &d, note, sizeof note);
            for (int role = 0; role < 2; role++) {
                fprintf(csv, "%s,%u,%s,%.1f,%.1f,%.1f,%s\n", x->name, r, role ? "destination" : "source",
                        d.walk_ns[role][0], d.walk_ns[role][1], d.walk_ns[role][2], rc == 0 ? "ok" : note);
                for (int m = 0; rc == 0 && m < 3; m++)
                    v[role][m][ok] = d.walk_ns[role][m];
            }
            ok += rc == 0;
        }
        say("  %-44s", x->label);
        for (int role = 0; ok && role < 2; role++) {
            double idle = xfer_median(v[role][0], ok), after = xfer_median(v[role][1], ok);
            double cold = xfer_median(v[role][2], ok);
            say("   x%4.2f (%3.0f%%)", after / idle, 100 * (after - idle) / (cold - idle));
        }
        say("  %s\n", ok ? "" : note);
    }
    fclose(csv);
}

/* ---------- meta ---------- */

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

static void cpu_model(char *buf, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    snprintf(buf, len, "unknown");
    while (f && fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && c) {
            snprintf(buf, len, "%s", c + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    }
    if (f)
        fclose(f);
}

static void write_meta(int argc, char **argv, const char *load0, const char *load1)
{
    char path[512], cpu[128];
    snprintf(path, sizeof path, "%s/meta.json", opt.out);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    struct utsname u;
    uname(&u);
    cpu_model(cpu, sizeof cpu);
    struct rlimit rl = { 0, 0 };
    getrlimit(RLIMIT_MSGQUEUE, &rl);
    fprintf(f, "{\n  \"command\": \"");
    for (int i = 0; i < argc; i++)
        fprintf(f, "%s%s", i ? " " : "", argv[i]);
    fprintf(f, "\",\n  \"cpu\": ");
    json_str(f, cpu);
    fprintf(f, ",\n  \"nproc\": %d,\n  \"kernel\": ", (int)sysconf(_SC_NPROCESSORS_ONLN));
    json_str(f, u.release);
    fprintf(f, ",\n  \"llc_bytes\": %zu,\n  \"span_bytes\": %zu,\n  \"reps\": %u,\n", xfer_llc_bytes(),
            opt.span, opt.reps);
    fprintf(f, "  \"load_before\": \"%s\",\n  \"load_after\": \"%s\",\n", load0, load1);
    fprintf(f, "  \"fanout\": %u,\n", opt.fanout);
    const char *lim[] = { "kernel/msgmax", "kernel/msgmnb", "fs/mqueue/msgsize_max", "fs/mqueue/msg_max" };
    for (int i = 0; i < 4; i++) {
        char p[96];
        snprintf(p, sizeof p, "/proc/sys/%s", lim[i]);
        fprintf(f, "  \"%s\": %ld,\n", lim[i], xfer_read_long(p));
    }
    fprintf(f, "  \"rlimit_msgqueue\": %lld,\n  \"copy_choice\": {", (long long)rl.rlim_cur);
    for (int j = 0; j < NSIZES; j++)
        fprintf(f, "%s\"%zu\": \"%s\"", j ? ", " : "", sizes[j], copy_name(copy_choice(sizes[j])));
    fprintf(f, "},\n  \"chunks\": {");
    int first = 1;
    for (int i = 0; xfer_all[i]; i++) {
        if (chosen[i].chunk) {
            fprintf(f, "%s\"%s\": [%zu, %u]", first ? "" : ", ", xfer_all[i]->name, chosen[i].chunk,
                    chosen[i].depth);
            first = 0;
        }
    }
    fprintf(f, "}\n}\n");
    fclose(f);
}

/* ---------- correctness test of one mechanism ---------- */

static int test_pass(const struct xfer *x, struct xfer_opts *o, const size_t *tsizes, const unsigned *iters,
                     unsigned n)
{
    struct xfer_size_result res[8];
    char note[NOTE];
    int rc = xfer_run_sizes(x, o, tsizes, iters, n, res, note, sizeof note);
    printf("%-10s 1->%u chunk %zu depth %u: %s %s\n", x->name, o->ndst ? o->ndst : 1, o->chunk, o->depth,
           rc == 0 ? "ok" : rc == 1 ? "skipped" : "FAIL", rc == 0 ? "" : note);
    for (unsigned j = 0; rc == 0 && j < n; j++)
        printf("  %8zu B x %2u transfers, every byte checked at every destination: %.1f us median\n",
               tsizes[j], res[j].iters, res[j].p50_ns / 1000);
    return rc;
}

static int run_test(const char *name)
{
    const struct xfer *x = xfer_find(name);
    if (!x) {
        fprintf(stderr, "unknown mechanism %s\n", name);
        return 2;
    }
    static const size_t tsizes[] = { 1, 7, 4099, 70001, ((size_t)1 << 20) + 5, (size_t)64 << 20 };
    static const unsigned iters[] = { 20, 20, 20, 20, 10, 3 };
    /* the default geometry, then small chunks in a shallow ring: many chunks
     * per transfer, slots reused within a transfer; then one to 4
     * destinations; a zero-copy mechanism also with 64 MiB messages */
    const size_t chunks[2] = { 0, 4096 };
    /* 64 MiB checked byte by byte at 4 destinations is minutes under TSan: the
     * sanitizer builds (ZIMP_SANITIZER, set by scripts/test.sh) stop at 1 MiB */
    const char *san = getenv("ZIMP_SANITIZER");
    unsigned big = (x->flags & XFER_ZEROCOPY) && !(san && *san) ? 6 : 5;
    int bad = 0, na = 0;
    for (int k = 0; k < ((x->flags & XFER_CHUNKED) ? 2 : 1); k++) {
        struct xfer_opts o = { .chunk = chunks[k], .depth = k ? 2 : 0, .span = (size_t)8 << 20,
                               .full_check = 1, .limit_s = 120 };
        int rc = test_pass(x, &o, tsizes, iters, k ? 5 : big);
        bad |= rc < 0;
        na |= rc == 1;
    }
    if (x->flags & XFER_FANOUT) {
        struct xfer_opts o = { .ndst = 4, .span = (size_t)8 << 20, .full_check = 1, .limit_s = 240 };
        int rc = test_pass(x, &o, tsizes, iters, big);
        bad |= rc < 0;
        na |= rc == 1;
    }
    return bad ? 1 : na ? 77 : 0;
}

/* ---------- main ---------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: zimp_transfer [--out DIR] [--reps R] [--quick] [--mechs a,b]\n"
            "                     [--copy auto|libc|movsb|nt] [--no-tune] [--fanout N]\n"
            "         --fanout N   also one to N destinations (default 4; 0 or 1: not)\n"
            "       zimp_transfer --test MECH    correctness check of one mechanism\n"
            "       zimp_transfer --list\n");
    exit(2);
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(n) (!strcmp(a, n) && v && (i++, 1))
        if (ARG("--out"))
            opt.out = v;
        else if (ARG("--reps"))
            opt.reps = (unsigned)strtoul(v, NULL, 10);
        else if (ARG("--fanout"))
            opt.fanout = (unsigned)strtoul(v, NULL, 10);
        else if (ARG("--mechs"))
            opt.mechs = v;
        else if (ARG("--copy"))
            opt.copy = v;
        else if (ARG("--test"))
            opt.test = v;
        else if (!strcmp(a, "--quick"))
            opt.quick = 1;
        else if (!strcmp(a, "--no-tune"))
            opt.tune = 0;
        else if (!strcmp(a, "--list")) {
            for (int k = 0; xfer_all[k]; k++)
                printf("%-12s %-44s study: %s\n", xfer_all[k]->name, xfer_all[k]->label,
                       xfer_all[k]->study_row);
            exit(0);
        } else
            usage();
#undef ARG
    }
    if (opt.reps < 1 || opt.reps > 16 || opt.fanout > XFER_MAX_DST)
        usage();
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    for (int j = 0; j < NSIZES; j++)
        sizes[j] = (size_t)1 << (2 * j);
    if (opt.test)
        return run_test(opt.test);
    if (!opt.out)
        opt.out = "bench/results/tmp";
    mkdir(opt.out, 0755);
    char path[512], load0[64], load1[64];
    snprintf(path, sizeof path, "%s/table.txt", opt.out);
    opt.table = fopen(path, "w");
    /* buffers reused only after shifting over 4x the last-level cache */
    opt.span = 4 * xfer_llc_bytes();
    load_avg(load0, sizeof load0);
    say("zimp_transfer: load average before %s on %ld cores; LLC %zu MiB; buffers shift over %zu MiB\n",
        load0, sysconf(_SC_NPROCESSORS_ONLN), xfer_llc_bytes() >> 20, opt.span >> 20);
    copy_setup();
    if (opt.tune)
        tune();
    bandwidth();
    bandwidth_report();
    setup_cost();
    disturbance();
    load_avg(load1, sizeof load1);
    say("\nload average after %s\n", load1);
    write_meta(argc, argv, load0, load1);
    if (opt.table)
        fclose(opt.table);
    return 0;
}
