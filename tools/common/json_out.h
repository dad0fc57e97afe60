/*
 * JSON strings for the command-line tools (zimp, zimp-ckpt). The names they
 * print come from outside: a channel's file name in /dev/shm, a process's
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

#endif
