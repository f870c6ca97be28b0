/*
 * A set of keys (open addressing, FNV-1a): the keys a shard has seen (a key that comes back
 * after others is a defect), and the keys the pack plan has given out (a clash gets "_N").
 */
#ifndef SHARD_BASE_KEYSET_H
#define SHARD_BASE_KEYSET_H

#include <stddef.h>

#include "base/attr.h"


typedef struct ShardKeySet {
    char **slots;
    size_t cap, n;
    int owns; /* the set frees its keys */
} ShardKeySet;

/* Whether key is in the set. */
SHARD_HIDDEN int shard_keyset_has(const ShardKeySet *k, const char *key);
/* Adds key unless present: 1 when added (the set keeps the pointer, and frees it if it
 * owns its keys), 0 when present (nothing kept), SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_keyset_insert(ShardKeySet *k, char *key);
SHARD_HIDDEN void shard_keyset_free(ShardKeySet *k);

#endif /* SHARD_BASE_KEYSET_H */
