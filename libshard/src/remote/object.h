/*
 * Remote objects (object.c): what http://, https://, gs://, s3:// and hf:// URLs name (for
 * the buckets a bucket and a key), the request that reads one (a range of it, pinned to a
 * version), and the listing of a prefix. The conventions of each store are in gcs.c, s3.c
 * and hf.c; this is where they are told apart.
 */
#ifndef SHARD_REMOTE_OBJECT_H
#define SHARD_REMOTE_OBJECT_H

#include <stdint.h>

#include "base/attr.h"
#include "remote/objectname.h"
#include "remote/request.h"
#include "remote/xfer.h"

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

/* Until when (seconds since 1970) later requests for o may go straight to the link rs was
 * redirected to: the Hub's signed CDN links, until the expiry they state; 0 when they may
 * not (no redirect, or to a link that states no expiry; another store, whose redirects are
 * the server's to make each time). */
SHARD_HIDDEN int64_t shard_object_direct_until(const ShardObject *o, const ShardResponse *rs);

/* Every object whose name starts with the prefix url names (gs://B/P/, s3://B/P/), in name
 * order, page by page. @return 0, fn's code, or an error naming the url */
SHARD_HIDDEN int shard_object_list(ShardRemote *r, const char *url, ShardListFn fn, void *cookie,
                                   char *err);

#endif /* SHARD_REMOTE_OBJECT_H */
