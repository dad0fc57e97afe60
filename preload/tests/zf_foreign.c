/* zf_foreign.c - a program with its own allocator (a bump allocator over a
 * static arena; free does nothing). Preloading libzimp-zerofree.so into it
 * must print a warning and change nothing. Prints "foreign-ok" on success. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Alignas(64) unsigned char arena[64 << 20];
static size_t used;

static void *bump(size_t align, size_t n)
{
    size_t start = (used + sizeof(size_t) + align - 1) & ~(align - 1);
    if (start + n > sizeof arena) {
        errno = ENOMEM;
        return NULL;
    }
    ((size_t *)(arena + start))[-1] = n;      /* size just before the block */
    used = start + n;
    return arena + start;
}

void *malloc(size_t n) { return bump(16, n); }
void free(void *p) { (void)p; }
void *calloc(size_t a, size_t b)
{
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) { errno = ENOMEM; return NULL; }
    return bump(16, n);                         /* the arena starts zeroed */
}
void *realloc(void *p, size_t n)
{
    void *q = bump(16, n);
    if (p && q) {
        size_t old = ((size_t *)p)[-1];
        memcpy(q, p, old < n ? old : n);
    }
    return q;
}
void *memalign(size_t a, size_t n) { return bump(a < 16 ? 16 : a, n); }
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n)
{
    void *p = memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
size_t malloc_usable_size(void *p) { return p ? ((size_t *)p)[-1] : 0; }

int main(void)
{
    char *p = malloc(1000);
    memset(p, 'x', 1000);
    p = realloc(p, 5000);
    if (p[999] != 'x') return 1;
    free(p);
    if (p[500] != 'x') return 1;               /* nobody zeroed it */
    static const char ok[] = "foreign-ok\n";
    return write(2, ok, sizeof ok - 1) == (ssize_t)(sizeof ok - 1) ? 0 : 1;
}
