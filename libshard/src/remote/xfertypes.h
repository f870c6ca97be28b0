/*
 * What a transfer's users (xfer.h, lane.h) and its drivers (xferdef.h) share: the handles'
 * names, what a response said, and how a transfer ended. Nothing here holds a function.
 */
#ifndef SHARD_REMOTE_XFERTYPES_H
#define SHARD_REMOTE_XFERTYPES_H

#include <stdint.h>

/* What a response said, once its headers are in. */
typedef struct ShardResponse {
    long status;           /* HTTP status, 0 when no response came */
    char etag[256];        /* strong ETag, "" when none */
    char generation[32];   /* x-goog-generation, "" when none */
    char last_modified[64];
    int64_t total;         /* the object's size from Content-Range or Content-Length, or -1 */
    int64_t range_start;   /* Content-Range's first byte, or -1 when not a 206 */
    double retry_after;    /* Retry-After in seconds, 0 when none */
    char location[4096];   /* Location (a GCS resumable upload's session), "" when none */
    int64_t persisted;     /* a 308's Range end + 1 (bytes a GCS upload holds), -1 when none */
    char link[2048];       /* Link (the Hub's next page of a listing), "" when none */
    char redirected[4096]; /* the URL that answered, when redirects were followed to it; ""
                              when none were (or one's target was too long to keep) */
} ShardResponse;

typedef struct ShardNetLane ShardNetLane;
typedef struct ShardXfer ShardXfer;

/* How a transfer ended, as the retry rules (retry.h) tell endings apart. */
typedef enum ShardNetFail {
    SHARD_NET_OK = 0,    /* it completed (the status says the rest) */
    SHARD_NET_TRANSIENT, /* cut, stalled, timed out, an unreadable reply: worth another try */
    SHARD_NET_NO_SERVER, /* the host refuses connections or its name does not resolve */
    SHARD_NET_FATAL,     /* anything else (the caller gave up, TLS refused, ...): no retry */
} ShardNetFail;

#endif /* SHARD_REMOTE_XFERTYPES_H */
