/*
 * The per-shard index (formats/index.md): DALI's v1.1 and v1.2 text formats, parsed.
 */
#ifndef SHARD_TAR_IDX_H
#define SHARD_TAR_IDX_H

#include <stdint.h>

#include "base/attr.h"
#include "shard/file.h"
#include "shard/remote.h"

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
    uint64_t end;    /* where the last member's data end, on a 512-byte block */
} ShardIndex;

/* Parses the len bytes of text (NUL-terminated after them), taking ownership of text
 * (malloc'd; freed by shard_index_clear, or here on failure). Every count is checked
 * against the text's size before anything is allocated from it, and every line against
 * the limits of lim (NULL: the defaults; max_member_size, max_sample_size, max_fields) and
 * against the tar it describes: data offsets on 512-byte blocks, each after the member
 * before it and its header, the members of a line one key's and the key changing from
 * line to line (v1.2). name says in messages what was parsed; on failure err
 * (SHARD_ERROR_MAX bytes) says what and where (line). */
SHARD_HIDDEN int shard_index_parse(ShardIndex *idx, char *text, size_t len, const char *name,
                                   const ShardFileSettings *lim, char *err);
/* Reads and parses the index at url (through the sources) as shard_index_parse does;
 * SHARD_ERR_NOT_FOUND when it does not exist. */
SHARD_HIDDEN int shard_index_load(ShardIndex *idx, const char *url, ShardRemote *remote,
                                  const ShardFileSettings *lim, char *err);
/* The sample count an index's first line promises, or -1 when text does not start with a
 * valid header. */
SHARD_HIDDEN int64_t shard_index_header_count(const char *text, size_t len);
SHARD_HIDDEN void shard_index_clear(ShardIndex *idx);

#endif
