/*
 * Handle tables, error classes, error strings and error handlers.
 *
 * A handle is `kind | index`: the kind byte lets every call reject a handle
 * of the wrong kind (MPI_ERR_COMM for a datatype passed as a communicator)
 * instead of reading the wrong table.
 */
#include "mpi_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>

char zm_detail[256];
struct zm_table zm_errhandlers;

/* O(1): a request per message comes and goes in tables of thousands of handles. */
int zm_table_add(struct zm_table *t, void *obj)
{
    while (t->nfree) {
        unsigned i = t->free[--t->nfree];
        if (i < t->len && !t->items[i]) {
            t->items[i] = obj;
            return (int)i;
        }
    }
    if (t->len == t->cap) {
        unsigned cap = t->cap ? t->cap * 2 : 64;
        if (cap > ZM_INDEX_MASK)
            return -1;
        void **items = realloc(t->items, cap * sizeof *items);
        if (!items)
            return -1;
        memset(items + t->cap, 0, (cap - t->cap) * sizeof *items);
        t->items = items;
        t->cap = cap;
    }
    if (t->len == 0)
        t->len = 1;           /* index 0 is the NULL handle */
    t->items[t->len] = obj;
    return (int)t->len++;
}

void *zm_table_get(const struct zm_table *t, int handle, unsigned kind)
{
    unsigned h = (unsigned)handle;
    if ((h & ZM_KIND_MASK) != kind)
        return NULL;
    unsigned i = h & ZM_INDEX_MASK;
    return i < t->len ? t->items[i] : NULL;
}

void zm_table_del(struct zm_table *t, int handle)
{
    unsigned i = (unsigned)handle & ZM_INDEX_MASK;
    if (i >= t->len || i < t->reserved || i == 0 || !t->items[i])
        return;
    t->items[i] = NULL;
    if (t->nfree == t->free_cap) {
        unsigned cap = t->free_cap ? t->free_cap * 2 : 64;
        unsigned *f = realloc(t->free, cap * sizeof *f);
        if (!f)
            return;           /* the index is not reused: the table only grows */
        t->free = f;
        t->free_cap = cap;
    }
    t->free[t->nfree++] = i;
}

void *zm_spare_get(struct zm_spares *p)
{
    if (p->n == 0)
        return calloc(1, p->size);
    void *obj = p->items[--p->n];
    memset(obj, 0, p->clear);
    return obj;
}

void zm_spare_put(struct zm_spares *p, void *obj)
{
    if (p->n < ZM_SPARES_MAX)
        p->items[p->n++] = obj;
    else
        free(obj);
}

void zm_table_fini(struct zm_table *t)
{
    free(t->items);
    free(t->free);
    memset(t, 0, sizeof *t);
}

/* ---- error classes and strings ---- */

static const char *const class_text[] = {
    [MPI_SUCCESS] = "no error",
    [MPI_ERR_BUFFER] = "invalid buffer pointer",
    [MPI_ERR_COUNT] = "invalid count argument",
    [MPI_ERR_TYPE] = "invalid datatype",
    [MPI_ERR_TAG] = "invalid tag argument",
    [MPI_ERR_COMM] = "invalid communicator",
    [MPI_ERR_RANK] = "invalid rank",
    [MPI_ERR_ROOT] = "invalid root",
    [MPI_ERR_GROUP] = "invalid group",
    [MPI_ERR_OP] = "invalid reduction operation",
    [MPI_ERR_TOPOLOGY] = "invalid topology",
    [MPI_ERR_DIMS] = "invalid dimension argument",
    [MPI_ERR_ARG] = "invalid argument",
    [MPI_ERR_UNKNOWN] = "unknown error",
    [MPI_ERR_TRUNCATE] = "message truncated",
    [MPI_ERR_OTHER] = "other error",
    [MPI_ERR_INTERN] = "internal error",
    [MPI_ERR_IN_STATUS] = "error code is in status",
    [MPI_ERR_PENDING] = "pending request",
    [MPI_ERR_REQUEST] = "invalid request",
    [MPI_ERR_ACCESS] = "permission denied",
    [MPI_ERR_AMODE] = "invalid file access mode",
    [MPI_ERR_BAD_FILE] = "invalid file name",
    [MPI_ERR_CONVERSION] = "data conversion error",
    [MPI_ERR_DUP_DATAREP] = "duplicate data representation",
    [MPI_ERR_FILE_EXISTS] = "file exists",
    [MPI_ERR_FILE_IN_USE] = "file in use",
    [MPI_ERR_FILE] = "invalid file handle",
    [MPI_ERR_INFO] = "invalid info object",
    [MPI_ERR_INFO_KEY] = "info key too long",
    [MPI_ERR_INFO_VALUE] = "info value too long",
    [MPI_ERR_INFO_NOKEY] = "no such info key",
    [MPI_ERR_IO] = "I/O error",
    [MPI_ERR_NAME] = "invalid service name",
    [MPI_ERR_NO_MEM] = "out of memory",
    [MPI_ERR_NOT_SAME] = "collective arguments differ between processes",
    [MPI_ERR_NO_SPACE] = "no space left",
    [MPI_ERR_NO_SUCH_FILE] = "no such file",
    [MPI_ERR_PORT] = "invalid port name",
    [MPI_ERR_QUOTA] = "quota exceeded",
    [MPI_ERR_READ_ONLY] = "read-only file",
    [MPI_ERR_SERVICE] = "invalid service",
    [MPI_ERR_SPAWN] = "spawn error",
    [MPI_ERR_UNSUPPORTED_DATAREP] = "unsupported data representation",
    [MPI_ERR_UNSUPPORTED_OPERATION] = "unsupported operation",
    [MPI_ERR_WIN] = "invalid window",
    [MPI_ERR_BASE] = "invalid base address",
    [MPI_ERR_LOCKTYPE] = "invalid lock type",
    [MPI_ERR_KEYVAL] = "invalid attribute key",
    [MPI_ERR_RMA_CONFLICT] = "conflicting RMA accesses",
    [MPI_ERR_RMA_SYNC] = "wrong RMA synchronization",
    [MPI_ERR_SIZE] = "invalid size",
    [MPI_ERR_DISP] = "invalid displacement",
    [MPI_ERR_ASSERT] = "invalid assert",
    [MPI_ERR_RMA_RANGE] = "RMA target out of range",
    [MPI_ERR_RMA_ATTACH] = "RMA attach failed",
    [MPI_ERR_RMA_SHARED] = "RMA shared memory failed",
    [MPI_ERR_RMA_FLAVOR] = "wrong RMA window flavor",
    [MPIX_ERR_PROC_FAILED] = "a process this operation depends on has failed",
};
_Static_assert(sizeof class_text / sizeof *class_text == MPIX_ERR_PROC_FAILED + 1,
               "a string for every error class");

ZIMP_MPI_API int MPI_Error_class(int errorcode, int *errorclass)
{
    if (errorcode < 0 || errorcode > MPI_ERR_LASTCODE || !errorclass)
        return MPI_ERR_ARG;
    *errorclass = errorcode <= MPIX_ERR_PROC_FAILED ? errorcode : MPI_ERR_UNKNOWN;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Error_string(int errorcode, char *string, int *resultlen)
{
    if (!string || !resultlen)
        return MPI_ERR_ARG;
    /* Every code MPI_Error_class accepts has a string: the codes past the
     * last class, up to MPI_ERR_LASTCODE, are of class MPI_ERR_UNKNOWN. */
    int cls;
    if (MPI_Error_class(errorcode, &cls) != MPI_SUCCESS)
        return MPI_ERR_ARG;
    const char *text = class_text[cls];
    if (!text)
        return MPI_ERR_ARG;
    int n = snprintf(string, MPI_MAX_ERROR_STRING, "%s", text);
    *resultlen = n < MPI_MAX_ERROR_STRING ? n : MPI_MAX_ERROR_STRING - 1;
    return MPI_SUCCESS;
}

/* ---- aborting ---- */

void zm_abort_job(int errorcode, const char *why)
{
    fprintf(stderr, "zimp-mpi: rank %d of %d: %s; aborting the job (code %d)\n",
            zm.rank, zm.size, why, errorcode);
    fflush(stderr);
    if (zm_tracing(ZIMP_TRACE_ERROR))
        zimp_trace_flush();               /* _exit below skips libzimp's own flush at exit */
    /* The launcher kills the other ranks at once when told (SIGUSR1). */
    if (zm.launcher > 1 && getppid() == zm.launcher)
        kill(zm.launcher, SIGUSR1);
    _exit(errorcode & 0xff ? errorcode & 0xff : 1);
}

/* ---- error handlers ---- */

static struct zm_errhandler fatal_h = { NULL, 1 }, return_h = { NULL, 1 };

static void errhandlers_init(void)
{
    if (zm_errhandlers.len)
        return;
    zm_table_add(&zm_errhandlers, &fatal_h);
    zm_table_add(&zm_errhandlers, &return_h);
    zm_errhandlers.reserved = zm_errhandlers.len;
}

static struct zm_errhandler *errh_get(MPI_Errhandler h)
{
    errhandlers_init();
    return zm_table_get(&zm_errhandlers, h, ZM_K_ERRH);
}

int zm_raise(MPI_Comm comm, int code, const char *fn)
{
    if (code == MPI_SUCCESS)
        return code;
    if (zm_tracing(ZIMP_TRACE_ERROR))
        zm_trace_error(comm, code, fn);
    /*
     * A failed process was met (a pidfd, a channel, process_vm_readv): mark
     * every dead peer now, so that the next call that depends on one fails
     * at once (a blocking send checks the marks, the pidfds only every few ms).
     */
    if ((code == MPIX_ERR_PROC_FAILED || code == MPI_ERR_IN_STATUS) && zm.peers && zm.inbox)
        zm_check_deaths(true);
    struct zm_comm *c = zm_comm_get(comm);
    if (!c)
        c = zm_comm_get(MPI_COMM_WORLD);
    MPI_Errhandler h = c ? c->errh : MPI_ERRORS_ARE_FATAL;
    if (h == MPI_ERRORS_RETURN)
        return code;
    if (h == MPI_ERRORS_ARE_FATAL) {
        char why[1024];
        int cls = MPI_ERR_UNKNOWN, n;
        char text[MPI_MAX_ERROR_STRING];
        MPI_Error_class(code, &cls);
        if (MPI_Error_string(cls, text, &n) != MPI_SUCCESS)
            snprintf(text, sizeof text, "error %d", code);
        snprintf(why, sizeof why, "%s: %s%s%s", fn, text, zm_detail[0] ? ": " : "", zm_detail);
        zm_abort_job(code, why);
    }
    struct zm_errhandler *e = errh_get(h);
    if (e && e->fn) {
        MPI_Comm cc = c ? c->handle : MPI_COMM_WORLD;
        e->fn(&cc, &code);
    }
    return code;
}

int zm_raise_detail(MPI_Comm comm, int code, const char *fn, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(zm_detail, sizeof zm_detail, fmt, ap);
    va_end(ap);
    int rc = zm_raise(comm, code, fn);
    zm_detail[0] = 0;
    return rc;
}

ZIMP_MPI_API int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function *fn, MPI_Errhandler *errhandler)
{
    if (!fn || !errhandler)
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Comm_create_errhandler");
    errhandlers_init();
    struct zm_errhandler *e = calloc(1, sizeof *e);
    int i = e ? zm_table_add(&zm_errhandlers, e) : -1;
    if (i < 0) {
        free(e);
        return zm_raise(MPI_COMM_NULL, MPI_ERR_NO_MEM, "MPI_Comm_create_errhandler");
    }
    e->fn = fn;
    e->refs = 1;
    *errhandler = (MPI_Errhandler)(ZM_K_ERRH | (unsigned)i);
    return MPI_SUCCESS;
}

static void errh_unref(MPI_Errhandler h)
{
    struct zm_errhandler *e = errh_get(h);
    if (e && e->fn && --e->refs == 0) {
        zm_table_del(&zm_errhandlers, h);
        free(e);
    }
}

ZIMP_MPI_API int MPI_Errhandler_free(MPI_Errhandler *errhandler)
{
    if (!errhandler || !errh_get(*errhandler))
        return zm_raise(MPI_COMM_NULL, MPI_ERR_ARG, "MPI_Errhandler_free");
    errh_unref(*errhandler);
    *errhandler = MPI_ERRHANDLER_NULL;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (rc)
        return zm_raise(comm, rc, "MPI_Comm_set_errhandler");
    struct zm_errhandler *e = errh_get(errhandler);
    if (!e)
        return zm_raise(comm, MPI_ERR_ARG, "MPI_Comm_set_errhandler");
    e->refs++;
    errh_unref(c->errh);
    c->errh = errhandler;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (rc || !errhandler)
        return zm_raise(comm, rc ? rc : MPI_ERR_ARG, "MPI_Comm_get_errhandler");
    struct zm_errhandler *e = errh_get(c->errh);
    if (e)
        e->refs++;
    *errhandler = c->errh;
    return MPI_SUCCESS;
}

ZIMP_MPI_API int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode)
{
    struct zm_comm *c;
    int rc = zm_comm_check(comm, &c);
    if (rc)
        return zm_raise(comm, rc, "MPI_Comm_call_errhandler");
    zm_raise(comm, errorcode, "MPI_Comm_call_errhandler");
    return MPI_SUCCESS;
}

/* Takes a reference for a communicator inheriting handler h. */
void zm_errh_ref(MPI_Errhandler h)
{
    struct zm_errhandler *e = errh_get(h);
    if (e)
        e->refs++;
}

void zm_errh_unref(MPI_Errhandler h)
{
    errh_unref(h);
}

/* ---- Fortran integers: a handle is already one ---- */
/* (with their profiling names too, which some programs call to check they exist) */
#define C2F(kind, T)                                                                 \
    ZIMP_MPI_API MPI_Fint MPI_##kind##_c2f(T h) { return (MPI_Fint)h; }               \
    ZIMP_MPI_API T MPI_##kind##_f2c(MPI_Fint f) { return (T)f; }                      \
    ZIMP_MPI_API MPI_Fint PMPI_##kind##_c2f(T h) __attribute__((alias("MPI_" #kind "_c2f"))); \
    ZIMP_MPI_API T PMPI_##kind##_f2c(MPI_Fint f) __attribute__((alias("MPI_" #kind "_f2c")));
C2F(Comm, MPI_Comm)
C2F(Type, MPI_Datatype)
C2F(Group, MPI_Group)
C2F(Request, MPI_Request)
C2F(Op, MPI_Op)
C2F(Info, MPI_Info)
C2F(Errhandler, MPI_Errhandler)
C2F(Message, MPI_Message)
