/*
 * The URL switch (open.c): every reader of shards, indexes and manifests opens them here,
 * by URL, so no other file knows a scheme: "pipe:COMMAND" (the command's standard output),
 * http://, https://, gs://, s3:// (read through a ShardRemote), file:///PATH or a local path,
 * as the URL's store (remote/store.h) says its bytes travel.
 */
#ifndef SHARD_SOURCE_OPEN_H
#define SHARD_SOURCE_OPEN_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "base/buf.h"
#include "remote/objectname.h"
#include "shard/remote.h"
#include "source/source.h"
#include "source/sourcethread.h"

/*
 * Opens url. remote: what remote objects are read through (borrowed; NULL: a ShardRemote
 * with the default settings, made for the source); the source keeps a reference, and what
 * sits beside it opens through the same (ShardSource.remote).
 * @param out receives a source with one reference, owned by the caller (shard_source_put)
 * @param flags SHARD_SOURCE_* (source.h)
 * @param err SHARD_ERROR_MAX bytes: what failed, naming the URL (SHARD_ERR_NOT_FOUND for a
 *        missing object)
 */
SHARD_HIDDEN int shard_source_open(ShardSource **out, const char *url, ShardRemote *remote,
                                   int flags, char *err);

/* shard_source_open for a source the thread t reads (NULL: any thread). */
SHARD_HIDDEN int shard_source_open_on(ShardSource **out, const char *url, ShardRemote *remote,
                                      int flags, ShardSourceThread *t, char *err);

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

#endif /* SHARD_SOURCE_OPEN_H */
