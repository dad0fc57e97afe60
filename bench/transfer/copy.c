/* The copy routines of the study's Figure 2, today's equivalents: libc
 * memcpy, the x86 string copy (`rep movsb`, fast on CPUs with ERMS/FSRM),
 * and non-temporal 256-bit AVX2 stores (the successor of the MMX
 * non-temporal copy the study took from MP Lite). Which one a mechanism
 * uses is chosen per transfer size from the measurement (copy_choose). */
#include "xfer.h"

#include <immintrin.h>
#include <string.h>

static void copy_libc(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
}

static void copy_movsb(void *dst, const void *src, size_t n)
{
    __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

/* Streams 128 bytes per step past the cache; head and tail, and copies too
 * small to be worth a store fence, go through memcpy. */
__attribute__((target("avx2"))) static void copy_nt_avx2(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (n < COPY_NT_MIN) {
        memcpy(d, s, n);
        return;
    }
    size_t head = (32 - ((uintptr_t)d & 31)) & 31;   /* streaming stores need aligned targets */
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 128; n -= 128, d += 128, s += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)s);
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(s + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(s + 96));
        _mm256_stream_si256((__m256i *)d, a);
        _mm256_stream_si256((__m256i *)(d + 32), b);
        _mm256_stream_si256((__m256i *)(d + 64), c);
        _mm256_stream_si256((__m256i *)(d + 96), e);
    }
    /* Non-temporal stores are weakly ordered: fence before anyone is told. */
    _mm_sfence();
    memcpy(d, s, n);
}

static const char *const names[COPY_NKINDS] = { "libc memcpy", "rep movsb", "AVX2 non-temporal" };
static const copy_fn routines[COPY_NKINDS] = { copy_libc, copy_movsb, copy_nt_avx2 };

const char *copy_name(enum copy_kind k)
{
    return names[k];
}

const char *copy_unsupported(enum copy_kind k)
{
    if (k == COPY_NT_AVX2 && !__builtin_cpu_supports("avx2"))
        return "CPU without AVX2";
    return NULL;
}

copy_fn copy_routine(enum copy_kind k)
{
    return routines[k];
}

/* Inherited across fork, so children copy with the parent's choice. */
static enum copy_kind best_all[COPY_CLASSES], best_cached[COPY_CLASSES];

void copy_choose(const enum copy_kind best[COPY_CLASSES], const enum copy_kind cached[COPY_CLASSES])
{
    for (int i = 0; i < COPY_CLASSES; i++) {
        best_all[i] = copy_unsupported(best[i]) ? COPY_LIBC : best[i];
        best_cached[i] = cached[i] == COPY_NT_AVX2 ? COPY_LIBC : cached[i];
    }
}

void copy_force(enum copy_kind k)
{
    for (int i = 0; i < COPY_CLASSES; i++) {
        best_all[i] = k;
        best_cached[i] = k == COPY_NT_AVX2 ? COPY_LIBC : k;
    }
}

int copy_class(size_t total)
{
    int c = total ? 63 - __builtin_clzll((unsigned long long)total) : 0;
    return c < COPY_CLASSES ? c : COPY_CLASSES - 1;
}

enum copy_kind copy_choice(size_t total)
{
    return best_all[copy_class(total)];
}

void xcopy_out(void *dst, const void *src, size_t n, size_t total)
{
    routines[best_all[copy_class(total)]](dst, src, n);
}

void xcopy_in(void *dst, const void *src, size_t n, size_t total)
{
    routines[best_cached[copy_class(total)]](dst, src, n);
}
