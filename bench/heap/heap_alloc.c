/*
 * Cost of zimp_heap_alloc + zimp_heap_release, uncontended: one process
 * allocates and frees blocks of a given size in a loop; the median over
 * batches of 1,000 pairs is printed per size, next to malloc + free of the
 * same size measured in the same run. The row "mixed" allocates lengths
 * drawn from 64 B to 1 MiB (uniform in their logarithm), holding the last
 * 8 blocks: each step frees the oldest and allocates the next, so a block
 * of the same length is rarely at hand.
 *
 *     zimp_heap_bench [--sizes 64,4096,1048576] [--batches 200]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zimp/zimp.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { PAIRS = 1000 };

/* Median ns per alloc+release pair over `batches` batches. */
static double heap_pairs(zimp_heap *h, size_t size, int batches)
{
    double *t = calloc((size_t)batches, sizeof *t);
    for (int b = 0; b < batches; b++) {
        double t0 = now();
        for (int i = 0; i < PAIRS; i++) {
            void *buf;
            struct zimp_ref ref;
            if (zimp_heap_alloc(h, size, &buf, &ref) != 0 || zimp_heap_release(h, &ref) != 0) {
                fprintf(stderr, "heap_alloc: %s\n", zimp_last_detail());
                exit(1);
            }
            *(volatile char *)buf = 1;
        }
        t[b] = (now() - t0) / PAIRS;
    }
    qsort(t, (size_t)batches, sizeof *t, cmp);
    double m = t[batches / 2];
    free(t);
    return m;
}

enum { WINDOW = 8 };

/* Lengths of the mixed row: 64 B to 1 MiB, uniform in log2, from a fixed seed. */
static size_t mixed_len(int i)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull + 12345;
    x ^= x >> 31, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 27;
    double e = 6.0 + 14.0 * (double)(x >> 11) / (double)(1ull << 53);    /* 2^6 .. 2^20 */
    return (size_t)(1ull << (int)e) + (size_t)(x % (1ull << (int)e));
}

/* Median ns per step of the mixed row: free the oldest of WINDOW blocks, allocate one. */
static double heap_mixed(zimp_heap *h, int batches)
{
    double *t = calloc((size_t)batches, sizeof *t);
    struct zimp_ref ref[WINDOW];
    void *buf;
    for (int k = 0; k < WINDOW; k++)
        if (zimp_heap_alloc(h, mixed_len(k), &buf, &ref[k]) != 0)
            goto fail;
    for (int b = 0, i = WINDOW; b < batches; b++) {
        double t0 = now();
        for (int n = 0; n < PAIRS; n++, i++) {
            if (zimp_heap_release(h, &ref[i % WINDOW]) != 0 ||
                zimp_heap_alloc(h, mixed_len(i % 1000), &buf, &ref[i % WINDOW]) != 0)
                goto fail;
            *(volatile char *)buf = 1;
        }
        t[b] = (now() - t0) / PAIRS;
    }
    for (int k = 0; k < WINDOW; k++)
        zimp_heap_release(h, &ref[k]);
    qsort(t, (size_t)batches, sizeof *t, cmp);
    double m = t[batches / 2];
    free(t);
    return m;
fail:
    fprintf(stderr, "heap_alloc (mixed): %s\n", zimp_last_detail());
    exit(1);
}

static double malloc_mixed(int batches)
{
    double *t = calloc((size_t)batches, sizeof *t);
    char *p[WINDOW];
    for (int k = 0; k < WINDOW; k++)
        p[k] = malloc(mixed_len(k));
    for (int b = 0, i = WINDOW; b < batches; b++) {
        double t0 = now();
        for (int n = 0; n < PAIRS; n++, i++) {
            free(p[i % WINDOW]);
            p[i % WINDOW] = malloc(mixed_len(i % 1000));
            *(volatile char *)p[i % WINDOW] = 1;
        }
        t[b] = (now() - t0) / PAIRS;
    }
    for (int k = 0; k < WINDOW; k++)
        free(p[k]);
    qsort(t, (size_t)batches, sizeof *t, cmp);
    double m = t[batches / 2];
    free(t);
    return m;
}

static double malloc_pairs(size_t size, int batches)
{
    double *t = calloc((size_t)batches, sizeof *t);
    for (int b = 0; b < batches; b++) {
        double t0 = now();
        for (int i = 0; i < PAIRS; i++) {
            char *p = malloc(size);
            *(volatile char *)p = 1;
            free(p);
        }
        t[b] = (now() - t0) / PAIRS;
    }
    qsort(t, (size_t)batches, sizeof *t, cmp);
    double m = t[batches / 2];
    free(t);
    return m;
}

int main(int argc, char **argv)
{
    const char *sizes = "64,4096,65536,1048576";
    int batches = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--sizes"))
            sizes = argv[i + 1];
        else if (!strcmp(argv[i], "--batches"))
            batches = atoi(argv[i + 1]);
    }
    if (batches < 1)
        batches = 1;
    char name[64];
    snprintf(name, sizeof name, "heapbench-%d", (int)getpid());
    struct zimp_heap_config c = { .size = 64u << 20 };
    zimp_heap *h;
    int rc = zimp_heap_create(name, &c);
    if (rc == 0)
        rc = zimp_heap_open(name, &h);
    if (rc != 0) {
        fprintf(stderr, "heap: %s (%s)\n", zimp_strerror(rc), zimp_last_detail());
        zimp_heap_unlink(name);
        return 1;
    }
    /* Every page of the heap touched once first: the rows time the allocator, not first-touch faults. */
    void *all;
    struct zimp_ref allref;
    if (zimp_heap_alloc(h, c.size, &all, &allref) == 0) {
        memset(all, 0, c.size);
        zimp_heap_release(h, &allref);
    }
    printf("alloc+release pairs, uncontended, median of %d batches of %d (ns per pair)\n", batches, PAIRS);
    printf("%10s %12s %12s\n", "size", "zimp heap", "malloc+free");
    for (const char *p = sizes; *p;) {
        size_t size = strtoull(p, NULL, 10);
        if (size > 0)
            printf("%10zu %12.1f %12.1f\n", size, heap_pairs(h, size, batches), malloc_pairs(size, batches));
        p = strchr(p, ',');
        if (!p)
            break;
        p++;
    }
    printf("%10s %12.1f %12.1f\n", "mixed", heap_mixed(h, batches), malloc_mixed(batches));
    zimp_heap_close(h);
    zimp_heap_unlink(name);
    return 0;
}
