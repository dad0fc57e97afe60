/* Errors, detail strings, names, time and checksums. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/membarrier.h>
#include <time.h>
#include <unistd.h>

#include "core/core_int.h"
#include "trace/trace_hook.h"

/* ---- fork ---- */

/*
 * The token of this process's handles lives on a page the kernel empties in
 * every child, however it was made: fork(), _Fork(), clone() without
 * CLONE_VM, syscall(SYS_fork). pthread_atfork handlers run only for the
 * first (a child of _Fork() once used its parent's handles: two writers of
 * one sender's positions). Where the page cannot be had, the atfork handler
 * below is all there is. A child's first handle arms the page with a token
 * no inherited handle holds: the last one given out, which it inherited,
 * plus one.
 */
static zimp_a32 fork_fallback;
zimp_a32 *zimp__fork_word = &fork_fallback;
static zimp_a32 fork_last;

static void forked_child(void) { zimp_store_relaxed(zimp__fork_word, 0); }

__attribute__((constructor)) static void fork_watch(void)
{
    void *page = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page != MAP_FAILED && madvise(page, (size_t)sysconf(_SC_PAGESIZE), MADV_WIPEONFORK) == 0)
        zimp__fork_word = page;
    else if (page != MAP_FAILED)
        munmap(page, (size_t)sysconf(_SC_PAGESIZE));
    pthread_atfork(NULL, NULL, forked_child);
    zimp__fork_token();
}

unsigned zimp__fork_token(void)
{
    uint32_t cur = zimp_load_relaxed(zimp__fork_word);
    if (cur != 0)
        return cur;
    uint32_t next = zimp_add_sc(&fork_last, 1) + 1;
    if (next == 0)                       /* 0 means "not armed": never a token */
        next = zimp_add_sc(&fork_last, 1) + 1;
    /* Threads of a new child may race here: one token wins, all return it. */
    zimp_cas_sc(zimp__fork_word, &cur, next);
    return zimp_load_relaxed(zimp__fork_word);
}

/* ---- asymmetric fences (docs/protocol.md, "membarrier") ---- */

/*
 * A full barrier on every running thread of every process that registered
 * (zimp__membarrier_register): what a waiter of a one-sender channel issues
 * between announcing its sleep and its last look, in place of the fence its
 * sender no longer makes after each message. 0 or -errno (-ENOSYS on a
 * kernel before 4.16, -EPERM where a seccomp profile denies the call).
 */
int zimp__membarrier(void)
{
    return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0 ? 0 : -errno;
}

/*
 * Whether this process can rely on zimp__membarrier: the kernel lists the
 * command (MEMBARRIER_CMD_QUERY) and a call succeeds. A seccomp filter that
 * answers every membarrier call with 0 without running it lists nothing.
 */
int zimp__membarrier_usable(void)
{
    long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (q < 0)
        return -errno;
    if (!(q & MEMBARRIER_CMD_GLOBAL_EXPEDITED))
        return -ENOSYS;
    return zimp__membarrier();
}

/* MEMBARRIER_CMD_GET_REGISTRATIONS (Linux 6.3), which older headers lack. */
#define ZIMP_MEMBARRIER_GET_REGISTRATIONS (1 << 9)

/*
 * Registers this process as a target of zimp__membarrier: 0 or -errno.
 * Where the kernel can say (Linux 6.3 on), the registration is checked: a
 * filter that answers with 0 without running the call registers nothing.
 */
int zimp__membarrier_register(void)
{
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) != 0)
        return -errno;
    long reg = syscall(SYS_membarrier, ZIMP_MEMBARRIER_GET_REGISTRATIONS, 0, 0);
    if (reg < 0)
        return errno == EINVAL ? 0 : -errno;      /* a kernel before 6.3: trust the answer */
    return (reg & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) ? 0 : -ENOSYS;
}

/* ---- notification addresses (N1) ---- */

socklen_t zimp__notify_addr(uint64_t nonce, uint32_t index, uint32_t gen, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    /* Abstract namespace: a leading NUL, no file, no permission, no symlink. */
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "zimp.%016llx.%u.%u",
                     (unsigned long long)nonce, index, gen);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

uint64_t zimp__netns(void)
{
    struct stat st;
    return stat("/proc/self/ns/net", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

uint64_t zimp__pidns(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static __thread char detail[256];

int zimp__fail(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    ZIMP_TRACE(ZIMP_TL_ERROR, zimp__trace_error(err, NULL, detail));
    return err;
}

bool zimp__read_all(int fd, void *buf, size_t n, off_t off)
{
    for (size_t done = 0; done < n;) {
        ssize_t k = pread(fd, (char *)buf + done, n - done, off + (off_t)done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        done += (size_t)k;
    }
    return true;
}

void zimp__note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
}

void zimp__clear_detail(void) { detail[0] = '\0'; }

ZIMP_API const char *zimp_last_detail(void) { return detail; }

ZIMP_API const char *zimp_strerror(int err)
{
    if (err == INT_MIN)
        return "unknown error";
    if (err > 0)
        err = -err;
    switch (err) {
    case 0:            return "success";
    case -EAGAIN:      return "would block: no message waiting or no free slot";
    case -ETIMEDOUT:   return "timed out (for a sender: a receiver or sender held it back past the stall timeout)";
    case -EPIPE:       return "channel drained and every sender has left";
    case -ECONNRESET:  return "this sender or receiver was evicted from the channel";
    case -EMSGSIZE:    return "message larger than the slot or than the receive buffer";
    case -EUSERS:      return "no free member record (the channel's sender or receiver table, or the heap's, is full)";
    case -EPROTO:      return "channel segment failed validation (corrupted or foreign)";
    case -EEXIST:      return "a channel of that name exists";
    case -ENOENT:      return "no channel of that name";
    case -EBUSY:       return "a loan or borrow is already outstanding on this handle";
    case -EBADF:       return "handle inherited across fork: only the process that opened it may use it";
    case -EXDEV:       return "a member is in another namespace that zimp cannot reach";
    case -EBADMSG:     return "message checksum mismatch: changed after publication";
    case -EINVAL:      return "invalid argument";
    case -ENAMETOOLONG:return "channel name too long";
    case -EACCES:      return "permission denied";
    case -EPERM:       return "operation not permitted (a segment owned by another user, or membarrier(2) denied "
                              "to a receiver of a one-sender channel)";
    case -ENOMEM:      return "out of memory";
    case -EOPNOTSUPP:  return "not supported";
    default: {
        const char *s = strerrordesc_np(-err);
        return s ? s : "unknown error";
    }
    }
}

int zimp__path(const char *name, char *path, size_t cap)
{
    return zimp__shm_path(ZIMP_SHM_PREFIX, "channel", name, path, cap);
}

int zimp__shm_path(const char *prefix, const char *kind, const char *name, char *path, size_t cap)
{
    if (!name)
        return zimp__fail(-EINVAL, "%s name is NULL", kind);
    size_t n = strnlen(name, ZIMP_NAME_MAX + 1);
    if (n == 0)
        return zimp__fail(-EINVAL, "%s name is empty", kind);
    if (n > ZIMP_NAME_MAX)
        return zimp__fail(-ENAMETOOLONG, "%s name longer than %d bytes", kind, ZIMP_NAME_MAX);
    if (name[0] == '.')
        return zimp__fail(-EINVAL, "%s name must not start with '.'", kind);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok)
            return zimp__fail(-EINVAL, "%s name has byte 0x%02x at %zu; allowed: A-Z a-z 0-9 . _ -",
                              kind, c, i);
    }
    int w = snprintf(path, cap, "%s/%s%s", ZIMP_SHM_DIR, prefix, name);
    if (w < 0 || (size_t)w >= cap)
        return zimp__fail(-ENAMETOOLONG, "segment path too long");
    return 0;
}

uint64_t zimp__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t zimp__coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t zimp__deadline(int64_t timeout_ns)
{
    if (timeout_ns < 0)
        return UINT64_MAX;
    if (timeout_ns == 0)
        return 0;
    uint64_t now = zimp__now_ns();
    return (uint64_t)timeout_ns > UINT64_MAX - 1 - now ? UINT64_MAX - 1 : now + (uint64_t)timeout_ns;
}

/* ---- CRC32C (Castagnoli): SSE4.2 instruction where present, table otherwise ---- */

static uint32_t crc_table[256];

static void crc_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
        crc_table[i] = c;
    }
}

static uint32_t crc_soft(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n--)
        crc = crc_table[(crc ^ *p++) & 0xffu] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

static bool crc_use_hw;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_use_hw = __builtin_cpu_supports("sse4.2");
#endif
    crc_table_init();
}

uint32_t zimp__crc32c(const void *buf, size_t len)
{
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
    if (crc_use_hw)
        return ~crc_hw(~0u, buf, len);
#endif
    return ~crc_soft(~0u, buf, len);
}
