/*
 * An output's lock (lock.c): an flock on a lock file beside the output, held while it is
 * written, so that a second writer is refused, naming the first, rather than mixing its
 * files into the other's. The lock is the kernel's: a killed writer's goes with its
 * process, and the next writer takes it at once.
 */
#ifndef SHARD_SINK_LOCK_H
#define SHARD_SINK_LOCK_H

#include "base/attr.h"

typedef struct ShardSinkLock {
    int fd;     /* -1: none held */
    int alone;  /* held alone (else shared with other holders) */
    char *path;
} ShardSinkLock;

/* Takes the lock at path (made when missing), alone or shared, without waiting (a shared
 * take waits out a moment's holder alone: the last sharer removing the file). Held alone,
 * the file names its holder: pid, host, start, and note. 0; SHARD_ERR_STATE when another
 * holds it, err naming what (the output), what its holder wrote, the lock file, and hint;
 * SHARD_ERR_IO when it cannot be made. l->fd is -1 on failure. */
SHARD_HIDDEN int shard_sink_lock(ShardSinkLock *l, const char *path, int shared,
                                 const char *what, const char *note, const char *hint,
                                 char *err);
/* Lets go, removing the file when held alone or as the last of its sharers (a writer that
 * takes a lock checks that its file is still the one at the name). Accepts one not held. */
SHARD_HIDDEN void shard_sink_unlock(ShardSinkLock *l);

#endif /* SHARD_SINK_LOCK_H */
