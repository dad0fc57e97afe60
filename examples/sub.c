/* sub: creates channel NAME, prints every message until all publishers left.
 * Usage: sub NAME */
#include <errno.h>
#include <stdio.h>
#include <zimp/zimp.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sub NAME\n");
        return 2;
    }
    zimp_receiver *r = NULL;
    int rc = zimp_create(argv[1], NULL);
    if (rc == 0 || rc == -EEXIST)
        rc = zimp_receiver_open(argv[1], &r);
    if (rc < 0) {
        fprintf(stderr, "sub: %s: %s %s\n", argv[1], zimp_strerror(rc), zimp_last_detail());
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    const void *msg;
    size_t len;
    while ((rc = zimp_read(r, &msg, &len, -1)) == 0) {   /* borrow in place */
        printf("%.*s\n", (int)len, (const char *)msg);
        zimp_release(r);
    }
    zimp_receiver_close(r);
    zimp_unlink(argv[1]);
    return rc == -EPIPE ? 0 : 1;                /* -EPIPE: every publisher left */
}
