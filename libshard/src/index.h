/*
 * The per-shard index (formats/index.md): DALI's v1.1 and v1.2 text formats, parsed.
 */
#ifndef SHARD_INDEX_PRIV_H
#define SHARD_INDEX_PRIV_H

#include <stdint.h>

#include "internal.h"

typedef struct ShardIndexEntry {
    const char *ext;  /* points into the index's text */
    const char *name; /* member name (v1.2), NULL for v1.1 */
    uint64_t offset;  /* of the data, in the uncompressed tar */
    uint64_t size;
} ShardIndexEntry;

typedef struct ShardIndex {
    char *text; /* the file, tokens NUL-terminated in place */
    int version; /* 11 or 12 */
    uint64_t nsamples;
    ShardIndexEntry *entries;
    uint64_t nentries;
    uint64_t *first; /* nsamples + 1 positions into entries */
} ShardIndex;

/* Parses path; on failure writes what and where (line) into err. */
SHARD_HIDDEN int shard_index_load(ShardIndex *idx, const char *path, char *err);
SHARD_HIDDEN void shard_index_clear(ShardIndex *idx);

#endif
