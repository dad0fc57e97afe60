/* Threads of one process, each with its own handles (TSan sees these). */
#include "task.h"

#include <pthread.h>

enum { TX = 3, RX = 3 };

struct th_args {
    const char *name;
    int id;
    long count;
    pthread_barrier_t *opened, *go;
    uint64_t hash;
    char err[160];
};

static void *th_rx(void *p)
{
    struct th_args *a = p;
    zimp_receiver *r;
    int rc = zimp_receiver_open(a->name, &r);
    pthread_barrier_wait(a->opened);
    if (rc) {
        snprintf(a->err, sizeof a->err, "receiver_open: %s", err_text(rc));
        return NULL;
    }
    uint64_t next[TX] = { 0 }, h = HASH_INIT;
    uint8_t buf[256];
    for (long i = 0; i < a->count * TX; i++) {
        ssize_t n = recv_msg(r, (int)(i & 1), buf, sizeof buf, T_LONG);
        uint32_t snd;
        uint64_t seq;
        if (n < 0 || !msg_check(buf, (size_t)n, &snd, &seq) || snd >= TX || seq != next[snd]) {
            snprintf(a->err, sizeof a->err, "message %ld: %s", i, n < 0 ? err_text(n) : "out of order");
            break;
        }
        next[snd]++;
        h = hash_step(h, ((uint64_t)snd << 48) | seq);
    }
    if (!a->err[0] && (rc = (int)zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S)) != -EPIPE)
        snprintf(a->err, sizeof a->err, "end of stream: %s", err_text(rc));
    a->hash = h;
    zimp_receiver_close(r);
    return NULL;
}

static void *th_tx(void *p)
{
    struct th_args *a = p;
    zimp_sender *s;
    int rc = zimp_sender_open(a->name, &s);
    pthread_barrier_wait(a->opened);
    pthread_barrier_wait(a->go);
    if (rc) {
        snprintf(a->err, sizeof a->err, "sender_open: %s", err_text(rc));
        return NULL;
    }
    for (long i = 0; i < a->count; i++) {
        rc = send_msg(s, (int)(i & 1), (uint32_t)a->id, (uint64_t)i, 16 + (size_t)(i % 200), T_LONG);
        if (rc) {
            snprintf(a->err, sizeof a->err, "send %ld: %s", i, err_text(rc));
            break;
        }
    }
    zimp_sender_close(s);
    return NULL;
}

TEST_IMPL(threads_own_handles)
{
    char name[128];
    chan_name(name, sizeof name, "th");
    create_chan(name, 16, 256, TX, RX);
    pthread_barrier_t ropened, opened, go;
    pthread_barrier_init(&ropened, NULL, RX + 1);
    struct th_args rx[RX], tx[TX];
    pthread_t t_rx[RX], t_tx[TX];
    long count = scaled(20000);
    for (int i = 0; i < RX; i++) {
        rx[i] = (struct th_args){ name, i, count, &ropened, NULL, 0, "" };
        ASSERT_OK(pthread_create(&t_rx[i], NULL, th_rx, &rx[i]));
    }
    pthread_barrier_wait(&ropened);                /* receivers joined */
    pthread_barrier_init(&opened, NULL, TX + 1);
    pthread_barrier_init(&go, NULL, TX + 1);
    for (int i = 0; i < TX; i++) {
        tx[i] = (struct th_args){ name, i, count, &opened, &go, 0, "" };
        ASSERT_OK(pthread_create(&t_tx[i], NULL, th_tx, &tx[i]));
    }
    pthread_barrier_wait(&opened);                 /* every sender joined */
    pthread_barrier_wait(&go);
    for (int i = 0; i < TX; i++) {
        pthread_join(t_tx[i], NULL);
        ASSERT_MSG(!tx[i].err[0], "sender thread %d: %s", i, tx[i].err);
    }
    for (int i = 0; i < RX; i++) {
        pthread_join(t_rx[i], NULL);
        ASSERT_MSG(!rx[i].err[0], "receiver thread %d: %s", i, rx[i].err);
        ASSERT_MSG(rx[i].hash == rx[0].hash, "receiver thread %d saw another order", i);
    }
    pthread_barrier_destroy(&ropened);
    pthread_barrier_destroy(&opened);
    pthread_barrier_destroy(&go);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

struct churn_args { const char *name; int iters; char err[128]; };

static void *th_churn(void *p)
{
    struct churn_args *a = p;
    for (int i = 0; i < a->iters; i++) {
        zimp_receiver *r;
        zimp_sender *s;
        int rc = zimp_receiver_open(a->name, &r);
        if (rc == 0) {
            rc = zimp_sender_open(a->name, &s);
            if (rc == 0)
                zimp_sender_close(s);
            zimp_receiver_close(r);
        }
        if (rc && rc != -EUSERS) {
            snprintf(a->err, sizeof a->err, "iteration %d: %s", i, err_text(rc));
            break;
        }
        /* the detail string is per thread */
        zimp_receiver *bad;
        if (zimp_receiver_open("", &bad) >= 0 || !*zimp_last_detail()) {
            snprintf(a->err, sizeof a->err, "iteration %d: no detail for a bad name", i);
            break;
        }
    }
    return NULL;
}

TEST_IMPL(threads_open_close)
{
    char name[128];
    chan_name(name, sizeof name, "thc");
    create_chan(name, 8, 64, 4, 4);
    enum { N = 6 };
    pthread_t t[N];
    struct churn_args a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (struct churn_args){ name, (int)scaled(2000), "" };
        ASSERT_OK(pthread_create(&t[i], NULL, th_churn, &a[i]));
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        ASSERT_MSG(!a[i].err[0], "thread %d: %s", i, a[i].err);
    }
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.senders, 0);
    ASSERT_EQ(info.receivers, 0);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}
