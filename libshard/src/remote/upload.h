/*
 * Writing objects into the stores (upload.c): the requests under a bucket sink
 * (sink/objectsink.c), its only caller. An object goes up in one request, or part by part as
 * its bytes come (a GCS resumable session, an S3 multipart upload), its size known only at
 * the last part; either way it appears only once whole.
 */
#ifndef SHARD_REMOTE_UPLOAD_H
#define SHARD_REMOTE_UPLOAD_H

#include <stddef.h>

#include "base/attr.h"
#include "shard/remote.h"

typedef struct ShardUpload ShardUpload;

/* 0 when url names an object that can be written (gs:// or s3://), else an error naming it
 * (plain HTTP has no upload). */
SHARD_HIDDEN int shard_object_writable(const char *url, char *err);

/* How an object goes up in parts through r: the part size (r's upload_part within the
 * store's bounds: at most 5 GiB, GCS a multiple of 256 KiB) and the most parts the store
 * takes (S3 10,000; 0: no limit). 0, or an error naming url. */
SHARD_HIDDEN int shard_upload_shape(ShardRemote *r, const char *url, size_t *part,
                                    unsigned *max_parts, char *err);

/* n bytes put as the object url names, in one request through r. */
SHARD_HIDDEN int shard_object_put(ShardRemote *r, const char *url, const void *p, size_t n, char *err);

/* Starts an upload in parts of the object url names. r is borrowed and must outlive *out.
 * @param out receives the upload, owned by the caller (shard_upload_finish or _abort) */
SHARD_HIDDEN int shard_upload_begin(ShardUpload **out, ShardRemote *r, const char *url, char *err);

/* Sends the next n bytes. Every part but the last: GCS wants a multiple of 256 KiB, S3 at
 * least 5 MiB. last: these are the object's final bytes (GCS learns the size from them).
 * A cut or refused part is sent again (GCS: from what the session says it holds). */
SHARD_HIDDEN int shard_upload_part(ShardUpload *u, const void *p, size_t n, int last, char *err);

/* Completes the upload after its last part (S3: the part list) and frees u. */
SHARD_HIDDEN int shard_upload_finish(ShardUpload *u, char *err);

/* Drops an upload not finished (S3: aborted, so no parts are kept and paid for; GCS: the
 * session cancelled) and frees u; best effort. Accepts NULL. */
SHARD_HIDDEN void shard_upload_abort(ShardUpload *u);

/* Removes the object url names; one that does not exist is no error. */
SHARD_HIDDEN int shard_object_delete(ShardRemote *r, const char *url, char *err);

#endif /* SHARD_REMOTE_UPLOAD_H */
