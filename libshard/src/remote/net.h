/*
 * The network under remote sources: one libcurl multi handle per ShardRemote, driven by one
 * thread, carrying every transfer of the sources that share it (connections are reused and
 * shards download side by side). A transfer (ShardXfer) is one HTTP request whose body is
 * handed to its reader through two buffers: the network thread fills one while the reader
 * consumes the other, and a full buffer pauses the transfer (memory stays bounded by the
 * buffer setting, whatever the object's size).
 *
 * A lane (ShardNetLane) is a multi handle of its own, driven by the one thread that reads
 * its transfers, inside their reads: a fetch stream's shards, the one it reads and the one
 * opened ahead. The bytes then come off the socket on the core that parses them, instead
 * of being handed from the network thread's core to the reader's (on a loaded machine that
 * handoff, not the network, was what bounded a remote read).
 *
 * Retries, resumes and object versions are the source's business (source_remote.c); a
 * transfer is one attempt.
 */
#ifndef SHARD_NET_H
#define SHARD_NET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include <curl/curl.h>

#include "base/attr.h"
#include "base/buf.h"
#include "shard/remote.h"

typedef struct ShardXfer ShardXfer;
typedef struct ShardGcsAuth ShardGcsAuth;
typedef struct ShardS3Auth ShardS3Auth;

/* One HTTP request, as the scheme (gcs.c, s3.c, or plain HTTP) builds it. Every pointer is
 * owned by the request (shard_request_clear frees them); user and password are secrets. */
typedef struct ShardRequest {
    char *url;                  /* what is requested (may carry a query, never a secret) */
    struct curl_slist *headers; /* Authorization and the like: never shown */
    char *sigv4;                /* CURLOPT_AWS_SIGV4's provider string, or NULL */
    char *user, *password;      /* SigV4's key id and secret */
    char *post;                 /* a form body to POST, or NULL for GET */
    int head;                   /* no body wanted (HEAD) */
    int ranged;                 /* send Range: bytes=from-to */
    uint64_t from, to;          /* to is inclusive; UINT64_MAX for the end */
    char *if_range;             /* the version the range must come from, or NULL */
    const char *method;         /* "PUT", "POST", "DELETE" (a literal), or NULL: GET / post */
    const void *body;           /* bytes to send (an upload), borrowed until the transfer ends */
    size_t body_len;            /* with body; a body of 0 bytes is sent when method is set */
} ShardRequest;

SHARD_HIDDEN void shard_request_clear(ShardRequest *q);
/* Frees a credential (a secret key, a token) after overwriting it. Accepts NULL. */
SHARD_HIDDEN void shard_secret_free(char *s);
/* Appends a header ("Name: value"); 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_request_header(ShardRequest *q, const char *fmt, ...) SHARD_PRINTF(2, 3);

struct ShardRemote {
    atomic_int refs;
    ShardRemoteSettings s;      /* strings below are owned copies */
    pthread_mutex_t mu;         /* the transfer lists and their buffers' state */
    pthread_t thread;
    int running, stopping;
    CURLM *multi;
    ShardXfer *incoming;        /* transfers to add (under mu) */
    ShardXfer *active;          /* transfers on the multi handle (the network thread's) */
    struct ShardBlockPool *spare; /* buffers of finished transfers, for the next: no page
                                     faults for each new shard */
    struct {
        atomic_uint_least64_t bytes, requests, retries, resumes, range_ignored, replaced,
            wait_ns, cache_hits, cache_misses, cache_bytes;
    } st;
    atomic_uint_least64_t seq;  /* jitter */
    pthread_mutex_t auth_mu;    /* credentials, made when first needed */
    ShardGcsAuth *gcs;
    ShardS3Auth *s3;
};

/* A reference on r for a source; shard_remote_put drops it. */
static inline ShardRemote *shard_remote_ref(ShardRemote *r)
{
    atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    return r;
}
SHARD_HIDDEN void shard_remote_put(ShardRemote *r);

static inline void shard_stat_add(atomic_uint_least64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* What a response said, once its headers are in. */
typedef struct ShardResponse {
    long status;           /* HTTP status, 0 when no response came */
    char etag[256];        /* strong ETag, "" when none */
    char generation[32];   /* x-goog-generation, "" when none */
    char last_modified[64];
    int64_t total;         /* the object's size from Content-Range or Content-Length, or -1 */
    int64_t range_start;   /* Content-Range's first byte, or -1 when not a 206 */
    double retry_after;    /* Retry-After in seconds, 0 when none */
    char location[2048];   /* Location (a GCS resumable upload's session), "" when none */
    int64_t persisted;     /* a 308's Range end + 1 (bytes a GCS upload holds), -1 when none */
} ShardResponse;

/* Starts request q (moved into the transfer: q is left cleared) on r's network thread.
 * Every transfer must end with shard_xfer_free. */
SHARD_HIDDEN int shard_xfer_start(ShardRemote *r, ShardRequest *q, ShardXfer **out, char *err);

typedef struct ShardNetLane ShardNetLane;
/* A lane with one reference, or NULL when out of memory. Its transfers are started, read and
 * freed on one thread at a time: the caller's. */
SHARD_HIDDEN ShardNetLane *shard_lane_new(void);
SHARD_HIDDEN ShardNetLane *shard_lane_ref(ShardNetLane *l);
/* Drops a reference (each transfer on the lane holds one). Accepts NULL. */
SHARD_HIDDEN void shard_lane_put(ShardNetLane *l);
/* shard_xfer_start on lane (NULL: r's network thread); r still gives the settings and
 * counts the bytes. The request goes out before this returns. */
SHARD_HIDDEN int shard_xfer_start_on(ShardRemote *r, ShardNetLane *lane, ShardRequest *q,
                                     ShardXfer **out, char *err);

/* Waits for the response's headers (or the end of the transfer): the response, or NULL when
 * the transfer ended without one (shard_xfer_error says why). */
SHARD_HIDDEN const ShardResponse *shard_xfer_head(ShardXfer *x);

/* The next bytes of the body: n > 0 with *block valid until the next call; 0 when the body
 * ended cleanly; -1 when the transfer failed (shard_xfer_error). Only for 2xx responses:
 * other bodies are kept for messages (shard_xfer_body). */
SHARD_HIDDEN ssize_t shard_xfer_read(ShardXfer *x, const void **block);

/* After a failure: libcurl's code and words ("" / CURLE_OK when the transfer completed). */
SHARD_HIDDEN CURLcode shard_xfer_error(ShardXfer *x, const char **why);

/* The start of a non-2xx body (an S3 or GCS error document), NUL-terminated. */
SHARD_HIDDEN const char *shard_xfer_body(ShardXfer *x);

/* Stops the transfer if it still runs and frees it. Accepts NULL. */
SHARD_HIDDEN void shard_xfer_free(ShardXfer **x);

/* Whether a failed transfer or status is worth retrying: connection errors, cuts, stalls,
 * 408, 429 and 5xx. */
SHARD_HIDDEN int shard_net_retryable(CURLcode cc, long status);

/* Sleeps before retry number attempt (0-based): exponential with full jitter, at least
 * retry_after seconds when the server asked for it. */
SHARD_HIDDEN void shard_net_backoff(ShardRemote *r, int attempt, double retry_after);

/* A whole small response (a listing page, a token, an index, an upload's answer): the
 * request built by build (called again for each retry), retried up to retries times. out
 * receives the body (NUL appended, not counted); *status the final HTTP status; resp
 * (optional) the final response's headers. A status >= 300 is not an error
 * here: the caller reads the body. @return 0, or an error naming shown */
typedef int (*ShardBuildFn)(void *cookie, ShardRequest *q, char *err);
SHARD_HIDDEN int shard_net_fetch(ShardRemote *r, const char *shown, ShardBuildFn build,
                                 void *cookie, ShardBuf *out, size_t max, int retries,
                                 long *status, ShardResponse *resp, char *err);

/* A short reason from an error body (S3's <Code>, GCS's "message"), never the whole body
 * (an S3 SignatureDoesNotMatch body echoes the request): ": reason", or "". */
SHARD_HIDDEN void shard_net_reason(const char *body, char *out, size_t cap);

/* One page of a store's listing, built by build: its body, or an error naming shown with
 * the store's reason (404: SHARD_ERR_NOT_FOUND). */
SHARD_HIDDEN int shard_net_list_page(ShardRemote *r, const char *shown, ShardBuildFn build,
                                     void *cookie, ShardBuf *body, char *err);

/* Percent-encodes s into out (appended): unreserved characters stay, and '/' too when
 * keep_slash. 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_url_encode(ShardBuf *out, const char *s, int keep_slash);

/* Stops the network thread (no transfer is left: each source freed its own). */
SHARD_HIDDEN void shard_net_stop(ShardRemote *r);

/* Sets up the transfer buffers kept for reuse, when the ShardRemote is made: 0 or
 * SHARD_ERR_NOMEM. Frees them when it goes. */
SHARD_HIDDEN int shard_net_buffers_init(ShardRemote *r);
SHARD_HIDDEN void shard_net_buffers_free(ShardRemote *r);

/* A ShardRemote for a caller that gave none: the defaults. NULL when out of memory. */
SHARD_HIDDEN ShardRemote *shard_remote_default(char *err);

#endif /* SHARD_NET_H */
