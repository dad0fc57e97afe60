/* synth.c - synthetic allocation-heavy workload for the zeroing evaluation.
 *
 * Per iteration: (A) build and free a temporary linked structure of many
 * small records, (B) replace part of a long-lived object set, (C) allocate,
 * fill and free message buffers of 256 KiB-1 MiB, (D) grow a string with
 * realloc. Data is text-like (about 4 bits of entropy per byte), so both
 * zero detection and compression matter. Deterministic for a given seed.
 *
 *   synth [iterations] [live objects] [temp records]
 * With SYNTH_PAUSE=1 it writes "pause\n" to stdout halfway (right after a
 * temporary structure was freed) and waits for a line on stdin: the
 * checkpoint point of the evaluation.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* log-uniform size in [lo, hi) */
static size_t logsize(size_t lo, size_t hi)
{
    double r = (double)(next() >> 11) / 9007199254740992.0;
    double l = __builtin_log((double)lo), h = __builtin_log((double)hi);
    return (size_t)__builtin_exp(l + r * (h - l));
}

static void fill(unsigned char *p, size_t n)
{
    uint64_t x = next();
    for (size_t i = 0; i < n; i++) {
        if ((i & 15) == 0)
            x = next();
        p[i] = (unsigned char)('a' + ((x >> ((i & 15) * 4)) & 15));
    }
}

struct rec { struct rec *next; size_t n; unsigned char data[]; };

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 80;
    int live_n = argc > 2 ? atoi(argv[2]) : 6000;
    int temp_n = argc > 3 ? atoi(argv[3]) : 40000;
    int pause_at = getenv("SYNTH_PAUSE") && atoi(getenv("SYNTH_PAUSE")) ? iters / 2 : -1;
    unsigned char **live = calloc((size_t)live_n, sizeof *live);
    size_t *live_len = calloc((size_t)live_n, sizeof *live_len);
    uint64_t sum = 0;
    if (!live || !live_len)
        return 1;
    for (int i = 0; i < live_n; i++) {
        live_len[i] = next() % 100 == 0 ? logsize(65536, 1 << 20) : logsize(32, 32768);
        live[i] = malloc(live_len[i]);
        fill(live[i], live_len[i]);
    }
    for (int it = 0; it < iters; it++) {
        /* B: replace a share of the long-lived objects */
        for (int k = 0; k < live_n / 4; k++) {
            int i = (int)(next() % (uint64_t)live_n);
            free(live[i]);
            live_len[i] = next() % 100 == 0 ? logsize(65536, 1 << 20) : logsize(32, 32768);
            live[i] = malloc(live_len[i]);
            fill(live[i], live_len[i]);
        }
        /* C: message buffers */
        for (int k = 0; k < 16; k++) {
            size_t n = logsize(256 << 10, 1 << 20);
            unsigned char *b = malloc(n);
            int src = (int)(next() % (uint64_t)live_n);
            for (size_t off = 0; off < n; off += live_len[src])
                memcpy(b + off, live[src], n - off < live_len[src] ? n - off : live_len[src]);
            sum += b[n / 2];
            free(b);
        }
        /* D: string builder */
        size_t cap = 64, len = 0;
        char *s = malloc(cap);
        while (len < (256u << 10)) {
            if (len + 64 > cap) {
                cap *= 2;
                s = realloc(s, cap);
            }
            len += (size_t)snprintf(s + len, 64, "rec %llu;", (unsigned long long)(next() % 1000000));
        }
        sum += (unsigned char)s[len / 2];
        free(s);
        /* A: temporary structure, built then freed */
        struct rec *head = NULL;
        for (int k = 0; k < temp_n; k++) {
            size_t n = logsize(16, 2048);
            struct rec *r = malloc(sizeof *r + n);
            r->n = n;
            fill(r->data, n);
            r->next = head;
            head = r;
        }
        for (struct rec *r = head; r;) {
            struct rec *nx = r->next;
            sum += r->data[r->n / 2];
            free(r);
            r = nx;
        }
        if (it == pause_at) {
            char line[16];
            fputs("pause\n", stdout);
            fflush(stdout);
            if (!fgets(line, sizeof line, stdin))
                return 1;
        }
    }
    for (int i = 0; i < live_n; i++)
        free(live[i]);
    printf("checksum %llu\n", (unsigned long long)sum);
    return 0;
}
