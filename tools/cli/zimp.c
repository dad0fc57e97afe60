/*
 * zimp: see and use the channels and heaps of this machine.
 *
 * One table (commands[]) is the single source of the usage text, of
 * `zimp help COMMAND` and of the man page (`zimp --man`, which the build
 * turns into zimp.1). Uses only the public API of <zimp/zimp.h> and
 * <zimp/trace.h>; `ckpt` and `bench` run the checkpoint meter and the
 * benchmark installed or built next to it.
 * Exit status: 0 success, 1 failure, 2 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zimp/trace.h>
#include <zimp/zimp.h>

#include "common/json_out.h"

#define SHM_DIR "/dev/shm"
#define EXIT_USAGE 2

struct opts {
    bool json, dry_run, create;
    double watch;                  /* stat: refresh period in seconds, 0: once */
    long count;                    /* stat --watch: refreshes; sub: messages (0: no limit) */
    double timeout;                /* sub: seconds without a message before giving up, -1: none */
    char **names;
    int nnames;
};

struct command {
    const char *name, *args, *summary, *details;
    int (*run)(const struct opts *o);
    int min_names, max_names;
};

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

enum kind { KIND_NONE, KIND_CHANNEL, KIND_HEAP };

/*
 * The text for error rc, said of what failed. The library's texts speak of a
 * channel ("no channel of that name"): a heap gets its own, and a file or
 * directory (KIND_NONE: /dev/shm, a trace) the system's.
 */
static const char *reason(int rc, enum kind k)
{
    if (k == KIND_NONE)
        return strerror(-rc);
    if (k == KIND_CHANNEL)
        return zimp_strerror(rc);
    switch (rc) {
    case -EPROTO:       return "heap segment failed validation (corrupted or foreign)";
    case -EEXIST:       return "a heap of that name exists";
    case -ENOENT:       return "no heap of that name";
    case -ENAMETOOLONG: return "heap name too long";
    default:            return zimp_strerror(rc);
    }
}

static int fail(const char *what, int rc, enum kind k)
{
    const char *detail = zimp_last_detail();
    fprintf(stderr, "zimp: %s: %s%s%s\n", what, reason(rc, k), *detail ? ": " : "", detail);
    return EXIT_FAILURE;
}

/* ---- names in JSON and text: tools/common/json_out.h ---- */

#define NAME_TEXT 1100      /* a listed name in text: up to 255 bytes, each at most \xNN */

static void json_str(const char *s) { json_string(stdout, s); }

/* ---- names: channels and heaps ---- */

static const char *prefix_of(enum kind k) { return k == KIND_HEAP ? "zimpheap." : "zimp."; }

/* lstat of the file of channel or heap `name`: 0, or a negative errno. */
static int seg_lstat(enum kind k, const char *name, struct stat *st)
{
    char path[PATH_MAX];
    int w = snprintf(path, sizeof path, "%s/%s%s", SHM_DIR, prefix_of(k), name);
    if (w < 0 || (size_t)w >= sizeof path)
        return -ENAMETOOLONG;
    return lstat(path, st) == 0 ? 0 : -errno;
}

/*
 * What a file that cannot be a segment is ("a directory, not a segment"),
 * NULL for a regular file. The library refuses these too, but its reasons
 * name another problem, and a FIFO would block an older library's open.
 */
static const char *not_segment(const struct stat *st)
{
    mode_t m = st->st_mode;
    return S_ISREG(m)  ? NULL
         : S_ISDIR(m)  ? "a directory, not a segment"
         : S_ISLNK(m)  ? "a symbolic link, not a segment"
         : S_ISFIFO(m) ? "a FIFO, not a segment"
         : S_ISSOCK(m) ? "a socket, not a segment"
                       : "a device, not a segment";
}

/* Whether a channel's or else a heap's file of that name exists (of any type). */
static enum kind kind_of(const char *name)
{
    struct stat st;
    if (seg_lstat(KIND_CHANNEL, name, &st) == 0)
        return KIND_CHANNEL;
    return seg_lstat(KIND_HEAP, name, &st) == 0 ? KIND_HEAP : KIND_NONE;
}

/* What a listed name's info call failed with, said for a listing. */
static const char *list_reason(int rc, enum kind k)
{
    if (rc == -EINVAL)                  /* listed names come from the directory: the name is wrong */
        return "not a zimp name (A-Z a-z 0-9 . _ -, not starting with '.')";
    return reason(rc, k);
}

struct names { char **v; size_t n, cap; };

static int collect(const char *name, void *arg)
{
    struct names *ns = arg;
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? 2 * ns->cap : 16;
        char **v = realloc(ns->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        ns->v = v;
        ns->cap = cap;
    }
    if (!(ns->v[ns->n] = strdup(name)))
        return -ENOMEM;
    ns->n++;
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names of every channel (heaps = false) or heap. */
static int list_names(bool heaps, struct names *ns)
{
    memset(ns, 0, sizeof *ns);
    int rc = heaps ? zimp_heap_list(collect, ns) : zimp_list(collect, ns);
    if (rc == 0 && ns->n)
        qsort(ns->v, ns->n, sizeof *ns->v, by_name);
    return rc;
}

static void free_names(struct names *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    free(ns->v);
}

/* The size of a segment's file; -1 if it is not a regular file (a link's target is not its size). */
static int64_t file_size(enum kind k, const char *name)
{
    struct stat st;
    if (seg_lstat(k, name, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    return (int64_t)st.st_size;
}

/* "12.0 MiB" */
static const char *human(uint64_t b, char *buf, size_t cap)
{
    const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4)
        v /= 1024, u++;
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
    return buf;
}

/* A channel is unused when no live process is a member and its creator has exited. */
static bool channel_unused(const struct zimp_info *in)
{
    return in->senders == 0 && in->receivers == 0 && in->creator_pid == 0;
}

/* ---- ls ---- */

/* The start of a segment's entry in ls --json: kind, name, bytes (null: not a regular file). */
static void json_segment(const char *kind, const char *name, int64_t bytes, bool *first)
{
    printf("%s\n    {\"kind\": \"%s\", \"name\": ", *first ? "" : ",", kind);
    json_str(name);
    if (bytes < 0)
        printf(", \"bytes\": null, ");
    else
        printf(", \"bytes\": %lld, ", (long long)bytes);
    *first = false;
}

/* The BYTES column: "-" for what is not a regular file. */
static const char *human_size(int64_t bytes, char *buf, size_t cap)
{
    return bytes < 0 ? "-" : human((uint64_t)bytes, buf, cap);
}

/* not_segment() of the file of channel or heap `name`; NULL for a regular file or none. */
static const char *odd_file(enum kind k, const char *name)
{
    struct stat st;
    return seg_lstat(k, name, &st) == 0 ? not_segment(&st) : NULL;
}

static void ls_invalid(const char *kind, const char *name, int64_t bytes, const char *why, bool json,
                       bool *first)
{
    char hb[32];
    if (json) {
        json_segment(kind, name, bytes, first);
        printf("\"state\": \"invalid\", \"error\": ");
        json_str(why);
        printf("}");
    } else {
        char tn[NAME_TEXT];
        printf("%-8s %-28s %10s  invalid: %s\n", kind, text_name(name, tn, sizeof tn), human_size(bytes, hb, sizeof hb),
               why);
    }
}

static void ls_channel(const char *name, bool json, bool *first)
{
    struct zimp_info in;
    const char *odd = odd_file(KIND_CHANNEL, name);
    int rc = odd ? -EPROTO : zimp_info(name, &in);      /* opened only if a regular file */
    int64_t bytes = file_size(KIND_CHANNEL, name);
    char hb[32];
    if (rc != 0) {
        ls_invalid("channel", name, bytes, odd ? odd : list_reason(rc, KIND_CHANNEL), json, first);
        return;
    }
    if (json) {
        json_segment("channel", name, bytes, first);
        printf("\"state\": \"%s\", \"slots\": %u, \"slot_size\": %u, \"senders\": %u, "
               "\"max_senders\": %u, \"receivers\": %u, \"max_receivers\": %u, \"published\": %llu, "
               "\"lag\": %llu, \"creator_pid\": %d, \"flags\": %u}",
               channel_unused(&in) ? "unused" : "in use", in.slots, in.slot_size, in.senders,
               in.max_senders, in.receivers, in.max_receivers, (unsigned long long)in.published,
               (unsigned long long)in.lag, in.creator_pid, in.flags);
        return;
    }
    char tn[NAME_TEXT];
    printf("%-8s %-28s %10s  %6u x %-8u %3u/%-3u %4u/%-4u %12llu %8llu  %s\n", "channel", text_name(name, tn, sizeof tn),
           human_size(bytes, hb, sizeof hb), in.slots, in.slot_size, in.senders, in.max_senders, in.receivers,
           in.max_receivers, (unsigned long long)in.published, (unsigned long long)in.lag,
           channel_unused(&in) ? "unused" : "in use");
}

static void ls_heap(const char *name, bool json, bool *first)
{
    struct zimp_heap_stats st;
    const char *odd = odd_file(KIND_HEAP, name);
    int rc = odd ? -EPROTO : zimp_heap_info(name, &st);
    int64_t bytes = file_size(KIND_HEAP, name);
    char hb[32], ub[32];
    if (rc != 0) {
        ls_invalid("heap", name, bytes, odd ? odd : list_reason(rc, KIND_HEAP), json, first);
        return;
    }
    if (json) {
        json_segment("heap", name, bytes, first);
        printf("\"state\": \"%s\", \"size\": %llu, \"used\": %llu, \"blocks\": %llu, \"members\": %u}",
               st.members ? "in use" : "unused", (unsigned long long)st.size, (unsigned long long)st.used,
               (unsigned long long)st.blocks, st.members);
        return;
    }
    char tn[NAME_TEXT];
    printf("%-8s %-28s %10s  %s used in %llu blocks, %u members  %s\n", "heap", text_name(name, tn, sizeof tn),
           human_size(bytes, hb, sizeof hb), human(st.used, ub, sizeof ub), (unsigned long long)st.blocks,
           st.members, st.members ? "in use" : "unused");
}

static int cmd_ls(const struct opts *o)
{
    struct names ch, hp;
    int rc = list_names(false, &ch);
    if (rc == 0)
        rc = list_names(true, &hp);
    if (rc != 0)
        return fail("ls", rc, KIND_NONE);
    struct statvfs vfs;
    uint64_t total = 0, avail = 0, ours = 0;
    if (statvfs(SHM_DIR, &vfs) == 0) {
        total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
        avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    }
    for (size_t i = 0; i < ch.n; i++) {
        int64_t b = file_size(KIND_CHANNEL, ch.v[i]);
        ours += b > 0 ? (uint64_t)b : 0;
    }
    for (size_t i = 0; i < hp.n; i++) {
        int64_t b = file_size(KIND_HEAP, hp.v[i]);
        ours += b > 0 ? (uint64_t)b : 0;
    }
    bool first = true;
    char a[32], b[32], c[32];
    if (o->json) {
        printf("{\"shm\": {\"dir\": \"%s\", \"size\": %llu, \"free\": %llu, \"zimp\": %llu},\n \"segments\": [",
               SHM_DIR, (unsigned long long)total, (unsigned long long)avail, (unsigned long long)ours);
    } else {
        printf("%s: %s, %s free, %s in %zu zimp segment(s)\n", SHM_DIR, human(total, a, sizeof a),
               human(avail, b, sizeof b), human(ours, c, sizeof c), ch.n + hp.n);
        if (ch.n)
            printf("%-8s %-28s %10s  %17s %7s %9s %12s %8s  %s\n", "KIND", "NAME", "BYTES", "SLOTS x SIZE",
                   "SEND", "RECV", "PUBLISHED", "LAG", "STATE");
    }
    for (size_t i = 0; i < ch.n; i++)
        ls_channel(ch.v[i], o->json, &first);
    for (size_t i = 0; i < hp.n; i++)
        ls_heap(hp.v[i], o->json, &first);
    if (o->json)
        printf("\n]}\n");
    free_names(&ch);
    free_names(&hp);
    return 0;
}

/* ---- stat ---- */

static const char *state_name(uint32_t s)
{
    return s == ZIMP_MEMBER_LIVE ? "live" : s == ZIMP_MEMBER_DEAD ? "dead" : "evicted";
}

static int stat_channel(const char *name, const struct opts *o, const struct zimp_info *in, double rate)
{
    struct zimp_member_info mem[256];
    int n = zimp_members(name, mem, sizeof mem / sizeof *mem);
    if (n < 0)
        return fail(name, n, KIND_CHANNEL);
    int shown = n < 256 ? n : 256;
    if (o->json) {                     /* one line: --watch prints JSON Lines */
        char r[32] = "null";           /* no rate before the second refresh */
        if (isfinite(rate))
            snprintf(r, sizeof r, "%.1f", rate);
        printf("{\"kind\": \"channel\", \"name\": ");
        json_str(name);
        printf(", \"slots\": %u, \"slot_size\": %u, \"published\": %llu, \"lag\": %llu, \"rate\": %s, "
               "\"members\": [", in->slots, in->slot_size, (unsigned long long)in->published,
               (unsigned long long)in->lag, r);
        for (int i = 0; i < shown; i++) {
            bool none = mem[i].position == UINT64_MAX;
            printf("%s{\"role\": \"%s\", \"index\": %u, \"pid\": %d, \"state\": \"%s\", "
                   "\"lossy\": %s, \"missed\": %llu, \"sleeps\": %llu, \"wakeups\": %llu, \"position\": ",
                   i ? ", " : "", mem[i].role == ZIMP_MEMBER_SENDER ? "sender" : "receiver", mem[i].index,
                   mem[i].pid, state_name(mem[i].state), (mem[i].flags & ZIMP_MEMBER_LOSSY) ? "true" : "false",
                   (unsigned long long)mem[i].missed, (unsigned long long)mem[i].sleeps,
                   (unsigned long long)mem[i].wakeups);
            if (none)
                printf("null}");
            else
                printf("%llu}", (unsigned long long)mem[i].position);
        }
        printf("]}\n");
        return 0;
    }
    char tn[NAME_TEXT];
    printf("channel %s: %u slots of %u B, %llu published, slowest live receiver %llu behind",
           text_name(name, tn, sizeof tn), in->slots, in->slot_size, (unsigned long long)in->published, (unsigned long long)in->lag);
    if (isfinite(rate))
        printf(", %.0f messages/s", rate);
    printf("\n%-9s %5s %8s %-8s %12s %8s %8s %10s %10s\n", "ROLE", "INDEX", "PID", "STATE", "POSITION",
           "BEHIND", "MISSED", "SLEEPS", "WAKEUPS");
    for (int i = 0; i < shown; i++) {
        const struct zimp_member_info *m = &mem[i];
        char pos[24] = "-", behind[24] = "-", missed[24] = "-";
        if (m->flags & ZIMP_MEMBER_LOSSY)
            snprintf(missed, sizeof missed, "%llu", (unsigned long long)m->missed);
        if (m->position != UINT64_MAX)
            snprintf(pos, sizeof pos, "%llu", (unsigned long long)m->position);
        if (m->role == ZIMP_MEMBER_RECEIVER && m->position <= in->published)
            snprintf(behind, sizeof behind, "%llu", (unsigned long long)(in->published - m->position));
        char wakeups[24] = "-";
        if (m->role == ZIMP_MEMBER_RECEIVER)
            snprintf(wakeups, sizeof wakeups, "%llu", (unsigned long long)m->wakeups);
        printf("%-9s %5u %8d %-8s %12s %8s %8s %10llu %10s\n",
               m->role == ZIMP_MEMBER_SENDER ? "sender" : (m->flags & ZIMP_MEMBER_LOSSY) ? "lossy" : "receiver",
               m->index, m->pid, state_name(m->state), pos, behind, missed, (unsigned long long)m->sleeps,
               wakeups);
    }
    if (n > shown)
        printf("(%d more)\n", n - shown);
    return 0;
}

static int stat_heap(const char *name, const struct opts *o)
{
    struct zimp_heap_stats st;
    int rc = zimp_heap_info(name, &st);
    char tn[NAME_TEXT];
    if (rc != 0)
        return fail(text_name(name, tn, sizeof tn), rc, KIND_HEAP);
    char a[32], b[32];
    if (o->json) {
        printf("{\"kind\": \"heap\", \"name\": ");
        json_str(name);
        printf(", \"size\": %llu, \"used\": %llu, \"blocks\": %llu, \"members\": %u, \"unit\": %u}\n",
               (unsigned long long)st.size, (unsigned long long)st.used, (unsigned long long)st.blocks,
               st.members, st.unit);
    } else {
        printf("heap %s: %s, %s used in %llu blocks, %u live members, unit %u B\n", text_name(name, tn, sizeof tn),
               human(st.size, a, sizeof a), human(st.used, b, sizeof b), (unsigned long long)st.blocks,
               st.members, st.unit);
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The inode of a channel's file, 0 if none: another one is another channel under the same name. */
static ino_t file_id(const char *name)
{
    struct stat st;
    return seg_lstat(KIND_CHANNEL, name, &st) == 0 ? st.st_ino : 0;
}

static int cmd_stat(const struct opts *o)
{
    const char *name = o->names[0];
    char shown[NAME_TEXT];                  /* the name as it may be printed */
    text_name(name, shown, sizeof shown);
    enum kind k = kind_of(name);
    if (k == KIND_NONE) {
        fprintf(stderr, "zimp: stat: no channel or heap '%s'\n", shown);
        return EXIT_FAILURE;
    }
    const char *odd = odd_file(k, name);
    if (odd) {
        fprintf(stderr, "zimp: stat: %s/%s%s: %s\n", SHM_DIR, prefix_of(k), shown, odd);
        return EXIT_FAILURE;
    }
    double t0 = now_s();
    uint64_t p0 = 0;
    ino_t id0 = 0;
    for (long i = 0; !stop; i++) {
        int rc;
        if (k == KIND_HEAP) {
            rc = stat_heap(name, o);
        } else {
            struct zimp_info in;
            ino_t id = file_id(name);
            if ((rc = zimp_info(name, &in)) != 0)
                return fail(shown, rc, KIND_CHANNEL);
            double t = now_s();
            /* A channel removed and made again meanwhile starts its rate over:
             * another file, or a count that went backwards. */
            bool same = i > 0 && id == id0 && in.published >= p0;
            double rate = same ? (double)(in.published - p0) / (t - t0) : NAN;
            rc = stat_channel(name, o, &in, rate);
            p0 = in.published;
            id0 = id;
            t0 = t;
        }
        if (rc != 0 || o->watch <= 0 || (o->count && i + 1 >= o->count))
            return rc;
        fflush(stdout);
        struct timespec ts = { (time_t)o->watch, (long)((o->watch - floor(o->watch)) * 1e9) };
        if (nanosleep(&ts, NULL) != 0 && errno != EINTR) {
            fprintf(stderr, "zimp: stat --watch: %s\n", strerror(errno));
            return EXIT_FAILURE;
        }
        if (!o->json)
            printf("\n");
    }
    return 0;
}

/* ---- rm, gc ---- */

/* A name that can only mean a file in /dev/shm: not empty, no '/', not "." or "..". */
static bool plain_name(const char *name)
{
    return *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

/* Unlinks /dev/shm/PREFIXNAME itself: 0 or a negative errno. */
static int unlink_file(enum kind k, const char *name)
{
    char path[PATH_MAX];
    int w = snprintf(path, sizeof path, "%s/%s%s", SHM_DIR, prefix_of(k), name);
    if (w < 0 || (size_t)w >= sizeof path)
        return -ENAMETOOLONG;
    return unlink(path) == 0 ? 0 : -errno;
}

/*
 * Unlinks channel or heap `name` whatever its file is: a segment through the
 * library, a file the library does not open (not a regular file, or a name it
 * refuses) directly. Never a directory.
 */
static int rm_one(const char *name)
{
    if (!plain_name(name)) {
        fprintf(stderr, "zimp: rm: '%s' is not a name (empty, '.', '..' or with a '/')\n", name);
        return EXIT_FAILURE;
    }
    enum kind k = kind_of(name);
    struct stat st;
    if (k == KIND_NONE || seg_lstat(k, name, &st) != 0) {
        fprintf(stderr, "zimp: rm: no channel or heap '%s'\n", name);
        return EXIT_FAILURE;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "zimp: rm: %s/%s%s: %s: zimp removes no directories\n", SHM_DIR, prefix_of(k), name,
                not_segment(&st));
        return EXIT_FAILURE;
    }
    int rc = -EINVAL;
    if (S_ISREG(st.st_mode))
        rc = k == KIND_CHANNEL ? zimp_unlink(name) : zimp_heap_unlink(name);
    if (rc == -EINVAL || rc == -ENAMETOOLONG) {
        if ((rc = unlink_file(k, name)) != 0) {
            fprintf(stderr, "zimp: rm: %s/%s%s: %s\n", SHM_DIR, prefix_of(k), name, strerror(-rc));
            return EXIT_FAILURE;
        }
    }
    return rc == 0 ? 0 : fail(name, rc, k);
}

static int cmd_rm(const struct opts *o)
{
    int status = 0;
    for (int i = 0; i < o->nnames; i++)
        if (rm_one(o->names[i]) != 0)
            status = EXIT_FAILURE;
    return status;
}

/*
 * Why gc leaves a listed segment alone although it may be garbage: not a
 * regular file, or a name the library refuses (zimp rm removes them). NULL if
 * gc judges it; then *unused says whether gc removes it.
 */
static const char *gc_skip(enum kind k, const char *name, bool *unused)
{
    struct stat st;
    *unused = false;
    if (seg_lstat(k, name, &st) != 0)
        return NULL;                    /* gone meanwhile */
    if (!S_ISREG(st.st_mode))
        return not_segment(&st);
    int r;
    if (k == KIND_HEAP) {
        struct zimp_heap_stats hs;
        r = zimp_heap_info(name, &hs);
        *unused = r == -EPROTO || (r == 0 && hs.members == 0);
    } else {
        struct zimp_info in;
        r = zimp_info(name, &in);
        *unused = r == -EPROTO || (r == 0 && channel_unused(&in));
    }
    return r == -EINVAL || r == -ENAMETOOLONG ? list_reason(r, k) : NULL;
}

static int cmd_gc(const struct opts *o)
{
    struct names ch, hp;
    int rc = list_names(false, &ch);
    if (rc == 0)
        rc = list_names(true, &hp);
    if (rc != 0)
        return fail("gc", rc, KIND_NONE);
    int removed = 0, status = 0;
    bool first = true;
    const char **skip = calloc(ch.n + hp.n + 1, sizeof *skip);   /* why gc leaves each alone, or NULL */
    if (!skip)
        return fail("gc", -ENOMEM, KIND_NONE);
    for (int k = 0; k < o->nnames; k++)
        if (kind_of(o->names[k]) == KIND_NONE) {
            fprintf(stderr, "zimp: gc: no channel or heap '%s'\n", o->names[k]);
            status = EXIT_FAILURE;
        }
    if (o->json)
        printf("{\"dry_run\": %s, \"removed\": [", o->dry_run ? "true" : "false");
    for (int heaps = 0; heaps < 2; heaps++) {
        struct names *ns = heaps ? &hp : &ch;
        for (size_t i = 0; i < ns->n; i++) {
            const char *name = ns->v[i];
            bool unused, named = !o->nnames;
            for (int k = 0; k < o->nnames; k++)
                named |= !strcmp(o->names[k], name);
            if (!named)
                continue;
            size_t at = heaps ? ch.n + i : i;
            skip[at] = gc_skip(heaps ? KIND_HEAP : KIND_CHANNEL, name, &unused);
            if (skip[at] || !unused)
                continue;
            if (!o->dry_run) {         /* the library checks again, at the last moment */
                int r = heaps ? zimp_heap_gc(name) : zimp_reap(name);
                if (r < 0) {
                    status = fail(name, r, heaps ? KIND_HEAP : KIND_CHANNEL);
                    continue;
                }
                if (r == 0)
                    continue;           /* a process joined meanwhile */
            }
            removed++;
            if (o->json) {
                printf("%s\n    {\"kind\": \"%s\", \"name\": ", first ? "" : ",", heaps ? "heap" : "channel");
                json_str(name);
                printf("}");
            } else {
                char tn[NAME_TEXT];
                printf("%s %s %s\n", o->dry_run ? "would remove" : "removed", heaps ? "heap" : "channel",
                       text_name(name, tn, sizeof tn));
            }
            first = false;
        }
    }
    /* What gc leaves alone, the same with --dry-run or without. */
    int skipped = 0;
    if (o->json)
        printf("\n], \"skipped\": [");
    for (size_t i = 0; i < ch.n + hp.n; i++) {
        if (!skip[i])
            continue;
        const char *kind = i < ch.n ? "channel" : "heap", *name = i < ch.n ? ch.v[i] : hp.v[i - ch.n];
        if (o->json) {
            printf("%s\n    {\"kind\": \"%s\", \"name\": ", skipped ? "," : "", kind);
            json_str(name);
            printf(", \"reason\": ");
            json_str(skip[i]);
            printf("}");
        } else {
            char tn[NAME_TEXT];
            printf("skipped %s %s: %s\n", kind, text_name(name, tn, sizeof tn), skip[i]);
        }
        skipped++;
    }
    if (o->json)
        printf("\n]}\n");
    else if (!removed && !skipped && status == 0)
        printf("nothing to remove: every channel and heap is in use\n");
    free(skip);
    free_names(&ch);
    free_names(&hp);
    return status;
}

/* ---- pub, sub ---- */

static int ensure_channel(const char *name, bool create)
{
    if (!create || kind_of(name) == KIND_CHANNEL)
        return 0;
    int rc = zimp_create(name, NULL);
    return rc == -EEXIST ? 0 : rc;
}

static int cmd_pub(const struct opts *o)
{
    const char *name = o->names[0];
    zimp_sender *s;
    int rc = ensure_channel(name, o->create);
    if (rc == 0)
        rc = zimp_sender_open(name, &s);
    if (rc != 0)
        return fail(name, rc, KIND_CHANNEL);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int status = 0;
    while (!stop && (n = getline(&line, &cap, stdin)) >= 0) {
        if (n > 0 && line[n - 1] == '\n')
            n--;
        if ((rc = zimp_send(s, line, (size_t)n, -1)) != 0) {
            status = fail("send", rc, KIND_CHANNEL);
            break;
        }
    }
    free(line);
    zimp_sender_close(s);
    return status;
}

static int cmd_sub(const struct opts *o)
{
    const char *name = o->names[0];
    zimp_receiver *r;
    int rc = ensure_channel(name, o->create);
    if (rc == 0)
        rc = zimp_receiver_open(name, &r);
    if (rc != 0)
        return fail(name, rc, KIND_CHANNEL);
    int64_t timeout = o->timeout < 0 ? -1 : (int64_t)(o->timeout * 1e9);
    int status = 0;
    for (long got = 0; !stop && (!o->count || got < o->count); got++) {
        const void *msg;
        size_t len;
        /* wait in slices so that Ctrl-C ends the wait */
        int64_t left = timeout;
        do {
            int64_t slice = left < 0 || left > 200000000 ? 200000000 : left;
            rc = zimp_read(r, &msg, &len, slice);
            if (left >= 0)
                left -= slice;
        } while (rc == -ETIMEDOUT && !stop && left != 0);
        if (rc == -EPIPE)              /* every sender left: the stream ended */
            break;
        if (rc != 0) {
            bool none = rc == -ETIMEDOUT || rc == -EAGAIN;   /* -EAGAIN: --timeout 0 */
            if (!stop)
                status = none ? (fprintf(stderr, "zimp: sub: no message in %g s\n", o->timeout), EXIT_FAILURE)
                              : fail("receive", rc, KIND_CHANNEL);
            break;
        }
        fwrite(msg, 1, len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        zimp_release(r);
    }
    zimp_receiver_close(r);
    return status;
}

/* ---- trace, ckpt, bench ---- */

/* Runs argv[0] (PATH searched) and waits: its exit status, 128 + signal, or -1 if it could not start. */
static int run_program(char **argv)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        execvp(argv[0], argv);
        fprintf(stderr, "zimp: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    struct sigaction ign = { .sa_handler = SIG_IGN }, oldi, oldt;
    sigaction(SIGINT, &ign, &oldi);        /* Ctrl-C is for the child; we report after it */
    sigaction(SIGTERM, &ign, &oldt);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    sigaction(SIGINT, &oldi, NULL);
    sigaction(SIGTERM, &oldt, NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A program installed next to this one, or in the build tree beside it (rel), or found on PATH. */
static const char *find_program(const char *name, const char *rel, char *buf, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        const char *cand[] = { "", rel };
        for (int i = 0; i < 2; i++) {
            snprintf(buf, cap, "%s/%s%s", self, cand[i], name);
            if (access(buf, X_OK) == 0)
                return buf;
        }
    }
    return name;                    /* execvp searches PATH */
}

static int exec_tool(const char *name, const char *rel, const char *first, const struct opts *o,
                     const char *missing)
{
    char buf[PATH_MAX + 64];
    const char *prog = find_program(name, rel, buf, sizeof buf);
    char **argv = calloc((size_t)o->nnames + 3, sizeof *argv);
    if (!argv)
        return fail(name, -ENOMEM, KIND_NONE);
    int k = 0;
    argv[k++] = (char *)prog;
    if (first)
        argv[k++] = (char *)first;
    for (int i = 0; i < o->nnames; i++)
        argv[k++] = o->names[i];
    if (prog == name) {                 /* not beside us: is it on PATH? */
        const char *path = getenv("PATH");
        bool found = false;
        for (const char *p = path; p && *p && !found;) {
            size_t len = strcspn(p, ":");
            snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, name);
            found = access(buf, X_OK) == 0;
            p += len + (p[len] == ':');
        }
        if (!found) {
            fprintf(stderr, "zimp: %s is not installed here (%s)\n", name, missing);
            free(argv);
            return EXIT_FAILURE;
        }
    }
    int rc = run_program(argv);
    free(argv);
    return rc < 0 ? EXIT_FAILURE : rc;
}

static int cmd_ckpt(const struct opts *o)
{
    return exec_tool("zimp-ckpt", "../ckpt/", NULL, o, "it is built with libzstd-dev and liblz4-dev");
}

static int cmd_bench(const struct opts *o)
{
    return exec_tool("zimp_bench", "../../bench/", "--quick", o,
                     "build the source tree's benchmark, or run ./scripts/bench.sh there");
}

static int trace_usage(void)
{
    fprintf(stderr, "usage: zimp trace record [--level LEVEL] [--out DIR] [--lttng] [--] COMMAND [ARG...]\n"
                    "       zimp trace export PATH [--out FILE]\n"
                    "       zimp trace show PATH\n"
                    "       zimp trace merge PATH --out DIR\n");
    return EXIT_USAGE;
}

static int trace_record(const struct opts *o, int at)
{
    const char *level = "debug", *dir = "zimp-trace";
    bool lttng = false;
    for (; at < o->nnames; at++) {
        const char *a = o->names[at];
        if (!strcmp(a, "--")) {
            at++;
            break;
        } else if ((!strcmp(a, "--level") || !strcmp(a, "-l")) && at + 1 < o->nnames)
            level = o->names[++at];
        else if ((!strcmp(a, "--out") || !strcmp(a, "-o")) && at + 1 < o->nnames)
            dir = o->names[++at];
        else if (!strcmp(a, "--lttng"))
            lttng = true;
        else if (a[0] == '-') {
            fprintf(stderr, "zimp trace record: unknown option or missing value: '%s'\n", a);
            return trace_usage();
        } else
            break;
    }
    if (at >= o->nnames)
        return trace_usage();
    if (zimp_trace_level_of(level) <= 0) {
        fprintf(stderr, "zimp trace record: level '%s' is not error, info, debug or test\n", level);
        return EXIT_USAGE;
    }
    /* ZIMP_TRACE splits its options at commas and has no escape: a ',' in
     * the path would cut it and make the rest options. */
    char cwd[PATH_MAX] = "";
    if (dir[0] != '/' && !getcwd(cwd, sizeof cwd))
        cwd[0] = '\0';
    if (strchr(dir, ',') || strchr(cwd, ',')) {
        fprintf(stderr, "zimp trace record: %s%s%s has a ',', which ZIMP_TRACE cannot carry "
                        "(give --out a path without one)\n", cwd, *cwd ? "/" : "", dir);
        return EXIT_USAGE;
    }
    struct stat st;
    if (stat(dir, &st) == 0) {
        fprintf(stderr, "zimp trace record: %s exists (remove it, or give --out a new directory)\n", dir);
        return EXIT_FAILURE;
    }
    if (mkdir(dir, 0777) != 0) {
        fprintf(stderr, "zimp trace record: cannot create %s: %s\n", dir, strerror(errno));
        return EXIT_FAILURE;
    }
    char abs[PATH_MAX], env[PATH_MAX + 64];
    if (!realpath(dir, abs)) {
        fprintf(stderr, "zimp trace record: %s: %s\n", dir, strerror(errno));
        return EXIT_FAILURE;
    }
    if (strchr(abs, ',')) {             /* through a symbolic link */
        fprintf(stderr, "zimp trace record: %s is %s, with a ',', which ZIMP_TRACE cannot carry "
                        "(give --out a path without one)\n", dir, abs);
        rmdir(dir);
        return EXIT_USAGE;
    }
    snprintf(env, sizeof env, "%s,file=%s%s", level, abs, lttng ? ",lttng=1" : "");
    setenv("ZIMP_TRACE", env, 1);
    int rc = run_program(&o->names[at]);
    unsetenv("ZIMP_TRACE");
    if (rc < 0) {
        fprintf(stderr, "zimp trace record: cannot start %s: %s\n", o->names[at], strerror(errno));
        return EXIT_FAILURE;
    }
    FILE *null = fopen("/dev/null", "w");
    int n = null ? zimp_trace_export(dir, null, ZIMP_TRACE_TEXT) : -ENOMEM;
    if (null)
        fclose(null);
    if (rc > 128)
        fprintf(stderr, "zimp trace record: %s was killed by signal %d: what it had not flushed is lost\n",
                o->names[at], rc - 128);
    if (n >= 0 && *zimp_last_detail())     /* archives it could not read (cut short by a kill) */
        fprintf(stderr, "zimp trace record: %s\n", zimp_last_detail());
    if (n >= 0)
        fprintf(stderr, "zimp trace record: %d events in %s (zimp trace show %s)\n", n, dir, dir);
    else if (n == -ENOENT)
        fprintf(stderr, "zimp trace record: no events in %s (does %s use libzimp?)\n", dir, o->names[at]);
    else
        fail("trace record", n, KIND_NONE);
    return rc;
}

/* Says what a failed show, export or merge of path (into out) got wrong. */
static int trace_fail(const char *verb, const char *path, const char *out, int rc)
{
    struct stat st;
    if (rc == -EEXIST && out)
        fprintf(stderr, "zimp trace %s: %s exists (merge writes a new directory: give --out one that "
                        "does not exist)\n", verb, out);
    else if (rc == -ENOENT && stat(path, &st) != 0)
        fprintf(stderr, "zimp trace %s: %s: %s\n", verb, path, strerror(errno));
    else if (rc == -ENOENT)
        fprintf(stderr, "zimp trace %s: no trace archive (traces.otf2) at or below %s\n", verb, path);
    else
        return fail(path, rc, KIND_NONE);
    return EXIT_FAILURE;
}

static int cmd_trace(const struct opts *o)
{
    if (o->nnames < 1)
        return trace_usage();
    const char *verb = o->names[0];
    if (!strcmp(verb, "record"))
        return trace_record(o, 1);
    const char *path = NULL, *out = NULL;
    for (int i = 1; i < o->nnames; i++) {
        const char *a = o->names[i];
        if ((!strcmp(a, "--out") || !strcmp(a, "-o")) && i + 1 < o->nnames)
            out = o->names[++i];
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "zimp trace %s: unknown option or missing value: '%s'\n", verb, a);
            return trace_usage();
        } else if (!path)
            path = a;
        else
            return trace_usage();
    }
    if (!path)
        return trace_usage();
    int rc;
    if (!strcmp(verb, "merge")) {
        if (!out)
            return trace_usage();
        rc = zimp_trace_merge(path, out);
        if (rc >= 0)
            fprintf(stderr, "zimp trace merge: %d events in %s/traces.otf2\n", rc, out);
    } else if (!strcmp(verb, "export") || !strcmp(verb, "show")) {
        if (!strcmp(verb, "show") && out)
            return trace_usage();
        FILE *f = out && strcmp(out, "-") ? fopen(out, "w") : stdout;
        if (!f) {
            fprintf(stderr, "zimp trace export: cannot write %s: %s\n", out, strerror(errno));
            return EXIT_FAILURE;
        }
        rc = zimp_trace_export(path, f, !strcmp(verb, "show") ? ZIMP_TRACE_TEXT : ZIMP_TRACE_JSON);
        if (f != stdout && fclose(f) != 0 && rc >= 0)
            rc = -errno;
    } else {
        fprintf(stderr, "zimp trace: no subcommand '%s' (record, export, show, merge)\n", verb);
        return EXIT_USAGE;
    }
    if (rc >= 0 && *zimp_last_detail())    /* archives it skipped: docs/tracing.md */
        fprintf(stderr, "zimp trace %s: warning: %s\n", verb, zimp_last_detail());
    return rc < 0 ? trace_fail(verb, path, !strcmp(verb, "merge") ? out : NULL, rc) : 0;
}

/* ---- the command table: usage, help and man page ---- */

static int cmd_help(const struct opts *o);

static const struct command commands[] = {
    { "ls", "[--json]", "list channels and heaps, and the room in " SHM_DIR,
      "Lists every channel and heap of this machine: its size, geometry, live members out of the "
      "table's size, messages published, how far the slowest live receiver is behind, and whether a "
      "live process uses it. The first line says how big " SHM_DIR " is, how much is free, and how "
      "much zimp segments take.", cmd_ls, 0, 0 },
    { "stat", "NAME [--json] [--watch SECONDS [--count N]]", "show one channel's members, or one heap",
      "For a channel: every member with its pid, whether it is live, dead or evicted, its position "
      "and how far behind it is. With --watch, refreshes every SECONDS (0.01 to 604800) and shows "
      "messages published per second (N refreshes, or until interrupted); with --json, one JSON "
      "document per line and refresh. For a heap: size, use, blocks, members.",
      cmd_stat, 1, 1 },
    { "rm", "NAME...", "remove channels or heaps",
      "Unlinks each named channel or heap, whatever its file is (also one that is not a valid "
      "segment, not a regular file, or has a name the library refuses), but no directory. Processes "
      "that have it open keep using it; new ones cannot open it.", cmd_rm, 1, 1 << 20 },
    { "gc", "[--dry-run] [--json] [NAME...]", "remove what no live process uses",
      "Removes every channel and heap (or only those named) that no live process is a member of (a "
      "channel also waits for its creator to exit), and regular files that are not valid zimp segments. "
      "Never removes one a live process uses. Skips, and lists, what is not a regular file or has a "
      "name the library refuses (zimp rm removes those but directories). --dry-run only lists them.",
      cmd_gc, 0, 1 << 20 },
    { "pub", "NAME [--create]", "send each line of standard input as a message",
      "Opens NAME as a sender (--create makes it first, with default geometry, if missing) and sends "
      "each line of standard input, without its newline, as one message; waits while receivers are "
      "full. Ends at end of input.", cmd_pub, 1, 1 },
    { "sub", "NAME [--create] [--count N] [--timeout SECONDS]", "print each message as a line",
      "Opens NAME as a receiver and prints every message published from then on, one per line. "
      "Ends after N messages (0: no limit), when every sender has left (after at least one had opened), "
      "or, with --timeout, after SECONDS (0 to 604800) without a message (exit status 1); without "
      "--timeout it waits as long as it takes.", cmd_sub, 1, 1 },
    { "trace", "record|export|show|merge ...", "record a traced run; show or export its trace",
      "zimp trace record [--level LEVEL] [--out DIR] [--lttng] [--] COMMAND [ARG...] runs COMMAND with "
      "zimp tracing on at LEVEL (error, info, debug (the default) or test) into DIR (default zimp-trace, "
      "which must not exist, and whose path must have no comma), waits for it, says how many events "
      "were recorded and exits with its status; a COMMAND killed meanwhile leaves every archive up to "
      "its last flush. --lttng also fires the LTTng-UST tracepoints. zimp trace show PATH prints the "
      "events of every OTF2 archive under PATH in time order; zimp trace export PATH [--out FILE] "
      "writes them as Chrome/Perfetto trace-event JSON (ui.perfetto.dev, chrome://tracing); zimp trace "
      "merge PATH --out DIR writes them into one OTF2 archive (Vampir, "
      "otf2-print). See docs/tracing.md.", cmd_trace, 0, 1 << 20 },
    { "ckpt", "[ARG...]", "measure a process's checkpoint size (zimp-ckpt)",
      "Runs the checkpoint-size meter zimp-ckpt with ARGs (zimp ckpt --help lists them): how large a "
      "checkpoint of a process would be with and without zero-page detection and compression "
      "(docs/zerofree.md).", cmd_ckpt, 0, 1 << 20 },
    { "bench", "[ARG...]", "run the quick benchmark (zimp_bench --quick)",
      "Runs the benchmark in its quick mode (zimp_bench --quick ARG...): latency and throughput of zimp "
      "and the other mechanisms, results under bench/results/ unless --out DIR says otherwise. The full "
      "suite with plots is ./scripts/bench.sh in the source tree (docs/benchmarks.md).",
      cmd_bench, 0, 1 << 20 },
    { "help", "[COMMAND]", "show this help, or one command's", NULL, cmd_help, 0, 1 },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: zimp COMMAND [OPTIONS]\n\nCommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-5s %-44s %s\n", commands[i].name, commands[i].args, commands[i].summary);
    fprintf(f, "\n  zimp --version | --man\n\nExit status: 0 success, 1 failure, 2 usage error.\n");
}

static int cmd_help(const struct opts *o)
{
    if (!o->nnames) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, o->names[0])) {
            printf("usage: zimp %s %s\n\n%s.\n", commands[i].name, commands[i].args, commands[i].summary);
            if (commands[i].details)
                printf("\n%s\n", commands[i].details);
            return 0;
        }
    fprintf(stderr, "zimp: help: no command '%s'\n", o->names[0]);
    return EXIT_USAGE;
}

/* roff: a leading dot or quote would be a request; backslashes are escapes. */
static void roff(const char *s)
{
    if (*s == '.' || *s == '\'')
        fputs("\\&", stdout);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", stdout);
        else if (*s == '-')
            fputs("\\-", stdout);
        else
            putchar(*s);
    }
}

static void man(void)
{
    printf(".TH ZIMP 1 \"\" \"zimp\" \"User Commands\"\n.SH NAME\nzimp \\- see and use zimp channels and heaps\n"
           ".SH SYNOPSIS\n.B zimp\n.I COMMAND\n[\\fIOPTIONS\\fR]\n.SH DESCRIPTION\n");
    roff("zimp channels carry messages from senders to every receiver through shared memory in " SHM_DIR
         "; heaps hold blocks passed between processes as handles. This tool lists, inspects, cleans up "
         "and uses them.");
    printf("\n.SH COMMANDS\n");
    for (size_t i = 0; i < NCOMMANDS; i++) {
        printf(".TP\n.B zimp %s ", commands[i].name);
        roff(commands[i].args);
        printf("\n");
        roff(commands[i].details ? commands[i].details : commands[i].summary);
        printf("\n");
    }
    printf(".SH EXIT STATUS\n0 on success, 1 on failure, 2 on a usage error.\n"
           ".SH FILES\n.I " SHM_DIR "/zimp.NAME\nchannels;\n.I " SHM_DIR "/zimpheap.NAME\nheaps.\n");
}

/* Numeric options: what they accept, said in the message that refuses a value. */
#define WATCH_MIN   0.01                /* --watch: at most 100 refreshes a second */
#define SECONDS_MAX 604800.0            /* --watch, --timeout: at most a week */
#define WATCH_RANGE   "0.01 to 604800 seconds"
#define TIMEOUT_RANGE "0 to 604800 seconds"
#define COUNT_RANGE   "a whole number from 0 (no limit) to 9223372036854775807"

/*
 * Plain decimal digits, with one '.' if fraction: no sign, exponent, space,
 * inf or nan, and not empty. The value must lie in [lo, hi].
 */
static bool parse_number(const char *s, bool fraction, double lo, double hi, double *out)
{
    size_t digits = strspn(s, "0123456789");
    const char *p = s + digits;
    if (fraction && *p == '.') {
        size_t more = strspn(p + 1, "0123456789");
        digits += more;
        p += 1 + more;
    }
    if (*p || !digits)
        return false;
    errno = 0;
    double v = strtod(s, NULL);
    if (errno == ERANGE || !isfinite(v) || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_count(const char *s, long *out)
{
    if (!*s || s[strspn(s, "0123456789")])
        return false;
    errno = 0;
    long v = strtol(s, NULL, 10);
    if (errno == ERANGE)
        return false;
    *out = v;
    return true;
}

static int parse(int argc, char **argv, const struct command *c, struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->timeout = -1;
    o->names = calloc((size_t)argc + 1, sizeof *o->names);
    if (!o->names)
        return -1;
    /* trace, ckpt and bench take their arguments as they are (they pass them on). */
    if (c->run == cmd_trace || c->run == cmd_ckpt || c->run == cmd_bench) {
        for (int i = 2; i < argc; i++)
            o->names[o->nnames++] = argv[i];
        return 0;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        const char *range = NULL;       /* set when a numeric option's value is refused */
        if (!strcmp(a, "--json"))
            o->json = true;
        else if (!strcmp(a, "--dry-run"))
            o->dry_run = true;
        else if (!strcmp(a, "--create"))
            o->create = true;
        else if (!strcmp(a, "--watch") && has)
            range = parse_number(argv[++i], true, WATCH_MIN, SECONDS_MAX, &o->watch) ? NULL : WATCH_RANGE;
        else if (!strcmp(a, "--count") && has)
            range = parse_count(argv[++i], &o->count) ? NULL : COUNT_RANGE;
        else if (!strcmp(a, "--timeout") && has)
            range = parse_number(argv[++i], true, 0, SECONDS_MAX, &o->timeout) ? NULL : TIMEOUT_RANGE;
        else if (!strcmp(a, "--watch") || !strcmp(a, "--count") || !strcmp(a, "--timeout")) {
            fprintf(stderr, "zimp %s: %s needs a value\n", c->name, a);
            return -1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "zimp %s: unknown option '%s'\n", c->name, a);
            return -1;
        } else {
            o->names[o->nnames++] = argv[i];
        }
        if (range) {
            fprintf(stderr, "zimp %s: bad value '%s' for %s: give %s\n", c->name, argv[i], a, range);
            return -1;
        }
    }
    if (o->nnames < c->min_names || o->nnames > c->max_names) {
        fprintf(stderr, "usage: zimp %s %s\n", c->name, c->args);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("zimp %d.%d.%d\n", ZIMP_VERSION_MAJOR, ZIMP_VERSION_MINOR, ZIMP_VERSION_PATCH);
        return 0;
    }
    if (!strcmp(argv[1], "--man")) {
        man();
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name))
            continue;
        struct opts o;
        if (parse(argc, argv, &commands[i], &o) != 0) {
            free(o.names);
            return EXIT_USAGE;
        }
        struct sigaction sa = { .sa_handler = on_signal };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        int rc = commands[i].run(&o);
        free(o.names);
        return rc;
    }
    fprintf(stderr, "zimp: no command '%s' (zimp --help lists them)\n", argv[1]);
    return EXIT_USAGE;
}
