/*
 * What the sources one thread reads share (sourcethread.c): the network lane its remote
 * sources run their transfers on, the pipe: command it reads now, and whether it was told
 * to stop. The URL switch (open.c) and the pipe source (pipe.c) both use it.
 */
#ifndef SHARD_SOURCE_SOURCETHREAD_H
#define SHARD_SOURCE_SOURCETHREAD_H

#include "base/attr.h"
#include "remote/lane.h"

/* A remote source opened for a thread runs its transfers on the thread's own network lane,
 * so that its bytes come off the socket on the core that parses them; the sources must
 * then be read on that thread only. */
typedef struct ShardSourceThread ShardSourceThread;

/* A thread's context, or NULL when out of memory; freed by the thread that used it, after
 * its sources (accepts NULL). */
SHARD_HIDDEN ShardSourceThread *shard_source_thread_new(void);
SHARD_HIDDEN void shard_source_thread_free(ShardSourceThread **t);

/* From any thread: the reads of t's sources end soon, as errors ("stopped"): a remote
 * transfer or its backoff at once, a pipe: command's output as its process group is sent
 * SIGTERM. For a reader that closes while its threads wait on the network or a command. */
SHARD_HIDDEN void shard_source_thread_abort(ShardSourceThread *t);
/* For pipe.c: the process group of the command a source of t (NULL: none) reads now, or 0
 * once it ended; whether t was aborted already (the caller then ends the command). */
SHARD_HIDDEN int shard_source_thread_child(ShardSourceThread *t, int group);
/* The lane of t's remote sources, made when first asked for; NULL (the network thread)
 * for t NULL, or out of memory. */
SHARD_HIDDEN ShardNetLane *shard_source_thread_lane(ShardSourceThread *t);

#endif /* SHARD_SOURCE_SOURCETHREAD_H */
