/*
 * An ImageFolder tree as a pack scan reads it (folder.c).
 */
#ifndef SHARD_PACK_FOLDER_H
#define SHARD_PACK_FOLDER_H

#include "base/attr.h"
#include "pack/inputs.h"

/* The tree at root into c: the class folders (first level, sorted, hidden ones left out)
 * and their images, walked depth-first, in byte-wise order of their relative paths
 * (formats/shard.md 1.6). 0, or an error with err. */
SHARD_HIDDEN int shard_scan_folder(Scan *c, const char *root, ShardError *err);

#endif /* SHARD_PACK_FOLDER_H */
