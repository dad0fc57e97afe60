/* examples/demo.c: one publisher, three subscribers.   cc demo.c -lzimp -o demo */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zimp/zimp.h>

int main(void)
{
    int joined[2];
    char c;
    pipe(joined);
    zimp_create("demo", NULL);                        /* 256 slots of 4 KiB, mode 0600 */
    for (int k = 0; k < 3; k++) {
        if (fork() == 0) {                            /* subscriber k: its own handle */
            zimp_receiver *r;
            const void *msg;
            size_t len;
            zimp_receiver_open("demo", &r);
            write(joined[1], "", 1);
            while (zimp_read(r, &msg, &len, -1) == 0) {   /* in place, read-only */
                printf("subscriber %d: %.*s\n", k, (int)len, (const char *)msg);
                zimp_release(r);
            }
            zimp_receiver_close(r);                   /* -EPIPE: drained, no sender left */
            return 0;
        }
    }
    for (int k = 0; k < 3; k++)
        read(joined[0], &c, 1);                       /* every subscriber has joined */
    zimp_sender *s;
    zimp_sender_open("demo", &s);
    for (int i = 0; i < 3; i++) {
        void *buf;
        zimp_loan(s, 64, &buf, -1);                   /* borrow a slot, write in place */
        zimp_publish(s, buf, (size_t)snprintf(buf, 64, "message %d", i));
    }
    zimp_sender_close(s);
    while (wait(NULL) > 0)
        ;
    zimp_unlink("demo");
    return 0;
}
