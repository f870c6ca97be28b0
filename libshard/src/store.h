/*
 * Remote objects as the stores' conventions see them: what gs:// and s3:// URLs name (a
 * bucket and a key), and each store's requests, listings and credentials (gcs.c, s3.c).
 * objstore.h switches between them by scheme.
 */
#ifndef SHARD_STORE_H
#define SHARD_STORE_H

#include "net.h"

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
SHARD_HIDDEN int shard_gcs_list(ShardRemote *r, const ShardObject *prefix, ShardListFn fn,
                                void *cookie, char *err);
SHARD_HIDDEN void shard_gcs_auth_free(ShardGcsAuth *a);

/* s3.c */
SHARD_HIDDEN int shard_s3_request(ShardRemote *r, const ShardObject *o, ShardRequest *q,
                                  char *err);
SHARD_HIDDEN int shard_s3_list(ShardRemote *r, const ShardObject *prefix, ShardListFn fn,
                               void *cookie, char *err);
SHARD_HIDDEN void shard_s3_auth_free(ShardS3Auth *a);

#endif /* SHARD_STORE_H */
