/*
 * A command's standard output as a source (pipe.c): "pipe:COMMAND".
 */
#ifndef SHARD_SOURCE_PIPE_H
#define SHARD_SOURCE_PIPE_H

#include "base/attr.h"
#include "source/sourcethread.h"
#include "source/source.h"

/* Starts cmd with /bin/sh, in a process group of its own (ended whole when the source
 * closes early, when thread t, NULL: none, is aborted, or when this process dies); url names
 * the source in messages. */
SHARD_HIDDEN int shard_source_pipe(ShardSource **out, const char *url, const char *cmd,
                                   ShardSourceThread *t, char *err);

#endif /* SHARD_SOURCE_PIPE_H */
