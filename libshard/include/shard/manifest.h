/*
 * libshard — dataset manifests (formats/manifest.md): the shard list of a dataset with
 * sample counts, sizes and checksums, in the wids shard-index form plus libshard's own
 * fields (class names, packing options).
 *
 * A ShardManifest is not safe to use from several threads at once.
 */
#ifndef SHARD_MANIFEST_H
#define SHARD_MANIFEST_H

#include "common.h"
#include "remote.h"
#include "writer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ShardManifest ShardManifest;

/**
 * Creates an empty manifest.
 * @param out receives the new handle, owned by the caller (shard_manifest_free)
 * @param name dataset name stored in the manifest; copied; may be NULL
 */
SHARD_API int shard_manifest_new(ShardManifest **out, const char *name);

/**
 * Reads a manifest file. Shard urls that are relative are resolved against the folder of
 * path, so they can be opened directly.
 * @param out receives the handle, owned by the caller; NULL on failure
 * @param path the manifest; borrowed
 * @param err optional; filled with what failed and where (file, field)
 */
SHARD_API int shard_manifest_read(ShardManifest **out, const char *path, ShardError *err);

/**
 * Parses a manifest from len bytes of text (a fetched copy, a test's bytes), as
 * shard_manifest_read does; relative shard urls are resolved against path's folder.
 * @param path names the manifest in messages and is where it stands; borrowed
 */
SHARD_API int shard_manifest_parse(ShardManifest **out, const char *text, size_t len,
                                   const char *path, ShardError *err);

/**
 * Writes the manifest to path, whole or not at all: a local file (temporary name, fsync,
 * rename) or a gs:// or s3:// object (it appears once uploaded). Local shard paths are
 * written relative to the folder of path ("../" where needed); urls with a scheme as they
 * are. Into a bucket through a remote with the default settings.
 * @param err optional; filled on failure
 */
SHARD_API int shard_manifest_write(const ShardManifest *m, const char *path, ShardError *err);

/** shard_manifest_write into a bucket through remote (its credentials, CA bundle, retries):
 *  borrowed; NULL for the default settings. */
SHARD_API int shard_manifest_write_remote(const ShardManifest *m, const char *path,
                                          ShardRemote *remote, ShardError *err);

/** Sets the dataset name (copied; NULL for none). */
SHARD_API int shard_manifest_set_name(ShardManifest *m, const char *name);

/** @return the dataset name (borrowed), "" if none */
SHARD_API const char *shard_manifest_name(const ShardManifest *m);

/**
 * Appends a shard. The struct and its url are copied.
 */
SHARD_API int shard_manifest_add(ShardManifest *m, const ShardFileInfo *info);

/**
 * Sets the class names, in label order (name of class i at names[i]). Copied.
 */
SHARD_API int shard_manifest_set_classes(ShardManifest *m, const char *const *names, size_t n);

/**
 * Sets the packing options, a JSON object as text (for example
 * "{\"maxcount\": 1000}"); copied. @return SHARD_ERR_FORMAT if it is not a JSON object.
 */
SHARD_API int shard_manifest_set_options(ShardManifest *m, const char *json_object);

/**
 * Marks the manifest as part `part` of `nparts` of one pack plan of `plan_shards` shards
 * (written as libshard.part: {"index", "of", "shards"}), so a join can tell a missing or
 * repeated part. @return SHARD_ERR_INVALID unless part < nparts.
 */
SHARD_API int shard_manifest_set_part(ShardManifest *m, size_t part, size_t nparts,
                                      size_t plan_shards);

/** @return the number of shards */
SHARD_API size_t shard_manifest_count(const ShardManifest *m);

/** @return shard i (borrowed, valid until the manifest changes or is freed), NULL if out of range */
SHARD_API const ShardFileInfo *shard_manifest_shard(const ShardManifest *m, size_t i);

/** @return shard i's "dataset" as a wids manifest names it (which dataset of a mix the
 *  shard belongs to; borrowed, as shard_manifest_shard), NULL when it has none */
SHARD_API const char *shard_manifest_dataset(const ShardManifest *m, size_t i);

/** @return the number of class names */
SHARD_API size_t shard_manifest_class_count(const ShardManifest *m);

/** @return class name i (borrowed), NULL if out of range */
SHARD_API const char *shard_manifest_class(const ShardManifest *m, size_t i);

/** @return the total number of samples over all shards */
SHARD_API uint64_t shard_manifest_samples(const ShardManifest *m);

/** @return the packing options as compact JSON text (borrowed), "{}" if none */
SHARD_API const char *shard_manifest_options(const ShardManifest *m);

/**
 * Joins the manifests of the parts of one dataset (shardpack --part) into one: shards
 * are merged in url order; a url present twice, or parts whose class names or options
 * differ, are errors.
 * @param out receives the new manifest, owned by the caller
 * @param parts borrowed, n of them
 * @param err optional; filled on failure
 */
SHARD_API int shard_manifest_join(ShardManifest **out, const ShardManifest *const *parts, size_t n,
                                  ShardError *err);

/** Frees a manifest and sets *m to NULL; accepts NULL and a pointer to NULL. */
SHARD_API void shard_manifest_free(ShardManifest **m);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_MANIFEST_H */
