/*
 * URLs: what a URL names, and the source (source.h) that opens it. Every reader of shards,
 * indexes and manifests opens them here, so no other file knows a scheme.
 */
#ifndef SHARD_URL_H
#define SHARD_URL_H

#include "base/attr.h"
#include "base/buf.h"
#include "shard/manifest.h"
#include "source/source.h"

/*
 * Opens url: "pipe:COMMAND" (the command's standard output), http://, https://, gs://,
 * s3:// (read through remote; NULL: a ShardRemote with the default settings), or a local
 * path.
 * @param out receives a source with one reference, owned by the caller (shard_source_put)
 * @param err SHARD_ERROR_MAX bytes: what failed, naming the URL (SHARD_ERR_NOT_FOUND for a
 *        missing object)
 */
SHARD_HIDDEN int shard_source_open(ShardSource **out, const char *url, ShardRemote *remote,
                                   int flags, char *err);

/* Called with each block of an object's stream, in order: 0 to go on, or an error code
 * with err (SHARD_ERROR_MAX bytes) saying what. */
typedef int (*ShardBlockFn)(void *cookie, const void *block, size_t n, char *err);

/*
 * Opens url and hands its stream to fn block by block, to the end (where a pipe's command
 * is checked). @return 0, fn's error, or the source's with err naming the URL
 */
SHARD_HIDDEN int shard_source_each(const char *url, ShardRemote *remote, ShardBlockFn fn,
                                   void *cookie, char *err);

/*
 * Reads a whole object (an index, a manifest) into out (NUL-terminated, the NUL not
 * counted in out->len), refusing objects over max bytes.
 * @return 0; SHARD_ERR_NOT_FOUND when it does not exist; another code with err naming the URL
 */
SHARD_HIDDEN int shard_source_slurp(const char *url, ShardRemote *remote, ShardBuf *out,
                                    size_t max, char *err);

/* Whether url names a remote object (http, https, gs, s3). */
SHARD_HIDDEN int shard_url_is_remote(const char *url);
/* A command whose output is the object ("pipe:COMMAND"), rather than a location. */
SHARD_HIDDEN int shard_url_is_command(const char *url);
/* Whether objects beside it (its index) can be opened: a local path or a remote URL. */
SHARD_HIDDEN int shard_url_has_siblings(const char *url);
/* Whether it stands on its own (a scheme, a command, an absolute path), rather than
 * relative to the location of what names it. */
SHARD_HIDDEN int shard_url_is_absolute(const char *url);
/* url resolved against the folder of base (a manifest's location): malloc'd, NULL when
 * out of memory. */
SHARD_HIDDEN char *shard_url_resolve(const char *base, const char *url);

/* shard_manifest_read (shard/manifest.h), reading through remote. */
SHARD_HIDDEN int shard_manifest_read_remote(ShardManifest **out, const char *path,
                                            ShardRemote *remote, ShardError *err);

/* Whether url stands for every shard under a prefix (gs://B/P/, s3://B/P/: ends in '/'). */
SHARD_HIDDEN int shard_url_is_prefix(const char *url);

/* Called with the URL (borrowed) of each shard under a prefix, in name order. */
typedef int (*ShardUrlFn)(void *cookie, const char *url);

/*
 * Lists the shards (.tar, .tar.gz, .tgz, .tar.zst) under a prefix: GCS by prefix, S3 with
 * ListObjectsV2, page by page; plain HTTP has no listing (an error that says so).
 */
SHARD_HIDDEN int shard_url_list(const char *url, ShardRemote *remote, ShardUrlFn fn,
                                void *cookie, char *err);

/* The ShardRemote a remote source reads through (borrowed), NULL for other sources: what
 * sits beside it (its index) is read through the same. */
SHARD_HIDDEN ShardRemote *shard_source_remote_of(const ShardSource *s);

/* Runs a remote source's transfers on lane (net.h), driven by the one thread that reads it,
 * from its next request on; other sources are left as they are. */
SHARD_HIDDEN void shard_source_set_lane(ShardSource *s, ShardNetLane *lane);

#endif /* SHARD_URL_H */
