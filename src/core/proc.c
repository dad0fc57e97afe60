/*
 * Process identity and liveness, without a daemon.
 *
 * A member record holds (pid, ident). With pidfs (Linux 6.9+) ident is the
 * inode of a pidfd for the member: the kernel never gives two processes of
 * one boot the same one, so identity is exact. Without pidfs it is the
 * process start time (field 22 of /proc/PID/stat, clock ticks since boot),
 * which a pid reused within the same tick shares. Liveness is checked
 * through a pidfd, opened once per record owner and verified against ident
 * right after opening (the pidfd pins the process it was opened for), so
 * later checks are an fstat() (is the descriptor still ours? the program
 * may have closed or reused its number) and a poll(). A zombie counts as
 * dead: its pidfd is readable as soon as it exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "core/core_int.h"
#include "trace/trace_hook.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/*
 * Whether /proc is this process's pid namespace's: /proc/self names us. A
 * sandbox may have none, or one of another namespace (a chroot, a covered
 * mount), where /proc/PID is some other process or nothing: then /proc
 * tells nothing about members. Looked at once per process.
 */
static bool proc_ours(void)
{
    static pid_t checked_for;
    static bool ours;
    pid_t me = getpid();
    if (__atomic_load_n(&checked_for, __ATOMIC_ACQUIRE) == me)
        return __atomic_load_n(&ours, __ATOMIC_RELAXED);
    char buf[64];
    bool yes = false;
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        if (n > 0) {
            buf[n] = '\0';
            yes = atol(buf) == (long)me;
        }
        close(fd);
    }
    __atomic_store_n(&ours, yes, __ATOMIC_RELAXED);
    __atomic_store_n(&checked_for, me, __ATOMIC_RELEASE);
    return yes;
}

/*
 * Reads state, start time and (if `image` is not NULL) the image
 * fingerprint (exec_image) of `pid`: 0, -ESRCH if it does not exist, or
 * -EACCES if /proc does not show it to us (hidepid, a /proc that is not
 * ours): then nothing is known. /proc's ENOENT alone is no death: hidepid
 * answers so for other users' processes; kill(pid, 0) confirms it.
 */
static int proc_stat(pid_t pid, char *state, uint64_t *start, uint64_t *image)
{
    char path[64], buf[1024];
    if (!proc_ours())
        return -EACCES;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT && errno != ESRCH)
            return -EACCES;
        return kill(pid, 0) != 0 && errno == ESRCH ? -ESRCH : -EACCES;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int err = n < 0 ? errno : 0;
    close(fd);
    /*
     * Gone only when the kernel says so (the open's ENOENT, or ESRCH): another
     * thread of the program may close or reuse our descriptor between the
     * open and the read (EBADF, an empty read of /dev/null, another file's
     * bytes): unknown, -EAGAIN.
     */
    if (err == ESRCH)
        return -ESRCH;
    if (n <= 0)
        return -EAGAIN;
    buf[n] = '\0';
    /* comm may contain anything, even ')': fields resume after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p || !p[1] || !p[2])
        return -EAGAIN;
    p += 2;
    *state = *p;
    /* p points at field 3 (state); start time is field 22, the image's addresses 26-28. */
    unsigned long long v[7];
    for (int field = 3; field < 29; field++) {
        if (field >= 22 && field != 23 && field != 24 && field != 25)
            v[field - 22] = strtoull(p, NULL, 10);
        if (field < 28 && !(p = strchr(p, ' ')))
            return -EAGAIN;
        p++;
    }
    *start = v[0];
    if (image)
        *image = v[4] == 0 && v[5] == 0 && v[6] == 0 ? 0
                 : (v[4] * 0x9e3779b97f4a7c15ull) ^ (v[5] << 1) ^ (v[6] * 0xbf58476d1ce4e5b9ull);
    return 0;
}

/*
 * From /proc/PID/status: the process (thread group) id and its count of
 * threads; 0 where unknown. /proc shows a thread that leads no process at
 * /proc/PID too (its Tgid is another), and a process whose leading thread
 * exited as a zombie ('Z' in stat) while its other threads run (Threads > 1).
 */
static void proc_status(pid_t pid, long *tgid, long *threads)
{
    char path[64], buf[2048];
    *tgid = *threads = 0;
    if (!proc_ours())
        return;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    const char *t = strstr(buf, "\nTgid:");
    if (t)
        *tgid = atol(t + 6);
    if ((t = strstr(buf, "\nThreads:")))
        *threads = atol(t + 9);
}

#define PIDFS_MAGIC 0x50494446u

/* Identity from a pidfd when it lives on pidfs: ZIMP_IDENT_PIDFS | inode, else 0. */
static uint64_t pidfd_ident(int pidfd)
{
    struct statfs sfs;
    struct stat st;
    if (fstatfs(pidfd, &sfs) != 0 || (uint32_t)sfs.f_type != PIDFS_MAGIC || fstat(pidfd, &st) != 0)
        return 0;
    return ZIMP_IDENT_PIDFS | ((uint64_t)st.st_ino & ~ZIMP_IDENT_PIDFS);
}

uint64_t zimp__self_ident(void)
{
    static __thread pid_t cached_pid;
    static __thread uint64_t cached;
    pid_t me = getpid();
    if (cached_pid != me) {
        uint64_t id = 0;
        int fd = (int)syscall(SYS_pidfd_open, me, 0);
        if (fd >= 0) {
            id = pidfd_ident(fd);
            close(fd);
        }
        char st;
        if (id == 0 && proc_stat(me, &st, &id, NULL) != 0)
            id = 0;
        cached = id;
        cached_pid = me;
    }
    return cached;
}

/*
 * Whether process `pid` maps the file (dev, ino), at address `at` if not 0:
 * 1 yes, 0 no, -1 unknown (/proc/PID/maps unreadable: another user's
 * process without ptrace read access, hidepid, gone meanwhile; or empty:
 * the leading thread exited, or the whole process is exiting).
 */
static int maps_file(pid_t pid, uint64_t dev, uint64_t ino, uint64_t at)
{
    char path[64], buf[8192];
    if (!proc_ours())
        return -1;
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    unsigned want_major = major((dev_t)dev), want_minor = minor((dev_t)dev);
    int found = 0;
    size_t have = 0, lines = 0;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            found = -1;
            break;
        }
        have += (size_t)n;
        buf[have] = '\0';
        /* Whole lines: "start-end perms offset major:minor inode path". */
        char *line = buf, *nl;
        while ((nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
            *nl = '\0';
            lines++;
            char *f;
            uint64_t start = strtoull(line, &f, 16);
            char *perms = *f == '-' ? strchr(f, ' ') : NULL;
            char *offset = perms ? strchr(perms + 1, ' ') : NULL;
            char *dv = offset ? strchr(offset + 1, ' ') : NULL;
            if (dv) {
                unsigned long long ma = strtoull(dv + 1, &f, 16), mi = *f == ':' ? strtoull(f + 1, &f, 16) : ~0ull;
                if (strtoull(f, NULL, 10) == ino && ma == want_major && mi == want_minor && (at == 0 || start == at))
                    found = 1;
            }
            line = nl + 1;
        }
        if (found || n == 0)
            break;
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
        if (have == sizeof buf - 1)     /* a line longer than the buffer: drop it */
            have = 0;
    }
    close(fd);
    return found == 0 && lines == 0 ? -1 : found;   /* no mappings at all: an exiting leader's (no mm) */
}

/*
 * A fingerprint of pid's process image: its code and stack addresses
 * (/proc/PID/stat fields 26-28), which an exec() replaces (randomized; the
 * same without ASLR for the same program). 0 if unknown: shown only to who
 * may read the process like a debugger, as its maps are.
 */
static uint64_t exec_image(pid_t pid)
{
    char state;
    uint64_t start, image;
    return proc_stat(pid, &state, &start, &image) == 0 ? image : 0;
}

uint64_t zimp__self_image(void)
{
    static __thread pid_t cached_pid;
    static __thread uint64_t cached;
    pid_t me = getpid();
    if (cached_pid != me) {
        cached = exec_image(me);
        cached_pid = me;
    }
    return cached;
}

/*
 * The exec check of a member found alive: dead if its process (the same
 * one, by pid and identity) runs another image than the one it joined
 * with; when that is unknown, if it no longer maps the segment where it
 * did (its maps, which a large process makes long, read only when the
 * image changed since the last look). Once per ZIMP_EXEC_CHECK_NS per peer.
 * A changed or negative look is confirmed by the image read again: a
 * leader that exits meanwhile makes it unknown (0).
 */
static bool execed(struct zimp_peer *p, pid_t pid, const struct zimp_where *w)
{
    uint64_t now = zimp__coarse_ns();
    if (p->exec_at != 0 && now - p->exec_at < ZIMP_EXEC_CHECK_NS)
        return false;
    p->exec_at = now ? now : 1;
    uint64_t image = exec_image(pid);
    if (image == 0)
        return false;
    if (w->image != 0)
        return image != w->image && exec_image(pid) == image;
    if (image == p->image)
        return false;
    int r = maps_file(pid, w->dev, w->ino, w->addr);
    if (r == 1)
        p->image = image;
    return r == 0 && exec_image(pid) == image;
}

void zimp__peer_init(struct zimp_peer *p)
{
    p->owner = 0;
    p->exec_at = 0;
    p->image = 0;
    p->pidfd = -1;
    p->verified = false;
    p->dead = false;
    p->polled = false;   /* closing the pidfd also took it out of any epoll set */
}

/*
 * Whether p->pidfd still is the pidfd we opened. The program may close
 * descriptors it did not open (a daemon closing 3..1023) or dup2 over them:
 * a poll of that number then tells nothing about the member (POLLNVAL, or a
 * file that always reads ready), and closing it would close the program's.
 */
static bool pidfd_ours(const struct zimp_peer *p)
{
    return zimp__fd_is(p->pidfd, &p->pidfd_id);
}

/* Opens p's pidfd for pid (zimp__pidfd_open); p->dead if the process is gone. */
static void pidfd_open_for(struct zimp_peer *p, pid_t pid)
{
    p->pidfd = zimp__pidfd_open(pid, &p->pidfd_id, &p->dead);
    p->verified = false;             /* a fresh pidfd: the identity is checked again */
}

void zimp__peer_reset(struct zimp_peer *p)
{
    if (pidfd_ours(p))
        close(p->pidfd);
    zimp__peer_init(p);
}

/*
 * Alive by /proc: exists, not a zombie (a leading thread that exited while
 * others run is not one), leads its process, same start time (unknown
 * counts as alive). A pidfs identity cannot be checked here: only through a pidfd.
 */
static bool alive_by_proc(pid_t pid, uint64_t ident, bool *verified)
{
    char st;
    uint64_t start;
    int r = proc_stat(pid, &st, &start, NULL);
    *verified = false;
    if (r == -ESRCH)
        return false;
    if (r != 0)
        return kill(pid, 0) == 0 || errno == EPERM;
    long tgid, threads;
    proc_status(pid, &tgid, &threads);
    if (st == 'X' || st == 'x' || (st == 'Z' && threads <= 1) || (tgid > 0 && tgid != pid))
        return false;
    if (ident & ZIMP_IDENT_PIDFS)
        return true;
    if (ident != 0 && start != ident)
        return false;
    *verified = ident != 0;
    return true;
}

/* Whether the process behind a fresh pidfd is the one `ident` names. */
static bool pidfd_matches(int pidfd, pid_t pid, uint64_t ident, bool *verified)
{
    if (ident & ZIMP_IDENT_PIDFS) {
        uint64_t id = pidfd_ident(pidfd);
        *verified = id != 0;
        return id == 0 || id == ident;     /* a pidfd off pidfs cannot tell: alive */
    }
    return alive_by_proc(pid, ident, verified);
}

bool zimp__peer_alive(struct zimp_peer *p, uint64_t owner, uint64_t ident)
{
    return zimp__member_alive(p, owner, ident, NULL);
}

bool zimp__member_alive(struct zimp_peer *p, uint64_t owner, uint64_t ident, const struct zimp_where *w)
{
    pid_t pid = ZIMP_OWNER_PID(owner);
    if (pid <= 0)
        return false;
    if (p->owner != owner) {
        zimp__peer_reset(p);
        p->owner = owner;
        pidfd_open_for(p, pid);
        if (p->dead)
            ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_member(ZIMP_EV_CRASH, ZIMP_TR_NONE, 0, 0, (int32_t)pid));
    } else if (p->pidfd < 0 && !p->dead) {
        /* No pidfd (none could be opened, or the program took ours): try again,
         * since /proc cannot check a pidfs identity (a reused pid looks alive). */
        pidfd_open_for(p, pid);
        if (p->dead)
            ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_member(ZIMP_EV_CRASH, ZIMP_TR_NONE, 0, 0, (int32_t)pid));
    }
    if (p->dead)
        return false;
    if (p->pidfd >= 0) {
        /* A pidfd reads ready once its process has exited (zombies too). */
        if (!pidfd_ours(p)) {
            /* Not our pidfd any more: forget it (unclosed) and open a fresh one. */
            zimp__peer_init(p);
            return zimp__member_alive(p, owner, ident, w);
        }
        struct pollfd pfd = { .fd = p->pidfd, .events = POLLIN };
        if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
            if (!pidfd_ours(p)) {
                /* Taken between the check and the poll (another thread): it was not ours that answered. */
                zimp__peer_init(p);
                return zimp__member_alive(p, owner, ident, w);
            }
            p->dead = true;
        }
        else if (!p->verified)
            /* The pidfd was opened first and pins its process: if the pid was
             * reused before that, the identity differs and the member is dead. */
            p->dead = !pidfd_matches(p->pidfd, pid, ident, &p->verified);
    } else {
        bool verified;
        p->dead = !alive_by_proc(pid, ident, &verified);
    }
    if (!p->dead && w && w->ino != 0)
        p->dead = execed(p, pid, w);
    if (p->dead)           /* once per cached owner: later calls return above */
        ZIMP_TRACE(ZIMP_TL_INFO, zimp__trace_member(ZIMP_EV_CRASH, ZIMP_TR_NONE, 0, 0, (int32_t)pid));
    return !p->dead;
}

bool zimp__alive_once(uint64_t owner, uint64_t ident)
{
    return zimp__member_alive_once(owner, ident, NULL);
}

bool zimp__member_alive_once(uint64_t owner, uint64_t ident, const struct zimp_where *w)
{
    struct zimp_peer p;
    zimp__peer_init(&p);
    bool alive = zimp__member_alive(&p, owner, ident, w);
    zimp__peer_reset(&p);
    return alive;
}
