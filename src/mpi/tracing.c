/*
 * The MPI layer's events in libzimp's trace (docs/tracing.md, docs/mpi.md):
 * MPI_Init and MPI_Finalize with the rank and size (info), every
 * point-to-point and collective call of the application (debug) and every
 * error an MPI call returns (error). Each site costs one call to
 * zimp_trace_level() while tracing is off; the text is made only when the
 * event is recorded.
 */
#include "mpi_int.h"

#include <stdarg.h>
#include <stdio.h>

static void event(int ev, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void event(int ev, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    zimp_trace_event(ev, text);
}

/* "comm=NAME" (or its handle) and its context id. */
static void comm_text(char *out, size_t cap, const struct zm_comm *c)
{
    if (!c)
        snprintf(out, cap, "comm=none");
    else if (c->name[0])
        snprintf(out, cap, "comm=%s ctx=%u", c->name, c->ctx);
    else
        snprintf(out, cap, "comm=0x%x ctx=%u", (unsigned)c->handle, c->ctx);
}

static long long bytes_of(int count, MPI_Datatype dt)
{
    struct zm_type *t = zm_type_get(dt);
    return t && count >= 0 ? (long long)t->size * count : -1;
}

void zm_trace_life(int ev)
{
    event(ev, "rank=%d size=%d pid=%d job=%s", zm.rank, zm.size, (int)zm.peers[zm.rank].pid, zm.job);
}

void zm_trace_p2p(int ev, const char *call, const struct zm_comm *c, int peer, int tag, long long len)
{
    char cm[MPI_MAX_OBJECT_NAME + 32];
    comm_text(cm, sizeof cm, c);
    event(ev, "call=%s rank=%d %s peer=%d tag=%d length=%lld", call, zm.rank, cm, peer, tag, len);
}

void zm_trace_p2p_typed(int ev, const char *call, const struct zm_comm *c, int peer, int tag, int count,
                        MPI_Datatype dt)
{
    zm_trace_p2p(ev, call, c, peer, tag, bytes_of(count, dt));
}

void zm_trace_coll(const char *call, MPI_Comm comm, int root, int count, MPI_Datatype dt)
{
    char cm[MPI_MAX_OBJECT_NAME + 32];
    comm_text(cm, sizeof cm, zm_comm_get(comm));
    event(ZIMP_TRACE_MPI_COLL, "call=%s rank=%d %s root=%d length=%lld", call, zm.rank, cm, root,
          bytes_of(count, dt));
}

void zm_trace_error(MPI_Comm comm, int code, const char *fn)
{
    char cm[MPI_MAX_OBJECT_NAME + 32], text[MPI_MAX_ERROR_STRING];
    int cls = MPI_ERR_UNKNOWN, n;
    MPI_Error_class(code, &cls);
    if (MPI_Error_string(cls, text, &n) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", code);
    comm_text(cm, sizeof cm, zm_comm_get(comm));
    event(ZIMP_TRACE_MPI_ERROR, "call=%s rank=%d %s class=%d: %s%s%s", fn, zm.rank, cm, cls, text,
          zm_detail[0] ? ": " : "", zm_detail);
}
