/*
 * zimp tracing: the library records what it does, at a level chosen at run
 * time, into OTF2 archives (and LTTng-UST tracepoints where built with
 * them). Full documentation: docs/tracing.md.
 *
 * Levels: ZIMP_TRACE_ERROR records every error returned with its reason;
 * ZIMP_TRACE_INFO adds create/open/close with the channel's resources,
 * evictions, stalls and members found dead; ZIMP_TRACE_DEBUG adds every
 * message sent and received (channel, position, member, length, first
 * bytes), sleeps and wake-ups; ZIMP_TRACE_TEST adds the spinning waits and
 * the trace's own flushes.
 *
 * The environment variable ZIMP_TRACE=level[,option...] sets the level when
 * the library loads; zimp_trace_set changes it at any time. Options:
 *   file=DIR     where archives go (default ./zimp-trace)
 *   otf2=0|1     write OTF2 archives (default 1)
 *   lttng=0|1    fire LTTng-UST tracepoints (default 0)
 *   buffer=BYTES each thread's buffer (default 1 MiB; K and M suffixes)
 * Each thread records into its own buffer without locks or system calls;
 * a full buffer, zimp_trace_flush, a level change and exit write it out
 * as one complete OTF2 archive under DIR (DIR/PID-TID-SEQ/traces.otf2),
 * so a process killed meanwhile leaves every archive up to its last flush.
 */
#ifndef ZIMP_TRACE_H
#define ZIMP_TRACE_H

#include <stdio.h>

#include <zimp/zimp.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZIMP_TRACE_OFF   0
#define ZIMP_TRACE_ERROR 1
#define ZIMP_TRACE_INFO  2
#define ZIMP_TRACE_DEBUG 3
#define ZIMP_TRACE_TEST  4

/*
 * Sets this process's trace level and, if options is not NULL, the options
 * of ZIMP_TRACE ("file=DIR,lttng=1"; NULL keeps them). Turning tracing off
 * or changing DIR writes out what was recorded. -EINVAL for a bad level or
 * option, -EOPNOTSUPP for an output this build left out (see detail).
 */
ZIMP_API int zimp_trace_set(int level, const char *options);
/* The current level (ZIMP_TRACE_OFF .. ZIMP_TRACE_TEST). */
ZIMP_API int zimp_trace_level(void);
/* Level named "off", "error", "info", "debug", "test" or a digit: its value, or -EINVAL. */
ZIMP_API int zimp_trace_level_of(const char *name);
/*
 * Writes out what every thread of this process recorded so far. Returns
 * how many events were written, or a negative errno.
 */
ZIMP_API int zimp_trace_flush(void);
/* Records a note from the application (at any level but off). */
ZIMP_API void zimp_trace_mark(const char *text);

/*
 * Records an event of a layer built on libzimp, its fields in `text`
 * ("key=value ..."), if the level reaches the event's: libzimp-mpi's
 * ZIMP_TRACE_MPI_INIT and _FINALIZE (info: rank, size), _SEND, _RECV and
 * _COLL (debug: one per call, with communicator, peer or root, tag,
 * length) and _ERROR (error: every error an MPI call returns). Unknown
 * events are ignored.
 */
#define ZIMP_TRACE_MPI_INIT     1
#define ZIMP_TRACE_MPI_FINALIZE 2
#define ZIMP_TRACE_MPI_SEND     3
#define ZIMP_TRACE_MPI_RECV     4
#define ZIMP_TRACE_MPI_COLL     5
#define ZIMP_TRACE_MPI_ERROR    6
ZIMP_API void zimp_trace_event(int event, const char *text);

/* Outputs (zimp_trace_outputs): built into this library / active now. */
#define ZIMP_TRACE_HAVE_OTF2  0x1u
#define ZIMP_TRACE_HAVE_LTTNG 0x2u
#define ZIMP_TRACE_USE_OTF2   0x4u
#define ZIMP_TRACE_USE_LTTNG  0x8u
ZIMP_API unsigned zimp_trace_outputs(void);

/*
 * Reads every archive under path (a trace directory, one archive's
 * directory, or its traces.otf2) and writes the events, in time order, to
 * out: ZIMP_TRACE_JSON is Chrome/Perfetto trace-event JSON, ZIMP_TRACE_TEXT
 * one line per event. Returns the number of events, or a negative errno.
 * An archive below a trace directory that cannot be read (a process killed
 * while it flushed leaves one cut short) is skipped, with what it held up
 * to the damage: zimp_last_detail() then says how many and why (it is ""
 * when every archive was read); -EIO only if none could be read.
 */
#define ZIMP_TRACE_JSON 1u
#define ZIMP_TRACE_TEXT 2u
ZIMP_API int zimp_trace_export(const char *path, FILE *out, unsigned format);
/*
 * Writes every event under path into one OTF2 archive at out_dir (one
 * location per traced thread, one location group per process). Returns the
 * number of events, or a negative errno (-EEXIST if out_dir exists).
 * Unreadable archives are skipped as by zimp_trace_export.
 */
ZIMP_API int zimp_trace_merge(const char *path, const char *out_dir);

#ifdef __cplusplus
}
#endif
#endif /* ZIMP_TRACE_H */
