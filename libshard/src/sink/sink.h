/*
 * Sinks: where written bytes go, the counterpart of sources (source/source.h). Everything
 * that writes a shard, an index, a manifest or a cached copy writes through this interface,
 * so a new kind of storage plugs in here as one more implementation.
 *
 * A sink is opened on the URL of the object it makes and is written in order; commit makes
 * the object appear whole, and only then; abort leaves nothing behind. Implementations:
 *   local files (filesink.c)   a hidden temporary name in the final folder, fsynced, renamed
 *                          into place, the folder fsynced; writeback started as bytes come
 *   gs://, s3:// (objectsink.c) the bytes go up as they come, in parts of the remote's
 *                          upload_part (a GCS resumable session, an S3 multipart upload),
 *                          or in one request when the object fits in one part; memory is
 *                          one part, nothing is staged on disk
 * Plain HTTP has no upload: refused, naming the URL. sink.c does what every sink shares:
 * buffering, the MD5 and SHA-256 of the bytes (each on a hasher thread of its own, hashing
 * one buffer while the caller fills the other), the count, and the URL switch.
 *
 * A sink is used by one thread at a time. Errors go into the caller's message buffer
 * (SHARD_ERROR_MAX bytes) and name the URL, with the offset where there is one.
 */
#ifndef SHARD_SINK_SINK_H
#define SHARD_SINK_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "base/keyset.h"
#include "shard/remote.h"
#include "sink/lock.h"

typedef struct ShardSink ShardSink;

typedef struct ShardSinkSettings {
    int sync;            /* local files: fsynced before the rename, and their folder after */
    int md5, sha256;     /* compute that digest of the bytes */
    ShardRemote *remote; /* gs://, s3://: borrowed (the sink keeps a reference); NULL: one
                            with the default settings */
} ShardSinkSettings;

/* 0 when url names something a sink can write (a path, file://, gs://, s3://), else an
 * error naming it. */
SHARD_HIDDEN int shard_sink_check(const char *url, char *err);

/* Opens a sink on url; s NULL: sync, no digests, the default remote.
 * @param out receives the sink, owned by the caller (shard_sink_commit or shard_sink_abort) */
SHARD_HIDDEN int shard_sink_open(ShardSink **out, const char *url, const ShardSinkSettings *s,
                                 char *err);
/* Appends n bytes. On an error the sink is still the caller's to abort. */
SHARD_HIDDEN int shard_sink_write(ShardSink *k, const void *p, size_t n, char *err);
/* The bytes written so far. */
SHARD_HIDDEN uint64_t shard_sink_size(const ShardSink *k);
/* Makes the object appear whole and frees the sink (on an error too, leaving nothing
 * behind); *k becomes NULL. Hex digests go to md5 (33 bytes) and sha256 (65 bytes), ""
 * for one not asked for; either may be NULL. */
SHARD_HIDDEN int shard_sink_commit(ShardSink **k, char *md5, char *sha256, char *err);
/* Drops what was written (a temporary file removed, an upload aborted) and frees the sink;
 * *k becomes NULL. Accepts NULL and *k NULL. */
SHARD_HIDDEN void shard_sink_abort(ShardSink **k);

/* n bytes at p as the object url names, whole or not at all: open, write, commit. */
SHARD_HIDDEN int shard_sink_put(const char *url, const void *p, size_t n,
                                const ShardSinkSettings *s, char *err);
/* Removes the object url names, through its store (remote/store.h: remote borrowed, NULL
 * for the defaults); one that does not exist is no error. */
SHARD_HIDDEN int shard_sink_remove(const char *url, ShardRemote *remote, char *err);
/* An output's lock (sink/lock.h's shard_sink_lock) taken at url when url is in a folder;
 * in a bucket nothing is taken (no lock file can be held there: a pack's record tells its
 * runs apart), and l stays one not held. */
SHARD_HIDDEN int shard_sink_lock_output(ShardSinkLock *l, const char *url, int shared,
                                        const char *what, const char *note, const char *hint,
                                        char *err);
/* Removes the temporaries killed writers left in the folder dir for the final names in
 * names (base names; NULL: every name). A temporary a live writer holds is left alone. A
 * bucket has none (an upload never completed is no object): nothing is done there. */
SHARD_HIDDEN void shard_sink_sweep(const char *dir, const ShardKeySet *names);

#endif /* SHARD_SINK_SINK_H */
