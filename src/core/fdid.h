/*
 * Descriptors the program may take. zimp keeps some descriptors open
 * (pidfds of the processes it watches, segments, sockets, an epoll set); a
 * program may close the descriptors it did not open (daemons close 3..1023)
 * or dup2 over them, and then the number is the program's: zimp must
 * neither trust what it reads there nor close it. What a descriptor is
 * (device, inode, O_NONBLOCK) is noted when zimp opens it and compared
 * before each use. Static inline: libzimp and the MPI layer (which links
 * only libzimp's public symbols) share this one copy.
 */
#ifndef ZIMP_CORE_FDID_H
#define ZIMP_CORE_FDID_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

struct zimp_fdid { uint64_t dev, ino; int nb; };

static inline void zimp__fd_note(int fd, struct zimp_fdid *id)
{
    struct stat st;
    int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (fd < 0 || fl < 0 || fstat(fd, &st) != 0) {
        *id = (struct zimp_fdid){ 0, 0, -1 };      /* never matches */
        return;
    }
    *id = (struct zimp_fdid){ (uint64_t)st.st_dev, (uint64_t)st.st_ino, fl & O_NONBLOCK };
}

static inline bool zimp__fd_is(int fd, const struct zimp_fdid *id)
{
    struct stat st;
    int fl = fd >= 0 && id->nb >= 0 ? fcntl(fd, F_GETFL) : -1;
    return fl >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_dev == id->dev && (uint64_t)st.st_ino == id->ino &&
           (fl & O_NONBLOCK) == id->nb;
}

/* Closes *fd if it still is what was noted (else it is the program's now); *fd = -1. */
static inline void zimp__fd_close(int *fd, const struct zimp_fdid *id)
{
    if (*fd >= 0 && zimp__fd_is(*fd, id))
        close(*fd);
    *fd = -1;
}

/*
 * A pidfd for pid, noted in *id; -1 if none (*gone: the process is gone).
 * A member's pid is its process id, so a pid that now names a thread of
 * another process is gone too: pidfd_open refuses it (ENOENT on recent
 * kernels, EINVAL even without flags on older ones), while /proc shows the
 * thread at /proc/PID, where it would look alive. On pidfs every pidfd of
 * one process has the same inode, so ours is opened
 * non-blocking (PIDFD_NONBLOCK, Linux 5.10+; it only changes waitid), which
 * a pidfd the program opens by default is not. What was noted must be a
 * pidfd (signal 0 through it answers for a process, alive or not) still at
 * the number: another thread may have put a file there meanwhile, and then
 * it is not ours to close.
 */
static inline int zimp__pidfd_open(pid_t pid, struct zimp_fdid *id, bool *gone)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, O_NONBLOCK);
    if (fd < 0 && errno == EINVAL)
        fd = (int)syscall(SYS_pidfd_open, pid, 0);
    *gone = fd < 0 && (errno == ESRCH || errno == ENOENT || errno == EINVAL);
    zimp__fd_note(fd, id);
    if (fd >= 0 && ((syscall(SYS_pidfd_send_signal, fd, 0, NULL, 0) != 0 && errno != ESRCH && errno != EPERM) ||
                    !zimp__fd_is(fd, id)))
        return -1;
    return fd;
}

#endif
