/*
 * A reader's shard specs copied out of its settings (specs.c): the urls, a mix's sources and
 * the index cache, which the settings only lend to shard_reader_open, kept for a reader
 * opened later on the same shards.
 */
#ifndef SHARD_READ_SPECS_H
#define SHARD_READ_SPECS_H

#include <stddef.h>

#include "base/attr.h"
#include "shard/reader.h"

typedef struct ShardReaderSpecs {
    char **urls;
    size_t nurls;
    ShardMixInput *sources; /* their urls point into source_urls */
    char ***source_urls;
    size_t nsources;
    char *index_cache;
} ShardReaderSpecs;

/* s's specs into sp: 0, or SHARD_ERR_NOMEM (sp then partly filled: free it). */
SHARD_HIDDEN int shard_reader_specs_copy(ShardReaderSpecs *sp, const ShardReaderSettings *s);
/* Frees what sp holds, and zeroes it. */
SHARD_HIDDEN void shard_reader_specs_free(ShardReaderSpecs *sp);

#endif /* SHARD_READ_SPECS_H */
