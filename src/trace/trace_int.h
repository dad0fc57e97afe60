/* Private interfaces of the trace layer (src/trace). */
#ifndef ZIMP_TRACE_INT_H
#define ZIMP_TRACE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "trace/trace_hook.h"

#define ZIMP_TRACE_BYTES 16          /* first bytes of a message kept */
#define ZIMP_TRACE_TEXT_MAX 255      /* longest name or reason kept */

/*
 * One event as a thread's buffer holds it: a fixed part, then `textlen`
 * bytes of text (a name or a reason) padded to 8. Fields an event type
 * does not use are 0.
 */
struct zimp__trace_rec {
    uint64_t ts;                /* CLOCK_MONOTONIC, ns */
    uint64_t dur;               /* SLEEP, SPIN: ns waited */
    uint64_t chan;              /* channel id (its segment's nonce), 0: none */
    uint64_t pos;               /* SEND, RECV: the message's position */
    uint32_t type;              /* ZIMP_EV_* */
    int32_t role;               /* ZIMP_TR_SENDER, _RECEIVER or _NONE */
    uint32_t index;             /* member record */
    uint32_t len;               /* message length; CREATE, OPEN: slots */
    uint32_t slot_size, max_senders, max_receivers;
    int32_t err;                /* ERROR: negative errno */
    int32_t pid;                /* CRASH, EVICT: the member's pid */
    uint32_t nbytes;            /* valid bytes in bytes[] */
    uint32_t textlen;           /* text bytes that follow (no NUL) */
    uint32_t level;             /* level that recorded it */
    uint8_t bytes[ZIMP_TRACE_BYTES];
};
_Static_assert(sizeof(struct zimp__trace_rec) % 8 == 0, "records stay 8-byte aligned");

static inline size_t zimp__trace_rec_size(uint32_t textlen)
{
    return sizeof(struct zimp__trace_rec) + ((textlen + 7u) & ~7u);
}
static inline const char *zimp__trace_rec_text(const struct zimp__trace_rec *r)
{
    return (const char *)(r + 1);
}

/* Names of event types (region names in archives), NULL for unknown ones. */
const char *zimp__trace_event_name(uint32_t type);
uint32_t zimp__trace_event_type(const char *name);
/* The level an event type belongs to. */
int zimp__trace_event_level(uint32_t type);

/* An event as read back from an archive. */
struct zimp__trace_ev {
    struct zimp__trace_rec r;
    int32_t pid;                /* recording process */
    uint32_t tid;               /* recording thread */
    char *text;                 /* name or reason, "" if none */
    char *chan_name;            /* channel's name if the archive knew it, else NULL */
    char *exe;                  /* recording program's name */
    size_t order;               /* reading order (ties of time keep it) */
};

/* Channel names known to this process (for archives): name of chan, or NULL. */
const char *zimp__trace_chan_name(uint64_t chan);

#ifdef ZIMP_HAVE_OTF2
/*
 * Writes one complete OTF2 archive at dir: the records of `n` threads
 * (recs[i] holds bytes[i] bytes of records of thread tids[i] of process
 * pids[i]). 0 or a negative errno.
 */
struct zimp__trace_stream {
    int32_t pid;
    uint32_t tid;
    const char *exe;
    const void *recs;
    size_t bytes;
};
int zimp__otf2_write(const char *dir, const struct zimp__trace_stream *s, size_t n,
                     const char *(*chan_name)(uint64_t chan, void *arg), void *arg);
/* Reads every archive under path: appends to *evs (realloc'd); count or negative errno. */
int zimp__otf2_read(const char *path, struct zimp__trace_ev **evs, size_t *n);
void zimp__trace_evs_free(struct zimp__trace_ev *evs, size_t n);
#endif

/* LTTng-UST: the provider library's entry (lttng_probe.c), loaded on demand. */
typedef void (*zimp__lttng_fn)(const struct zimp__trace_rec *r, const char *text);
#define ZIMP_LTTNG_ENTRY "zimp_lttng_emit"

#endif /* ZIMP_TRACE_INT_H */
