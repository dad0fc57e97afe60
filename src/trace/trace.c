/*
 * Tracing: levels, per-thread buffers, flushes, the public trace API.
 *
 * Hot path: a hook site reads zimp__trace_level (one relaxed load, one
 * predictable branch). When the level lets an event through, the hook
 * builds a record and appends it to the calling thread's buffer: a plain
 * copy and a release store of the buffer's `committed` offset; no lock, no
 * system call. The thread's first event allocates and registers its buffer.
 *
 * Flushes (slow path, under `lock`): a thread whose buffer is full writes
 * [flushed, committed) as one complete OTF2 archive, then starts over at 0;
 * zimp_trace_flush, a level change and exit write every thread's
 * [flushed, committed) and advance `flushed`. Only the owner resets its
 * buffer, and only under the lock, so a flusher reading another thread's
 * records (acquire of committed) never sees them rewritten. A thread that
 * exits writes its rest and frees its buffer (pthread key destructor).
 *
 * fork: the child keeps only the forking thread's buffer, emptied (the
 * parent writes its own records), and names its archives with its pid.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "zimp/trace.h"
#include "trace/trace_int.h"

/* The one error-detail setter of the library (src/core/util.c). */
int zimp__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

_Atomic int zimp__trace_level;

#define DEFAULT_DIR "zimp-trace"
#define DEFAULT_BUFFER (1u << 20)
#define MIN_BUFFER (4u << 10)
#define MAX_BUFFER (1u << 30)
#define MAX_CHANS 4096

struct tbuf {
    char *data;
    size_t cap;
    _Atomic size_t committed;   /* owner: release after each record; flushers: acquire */
    size_t flushed;             /* under lock */
    int32_t pid;
    uint32_t tid;
    struct tbuf *next;          /* registry, under lock */
};

struct chan { uint64_t id; char name[ZIMP_NAME_MAX + 1]; };

static struct {
    pthread_mutex_t lock;       /* registry, flushes, options, channel names */
    char dir[PATH_MAX];
    _Atomic bool otf2;          /* read by every event, outside the lock */
    bool lttng;
    size_t bufsize;
    struct tbuf *bufs;
    bool finished;              /* exit flushed everything: later events are dropped */
    uint64_t seq;               /* archives written by this process */
    int last_err;               /* of the last failed write, for zimp_trace_flush */
    char exe[64];
    struct chan *chans;
    size_t nchans;
    _Atomic(zimp__lttng_fn) lttng_fn;
    void *lttng_lib;
} T = { .lock = PTHREAD_MUTEX_INITIALIZER, .dir = DEFAULT_DIR, .otf2 = true,
        .bufsize = DEFAULT_BUFFER };

static __thread struct tbuf *mine;
static __thread bool busy;          /* inside the trace layer: hooks do nothing */
static __thread int failed;         /* error zimp__fail recorded last in this thread, 0 */
static pthread_key_t thread_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* ---- event names and levels ---- */

static const struct { const char *name; int level; } events[ZIMP_EV_COUNT] = {
    [ZIMP_EV_START] = { "start", ZIMP_TL_INFO },   [ZIMP_EV_STOP] = { "stop", ZIMP_TL_INFO },
    [ZIMP_EV_CREATE] = { "create", ZIMP_TL_INFO }, [ZIMP_EV_UNLINK] = { "unlink", ZIMP_TL_INFO },
    [ZIMP_EV_OPEN] = { "open", ZIMP_TL_INFO },     [ZIMP_EV_CLOSE] = { "close", ZIMP_TL_INFO },
    [ZIMP_EV_SEND] = { "send", ZIMP_TL_DEBUG },    [ZIMP_EV_RECV] = { "recv", ZIMP_TL_DEBUG },
    [ZIMP_EV_ERROR] = { "error", ZIMP_TL_ERROR },  [ZIMP_EV_CRASH] = { "crash", ZIMP_TL_INFO },
    [ZIMP_EV_STALL] = { "stall", ZIMP_TL_INFO },   [ZIMP_EV_EVICT] = { "evict", ZIMP_TL_INFO },
    [ZIMP_EV_SLEEP] = { "sleep", ZIMP_TL_DEBUG },  [ZIMP_EV_WAKE] = { "wake", ZIMP_TL_DEBUG },
    [ZIMP_EV_SPIN] = { "spin", ZIMP_TL_TEST },     [ZIMP_EV_MARK] = { "mark", ZIMP_TL_ERROR },
    [ZIMP_EV_FLUSH] = { "flush", ZIMP_TL_TEST },
    [ZIMP_EV_ALLOC] = { "alloc", ZIMP_TL_DEBUG },  [ZIMP_EV_FREE] = { "free", ZIMP_TL_DEBUG },
    [ZIMP_EV_MPI_INIT] = { "mpi_init", ZIMP_TL_INFO },
    [ZIMP_EV_MPI_FINALIZE] = { "mpi_finalize", ZIMP_TL_INFO },
    [ZIMP_EV_MPI_SEND] = { "mpi_send", ZIMP_TL_DEBUG }, [ZIMP_EV_MPI_RECV] = { "mpi_recv", ZIMP_TL_DEBUG },
    [ZIMP_EV_MPI_COLL] = { "mpi_coll", ZIMP_TL_DEBUG },
    [ZIMP_EV_MPI_ERROR] = { "mpi_error", ZIMP_TL_ERROR },
};

const char *zimp__trace_event_name(uint32_t type)
{
    return type > 0 && type < ZIMP_EV_COUNT ? events[type].name : NULL;
}

uint32_t zimp__trace_event_type(const char *name)
{
    for (uint32_t t = 1; t < ZIMP_EV_COUNT; t++)
        if (!strcmp(events[t].name, name))
            return t;
    return 0;
}

int zimp__trace_event_level(uint32_t type)
{
    return type > 0 && type < ZIMP_EV_COUNT ? events[type].level : ZIMP_TL_TEST;
}

/* ---- channel names (for archives) ---- */

static void remember_chan(uint64_t id, const char *name)
{
    if (!id || !name)
        return;
    pthread_mutex_lock(&T.lock);
    size_t i = 0;
    while (i < T.nchans && T.chans[i].id != id)
        i++;
    if (i == T.nchans && T.nchans < MAX_CHANS) {
        struct chan *c = realloc(T.chans, (T.nchans + 1) * sizeof *c);
        if (c) {
            T.chans = c;
            T.nchans++;
        }
    }
    if (i < T.nchans) {
        T.chans[i].id = id;
        snprintf(T.chans[i].name, sizeof T.chans[i].name, "%s", name);
    }
    pthread_mutex_unlock(&T.lock);
}

/* Under lock. */
const char *zimp__trace_chan_name(uint64_t id)
{
    for (size_t i = 0; i < T.nchans; i++)
        if (T.chans[i].id == id)
            return T.chans[i].name;
    return NULL;
}

/* ---- buffers ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t gettid_(void) { return (uint32_t)syscall(SYS_gettid); }

#ifdef ZIMP_HAVE_OTF2
static const char *chan_name_cb(uint64_t id, void *arg)
{
    (void)arg;
    return zimp__trace_chan_name(id);
}
#endif

/* Under lock: writes b's records [flushed, upto) as one archive. Events written or -errno. */
static int write_out(struct tbuf *b, size_t upto)
{
    if (upto <= b->flushed)
        return 0;
    int count = 0;
    for (size_t at = b->flushed; at < upto;) {
        const struct zimp__trace_rec *r = (const void *)(b->data + at);
        at += zimp__trace_rec_size(r->textlen);
        count++;
    }
    int rc = 0;
#ifdef ZIMP_HAVE_OTF2
    if (T.otf2 && !T.finished) {
        char path[PATH_MAX + 64];
        if (mkdir(T.dir, 0777) != 0 && errno != EEXIST)
            rc = -errno;
        snprintf(path, sizeof path, "%s/%d-%u-%llu", T.dir, (int)b->pid, b->tid,
                 (unsigned long long)T.seq++);
        struct zimp__trace_stream s = { b->pid, b->tid, T.exe, b->data + b->flushed, upto - b->flushed };
        if (rc == 0)
            rc = zimp__otf2_write(path, &s, 1, chan_name_cb, NULL);
    }
#endif
    b->flushed = upto;
    if (rc < 0) {
        T.last_err = rc;
        return rc;
    }
    return count;
}

static void record_raw(const struct zimp__trace_rec *r, const char *text);

/* The owner's buffer is full: write it out and start over. */
static void flush_own(struct tbuf *b)
{
    pthread_mutex_lock(&T.lock);
    int n = write_out(b, atomic_load_explicit(&b->committed, memory_order_acquire));
    b->flushed = 0;
    atomic_store_explicit(&b->committed, 0, memory_order_release);
    pthread_mutex_unlock(&T.lock);
    if (atomic_load_explicit(&zimp__trace_level, memory_order_relaxed) >= ZIMP_TL_TEST) {
        struct zimp__trace_rec r = { .type = ZIMP_EV_FLUSH, .role = ZIMP_TR_NONE,
                                     .len = n > 0 ? (uint32_t)n : 0, .err = n < 0 ? n : 0 };
        r.ts = now_ns();
        record_raw(&r, NULL);
    }
}

static void thread_gone(void *arg)
{
    struct tbuf *b = arg;
    busy = true;                    /* errors while writing must not record into b */
    pthread_mutex_lock(&T.lock);
    write_out(b, atomic_load_explicit(&b->committed, memory_order_acquire));
    for (struct tbuf **p = &T.bufs; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            break;
        }
    pthread_mutex_unlock(&T.lock);
    free(b->data);
    free(b);
    mine = NULL;
    busy = false;
}

static void make_key(void) { pthread_key_create(&thread_key, thread_gone); }

/* The calling thread's buffer, made on its first event; NULL if out of memory. */
static struct tbuf *attach(void)
{
    pthread_once(&key_once, make_key);
    struct tbuf *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    pthread_mutex_lock(&T.lock);
    b->cap = T.bufsize;
    pthread_mutex_unlock(&T.lock);
    if (!(b->data = malloc(b->cap))) {
        free(b);
        return NULL;
    }
    b->pid = (int32_t)getpid();
    b->tid = gettid_();
    pthread_mutex_lock(&T.lock);
    b->next = T.bufs;
    T.bufs = b;
    pthread_mutex_unlock(&T.lock);
    pthread_setspecific(thread_key, b);
    mine = b;
    return b;
}

/* Appends one record (and its text) to the calling thread's buffer. */
static void record_raw(const struct zimp__trace_rec *r, const char *text)
{
    size_t tl = text ? strnlen(text, ZIMP_TRACE_TEXT_MAX) : 0;
    size_t need = zimp__trace_rec_size((uint32_t)tl);
    struct tbuf *b = mine;
    if (!b && !(b = attach()))
        return;
    size_t at = atomic_load_explicit(&b->committed, memory_order_relaxed);
    if (at + need > b->cap) {
        flush_own(b);
        at = atomic_load_explicit(&b->committed, memory_order_relaxed);
        if (at + need > b->cap)
            return;
    }
    struct zimp__trace_rec *dst = (struct zimp__trace_rec *)(b->data + at);
    *dst = *r;
    dst->textlen = (uint32_t)tl;
    dst->level = (uint32_t)zimp__trace_event_level(r->type);
    if (tl) {
        char *t = (char *)(dst + 1);
        memcpy(t, text, tl);
        memset(t + tl, 0, zimp__trace_rec_size((uint32_t)tl) - sizeof *dst - tl);
    }
    atomic_store_explicit(&b->committed, at + need, memory_order_release);
}

/* Every hook ends here: to the buffer (OTF2) and to LTTng. */
static void emit(struct zimp__trace_rec *r, const char *text)
{
    if (busy)
        return;
    busy = true;
    failed = 0;
    r->ts = r->ts ? r->ts : now_ns();
    if (atomic_load_explicit(&T.otf2, memory_order_relaxed))
        record_raw(r, text);
    zimp__lttng_fn f = atomic_load_explicit(&T.lttng_fn, memory_order_acquire);
    if (f) {
        r->level = (uint32_t)zimp__trace_event_level(r->type);
        f(r, text ? text : "");
    }
    busy = false;
}

/* ---- hooks (trace_hook.h) ---- */

void zimp__trace_channel(int ev, int role, const char *name, uint64_t chan, uint32_t index,
                         uint32_t slots, uint32_t slot_size, uint32_t max_senders,
                         uint32_t max_receivers)
{
    if (ev == ZIMP_EV_OPEN)
        remember_chan(chan, name);
    struct zimp__trace_rec r = { .type = (uint32_t)ev, .role = role, .chan = chan, .index = index,
                                 .len = slots, .slot_size = slot_size, .max_senders = max_senders,
                                 .max_receivers = max_receivers };
    emit(&r, name);
}

void zimp__trace_member(int ev, int role, uint64_t chan, uint32_t index, int32_t pid)
{
    struct zimp__trace_rec r = { .type = (uint32_t)ev, .role = role, .chan = chan, .index = index,
                                 .pid = pid };
    emit(&r, NULL);
}

void zimp__trace_msg(int ev, uint64_t chan, uint32_t index, uint64_t pos, const void *data,
                     size_t len)
{
    struct zimp__trace_rec r = { .type = (uint32_t)ev, .chan = chan, .index = index, .pos = pos,
                                 .len = (uint32_t)len,
                                 .role = ev == ZIMP_EV_SEND ? ZIMP_TR_SENDER : ZIMP_TR_RECEIVER };
    r.nbytes = len < ZIMP_TRACE_BYTES ? (uint32_t)len : ZIMP_TRACE_BYTES;
    if (data && r.nbytes)
        memcpy(r.bytes, data, r.nbytes);
    else
        r.nbytes = 0;
    emit(&r, NULL);
}

void zimp__trace_error(int err, const char *where, const char *reason)
{
    /* -EAGAIN, and a receive's -ETIMEDOUT, are outcomes the caller asked for
     * (a poll, a bounded wait), not failures; an API call returning the error
     * that zimp__fail (with its reason) recorded just before is one event. */
    bool receive = where && (!strcmp(where, "zimp_recv") || !strcmp(where, "zimp_read"));
    if (err == -EAGAIN || (err == -ETIMEDOUT && receive) || (!reason && err == failed))
        return;
    char text[ZIMP_TRACE_TEXT_MAX + 1];
    if (!reason || !*reason)
        reason = zimp_strerror(err);
    snprintf(text, sizeof text, "%s%s%s", where ? where : "", where ? ": " : "", reason);
    struct zimp__trace_rec r = { .type = ZIMP_EV_ERROR, .role = ZIMP_TR_NONE, .err = err };
    emit(&r, text);
    failed = reason ? err : 0;
}

void zimp__trace_wait(int ev, uint64_t start, uint64_t ns)
{
    struct zimp__trace_rec r = { .type = (uint32_t)ev, .role = ZIMP_TR_NONE, .ts = start, .dur = ns };
    emit(&r, NULL);
}

void zimp__trace_heap(int ev, uint32_t heap, const char *name, uint32_t member, uint64_t off,
                      uint64_t n, int32_t pid)
{
    if (ev == ZIMP_EV_OPEN)
        remember_chan(heap, name);
    /* A heap's size goes in pos (it may pass 4 GiB); a block's length in len. */
    bool sized = ev == ZIMP_EV_CREATE || ev == ZIMP_EV_OPEN;
    struct zimp__trace_rec r = { .type = (uint32_t)ev, .role = ZIMP_TR_HEAP, .chan = heap, .index = member,
                                 .pos = sized ? n : off, .len = sized ? 0 : (uint32_t)n, .pid = pid };
    emit(&r, name);
}

/* ---- options ---- */

struct options { char dir[PATH_MAX]; int otf2, lttng; size_t bufsize; };

static int parse_size(const char *v, size_t *out)
{
    char *end;
    if (!isdigit((unsigned char)*v))
        return -EINVAL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    /* Bounded before the shift, which would wrap (17592186044417M is 1 MiB mod 2^64). */
    if (*end || errno == ERANGE || n > (MAX_BUFFER >> shift))
        return -EINVAL;
    n <<= shift;
    if (n < MIN_BUFFER)
        return -EINVAL;
    *out = (size_t)n;
    return 0;
}

/* Parses "key=value,..." into o (fields left as they were unless named). */
static int parse_options(const char *s, struct options *o)
{
    char buf[PATH_MAX + 256];
    if (strlen(s) >= sizeof buf)
        return zimp__fail(-EINVAL, "trace options too long");
    strcpy(buf, s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        const char *v = eq ? eq + 1 : "1";
        if (eq)
            *eq = '\0';
        if (!strcmp(tok, "file")) {
            if (!*v || strlen(v) >= sizeof o->dir)
                return zimp__fail(-EINVAL, "trace file= needs a directory name");
            strcpy(o->dir, v);
        } else if (!strcmp(tok, "otf2") || !strcmp(tok, "lttng")) {
            if (strcmp(v, "0") && strcmp(v, "1"))
                return zimp__fail(-EINVAL, "trace %s= takes 0 or 1, not '%s'", tok, v);
            *(!strcmp(tok, "otf2") ? &o->otf2 : &o->lttng) = *v == '1';
        } else if (!strcmp(tok, "buffer")) {
            if (parse_size(v, &o->bufsize) != 0)
                return zimp__fail(-EINVAL, "trace buffer=%s: give %u to %u bytes (K, M suffixes)", v,
                                  MIN_BUFFER, MAX_BUFFER);
        } else {
            return zimp__fail(-EINVAL, "unknown trace option '%s' (file, otf2, lttng, buffer)", tok);
        }
    }
    return 0;
}

ZIMP_API int zimp_trace_level_of(const char *name)
{
    static const char *names[] = { "off", "error", "info", "debug", "test" };
    if (!name)
        return -EINVAL;
    for (int i = 0; i < 5; i++)
        if (!strcasecmp(name, names[i]))
            return i;
    if (name[0] >= '0' && name[0] <= '4' && name[1] == '\0')
        return name[0] - '0';
    return -EINVAL;
}

/* Loads the LTTng-UST provider library next to this one (or from the search path). */
static int lttng_load(void)
{
    if (atomic_load(&T.lttng_fn))
        return 0;
#ifdef ZIMP_HAVE_LTTNG
    Dl_info info;
    char path[PATH_MAX];
    void *lib = NULL;
    if (dladdr((void *)&zimp__trace_level, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash && snprintf(path, sizeof path, "%.*s/libzimp-lttng.so.0", (int)(slash - info.dli_fname),
                              info.dli_fname) < (int)sizeof path)
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib)
        lib = dlopen("libzimp-lttng.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return -ENOENT;
    zimp__lttng_fn f = (zimp__lttng_fn)dlsym(lib, ZIMP_LTTNG_ENTRY);
    if (!f) {
        dlclose(lib);
        return -ENOENT;
    }
    T.lttng_lib = lib;
    atomic_store_explicit(&T.lttng_fn, f, memory_order_release);
    return 0;
#else
    return -EOPNOTSUPP;
#endif
}

/* Under lock: writes every thread's records so far. Events written, or the first error. */
static int flush_all_locked(void)
{
    int total = 0, err = 0;
    for (struct tbuf *b = T.bufs; b; b = b->next) {
        int n = write_out(b, atomic_load_explicit(&b->committed, memory_order_acquire));
        if (n < 0 && !err)
            err = n;
        else if (n > 0)
            total += n;
    }
    return err ? err : total;
}

static void stop_event(void)
{
    if (atomic_load(&zimp__trace_level) < ZIMP_TL_INFO)
        return;
    struct zimp__trace_rec r = { .type = ZIMP_EV_STOP, .role = ZIMP_TR_NONE };
    r.ts = now_ns();
    bool was = busy;
    busy = false;
    emit(&r, T.exe);
    busy = was;
}

static void start_event(int level)
{
    if (level < ZIMP_TL_INFO)
        return;
    struct zimp__trace_rec r = { .type = ZIMP_EV_START, .role = ZIMP_TR_NONE, .len = (uint32_t)level,
                                 .pid = (int32_t)getpid() };
    bool was = busy;
    busy = false;
    emit(&r, T.exe);
    busy = was;
}

ZIMP_API int zimp_trace_set(int level, const char *options)
{
    if (level < ZIMP_TRACE_OFF || level > ZIMP_TRACE_TEST)
        return zimp__fail(-EINVAL, "trace level %d is not 0 (off) to 4 (test)", level);
    struct options o;
    pthread_mutex_lock(&T.lock);
    snprintf(o.dir, sizeof o.dir, "%s", T.dir);
    o.otf2 = T.otf2;
    o.lttng = T.lttng;
    o.bufsize = T.bufsize;
    pthread_mutex_unlock(&T.lock);
    int rc;
    if (options && (rc = parse_options(options, &o)) != 0)
        return rc;
#ifndef ZIMP_HAVE_OTF2
    if (o.otf2 && options && strstr(options, "otf2=1"))
        return zimp__fail(-EOPNOTSUPP, "this libzimp was built without OTF2 (libotf2-trace-dev)");
    o.otf2 = false;
#endif
    if (level > ZIMP_TRACE_OFF && o.lttng && (rc = lttng_load()) != 0)
        return zimp__fail(rc == -EOPNOTSUPP ? rc : -ENOENT,
                          rc == -EOPNOTSUPP ? "this libzimp was built without LTTng-UST (liblttng-ust-dev)"
                                            : "cannot load libzimp-lttng.so.0: %s", dlerror());
    int old = atomic_load(&zimp__trace_level);
    pthread_mutex_lock(&T.lock);
    bool moved = strcmp(o.dir, T.dir) != 0;
    pthread_mutex_unlock(&T.lock);
    if (old > ZIMP_TRACE_OFF && (level == ZIMP_TRACE_OFF || moved))
        stop_event();
    busy = true;
    pthread_mutex_lock(&T.lock);
    if (old > ZIMP_TRACE_OFF)
        flush_all_locked();             /* what was recorded goes where it was meant to */
    strcpy(T.dir, o.dir);
    T.otf2 = o.otf2;
    T.lttng = o.lttng;
    T.bufsize = o.bufsize;
    T.finished = false;
    if (!o.lttng)
        atomic_store(&T.lttng_fn, NULL);
    pthread_mutex_unlock(&T.lock);
    busy = false;
    atomic_store(&zimp__trace_level, level);
    if (level > ZIMP_TRACE_OFF && old == ZIMP_TRACE_OFF)
        start_event(level);
    return 0;
}

ZIMP_API int zimp_trace_level(void) { return atomic_load(&zimp__trace_level); }

ZIMP_API int zimp_trace_flush(void)
{
    bool was = busy;
    busy = true;
    pthread_mutex_lock(&T.lock);
    T.last_err = 0;
    int rc = flush_all_locked();
    pthread_mutex_unlock(&T.lock);
    busy = was;
    return rc;
}

ZIMP_API void zimp_trace_mark(const char *text)
{
    if (!ZIMP_TRACE_ON(ZIMP_TL_ERROR))
        return;
    struct zimp__trace_rec r = { .type = ZIMP_EV_MARK, .role = ZIMP_TR_NONE };
    emit(&r, text ? text : "");
}

ZIMP_API void zimp_trace_event(int event, const char *text)
{
    static const uint32_t types[] = {
        [ZIMP_TRACE_MPI_INIT] = ZIMP_EV_MPI_INIT,   [ZIMP_TRACE_MPI_FINALIZE] = ZIMP_EV_MPI_FINALIZE,
        [ZIMP_TRACE_MPI_SEND] = ZIMP_EV_MPI_SEND,   [ZIMP_TRACE_MPI_RECV] = ZIMP_EV_MPI_RECV,
        [ZIMP_TRACE_MPI_COLL] = ZIMP_EV_MPI_COLL,   [ZIMP_TRACE_MPI_ERROR] = ZIMP_EV_MPI_ERROR,
    };
    if (event < 1 || (size_t)event >= sizeof types / sizeof types[0])
        return;
    uint32_t type = types[event];
    if (!ZIMP_TRACE_ON(zimp__trace_event_level(type)))
        return;
    struct zimp__trace_rec r = { .type = type, .role = ZIMP_TR_NONE };
    emit(&r, text ? text : "");
}

ZIMP_API unsigned zimp_trace_outputs(void)
{
    unsigned o = 0;
#ifdef ZIMP_HAVE_OTF2
    o |= ZIMP_TRACE_HAVE_OTF2;
#endif
#ifdef ZIMP_HAVE_LTTNG
    o |= ZIMP_TRACE_HAVE_LTTNG;
#endif
    if (atomic_load(&zimp__trace_level) > ZIMP_TRACE_OFF) {
        if (atomic_load(&T.otf2))
            o |= ZIMP_TRACE_USE_OTF2;
        if (atomic_load(&T.lttng_fn))
            o |= ZIMP_TRACE_USE_LTTNG;
    }
    return o;
}

/* ---- process life: ZIMP_TRACE at load, fork, exit ---- */

static void fork_prepare(void) { pthread_mutex_lock(&T.lock); }
static void fork_parent(void) { pthread_mutex_unlock(&T.lock); }

static void fork_child(void)
{
    /* Only the forking thread lives on; its records are the parent's to write. */
    struct tbuf *keep = mine;
    for (struct tbuf *b = T.bufs, *next; b; b = next) {
        next = b->next;
        if (b != keep) {
            free(b->data);
            free(b);
        }
    }
    T.bufs = keep;
    if (keep) {
        keep->next = NULL;
        keep->flushed = 0;
        atomic_store_explicit(&keep->committed, 0, memory_order_relaxed);
        keep->pid = (int32_t)getpid();
        keep->tid = gettid_();
    }
    T.seq = 0;
    pthread_mutex_unlock(&T.lock);
}

__attribute__((constructor)) static void trace_init(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    char exe[64] = "";
    int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, exe, sizeof exe - 1);
        close(fd);
        exe[n > 0 ? n : 0] = '\0';
        exe[strcspn(exe, "\n")] = '\0';
    }
    snprintf(T.exe, sizeof T.exe, "%s", exe);
    const char *env = getenv("ZIMP_TRACE");
    if (!env || !*env)
        return;
    char level[16];
    size_t n = strcspn(env, ",");
    snprintf(level, sizeof level, "%.*s", (int)(n < sizeof level ? n : sizeof level - 1), env);
    int l = zimp_trace_level_of(level);
    /* A bad ZIMP_TRACE leaves tracing off (the library never prints). */
    if (l > 0)
        zimp_trace_set(l, env[n] ? env + n + 1 : "");
}

__attribute__((destructor)) static void trace_fini(void)
{
    if (atomic_load(&zimp__trace_level) == ZIMP_TRACE_OFF)
        return;
    stop_event();
    busy = true;
    pthread_mutex_lock(&T.lock);
    flush_all_locked();
    T.finished = true;
    pthread_mutex_unlock(&T.lock);
    busy = false;
}

#ifndef ZIMP_HAVE_OTF2
ZIMP_API int zimp_trace_export(const char *path, FILE *out, unsigned format)
{
    (void)path, (void)out, (void)format;
    return zimp__fail(-EOPNOTSUPP, "this libzimp was built without OTF2 (libotf2-trace-dev)");
}

ZIMP_API int zimp_trace_merge(const char *path, const char *out_dir)
{
    (void)path, (void)out_dir;
    return zimp__fail(-EOPNOTSUPP, "this libzimp was built without OTF2 (libotf2-trace-dev)");
}
#endif
