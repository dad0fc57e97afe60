/* Single-copy transfers done by the kernel, one-sided: the study's "Kaput"
 * (a kernel module mapping the other process's pages; today the kernel's
 * own cross-memory attach, process_vm_readv / process_vm_writev) and its
 * "Ptrace" (read the source's /proc/PID/mem). Neither needs the memory to
 * be registered: the address is enough, which the driver hands over once
 * (the study's register_mem). Both need the kernel's ptrace access check
 * (PTRACE_MODE_ATTACH) to pass; where it does not (Yama, a container
 * without CAP_SYS_PTRACE) attach() fails with -EPERM or -EACCES and the
 * driver reports the mechanism n/a with that reason. The gets serve one to
 * many as they are: each destination reads the source on its own. */
#define _GNU_SOURCE
#include "xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- process_vm_readv (get) and process_vm_writev (put) ---- */

struct cma_shared {
    alignas(64) _Atomic uint64_t landed;   /* put: transfers completed by the source */
};

struct cma_local { uint64_t count; };

static int cma_init(struct xfer_ctx *c)
{
    c->shared = xfer_map_shared(sizeof(struct cma_shared));
    return c->shared ? 0 : -ENOMEM;
}

static int cma_attach(struct xfer_ctx *c)
{
    /* the side whose memory the other one reaches lets it in */
    int target = (c->x->flags & XFER_GET) ? XFER_SRC : XFER_DST;
    if ((int)c->role == target)
        xfer_allow_peer_access();
    c->local = calloc(1, sizeof(struct cma_local));
    return c->local ? 0 : -ENOMEM;
}

/* One call moves everything; the loop only covers a short count (a page
 * that went away), which the kernel reports rather than failing. */
static int cma_move(pid_t peer, void *local, void *remote, size_t len, int write)
{
    size_t done = 0;
    while (done < len) {
        struct iovec l = { (char *)local + done, len - done };
        struct iovec r = { (char *)remote + done, len - done };
        ssize_t n = write ? process_vm_writev(peer, &l, 1, &r, 1, 0)
                          : process_vm_readv(peer, &l, 1, &r, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        done += (size_t)n;
    }
    return 0;
}

static int cma_get_send(struct xfer_ctx *c, const void *src, void *peer_dst, size_t len)
{
    (void)c, (void)src, (void)peer_dst, (void)len;
    return 0;   /* one-sided: the source does nothing */
}

static int cma_get_recv(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len)
{
    return cma_move(c->peer, dst, (void *)peer_src, len, 0);
}

static int cma_put_send(struct xfer_ctx *c, const void *src, void *peer_dst, size_t len)
{
    struct cma_shared *s = c->shared;
    struct cma_local *l = c->local;
    int rc = cma_move(c->peer, (void *)src, peer_dst, len, 1);
    if (rc < 0)
        return rc;
    /* release pairs with the destination's acquire: it reads the bytes only
     * after it sees the count (the kernel's copy finished before the call
     * returned; the release orders the count after it for this thread) */
    atomic_store_explicit(&s->landed, ++l->count, memory_order_release);
    return 0;
}

static int cma_put_recv(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len)
{
    struct cma_shared *s = c->shared;
    struct cma_local *l = c->local;
    unsigned spins = 0;
    (void)dst, (void)peer_src, (void)len;
    l->count++;
    while (atomic_load_explicit(&s->landed, memory_order_acquire) < l->count)
        xfer_relax(&spins);
    return 0;
}

static void cma_detach(struct xfer_ctx *c)
{
    free(c->local);
    c->local = NULL;
}

static void cma_finalize(struct xfer_ctx *c)
{
    xfer_unmap(c->shared, sizeof(struct cma_shared));
    c->shared = NULL;
}

const struct xfer xfer_cma_get = {
    .name = "cma-get", .label = "process_vm_readv (get)", .study_row = "Kaput get",
    .flags = XFER_GET | XFER_FANOUT,
    .init = cma_init, .attach = cma_attach,
    .send = cma_get_send, .recv = cma_get_recv,
    .detach = cma_detach, .finalize = cma_finalize,
};

const struct xfer xfer_cma_put = {
    .name = "cma-put", .label = "process_vm_writev (put)", .study_row = "Kaput put",
    .flags = XFER_PUT,
    .init = cma_init, .attach = cma_attach,
    .send = cma_put_send, .recv = cma_put_recv,
    .detach = cma_detach, .finalize = cma_finalize,
};

/* ---- /proc/PID/mem: opened once (procmem), or with the study's
 * PTRACE_ATTACH / read / PTRACE_DETACH around every transfer (ptrace) ---- */

struct mem_local { int fd; };

static int ptrace_recv(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len);

static int mem_attach(struct xfer_ctx *c)
{
    struct mem_local *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    c->local = l;
    l->fd = -1;
    if (c->role == XFER_SRC) {
        xfer_allow_peer_access();
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)c->peer);
    /* the access check happens here: EACCES/EPERM when ptrace is refused */
    l->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (l->fd < 0)
        return -errno;
    /* a seccomp filter may refuse ptrace() itself while open() passed:
     * find out now (an empty transfer attaches and detaches) */
    return c->x->recv == ptrace_recv ? ptrace_recv(c, NULL, NULL, 0) : 0;
}

static int mem_send(struct xfer_ctx *c, const void *src, void *peer_dst, size_t len)
{
    (void)c, (void)src, (void)peer_dst, (void)len;
    return 0;   /* one-sided: the destination reads */
}

static int mem_read(int fd, void *dst, const void *peer_src, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)dst + done, len - done, (off_t)((uintptr_t)peer_src + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        done += (size_t)n;
    }
    return 0;
}

static int procmem_recv(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len)
{
    struct mem_local *l = c->local;
    return mem_read(l->fd, dst, peer_src, len);
}

/* The study's steps 1-3: stop the source, read, let it go. */
static int ptrace_recv(struct xfer_ctx *c, void *dst, const void *peer_src, size_t len)
{
    struct mem_local *l = c->local;
    if (ptrace(PTRACE_ATTACH, c->peer, NULL, NULL) < 0)
        return -errno;
    int st, rc = 0;
    while (waitpid(c->peer, &st, __WALL) < 0)
        if (errno != EINTR) {
            rc = -errno;
            break;
        }
    if (rc == 0 && !WIFSTOPPED(st))
        rc = -ESRCH;         /* the source exited instead of stopping */
    if (rc == 0)
        rc = mem_read(l->fd, dst, peer_src, len);
    if (ptrace(PTRACE_DETACH, c->peer, NULL, NULL) < 0 && rc == 0)
        rc = -errno;
    return rc;
}

static void mem_detach(struct xfer_ctx *c)
{
    struct mem_local *l = c->local;
    if (l && l->fd >= 0)
        close(l->fd);
    free(l);
    c->local = NULL;
}

static int mem_init(struct xfer_ctx *c)
{
    (void)c;
    return 0;   /* nothing to set up: any address of the source can be read */
}

static void mem_finalize(struct xfer_ctx *c)
{
    (void)c;
}

const struct xfer xfer_procmem = {
    .name = "procmem", .label = "/proc/PID/mem pread", .study_row = "Ptrace (without the stop)",
    .flags = XFER_GET | XFER_FANOUT,
    .init = mem_init, .attach = mem_attach,
    .send = mem_send, .recv = procmem_recv,
    .detach = mem_detach, .finalize = mem_finalize,
};

const struct xfer xfer_ptrace = {
    .name = "ptrace", .label = "ptrace attach + /proc/PID/mem", .study_row = "Ptrace",
    .flags = XFER_GET,
    .init = mem_init, .attach = mem_attach,
    .send = mem_send, .recv = ptrace_recv,
    .detach = mem_detach, .finalize = mem_finalize,
};
