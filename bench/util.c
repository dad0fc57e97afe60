/* Small helpers shared by the mechanism implementations. */
#define _GNU_SOURCE
#include "mech.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int mech_nprocs_online(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void mech_relax(const struct mech_chan *c)
{
    if (c->oversubscribed)
        sched_yield();
    else
        __builtin_ia32_pause();
}

int mech_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int mech_read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EPIPE;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

void *mech_map_shared(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void mech_unmap(void *p, size_t len)
{
    if (p)
        munmap(p, len);
}

long mech_read_sysctl(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (!f)
        return -1;
    if (fscanf(f, "%ld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

void *mech_alloc_local(size_t len)
{
    void *p = NULL;
    if (len == 0)
        len = 1;
    if (posix_memalign(&p, 4096, len) != 0)
        return NULL;
    memset(p, 0, len);
    return p;
}
