/*
 * The URL switch (open.c): every reader of shards, indexes and manifests opens them here,
 * by URL, so no other file knows a scheme: "pipe:COMMAND" (the command's standard output),
 * http://, https://, gs://, s3:// (read through a ShardRemote), file:///PATH or a local path.
 * What kind of place a URL names, and the listing of a folder or a bucket's prefix, are
 * asked here too: the reading side's one local-or-remote decision.
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

/* What kind of place a URL names, as this switch reads it (shard_source_place's flags). */
#define SHARD_PLACE_LOCAL 1u   /* a local path or file:///PATH */
#define SHARD_PLACE_COMMAND 2u /* pipe:COMMAND: no siblings, no version */
#define SHARD_PLACE_REMOTE 4u  /* http(s)://, gs://, s3://: each open a round trip away */
#define SHARD_PLACE_PREFIX 8u  /* with REMOTE: every object under gs://B/P/ or s3://B/P/ */
SHARD_HIDDEN unsigned shard_source_place(const char *url);

/* The local path url names (a pointer into url: a path, or file:///PATH's), else NULL. */
SHARD_HIDDEN const char *shard_source_local_path(const char *url);

/*
 * The objects in a local folder (not hidden ones) or under a bucket's prefix (through
 * remote, borrowed; NULL: the defaults), each handed to fn (remote/objectname.h's ShardListFn)
 * in name order.
 * @return 0; 1 when url names neither (nothing listed); fn's error, or another with err
 */
SHARD_HIDDEN int shard_source_list(const char *url, ShardRemote *remote, ShardListFn fn,
                                   void *cookie, char *err);

#endif /* SHARD_SOURCE_OPEN_H */
