/*
 * LTTng-UST tracepoints of zimp: provider "zimp", one event per zimp event
 * type, all of the class zimp:record (the fields of a trace record).
 * Built into libzimp-lttng.so only (lttng_probe.c), which libzimp loads
 * when tracing with lttng=1.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER zimp

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "trace/lttng_tp.h"

#if !defined(ZIMP_LTTNG_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define ZIMP_LTTNG_TP_H

#include <lttng/tracepoint.h>

#include "trace/trace_int.h"

LTTNG_UST_TRACEPOINT_EVENT_CLASS(zimp, record,
    LTTNG_UST_TP_ARGS(const struct zimp__trace_rec *, r, const char *, text),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint32_t, level, r->level)
        lttng_ust_field_integer_hex(uint64_t, channel_id, r->chan)
        lttng_ust_field_integer(int32_t, role, r->role)
        lttng_ust_field_integer(uint32_t, index, r->index)
        lttng_ust_field_integer(uint64_t, position, r->pos)
        lttng_ust_field_integer(uint32_t, length, r->len)
        lttng_ust_field_sequence_hex(uint8_t, bytes, r->bytes, uint32_t,
                                     r->nbytes < ZIMP_TRACE_BYTES ? r->nbytes : ZIMP_TRACE_BYTES)
        lttng_ust_field_integer(uint32_t, slot_size, r->slot_size)
        lttng_ust_field_integer(uint32_t, max_senders, r->max_senders)
        lttng_ust_field_integer(uint32_t, max_receivers, r->max_receivers)
        lttng_ust_field_integer(int32_t, error, r->err)
        lttng_ust_field_integer(int32_t, pid, r->pid)
        lttng_ust_field_integer(uint64_t, ns, r->dur)
        lttng_ust_field_string(text, text)
    )
)

#define ZIMP_LTTNG_EVENT(name) \
    LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(zimp, record, zimp, name, \
        LTTNG_UST_TP_ARGS(const struct zimp__trace_rec *, r, const char *, text))

ZIMP_LTTNG_EVENT(start)
ZIMP_LTTNG_EVENT(stop)
ZIMP_LTTNG_EVENT(create)
ZIMP_LTTNG_EVENT(unlink)
ZIMP_LTTNG_EVENT(open)
ZIMP_LTTNG_EVENT(close)
ZIMP_LTTNG_EVENT(send)
ZIMP_LTTNG_EVENT(recv)
ZIMP_LTTNG_EVENT(error)
ZIMP_LTTNG_EVENT(crash)
ZIMP_LTTNG_EVENT(stall)
ZIMP_LTTNG_EVENT(evict)
ZIMP_LTTNG_EVENT(sleep)
ZIMP_LTTNG_EVENT(wake)
ZIMP_LTTNG_EVENT(spin)
ZIMP_LTTNG_EVENT(mark)
ZIMP_LTTNG_EVENT(flush)
ZIMP_LTTNG_EVENT(alloc)
ZIMP_LTTNG_EVENT(free)
ZIMP_LTTNG_EVENT(mpi_init)
ZIMP_LTTNG_EVENT(mpi_finalize)
ZIMP_LTTNG_EVENT(mpi_send)
ZIMP_LTTNG_EVENT(mpi_recv)
ZIMP_LTTNG_EVENT(mpi_coll)
ZIMP_LTTNG_EVENT(mpi_error)

#endif /* ZIMP_LTTNG_TP_H */

#include <lttng/tracepoint-event.h>
