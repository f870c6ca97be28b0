/*
 * One HTTP request as a store builds it (request.c), before a transfer (xfer.h) sends it.
 */
#ifndef SHARD_REMOTE_REQUEST_H
#define SHARD_REMOTE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "base/buf.h"

/* One HTTP request, as the scheme (gcs.c, s3.c, or plain HTTP) builds it. Every pointer is
 * owned by the request (shard_request_clear frees them); user and password are secrets. */
struct curl_slist; /* libcurl's header list: only remote/ makes and sends one */

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
/* Appends a header ("Name: value"); 0, SHARD_ERR_INVALID (too long) or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_request_header(ShardRequest *q, const char *fmt, ...) SHARD_PRINTF(2, 3);

/* Percent-encodes s into out (appended, NUL-terminated): unreserved characters stay, and
 * '/' too when keep_slash. 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_url_encode(ShardBuf *out, const char *s, int keep_slash);

#endif /* SHARD_REMOTE_REQUEST_H */
