/* Small helpers shared by the transfer mechanisms and the driver. */
#define _GNU_SOURCE
#include "xfer.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

void xfer_relax(unsigned *spins)
{
    /* About 50 us of pausing, then give the core away: on 2 shared cores the
     * peer may be the one waiting for it. */
    if (++*spins < 4096)
        __builtin_ia32_pause();
    else
        sched_yield();
}

uint64_t xfer_touch(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint64_t sum = 0, w;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&w, p + i, 8);   /* unaligned-safe; compiles to a load */
        sum += w;
    }
    for (; i < len; i++)
        sum += p[i];
    return sum;
}

void *xfer_map_shared(size_t len)
{
    void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *xfer_map_local(size_t len)
{
    void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memset(p, 0, len);     /* MAP_POPULATE may map the zero page: write to own every page */
    return p;
}

void xfer_unmap(void *p, size_t len)
{
    if (p)
        munmap(p, len ? len : 1);
}

long xfer_read_long(const char *path)
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

/* sysfs says "32768K"; sysconf's LEVEL3 figure is wrong in some VMs. */
size_t xfer_llc_bytes(void)
{
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], unit = 0;
        long v = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fscanf(f, "%ld%c", &v, &unit) >= 1) {
            size_t b = (size_t)v * (unit == 'K' ? 1024 : unit == 'M' ? 1048576 : 1);
            best = b > best ? b : best;
        }
        fclose(f);
    }
    return best ? best : (size_t)32 << 20;
}

void xfer_allow_peer_access(void)
{
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
}
