/*
 * A list file as a pack scan reads it (listfile.c): TSV or JSONL, local paths and remote URLs.
 */
#ifndef SHARD_PACK_LISTFILE_H
#define SHARD_PACK_LISTFILE_H

#include "base/attr.h"
#include "pack/inputs.h"

/* The list at file into c: each row's path (relative to the list's folder), label (an
 * integer, or a class name numbered in sorted order) and extra fields; the remote files'
 * sizes asked for, inflight at once. 0, or an error with err. */
SHARD_HIDDEN int shard_scan_list(Scan *c, const char *file, ShardError *err);

#endif /* SHARD_PACK_LISTFILE_H */
