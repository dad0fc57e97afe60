/*
 * libFuzzer target for the attach path and the first operations on a
 * hostile segment.
 *
 * Input byte 0 selects the mode:
 *   even: the rest of the input is a whole segment image, validated as is;
 *   odd:  the rest is a list of patches (u32 offset, u8 width, u64 value)
 *         applied to a valid segment, which is then opened as a receiver
 *         and a sender, read and written with non-blocking calls.
 * Whatever the bytes, the library must return codes, never fault or hang.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zimp/zimp.h"
#include "shm/layout_int.h"

static char name[64], path[128];
static unsigned char *pristine;
static struct zimp_geometry geo;

static void setup(void)
{
    snprintf(name, sizeof name, "fuzz-%d", (int)getpid());
    snprintf(path, sizeof path, "/dev/shm/zimp.%s", name);
    struct zimp_config cfg = { .slots = 4, .slot_size = 64, .max_senders = 2, .max_receivers = 2 };
    zimp_unlink(name);
    if (zimp_create(name, &cfg) != 0 || zimp__geometry(4, 64, 2, 2, false, &geo) != 0)
        abort();
    pristine = malloc(geo.segment_size);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || pread(fd, pristine, geo.segment_size, 0) != (ssize_t)geo.segment_size)
        abort();
    close(fd);
}

static void cleanup(void) { zimp_unlink(name); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!pristine) {
        setup();
        atexit(cleanup);
    }
    if (size == 0)
        return 0;
    if ((data[0] & 1) == 0) {
        struct zimp_geometry g;
        struct zimp_header copy;
        char why[160];
        /* A private, exactly sized copy: reads past it are caught by ASan. */
        unsigned char *img = malloc(size - 1 ? size - 1 : 1);
        memcpy(img, data + 1, size - 1);
        if (size - 1 >= sizeof(struct zimp_header))
            zimp__layout_validate(img, size - 1, &g, &copy, why, sizeof why);
        free(img);
        return 0;
    }

    unsigned char *img = malloc(geo.segment_size);
    memcpy(img, pristine, geo.segment_size);
    for (size_t i = 1; i + 13 <= size; i += 13) {
        uint32_t off;
        uint64_t v;
        memcpy(&off, data + i, 4);
        memcpy(&v, data + i + 5, 8);
        size_t w = (size_t[]){ 1, 2, 4, 8 }[data[i + 4] & 3];
        off %= (uint32_t)geo.segment_size;
        if (off + w <= geo.segment_size)
            memcpy(img + off, &v, w);
    }
    /* Rewritten in place, never truncated: a concurrent reader (a sweep by
     * zimp_reap) must not lose the pages it maps. */
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        abort();
    if (pwrite(fd, img, geo.segment_size, 0) != (ssize_t)geo.segment_size)
        abort();
    close(fd);
    free(img);

    struct zimp_info info;
    zimp_info(name, &info);
    zimp_receiver *r;
    zimp_sender *s;
    if (zimp_receiver_open(name, &r) == 0) {
        char buf[64];
        const void *p;
        size_t len;
        zimp_recv(r, buf, sizeof buf, 0);
        if (zimp_read(r, &p, &len, 0) == 0) {
            if (len > 64)
                abort();
            volatile char c = len ? ((const char *)p)[len - 1] : 0;
            (void)c;
            zimp_release(r);
        }
        zimp_receiver_close(r);
    }
    if (zimp_sender_open(name, &s) == 0) {
        unsigned idx[4];
        zimp_send(s, "fuzz", 4, 0);
        zimp_stalled(s, idx, 4);
        zimp_sender_close(s);
    }
    return 0;
}
