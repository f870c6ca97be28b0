/*
 * Writing objects into the stores (upload.c): packing into gs:// and s3://.
 */
#ifndef SHARD_REMOTE_UPLOAD_H
#define SHARD_REMOTE_UPLOAD_H

#include "base/attr.h"

/* The local file at path put as the object url names (gs:// or s3://), through r: in one
 * request up to r's upload_part bytes, else in parts (GCS resumable, S3 multipart). The
 * object appears only once whole. @return 0, or an error naming the URL (or the file) */
SHARD_HIDDEN int shard_object_upload(ShardRemote *r, const char *url, const char *path, char *err);

/* Removes the object url names; one that does not exist is no error. */
SHARD_HIDDEN int shard_object_delete(ShardRemote *r, const char *url, char *err);

#endif /* SHARD_REMOTE_UPLOAD_H */
