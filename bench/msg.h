/* Benchmark message format, shared by every benchmark program: the sequence
 * number in the first min(len, 8) bytes (little-endian, truncated), a tail
 * derived from it, and (full check) a pattern in between. */
#ifndef ZIMP_BENCH_MSG_H
#define ZIMP_BENCH_MSG_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define TAIL_KEY 0x5a17c0de9e3779b9ull



static inline size_t tail_start(size_t len)
{
    return len >= 16 ? len - 8 : len > 8 ? len - 1 : len;
}

static inline uint8_t pat(uint64_t seq, size_t i)
{
    return (uint8_t)(seq * 0x9d + i * 7 + 1);
}

static inline void msg_write(void *buf, size_t len, uint64_t seq, int full)
{
    unsigned char *p = buf;
    size_t h = len < 8 ? len : 8, t = tail_start(len);
    memcpy(p, &seq, h);
    if (full)
        for (size_t i = h; i < t; i++)
            p[i] = pat(seq, i);
    if (len >= 16) {
        uint64_t v = seq ^ TAIL_KEY;
        memcpy(p + t, &v, 8);
    } else if (len > 8) {
        p[t] = (uint8_t)(seq * 31 + 7);
    }
}

static inline uint64_t seq_mask(size_t len)
{
    return len >= 8 ? UINT64_MAX : (1ull << (8 * len)) - 1;
}

/* Truncated sequence number carried by a message (0 for len 0). */
static inline uint64_t msg_seq(const void *buf, size_t len)
{
    uint64_t s = 0;
    memcpy(&s, buf, len < 8 ? len : 8);
    return s;
}

/* 0 if the message is message seq of length len, else -EBADMSG. */
static inline int msg_check(const void *buf, size_t len, uint64_t seq, int full)
{
    const unsigned char *p = buf;
    size_t h = len < 8 ? len : 8, t = tail_start(len);
    if ((msg_seq(buf, len) & seq_mask(len)) != (seq & seq_mask(len)))
        return -EBADMSG;
    if (len >= 16) {
        uint64_t v;
        memcpy(&v, p + t, 8);
        if (v != (seq ^ TAIL_KEY))
            return -EBADMSG;
    } else if (len > 8 && p[t] != (uint8_t)(seq * 31 + 7)) {
        return -EBADMSG;
    }
    if (full)
        for (size_t i = h; i < t; i++)
            if (p[i] != pat(seq, i))
                return -EBADMSG;
    return 0;
}

#endif
