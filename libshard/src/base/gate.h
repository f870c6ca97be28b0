/*
 * A memory gate: bytes that threads hold together, at most a cap. A thread asks for what
 * its next piece of work will take and waits while the others hold too much; work larger
 * than the cap goes alone. The decode threads share one, so that threads x the largest
 * decode is not what memory must hold.
 */
#ifndef SHARD_BASE_GATE_H
#define SHARD_BASE_GATE_H

#include <pthread.h>
#include <stdint.h>

#include "base/attr.h"

typedef struct ShardGate {
    pthread_mutex_t lock;
    pthread_cond_t room;
    uint64_t cap, held;
    uint64_t waits; /* times a request waited: the statistics' */
} ShardGate;

SHARD_HIDDEN void shard_gate_init(ShardGate *g, uint64_t cap);
/* Waits until bytes fit beside what is held (or nothing is held), then holds them. */
SHARD_HIDDEN void shard_gate_enter(ShardGate *g, uint64_t bytes);
/* Gives back bytes held. */
SHARD_HIDDEN void shard_gate_leave(ShardGate *g, uint64_t bytes);
SHARD_HIDDEN void shard_gate_destroy(ShardGate *g);

#endif /* SHARD_BASE_GATE_H */
