/*
 * zimp_macro: PaxosInside and snapshot macro-benchmarks over every built-in
 * mechanism (see macro.h and docs/macro.md).
 *
 *   zimp_macro test paxos|snapshot MECH   short self-checking run (ctest)
 *   zimp_macro run [--full] [--only paxos|snapshot] [--mechs a,b] [--reps N]
 *                  [--out DIR]            sweep; table on stdout, CSV/JSON in DIR
 * Exit: 0 ok, 1 failure, 77 mechanism not applicable here (test mode).
 */
#define _GNU_SOURCE
#include "macro.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>

#define MAXM 32
#define MAXPTS 64
#define MAXREPS 15

static int sanitized(void)
{
    const char *s = getenv("ZIMP_SANITIZER");
    return s && *s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int test_main(const char *proto, const char *name)
{
    const struct mech *m = mech_find(name);
    if (!m || !macro_mech_usable(m)) {
        fprintf(stderr, "macro: no usable mechanism '%s'\n", name);
        return 1;
    }
    int small = sanitized();
    if (strcmp(proto, "paxos") == 0) {
        size_t sizes[] = { 64, 4096, 70000 };
        for (int i = 0; i < 3; i++) {
            /* Fewer large values: on two crowded CPUs a spinning peer (bmp) moves
             * 70 kB values at tens per second, and the check needs agreement, not volume. */
            uint64_t count = small || sizes[i] > 4096 ? 300 : 2000;
            struct paxos_opts o = { .size = sizes[i], .count = count, .timeout_s = 50 };
            struct paxos_result r;
            int rc = macro_paxos(m, &o, &r);
            if (rc == 1) {
                printf("paxos %s %zu B: n/a (%s)\n", name, sizes[i], r.note);
                continue;
            }
            if (rc != 0) {
                printf("paxos %s %zu B: FAILED: %s\n", name, sizes[i], r.note);
                return 1;
            }
            printf("paxos %s %zu B: %llu values learned identically by %d learners (%.0f/s)\n",
                   name, sizes[i], (unsigned long long)r.learned[0], PAXOS_LEARNERS, r.per_s);
        }
        return 0;
    }
    if (strcmp(proto, "snapshot") == 0) {
        struct { unsigned n; size_t c; } pts[] = { { 2, 4096 }, { 5, 128 }, { 4, 70000 } };
        for (int i = 0; i < 3; i++) {
            struct snap_opts o = { .nodes = pts[i].n, .ckpt = pts[i].c,
                                   .count = small ? 100 : 500, .timeout_s = 50 };
            struct snap_result r;
            int rc = macro_snapshot(m, &o, &r);
            if (rc == 1) {
                printf("snapshot %s n=%u %zu B: n/a (%s)\n", name, o.nodes, o.ckpt, r.note);
                continue;
            }
            if (rc != 0) {
                printf("snapshot %s n=%u %zu B: FAILED: %s\n", name, o.nodes, o.ckpt, r.note);
                return 1;
            }
            printf("snapshot %s n=%u %zu B: %llu complete snapshots, mean %.1f us\n", name,
                   o.nodes, o.ckpt, (unsigned long long)r.done, r.mean_us);
        }
        return 0;
    }
    fprintf(stderr, "macro: unknown protocol '%s'\n", proto);
    return 1;
}

/* ---- sweep ---- */

struct cell {
    int ok, na, reps;
    char note[200];
    double v[MAXREPS], v2[MAXREPS];   /* paxos: per_s; snapshot: mean_us, p99_us */
};

static const struct mech *mechs[MAXM];
static int nmech;

static void parse_mechs(const char *list)
{
    nmech = 0;
    if (!list) {
        for (int i = 0; mech_all[i] && nmech < MAXM; i++)
            if (macro_mech_usable(mech_all[i]))
                mechs[nmech++] = mech_all[i];
        return;
    }
    char *dup = strdup(list), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t && nmech < MAXM; t = strtok_r(NULL, ",", &save)) {
        const struct mech *m = mech_find(t);
        if (!m || !macro_mech_usable(m))
            fprintf(stderr, "macro: skipping unknown or unusable mechanism '%s'\n", t);
        else
            mechs[nmech++] = m;
    }
    free(dup);
}

static double loadavg(void)
{
    double l = NAN;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = NAN;
        fclose(f);
    }
    return l;
}

static int zimp_index(void)
{
    for (int i = 0; i < nmech; i++)
        if (strcmp(mechs[i]->name, "zimp") == 0)
            return i;
    return -1;
}

static void fmt_size(char *b, size_t cap, size_t s)
{
    if (s >= (1u << 20) && s % (1u << 20) == 0)
        snprintf(b, cap, "%zuM", s >> 20);
    else if (s >= 1024 && s % 1024 == 0)
        snprintf(b, cap, "%zuK", s >> 10);
    else
        snprintf(b, cap, "%zu", s);
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "test") == 0)
        return test_main(argv[2], argv[3]);
    if (argc < 2 || strcmp(argv[1], "run") != 0) {
        fprintf(stderr, "usage: %s test paxos|snapshot MECH\n"
                        "       %s run [--full] [--only paxos|snapshot] [--mechs a,b] [--reps N] [--out DIR]\n",
                argv[0], argv[0]);
        return 2;
    }
    int full = 0, reps = 3;
    const char *only = NULL, *mlist = NULL, *out = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--full") == 0)
            full = 1;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--mechs") == 0 && i + 1 < argc)
            mlist = argv[++i];
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else {
            fprintf(stderr, "macro: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (reps < 1 || reps > MAXREPS)
        reps = 3;
    parse_mechs(mlist);
    int cores = mech_nprocs_online();
    double load0 = loadavg();
    struct utsname un;
    uname(&un);
    FILE *csv = NULL, *json = NULL;
    if (out) {
        mkdir(out, 0755);
        char p[4096];
        snprintf(p, sizeof p, "%s/macro.csv", out);
        csv = fopen(p, "w");
        snprintf(p, sizeof p, "%s/macro.json", out);
        json = fopen(p, "w");
        if (!csv || !json) {
            fprintf(stderr, "macro: cannot write in %s\n", out);
            return 1;
        }
        fprintf(csv, "proto,mech,label,size,nodes,oversubscribed,reps_ok,value,value2,unit,rep_values,note\n");
        fprintf(json, "{\n \"mode\": \"%s\", \"cores\": %d, \"kernel\": \"%s\", \"load_start\": %.2f,\n"
                      " \"reps\": %d,\n \"rows\": [\n", full ? "full" : "quick", cores, un.release, load0, reps);
    }
    printf("zimp_macro: %s mode, %d mechanisms, %d repetitions (median), %d cores, load %.2f\n",
           full ? "full" : "quick", nmech, reps, cores, load0);
    int first_row = 1, failures = 0;

    /* ---- PaxosInside: throughput vs request size ---- */
    static const size_t psz_full[] = { 64, 128, 512, 1024, 4096, 10240, 102400, 1048576 };
    static const size_t psz_quick[] = { 64, 1024, 10240 };
    const size_t *psz = full ? psz_full : psz_quick;
    int npsz = full ? 8 : 3;
    if (!only || strcmp(only, "paxos") == 0) {
        static struct cell pc[MAXPTS][MAXM];
        memset(pc, 0, sizeof pc);
        for (int s = 0; s < npsz; s++) {
            uint64_t base = full ? 100000 : 20000;
            uint64_t cap = (full ? (4ull << 30) : (512ull << 20)) / psz[s];
            uint64_t count = base < cap ? base : cap < 1000 ? 1000 : cap;
            for (int rep = 0; rep < reps; rep++)
                for (int mi = 0; mi < nmech; mi++) {   /* interleaved */
                    struct cell *c = &pc[s][mi];
                    if (c->na)
                        continue;
                    struct paxos_opts o = { .size = psz[s], .count = count,
                                           .max_s = full ? 20 : 2, .timeout_s = 120 };
                    struct paxos_result r;
                    int rc = macro_paxos(mechs[mi], &o, &r);
                    if (rc == 1) {
                        c->na = 1;
                        snprintf(c->note, sizeof c->note, "n/a: %s", r.note);
                    } else if (rc != 0) {
                        snprintf(c->note, sizeof c->note, "error: %s", r.note);
                        fprintf(stderr, "macro: paxos %s %zu B: %s\n", mechs[mi]->name, psz[s], r.note);
                        failures++;
                    } else {
                        c->v[c->ok++] = r.per_s;
                    }
                    c->reps++;
                }
            fprintf(stderr, "macro: paxos %zu B done (load %.2f)\n", psz[s], loadavg());
        }
        printf("\nPaxosInside: decided values per second (median of %d), 1 leader, 1 acceptor, %d learners, open loop\n",
               reps, PAXOS_LEARNERS);
        printf("%-16s", "mechanism");
        for (int s = 0; s < npsz; s++) {
            char b[32];
            fmt_size(b, sizeof b, psz[s]);
            printf(" %10s", b);
        }
        printf("\n");
        int zi = zimp_index();
        for (int mi = 0; mi < nmech; mi++) {
            printf("%-16s", mechs[mi]->name);
            for (int s = 0; s < npsz; s++) {
                struct cell *c = &pc[s][mi];
                double med = c->ok ? median(c->v, c->ok) : NAN;
                if (c->ok)
                    printf(" %10.0f", med);
                else
                    printf(" %10s", c->na ? "n/a" : "error");
                if (csv) {
                    char rv[512] = "";
                    for (int k = 0; k < c->ok; k++)
                        snprintf(rv + strlen(rv), sizeof rv - strlen(rv), "%s%.1f", k ? ";" : "", c->v[k]);
                    fprintf(csv, "paxos,%s,\"%s\",%zu,%d,1,%d,%.3f,,decided_per_s,%s,\"%s\"\n", mechs[mi]->name,
                            mechs[mi]->label, psz[s], 6, c->ok, med, rv, c->note);
                    fprintf(json, "%s  {\"proto\": \"paxos\", \"mech\": \"%s\", \"size\": %zu, \"ok\": %d, "
                                  "\"decided_per_s\": %s%.3f%s, \"note\": \"%s\"}",
                            first_row ? "" : ",\n", mechs[mi]->name, psz[s], c->ok, c->ok ? "" : "\"",
                            c->ok ? med : 0.0, c->ok ? "" : "\"", c->note);
                    first_row = 0;
                }
            }
            printf("\n");
        }
        if (zi >= 0) {
            printf("zimp's improvement (%% more decided values per second than each mechanism)\n");
            for (int mi = 0; mi < nmech; mi++) {
                if (mi == zi)
                    continue;
                printf("%-16s", mechs[mi]->name);
                for (int s = 0; s < npsz; s++) {
                    struct cell *a = &pc[s][zi], *b = &pc[s][mi];
                    if (!a->ok || !b->ok) {
                        printf(" %10s", "-");
                        continue;
                    }
                    double za = median(a->v, a->ok), zb = median(b->v, b->ok);
                    printf(" %+9.0f%%", (za / zb - 1) * 100);
                }
                printf("\n");
            }
        }
    }

    /* ---- snapshot: completion time vs nodes and vs checkpoint size ---- */
    if (!only || strcmp(only, "snapshot") == 0) {
        static const unsigned nodes_full[] = { 2, 3, 4, 6, 8, 12, 16, 24, 32 };
        static const unsigned nodes_quick[] = { 2, 4, 8, 16 };
        static const size_t ck_full[] = { 128, 512, 1024, 4096, 10240, 102400, 1048576 };
        static const size_t ck_quick[] = { 128, 4096, 65536 };
        struct { unsigned n; size_t c; } pts[MAXPTS];
        int npts = 0;
        const unsigned *nl = full ? nodes_full : nodes_quick;
        int nn = full ? 9 : 4;
        for (int i = 0; i < nn; i++)
            pts[npts].n = nl[i], pts[npts++].c = 4096;
        const size_t *cl = full ? ck_full : ck_quick;
        int nc = full ? 7 : 3;
        unsigned ckn = full ? 8 : 4;
        for (int i = 0; i < nc; i++)
            if (cl[i] != 4096)   /* (ckn, 4 KiB) is in the node sweep */
                pts[npts].n = ckn, pts[npts++].c = cl[i];
        static struct cell sc[MAXPTS][MAXM];
        memset(sc, 0, sizeof sc);
        for (int p = 0; p < npts; p++) {
            uint64_t base = full ? 10000 : 1000;
            uint64_t cap = (full ? (2ull << 30) : (256ull << 20)) / (pts[p].c * (pts[p].n - 1));
            uint64_t count = base < cap ? base : cap < 200 ? 200 : cap;
            for (int rep = 0; rep < reps; rep++)
                for (int mi = 0; mi < nmech; mi++) {
                    struct cell *c = &sc[p][mi];
                    if (c->na)
                        continue;
                    struct snap_opts o = { .nodes = pts[p].n, .ckpt = pts[p].c, .count = count,
                                           .max_s = full ? 20 : 2, .timeout_s = 120 };
                    struct snap_result r;
                    int rc = macro_snapshot(mechs[mi], &o, &r);
                    if (rc == 1) {
                        c->na = 1;
                        snprintf(c->note, sizeof c->note, "n/a: %s", r.note);
                    } else if (rc != 0) {
                        snprintf(c->note, sizeof c->note, "error: %s", r.note);
                        fprintf(stderr, "macro: snapshot %s n=%u %zu B: %s\n", mechs[mi]->name,
                                pts[p].n, pts[p].c, r.note);
                        failures++;
                    } else {
                        c->v2[c->ok] = r.p99_us;
                        c->v[c->ok++] = r.mean_us;
                    }
                    c->reps++;
                }
            fprintf(stderr, "macro: snapshot n=%u %zu B done (load %.2f)\n", pts[p].n, pts[p].c, loadavg());
        }
        printf("\nSnapshot: completion time, mean / p99 in us (median of %d runs); * = more processes than %d cores\n",
               reps, cores);
        printf("%-16s", "mechanism");
        for (int p = 0; p < npts; p++) {
            char b[32], h[48];
            fmt_size(b, sizeof b, pts[p].c);
            snprintf(h, sizeof h, "n=%u%s,%s", pts[p].n, (int)pts[p].n > cores ? "*" : "", b);
            printf(" %15s", h);
        }
        printf("\n");
        int zi = zimp_index();
        for (int mi = 0; mi < nmech; mi++) {
            printf("%-16s", mechs[mi]->name);
            for (int p = 0; p < npts; p++) {
                struct cell *c = &sc[p][mi];
                double mean = c->ok ? median(c->v, c->ok) : NAN;
                double p99 = c->ok ? median(c->v2, c->ok) : NAN;
                if (c->ok) {
                    char b[32];
                    snprintf(b, sizeof b, "%.1f/%.0f", mean, p99);
                    printf(" %15s", b);
                } else {
                    printf(" %15s", c->na ? "n/a" : "error");
                }
                if (csv) {
                    char rv[512] = "";
                    for (int k = 0; k < c->ok; k++)
                        snprintf(rv + strlen(rv), sizeof rv - strlen(rv), "%s%.2f", k ? ";" : "", c->v[k]);
                    fprintf(csv, "snapshot,%s,\"%s\",%zu,%u,%d,%d,%.3f,%.3f,mean_us/p99_us,%s,\"%s\"\n",
                            mechs[mi]->name, mechs[mi]->label, pts[p].c, pts[p].n,
                            (int)pts[p].n > cores, c->ok, mean, p99, rv, c->note);
                    fprintf(json, "%s  {\"proto\": \"snapshot\", \"mech\": \"%s\", \"size\": %zu, \"nodes\": %u, "
                                  "\"oversubscribed\": %d, \"ok\": %d, \"mean_us\": %.3f, \"p99_us\": %.3f, \"note\": \"%s\"}",
                            first_row ? "" : ",\n", mechs[mi]->name, pts[p].c, pts[p].n,
                            (int)pts[p].n > cores, c->ok, c->ok ? mean : -1.0, c->ok ? p99 : -1.0, c->note);
                    first_row = 0;
                }
            }
            printf("\n");
        }
        if (zi >= 0) {
            printf("zimp's improvement (%% longer mean completion time of each mechanism than zimp's)\n");
            for (int mi = 0; mi < nmech; mi++) {
                if (mi == zi)
                    continue;
                printf("%-16s", mechs[mi]->name);
                for (int p = 0; p < npts; p++) {
                    struct cell *a = &sc[p][zi], *b = &sc[p][mi];
                    if (!a->ok || !b->ok) {
                        printf(" %15s", "-");
                        continue;
                    }
                    printf(" %+14.0f%%", (median(b->v, b->ok) / median(a->v, a->ok) - 1) * 100);
                }
                printf("\n");
            }
        }
    }
    double load1 = loadavg();
    printf("\nload average: %.2f at start, %.2f at end (%d cores)\n", load0, load1, cores);
    if (json) {
        fprintf(json, "\n ],\n \"load_end\": %.2f\n}\n", load1);
        fclose(json);
        fclose(csv);
    }
    return failures ? 1 : 0;
}
