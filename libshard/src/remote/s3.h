/*
 * S3's conventions (s3.c): SigV4-signed requests (virtual-hosted style on AWS, path style on
 * S3-compatible endpoints), ListObjectsV2, and credentials from the environment or a shared
 * credentials file.
 */
#ifndef SHARD_REMOTE_S3_H
#define SHARD_REMOTE_S3_H

#include "base/attr.h"
#include "base/buf.h"
#include "remote/objectname.h"
#include "remote/remotedef.h"
#include "remote/request.h"

/* The signed request reading o. */
SHARD_HIDDEN int shard_s3_request(ShardRemote *r, const ShardObject *o, ShardRequest *q,
                                  char *err);
/* A signed request on o with a query (sorted, its values encoded: SigV4 signs it as given),
 * for the multipart upload's steps. Method and body are the caller's. */
SHARD_HIDDEN int shard_s3_request_query(ShardRemote *r, const ShardObject *o, const char *query,
                                        ShardRequest *q, char *err);
SHARD_HIDDEN int shard_s3_list(ShardRemote *r, const ShardObject *prefix, ShardListFn fn,
                               void *cookie, char *err);
SHARD_HIDDEN void shard_s3_auth_free(ShardS3Auth *a);
/* One page of an S3 ListObjectsV2 reply (XML, body NUL-terminated): each object to fn as
 * s3://BUCKET/KEY; *token receives the continuation token when the listing goes on (its
 * data NUL-terminated), else its len is 0. */
SHARD_HIDDEN int shard_s3_parse_page(const char *body, const ShardObject *prefix, ShardListFn fn,
                                     void *cookie, ShardBuf *token, char *err);

#endif /* SHARD_REMOTE_S3_H */
