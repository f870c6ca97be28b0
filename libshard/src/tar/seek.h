/*
 * Random access to a shard's samples: its .idx (formats/index.md) says where each sample's
 * members lie in the uncompressed tar; for .tar.zst the seek table (formats/zstd.md) says
 * which frames hold them, and only those are read (through the source's read_at) and
 * decompressed, one frame cached.
 */
#ifndef SHARD_TAR_SEEK_H
#define SHARD_TAR_SEEK_H

#include "base/attr.h"
#include "shard/file.h"
#include "source/source.h"
#include "tar/idx.h"
#include "tar/samplebuf.h"
#include "tar/seektable.h"

typedef struct ShardIndexed ShardIndexed;

/* Loads the seek table of a zstd source (compression as the tar reader found it; when it
 * has one) and the index at index_url (NULL: the seek table is only checked), its lines
 * held to s's limits (shard_index_parse). An index must belong to its shard: on a source
 * that is not costly, nothing but the end of the archive (or members that are no sample's)
 * may follow its last member, and in a plain tar the first and last members' headers must
 * be where it says (proven); else it is refused, naming both. Every read by index checks
 * the headers of what it reads.
 * *out is NULL, with 0 returned, when there is no index and none was required; a broken
 * seek table or index is an error (err names the URL and line or offset). src and s are
 * borrowed and must outlive the result. */
SHARD_HIDDEN int shard_indexed_open(ShardIndexed **out, ShardSource *src, const char *index_url,
                                    int required, const char *compression,
                                    const ShardFileSettings *s, char *err);
/* Whether the index was proven to belong to its shard (headers read, not only sizes). */
SHARD_HIDDEN int shard_indexed_proven(const ShardIndexed *x);
/* The index as parsed (borrowed from x). */
SHARD_HIDDEN const ShardIndex *shard_indexed_index(const ShardIndexed *x);
/* Whether samples can be read by index: an uncompressed tar, or zstd with a seek table. */
SHARD_HIDDEN int shard_indexed_can_seek(const ShardIndexed *x);
SHARD_HIDDEN uint64_t shard_indexed_count(const ShardIndexed *x);
/* Where a plain tar's stream is to start for reading from sample i on, in order: the end
 * of sample i - 1's last member (its next header, or the extended headers before it). 1
 * with *off set; 0 where none is known (zstd, sample 0). */
SHARD_HIDDEN int shard_indexed_stream_from(const ShardIndexed *x, uint64_t i, uint64_t *off);
/* Reads sample i into sb (i < count) as s says (lowercase, limits), each member's header
 * read with its data and checked against the index's line; *offset receives its first
 * header's tar offset. */
/* Samples up to last (of the count) are to be read in order after the next: a remote
 * plain tar's are then asked in one request (up to 4 MiB), not one a sample. */
SHARD_HIDDEN void shard_indexed_run_to(ShardIndexed *x, uint64_t last);
SHARD_HIDDEN int shard_indexed_read(ShardIndexed *x, uint64_t i, const ShardFileSettings *s,
                                    ShardSampleBuf *sb, uint64_t *offset, char *err);
/* Sample i's names, sizes and offsets into sb from the index alone, no data (a listing:
 * headers_only), as the tar reader would give them; for a v1.2 index (names) proven to
 * belong to its shard (shard_indexed_proven). */
SHARD_HIDDEN int shard_indexed_list(ShardIndexed *x, uint64_t i, const ShardFileSettings *s,
                                    ShardSampleBuf *sb, uint64_t *offset, char *err);
SHARD_HIDDEN void shard_indexed_free(ShardIndexed **x);

#endif /* SHARD_TAR_SEEK_H */
