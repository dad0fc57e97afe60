/* The mechanisms built into zimp_bench, in table order. */
#include <string.h>

#include "mech.h"

extern const struct mech mech_zimp, mech_zimp_spin, mech_zimp_block, mech_zimp_zero, mech_zimp_copy,
    mech_zimp_copy_block, mech_ring, mech_futex, mech_bmp, mech_pipe, mech_vmsplice,
    mech_unix_stream, mech_unix_dgram, mech_tcp, mech_udp, mech_sysv_mq, mech_posix_mq,
    mech_cma;

const struct mech *const mech_all[] = {
#ifdef BENCH_HAVE_ZIMP
    &mech_zimp, &mech_zimp_spin, &mech_zimp_block, &mech_zimp_zero, &mech_zimp_copy,
    &mech_zimp_copy_block,
#endif
    &mech_ring, &mech_futex, &mech_bmp, &mech_pipe, &mech_vmsplice, &mech_unix_stream,
    &mech_unix_dgram, &mech_tcp, &mech_udp, &mech_sysv_mq, &mech_posix_mq, &mech_cma,
    NULL,
};

const struct mech *mech_find(const char *name)
{
    for (int i = 0; mech_all[i]; i++)
        if (strcmp(mech_all[i]->name, name) == 0)
            return mech_all[i];
    return NULL;
}
