/*
 * A manifest's insides, shared by its files: the object and the join (manifest_object.c), reading
 * (manifest_read.c) and writing (manifest_write.c). Manifests are read and written with
 * jansson, whose objects keep insertion order: the output is reproducible byte for byte.
 */
#ifndef SHARD_CATALOG_MANIFESTDEF_H
#define SHARD_CATALOG_MANIFESTDEF_H

#include <stddef.h>

#include "base/attr.h"
#include "shard/manifest.h"

/* What a manifest says of itself, so that wids reads it (formats/manifest.md). */
#define WIDS_KIND "wids-shard-index-v1"

struct ShardManifest {
    char *name;
    ShardFileInfo *shards;
    size_t n, cap;
    char **classes;
    size_t nclasses;
    char *options; /* compact JSON object text */
    size_t part, nparts, plan_shards; /* a part of a plan (nparts 0: not one) */
    char **datasets; /* [cap] once one shard has one: wids's per-shard "dataset", or NULL */
};

/* Shard i's "dataset" (wids: which dataset of a mix it belongs to); copied. 0 or
 * SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_manifest_set_dataset(ShardManifest *m, size_t i, const char *dataset);

#endif /* SHARD_CATALOG_MANIFESTDEF_H */
