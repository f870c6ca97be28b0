/*
 * Local files as sources, and local folders listed (filesource.c).
 */
#ifndef SHARD_SOURCE_FILESOURCE_H
#define SHARD_SOURCE_FILESOURCE_H

#include "base/attr.h"
#include "remote/objectname.h"
#include "source/source.h"

/* Opens the file at path; flags: SHARD_SOURCE_* (a map when asked for and possible).
 * err: SHARD_ERROR_MAX bytes, naming the path (SHARD_ERR_NOT_FOUND when missing). */
SHARD_HIDDEN int shard_source_file(ShardSource **out, const char *path, int flags, char *err);

/* The entries of the local folder at path (hidden ones left out), each handed to fn as
 * "path/name" with its size, in name order: 0, fn's error, or another naming the folder;
 * 1 when path is no folder. */
SHARD_HIDDEN int shard_file_list(const char *path, ShardListFn fn, void *cookie, char *err);

#endif /* SHARD_SOURCE_FILESOURCE_H */
