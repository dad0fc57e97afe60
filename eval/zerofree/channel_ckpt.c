/*
 * A process holding a zimp channel after traffic, for zimp-ckpt: 256 messages
 * of 4000 random bytes are sent and received, the sender closes, then the
 * process waits (prints its pid) with only the receiver's mapping left.
 * Usage: channel_ckpt zero|plain      (zero: ZIMP_ZERO_ON_RELEASE)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zimp/zimp.h>

int main(int argc, char **argv)
{
    int zero = argc > 1 && strcmp(argv[1], "zero") == 0;
    char name[64];
    snprintf(name, sizeof name, "ckpt-demo-%d", (int)getpid());
    struct zimp_config cfg = { .slots = 256, .slot_size = 4096,
                               .flags = zero ? ZIMP_ZERO_ON_RELEASE : 0 };
    zimp_sender *s;
    zimp_receiver *r;
    int rc = zimp_create(name, &cfg);
    if (rc == 0)
        rc = zimp_receiver_open(name, &r);
    if (rc == 0)
        rc = zimp_sender_open(name, &s);
    if (rc < 0) {
        fprintf(stderr, "channel_ckpt: %s %s\n", zimp_strerror(rc), zimp_last_detail());
        return 1;
    }
    zimp_unlink(name);                 /* gone with this process */
    unsigned seed = 1;
    char msg[4000], buf[4096];
    for (int i = 0; i < 256; i++) {
        for (size_t k = 0; k < sizeof msg; k++)
            msg[k] = (char)(rand_r(&seed) >> 7);
        if (zimp_send(s, msg, sizeof msg, -1) < 0 || zimp_recv(r, buf, sizeof buf, -1) != sizeof msg)
            return 1;
    }
    zimp_sender_close(s);
    printf("%d\n", (int)getpid());
    fflush(stdout);
    pause();
    return 0;
}
