/* pub: publishes COUNT messages on channel NAME, written in place (zero-copy).
 * Usage: pub NAME [COUNT]        (start sub NAME first) */
#include <stdio.h>
#include <stdlib.h>
#include <zimp/zimp.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pub NAME [COUNT]\n");
        return 2;
    }
    int count = argc > 2 ? atoi(argv[2]) : 10;
    zimp_sender *s;
    int rc = zimp_sender_open(argv[1], &s);
    for (int i = 0; rc == 0 && i < count; i++) {
        void *buf;
        rc = zimp_loan(s, 64, &buf, -1);        /* borrow a slot, waiting for room */
        if (rc == 0)
            rc = zimp_publish(s, buf, (size_t)snprintf(buf, 64, "hello %d", i));
    }
    if (rc < 0)
        fprintf(stderr, "pub: %s: %s %s\n", argv[1], zimp_strerror(rc), zimp_last_detail());
    zimp_sender_close(s);                       /* receivers get -EPIPE once drained */
    return rc < 0;
}
