/*
 * Whether runnable tasks outnumber the CPUs this process may run on: the
 * machine's count of runnable tasks (/proc/loadavg, which counts the caller)
 * against the affinity mask. Inside a container the count may be the
 * host's. Shared by libzimp's spin (notify.c) and the MPI layer's poll
 * (src/mpi/transport.c), which each decide how often to ask: it costs an
 * open and a read.
 */
#ifndef ZIMP_CORE_RUNNABLE_H
#define ZIMP_CORE_RUNNABLE_H

#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

static inline bool zimp__runnable_exceeds_cpus(void)
{
    char buf[128];
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    unsigned running = 0;
    cpu_set_t set;
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return sscanf(buf, "%*s %*s %*s %u/", &running) == 1 && sched_getaffinity(0, sizeof set, &set) == 0 &&
           running > (unsigned)CPU_COUNT(&set);
}

#endif
