/*
 * When a store does not answer as hoped (retry.c): which failures are worth another try,
 * how long to wait first (exponential backoff with full jitter), a whole small response
 * fetched with retries (a listing page, a token, an index, an upload's answer), and the
 * store's reason for a refusal, for messages.
 */
#ifndef SHARD_REMOTE_RETRY_H
#define SHARD_REMOTE_RETRY_H

#include <stddef.h>

#include "base/attr.h"
#include "base/buf.h"
#include "remote/request.h"
#include "remote/xfer.h"

/* Whether a failed transfer or status is worth retrying: connection errors, cuts, stalls,
 * 408, 429 and 5xx. */
SHARD_HIDDEN int shard_retryable(ShardNetFail f, long status);

/* The retries a failure earns: the settings' retries, but at most CONNECT_RETRIES for a host
 * that refuses connections or a name that does not resolve (no server there: said within
 * seconds, not after minutes of backoff). */
SHARD_HIDDEN int shard_retry_limit(const ShardRemote *r, ShardNetFail f);

/* Sleeps before retry number attempt (0-based) of limit: exponential with full jitter, at
 * least retry_after seconds when the server asked for it. Says so first through the
 * settings' on_retry: url (shown without credentials), why it failed, the retry, the wait. */
SHARD_HIDDEN void shard_backoff(ShardRemote *r, int attempt, int limit, double retry_after,
                                const char *url, const char *why);
/* As shard_backoff for a transfer on lane (NULL: none): the wait ends early when the lane
 * is aborted (a reader closing). */
SHARD_HIDDEN void shard_backoff_on(ShardRemote *r, const ShardNetLane *lane, int attempt,
                                   int limit, double retry_after, const char *url,
                                   const char *why);

/* Builds the request to send (called again for each retry). 0, or an error with err. */
typedef int (*ShardBuildFn)(void *cookie, ShardRequest *q, char *err);

/* A whole small response: the request built by build, retried up to retries times. out
 * receives the body (NUL appended, not counted), at most max bytes; *status the final HTTP
 * status; resp (optional) the final response's headers. A status >= 300 is not an error
 * here: the caller reads the body. @return 0, or an error naming shown */
SHARD_HIDDEN int shard_request_whole(ShardRemote *r, const char *shown, ShardBuildFn build,
                                     void *cookie, ShardBuf *out, size_t max, int retries,
                                     long *status, ShardResponse *resp, char *err);

/* One page of a store's listing, built by build: its body, or an error naming shown with
 * the store's reason (404: SHARD_ERR_NOT_FOUND). */
SHARD_HIDDEN int shard_list_page(ShardRemote *r, const char *shown, ShardBuildFn build,
                                 void *cookie, ShardBuf *body, char *err);

/* A short reason from an error body (S3's <Code> and <Message>, GCS's "message"), never the
 * whole body (an S3 SignatureDoesNotMatch body echoes the request): ": reason", or "". */
SHARD_HIDDEN void shard_store_reason(const char *body, char *out, size_t cap);

#endif /* SHARD_REMOTE_RETRY_H */
