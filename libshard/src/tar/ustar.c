/*
 * A tar header block (ustar.h): POSIX ustar fields, numbers in octal or GNU base-256.
 */
#include <string.h>

#include "tar/ustar.h"

static uint64_t number(const unsigned char *f, size_t n)
{
    if (f[0] & 0x80) { /* base-256: the rest big-endian */
        if (f[0] != 0x80)
            return UINT64_MAX; /* negative, or more than 64 bits */
        uint64_t v = 0;
        for (size_t i = 1; i < n; i++) {
            if (v >> 56)
                return UINT64_MAX;
            v = v << 8 | f[i];
        }
        return v;
    }
    size_t i = 0;
    while (i < n && f[i] == ' ')
        i++;
    uint64_t v = 0;
    int digits = 0;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++, digits++)
        v = v << 3 | (uint64_t)(f[i] - '0');
    if (!digits || (i < n && f[i] != ' ' && f[i] != 0))
        return UINT64_MAX;
    return v;
}

int shard_ustar_parse(const unsigned char h[512], ShardUstar *out)
{
    uint64_t sum = 0;
    int zero = 1;
    for (size_t i = 0; i < 512; i++) {
        zero &= h[i] == 0;
        sum += i >= 148 && i < 156 ? ' ' : h[i];
    }
    if (zero)
        return 1;
    if (number(h + 148, 8) != sum)
        return -1;
    memset(out, 0, sizeof *out);
    size_t plen = strnlen((const char *)h + 345, 155);
    size_t nlen = strnlen((const char *)h, 100);
    if (plen && !memcmp(h + 257, "ustar", 6)) { /* POSIX's prefix (not old GNU's fields) */
        memcpy(out->name, h + 345, plen);
        out->name[plen] = '/';
        memcpy(out->name + plen + 1, h, nlen);
    } else {
        memcpy(out->name, h, nlen);
    }
    out->size = number(h + 124, 12);
    out->type = h[156] ? (char)h[156] : '0';
    return 0;
}

/* Whether every writer stores name in the name field itself: 100 ASCII bytes at most
 * (longer ones go to a prefix, a GNU long-name member or a pax record, each its own way). */
static int fits_ustar(const char *name)
{
    size_t n = 0;
    for (const char *p = name; *p; p++, n++)
        if ((unsigned char)*p >= 0x80)
            return 0;
    return n <= 100;
}

int shard_ustar_is(const ShardUstar *u, const char *name, uint64_t size)
{
    if ((u->type != '0' && u->type != '7') || u->size != size)
        return 0;
    return !name || !fits_ustar(name) || !strcmp(u->name, name);
}
