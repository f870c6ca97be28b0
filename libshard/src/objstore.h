/*
 * Remote objects: what http://, https://, gs:// and s3:// URLs name, the request that reads
 * one (a range of it, pinned to a version), and the listing of a prefix. The conventions of
 * each store are in gcs.c and s3.c; this is where the scheme is switched on.
 */
#ifndef SHARD_OBJSTORE_H
#define SHARD_OBJSTORE_H

#include "net.h"

typedef enum ShardObjectKind { SHARD_OBJ_HTTP, SHARD_OBJ_GCS, SHARD_OBJ_S3 } ShardObjectKind;

typedef struct ShardObject {
    ShardObjectKind kind;
    const char *url;  /* as given, for messages; borrowed */
    char *bucket;     /* gs://, s3://: owned */
    char *key;        /* the object's name in the bucket: owned */
} ShardObject;

/* Parses url into o (url borrowed). @return 0, SHARD_ERR_INVALID naming the url */
SHARD_HIDDEN int shard_object_parse(ShardObject *o, const char *url, char *err);
SHARD_HIDDEN void shard_object_clear(ShardObject *o);

/* The request reading o (without its range), pinned to version pin when not NULL: the GCS
 * generation in the URL, or for HTTP and S3 an ETag sent as If-Range with ranges. */
SHARD_HIDDEN int shard_object_request(ShardRemote *r, const ShardObject *o, const char *pin,
                                      ShardRequest *q, char *err);

/* The version a response names for o (the GCS generation, else the ETag, else Last-Modified),
 * "" when none. */
SHARD_HIDDEN const char *shard_object_version(const ShardObject *o, const ShardResponse *rs);

/* A short reason from an error body (S3's <Code>, GCS's "message"), never the whole body
 * (an S3 SignatureDoesNotMatch body echoes the request). */
SHARD_HIDDEN void shard_object_reason(const char *body, char *out, size_t cap);

/* Called with each object under a prefix (its full URL, borrowed) and its size. */
typedef int (*ShardListFn)(void *cookie, const char *url, uint64_t size);

/* Every object whose name starts with the prefix url names (gs://B/P/, s3://B/P/), in name
 * order, page by page. @return 0, fn's code, or an error naming the url */
SHARD_HIDDEN int shard_object_list(ShardRemote *r, const char *url, ShardListFn fn, void *cookie,
                                   char *err);

/* One page of a listing, built by build: its body, or an error naming the prefix with the
 * store's reason (404: SHARD_ERR_NOT_FOUND). */
SHARD_HIDDEN int shard_object_list_page(ShardRemote *r, const ShardObject *prefix,
                                        ShardBuildFn build, void *cookie, ShardBuf *body,
                                        char *err);

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

#endif /* SHARD_OBJSTORE_H */
