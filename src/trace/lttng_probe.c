/*
 * libzimp-lttng.so: the LTTng-UST provider of zimp's tracepoints. libzimp
 * loads it (dlopen) only when tracing with lttng=1, so that programs that
 * do not trace never load LTTng-UST. Its one entry fires the tracepoint of
 * a record's type; LTTng-UST skips it unless a session enabled it.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "trace/lttng_tp.h"

__attribute__((visibility("default"))) void zimp_lttng_emit(const struct zimp__trace_rec *r, const char *text);

void zimp_lttng_emit(const struct zimp__trace_rec *r, const char *text)
{
    switch (r->type) {
    case ZIMP_EV_START:  lttng_ust_tracepoint(zimp, start, r, text); break;
    case ZIMP_EV_STOP:   lttng_ust_tracepoint(zimp, stop, r, text); break;
    case ZIMP_EV_CREATE: lttng_ust_tracepoint(zimp, create, r, text); break;
    case ZIMP_EV_UNLINK: lttng_ust_tracepoint(zimp, unlink, r, text); break;
    case ZIMP_EV_OPEN:   lttng_ust_tracepoint(zimp, open, r, text); break;
    case ZIMP_EV_CLOSE:  lttng_ust_tracepoint(zimp, close, r, text); break;
    case ZIMP_EV_SEND:   lttng_ust_tracepoint(zimp, send, r, text); break;
    case ZIMP_EV_RECV:   lttng_ust_tracepoint(zimp, recv, r, text); break;
    case ZIMP_EV_ERROR:  lttng_ust_tracepoint(zimp, error, r, text); break;
    case ZIMP_EV_CRASH:  lttng_ust_tracepoint(zimp, crash, r, text); break;
    case ZIMP_EV_STALL:  lttng_ust_tracepoint(zimp, stall, r, text); break;
    case ZIMP_EV_EVICT:  lttng_ust_tracepoint(zimp, evict, r, text); break;
    case ZIMP_EV_SLEEP:  lttng_ust_tracepoint(zimp, sleep, r, text); break;
    case ZIMP_EV_WAKE:   lttng_ust_tracepoint(zimp, wake, r, text); break;
    case ZIMP_EV_SPIN:   lttng_ust_tracepoint(zimp, spin, r, text); break;
    case ZIMP_EV_MARK:   lttng_ust_tracepoint(zimp, mark, r, text); break;
    case ZIMP_EV_FLUSH:  lttng_ust_tracepoint(zimp, flush, r, text); break;
    case ZIMP_EV_ALLOC:  lttng_ust_tracepoint(zimp, alloc, r, text); break;
    case ZIMP_EV_FREE:   lttng_ust_tracepoint(zimp, free, r, text); break;
    case ZIMP_EV_MPI_INIT:     lttng_ust_tracepoint(zimp, mpi_init, r, text); break;
    case ZIMP_EV_MPI_FINALIZE: lttng_ust_tracepoint(zimp, mpi_finalize, r, text); break;
    case ZIMP_EV_MPI_SEND:     lttng_ust_tracepoint(zimp, mpi_send, r, text); break;
    case ZIMP_EV_MPI_RECV:     lttng_ust_tracepoint(zimp, mpi_recv, r, text); break;
    case ZIMP_EV_MPI_COLL:     lttng_ust_tracepoint(zimp, mpi_coll, r, text); break;
    case ZIMP_EV_MPI_ERROR:    lttng_ust_tracepoint(zimp, mpi_error, r, text); break;
    default: break;
    }
}
