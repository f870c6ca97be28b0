/*
 * Growing memory: a byte buffer (ShardBuf), and the one rule every growing array follows
 * (its capacity doubles, so n appends cost O(n) copies).
 */
#ifndef SHARD_BASE_BUF_H
#define SHARD_BASE_BUF_H

#include <stddef.h>

#include "base/attr.h"

/* A growable byte buffer; zero-initialize. */
typedef struct ShardBuf {
    unsigned char *data;
    size_t len, cap;
} ShardBuf;

SHARD_HIDDEN int shard_buf_reserve(ShardBuf *b, size_t extra);
SHARD_HIDDEN int shard_buf_append(ShardBuf *b, const void *p, size_t n);
SHARD_HIDDEN int shard_buf_printf(ShardBuf *b, const char *fmt, ...) SHARD_PRINTF(2, 3);
SHARD_HIDDEN void shard_buf_free(ShardBuf *b);

/* The capacity for at least need elements of esize bytes: cap doubled (from first when 0)
 * until need fits; 0 when that would overflow. */
SHARD_HIDDEN size_t shard_grow_cap(size_t cap, size_t need, size_t first, size_t esize);

/* Grows the array at *(T **)array, of *cap elements of esize bytes, to hold at least need
 * (realloc, doubling from first). 0, or SHARD_ERR_NOMEM with the array left as it was. */
SHARD_HIDDEN int shard_array_grow(void *array, size_t *cap, size_t need, size_t esize,
                                  size_t first);

#endif /* SHARD_BASE_BUF_H */
