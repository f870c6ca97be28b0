/*
 * Key sets (keyset.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/keyset.h"
#include "shard/common.h"

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int shard_keyset_has(const ShardKeySet *k, const char *key)
{
    if (!k->cap)
        return 0;
    for (size_t j = hash_str(key) & (k->cap - 1); k->slots[j]; j = (j + 1) & (k->cap - 1))
        if (!strcmp(k->slots[j], key))
            return 1;
    return 0;
}

int shard_keyset_insert(ShardKeySet *k, char *key)
{
    if ((k->n + 1) * 2 > k->cap) {
        size_t cap = shard_grow_cap(k->cap, (k->n + 1) * 2, 1024, sizeof *k->slots);
        char **slots = cap ? calloc(cap, sizeof *slots) : NULL;
        if (!slots)
            return SHARD_ERR_NOMEM;
        for (size_t i = 0; i < k->cap; i++) {
            if (!k->slots[i])
                continue;
            size_t j = hash_str(k->slots[i]) & (cap - 1);
            while (slots[j])
                j = (j + 1) & (cap - 1);
            slots[j] = k->slots[i];
        }
        free(k->slots);
        k->slots = slots;
        k->cap = cap;
    }
    size_t j = hash_str(key) & (k->cap - 1);
    for (; k->slots[j]; j = (j + 1) & (k->cap - 1))
        if (!strcmp(k->slots[j], key))
            return 0;
    k->slots[j] = key;
    k->n++;
    return 1;
}

void shard_keyset_free(ShardKeySet *k)
{
    if (k->owns)
        for (size_t i = 0; i < k->cap; i++)
            free(k->slots[i]);
    free(k->slots);
    int owns = k->owns;
    memset(k, 0, sizeof *k);
    k->owns = owns;
}
