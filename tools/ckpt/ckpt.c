/* ckpt.c - scanner of the checkpoint-size meter (see ckpt_int.h). */
#define _GNU_SOURCE
#include "ckpt_int.h"

#include <errno.h>
#include <fcntl.h>
#include <lz4.h>
#include <lz4hc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zstd.h>

const char *const ckpt_kind_names[CKPT_NKINDS] = { "heap", "stack", "anon", "file", "shared" };

#define BLOCK (1u << 20)           /* compression block */
#define RUN_PAGES 256              /* pages read per system call */

#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)
#define PM_FILE    (1ull << 61)    /* page-cache or shared-anon page */

int ckpt_parse_codecs(struct ckpt_opts *o, const char *list)
{
    o->ncodecs = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->ncodecs == CKPT_MAX_CODECS)
            return -EINVAL;
        struct ckpt_codec *c = &o->codecs[o->ncodecs];
        char *dash = strrchr(t, '-');
        int level = dash ? atoi(dash + 1) : 0;
        size_t len = dash ? (size_t)(dash - t) : strlen(t);
        if (len == 4 && !strncmp(t, "zstd", 4)) {
            c->algo = CKPT_ZSTD;
            if (!dash) level = 3;
            if (level < 1 || level > ZSTD_maxCLevel()) return -EINVAL;
        } else if (len == 3 && !strncmp(t, "lz4", 3)) {
            c->algo = CKPT_LZ4;          /* level = acceleration */
            if (!dash) level = 1;
            if (level < 1 || level > 65537) return -EINVAL;
        } else if (len == 5 && !strncmp(t, "lz4hc", 5)) {
            c->algo = CKPT_LZ4HC;
            if (!dash) level = 9;
            if (level < 1 || level > LZ4HC_CLEVEL_MAX) return -EINVAL;
        } else {
            return -EINVAL;
        }
        c->level = level;
        snprintf(c->name, sizeof c->name, "%s-%d",
                 c->algo == CKPT_ZSTD ? "zstd" : c->algo == CKPT_LZ4 ? "lz4" : "lz4hc", level);
        o->ncodecs++;
    }
    return 0;
}

int ckpt_parse_kinds(struct ckpt_opts *o, const char *list)
{
    o->kinds = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k;
        if (!strcmp(t, "all")) {
            o->kinds = 0;
            return 0;
        }
        for (k = 0; k < CKPT_NKINDS; k++)
            if (!strcmp(t, ckpt_kind_names[k]))
                break;
        if (k == CKPT_NKINDS)
            return -EINVAL;
        o->kinds |= 1u << k;
    }
    return 0;
}

/* ---- compression of the non-zero page stream, per kind ---- */

struct sink {
    unsigned char *buf;   /* BLOCK bytes pending */
    size_t len;
};

struct scanner {
    const struct ckpt_opts *o;
    struct ckpt_result *r;
    struct sink sink[CKPT_NKINDS];
    unsigned char *out;   /* compressor output */
    size_t out_cap;
    ZSTD_CCtx *zctx;
    void *lz4hc_state;
    int mem_fd;           /* /proc/PID/mem, fallback reader */
    int use_vm_readv;
};

static void flush_sink(struct scanner *s, int kind)
{
    struct sink *k = &s->sink[kind];
    if (!k->len)
        return;
    for (int i = 0; i < s->o->ncodecs; i++) {
        const struct ckpt_codec *c = &s->o->codecs[i];
        size_t n = 0;
        if (c->algo == CKPT_ZSTD) {
            n = ZSTD_compressCCtx(s->zctx, s->out, s->out_cap, k->buf, k->len, c->level);
            if (ZSTD_isError(n)) n = k->len;
        } else if (c->algo == CKPT_LZ4) {
            int m = LZ4_compress_fast((const char *)k->buf, (char *)s->out, (int)k->len,
                                      (int)s->out_cap, c->level);
            n = m > 0 ? (size_t)m : k->len;
        } else {
            int m = LZ4_compress_HC_extStateHC(s->lz4hc_state, (const char *)k->buf,
                                               (char *)s->out, (int)k->len, (int)s->out_cap,
                                               c->level);
            n = m > 0 ? (size_t)m : k->len;
        }
        s->r->kind[kind].compressed[i] += n;
    }
    k->len = 0;
}

/* ---- page classification ---- */

/* Returns the number of zero 64-byte lines of the page (lines = all zero). */
static unsigned zero_lines(const unsigned char *p, size_t page)
{
    unsigned z = 0;
    for (size_t off = 0; off < page; off += 64) {
        const uint64_t *w = (const uint64_t *)(p + off);
        uint64_t acc = w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7];
        z += acc == 0;
    }
    return z;
}

static void account_page(struct scanner *s, int kind, const unsigned char *p)
{
    struct ckpt_counts *c = &s->r->kind[kind];
    size_t page = s->r->page_size;
    unsigned lines = (unsigned)(page / 64), z = zero_lines(p, page);
    c->dumped_pages++;
    if (z == lines) {
        c->zero_pages++;
        return;
    }
    c->nonzero_pages++;
    if (z) {
        c->partial_pages++;
        c->zero_bytes_in_nonzero += (uint64_t)z * 64;
    }
    if (s->o->ncodecs) {
        struct sink *k = &s->sink[kind];
        memcpy(k->buf + k->len, p, page);
        k->len += page;
        if (k->len + page > BLOCK)
            flush_sink(s, kind);
    }
}

/* Reads n pages at addr into buf; returns how many leading pages were read. */
static size_t read_pages(struct scanner *s, pid_t pid, uintptr_t addr, unsigned char *buf, size_t n)
{
    size_t page = s->r->page_size, len = n * page;
    ssize_t got = -1;
    if (s->use_vm_readv) {
        struct iovec l = { buf, len }, r = { (void *)addr, len };
        got = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (got < 0 && (errno == ENOSYS || errno == EPERM))
            s->use_vm_readv = 0;     /* e.g. blocked by a seccomp filter */
    }
    if (!s->use_vm_readv && s->mem_fd >= 0)
        got = pread(s->mem_fd, buf, len, (off_t)addr);
    if (got < 0)
        got = 0;
    return (size_t)got / page;
}

static int classify(const char *path, const char *perms, int *kind)
{
    int shared = perms[3] == 's';
    if (!strcmp(path, "[vvar]") || !strcmp(path, "[vdso]") || !strcmp(path, "[vsyscall]") ||
        !strncmp(path, "[vvar", 5) || perms[0] != 'r')
        return 0;                         /* not dumped (or not readable) */
    if (shared) {
        /* shared memory whose contents live nowhere else; files are saved as files */
        if (!*path || !strncmp(path, "/memfd:", 7) || !strncmp(path, "/dev/shm/", 9) ||
            !strncmp(path, "/SYSV", 5) || !strncmp(path, "/dev/zero", 9) ||
            !strncmp(path, "[anon_shmem", 11)) {
            *kind = CKPT_SHARED;
            return 1;
        }
        return 0;
    }
    if (!strcmp(path, "[heap]")) *kind = CKPT_HEAP;
    else if (!strcmp(path, "[stack]")) *kind = CKPT_STACK;
    else if (!*path || path[0] == '[') *kind = CKPT_ANON;
    else *kind = CKPT_FILE;
    return 1;
}

#define PF_EXITING 0x4        /* task flag (stat field 9): in exit(), memory going */

/* State letter and flags of /proc/PID/stat; state 0 if it cannot be read. */
static char proc_stat(pid_t pid, unsigned *flags)
{
    char path[64], buf[512], state = 0;
    *flags = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');     /* the name before it may hold anything */
    if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %u", &state, flags) < 1)
        return 0;
    return state;
}

char ckpt_proc_state(pid_t pid)
{
    unsigned flags;
    return proc_stat(pid, &flags);
}

int ckpt_gone(pid_t pid)
{
    if (pid <= 0)
        return 1;                /* never kill() with 0 or -N: those are groups */
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    /* Exiting, or exited and not reaped (zombie): its memory is going or gone,
     * and for a while it still answers kill(pid, 0). */
    unsigned flags;
    char st = proc_stat(pid, &flags);
    return st == 'Z' || st == 'X' || (flags & PF_EXITING);
}

static int fail(char *err, size_t errlen, int rc, const char *fmt, pid_t pid, const char *what)
{
    snprintf(err, errlen, fmt, (int)pid, what);
    return rc;
}

static int exited_msg(char *err, size_t errlen, pid_t pid)
{
    return fail(err, errlen, -ESRCH, "no such process: %d%s", pid, " (it exited)");
}

/* For a failure after /proc/PID/comm was read: the process was there. One
 * that exits mid-scan makes /proc fail with whatever the kernel has at hand
 * (ESRCH, or a short pagemap read: EIO); name the cause instead. */
static int errno_msg(char *err, size_t errlen, pid_t pid, const char *file, int e)
{
    if (e == ENOENT || e == ESRCH || ckpt_gone(pid))
        return exited_msg(err, errlen, pid);
    if (e == EACCES || e == EPERM)
        return fail(err, errlen, -e,
                    "permission denied reading process %d (%s): run as the same user with "
                    "ptrace permission (see /proc/sys/kernel/yama/ptrace_scope) or as root",
                    pid, file);
    snprintf(err, errlen, "cannot read %s of process %d: %s", file, (int)pid, strerror(e));
    return -e;
}

int ckpt_scan(pid_t pid, const struct ckpt_opts *o, struct ckpt_result *r, char *err, size_t errlen)
{
    char path[64];
    memset(r, 0, sizeof *r);
    r->pid = pid;
    r->page_size = (size_t)sysconf(_SC_PAGESIZE);
    size_t page = r->page_size;

    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *cf = fopen(path, "r");
    if (!cf && (errno == ENOENT || errno == ESRCH))
        return fail(err, errlen, -ESRCH, "no such process: %d%s", pid, "");
    if (!cf)
        return errno_msg(err, errlen, pid, "comm", errno);
    if (fgets(r->comm, sizeof r->comm, cf))
        r->comm[strcspn(r->comm, "\n")] = 0;
    fclose(cf);

    snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
    FILE *maps = fopen(path, "r");
    if (!maps)
        return errno_msg(err, errlen, pid, "smaps", errno);
    snprintf(path, sizeof path, "/proc/%d/pagemap", (int)pid);
    int pm = open(path, O_RDONLY | O_CLOEXEC);
    if (pm < 0) {
        int e = errno;
        fclose(maps);
        return errno_msg(err, errlen, pid, "pagemap", e);
    }
    struct scanner s = { .o = o, .r = r, .use_vm_readv = 1 };
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    s.mem_fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = 0;
    uint64_t *pme = malloc(RUN_PAGES * sizeof *pme);
    unsigned char *buf = malloc(RUN_PAGES * page);
    s.out_cap = ZSTD_compressBound(BLOCK);
    if ((size_t)LZ4_compressBound(BLOCK) > s.out_cap)
        s.out_cap = (size_t)LZ4_compressBound(BLOCK);
    s.out = malloc(s.out_cap);
    s.zctx = ZSTD_createCCtx();
    s.lz4hc_state = malloc((size_t)LZ4_sizeofStateHC());
    for (int k = 0; k < CKPT_NKINDS; k++)
        s.sink[k].buf = malloc(BLOCK);
    int ok = pme && buf && s.out && s.zctx && s.lz4hc_state;
    for (int k = 0; k < CKPT_NKINDS; k++)
        ok = ok && s.sink[k].buf;
    if (!ok) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto out;
    }

    /* smaps, not maps: its Rss/Swap let us skip huge untouched reservations
     * (e.g. a sanitizer's shadow) without walking their pagemap. */
    int found = 0;
    size_t nmaps = 0, capmaps = 0;
    struct vma { unsigned long lo, hi; char perms[8]; char *name; unsigned long long rss, swap; } *v = NULL;
    char line[4096];
    while (fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char perms[8] = "";
        int name_at = 0;
        unsigned long long kb;
        if (nmaps && sscanf(line, "Rss: %llu kB", &kb) == 1) { v[nmaps - 1].rss = kb; continue; }
        if (nmaps && sscanf(line, "Swap: %llu kB", &kb) == 1) { v[nmaps - 1].swap = kb; continue; }
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &name_at) < 3 || !name_at)
            continue;
        char *name = line + name_at;
        name[strcspn(name, "\n")] = 0;
        if (nmaps == capmaps) {
            capmaps = capmaps ? 2 * capmaps : 256;
            struct vma *nv = realloc(v, capmaps * sizeof *v);
            if (!nv) { rc = -ENOMEM; snprintf(err, errlen, "out of memory"); goto out_v; }
            v = nv;
        }
        v[nmaps] = (struct vma){ lo, hi, "", strdup(name), ~0ull, 0 };
        memcpy(v[nmaps].perms, perms, sizeof perms);
        if (!v[nmaps].name) { rc = -ENOMEM; snprintf(err, errlen, "out of memory"); goto out_v; }
        nmaps++;
    }
    for (size_t vi = 0; vi < nmaps; vi++) {
        unsigned long lo = v[vi].lo, hi = v[vi].hi;
        const char *name = v[vi].name, *perms = v[vi].perms;
        int kind;
        if (o->addr && !(o->addr >= lo && o->addr < hi))
            continue;
        found = 1;
        if (!classify(name, perms, &kind))
            continue;
        if (o->kinds && !(o->kinds & (1u << kind)))
            continue;
        if (v[vi].rss == 0 && v[vi].swap == 0) {   /* nothing there to read */
            struct ckpt_counts *c = &r->kind[kind];
            c->mappings++;
            c->mapped_bytes += hi - lo;
            if (o->all_pages && kind != CKPT_FILE) {
                c->dumped_pages += (hi - lo) / page;
                c->zero_pages += (hi - lo) / page;
            }
            continue;
        }
        struct ckpt_counts *c = &r->kind[kind];
        c->mappings++;
        c->mapped_bytes += hi - lo;
        for (uintptr_t a = lo; a < hi;) {
            size_t n = (hi - a) / page;
            if (n > RUN_PAGES) n = RUN_PAGES;
            ssize_t got = pread(pm, pme, n * sizeof *pme, (off_t)(a / page * sizeof *pme));
            if (got < (ssize_t)(n * sizeof *pme)) {
                int e = got < 0 ? errno : EIO;
                rc = errno_msg(err, errlen, pid, "pagemap", e);
                goto out_v;
            }
            /* runs of pages to read */
            size_t i = 0;
            while (i < n) {
                int want = (pme[i] & (PM_PRESENT | PM_SWAPPED)) &&
                           !(kind == CKPT_FILE && (pme[i] & PM_FILE));
                c->resident_pages += (pme[i] & PM_PRESENT) != 0;
                c->swapped_pages += (pme[i] & PM_SWAPPED) != 0;
                if (!want) {
                    if (o->all_pages && !(pme[i] & (PM_PRESENT | PM_SWAPPED)) && kind != CKPT_FILE) {
                        c->dumped_pages++;   /* never touched: reads as zero */
                        c->zero_pages++;
                    }
                    i++;
                    continue;
                }
                size_t j = i + 1;
                while (j < n && (pme[j] & (PM_PRESENT | PM_SWAPPED)) &&
                       !(kind == CKPT_FILE && (pme[j] & PM_FILE))) {
                    c->resident_pages += (pme[j] & PM_PRESENT) != 0;
                    c->swapped_pages += (pme[j] & PM_SWAPPED) != 0;
                    j++;
                }
                uintptr_t ra = a + i * page;
                size_t done = 0;
                unsigned char bad[RUN_PAGES] = { 0 };
                while (done < j - i) {
                    errno = 0;
                    size_t got_pages = read_pages(&s, pid, ra + done * page, buf + done * page,
                                                  j - i - done);
                    if (got_pages == 0) {
                        if (errno == ESRCH) {         /* it was there for smaps */
                            rc = exited_msg(err, errlen, pid);
                            goto out_v;
                        }
                        if ((errno == EPERM || errno == EACCES) && !s.use_vm_readv &&
                            s.mem_fd < 0) {
                            rc = errno_msg(err, errlen, pid, "mem", errno);
                            goto out_v;
                        }
                        c->unreadable_pages++;   /* e.g. a guard page: skip it */
                        bad[done++] = 1;
                        continue;
                    }
                    done += got_pages;
                }
                for (size_t p = 0; p < j - i; p++)
                    if (!bad[p])
                        account_page(&s, kind, buf + p * page);
                i = j;
            }
            a += n * page;
        }
    }
    /* An exited process (a zombie included) reads as one without mappings: the
     * counts would describe nothing. */
    if (ckpt_gone(pid)) {
        rc = exited_msg(err, errlen, pid);
        goto out_v;
    }
    if (o->addr && !found) {
        snprintf(err, errlen, "no mapping of process %d contains address 0x%lx", (int)pid,
                 (unsigned long)o->addr);
        rc = -ENOENT;
        goto out_v;
    }
    for (int k = 0; k < CKPT_NKINDS; k++) {
        flush_sink(&s, k);
        struct ckpt_counts *c = &r->kind[k], *t = &r->total;
        t->mappings += c->mappings;
        t->mapped_bytes += c->mapped_bytes;
        t->resident_pages += c->resident_pages;
        t->swapped_pages += c->swapped_pages;
        t->dumped_pages += c->dumped_pages;
        t->zero_pages += c->zero_pages;
        t->partial_pages += c->partial_pages;
        t->nonzero_pages += c->nonzero_pages;
        t->zero_bytes_in_nonzero += c->zero_bytes_in_nonzero;
        t->unreadable_pages += c->unreadable_pages;
        for (int i = 0; i < o->ncodecs; i++)
            t->compressed[i] += c->compressed[i];
    }
out_v:
    for (size_t vi = 0; vi < nmaps; vi++)
        free(v[vi].name);
    free(v);
out:
    for (int k = 0; k < CKPT_NKINDS; k++)
        free(s.sink[k].buf);
    free(s.lz4hc_state);
    ZSTD_freeCCtx(s.zctx);
    free(s.out);
    free(buf);
    free(pme);
    if (s.mem_fd >= 0)
        close(s.mem_fd);
    close(pm);
    fclose(maps);
    return rc;
}
