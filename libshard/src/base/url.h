/*
 * URLs (url.c): what a URL names, decided here and nowhere else. The URL switches (the
 * sources' source/open.h, the sinks' sink/sink.c) open what a URL names; everything else
 * asks these questions of it.
 */
#ifndef SHARD_BASE_URL_H
#define SHARD_BASE_URL_H

#include <stddef.h>

#include "base/attr.h"

/* Whether url names a remote object (http, https, gs, s3). */
SHARD_HIDDEN int shard_url_is_remote(const char *url);
/* A command whose output is the object ("pipe:COMMAND"), rather than a location. */
SHARD_HIDDEN int shard_url_is_command(const char *url);
/* The local path file:///PATH and file://localhost/PATH name (a pointer into url); NULL for
 * anything else. */
SHARD_HIDDEN const char *shard_url_file_path(const char *url);
/* Whether url has a scheme ("x://"). */
SHARD_HIDDEN int shard_url_has_scheme(const char *url);
/* Whether objects beside it (its index) can be opened: a local path or a remote URL. */
SHARD_HIDDEN int shard_url_has_siblings(const char *url);
/* Whether opening url costs a request that waits on the network (a remote object): reading
 * it ahead, or several at once, pays for itself. */
SHARD_HIDDEN int shard_url_costly(const char *url);
/* Whether it stands on its own (a scheme, a command, an absolute path), rather than
 * relative to the location of what names it. */
SHARD_HIDDEN int shard_url_is_absolute(const char *url);
/* url resolved against the folder of base (a manifest's location): malloc'd, NULL when
 * out of memory. */
SHARD_HIDDEN char *shard_url_resolve(const char *base, const char *url);

/* url as it may be shown in a log: without a user and password, and without its query
 * (a signed URL's signature), into out (cap bytes, cut to fit). */
SHARD_HIDDEN void shard_url_shown(const char *url, char *out, size_t cap);

/* Every URL in text (NUL-terminated), in place, as it may leave the library: without user
 * and password, its query (a signed URL's signature, a token) replaced by "?..." (never
 * longer than it was). */
SHARD_HIDDEN void shard_url_redact_text(char *text);

/* What names the same object whoever signs for it: url without a user and password and
 * without the query parameters that sign or authorize a request (X-Amz-*, X-Goog-*,
 * Signature, Expires, GoogleAccessId, Key-Pair-Id, Policy, AWSAccessKeyId, and a SAS's sig,
 * se, st, sp, sv, sr, ss, srt, spr, skoid...), the others (a versionId, a generation) kept
 * in order. malloc'd, NULL when out of memory. */
SHARD_HIDDEN char *shard_url_unsigned(const char *url);

/* Whether url stands for every shard under a prefix (gs://B/P/, s3://B/P/: ends in '/'). */
SHARD_HIDDEN int shard_url_is_prefix(const char *url);

#endif /* SHARD_BASE_URL_H */
