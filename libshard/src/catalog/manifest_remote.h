/*
 * Manifests read through a caller's ShardRemote (manifest_object.c; shard/manifest.h is the rest).
 */
#ifndef SHARD_CATALOG_MANIFEST_REMOTE_H
#define SHARD_CATALOG_MANIFEST_REMOTE_H

#include "base/attr.h"
#include "shard/manifest.h"
#include "shard/remote.h"

/* shard_manifest_read, reading through remote (NULL: a ShardRemote with the defaults). */
SHARD_HIDDEN int shard_manifest_read_remote(ShardManifest **out, const char *path,
                                            ShardRemote *remote, ShardError *err);

#endif /* SHARD_CATALOG_MANIFEST_REMOTE_H */
