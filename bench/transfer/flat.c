/*
 * Zero-copy latency against message size with the cache state held equal:
 * the eMPI thesis's flat line (Figures 9.2-9.3: from "pointer sent" to
 * "pointer usable", whatever the size).
 *
 * One sender process and one receiver process, each on its own CPU, both
 * busy-waiting, on a channel with a heap: messages up to the slot size go
 * in the slot, longer ones in a heap block (docs/heap.md). Per transfer the
 * sender loans, writes every byte, then stamps the time and publishes; the
 * receiver stamps the time when zimp_read returns the message, checks its
 * first and last byte, then reads every byte and releases. Printed: the
 * median of (receiver's stamp - sender's stamp) and of the publish call.
 *
 * Writing a 64 MiB message evicts every cache line of the channel and the
 * heap (the last level holds 32 MiB here), so a 64 MiB message meets cold
 * control lines and a 64 B one warm lines. That difference is the memory
 * traffic around the message, not the message's size. --traffic BYTES
 * makes each side touch a private buffer after its part, so that every
 * transfer moves the same bytes through the caches (message + private =
 * BYTES); the rows then differ by size alone. Both are printed.
 *
 * The same rows are measured for a floor: the least any shared-memory
 * hand-off can do, one line holding a sequence number and the length,
 * stored by the sender and polled by the receiver, beside a buffer of the
 * largest size. What the floor pays "as is" at 64 MiB over 64 B is the
 * price of the traffic on this machine, which no protocol avoids.
 *
 *   zimp_flat [--sizes 64,1m,64m] [--reps N] [--traffic BYTES|max|0]
 *
 * Exit status 1 on an error or a wrong byte.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zimp/zimp.h>

#define MAX_SIZES 16
#define MAX_REPS  1001
#define SLOT_SIZE 4096u

struct shared {
    _Atomic uint64_t step;       /* 2i+1: receiver waits for message i; 2i+2: done with it */
    _Atomic int failed;
    double in_ns[MAX_REPS];      /* receiver: when zimp_read returned message i */
};

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);      /* fails with one CPU: both then share it */
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static volatile uint64_t sink;   /* keeps the reads below */

/* Reads every cache line of `len` bytes, as an application reading them would. */
static void read_lines(const unsigned char *buf, size_t len)
{
    uint64_t sum = 0;
    for (size_t k = 0; k < len; k += 64)
        sum += buf[k];
    sink += sum;
}

/* Spins until the receiver reaches `at_least`; 0 if it failed or exited. */
static uint64_t wait_step(struct shared *sh, uint64_t at_least, pid_t pid, int *status, int *reaped)
{
    uint64_t v;
    unsigned spins = 0;
    while ((v = atomic_load_explicit(&sh->step, memory_order_acquire)) < at_least) {
        if (atomic_load_explicit(&sh->failed, memory_order_relaxed))
            return 0;
        if (++spins % (1u << 16) == 0 && waitpid(pid, status, WNOHANG) == pid) {
            *reaped = 1;                             /* killed, or gone early */
            return 0;
        }
    }
    return v;
}

static void fail(struct shared *sh, const char *what)
{
    fprintf(stderr, "zimp_flat: %s: %s\n", what, zimp_last_detail());
    atomic_store(&sh->failed, 1);
}

/*
 * A zero-copy hand-off under test. The sender's calls run in the parent,
 * the receiver's in a child forked per row (so its handle is its own).
 */
struct path {
    const char *tag, *label;
    int (*loan)(struct path *p, size_t len, void **buf);
    int (*publish)(struct path *p, void *buf, size_t len);
    int (*open)(struct path *p);
    int (*read)(struct path *p, const void **buf, size_t *len);
    void (*release)(struct path *p);
    void (*close)(struct path *p);
    const char *name;            /* zimp: the channel */
    zimp_sender *s;
    zimp_receiver *r;
    struct floor_line *line;     /* floor: the line, on a page of its own */
    unsigned char *data;         /* floor: the message buffer */
    uint64_t seq;                /* floor: messages sent (parent) or read (child) */
};

static int zimp_path_loan(struct path *p, size_t len, void **buf) { return zimp_loan(p->s, len, buf, -1); }
static int zimp_path_publish(struct path *p, void *buf, size_t len) { return zimp_publish(p->s, buf, len); }
static void zimp_path_release(struct path *p) { zimp_release(p->r); }
static void zimp_path_close(struct path *p) { zimp_receiver_close(p->r); }

static int zimp_path_open(struct path *p)
{
    return zimp_receiver_open(p->name, &p->r) == 0 && zimp_receiver_set_spin(p->r, UINT64_MAX) == 0 ? 0 : -1;
}

static int zimp_path_read(struct path *p, const void **buf, size_t *len)
{
    int rc = zimp_read(p->r, buf, len, -1);
    if (rc != 0)
        fprintf(stderr, "zimp_flat: zimp_read: %s (%s)\n", strerror(-rc), zimp_last_detail());
    return rc;
}

struct floor_line {
    _Atomic uint64_t seq;        /* messages published */
    uint64_t len;                /* the last one's length, written before seq */
};

static int floor_loan(struct path *p, size_t len, void **buf)
{
    (void)len;
    *buf = p->data;
    return 0;
}

static int floor_publish(struct path *p, void *buf, size_t len)
{
    (void)buf;
    p->line->len = len;
    atomic_store_explicit(&p->line->seq, ++p->seq, memory_order_release);
    return 0;
}

static int floor_open(struct path *p) { p->seq = atomic_load(&p->line->seq); return 0; }
static void floor_release(struct path *p) { (void)p; }
static void floor_close(struct path *p) { (void)p; }

static int floor_read(struct path *p, const void **buf, size_t *len)
{
    while (atomic_load_explicit(&p->line->seq, memory_order_acquire) == p->seq) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();                  /* as zimp's busy-wait polls */
#endif
    }
    p->seq++;
    *len = p->line->len;
    *buf = p->data;
    return 0;
}

static int receiver(struct path *pa, struct shared *sh, size_t len, int reps, size_t pad,
                    unsigned char *priv)
{
    pin(1);
    if (pa->open(pa) != 0) {
        fail(sh, "receiver open");
        return 1;
    }
    for (int i = 0; i < reps; i++) {
        atomic_store_explicit(&sh->step, 2 * (uint64_t)i + 1, memory_order_release);
        const void *buf;
        size_t got;
        if (pa->read(pa, &buf, &got) != 0) {
            atomic_store(&sh->failed, 1);
            return 1;
        }
        sh->in_ns[i] = now_ns();
        const unsigned char *p = buf;
        if (got != len || p[0] != (unsigned char)i || p[len - 1] != (unsigned char)i) {
            fprintf(stderr, "zimp_flat: %s: message %d: %zu bytes, want %zu, each byte %u\n",
                    pa->tag, i, got, len, (unsigned char)i);
            atomic_store(&sh->failed, 1);
            return 1;
        }
        read_lines(p, len);                          /* the application reads it */
        pa->release(pa);
        read_lines(priv, pad);
        atomic_store_explicit(&sh->step, 2 * (uint64_t)i + 2, memory_order_release);
    }
    pa->close(pa);
    return 0;
}

/* One row: reps transfers of len bytes; medians in *lat and *pub (ns). */
static int row(struct path *pa, struct shared *sh, size_t len, int reps, size_t pad,
               unsigned char *priv, double *lat, double *pub)
{
    static double lats[MAX_REPS], pubs[MAX_REPS];
    memset(sh, 0, sizeof *sh);
    /* The child starts on its own CPU: under a real-time policy a child
     * queued behind a spinning parent would never run. */
    pin(1);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "zimp_flat: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0)
        _exit(receiver(pa, sh, len, reps, pad, priv));
    pin(0);
    int st = 0, reaped = 0;
    int rc = 1;
    for (int i = 0; i < reps; i++) {
        void *buf;
        if (pa->loan(pa, len, &buf) != 0) {
            fail(sh, "loan");
            goto out;
        }
        memset(buf, (unsigned char)i, len);          /* the application writes it */
        memset(priv, (unsigned char)i, pad);         /* and other data of its own */
        if (!wait_step(sh, 2 * (uint64_t)i + 1, pid, &st, &reaped))
            goto out;
        double t0 = now_ns();
        if (pa->publish(pa, buf, len) != 0) {
            fail(sh, "publish");
            goto out;
        }
        pubs[i] = now_ns() - t0;
        if (!wait_step(sh, 2 * (uint64_t)i + 2, pid, &st, &reaped))
            goto out;
        lats[i] = sh->in_ns[i] - t0;
    }
    *lat = median(lats, reps);
    *pub = median(pubs, reps);
    rc = 0;
out:
    if (!reaped) {
        if (rc != 0)
            kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    if (WIFSIGNALED(st))
        fprintf(stderr, "zimp_flat: the receiver was killed by signal %d\n", WTERMSIG(st));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        rc = 1;
    return rc;
}

/* Every size's rows for one path; 0, or 1 on an error. */
static int table(struct path *pa, struct shared *sh, const size_t *sizes, int nsizes, int reps,
                 size_t pad_to, unsigned char *priv)
{
    printf("%s\n", pa->label);
    printf("%12s %30s %32s\n", "", "as is", pad_to ? "same traffic" : "");
    printf("%12s %15s %14s %17s %14s\n", "bytes", "latency", "publish", "latency", "publish");
    double base[2] = { 0, 0 };
    for (int k = 0; k < nsizes; k++) {
        double lat[2] = { 0, 0 }, pub[2] = { 0, 0 };
        size_t pad = pad_to > sizes[k] ? pad_to - sizes[k] : 0;
        if (row(pa, sh, sizes[k], reps, 0, priv, &lat[0], &pub[0]) != 0 ||
            (pad_to && row(pa, sh, sizes[k], reps, pad, priv, &lat[1], &pub[1]) != 0))
            return 1;
        if (k == 0)
            base[0] = lat[0], base[1] = lat[1];
        printf("%12zu %9.0f %4.1fx %14.0f", sizes[k], lat[0], lat[0] / base[0], pub[0]);
        if (pad_to)
            printf(" %11.0f %4.1fx %14.0f", lat[1], lat[1] / base[1], pub[1]);
        printf("\n");
    }
    return 0;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (*end != '\0' && *end != ',')
        return -1;
    *out = (size_t)v;
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: zimp_flat [--sizes 64,1m,64m] [--reps 3..%d] [--traffic BYTES|max|0]\n",
            MAX_REPS);
    exit(2);
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES] = { 64, 1 << 20, 64 << 20 }, pad_to = 0;
    int nsizes = 3, reps = 41, pad_max = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        if (!strcmp(argv[i], "--sizes")) {
            nsizes = 0;
            for (const char *p = argv[++i]; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
                if (nsizes == MAX_SIZES || parse_size(p, &sizes[nsizes]) != 0 || sizes[nsizes++] == 0)
                    usage();
        } else if (!strcmp(argv[i], "--reps")) {
            reps = atoi(argv[++i]);
            if (reps < 3 || reps > MAX_REPS)
                usage();
        } else if (!strcmp(argv[i], "--traffic")) {
            pad_max = !strcmp(argv[++i], "max");
            if (!pad_max && parse_size(argv[i], &pad_to) != 0)
                usage();
        } else {
            usage();
        }
    }
    size_t largest = 0;
    for (int k = 0; k < nsizes; k++)
        largest = sizes[k] > largest ? sizes[k] : largest;
    if (pad_max)
        pad_to = largest;

    char name[64], heap[64];
    snprintf(name, sizeof name, "zimp-flat-%d", (int)getpid());
    snprintf(heap, sizeof heap, "zimp-flat-heap-%d", (int)getpid());
    /* Two slots: a block goes back when its slot is reused (H2), so three
     * of the largest messages fit at once. */
    struct zimp_heap_config hc = { .size = 3 * (uint64_t)((largest + 4095) & ~(size_t)4095) + (1u << 20) };
    struct zimp_config cc = { .slots = 2, .slot_size = SLOT_SIZE, .max_senders = 1, .heap = heap };
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    /* The floor's line and buffer are shared memory like a channel's. */
    struct floor_line *line = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    unsigned char *data = mmap(NULL, largest, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    unsigned char *priv = pad_to ? malloc(pad_to) : NULL;
    if (sh == MAP_FAILED || line == MAP_FAILED || data == MAP_FAILED || (pad_to && !priv)) {
        fprintf(stderr, "zimp_flat: out of memory\n");
        return 1;
    }
    memset(data, 0, largest);                        /* faulted in before any timing */
    if (priv)
        memset(priv, 1, pad_to);
    /* The sender stays for every row: a receiver that joined a channel
     * whose senders have all left would read end-of-stream (-EPIPE). */
    zimp_sender *s = NULL;
    if (zimp_heap_create(heap, &hc) != 0 || zimp_create(name, &cc) != 0 ||
        zimp_sender_open(name, &s) != 0 || zimp_sender_set_spin(s, UINT64_MAX) != 0) {
        fprintf(stderr, "zimp_flat: create: %s\n", zimp_last_detail());
        zimp_sender_close(s);
        zimp_unlink(name);
        zimp_heap_unlink(heap);
        free(priv);
        return 1;
    }
    struct path zimp = {
        .tag = "zimp", .label = "zimp: zimp_publish to zimp_read returning (up to 4096 B in the slot, longer in a heap block)",
        .loan = zimp_path_loan, .publish = zimp_path_publish, .open = zimp_path_open,
        .read = zimp_path_read, .release = zimp_path_release, .close = zimp_path_close,
        .name = name, .s = s,
    };
    struct path bare = {
        .tag = "floor", .label = "floor: one line (sequence number, length) stored by the sender, polled by the receiver",
        .loan = floor_loan, .publish = floor_publish, .open = floor_open,
        .read = floor_read, .release = floor_release, .close = floor_close,
        .line = line, .data = data,
    };

    printf("zero-copy latency, ns, median of %d transfers; 1 -> 1, busy-wait\n\n", reps);
    int rc = table(&zimp, sh, sizes, nsizes, reps, pad_to, priv);
    if (rc == 0) {
        printf("\n");
        rc = table(&bare, sh, sizes, nsizes, reps, pad_to, priv);
    }
    if (rc == 0)
        printf("(Nx: latency over the first size's, in the same column)\n");
    zimp_sender_close(s);
    zimp_unlink(name);
    zimp_heap_unlink(heap);
    free(priv);
    munmap(data, largest);
    munmap(line, 4096);
    munmap(sh, sizeof *sh);
    return rc != 0;
}
