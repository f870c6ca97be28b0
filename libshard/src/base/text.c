/*
 * Text (base/text.h).
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"

int shard_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

const char *shard_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

char *shard_dir_of(const char *path)
{
    char *tmp = strdup(path);
    if (!tmp)
        return NULL;
    char *d = strdup(dirname(tmp));
    free(tmp);
    return d;
}

/* The length of the UTF-8 character at s (before end) and its code point in *cp; 0 when
 * the bytes there are not one (overlong, surrogate, past U+10FFFF, cut short). */
static size_t utf8_char(const unsigned char *s, const unsigned char *end, unsigned *cp)
{
    unsigned c = *s, min;
    size_t n;
    if (c < 0x80)
        return *cp = c, 1;
    if ((c & 0xe0) == 0xc0)
        n = 1, min = 0x80, c &= 0x1f;
    else if ((c & 0xf0) == 0xe0)
        n = 2, min = 0x800, c &= 0x0f;
    else if ((c & 0xf8) == 0xf0)
        n = 3, min = 0x10000, c &= 0x07;
    else
        return 0;
    if ((size_t)(end - s) <= n)
        return 0;
    for (size_t i = 1; i <= n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return n + 1;
}

int shard_text_utf8_valid(const char *str, size_t size)
{
    const unsigned char *s = (const unsigned char *)str, *end = s + size;
    unsigned cp;
    for (size_t n; s < end; s += n)
        if (!(n = utf8_char(s, end, &cp)))
            return 0;
    return 1;
}

size_t shard_text_escape(const char *in, char *out, size_t outsize)
{
    const unsigned char *s = (const unsigned char *)in, *end = s + strlen(in);
    size_t len = 0, kept = 0; /* the whole text's length, and what fits in out */
    int full = !out || !outsize;
    while (s < end) {
        unsigned cp = 0;
        size_t n = utf8_char(s, end, &cp);
        char esc[16];
        const char *piece = (const char *)s;
        size_t plen = n;
        if (!n || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
            /* a control character (C0, DEL, C1: each of its bytes) or a byte not UTF-8 */
            if (n == 1 && cp == '\t')
                plen = (size_t)snprintf(esc, sizeof esc, "\\t");
            else if (n == 1 && cp == '\n')
                plen = (size_t)snprintf(esc, sizeof esc, "\\n");
            else if (n == 2)
                plen = (size_t)snprintf(esc, sizeof esc, "\\x%02x\\x%02x", s[0], s[1]);
            else
                plen = (size_t)snprintf(esc, sizeof esc, "\\x%02x", s[0]);
            piece = esc;
            n = n ? n : 1;
        }
        if (!full && kept + plen < outsize) {
            memcpy(out + kept, piece, plen);
            kept += plen;
        } else {
            full = 1; /* cut at a whole character */
        }
        len += plen;
        s += n;
    }
    if (out && outsize)
        out[kept] = 0;
    return len;
}

int shard_text_u64(const char **s, uint64_t *v)
{
    if (**s < '0' || **s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(*s, &end, 10);
    if (errno)
        return -1;
    *s = end;
    *v = x;
    return 0;
}
