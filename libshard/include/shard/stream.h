/*
 * libshard — the raw bytes of anything libshard reads, in order: a local path, file://,
 * pipe:COMMAND, http://, https://, gs:// and s3://, through the same sources as the shard
 * readers (the remote's retries, resumes, credentials and cache). For a caller that parses
 * the bytes itself (a Python tarfile, a user's own format).
 *
 * A ShardStream is used by one thread at a time.
 */
#ifndef SHARD_STREAM_H
#define SHARD_STREAM_H

#include "common.h"
#include "remote.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ShardStream ShardStream;

/**
 * Opens url for reading from its start.
 * @param out receives the stream, owned by the caller (shard_stream_free)
 * @param url borrowed
 * @param remote what remote URLs are read through (borrowed; the stream keeps a reference);
 *        NULL: one with the default settings
 * @param err optional; what failed, naming the URL
 * @return 0; SHARD_ERR_NOT_FOUND when it does not exist; another code
 */
SHARD_API int shard_stream_open(ShardStream **out, const char *url, ShardRemote *remote,
                                ShardError *err);

/**
 * Copies the stream's next bytes, at most n, into buf.
 * @return the bytes copied (fewer than n only at the end or where the source hands out
 *         less at once), 0 at the end (a pipe's command having exited 0), or a negative
 *         code with shard_stream_error saying what, where
 */
SHARD_API int64_t shard_stream_read(ShardStream *s, void *buf, size_t n);

/** The object's size in bytes, -1 when it is not known (a pipe). */
SHARD_API int64_t shard_stream_size(const ShardStream *s);

/** Bytes read so far. */
SHARD_API uint64_t shard_stream_tell(const ShardStream *s);

/** What the last failure was, naming the URL and offset; "" when none. Valid until the
 *  next call on s. */
SHARD_API const char *shard_stream_error(const ShardStream *s);

/** Frees the stream (a pipe's command is ended); *s becomes NULL. Accepts NULL. */
SHARD_API void shard_stream_free(ShardStream **s);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_STREAM_H */
