/*
 * Growing memory (base/buf.h).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "shard/common.h"

size_t shard_grow_cap(size_t cap, size_t need, size_t first, size_t esize)
{
    size_t c = cap ? cap : first ? first : 1;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return 0;
        c *= 2;
    }
    return c > SIZE_MAX / esize ? 0 : c;
}

int shard_array_grow(void *array, size_t *cap, size_t need, size_t esize, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t c = shard_grow_cap(*cap, need, first, esize);
    void **p = array;
    void *q = c ? realloc(*p, c * esize) : NULL;
    if (!q)
        return SHARD_ERR_NOMEM;
    *p = q;
    *cap = c;
    return 0;
}

int shard_buf_reserve(ShardBuf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    if (extra > SIZE_MAX - b->len)
        return SHARD_ERR_NOMEM;
    return shard_array_grow(&b->data, &b->cap, b->len + extra, 1, 256);
}

int shard_buf_append(ShardBuf *b, const void *p, size_t n)
{
    int rc = shard_buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int shard_buf_printf(ShardBuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return SHARD_ERR_INVALID;
    int rc = shard_buf_reserve(b, (size_t)n + 1);
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void shard_buf_free(ShardBuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
