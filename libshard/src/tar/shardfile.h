/*
 * ShardFile's private entry points: a shard read over a source the caller already has (a
 * verifier that checks the source's frames first, a test's own source), and a prefetch.
 */
#ifndef SHARD_TAR_SHARDFILE_H
#define SHARD_TAR_SHARDFILE_H

#include "base/attr.h"
#include "base/blockpool.h"
#include "shard/file.h"
#include "source/open.h"
#include "source/source.h"

/* Opens a shard over src, taking over the caller's reference (released on failure too). */
SHARD_HIDDEN int shard_file_open_source(ShardFile **out, ShardSource *src,
                                        const ShardFileSettings *s, ShardError *err);
/* shard_file_open_source without reading anything yet (as for a costly source): the first
 * read, or shard_file_start, reads up to the first tar header. Fails only out of memory. */
SHARD_HIDDEN int shard_file_open_deferred(ShardFile **out, ShardSource *src,
                                          const ShardFileSettings *s, ShardError *err);
/* Reads up to the first tar header (and a .tar.zst's seek table) now: 0, or the failure,
 * which f keeps (shard_file_error). */
SHARD_HIDDEN int shard_file_start(ShardFile *f);
/* Whether f failed in a zstd frame that does not decompress (a damaged frame, which a
 * frame-by-frame check reports on its own). */
SHARD_HIDDEN int shard_file_bad_frame(const ShardFile *f);

/* A hint that f will be read in order from its start soon: a remote shard's first request
 * goes out now (its latency then passes while the shard before is read). */
SHARD_HIDDEN void shard_file_prefetch(ShardFile *f);
/* shard_file_open for a shard the thread t reads, and only t (source/open.h). */
SHARD_HIDDEN int shard_file_open_on(ShardFile **out, const char *url, const ShardFileSettings *s,
                                    ShardSourceThread *t, ShardError *err);
/* shard_file_seek for reading on in order from sample i: a remote plain tar not read yet
 * streams from sample i's headers in one request (reading by index asks for each member;
 * a sample read alone wants that). */
SHARD_HIDDEN int shard_file_seek_in_order(ShardFile *f, uint64_t i);
/* After a seek: the samples up to last are read next, in order (a remote plain tar's in one
 * request: shard_indexed_run_to). */
SHARD_HIDDEN void shard_file_run_to(ShardFile *f, uint64_t last);
/* What reading f's source has cost so far (source.h). */
SHARD_HIDDEN void shard_file_cost(const ShardFile *f, ShardReadCost *out);
/* shard_file_take, the item's block taken from pool (NULL: malloc). */
SHARD_HIDDEN int shard_file_take_pooled(ShardFile *f, ShardBlockPool *pool, ShardItem **out);

#endif /* SHARD_TAR_SHARDFILE_H */
