/*
 * What a remote URL names (store.c parses it; gcs.c, s3.c and hf.c build its requests): its
 * store, and for the stores a bucket (the Hub's: OWNER/NAME) and a key; and the callback a
 * listing calls.
 */
#ifndef SHARD_REMOTE_OBJECTNAME_H
#define SHARD_REMOTE_OBJECTNAME_H

#include <stdint.h>

typedef enum ShardObjectKind {
    SHARD_OBJ_HTTP,
    SHARD_OBJ_GCS,
    SHARD_OBJ_S3,
    SHARD_OBJ_HF
} ShardObjectKind;

typedef struct ShardObject {
    ShardObjectKind kind;
    const char *url;  /* as given, for messages; borrowed */
    char *bucket;     /* gs://, s3://: owned */
    char *key;        /* the object's name in the bucket: owned */
    char *rev;        /* hf://: the revision named (NULL: main): owned */
} ShardObject;

/* Called with each object under a prefix (its full URL, borrowed) and its size. */
typedef int (*ShardListFn)(void *cookie, const char *url, uint64_t size);

#endif /* SHARD_REMOTE_OBJECTNAME_H */
