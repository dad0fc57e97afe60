/* Channel life cycle: names, create/open/unlink, info, list, reap, config. */
#include "task.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>

static void expect_bad_name(const char *name, const char *why)
{
    zimp_sender *s = NULL;
    zimp_receiver *r = NULL;
    struct zimp_info info;
    int rc = zimp_create(name, NULL);
    ASSERT_MSG(rc == -EINVAL || rc == -ENAMETOOLONG, "create(%s): %d (%s)", why, rc, err_text(rc));
    const char *d = zimp_last_detail();
    ASSERT_MSG(d && *d, "create(%s): empty detail", why);
    rc = zimp_sender_open(name, &s);
    ASSERT_MSG(rc == -EINVAL || rc == -ENAMETOOLONG, "sender_open(%s): %d (%s)", why, rc, err_text(rc));
    ASSERT(s == NULL);
    d = zimp_last_detail();
    ASSERT_MSG(d && *d, "sender_open(%s): empty detail", why);
    rc = zimp_receiver_open(name, &r);
    ASSERT_MSG(rc == -EINVAL || rc == -ENAMETOOLONG, "receiver_open(%s): %d (%s)", why, rc, err_text(rc));
    ASSERT(r == NULL);
    d = zimp_last_detail();
    ASSERT_MSG(d && *d, "receiver_open(%s): empty detail", why);
    rc = zimp_unlink(name);
    ASSERT_MSG(rc == -EINVAL || rc == -ENAMETOOLONG, "unlink(%s): %d (%s)", why, rc, err_text(rc));
    rc = zimp_info(name, &info);
    ASSERT_MSG(rc == -EINVAL || rc == -ENAMETOOLONG, "info(%s): %d (%s)", why, rc, err_text(rc));
}

TEST_IMPL(names_invalid)
{
    char longname[ZIMP_NAME_MAX + 2];
    memset(longname, 'a', ZIMP_NAME_MAX + 1);
    longname[ZIMP_NAME_MAX + 1] = '\0';
    char buf[128];
    expect_bad_name("", "empty");
    expect_bad_name("/x", "leading slash");
    snprintf(buf, sizeof buf, "%s/b", task_prefix);
    expect_bad_name(buf, "inner slash");
    expect_bad_name(longname, "ZIMP_NAME_MAX+1");
    expect_bad_name(".hidden", "leading dot");
    expect_bad_name(".", "dot");
    expect_bad_name("..", "dotdot");
    expect_bad_name("caf\xc3\xa9", "non-ASCII");
    snprintf(buf, sizeof buf, "%s\xff", task_prefix);
    expect_bad_name(buf, "byte 0xff");
    snprintf(buf, sizeof buf, "%s x", task_prefix);
    expect_bad_name(buf, "space");
    snprintf(buf, sizeof buf, "%s\n", task_prefix);
    expect_bad_name(buf, "newline");
    snprintf(buf, sizeof buf, "%s*", task_prefix);
    expect_bad_name(buf, "star");
    return 0;
}

TEST_IMPL(names_max_len)
{
    char name[ZIMP_NAME_MAX + 2];
    size_t p = (size_t)snprintf(name, sizeof name, "%s-", task_prefix);
    memset(name + p, 'x', ZIMP_NAME_MAX - p);
    name[ZIMP_NAME_MAX] = '\0';
    ASSERT_EQ(strlen(name), ZIMP_NAME_MAX);
    int rc = zimp_create(name, NULL);
    ASSERT_MSG(rc == 0, "create of a %d-byte name: %s (%s)", ZIMP_NAME_MAX, err_text(rc),
               zimp_last_detail());
    zimp_sender *s;
    zimp_receiver *r;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_receiver_open(name, &r));
    ASSERT_OK(zimp_send(s, "hi", 2, 0));
    char buf[8];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, NS_PER_S), 2);
    zimp_sender_close(s);
    zimp_receiver_close(r);
    ASSERT_OK(zimp_unlink(name));
    name[ZIMP_NAME_MAX] = 'x';
    name[ZIMP_NAME_MAX + 1] = '\0';
    rc = zimp_create(name, NULL);
    ASSERT_MSG(rc == -ENAMETOOLONG || rc == -EINVAL, "create of a %d-byte name: %d",
               ZIMP_NAME_MAX + 1, rc);
    ASSERT(!shm_exists(name));
    /* every allowed character */
    snprintf(name, sizeof name, "%s-AZaz09._-", task_prefix);
    ASSERT_OK(zimp_create(name, NULL));
    ASSERT(shm_exists(name));
    ASSERT_OK(zimp_unlink(name));
    ASSERT(!shm_exists(name));
    return 0;
}

TEST_IMPL(create_eexist_open_enoent)
{
    char name[128], missing[128];
    chan_name(name, sizeof name, "ex");
    chan_name(missing, sizeof missing, "missing");
    zimp_sender *s = NULL;
    zimp_receiver *r = NULL;
    struct zimp_info info;
    ASSERT_OK(zimp_create(name, NULL));
    ASSERT(shm_exists(name));
    ASSERT_EQ(zimp_create(name, NULL), -EEXIST);
    struct zimp_config cfg = { .slots = 4, .slot_size = 64 };
    ASSERT_EQ(zimp_create(name, &cfg), -EEXIST);
    ASSERT_EQ(zimp_sender_open(missing, &s), -ENOENT);
    ASSERT(s == NULL);
    ASSERT_EQ(zimp_receiver_open(missing, &r), -ENOENT);
    ASSERT(r == NULL);
    ASSERT_EQ(zimp_unlink(missing), -ENOENT);
    ASSERT_EQ(zimp_info(missing, &info), -ENOENT);
    /* the first channel is untouched by the refused create */
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.slots, ZIMP_DEFAULT_SLOTS);
    ASSERT_OK(zimp_unlink(name));
    ASSERT_EQ(zimp_unlink(name), -ENOENT);
    ASSERT_EQ(zimp_receiver_open(name, &r), -ENOENT);
    ASSERT_OK(zimp_create(name, &cfg));          /* name reusable */
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.slots, 4);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

TEST_IMPL(strerror_all)
{
    const int codes[] = { EINVAL, ENAMETOOLONG, EEXIST, ENOENT, EAGAIN, ETIMEDOUT, EPIPE,
                          ECONNRESET, EMSGSIZE, EUSERS, EPROTO, EBUSY, EACCES, EPERM, ENOMEM };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *t = zimp_strerror(-codes[i]);
        ASSERT_MSG(t && *t, "no text for -%s", err_text(-codes[i]));
        t = zimp_strerror(codes[i]);
        ASSERT_MSG(t && *t, "no text for %d", codes[i]);
    }
    const int odd[] = { 0, -100000, 100000, INT32_MIN, INT32_MAX };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        ASSERT_MSG(zimp_strerror(odd[i]) != NULL, "NULL text for %d", odd[i]);
    ASSERT(strcmp(zimp_strerror(-EPIPE), zimp_strerror(-ECONNRESET)) != 0);
    ASSERT(zimp_last_detail() != NULL);
    return 0;
}

static void member_child(void *p)
{
    struct { const char *name; struct tpipe *ready, *go; } *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    ASSERT_OK(wait_bytes(a->go, 1, tmo(30000)));
    zimp_receiver_close(r);
}

TEST_IMPL(info_sizes_and_members)
{
    char name[128];
    chan_name(name, sizeof name, "info");
    struct zimp_info info;

    ASSERT_OK(zimp_create(name, NULL));            /* defaults */
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.slots, ZIMP_DEFAULT_SLOTS);
    ASSERT_EQ(info.slot_size, ZIMP_DEFAULT_SLOT_SIZE);
    ASSERT_EQ(info.max_senders, ZIMP_DEFAULT_MAX_SENDERS);
    ASSERT_EQ(info.max_receivers, ZIMP_DEFAULT_MAX_RECEIVERS);
    ASSERT_EQ(info.mode & 07777, 0600);
    ASSERT_EQ(info.senders, 0);
    ASSERT_EQ(info.receivers, 0);
    ASSERT(info.segment_size >= (uint64_t)ZIMP_DEFAULT_SLOTS * ZIMP_DEFAULT_SLOT_SIZE);
    struct stat st;
    char path[256];
    snprintf(path, sizeof path, "%s%s", SHM_PREFIX, name);
    ASSERT_OK(stat(path, &st));
    ASSERT_EQ(st.st_mode & 07777, 0600);
    ASSERT_EQ(st.st_size, info.segment_size);
    ASSERT_OK(zimp_unlink(name));

    struct zimp_config cfg = { .slots = 10, .slot_size = 512, .max_senders = 3,
                               .max_receivers = 5, .mode = 0640,
                               .stall_timeout_ns = 1234567, .flags = ZIMP_CHECKSUM };
    ASSERT_OK(zimp_create(name, &cfg));
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.slots, 16);                     /* rounded up to a power of two */
    ASSERT_EQ(info.slot_size, 512);
    ASSERT_EQ(info.max_senders, 3);
    ASSERT_EQ(info.max_receivers, 5);
    ASSERT_EQ(info.mode & 07777, 0640);
    ASSERT_EQ(info.stall_timeout_ns, 1234567);
    ASSERT_EQ(info.flags & (ZIMP_CHECKSUM | ZIMP_ZERO_ON_RELEASE), ZIMP_CHECKSUM);
    ASSERT_OK(stat(path, &st));
    ASSERT_EQ(st.st_mode & 07777, 0640);

    zimp_sender *s;
    zimp_receiver *r1, *r2;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_receiver_open(name, &r1));
    ASSERT_OK(zimp_receiver_open(name, &r2));
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.senders, 1);
    ASSERT_EQ(info.receivers, 2);
    struct tpipe ready, go;
    tpipe_open(&ready);
    tpipe_open(&go);
    struct { const char *name; struct tpipe *ready, *go; } a = { name, &ready, &go };
    pid_t pid = spawn(member_child, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.receivers, 3);
    signal_byte(&go);
    ASSERT_CHILD_OK(pid, tmo(10000));
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.receivers, 2);
    zimp_receiver_close(r1);
    zimp_sender_close(s);
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.senders, 0);
    ASSERT_EQ(info.receivers, 1);
    zimp_receiver_close(r2);
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.receivers, 0);
    ASSERT_OK(zimp_unlink(name));
    tpipe_close(&ready);
    tpipe_close(&go);
    return 0;
}

struct list_state { const char *a, *b; int seen_a, seen_b, calls; };

static int list_cb(const char *name, void *arg)
{
    struct list_state *st = arg;
    st->calls++;
    ASSERT(strncmp(name, "zimp.", 5) != 0);          /* names without the prefix */
    if (!strcmp(name, st->a))
        st->seen_a++;
    if (!strcmp(name, st->b))
        st->seen_b++;
    return 0;
}

static int stop_cb(const char *name, void *arg)
{
    (void)name;
    (*(int *)arg)++;
    return 42;
}

TEST_IMPL(list_finds_channel)
{
    char a[128], b[128];
    chan_name(a, sizeof a, "la");
    chan_name(b, sizeof b, "lb");
    ASSERT_OK(zimp_create(a, NULL));
    ASSERT_OK(zimp_create(b, NULL));
    struct list_state st = { a, b, 0, 0, 0 };
    int rc = zimp_list(list_cb, &st);
    ASSERT_MSG(rc >= 0, "zimp_list: %s", err_text(rc));
    ASSERT_EQ(st.seen_a, 1);
    ASSERT_EQ(st.seen_b, 1);
    ASSERT(st.calls >= 2);
    int calls = 0;
    ASSERT_EQ(zimp_list(stop_cb, &calls), 42);
    ASSERT_EQ(calls, 1);
    ASSERT_OK(zimp_unlink(a));
    memset(&st, 0, sizeof st);
    st.a = a;
    st.b = b;
    ASSERT(zimp_list(list_cb, &st) >= 0);
    ASSERT_EQ(st.seen_a, 0);
    ASSERT_EQ(st.seen_b, 1);
    ASSERT_OK(zimp_unlink(b));
    return 0;
}

struct old_member { const char *name; struct tpipe *ready, *go; int count; };

static void old_member_role(void *p)
{
    struct old_member *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    uint8_t buf[128];
    for (int i = 0; i < a->count; i++) {
        ssize_t n = zimp_recv(r, buf, sizeof buf, T_LONG);
        uint32_t snd;
        uint64_t seq;
        ASSERT_MSG(n > 0, "old member message %d: %s", i, err_text(n));
        ASSERT(msg_check(buf, (size_t)n, &snd, &seq) && seq == (uint64_t)i && snd == 0);
    }
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S), -EPIPE);
    zimp_receiver_close(r);
}

TEST_IMPL(unlink_while_open)
{
    char name[128];
    chan_name(name, sizeof name, "ul");
    create_chan(name, 8, 128, 0, 0);
    struct tpipe ready, go;
    tpipe_open(&ready);
    tpipe_open(&go);
    struct old_member a = { name, &ready, &go, 100 };
    pid_t rx = spawn(old_member_role, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    zimp_sender *s;
    zimp_receiver *r, *r2 = NULL;
    ASSERT_OK(zimp_sender_open(name, &s));
    ASSERT_OK(zimp_receiver_open(name, &r));
    ASSERT_OK(zimp_unlink(name));
    ASSERT(!shm_exists(name));
    ASSERT_EQ(zimp_receiver_open(name, &r2), -ENOENT);
    zimp_sender *s2 = NULL;
    ASSERT_EQ(zimp_sender_open(name, &s2), -ENOENT);
    struct zimp_info info;
    ASSERT_EQ(zimp_info(name, &info), -ENOENT);
    /* the name can be taken by a new, unrelated channel */
    ASSERT_OK(zimp_create(name, NULL));
    ASSERT_OK(zimp_receiver_open(name, &r2));
    for (int i = 0; i < 100; i++) {
        ASSERT_OK(send_msg(s, i & 1, 0, (uint64_t)i, 64, T_LONG));
        uint8_t buf[128];
        ASSERT_EQ(recv_msg(r, i & 1, buf, sizeof buf, T_LONG), 64);
    }
    uint8_t buf[128];
    ASSERT_EQ(zimp_recv(r2, buf, sizeof buf, 0), -EAGAIN);
    zimp_sender_close(s);
    ASSERT_CHILD_OK(rx, tmo(20000));
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, 5 * NS_PER_S), -EPIPE);
    zimp_receiver_close(r);
    zimp_receiver_close(r2);
    ASSERT_OK(zimp_unlink(name));
    tpipe_close(&ready);
    tpipe_close(&go);
    return 0;
}

TEST_IMPL(config_absurd)
{
    char name[128];
    chan_name(name, sizeof name, "cfg");
    const struct { const char *what; struct zimp_config c; } bad[] = {
        { "slots 0xFFFFFFFF", { .slots = 0xFFFFFFFFu } },
        { "slots 0x80000001", { .slots = 0x80000001u } },
        { "slot_size 0xFFFFFFFF", { .slot_size = 0xFFFFFFFFu } },
        { "max_receivers > ZIMP_MAX_RECEIVERS", { .max_receivers = ZIMP_MAX_RECEIVERS + 1 } },
        { "max_receivers 0xFFFFFFFF", { .max_receivers = 0xFFFFFFFFu } },
        { "max_senders > ZIMP_MAX_SENDERS", { .max_senders = ZIMP_MAX_SENDERS + 1 } },
        { "max_senders 0xFFFFFFFF", { .max_senders = 0xFFFFFFFFu } },
        { "all huge", { 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0, 0, 0, NULL } },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = zimp_create(name, &bad[i].c);
        ASSERT_MSG(rc == -EINVAL, "%s: got %d (%s)", bad[i].what, rc, err_text(rc));
        ASSERT_MSG(*zimp_last_detail(), "%s: empty detail", bad[i].what);
        ASSERT_MSG(!shm_exists(name), "%s: segment left behind", bad[i].what);
    }
    /* the hard limits themselves are accepted */
    struct zimp_config edge = { .slots = 4, .slot_size = 64,
                                .max_senders = ZIMP_MAX_SENDERS,
                                .max_receivers = ZIMP_MAX_RECEIVERS };
    int rc = zimp_create(name, &edge);
    ASSERT_MSG(rc == 0, "hard limits refused: %s (%s)", err_text(rc), zimp_last_detail());
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.max_receivers, ZIMP_MAX_RECEIVERS);
    ASSERT_EQ(info.max_senders, ZIMP_MAX_SENDERS);
    ASSERT_OK(zimp_unlink(name));
    return 0;
}

static void hold_child(void *p)
{
    struct { const char *name; struct tpipe *ready; } *a = p;
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(a->name, &r));
    signal_byte(a->ready);
    for (;;)
        pause();
}

static void create_child(void *p) { create_chan(p, 8, 64, 0, 0); }

/* Creates `name` from a process that exits at once: a creator no longer running. */
static void create_from_exited(char *name)
{
    ASSERT_EQ(wait_child(spawn(create_child, name), tmo(10000)), 0);
}

TEST_IMPL(reap)
{
    char name[128];
    chan_name(name, sizeof name, "reap");
    /* no member, but its creator runs (it may not have opened yet): kept */
    create_chan(name, 8, 64, 0, 0);
    struct zimp_info info;
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.creator_pid, getpid());
    ASSERT_EQ(zimp_reap(name), 0);
    ASSERT_EQ(zimp_reap(NULL) >= 0, 1);
    ASSERT(shm_exists(name));
    ASSERT_OK(zimp_unlink(name));

    create_from_exited(name);
    ASSERT_OK(zimp_info(name, &info));
    ASSERT_EQ(info.creator_pid, 0);
    struct tpipe ready;
    tpipe_open(&ready);
    struct { const char *name; struct tpipe *ready; } a = { name, &ready };
    pid_t pid = spawn(hold_child, &a);
    ASSERT_OK(wait_bytes(&ready, 1, tmo(10000)));
    ASSERT_EQ(zimp_reap(name), 0);                 /* a live member */
    ASSERT(shm_exists(name));
    kill(pid, SIGKILL);
    /* the dead member is a zombie until reaped: still not a live member */
    int rc = -1;
    for (int i = 0; i < 200 && (rc = zimp_reap(name)) == 0; i++)
        sleep_ms(10);
    ASSERT_MSG(rc == 1, "reap after the only member was killed (zombie): %d (%s)", rc,
               err_text(rc));
    ASSERT(!shm_exists(name));
    ASSERT_EQ(wait_child(pid, 1000), 128 + SIGKILL);
    /* no member at all, creator gone */
    create_from_exited(name);
    ASSERT_EQ(zimp_reap(name), 1);
    ASSERT(!shm_exists(name));
    tpipe_close(&ready);
    return 0;
}

TEST_IMPL(permissions)
{
    if (geteuid() != 0) {
        fprintf(stderr, "permissions: needs root to switch users\n");
        return TEST_SKIP;
    }
    char priv[128], pub[128];
    chan_name(priv, sizeof priv, "p600");
    chan_name(pub, sizeof pub, "p666");
    struct zimp_config c600 = { .slots = 8, .slot_size = 64, .mode = 0600 };
    struct zimp_config c666 = { .slots = 8, .slot_size = 64, .mode = 0666 };
    ASSERT_OK(zimp_create(priv, &c600));
    ASSERT_OK(zimp_create(pub, &c666));
    zimp_receiver *r;
    ASSERT_OK(zimp_receiver_open(pub, &r));
    fflush(stderr);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        ASSERT_OK(setgroups(0, NULL) == 0 ? 0 : -errno);
        ASSERT_OK(setgid(65534));
        ASSERT_OK(setuid(65534));
        zimp_sender *s = NULL;
        zimp_receiver *rr = NULL;
        ASSERT_EQ(zimp_sender_open(priv, &s), -EACCES);
        ASSERT(*zimp_last_detail());
        ASSERT_EQ(zimp_receiver_open(priv, &rr), -EACCES);
        int rc = zimp_unlink(priv);
        ASSERT_MSG(rc == -EACCES || rc == -EPERM, "unlink by another user: %d", rc);
        rc = zimp_sender_open(pub, &s);
        ASSERT_MSG(rc == 0, "sender_open of a 0666 channel as nobody: %s (%s)", err_text(rc),
                   zimp_last_detail());
        rc = zimp_receiver_open(pub, &rr);
        ASSERT_MSG(rc == 0, "receiver_open of a 0666 channel as nobody: %s", err_text(rc));
        ASSERT_OK(send_msg(s, MODE_ZC, 5, 0, 32, NS_PER_S));
        uint8_t buf[64];
        ASSERT_EQ(zimp_recv(rr, buf, sizeof buf, NS_PER_S), 32);
        zimp_receiver_close(rr);
        zimp_sender_close(s);
        _exit(0);
    }
    ASSERT_CHILD_OK(pid, tmo(10000));
    uint8_t buf[64];
    ASSERT_EQ(zimp_recv(r, buf, sizeof buf, NS_PER_S), 32);
    uint32_t snd;
    uint64_t seq;
    ASSERT(msg_check(buf, 32, &snd, &seq) && snd == 5);
    zimp_receiver_close(r);
    ASSERT(shm_exists(priv));
    ASSERT_OK(zimp_unlink(priv));
    ASSERT_OK(zimp_unlink(pub));
    return 0;
}
