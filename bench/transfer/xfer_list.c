/* The mechanisms built into zimp_transfer, in table order. */
#include <string.h>

#include "xfer.h"

extern const struct xfer xfer_shmbuf, xfer_sysv_mq, xfer_posix_mq, xfer_cma_get, xfer_cma_put,
    xfer_procmem, xfer_ptrace, xfer_zimp_copy, xfer_zimp_chunk, xfer_zimp_heap;

const struct xfer *const xfer_all[] = {
    &xfer_shmbuf, &xfer_sysv_mq, &xfer_posix_mq, &xfer_cma_get, &xfer_cma_put, &xfer_procmem,
    &xfer_ptrace, &xfer_zimp_copy, &xfer_zimp_chunk, &xfer_zimp_heap, NULL,
};

const struct xfer *xfer_find(const char *name)
{
    for (int i = 0; xfer_all[i]; i++)
        if (strcmp(xfer_all[i]->name, name) == 0)
            return xfer_all[i];
    return NULL;
}
