/*
 * Google Cloud Storage's conventions (gcs.c): its JSON API's requests (reads, writes,
 * listings), and credentials: the emulator, an access token, a service-account key (an
 * RS256 JWT exchanged for a token) or the metadata server, refreshed before they expire.
 */
#ifndef SHARD_REMOTE_GCS_H
#define SHARD_REMOTE_GCS_H

#include "base/attr.h"
#include "remote/objectname.h"
#include "remote/remotedef.h"
#include "remote/request.h"

/* The request reading o, pinned to generation when not NULL. */
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

#endif /* SHARD_REMOTE_GCS_H */
