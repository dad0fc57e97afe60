/*
 * OTF2 archives through libotf2: writing a thread's records (a flush) or
 * many threads' (a merge) as one complete archive, reading archives back,
 * and the exports built on reading (Chrome/Perfetto JSON, text).
 *
 * Mapping: each zimp event is a pair Enter/Leave of the region named after
 * its type ("send", "open", ...), with the event's fields as attributes of
 * the Enter ("channel", "position", "length", "bytes", ...). A sleep's or
 * spin's Leave comes its duration later; every other Leave has the Enter's
 * time. A process is a location group ("PID exe"), a thread a location.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <otf2/otf2.h>

#include "zimp/trace.h"
#include "trace/trace_int.h"

int zimp__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zimp__clear_detail(void);
void zimp__note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define ANCHOR "traces"

/* Attributes of the Enter record. */
enum attr {
    A_CHANNEL, A_CHANNEL_ID, A_ROLE, A_INDEX, A_POSITION, A_LENGTH, A_BYTES, A_SLOTS,
    A_SLOT_SIZE, A_MAX_SENDERS, A_MAX_RECEIVERS, A_ERROR, A_PID, A_TEXT, A_HEAP, A_HEAP_ID,
    A_OFFSET, A_SIZE, A_COUNT
};
static const struct { const char *name, *desc; OTF2_Type type; } attrs[A_COUNT] = {
    [A_CHANNEL] = { "channel", "channel name", OTF2_TYPE_STRING },
    [A_CHANNEL_ID] = { "channel_id", "channel id (segment nonce)", OTF2_TYPE_UINT64 },
    [A_ROLE] = { "role", "sender, receiver or heap (member)", OTF2_TYPE_STRING },
    [A_INDEX] = { "index", "member record index", OTF2_TYPE_UINT32 },
    [A_POSITION] = { "position", "message position in the channel's order", OTF2_TYPE_UINT64 },
    [A_LENGTH] = { "length", "message length in bytes", OTF2_TYPE_UINT32 },
    [A_BYTES] = { "bytes", "first bytes of the message, hex", OTF2_TYPE_STRING },
    [A_SLOTS] = { "slots", "ring slots", OTF2_TYPE_UINT32 },
    [A_SLOT_SIZE] = { "slot_size", "bytes per slot", OTF2_TYPE_UINT32 },
    [A_MAX_SENDERS] = { "max_senders", "sender table size", OTF2_TYPE_UINT32 },
    [A_MAX_RECEIVERS] = { "max_receivers", "receiver table size", OTF2_TYPE_UINT32 },
    [A_ERROR] = { "error", "negative errno", OTF2_TYPE_INT32 },
    [A_PID] = { "pid", "process concerned", OTF2_TYPE_INT32 },
    [A_TEXT] = { "text", "name, reason or note", OTF2_TYPE_STRING },
    [A_HEAP] = { "heap", "heap name", OTF2_TYPE_STRING },
    [A_HEAP_ID] = { "heap_id", "heap id", OTF2_TYPE_UINT32 },
    [A_OFFSET] = { "offset", "block offset in its heap", OTF2_TYPE_UINT64 },
    [A_SIZE] = { "size", "heap size in bytes", OTF2_TYPE_UINT64 },
};

static const char *role_name(int32_t role)
{
    return role == ZIMP_TR_SENDER ? "sender" : role == ZIMP_TR_RECEIVER ? "receiver"
         : role == ZIMP_TR_HEAP ? "heap" : NULL;
}

/* Whether the event names a member record (a heap's create and unlink do not). */
static bool has_member(const struct zimp__trace_rec *r)
{
    return role_name(r->role) &&
           !(r->role == ZIMP_TR_HEAP && (r->type == ZIMP_EV_CREATE || r->type == ZIMP_EV_UNLINK));
}

static int32_t role_of(const char *name)
{
    return !strcmp(name, "sender") ? ZIMP_TR_SENDER : !strcmp(name, "receiver") ? ZIMP_TR_RECEIVER
         : !strcmp(name, "heap") ? ZIMP_TR_HEAP : ZIMP_TR_NONE;
}

/* The library never prints: OTF2's own messages are dropped, its codes checked. */
static OTF2_ErrorCode quiet(void *u, const char *file, uint64_t line, const char *fn,
                            OTF2_ErrorCode code, const char *fmt, va_list va)
{
    (void)u, (void)file, (void)line, (void)fn, (void)fmt, (void)va;
    return code;
}

static void silence(void) { OTF2_Error_RegisterCallback(quiet, NULL); }

/* ---- writing ---- */

/* Strings of one archive: deduplicated, numbered in order of first use. */
struct strtab { char **v; uint32_t n, cap; uint32_t *hash; uint32_t hcap; };

static uint32_t fnv(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

static int strtab_grow(struct strtab *t)
{
    uint32_t hcap = t->hcap ? 2 * t->hcap : 256;
    uint32_t *h = malloc(hcap * sizeof *h);
    if (!h)
        return -ENOMEM;
    memset(h, 0xff, hcap * sizeof *h);
    for (uint32_t i = 0; i < t->n; i++) {
        uint32_t k = fnv(t->v[i]) & (hcap - 1);
        while (h[k] != UINT32_MAX)
            k = (k + 1) & (hcap - 1);
        h[k] = i;
    }
    free(t->hash);
    t->hash = h;
    t->hcap = hcap;
    return 0;
}

/* The id of string s (added if new), or UINT32_MAX when out of memory. */
static uint32_t str_id(struct strtab *t, const char *s)
{
    if ((t->n + 1) * 2 > t->hcap && strtab_grow(t) != 0)
        return UINT32_MAX;
    uint32_t k = fnv(s) & (t->hcap - 1);
    while (t->hash[k] != UINT32_MAX) {
        if (!strcmp(t->v[t->hash[k]], s))
            return t->hash[k];
        k = (k + 1) & (t->hcap - 1);
    }
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 256;
        char **v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return UINT32_MAX;
        t->v = v;
        t->cap = cap;
    }
    if (!(t->v[t->n] = strdup(s)))
        return UINT32_MAX;
    t->hash[k] = t->n;
    return t->n++;
}

static void strtab_free(struct strtab *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        free(t->v[i]);
    free(t->v);
    free(t->hash);
}

static OTF2_FlushType pre_flush(void *u, OTF2_FileType ft, OTF2_LocationRef loc, void *c, bool final)
{
    (void)u, (void)ft, (void)loc, (void)c, (void)final;
    return OTF2_FLUSH;
}

static OTF2_TimeStamp post_flush(void *u, OTF2_FileType ft, OTF2_LocationRef loc)
{
    (void)u, (void)ft, (void)loc;
    return 0;
}

static OTF2_FlushCallbacks flush_cbs = { pre_flush, post_flush };

static void hex(const uint8_t *b, uint32_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (uint32_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* Adds a record's fields to the attribute list; false when out of memory. */
static bool add_attrs(OTF2_AttributeList *al, const struct zimp__trace_rec *r, const char *text,
                      struct strtab *st, const char *(*chan_name)(uint64_t, void *), void *arg)
{
    bool ok = true;
#define ADD_STR(a, s)                                                   \
    do {                                                                \
        uint32_t id_ = str_id(st, (s));                                 \
        ok &= id_ != UINT32_MAX &&                                      \
              OTF2_AttributeList_AddStringRef(al, (a), id_) == OTF2_SUCCESS; \
    } while (0)
    /* CREATE, UNLINK and OPEN carry the channel's (or heap's) name as their text. */
    bool named = r->type == ZIMP_EV_CREATE || r->type == ZIMP_EV_UNLINK || r->type == ZIMP_EV_OPEN;
    const char *name = named && r->textlen ? text : r->chan ? chan_name(r->chan, arg) : NULL;
    bool heap = r->role == ZIMP_TR_HEAP;
    if (name)
        ADD_STR(heap ? A_HEAP : A_CHANNEL, name);
    if (r->chan && heap)
        OTF2_AttributeList_AddUint32(al, A_HEAP_ID, (uint32_t)r->chan);
    else if (r->chan)
        OTF2_AttributeList_AddUint64(al, A_CHANNEL_ID, r->chan);
    if (role_name(r->role))
        ADD_STR(A_ROLE, role_name(r->role));
    if (has_member(r))
        OTF2_AttributeList_AddUint32(al, A_INDEX, r->index);
    if (heap) {
        if (r->type == ZIMP_EV_ALLOC || r->type == ZIMP_EV_FREE) {
            OTF2_AttributeList_AddUint64(al, A_OFFSET, r->pos);
            OTF2_AttributeList_AddUint32(al, A_LENGTH, r->len);
        } else if (r->pos) {
            OTF2_AttributeList_AddUint64(al, A_SIZE, r->pos);
        }
    } else {
        switch (r->type) {
        case ZIMP_EV_SEND:
        case ZIMP_EV_RECV: {
            char h[2 * ZIMP_TRACE_BYTES + 1];
            hex(r->bytes, r->nbytes < ZIMP_TRACE_BYTES ? r->nbytes : ZIMP_TRACE_BYTES, h);
            OTF2_AttributeList_AddUint64(al, A_POSITION, r->pos);
            OTF2_AttributeList_AddUint32(al, A_LENGTH, r->len);
            ADD_STR(A_BYTES, h);
            break;
        }
        case ZIMP_EV_CREATE:
        case ZIMP_EV_OPEN:
            if (r->len || r->slot_size) {
                OTF2_AttributeList_AddUint32(al, A_SLOTS, r->len);
                OTF2_AttributeList_AddUint32(al, A_SLOT_SIZE, r->slot_size);
                OTF2_AttributeList_AddUint32(al, A_MAX_SENDERS, r->max_senders);
                OTF2_AttributeList_AddUint32(al, A_MAX_RECEIVERS, r->max_receivers);
            }
            break;
        case ZIMP_EV_FLUSH:
        case ZIMP_EV_START:
            OTF2_AttributeList_AddUint32(al, A_LENGTH, r->len);
            break;
        default:
            break;
        }
    }
    if (r->err)
        OTF2_AttributeList_AddInt32(al, A_ERROR, r->err);
    if (r->pid)
        OTF2_AttributeList_AddInt32(al, A_PID, r->pid);
    if (r->textlen && !named)
        ADD_STR(A_TEXT, text);
#undef ADD_STR
    return ok;
}

static int otf2_err(OTF2_ErrorCode e, const char *what, const char *dir)
{
    return zimp__fail(e == OTF2_ERROR_EEXIST ? -EEXIST : -EIO, "OTF2: %s %s: %s", what, dir,
                      OTF2_Error_GetDescription(e));
}

int zimp__otf2_write(const char *dir, const struct zimp__trace_stream *s, size_t n,
                     const char *(*chan_name)(uint64_t, void *), void *arg)
{
    silence();
    /* Small chunks: each flush writes a new archive, and libotf2 allocates and
     * clears whole chunks (the defaults, 1 and 4 MiB, cost more than the events). */
    OTF2_Archive *a = OTF2_Archive_Open(dir, ANCHOR, OTF2_FILEMODE_WRITE, OTF2_CHUNK_SIZE_MIN,
                                        OTF2_CHUNK_SIZE_MIN, OTF2_SUBSTRATE_POSIX, OTF2_COMPRESSION_NONE);
    if (!a)
        return zimp__fail(-EIO, "OTF2: cannot open an archive at %s", dir);
    struct strtab st = { 0 };
    uint64_t *nevents = calloc(n ? n : 1, sizeof *nevents);
    OTF2_AttributeList *al = OTF2_AttributeList_New();
    uint64_t t_min = UINT64_MAX, t_max = 0;
    int rc = 0;
    OTF2_ErrorCode e;
    str_id(&st, "");
    if (!nevents || !al) {
        rc = -ENOMEM;
        goto out;
    }
    OTF2_Archive_SetFlushCallbacks(a, &flush_cbs, NULL);
    OTF2_Archive_SetSerialCollectiveCallbacks(a);
    OTF2_Archive_SetCreator(a, "zimp");
    if ((e = OTF2_Archive_OpenEvtFiles(a)) != OTF2_SUCCESS) {
        rc = otf2_err(e, "cannot open the event files of", dir);
        goto out;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        OTF2_EvtWriter *w = OTF2_Archive_GetEvtWriter(a, (OTF2_LocationRef)i);
        if (!w) {
            rc = zimp__fail(-EIO, "OTF2: no event writer in %s", dir);
            break;
        }
        const char *p = s[i].recs, *end = p + s[i].bytes;
        uint64_t last = 0;       /* a location's times never go back (OTF2 checks) */
        while (p < end) {
            const struct zimp__trace_rec *r = (const void *)p;
            p += zimp__trace_rec_size(r->textlen);
            if (r->type == 0 || r->type >= ZIMP_EV_COUNT)
                continue;
            char text[ZIMP_TRACE_TEXT_MAX + 1];
            snprintf(text, sizeof text, "%.*s", (int)r->textlen, zimp__trace_rec_text(r));
            if (!add_attrs(al, r, text, &st, chan_name, arg)) {
                rc = -ENOMEM;
                break;
            }
            /* A wait is recorded when it ends, with its start: an event its slow
             * checks recorded meanwhile (a death found) comes first; the wait
             * then starts there. */
            uint64_t t0 = r->ts < last ? last : r->ts, t1 = r->ts + r->dur < t0 ? t0 : r->ts + r->dur;
            last = t1;
            t_min = t0 < t_min ? t0 : t_min;
            t_max = t1 > t_max ? t1 : t_max;
            e = OTF2_EvtWriter_Enter(w, al, t0, r->type - 1);          /* region ids are dense */
            if (e == OTF2_SUCCESS)
                e = OTF2_EvtWriter_Leave(w, NULL, t1, r->type - 1);
            if (e != OTF2_SUCCESS) {
                rc = otf2_err(e, "cannot write events to", dir);
                break;
            }
            nevents[i] += 2;
        }
        OTF2_Archive_CloseEvtWriter(a, w);
    }
    OTF2_Archive_CloseEvtFiles(a);
    if (rc != 0)
        goto out;
    /* Local definitions: none, but readers expect the files. */
    if (OTF2_Archive_OpenDefFiles(a) == OTF2_SUCCESS) {
        for (size_t i = 0; i < n; i++) {
            OTF2_DefWriter *dw = OTF2_Archive_GetDefWriter(a, (OTF2_LocationRef)i);
            if (dw)
                OTF2_Archive_CloseDefWriter(a, dw);
        }
        OTF2_Archive_CloseDefFiles(a);
    }
    OTF2_GlobalDefWriter *g = OTF2_Archive_GetGlobalDefWriter(a);
    if (!g) {
        rc = zimp__fail(-EIO, "OTF2: no definition writer in %s", dir);
        goto out;
    }
    if (t_min == UINT64_MAX)
        t_min = t_max = 0;
    OTF2_GlobalDefWriter_WriteClockProperties(g, 1000000000ull, t_min, t_max - t_min + 1,
                                              OTF2_UNDEFINED_TIMESTAMP);
    /* Names first: string ids of every definition below, then the strings. */
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    uint32_t sid_host = str_id(&st, host), sid_node = str_id(&st, "node");
    uint32_t sid_region[ZIMP_EV_COUNT] = { 0 }, sid_attr[A_COUNT], sid_adesc[A_COUNT];
    for (uint32_t t = 1; t < ZIMP_EV_COUNT; t++)
        sid_region[t] = str_id(&st, zimp__trace_event_name(t));
    for (int k = 0; k < A_COUNT; k++) {
        sid_attr[k] = str_id(&st, attrs[k].name);
        sid_adesc[k] = str_id(&st, attrs[k].desc);
    }
    uint32_t *sid_group = calloc(2 * (n ? n : 1), sizeof *sid_group);
    uint32_t *group_of = calloc(n ? n : 1, sizeof *group_of), ngroups = 0;
    if (!sid_group || !group_of) {
        free(sid_group);
        free(group_of);
        rc = -ENOMEM;
        goto out;
    }
    int32_t *gpid = (int32_t *)(sid_group + n);   /* second half: the pid of each group */
    for (size_t i = 0; i < n; i++) {
        uint32_t gi = 0;
        while (gi < ngroups && gpid[gi] != s[i].pid)
            gi++;
        if (gi == ngroups) {
            char name[128];
            snprintf(name, sizeof name, "%d %s", (int)s[i].pid, s[i].exe ? s[i].exe : "");
            gpid[gi] = s[i].pid;
            sid_group[gi] = str_id(&st, name);
            ngroups++;
        }
        group_of[i] = gi;
    }
    uint32_t *sid_loc = calloc(n ? n : 1, sizeof *sid_loc);
    for (size_t i = 0; sid_loc && i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "thread %u", s[i].tid);
        sid_loc[i] = str_id(&st, name);
    }
    if (!sid_loc) {
        free(sid_group);
        free(group_of);
        rc = -ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < st.n; i++)
        OTF2_GlobalDefWriter_WriteString(g, i, st.v[i]);
    for (int k = 0; k < A_COUNT; k++)
        OTF2_GlobalDefWriter_WriteAttribute(g, (OTF2_AttributeRef)k, sid_attr[k], sid_adesc[k], attrs[k].type);
    for (uint32_t t = 1; t < ZIMP_EV_COUNT; t++)   /* every type: ids 0, 1, ... in order */
        OTF2_GlobalDefWriter_WriteRegion(g, t - 1, sid_region[t], sid_region[t], sid_region[t],
                                         OTF2_REGION_ROLE_FUNCTION, OTF2_PARADIGM_USER,
                                         OTF2_REGION_FLAG_NONE, 0, 0, 0);
    OTF2_GlobalDefWriter_WriteSystemTreeNode(g, 0, sid_host, sid_node, OTF2_UNDEFINED_SYSTEM_TREE_NODE);
    for (uint32_t gi = 0; gi < ngroups; gi++)
        OTF2_GlobalDefWriter_WriteLocationGroup(g, gi, sid_group[gi], OTF2_LOCATION_GROUP_TYPE_PROCESS, 0,
                                                OTF2_UNDEFINED_LOCATION_GROUP);
    for (size_t i = 0; i < n; i++)
        OTF2_GlobalDefWriter_WriteLocation(g, (OTF2_LocationRef)i, sid_loc[i], OTF2_LOCATION_TYPE_CPU_THREAD,
                                           nevents[i], group_of[i]);
    free(sid_group);
    free(group_of);
    free(sid_loc);
out:
    if (al)
        OTF2_AttributeList_Delete(al);
    e = OTF2_Archive_Close(a);
    if (rc == 0 && e != OTF2_SUCCESS)
        rc = otf2_err(e, "cannot close", dir);
    free(nevents);
    strtab_free(&st);
    return rc;
}

/* ---- reading ---- */

struct loc { uint64_t id; int32_t pid; uint32_t tid; uint32_t group; size_t open; bool has_open; };
struct group { uint64_t id; int32_t pid; char *exe; };

struct reader {
    char **str; uint64_t nstr;
    int attr_of[256];            /* archive attribute id -> enum attr, -1 */
    uint32_t region_type[64];    /* archive region id -> event type (0: not ours) */
    struct loc *locs; size_t nlocs;
    struct group *groups; size_t ngroups;
    struct zimp__trace_ev *evs; size_t nevs, cap;
    bool oom;
    int skipped;                 /* archives below the named directory that could not be read */
    char skip_why[512];          /* the first one's detail */
};

static const char *rstr(struct reader *r, OTF2_StringRef id)
{
    return id < r->nstr && r->str[id] ? r->str[id] : "";
}

static OTF2_CallbackCode def_string(void *u, OTF2_StringRef self, const char *s)
{
    struct reader *r = u;
    if (self >= r->nstr) {
        uint64_t n = self + 1 > 2 * r->nstr ? self + 1 : 2 * r->nstr;
        char **v = realloc(r->str, n * sizeof *v);
        if (!v)
            return OTF2_CALLBACK_INTERRUPT;
        memset(v + r->nstr, 0, (n - r->nstr) * sizeof *v);
        r->str = v;
        r->nstr = n;
    }
    free(r->str[self]);
    r->str[self] = strdup(s);
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_attr(void *u, OTF2_AttributeRef self, OTF2_StringRef name,
                                  OTF2_StringRef desc, OTF2_Type type)
{
    struct reader *r = u;
    (void)desc, (void)type;
    if (self < 256)
        for (int k = 0; k < A_COUNT; k++)
            if (!strcmp(rstr(r, name), attrs[k].name))
                r->attr_of[self] = k;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_region(void *u, OTF2_RegionRef self, OTF2_StringRef name, OTF2_StringRef cn,
                                    OTF2_StringRef d, OTF2_RegionRole role, OTF2_Paradigm p,
                                    OTF2_RegionFlag f, OTF2_StringRef file, uint32_t b, uint32_t e)
{
    struct reader *r = u;
    (void)cn, (void)d, (void)role, (void)p, (void)f, (void)file, (void)b, (void)e;
    if (self < 64)
        r->region_type[self] = zimp__trace_event_type(rstr(r, name));
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_group(void *u, OTF2_LocationGroupRef self, OTF2_StringRef name,
                                   OTF2_LocationGroupType type, OTF2_SystemTreeNodeRef parent,
                                   OTF2_LocationGroupRef creator)
{
    struct reader *r = u;
    (void)type, (void)parent, (void)creator;
    struct group *g = realloc(r->groups, (r->ngroups + 1) * sizeof *g);
    if (!g)
        return OTF2_CALLBACK_INTERRUPT;
    r->groups = g;
    const char *s = rstr(r, name);
    char *sp;
    g[r->ngroups].id = self;
    g[r->ngroups].pid = (int32_t)strtol(s, &sp, 10);
    g[r->ngroups].exe = strdup(*sp == ' ' ? sp + 1 : s);
    r->ngroups++;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_loc(void *u, OTF2_LocationRef self, OTF2_StringRef name, OTF2_LocationType type,
                                 uint64_t nev, OTF2_LocationGroupRef group)
{
    struct reader *r = u;
    (void)type, (void)nev;
    struct loc *l = realloc(r->locs, (r->nlocs + 1) * sizeof *l);
    if (!l)
        return OTF2_CALLBACK_INTERRUPT;
    r->locs = l;
    unsigned tid = 0;
    sscanf(rstr(r, name), "thread %u", &tid);
    l[r->nlocs] = (struct loc){ .id = self, .tid = tid, .group = (uint32_t)group };
    r->nlocs++;
    return OTF2_CALLBACK_SUCCESS;
}

static struct loc *find_loc(struct reader *r, OTF2_LocationRef id)
{
    for (size_t i = 0; i < r->nlocs; i++)
        if (r->locs[i].id == id)
            return &r->locs[i];
    return NULL;
}

static OTF2_CallbackCode evt_enter(OTF2_LocationRef loc, OTF2_TimeStamp t, void *u, OTF2_AttributeList *al,
                                   OTF2_RegionRef region)
{
    struct reader *r = u;
    struct loc *l = find_loc(r, loc);
    uint32_t type = region < 64 ? r->region_type[region] : 0;
    if (!l || !type)
        return OTF2_CALLBACK_SUCCESS;
    if (r->nevs == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 1024;
        struct zimp__trace_ev *v = realloc(r->evs, cap * sizeof *v);
        if (!v) {
            r->oom = true;
            return OTF2_CALLBACK_INTERRUPT;
        }
        r->evs = v;
        r->cap = cap;
    }
    struct zimp__trace_ev *ev = &r->evs[r->nevs];
    memset(ev, 0, sizeof *ev);
    ev->r.ts = t;
    ev->r.type = type;
    ev->r.role = ZIMP_TR_NONE;
    ev->r.level = (uint32_t)zimp__trace_event_level(type);
    ev->pid = l->pid;
    ev->tid = l->tid;
    const char *text = "", *chan = NULL, *exe = "";
    for (size_t g = 0; g < r->ngroups; g++)
        if (r->groups[g].id == l->group)
            exe = r->groups[g].exe ? r->groups[g].exe : "";
    uint32_t na = OTF2_AttributeList_GetNumberOfElements(al);
    for (uint32_t i = 0; i < na; i++) {
        OTF2_AttributeRef a;
        OTF2_Type ty;
        OTF2_AttributeValue v;
        if (OTF2_AttributeList_GetAttributeByIndex(al, i, &a, &ty, &v) != OTF2_SUCCESS || a >= 256)
            continue;
        switch (r->attr_of[a]) {
        case A_CHANNEL: case A_HEAP: chan = rstr(r, v.stringRef); break;
        case A_CHANNEL_ID: ev->r.chan = v.uint64; break;
        case A_HEAP_ID: ev->r.chan = v.uint32; break;
        case A_OFFSET: case A_SIZE: ev->r.pos = v.uint64; break;
        case A_ROLE: ev->r.role = role_of(rstr(r, v.stringRef)); break;
        case A_INDEX: ev->r.index = v.uint32; break;
        case A_POSITION: ev->r.pos = v.uint64; break;
        case A_LENGTH: ev->r.len = v.uint32; break;
        case A_SLOTS: ev->r.len = v.uint32; break;
        case A_SLOT_SIZE: ev->r.slot_size = v.uint32; break;
        case A_MAX_SENDERS: ev->r.max_senders = v.uint32; break;
        case A_MAX_RECEIVERS: ev->r.max_receivers = v.uint32; break;
        case A_ERROR: ev->r.err = v.int32; break;
        case A_PID: ev->r.pid = v.int32; break;
        case A_TEXT: text = rstr(r, v.stringRef); break;
        case A_BYTES: {
            const char *h = rstr(r, v.stringRef);
            uint32_t nb = 0;
            unsigned x;
            while (nb < ZIMP_TRACE_BYTES && h[2 * nb] && h[2 * nb + 1] && sscanf(h + 2 * nb, "%2x", &x) == 1)
                ev->r.bytes[nb++] = (uint8_t)x;
            ev->r.nbytes = nb;
            break;
        }
        default: break;
        }
    }
    if (!*text && chan && (type == ZIMP_EV_CREATE || type == ZIMP_EV_UNLINK || type == ZIMP_EV_OPEN))
        text = chan;
    ev->text = strdup(text);
    ev->chan_name = chan ? strdup(chan) : NULL;
    ev->exe = strdup(exe);
    size_t tl = strlen(text);
    ev->r.textlen = (uint32_t)(tl < ZIMP_TRACE_TEXT_MAX ? tl : ZIMP_TRACE_TEXT_MAX);
    if (!ev->text || !ev->exe) {
        r->oom = true;
        return OTF2_CALLBACK_INTERRUPT;
    }
    l->open = r->nevs++;
    l->has_open = true;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode evt_leave(OTF2_LocationRef loc, OTF2_TimeStamp t, void *u, OTF2_AttributeList *al,
                                   OTF2_RegionRef region)
{
    struct reader *r = u;
    (void)al, (void)region;
    struct loc *l = find_loc(r, loc);
    if (l && l->has_open) {
        struct zimp__trace_ev *ev = &r->evs[l->open];
        ev->r.dur = t > ev->r.ts ? t - ev->r.ts : 0;
        l->has_open = false;
    }
    return OTF2_CALLBACK_SUCCESS;
}

static void reader_reset(struct reader *r)
{
    for (uint64_t i = 0; i < r->nstr; i++)
        free(r->str[i]);
    free(r->str);
    for (size_t i = 0; i < r->ngroups; i++)
        free(r->groups[i].exe);
    free(r->groups);
    free(r->locs);
    r->str = NULL;
    r->nstr = 0;
    r->groups = NULL;
    r->ngroups = 0;
    r->locs = NULL;
    r->nlocs = 0;
    memset(r->attr_of, 0xff, sizeof r->attr_of);
    memset(r->region_type, 0, sizeof r->region_type);
}

/*
 * Whether the files OTF2 will open for the archive of anchor `dir/traces.otf2`
 * (traces.def and everything in traces/) are regular files: OTF2 opens them
 * blocking, and a FIFO among them would hang the reader for ever.
 */
static int archive_files_plain(const char *anchor)
{
    char dir[PATH_MAX], p[PATH_MAX + 8];
    size_t dl = strlen(anchor) - strlen(ANCHOR ".otf2");
    snprintf(dir, sizeof dir, "%.*s" ANCHOR, (int)dl, anchor);
    struct stat st;
    snprintf(p, sizeof p, "%s.def", dir);
    if (lstat(p, &st) == 0 && !S_ISREG(st.st_mode))
        return zimp__fail(-EIO, "OTF2: %s is not a regular file", p);
    DIR *d = opendir(dir);
    if (!d)
        return 0;                                  /* none: OTF2 says what is missing */
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            !S_ISREG(st.st_mode))
            rc = zimp__fail(-EIO, "OTF2: %s/%s is not a regular file", dir, e->d_name);
    closedir(d);
    return rc;
}

/* Reads one archive (its anchor file) into r->evs. */
static int read_archive(struct reader *r, const char *anchor)
{
    reader_reset(r);
    /* The anchor is written last: empty, the archive was cut short (a kill in
     * the middle of its flush, a full disk). Said here: OTF2's failed open
     * also leaks what it allocated. */
    struct stat st;
    if (stat(anchor, &st) == 0 && st.st_size == 0)
        return zimp__fail(-EIO, "OTF2: %s is empty (the archive was cut short)", anchor);
    int plain = archive_files_plain(anchor);
    if (plain != 0)
        return plain;
    OTF2_Reader *rd = OTF2_Reader_Open(anchor);
    if (!rd)
        return zimp__fail(-EIO, "OTF2: cannot open %s", anchor);
    int rc = 0;
    uint64_t n;
    OTF2_Reader_SetSerialCollectiveCallbacks(rd);
    OTF2_GlobalDefReader *gdr = OTF2_Reader_GetGlobalDefReader(rd);
    OTF2_GlobalDefReaderCallbacks *dc = OTF2_GlobalDefReaderCallbacks_New();
    if (!gdr || !dc) {
        if (dc)
            OTF2_GlobalDefReaderCallbacks_Delete(dc);
        rc = zimp__fail(-EIO, "OTF2: cannot read the definitions of %s", anchor);
        goto out;
    }
    OTF2_GlobalDefReaderCallbacks_SetStringCallback(dc, def_string);
    OTF2_GlobalDefReaderCallbacks_SetAttributeCallback(dc, def_attr);
    OTF2_GlobalDefReaderCallbacks_SetRegionCallback(dc, def_region);
    OTF2_GlobalDefReaderCallbacks_SetLocationGroupCallback(dc, def_group);
    OTF2_GlobalDefReaderCallbacks_SetLocationCallback(dc, def_loc);
    OTF2_Reader_RegisterGlobalDefCallbacks(rd, gdr, dc, r);
    OTF2_GlobalDefReaderCallbacks_Delete(dc);
    if (OTF2_Reader_ReadAllGlobalDefinitions(rd, gdr, &n) != OTF2_SUCCESS) {
        OTF2_Reader_CloseGlobalDefReader(rd, gdr);
        rc = zimp__fail(-EIO, "OTF2: bad definitions in %s", anchor);
        goto out;
    }
    OTF2_Reader_CloseGlobalDefReader(rd, gdr);
    for (size_t i = 0; i < r->nlocs; i++) {
        for (size_t g = 0; g < r->ngroups; g++)
            if (r->groups[g].id == r->locs[i].group)
                r->locs[i].pid = r->groups[g].pid;
        OTF2_Reader_SelectLocation(rd, r->locs[i].id);
    }
    if (OTF2_Reader_OpenDefFiles(rd) == OTF2_SUCCESS) {
        for (size_t i = 0; i < r->nlocs; i++) {
            OTF2_DefReader *d = OTF2_Reader_GetDefReader(rd, r->locs[i].id);
            if (d) {
                OTF2_Reader_ReadAllLocalDefinitions(rd, d, &n);
                OTF2_Reader_CloseDefReader(rd, d);
            }
        }
        OTF2_Reader_CloseDefFiles(rd);
    }
    OTF2_Reader_OpenEvtFiles(rd);
    for (size_t i = 0; i < r->nlocs; i++)
        OTF2_Reader_GetEvtReader(rd, r->locs[i].id);
    OTF2_GlobalEvtReader *ger = OTF2_Reader_GetGlobalEvtReader(rd);
    OTF2_GlobalEvtReaderCallbacks *ec = OTF2_GlobalEvtReaderCallbacks_New();
    if (!ger || !ec) {
        if (ec)
            OTF2_GlobalEvtReaderCallbacks_Delete(ec);
        rc = zimp__fail(-EIO, "OTF2: cannot read the events of %s", anchor);
        goto out;
    }
    OTF2_GlobalEvtReaderCallbacks_SetEnterCallback(ec, evt_enter);
    OTF2_GlobalEvtReaderCallbacks_SetLeaveCallback(ec, evt_leave);
    OTF2_Reader_RegisterGlobalEvtCallbacks(rd, ger, ec, r);
    OTF2_GlobalEvtReaderCallbacks_Delete(ec);
    OTF2_ErrorCode e = OTF2_Reader_ReadAllGlobalEvents(rd, ger, &n);
    OTF2_Reader_CloseGlobalEvtReader(rd, ger);
    OTF2_Reader_CloseEvtFiles(rd);
    if (r->oom)
        rc = zimp__fail(-ENOMEM, "out of memory reading %s", anchor);
    else if (e != OTF2_SUCCESS)
        rc = zimp__fail(-EIO, "OTF2: bad events in %s: %s", anchor, OTF2_Error_GetDescription(e));
out:
    OTF2_Reader_Close(rd);
    return rc;
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Reads the archive at path, or every archive one or two levels below it. */
static int read_tree(struct reader *r, const char *path, int depth, int *archives)
{
    char p[PATH_MAX];
    size_t len = strlen(path);
    if (len > 5 && !strcmp(path + len - 5, ".otf2") && is_file(path)) {
        ++*archives;
        return read_archive(r, path);
    }
    if (snprintf(p, sizeof p, "%s/" ANCHOR ".otf2", path) < (int)sizeof p && is_file(p)) {
        ++*archives;
        return read_archive(r, p);
    }
    struct stat st;
    if (lstat(p, &st) == 0) {                      /* an anchor that is no file: a damaged archive */
        ++*archives;
        return zimp__fail(-EIO, "OTF2: %s is not a regular file", p);
    }
    if (depth == 0)
        return 0;
    DIR *d = opendir(path);
    if (!d)
        return zimp__fail(-errno, "cannot read %s: %s", path, strerror(errno));
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char **v = realloc(names, (n + 1) * sizeof *v);
        if (!v || !(v[n] = strdup(e->d_name))) {
            names = v ? v : names;
            rc = -ENOMEM;
            break;
        }
        names = v;
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && snprintf(p, sizeof p, "%s/%s", path, names[i]) < (int)sizeof p) {
            /* Directories only, not links to them: a link to "." or to an
             * archive would read the same events twice. */
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
                rc = read_tree(r, p, depth - 1, archives);
            /*
             * One process's archive cut short (killed while it flushed, or
             * the disk full), or a directory we may not read, must not hide
             * every other process's: skip it, keep what it gave, and say so
             * in zimp_last_detail.
             */
            if (rc < 0 && rc != -ENOMEM) {
                if (rc != -EIO)
                    ++*archives;                   /* counted as one it could not read */
                if (r->skipped++ == 0)
                    snprintf(r->skip_why, sizeof r->skip_why, "%s", zimp_last_detail());
                rc = 0;
            }
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

static int by_time(const void *a, const void *b)
{
    const struct zimp__trace_ev *x = a, *y = b;
    if (x->r.ts != y->r.ts)
        return x->r.ts < y->r.ts ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

int zimp__otf2_read(const char *path, struct zimp__trace_ev **evs, size_t *n)
{
    struct reader r = { 0 };
    int archives = 0;
    silence();
    zimp__clear_detail();
    int rc = read_tree(&r, path, 2, &archives);
    reader_reset(&r);
    free(r.str);
    if (rc == 0 && archives == r.skipped)
        rc = archives ? zimp__fail(-EIO, "no archive below %s could be read (%s)", path, r.skip_why)
                      : zimp__fail(-ENOENT, "no OTF2 archive (traces.otf2) at or below %s", path);
    else if (rc == 0 && r.skipped)
        zimp__note("%d of %d archives below %s could not be read and were skipped; the first: %s",
                   r.skipped, archives, path, r.skip_why);
    if (rc != 0) {
        zimp__trace_evs_free(r.evs, r.nevs);
        return rc;
    }
    /* Equal times keep their reading order (a thread's recording order). */
    for (size_t i = 0; i < r.nevs; i++)
        r.evs[i].order = i;
    qsort(r.evs, r.nevs, sizeof *r.evs, by_time);
    /* Channel names: from each channel's open events when an event lacks one. */
    for (size_t i = 0; i < r.nevs; i++) {
        if (r.evs[i].chan_name || !r.evs[i].r.chan)
            continue;
        for (size_t k = 0; k < r.nevs; k++)
            if (r.evs[k].r.chan == r.evs[i].r.chan && r.evs[k].chan_name) {
                r.evs[i].chan_name = strdup(r.evs[k].chan_name);
                break;
            }
    }
    *evs = r.evs;
    *n = r.nevs;
    return (int)(r.nevs > INT_MAX ? INT_MAX : r.nevs);
}

void zimp__trace_evs_free(struct zimp__trace_ev *evs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(evs[i].text);
        free(evs[i].chan_name);
        free(evs[i].exe);
    }
    free(evs);
}

/* ---- exports ---- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}


static void export_json(FILE *f, const struct zimp__trace_ev *e, size_t n)
{
    uint64_t t0 = n ? e[0].r.ts : 0;
    fprintf(f, "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"generator\": \"zimp trace export\"},\n"
               " \"traceEvents\": [");
    bool first = true;
    /* Process and thread names once each. */
    for (size_t i = 0; i < n; i++) {
        bool seen_p = false, seen_t = false;
        for (size_t k = 0; k < i && !(seen_p && seen_t); k++) {
            seen_p |= e[k].pid == e[i].pid;
            seen_t |= e[k].pid == e[i].pid && e[k].tid == e[i].tid;
        }
        if (!seen_p) {
            char name[128];
            snprintf(name, sizeof name, "%s (pid %d)", e[i].exe, (int)e[i].pid);
            fprintf(f, "%s\n  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %u, \"args\": {\"name\": ",
                    first ? "" : ",", (int)e[i].pid, e[i].tid);
            json_str(f, name);
            fprintf(f, "}}");
            first = false;
        }
        if (!seen_t) {
            fprintf(f, ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %u, "
                       "\"args\": {\"name\": \"thread %u\"}}", (int)e[i].pid, e[i].tid, e[i].tid);
        }
    }
    for (size_t i = 0; i < n; i++) {
        const struct zimp__trace_rec *r = &e[i].r;
        static const char *lv[] = { "off", "error", "info", "debug", "test" };
        double ts = (double)(r->ts - t0) / 1000.0;
        fprintf(f, "%s\n  {\"name\": \"%s\", \"cat\": \"zimp,%s\", ", first ? "" : ",",
                zimp__trace_event_name(r->type), lv[r->level <= 4 ? r->level : 4]);
        first = false;
        if (r->type == ZIMP_EV_SLEEP || r->type == ZIMP_EV_SPIN)
            fprintf(f, "\"ph\": \"X\", \"dur\": %.3f, ", (double)r->dur / 1000.0);
        else
            fprintf(f, "\"ph\": \"i\", \"s\": \"t\", ");
        fprintf(f, "\"ts\": %.3f, \"pid\": %d, \"tid\": %u, \"args\": {", ts, (int)e[i].pid, e[i].tid);
        const char *sep = "";
        bool heap = r->role == ZIMP_TR_HEAP;
        if (e[i].chan_name) {
            fprintf(f, heap ? "\"heap\": " : "\"channel\": ");
            json_str(f, e[i].chan_name);
            sep = ", ";
        }
        if (r->chan && heap)
            fprintf(f, "%s\"heap_id\": \"%08" PRIx64 "\"", sep, r->chan), sep = ", ";
        else if (r->chan)
            fprintf(f, "%s\"channel_id\": \"%016" PRIx64 "\"", sep, r->chan), sep = ", ";
        if (role_name(r->role))
            fprintf(f, "%s\"role\": \"%s\"", sep, role_name(r->role)), sep = ", ";
        if (has_member(r))
            fprintf(f, "%s\"index\": %u", sep, r->index), sep = ", ";
        if (heap && (r->type == ZIMP_EV_ALLOC || r->type == ZIMP_EV_FREE))
            fprintf(f, "%s\"offset\": %" PRIu64 ", \"length\": %u", sep, r->pos, r->len), sep = ", ";
        else if (heap && r->pos)
            fprintf(f, "%s\"size\": %" PRIu64, sep, r->pos), sep = ", ";
        if (r->type == ZIMP_EV_SEND || r->type == ZIMP_EV_RECV) {
            char h[2 * ZIMP_TRACE_BYTES + 1];
            hex(r->bytes, r->nbytes, h);
            fprintf(f, "%s\"position\": %" PRIu64 ", \"length\": %u, \"bytes\": \"%s\"", sep, r->pos, r->len, h);
            sep = ", ";
        }
        if (!heap && (r->type == ZIMP_EV_CREATE || r->type == ZIMP_EV_OPEN) && (r->len || r->slot_size)) {
            fprintf(f, "%s\"slots\": %u, \"slot_size\": %u, \"max_senders\": %u, \"max_receivers\": %u", sep,
                    r->len, r->slot_size, r->max_senders, r->max_receivers);
            sep = ", ";
        }
        if (r->type == ZIMP_EV_SLEEP || r->type == ZIMP_EV_SPIN)
            fprintf(f, "%s\"ns\": %" PRIu64, sep, r->dur), sep = ", ";
        if (r->err) {
            fprintf(f, "%s\"error\": %d, \"strerror\": ", sep, (int)r->err);
            json_str(f, zimp_strerror(r->err));
            sep = ", ";
        }
        if (r->pid)
            fprintf(f, "%s\"pid\": %d", sep, (int)r->pid), sep = ", ";
        if (e[i].text && *e[i].text && !(e[i].chan_name && !strcmp(e[i].text, e[i].chan_name))) {
            fprintf(f, "%s\"text\": ", sep);
            json_str(f, e[i].text);
        }
        fprintf(f, "}}");
    }
    fprintf(f, "\n]}\n");
}

static void export_text(FILE *f, const struct zimp__trace_ev *e, size_t n)
{
    uint64_t t0 = n ? e[0].r.ts : 0;
    for (size_t i = 0; i < n; i++) {
        const struct zimp__trace_rec *r = &e[i].r;
        fprintf(f, "%14.6f %7d/%-7u %-6s", (double)(r->ts - t0) / 1e9, (int)e[i].pid, e[i].tid,
                zimp__trace_event_name(r->type));
        bool heap = r->role == ZIMP_TR_HEAP;
        if (e[i].chan_name)
            fprintf(f, " %s=%s", heap ? "heap" : "channel", e[i].chan_name);
        else if (r->chan)
            fprintf(f, heap ? " heap=%08" PRIx64 : " channel=%016" PRIx64, r->chan);
        if (has_member(r))
            fprintf(f, " %s=%u", heap ? "member" : role_name(r->role), r->index);
        if (heap && (r->type == ZIMP_EV_ALLOC || r->type == ZIMP_EV_FREE))
            fprintf(f, " offset=%" PRIu64 " length=%u", r->pos, r->len);
        else if (heap && r->pos)
            fprintf(f, " size=%" PRIu64, r->pos);
        if (r->type == ZIMP_EV_SEND || r->type == ZIMP_EV_RECV) {
            char h[2 * ZIMP_TRACE_BYTES + 1];
            hex(r->bytes, r->nbytes, h);
            fprintf(f, " position=%" PRIu64 " length=%u bytes=%s", r->pos, r->len, h);
        }
        if (!heap && (r->type == ZIMP_EV_CREATE || r->type == ZIMP_EV_OPEN) && (r->len || r->slot_size))
            fprintf(f, " slots=%u slot_size=%u max_senders=%u max_receivers=%u", r->len, r->slot_size,
                    r->max_senders, r->max_receivers);
        if (r->dur)
            fprintf(f, " ns=%" PRIu64, r->dur);
        if (r->err)
            fprintf(f, " error=%d", (int)r->err);
        if (r->pid)
            fprintf(f, " pid=%d", (int)r->pid);
        if (e[i].text && *e[i].text && !(e[i].chan_name && !strcmp(e[i].text, e[i].chan_name)))
            fprintf(f, " \"%s\"", e[i].text);
        fputc('\n', f);
    }
}

ZIMP_API int zimp_trace_export(const char *path, FILE *out, unsigned format)
{
    if (!path || !out || (format != ZIMP_TRACE_JSON && format != ZIMP_TRACE_TEXT))
        return zimp__fail(-EINVAL, "trace export needs a path, a stream and a format");
    struct zimp__trace_ev *evs = NULL;
    size_t n = 0;
    int rc = zimp__otf2_read(path, &evs, &n);
    if (rc < 0)
        return rc;
    if (format == ZIMP_TRACE_JSON)
        export_json(out, evs, n);
    else
        export_text(out, evs, n);
    zimp__trace_evs_free(evs, n);
    if (fflush(out) != 0 || ferror(out))
        return zimp__fail(-EIO, "cannot write the export: %s", strerror(errno));
    return rc;
}

/* ---- merge ---- */

struct merge_names { const struct zimp__trace_ev *evs; size_t n; };

static const char *merged_chan_name(uint64_t chan, void *arg)
{
    const struct merge_names *m = arg;
    for (size_t i = 0; i < m->n; i++)
        if (m->evs[i].r.chan == chan && m->evs[i].chan_name)
            return m->evs[i].chan_name;
    return NULL;
}

static int by_thread(const void *a, const void *b)
{
    const struct zimp__trace_ev *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->r.ts != y->r.ts)
        return x->r.ts < y->r.ts ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

ZIMP_API int zimp_trace_merge(const char *path, const char *out_dir)
{
    struct stat st;
    if (!path || !out_dir)
        return zimp__fail(-EINVAL, "trace merge needs a path and an output directory");
    if (stat(out_dir, &st) == 0)
        return zimp__fail(-EEXIST, "%s exists: merge writes a new archive", out_dir);
    struct zimp__trace_ev *evs = NULL;
    size_t n = 0;
    int rc = zimp__otf2_read(path, &evs, &n);
    if (rc < 0)
        return rc;
    qsort(evs, n, sizeof *evs, by_thread);
    /* One stream of records per thread. */
    size_t bytes = 0, nthreads = 0;
    for (size_t i = 0; i < n; i++) {
        bytes += zimp__trace_rec_size(evs[i].r.textlen);
        nthreads += i == 0 || evs[i].pid != evs[i - 1].pid || evs[i].tid != evs[i - 1].tid;
    }
    char *buf = malloc(bytes ? bytes : 1);
    struct zimp__trace_stream *s = calloc(nthreads ? nthreads : 1, sizeof *s);
    if (!buf || !s) {
        rc = zimp__fail(-ENOMEM, "out of memory");
        goto out;
    }
    size_t at = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || evs[i].pid != evs[i - 1].pid || evs[i].tid != evs[i - 1].tid) {
            s[k++] = (struct zimp__trace_stream){ evs[i].pid, evs[i].tid, evs[i].exe, buf + at, 0 };
        }
        struct zimp__trace_rec *r = (struct zimp__trace_rec *)(buf + at);
        size_t sz = zimp__trace_rec_size(evs[i].r.textlen);
        memset(r, 0, sz);
        *r = evs[i].r;
        memcpy(r + 1, evs[i].text, evs[i].r.textlen);
        at += sz;
        s[k - 1].bytes += sz;
    }
    struct merge_names names = { evs, n };
    int w = zimp__otf2_write(out_dir, s, nthreads, merged_chan_name, &names);
    if (w < 0)
        rc = w;
out:
    free(buf);
    free(s);
    zimp__trace_evs_free(evs, n);
    return rc;
}
