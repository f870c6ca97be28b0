/*
 * Index files made (formats/index.md): the lines of a shard's index from one pass over its
 * members' headers, and an index file written whole through a sink.
 */
#ifndef SHARD_TAR_IDXBUILD_H
#define SHARD_TAR_IDXBUILD_H

#include <stdint.h>

#include "base/attr.h"
#include "base/buf.h"
#include "shard/file.h"
#include "sink/sink.h"

/* The settings a scan opens its shard with: headers only, no index loaded. */
SHARD_HIDDEN void shard_index_scan_settings(ShardFileSettings *fs);
/* Reads f (the shard at url, opened with shard_index_scan_settings) to its end, appending
 * a line per sample to lines and counting them into *n. On failure err (SHARD_ERROR_MAX bytes) names the
 * shard, offset and member: a member name the format cannot hold, a shard with no samples,
 * or what reading it met. */
SHARD_HIDDEN int shard_index_scan(ShardFile *f, const char *url, ShardBuf *lines, uint64_t *n,
                                  char *err);
/* The index of n samples at path (a folder's or a bucket's), through a sink with settings
 * ks (NULL: the defaults): its "v1.2 N" line, then lines (a sample's line each). */
SHARD_HIDDEN int shard_index_put(const char *path, uint64_t n, const ShardBuf *lines,
                                 const ShardSinkSettings *ks, char *err);

#endif /* SHARD_TAR_IDXBUILD_H */
