/*
 * Corruption test: while a sender and two receivers run on a live channel,
 * a third process sets every header, wait, record and slot field to extreme
 * values, one at a time. The members must stay alive, never hang, and see
 * only return codes (messages, -EPROTO, -ECONNRESET, timeouts); new opens of
 * a segment with a broken header must fail with -EPROTO.
 *
 * Exit 0 on success, 1 on failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zimp/zimp.h"
#include "shm/layout_int.h"

#define FAIL(...) do { fprintf(stderr, "corrupt: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Codes a member may see on a corrupted channel. */
static int acceptable(long rc)
{
    return rc >= 0 || rc == -EAGAIN || rc == -ETIMEDOUT || rc == -EPROTO || rc == -ECONNRESET ||
           rc == -EPIPE || rc == -EBADMSG || rc == -EMSGSIZE || rc == -EUSERS;
}

static void run_sender(const char *name, uint64_t until)
{
    zimp_sender *s = NULL;
    char msg[64];
    uint64_t n = 0;
    while (now_ms() < until) {
        if (!s && zimp_sender_open(name, &s) != 0) {
            usleep(1000);
            continue;
        }
        memset(msg, (int)(n & 0xff), sizeof msg);
        int rc = zimp_send(s, msg, (size_t)(n % sizeof msg), 20000000);
        if (!acceptable(rc))
            FAIL("sender: unexpected %d (%s)", rc, zimp_strerror(rc));
        if (rc == -EPROTO) {       /* record taken over: start afresh */
            zimp_sender_close(s);
            s = NULL;
        }
        n++;
    }
    zimp_sender_close(s);
}

static void run_receiver(const char *name, uint64_t until, int zero_copy)
{
    zimp_receiver *r = NULL;
    char buf[64];
    while (now_ms() < until) {
        if (!r && zimp_receiver_open(name, &r) != 0) {
            usleep(1000);
            continue;
        }
        long rc;
        if (zero_copy) {
            const void *p;
            size_t len;
            rc = zimp_read(r, &p, &len, 20000000);
            if (rc == 0) {
                if (len > 64)
                    FAIL("receiver: read returned %zu bytes from 64-byte slots", len);
                volatile char sink = ((const char *)p)[len ? len - 1 : 0];   /* must be mapped */
                (void)sink;
                rc = zimp_release(r);
            }
        } else {
            rc = zimp_recv(r, buf, sizeof buf, 20000000);
        }
        if (!acceptable(rc))
            FAIL("receiver: unexpected %ld (%s)", rc, zimp_strerror((int)rc));
        if (rc == -ECONNRESET || rc == -EPROTO) {
            zimp_receiver_close(r);
            r = NULL;
        }
    }
    zimp_receiver_close(r);
}

struct field {
    const char *what;
    size_t off;
    size_t width;
};

int main(void)
{
    char name[64], path[128];
    snprintf(name, sizeof name, "corrupt-%d", (int)getpid());
    snprintf(path, sizeof path, "/dev/shm/zimp.%s", name);
    struct zimp_config cfg = { .slots = 8, .slot_size = 64, .max_senders = 2, .max_receivers = 4 };
    int rc = zimp_create(name, &cfg);
    if (rc != 0)
        FAIL("create: %s", zimp_strerror(rc));
    struct zimp_geometry g;
    if (zimp__geometry(8, 64, 2, 4, false, &g) != 0)
        FAIL("geometry");

    const int rounds = getenv("ZIMP_SANITIZER") && *getenv("ZIMP_SANITIZER") ? 2 : 4;
    struct field fields[64];
    size_t nf = 0;
#define F(w, o, s) fields[nf++] = (struct field){ w, (o), (s) }
    F("magic", offsetof(struct zimp_header, magic), 8);
    F("layout_major", offsetof(struct zimp_header, layout_major), 2);
    F("header_size", offsetof(struct zimp_header, header_size), 4);
    F("segment_size", offsetof(struct zimp_header, segment_size), 8);
    F("slots", offsetof(struct zimp_header, slots), 4);
    F("slot_size", offsetof(struct zimp_header, slot_size), 4);
    F("max_senders", offsetof(struct zimp_header, max_senders), 4);
    F("max_receivers", offsetof(struct zimp_header, max_receivers), 4);
    F("flags", offsetof(struct zimp_header, flags), 4);
    F("ready", offsetof(struct zimp_header, ready), 4);
    F("tail", offsetof(struct zimp_header, tail), 8);
    F("sender_opens", offsetof(struct zimp_header, sender_opens), 8);
    F("off_slots", offsetof(struct zimp_header, off_slots), 8);
    F("off_data", offsetof(struct zimp_header, off_data), 8);
    F("data_stride", offsetof(struct zimp_header, data_stride), 4);
    F("wait.pub_futex", g.off_wait + offsetof(struct zimp_wait, pub_futex), 4);
    F("wait.recv_waiting", g.off_wait + offsetof(struct zimp_wait, recv_waiting), 4);
    F("wait.fd_waiting", g.off_wait + offsetof(struct zimp_wait, fd_waiting), 4);
    F("wait.send_waiting", g.off_wait + offsetof(struct zimp_wait, send_waiting), 4);
    F("wait.recv_hwm", g.off_wait + offsetof(struct zimp_wait, recv_hwm), 4);
    for (uint32_t i = 0; i < 2; i++) {
        size_t b = g.off_senders + i * sizeof(struct zimp_sender_rec);
        F("sender.owner", b + offsetof(struct zimp_sender_rec, owner), 8);
        F("sender.ident", b + offsetof(struct zimp_sender_rec, ident), 8);
        F("sender.intent", b + offsetof(struct zimp_sender_rec, intent), 8);
        F("sender.netns", b + offsetof(struct zimp_sender_rec, netns), 8);
    }
    for (uint32_t i = 0; i < 2; i++) {
        size_t b = g.off_receivers + (size_t)i * g.receiver_stride;
        F("receiver.head", b + offsetof(struct zimp_receiver_rec, head), 8);
        F("receiver.owner", b + offsetof(struct zimp_receiver_rec, owner), 8);
        F("receiver.armed", b + offsetof(struct zimp_receiver_rec, armed), 4);
        F("receiver.netns", b + offsetof(struct zimp_receiver_rec, netns), 8);
    }
    for (uint32_t i = 0; i < 3; i++) {
        size_t b = g.off_slots + (size_t)i * sizeof(struct zimp_slot);
        F("slot.seq", b + offsetof(struct zimp_slot, seq), 8);
        F("slot.len", b + offsetof(struct zimp_slot, len), 4);
        F("slot.crc", b + offsetof(struct zimp_slot, crc), 4);
    }
#undef F
    static const uint64_t extremes[] = { 0, 1, 0x7fffffffffffffffull, 0xffffffffffffffffull,
                                         0x8000000000000000ull, 0xdeadbeefcafef00dull };
    const size_t nx = sizeof extremes / sizeof extremes[0];
    uint64_t run_ms = (uint64_t)rounds * nf * nx * 3 / 2 + 500;

    uint64_t until = now_ms() + run_ms;
    pid_t kids[3];
    for (int k = 0; k < 3; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            if (k == 0)
                run_sender(name, until);
            else
                run_receiver(name, until, k == 2);
            _exit(0);
        }
    }

    int fd = open(path, O_RDWR);
    if (fd < 0)
        FAIL("open %s: %s", path, strerror(errno));
    char *base = mmap(NULL, g.segment_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        FAIL("mmap");
    usleep(50000);
    unsigned refused = 0, header_fields = 0;
    for (int round = 0; round < rounds; round++) {
        for (size_t f = 0; f < nf; f++) {
            for (size_t x = 0; x < nx; x++) {
                unsigned char saved[8];
                uint64_t v = extremes[x];
                memcpy(saved, base + fields[f].off, fields[f].width);
                memcpy(base + fields[f].off, &v, fields[f].width);    /* little-endian truncation */
                if (fields[f].off < offsetof(struct zimp_header, tail) && round == 0 &&
                    memcmp(saved, base + fields[f].off, fields[f].width) != 0) {
                    /* A broken header: new members are refused, cleanly. */
                    zimp_receiver *r;
                    int orc = zimp_receiver_open(name, &r);
                    header_fields++;
                    if (orc == 0)
                        zimp_receiver_close(r);
                    else if (orc == -EPROTO)
                        refused++;
                    else
                        FAIL("open with corrupted %s: %d (%s)", fields[f].what, orc, zimp_strerror(orc));
                    if (orc == -EPROTO && zimp_last_detail()[0] == '\0')
                        FAIL("-EPROTO without a detail string");
                }
                usleep(1000);
                /* Restore the shape of the channel, not its progress. */
                if (fields[f].off < offsetof(struct zimp_header, tail) ||
                    (fields[f].off >= offsetof(struct zimp_header, off_wait) &&
                     fields[f].off < sizeof(struct zimp_header)))
                    memcpy(base + fields[f].off, saved, fields[f].width);
            }
        }
    }

    int failed = 0;
    uint64_t deadline = until + 5000;     /* members bound every wait: 5 s of slack */
    for (int k = 0; k < 3; k++) {
        int st;
        pid_t w;
        while ((w = waitpid(kids[k], &st, WNOHANG)) == 0 && now_ms() < deadline)
            usleep(10000);
        if (w == 0) {
            fprintf(stderr, "corrupt: member %d hangs\n", k);
            kill(kids[k], SIGKILL);
            waitpid(kids[k], &st, 0);
            failed = 1;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "corrupt: member %d died (status 0x%x)\n", k, st);
            failed = 1;
        }
    }
    if (refused == 0)
        FAIL("no corrupted header was refused (%u tried)", header_fields);
    munmap(base, g.segment_size);
    close(fd);
    zimp_unlink(name);
    if (!failed)
        printf("corrupt: %zu fields x %zu values x %d rounds, %u/%u broken headers refused: ok\n",
               nf, nx, rounds, refused, header_fields);
    return failed;
}
