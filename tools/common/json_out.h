/*
 * Names as the command-line tools (zimp, zimp-ckpt) print them, in JSON and
 * in text. The names they print come from outside: a channel's file name in /dev/shm, a process's
 * comm, which anyone may set to any bytes. So nothing is written raw:
 * quote and backslash get a backslash, control characters and DEL become
 * \u00XX, valid UTF-8 is copied, and each other byte becomes \u00XX of its
 * value (the name reads as Latin-1 there, and a reader can still tell
 * which bytes they were). The output is always valid JSON.
 */
#ifndef ZIMP_TOOLS_JSON_OUT_H
#define ZIMP_TOOLS_JSON_OUT_H

#include <stdint.h>
#include <stdio.h>

/* Length of the valid UTF-8 sequence of two to four bytes at p, else 1. */
static inline size_t json_utf8_len(const unsigned char *p)
{
    if (p[0] < 0xc2 || p[0] > 0xf4)     /* ASCII, a continuation, an overlong or too-high lead */
        return 1;
    size_t n = p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
    uint32_t cp = p[0] & (0x3f >> (n - 1));
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)      /* also stops at the terminating NUL */
            return 1;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    uint32_t least = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
    return cp < least || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? 1 : n;
}

/* Writes s to f as a JSON string, quotes included. */
static inline void json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        size_t n = json_utf8_len(p);
        if (n > 1) {
            fwrite(p, 1, n, f);
            p += n;
        } else if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p++);
        } else if (*p < 0x20 || *p >= 0x7f) {
            fprintf(f, "\\u%04x", *p++);
        } else {
            fputc(*p++, f);
        }
    }
    fputc('"', f);
}

/*
 * s for a text line, into buf: valid UTF-8 but control characters (C0, DEL,
 * C1) as is, every other byte as \xNN (a name in /dev/shm may hold an escape
 * sequence for the terminal, or a newline that forges a line). Returns buf.
 */
static inline const char *text_name(const char *s, char *buf, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t at = 0;
    while (*p && at + 5 < cap) {
        size_t n = json_utf8_len(p);
        if (n == 2 && p[0] == 0xc2 && p[1] < 0xa0)
            n = 1;                      /* U+0080-U+009F: C1 controls (U+009B starts an escape) */
        if (n > 1) {
            if (at + n + 1 >= cap)
                break;
            for (size_t i = 0; i < n; i++)
                buf[at++] = (char)*p++;
        } else if (*p < 0x20 || *p >= 0x7f) {
            at += (size_t)snprintf(buf + at, cap - at, "\\x%02x", *p++);
        } else {
            buf[at++] = (char)*p++;
        }
    }
    buf[at] = '\0';
    return buf;
}

#endif
