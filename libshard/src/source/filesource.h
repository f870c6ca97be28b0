/*
 * Local files as sources (filesource.c).
 */
#ifndef SHARD_SOURCE_FILESOURCE_H
#define SHARD_SOURCE_FILESOURCE_H

#include "base/attr.h"
#include "source/source.h"

/* Opens the file at path; flags: SHARD_SOURCE_* (a map when asked for and possible).
 * err: SHARD_ERROR_MAX bytes, naming the path (SHARD_ERR_NOT_FOUND when missing). */
SHARD_HIDDEN int shard_source_file(ShardSource **out, const char *path, int flags, char *err);

#endif /* SHARD_SOURCE_FILESOURCE_H */
