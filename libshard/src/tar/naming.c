/*
 * WebDataset's naming rule and the key rules of formats/shard.md.
 */
#include <stdio.h>
#include <string.h>

#include "base/text.h"
#include "shard/names.h"

int shard_utf8_valid(const char *s, size_t size) { return shard_text_utf8_valid(s, size); }

size_t shard_escape(const char *in, char *out, size_t outsize)
{
    return shard_text_escape(in, out, outsize);
}

int shard_field_equal(const char *a, const char *b, int lowercase)
{
    return lowercase ? !shard_ascii_casecmp(a, b) : !strcmp(a, b);
}

int shard_name_split(const char *member, size_t *key_start, size_t *key_len, const char **field)
{
    size_t start = 0;
    while (member[start] == '.' && member[start + 1] == '/')
        start += 2;
    const char *name = member + start;
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    const char *dot = strchr(base, '.');
    if (!dot || dot == base || (base[0] == '_' && base[1] == '_'))
        return SHARD_ERR_NOT_FOUND;
    *key_start = start;
    *key_len = (size_t)(dot - name);
    *field = dot + 1;
    return 0;
}

/* Bytes of the Unicode White_Space code point at p (UTF-8), or 0: ASCII and the rest of
 * the set (U+0085, U+00A0, U+1680, U+2000-200A, U+2028-2029, U+202F, U+205F, U+3000),
 * since readers that split index lines on Unicode whitespace would break on any of them. */
static size_t space_len(const unsigned char *p)
{
    if (p[0] == ' ' || (p[0] >= '\t' && p[0] <= '\r'))
        return 1;
    if (p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0))
        return 2;
    if (p[0] == 0xe1 && p[1] == 0x9a && p[2] == 0x80)
        return 3;
    if (p[0] == 0xe2 && p[1] == 0x80 &&
        ((p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf))
        return 3;
    if (p[0] == 0xe2 && p[1] == 0x81 && p[2] == 0x9f)
        return 3;
    if (p[0] == 0xe3 && p[1] == 0x80 && p[2] == 0x80)
        return 3;
    return 0;
}

int shard_key_check(const char *key)
{
    size_t n = strlen(key);
    if (!n || key[0] == '/' || key[n - 1] == '/' || !shard_utf8_valid(key, n))
        return SHARD_ERR_INVALID;
    const char *comp = key;
    for (const char *p = key;; p++) {
        if (*p == '/' || *p == 0) {
            size_t len = (size_t)(p - comp);
            if (len == 0 || (len == 1 && comp[0] == '.') ||
                (len == 2 && comp[0] == '.' && comp[1] == '.'))
                return SHARD_ERR_INVALID;
            if (*p == 0)
                break;
            comp = p + 1;
            continue;
        }
        if ((unsigned char)*p < 0x20 || *p == 0x7f || space_len((const unsigned char *)p))
            return SHARD_ERR_INVALID;
    }
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    if (base[0] == '_' && base[1] == '_')
        return SHARD_ERR_INVALID;
    if (strchr(base, '.'))
        return SHARD_ERR_INVALID;
    return 0;
}

int shard_key_from_path(const char *path, char *out, size_t outsize)
{
    size_t n = strlen(path);
    if (!shard_utf8_valid(path, n))
        return SHARD_ERR_FORMAT;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    if (dot && dot > base)
        n = (size_t)(dot - path);
    if (n + 1 > outsize)
        return SHARD_ERR_INVALID;
    const char *comp = path;
    size_t o = 0;
    for (size_t i = 0; i <= n;) {
        char c = i < n ? path[i] : 0;
        if (c == '/' || c == 0) {
            size_t len = (size_t)(path + i - comp);
            if (len == 0 || (len == 1 && comp[0] == '.') ||
                (len == 2 && comp[0] == '.' && comp[1] == '.'))
                return SHARD_ERR_FORMAT;
            comp = path + i + 1;
            out[o++] = c;
            i++;
            continue;
        }
        size_t sp = space_len((const unsigned char *)path + i);
        if (sp && i + sp <= n) {
            out[o++] = '_';
            i += sp;
            continue;
        }
        if (c == '.' || (unsigned char)c < 0x20 || c == 0x7f)
            c = '_';
        out[o++] = c;
        i++;
    }
    n = o - 1;
    /* A basename starting with "__" is reserved for metadata; keep it a sample. */
    char *b = strrchr(out, '/');
    b = b ? b + 1 : out;
    if (b[0] == '_' && b[1] == '_') {
        if (n + 2 > outsize)
            return SHARD_ERR_INVALID;
        memmove(b + 1, b, strlen(b) + 1);
        b[0] = 'x';
        n++;
    }
    return (int)n;
}
