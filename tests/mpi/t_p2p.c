/*
 * Point-to-point: wildcards and status fields, order, probes, truncation,
 * zero-count and boundary sizes (slot size +- 1, 1 MiB; 64 MiB with the
 * argument "big"), PROC_NULL, waitany/testsome, 1,000 Isend/Irecv pairs,
 * windows of unexpected messages of every length up to 130 B, generalized requests,
 * Sendrecv(_replace), Ssend, Bsend (local completion, buffer accounting to
 * ourselves), persistent requests, matched probes,
 * cancel (of receives, and of sends not matched yet), self-messages, a non-contiguous vector.
 */
#include "mpitest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define EAGER_MAX (16384 - 40)   /* docs/mpi.md: an inbox slot minus the header */

static int partner(void)
{
    int p = mt_rank ^ 1;
    return p < mt_size ? p : MPI_PROC_NULL;
}

static void wildcards_and_status(void)
{
    if (mt_rank != 0) {
        int data[8] = { 0 };
        for (int i = 0; i < 8; i++)
            data[i] = mt_rank * 100 + i;
        OK(MPI_Send(data, 1 + mt_rank % 8, MPI_INT, 0, 100 + mt_rank, MPI_COMM_WORLD));
        return;
    }
    int seen[4096] = { 0 };
    for (int k = 1; k < mt_size; k++) {
        int data[8];
        MPI_Status st;
        OK(MPI_Recv(data, 8, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        int n;
        OK(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(st.MPI_SOURCE > 0 && st.MPI_SOURCE < mt_size && !seen[st.MPI_SOURCE]);
        seen[st.MPI_SOURCE] = 1;
        CHECK(st.MPI_TAG == 100 + st.MPI_SOURCE);
        CHECK(n == 1 + st.MPI_SOURCE % 8);
        for (int i = 0; i < n; i++)
            CHECK(data[i] == st.MPI_SOURCE * 100 + i);
    }
}

/* Non-overtaking between a pair; tag selection may take a later message first. */
static void order_and_tags(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    if (mt_rank % 2 == 1) {
        for (int i = 0; i < 200; i++)
            OK(MPI_Send(&i, 1, MPI_INT, p, 5, MPI_COMM_WORLD));
        int a = 1, b = 2;
        OK(MPI_Send(&a, 1, MPI_INT, p, 11, MPI_COMM_WORLD));
        OK(MPI_Send(&b, 1, MPI_INT, p, 12, MPI_COMM_WORLD));
    } else {
        for (int i = 0; i < 200; i++) {
            int v;
            OK(MPI_Recv(&v, 1, MPI_INT, p, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(v == i);
        }
        int v;
        OK(MPI_Recv(&v, 1, MPI_INT, p, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(v == 2);
        OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(v == 1);
    }
}

static void probes(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    double d[37];
    if (mt_rank % 2 == 1) {
        for (int i = 0; i < 37; i++)
            d[i] = i * 0.5;
        OK(MPI_Send(d, 37, MPI_DOUBLE, p, 9, MPI_COMM_WORLD));
        OK(MPI_Send(d, 3, MPI_DOUBLE, p, 10, MPI_COMM_WORLD));
        return;
    }
    MPI_Status st;
    OK(MPI_Probe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &st));
    int n;
    OK(MPI_Get_count(&st, MPI_DOUBLE, &n));
    CHECK(n == 37 && st.MPI_SOURCE == p && st.MPI_TAG == 9);
    OK(MPI_Recv(d, n, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(d[36] == 18.0);
    int flag = 0;
    while (!flag)
        OK(MPI_Iprobe(p, 10, MPI_COMM_WORLD, &flag, &st));
    OK(MPI_Get_count(&st, MPI_DOUBLE, &n));
    CHECK(n == 3);
    OK(MPI_Recv(d, 3, MPI_DOUBLE, p, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Iprobe(p, 10, MPI_COMM_WORLD, &flag, &st));
    CHECK(!flag);
}

static void truncation(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    static char big[100000];
    int small[10] = { 0 };
    if (mt_rank % 2 == 1) {
        OK(MPI_Send(small, 10, MPI_INT, p, 1, MPI_COMM_WORLD));
        OK(MPI_Send(big, (int)sizeof big, MPI_CHAR, p, 2, MPI_COMM_WORLD));
        return;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Status st;
    int rc = MPI_Recv(small, 5, MPI_INT, p, 1, MPI_COMM_WORLD, &st);
    CHECK(mt_class(rc) == MPI_ERR_TRUNCATE);
    rc = MPI_Recv(big, 1000, MPI_CHAR, p, 2, MPI_COMM_WORLD, &st);
    CHECK(mt_class(rc) == MPI_ERR_TRUNCATE);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Sends n bytes of a pattern to the partner and back, checking both ways. */
static void echo(size_t n)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    unsigned char *b = malloc(n + 1);
    CHECK(b != NULL);
    MPI_Status st;
    if (mt_rank % 2 == 0) {
        for (size_t i = 0; i < n; i++)
            b[i] = (unsigned char)(i * 7 + n);
        OK(MPI_Send(b, (int)n, MPI_BYTE, p, 3, MPI_COMM_WORLD));
        memset(b, 0, n);
        OK(MPI_Recv(b, (int)n, MPI_BYTE, p, 4, MPI_COMM_WORLD, &st));
    } else {
        OK(MPI_Recv(b, (int)n, MPI_BYTE, p, 3, MPI_COMM_WORLD, &st));
        OK(MPI_Send(b, (int)n, MPI_BYTE, p, 4, MPI_COMM_WORLD));
    }
    int got;
    OK(MPI_Get_count(&st, MPI_BYTE, &got));
    CHECK((size_t)got == n);
    for (size_t i = 0; i < n; i++)
        CHECK(b[i] == (unsigned char)(i * 7 + n));
    free(b);
}

static void sizes(int big)
{
    size_t list[] = { 0, 1, 48, EAGER_MAX - 1, EAGER_MAX, EAGER_MAX + 1, 16383, 16384, 16385, 1 << 20 };
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        echo(list[i]);
    if (big)
        echo((size_t)64 << 20);
}

static void proc_null(void)
{
    MPI_Status st;
    int v = 0;
    OK(MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Recv(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    int n = -1;
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && n == 0);
}

/* Waitany returns the request that completed; Testsome reports exactly the completed ones. */
static void waitany_testsome(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    if (mt_rank % 2 == 1) {
        int v = 3, go;
        OK(MPI_Send(&v, 1, MPI_INT, p, 3, MPI_COMM_WORLD));
        OK(MPI_Recv(&go, 1, MPI_INT, p, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (v = 1; v <= 4; v++)
            if (v != 3)
                OK(MPI_Send(&v, 1, MPI_INT, p, v, MPI_COMM_WORLD));
        return;
    }
    int vals[4];
    MPI_Request r[4];
    for (int i = 0; i < 4; i++)
        OK(MPI_Irecv(&vals[i], 1, MPI_INT, p, i + 1, MPI_COMM_WORLD, &r[i]));
    int idx;
    MPI_Status st;
    OK(MPI_Waitany(4, r, &idx, &st));
    CHECK(idx == 2 && vals[2] == 3 && st.MPI_TAG == 3 && r[2] == MPI_REQUEST_NULL);
    int out, ind[4];
    MPI_Status sts[4];
    OK(MPI_Testsome(4, r, &out, ind, sts));
    CHECK(out == 0);
    int go = 1;
    OK(MPI_Send(&go, 1, MPI_INT, p, 99, MPI_COMM_WORLD));
    int total = 0;
    while (total < 3) {
        OK(MPI_Waitsome(4, r, &out, ind, sts));
        CHECK(out >= 1);
        for (int k = 0; k < out; k++)
            CHECK(vals[ind[k]] == ind[k] + 1 && sts[k].MPI_TAG == ind[k] + 1);
        total += out;
    }
    OK(MPI_Waitsome(4, r, &out, ind, sts));
    CHECK(out == MPI_UNDEFINED);
    OK(MPI_Waitany(4, r, &idx, &st));
    CHECK(idx == MPI_UNDEFINED);
}

static void many_pairs(void)
{
    enum { N = 1000 };
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    static int out[N], in[N];
    static MPI_Request r[2 * N];
    for (int i = 0; i < N; i++) {
        out[i] = mt_rank * N + i;
        OK(MPI_Irecv(&in[i], 1, MPI_INT, p, i, MPI_COMM_WORLD, &r[i]));
    }
    for (int i = 0; i < N; i++)
        OK(MPI_Isend(&out[i], 1, MPI_INT, p, i, MPI_COMM_WORLD, &r[N + i]));
    OK(MPI_Waitall(2 * N, r, MPI_STATUSES_IGNORE));
    for (int i = 0; i < N; i++)
        CHECK(in[i] == p * N + i);
}

/*
 * Messages that arrive before their receives (held as unexpected, short
 * ones inside their record), of every length around that record's 64-byte
 * room, received by a window whose requests complete in the reverse order
 * of posting; three rounds, so freed requests and handles are reused.
 */
static void unexpected_windows(void)
{
    enum { N = 200, MAXLEN = 131 };
    int p = partner();
    for (int round = 0; round < 3; round++) {
        if (p == MPI_PROC_NULL) {
            MPI_Barrier(MPI_COMM_WORLD);
            continue;
        }
        static unsigned char out[N][MAXLEN], in[N][MAXLEN];
        static MPI_Request r[N];
        if (mt_rank % 2 == 1) {
            for (int i = 0; i < N; i++) {
                int len = (i * 7 + round) % MAXLEN;
                for (int k = 0; k < len; k++)
                    out[i][k] = (unsigned char)(i * 31 + k + round);
                OK(MPI_Send(out[i], len, MPI_BYTE, p, i, MPI_COMM_WORLD));
            }
            MPI_Barrier(MPI_COMM_WORLD);
            continue;
        }
        MPI_Barrier(MPI_COMM_WORLD);      /* every message is here before any receive */
        for (int i = 0; i < N; i++)       /* the last sent is asked for first */
            OK(MPI_Irecv(in[N - 1 - i], MAXLEN, MPI_BYTE, p, N - 1 - i, MPI_COMM_WORLD, &r[i]));
        static MPI_Status st[N];
        OK(MPI_Waitall(N, r, st));
        for (int i = 0; i < N; i++) {
            int tag = N - 1 - i, len = (tag * 7 + round) % MAXLEN, n;
            CHECK(r[i] == MPI_REQUEST_NULL);
            CHECK(st[i].MPI_TAG == tag && st[i].MPI_SOURCE == p);
            OK(MPI_Get_count(&st[i], MPI_BYTE, &n));
            CHECK(n == len);
            for (int k = 0; k < len; k++)
                CHECK(in[tag][k] == (unsigned char)(tag * 31 + k + round));
        }
    }
}

/* Generalized requests: what each callback was told, and how often. */
struct greq_log { int queries, frees, cancels, last_complete, fail; };

static int greq_query(void *st, MPI_Status *status)
{
    struct greq_log *g = st;
    g->queries++;
    status->MPI_SOURCE = 7;
    status->MPI_TAG = 8;
    MPI_Status_set_elements(status, MPI_BYTE, 42);
    MPI_Status_set_cancelled(status, g->cancels > 0);
    return g->fail;
}

static int greq_free(void *st)
{
    ((struct greq_log *)st)->frees++;
    return MPI_SUCCESS;
}

static int greq_cancel(void *st, int complete)
{
    struct greq_log *g = st;
    g->cancels++;
    g->last_complete = complete;
    return MPI_SUCCESS;
}

static void generalized(void)
{
    /* completed, then waited for: query_fn fills the status, then free_fn, once each */
    struct greq_log g = { 0 };
    MPI_Request r;
    OK(MPI_Grequest_start(greq_query, greq_free, greq_cancel, &g, &r));
    int flag = 1;
    MPI_Status st;
    OK(MPI_Test(&r, &flag, &st));
    CHECK(!flag && r != MPI_REQUEST_NULL && g.queries == 0);
    OK(MPI_Grequest_complete(r));
    OK(MPI_Wait(&r, &st));
    int n, cancelled;
    OK(MPI_Get_count(&st, MPI_BYTE, &n));
    OK(MPI_Test_cancelled(&st, &cancelled));
    CHECK(r == MPI_REQUEST_NULL && st.MPI_SOURCE == 7 && st.MPI_TAG == 8 && n == 42 && !cancelled);
    CHECK(g.queries == 1 && g.frees == 1 && g.cancels == 0);

    /* cancelled before it completed: cancel_fn is told so, the status says cancelled */
    struct greq_log c = { 0 };
    OK(MPI_Grequest_start(greq_query, greq_free, greq_cancel, &c, &r));
    OK(MPI_Cancel(&r));
    CHECK(c.cancels == 1 && c.last_complete == 0);
    OK(MPI_Grequest_complete(r));
    OK(MPI_Wait(&r, &st));
    OK(MPI_Test_cancelled(&st, &cancelled));
    CHECK(cancelled && c.queries == 1 && c.frees == 1);

    /* freed before it completed: free_fn runs at MPI_Grequest_complete, no query */
    struct greq_log f = { 0 };
    MPI_Request keep;
    OK(MPI_Grequest_start(greq_query, greq_free, greq_cancel, &f, &r));
    keep = r;
    OK(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL && f.frees == 0);
    OK(MPI_Grequest_complete(keep));
    CHECK(f.frees == 1 && f.queries == 0);

    /* MPI_Request_get_status calls query_fn (also for MPI_STATUS_IGNORE) and returns its error */
    struct greq_log e = { .fail = MPI_ERR_ARG };
    OK(MPI_Grequest_start(greq_query, greq_free, greq_cancel, &e, &r));
    OK(MPI_Grequest_complete(r));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int cls, rc = MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE);
    OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_ARG && flag && e.queries == 1 && e.frees == 0);
    rc = MPI_Wait(&r, &st);
    OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_ARG && e.queries == 2 && e.frees == 1 && r == MPI_REQUEST_NULL);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void sendrecv_ring(void)
{
    int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
    int v = mt_rank, got = -1;
    MPI_Status st;
    OK(MPI_Sendrecv(&v, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7, MPI_COMM_WORLD, &st));
    CHECK(got == left && st.MPI_SOURCE == left);
    double buf[3] = { mt_rank, mt_rank * 2, mt_rank * 3 };
    OK(MPI_Sendrecv_replace(buf, 3, MPI_DOUBLE, right, 8, left, 8, MPI_COMM_WORLD, &st));
    CHECK(buf[0] == left && buf[2] == left * 3);
}

/* Ssend completes only once the receive is matched. */
static void ssend(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    int v = 5, go = 1, flag = 1;
    if (mt_rank % 2 == 0) {
        MPI_Request r;
        OK(MPI_Issend(&v, 1, MPI_INT, p, 20, MPI_COMM_WORLD, &r));
        for (int i = 0; i < 50; i++)
            OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag);                     /* the partner cannot have matched it yet */
        OK(MPI_Send(&go, 1, MPI_INT, p, 21, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        OK(MPI_Ssend(&v, 1, MPI_INT, p, 22, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv(&go, 1, MPI_INT, p, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Recv(&v, 1, MPI_INT, p, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Recv(&v, 1, MPI_INT, p, 22, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
}

static void bsend_rsend(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    enum { BIG = 200000 };
    static char data[BIG], got[BIG];
    if (mt_rank % 2 == 0) {
        int size = BIG + 2 * MPI_BSEND_OVERHEAD + 64;
        char *buf = malloc((size_t)size);
        OK(MPI_Buffer_attach(buf, size));
        for (int i = 0; i < BIG; i++)
            data[i] = (char)i;
        OK(MPI_Bsend(data, BIG, MPI_CHAR, p, 30, MPI_COMM_WORLD));
        memset(data, 0, sizeof data);     /* the message was copied: this changes nothing */
        OK(MPI_Bsend(data, 10, MPI_CHAR, p, 31, MPI_COMM_WORLD));
        void *b;
        int s;
        OK(MPI_Buffer_detach(&b, &s));
        CHECK(b == buf && s == size);
        free(buf);
        int ready;
        OK(MPI_Recv(&ready, 1, MPI_INT, p, 32, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Rsend(&ready, 1, MPI_INT, p, 33, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv(got, BIG, MPI_CHAR, p, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < BIG; i++)
            CHECK(got[i] == (char)i);
        OK(MPI_Recv(got, 10, MPI_CHAR, p, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_Request r;
        int v = 0, one = 1;
        OK(MPI_Irecv(&v, 1, MPI_INT, p, 33, MPI_COMM_WORLD, &r));
        OK(MPI_Send(&one, 1, MPI_INT, p, 32, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(v == 1);
    }
}

/*
 * Buffered mode is local (MPI 3.1, 3.4): a buffered send larger than an
 * inbox slot completes without a matching receive. Both ranks of a pair
 * send first (Ibsend, then Bsend_init + Start), wait, and only then
 * receive; before the fix each wait hung for the other's receive.
 */
static void bsend_local(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    enum { N = 100000 };                  /* 400 KB: a rendezvous by CMA, or a stream */
    int size = 2 * ((int)sizeof(int) * N + MPI_BSEND_OVERHEAD);
    char *buf = malloc((size_t)size);
    int *out = malloc(sizeof(int) * N), *in = malloc(sizeof(int) * N);
    CHECK(buf && out && in);
    OK(MPI_Buffer_attach(buf, size));
    for (int i = 0; i < N; i++)
        out[i] = i + mt_rank;
    MPI_Request r[2];
    OK(MPI_Ibsend(out, N, MPI_INT, p, 34, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Bsend_init(out, N, MPI_INT, p, 35, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Start(&r[1]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    OK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
    memset(out, 0, sizeof(int) * N);      /* the messages were copied: this changes nothing */
    for (int tag = 34; tag <= 35; tag++) {
        OK(MPI_Recv(in, N, MPI_INT, p, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(in[0] == p && in[N - 1] == N - 1 + p);
    }
    OK(MPI_Request_free(&r[1]));
    void *b;
    int s;
    OK(MPI_Buffer_detach(&b, &s));        /* waits until both have left */
    CHECK(b == buf && s == size);
    free(buf);
    free(out);
    free(in);
}

/*
 * Buffered sends and nonblocking starts are local also when a message
 * larger than the receiver's inbox is streamed (no single-copy transfers:
 * ZIMP_MPI_CMA=0, or no ptrace permission): the even rank's two MPI_Bsends
 * and two MPI_Isends of 2 MB return while its partner stays out of MPI,
 * waiting for a file that the even rank makes after the calls (before, the
 * stream went out within the call, which waited for the partner's inbox:
 * both waited for ever). The second Isend is cancelled before anything of
 * it left (streamed: taken out of the queue; single-copy: the receiver
 * drops its unmatched announcement). Small buffered and nonblocking sends
 * behind them (200 of them: more than the inbox's slots) are local too, in
 * both modes, and a small MPI_Bsend's buffer is the program's again when it
 * returns. The others arrive whole and in order.
 */
static void bsend_local_out_of_band(void)
{
    enum { SMALL = 200 };                 /* 64 B Isends: more than an inbox's slots */
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    enum { N = 1 << 19 };                 /* 2 MB of ints: more than an inbox holds */
    int size = 2 * ((int)sizeof(int) * N + MPI_BSEND_OVERHEAD);
    int *data = malloc(sizeof(int) * N);
    CHECK(data);
    int even = mt_rank < p ? mt_rank : p;
    int pid = (int)getpid();                                    /* the even rank's pid names the file */
    if (mt_rank == even)
        OK(MPI_Send(&pid, 1, MPI_INT, p, 39, MPI_COMM_WORLD));
    else
        OK(MPI_Recv(&pid, 1, MPI_INT, p, 39, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    char flag[96];
    snprintf(flag, sizeof flag, "/tmp/zimp-t_p2p-bsend-%d-%d", pid, even);
    if (mt_rank == even) {
        char *buf = malloc((size_t)size);
        CHECK(buf);
        OK(MPI_Buffer_attach(buf, size));
        for (int m = 0; m < 2; m++) {
            for (int i = 0; i < N; i++)
                data[i] = i + m;
            OK(MPI_Bsend(data, N, MPI_INT, p, 40 + m, MPI_COMM_WORLD));
        }
        int *more = malloc(sizeof(int) * N);
        CHECK(more);
        for (int i = 0; i < N; i++)
            more[i] = i + 2;
        MPI_Request r[2 + SMALL + 2];
        OK(MPI_Isend(more, N, MPI_INT, p, 43, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Isend(more, N, MPI_INT, p, 44, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Cancel(&r[1]));
        /* Small ones behind them, and more than an inbox holds: buffered ones are
         * copied (the buffer is the program's again at once), all are local. */
        int small[4] = { 1, 2, 3, 4 };
        OK(MPI_Bsend(small, 4, MPI_INT, p, 45, MPI_COMM_WORLD));
        small[0] = small[1] = small[2] = small[3] = -7;
        int small2[4] = { 5, 6, 7, 8 };
        OK(MPI_Ibsend(small2, 4, MPI_INT, p, 46, MPI_COMM_WORLD, &r[2 + SMALL]));
        OK(MPI_Wait(&r[2 + SMALL], MPI_STATUS_IGNORE));
        small2[0] = -7;
        static int tiny[SMALL][16];
        for (int k = 0; k < SMALL; k++) {
            tiny[k][0] = k;
            OK(MPI_Isend(tiny[k], 16, MPI_INT, p, 47, MPI_COMM_WORLD, &r[2 + k]));
        }
        /* A large one behind them all (single-copy: its rendezvous request waits in the queue). */
        OK(MPI_Isend(more, N, MPI_INT, p, 54, MPI_COMM_WORLD, &r[2 + SMALL + 1]));
        int fd = open(flag, O_CREAT | O_WRONLY, 0600);
        CHECK(fd >= 0);
        close(fd);
        int reply = 0;
        OK(MPI_Recv(&reply, 1, MPI_INT, p, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(reply == 7);
        MPI_Status st[2 + SMALL];
        OK(MPI_Waitall(2 + SMALL, r, st));
        OK(MPI_Wait(&r[2 + SMALL + 1], MPI_STATUS_IGNORE));
        int cancelled = 0;
        OK(MPI_Test_cancelled(&st[1], &cancelled));
        CHECK(cancelled);
        free(more);
        void *b;
        int s;
        OK(MPI_Buffer_detach(&b, &s));
        unlink(flag);
        free(buf);
    } else {
        struct stat st;
        int waited = 0;
        while (stat(flag, &st) != 0 && waited < 20000) {          /* out of MPI: 20 s at most */
            usleep(1000);
            waited++;
        }
        CHECK(waited < 20000);                                     /* else the Bsends waited for us */
        for (int m = 0; m < 3; m++) {
            OK(MPI_Recv(data, N, MPI_INT, p, 40 + m + (m == 2), MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(data[0] == m && data[N - 1] == N - 1 + m);
        }
        int small[4];
        OK(MPI_Recv(small, 4, MPI_INT, p, 45, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(small[0] == 1 && small[3] == 4);                     /* as it was at MPI_Bsend */
        OK(MPI_Recv(small, 4, MPI_INT, p, 46, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(small[0] == 5 && small[3] == 8);
        for (int k = 0; k < SMALL; k++) {
            int tiny[16];
            OK(MPI_Recv(tiny, 16, MPI_INT, p, 47, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(tiny[0] == k);
        }
        OK(MPI_Recv(data, N, MPI_INT, p, 54, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(data[0] == 2 && data[N - 1] == N + 1);
        int reply = 7;
        OK(MPI_Send(&reply, 1, MPI_INT, p, 42, MPI_COMM_WORLD));
    }
    free(data);
}

/*
 * A synchronous send of a non-contiguous 16 MB vector to a receive already
 * posted: streamed, the receiver's ACK comes at the first part, and the
 * packed copy that the rest is sent from stays until the last chunk left
 * (the ACK freed it: the next chunk was read from NULL).
 */
static void ssend_vector_posted(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    enum { N = 4 << 20 };                 /* 16 MB: more than the inbox holds */
    MPI_Datatype v;
    OK(MPI_Type_vector(N, 1, 2, MPI_INT, &v));
    OK(MPI_Type_commit(&v));
    int *b = malloc(sizeof(int) * 2 * N);
    CHECK(b);
    if (mt_rank < p) {
        for (int i = 0; i < 2 * N; i++)
            b[i] = i * 3;
        int go;
        OK(MPI_Recv(&go, 1, MPI_INT, p, 48, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Ssend(b, 1, v, p, 49, MPI_COMM_WORLD));
    } else {
        MPI_Request r;
        OK(MPI_Irecv(b, N, MPI_INT, p, 49, MPI_COMM_WORLD, &r));
        int go = 1;
        OK(MPI_Send(&go, 1, MPI_INT, p, 48, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++)
            if (b[i] != 6 * i) {
                CHECK(b[i] == 6 * i);
                break;
            }
    }
    OK(MPI_Type_free(&v));
    free(b);
}

/*
 * A synchronous send of 16 MB: streamed (ZIMP_MPI_CMA=0), the receiver's
 * ACK comes when its receive matches the first part, long before the last
 * chunk has left; the request completes only once it has (it was freed
 * under the queue that still sent it: MPICH's huge_ssend crashed).
 */
static void ssend_huge(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    enum { N = 4 << 20 };
    int *data = malloc(sizeof(int) * N);
    CHECK(data);
    for (int i = 0; i < N; i++)
        data[i] = i ^ mt_rank;
    if (mt_rank < p) {
        OK(MPI_Ssend(data, N, MPI_INT, p, 45, MPI_COMM_WORLD));
        OK(MPI_Recv(data, N, MPI_INT, p, 46, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
        OK(MPI_Recv(data, N, MPI_INT, p, 45, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Ssend(data, N, MPI_INT, p, 46, MPI_COMM_WORLD));
    }
    CHECK(data[0] == (0 ^ (mt_rank < p ? mt_rank : p)) && data[N - 1] == ((N - 1) ^ (mt_rank < p ? mt_rank : p)));
    free(data);
}

/*
 * A program that retries MPI_Bsend after MPI_ERR_BUFFER, calling nothing
 * else, gets the space back once the earlier message was received: the
 * refused call progresses the inbox, where the receiver's FIN arrives
 * (before, every retry was refused for ever).
 */
static void bsend_retry(void)
{
    MPI_Comm comm;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));             /* collective: every rank */
    OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    int p = partner();
    enum { N = 100000 };
    int *msg = malloc(sizeof(int) * N);
    CHECK(msg);
    if (p == MPI_PROC_NULL) {
        /* no partner: nothing to send */
    } else if (mt_rank < p) {
        int size = (int)sizeof(int) * N + MPI_BSEND_OVERHEAD;      /* one message */
        char *buf = malloc((size_t)size);
        CHECK(buf);
        OK(MPI_Buffer_attach(buf, size));
        for (int i = 0; i < N; i++)
            msg[i] = i;
        OK(MPI_Bsend(msg, N, MPI_INT, p, 1, comm));
        int rc = MPI_ERR_BUFFER;
        double end = MPI_Wtime() + 10;
        while (mt_class(rc) == MPI_ERR_BUFFER && MPI_Wtime() < end)
            rc = MPI_Bsend(msg, N, MPI_INT, p, 2, comm);
        CHECK(rc == MPI_SUCCESS);
        void *b;
        int s;
        OK(MPI_Buffer_detach(&b, &s));
        free(buf);
    } else {
        for (int tag = 1; tag <= 2; tag++) {
            OK(MPI_Recv(msg, N, MPI_INT, p, tag, comm, MPI_STATUS_IGNORE));
            CHECK(msg[0] == 0 && msg[N - 1] == N - 1);
        }
    }
    free(msg);
    OK(MPI_Comm_free(&comm));
}

/*
 * A buffered send to ourselves larger than a slot obeys the attached
 * buffer as one to a peer: MPI_ERR_BUFFER without room (before the fix it
 * succeeded), and its space is held until a receive takes it.
 */
static void bsend_self(void)
{
    enum { N = 100000 };
    MPI_Comm comm;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    OK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    int *out = calloc(N, sizeof(int)), *in = malloc(sizeof(int) * N);
    CHECK(out && in);
    out[N - 1] = 5;
    CHECK(mt_class(MPI_Bsend(out, N, MPI_INT, mt_rank, 1, comm)) == MPI_ERR_BUFFER);    /* none attached */
    int size = 1000 + MPI_BSEND_OVERHEAD;
    char *buf = malloc((size_t)size);
    OK(MPI_Buffer_attach(buf, size));
    CHECK(mt_class(MPI_Bsend(out, N, MPI_INT, mt_rank, 2, comm)) == MPI_ERR_BUFFER);    /* too small */
    void *b;
    int s;
    OK(MPI_Buffer_detach(&b, &s));
    free(buf);
    size = (int)sizeof(int) * N + MPI_BSEND_OVERHEAD;   /* room for one */
    buf = malloc((size_t)size);
    OK(MPI_Buffer_attach(buf, size));
    OK(MPI_Bsend(out, N, MPI_INT, mt_rank, 3, comm));
    CHECK(mt_class(MPI_Bsend(out, N, MPI_INT, mt_rank, 4, comm)) == MPI_ERR_BUFFER);    /* the first holds it */
    MPI_Request r;
    CHECK(mt_class(MPI_Ibsend(out, N, MPI_INT, mt_rank, 4, comm, &r)) == MPI_ERR_BUFFER);
    OK(MPI_Recv(in, N, MPI_INT, mt_rank, 3, comm, MPI_STATUS_IGNORE));
    CHECK(in[N - 1] == 5);
    OK(MPI_Ibsend(out, N, MPI_INT, mt_rank, 5, comm, &r));     /* room again */
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));                         /* local: before the receive */
    OK(MPI_Recv(in, N, MPI_INT, mt_rank, 5, comm, MPI_STATUS_IGNORE));
    OK(MPI_Buffer_detach(&b, &s));
    CHECK(b == buf && s == size);
    free(buf);
    free(out);
    free(in);
    OK(MPI_Comm_free(&comm));
}

static void persistent(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    int v = 0;
    MPI_Request r;
    if (mt_rank % 2 == 0)
        OK(MPI_Send_init(&v, 1, MPI_INT, p, 40, MPI_COMM_WORLD, &r));
    else
        OK(MPI_Recv_init(&v, 1, MPI_INT, p, 40, MPI_COMM_WORLD, &r));
    for (int i = 0; i < 5; i++) {
        if (mt_rank % 2 == 0)
            v = i * 11;
        OK(MPI_Start(&r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(r != MPI_REQUEST_NULL);
        if (mt_rank % 2 == 1)
            CHECK(v == i * 11);
    }
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));  /* inactive: returns at once */
    OK(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL);
}

static void matched_probe(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    if (mt_rank % 2 == 1) {
        int a[2] = { 1, 2 }, b[3] = { 3, 4, 5 };
        OK(MPI_Send(a, 2, MPI_INT, p, 50, MPI_COMM_WORLD));
        OK(MPI_Send(b, 3, MPI_INT, p, 50, MPI_COMM_WORLD));
        return;
    }
    MPI_Message m1, m2;
    MPI_Status st;
    OK(MPI_Mprobe(p, 50, MPI_COMM_WORLD, &m1, &st));
    int n;
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(n == 2);
    int flag = 0;
    while (!flag)
        OK(MPI_Improbe(p, 50, MPI_COMM_WORLD, &flag, &m2, &st));
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(n == 3);
    int b[3], a[2];
    MPI_Request r;
    OK(MPI_Imrecv(b, 3, MPI_INT, &m2, &r));
    st.MPI_ERROR = MPI_ERR_TOPOLOGY;      /* single-completion calls leave MPI_ERROR alone */
    OK(MPI_Mrecv(a, 2, MPI_INT, &m1, &st));
    CHECK(st.MPI_ERROR == MPI_ERR_TOPOLOGY && st.MPI_SOURCE == p);
    OK(MPI_Wait(&r, &st));
    CHECK(st.MPI_ERROR == MPI_ERR_TOPOLOGY);
    CHECK(a[0] == 1 && a[1] == 2 && b[2] == 5 && m1 == MPI_MESSAGE_NULL);
    /* handle conversions, also under their profiling names */
    CHECK(MPI_Message_f2c(MPI_Message_c2f(MPI_MESSAGE_NULL)) == MPI_MESSAGE_NULL);
    CHECK(PMPI_Message_f2c(PMPI_Message_c2f(MPI_MESSAGE_NO_PROC)) == MPI_MESSAGE_NO_PROC);
}

static void cancel_and_self(void)
{
    int v;
    MPI_Request r;
    MPI_Status st;
    OK(MPI_Irecv(&v, 1, MPI_INT, mt_rank, 999, MPI_COMM_WORLD, &r));
    OK(MPI_Cancel(&r));
    OK(MPI_Wait(&r, &st));
    int flag;
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag);
    int out = 77;
    OK(MPI_Isend(&out, 1, MPI_INT, mt_rank, 60, MPI_COMM_WORLD, &r));
    OK(MPI_Recv(&v, 1, MPI_INT, mt_rank, 60, MPI_COMM_WORLD, &st));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(v == 77 && st.MPI_SOURCE == mt_rank);
    static char big[300000];
    big[299999] = 9;
    OK(MPI_Isend(big, (int)sizeof big, MPI_CHAR, mt_rank, 61, MPI_COMM_WORLD, &r));
    static char got[300000];
    OK(MPI_Recv(got, (int)sizeof got, MPI_CHAR, MPI_ANY_SOURCE, 61, MPI_COMM_WORLD, &st));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(got[299999] == 9);
}

/*
 * Send cancellation: an eager, a rendezvous and a synchronous send that no
 * receive matched are taken back (cancelled, and never received); a send
 * already received is not (the send stands).
 */
static void cancel_sends(void)
{
    int p = partner();
    static char big[300000];
    int small = 5, sync = 6, late = 7, got = 0;
    MPI_Request r[3];
    MPI_Status st[3];
    if (p != MPI_PROC_NULL && mt_rank % 2 == 1) {
        OK(MPI_Isend(&small, 1, MPI_INT, p, 70, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Isend(big, (int)sizeof big, MPI_CHAR, p, 71, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Issend(&sync, 1, MPI_INT, p, 72, MPI_COMM_WORLD, &r[2]));
        for (int i = 0; i < 3; i++)
            OK(MPI_Cancel(&r[i]));
        OK(MPI_Waitall(3, r, st));   /* the answers come while the partner waits in the barrier */
        for (int i = 0; i < 3; i++) {
            int flag;
            OK(MPI_Test_cancelled(&st[i], &flag));
            CHECK(flag);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (p != MPI_PROC_NULL && mt_rank % 2 == 0) {
        for (int tag = 70; tag <= 72; tag++) {
            int flag = 1;
            OK(MPI_Iprobe(p, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            CHECK(!flag);
        }
        OK(MPI_Recv(&got, 1, MPI_INT, p, 73, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(got == late);
    }
    if (p != MPI_PROC_NULL && mt_rank % 2 == 1)
        OK(MPI_Isend(&late, 1, MPI_INT, p, 73, MPI_COMM_WORLD, &r[0]));
    MPI_Barrier(MPI_COMM_WORLD);      /* tag 73 has been received */
    if (p != MPI_PROC_NULL && mt_rank % 2 == 1) {
        int flag;
        OK(MPI_Cancel(&r[0]));
        OK(MPI_Wait(&r[0], &st[0]));
        OK(MPI_Test_cancelled(&st[0], &flag));
        CHECK(!flag);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* A persistent send started twice, the first message still unreceived: cancelling
     * the second start takes back the second message, never the first. */
    int pv = 0;
    if (p != MPI_PROC_NULL && mt_rank % 2 == 1) {
        int flag;
        OK(MPI_Send_init(&pv, 1, MPI_INT, p, 74, MPI_COMM_WORLD, &r[0]));
        pv = 111;
        OK(MPI_Start(&r[0]));
        OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));   /* eager: complete before it is received */
        pv = 222;
        OK(MPI_Start(&r[0]));
        OK(MPI_Cancel(&r[0]));
        OK(MPI_Wait(&r[0], &st[0]));
        OK(MPI_Test_cancelled(&st[0], &flag));
        CHECK(flag);
        OK(MPI_Request_free(&r[0]));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (p != MPI_PROC_NULL && mt_rank % 2 == 0) {
        int flag = 1;
        OK(MPI_Recv(&pv, 1, MPI_INT, p, 74, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(pv == 111);
        OK(MPI_Iprobe(p, 74, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/*
 * A buffered send above a slot completes once its message is copied aside,
 * and an internal request carries it: MPI_Cancel of the program's request
 * still takes the message back while no receive matched it (cancelled, never
 * received, its buffer space given back), as MPICH's scancel expects; once
 * received, the send stands; an inactive persistent one has nothing to take back. Before the fix the cancel asked the receiver
 * about the program's request, which sent nothing: never cancelled.
 */
static void cancel_bsend(void)
{
    int p = partner();
    enum { N = 100000 };
    static char msg[N];
    int size = N + MPI_BSEND_OVERHEAD;           /* room for one message at a time */
    char *buf = malloc((size_t)size);
    CHECK(buf);
    MPI_Request r;
    MPI_Status st;
    int flag;
    if (p != MPI_PROC_NULL && mt_rank % 2 == 1) {
        OK(MPI_Buffer_attach(buf, size));
        memset(msg, 1, N);
        OK(MPI_Ibsend(msg, N, MPI_CHAR, p, 80, MPI_COMM_WORLD, &r));
        OK(MPI_Cancel(&r));
        OK(MPI_Wait(&r, &st));
        OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag);
        /* the space came back: a second message fits, and is received */
        memset(msg, 2, N);
        OK(MPI_Ibsend(msg, N, MPI_CHAR, p, 81, MPI_COMM_WORLD, &r));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (p != MPI_PROC_NULL && mt_rank % 2 == 0) {
        flag = 1;
        OK(MPI_Iprobe(p, 80, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag);
        OK(MPI_Recv(msg, N, MPI_CHAR, p, 81, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(msg[0] == 2 && msg[N - 1] == 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);      /* tag 81 has been received */
    if (p != MPI_PROC_NULL && mt_rank % 2 == 1) {
        OK(MPI_Cancel(&r));           /* complete, its message taken: the send stands */
        OK(MPI_Wait(&r, &st));
        OK(MPI_Test_cancelled(&st, &flag));
        CHECK(!flag);
        /* A persistent one, started and waited for, is inactive: a cancel then has no
         * message to take back (it took back the start before, lost for good). */
        OK(MPI_Bsend_init(msg, N, MPI_CHAR, p, 82, MPI_COMM_WORLD, &r));
        memset(msg, 3, N);
        OK(MPI_Start(&r));
        OK(MPI_Wait(&r, &st));
        OK(MPI_Cancel(&r));
        OK(MPI_Wait(&r, &st));
        OK(MPI_Test_cancelled(&st, &flag));
        CHECK(!flag);
        OK(MPI_Request_free(&r));
    }
    MPI_Barrier(MPI_COMM_WORLD);      /* the message was not matched before the cancel */
    if (p != MPI_PROC_NULL && mt_rank % 2 == 0) {
        flag = 0;
        OK(MPI_Iprobe(p, 82, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        CHECK(flag);
        OK(MPI_Recv(msg, N, MPI_CHAR, p, 82, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(msg[0] == 3 && msg[N - 1] == 3);
    }
    if (p != MPI_PROC_NULL && mt_rank % 2 == 1) {
        void *b;
        int s;
        OK(MPI_Buffer_detach(&b, &s));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(buf);
}

/* Every other int of 2n sent as a vector, received contiguous (and the reverse). */
static void vector(void)
{
    int p = partner();
    if (p == MPI_PROC_NULL)
        return;
    enum { N = 5000 };
    static int wide[2 * N], narrow[N];
    MPI_Datatype vec;
    OK(MPI_Type_vector(N, 1, 2, MPI_INT, &vec));
    OK(MPI_Type_commit(&vec));
    if (mt_rank % 2 == 0) {
        for (int i = 0; i < 2 * N; i++)
            wide[i] = i;
        OK(MPI_Send(wide, 1, vec, p, 70, MPI_COMM_WORLD));
        OK(MPI_Recv(wide, 1, vec, p, 71, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++)
            CHECK(wide[2 * i] == -i && wide[2 * i + 1] == 2 * i + 1);
    } else {
        OK(MPI_Recv(narrow, N, MPI_INT, p, 70, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++) {
            CHECK(narrow[i] == 2 * i);
            narrow[i] = -i;
        }
        OK(MPI_Send(narrow, N, MPI_INT, p, 71, MPI_COMM_WORLD));
    }
    OK(MPI_Type_free(&vec));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    int big = argc > 1 && strcmp(argv[1], "big") == 0;
    wildcards_and_status();
    MPI_Barrier(MPI_COMM_WORLD);          /* its ANY_TAG receives must not see what follows */
    order_and_tags();
    probes();
    truncation();
    sizes(big);
    proc_null();
    waitany_testsome();
    many_pairs();
    unexpected_windows();
    generalized();
    sendrecv_ring();
    ssend();
    bsend_rsend();
    bsend_local();
    bsend_local_out_of_band();
    ssend_huge();
    ssend_vector_posted();
    bsend_retry();
    bsend_self();
    persistent();
    matched_probe();
    cancel_and_self();
    cancel_sends();
    cancel_bsend();
    vector();
    return mt_done("t_p2p");
}
