/*
 * Remote objects as the stores' conventions see them: what gs:// and s3:// URLs name (a
 * bucket and a key), and each store's requests, listings and credentials (gcs.c, s3.c).
 * objstore.h switches between them by scheme.
 */
#ifndef SHARD_STORE_H
#define SHARD_STORE_H

#include "base/attr.h"
#include "base/buf.h"
#include "remote/net.h"

typedef enum ShardObjectKind { SHARD_OBJ_HTTP, SHARD_OBJ_GCS, SHARD_OBJ_S3 } ShardObjectKind;

typedef struct ShardObject {
    ShardObjectKind kind;
    const char *url;  /* as given, for messages; borrowed */
    char *bucket;     /* gs://, s3://: owned */
    char *key;        /* the object's name in the bucket: owned */
} ShardObject;

/* Called with each object under a prefix (its full URL, borrowed) and its size. */
typedef int (*ShardListFn)(void *cookie, const char *url, uint64_t size);

/* gcs.c */
SHARD_HIDDEN int shard_gcs_request(ShardRemote *r, const ShardObject *o, const char *generation,
                                   ShardRequest *q, char *err);
/* A request that writes: what "media" (a whole object in one request), "resumable" (the
 * start of a resumable upload) or "delete", for o; or with session set, a request on that
 * resumable upload's session URI. Method and body are the caller's. */
SHARD_HIDDEN int shard_gcs_write_request(ShardRemote *r, const ShardObject *o, const char *what,
                                         const char *session, ShardRequest *q, char *err);
SHARD_HIDDEN int shard_gcs_list(ShardRemote *r, const ShardObject *prefix, ShardListFn fn,
                                void *cookie, char *err);
SHARD_HIDDEN void shard_gcs_auth_free(ShardGcsAuth *a);
/* One page of a GCS listing (JSON, body NUL-terminated): each object to fn as
 * gs://BUCKET/NAME; *next receives the page token (malloc'd) or NULL at the last page. */
SHARD_HIDDEN int shard_gcs_parse_page(const char *body, const ShardObject *prefix,
                                      ShardListFn fn, void *cookie, char **next, char *err);
/* An OAuth2 token reply (JSON, NUL-terminated): the access token (malloc'd) and its
 * lifetime in seconds (3600 when the reply gives none). */
SHARD_HIDDEN int shard_gcs_parse_token(const char *body, const char *where, char **token,
                                       double *life, char *err);

/* s3.c */
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

#endif /* SHARD_STORE_H */
