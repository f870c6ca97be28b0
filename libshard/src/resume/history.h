/*
 * An epoch's readings on the topologies it ran on (history.c): each reading's first step
 * (the rank's steps of the epoch before it), its ranks and workers, and the cut it began
 * from, so that a step is named on the topology that delivered it. A state carries it
 * (formats/order.md, section 4: ";resumes="); only a resume on another topology adds an
 * entry (on its own, the epoch goes on as though never stopped). The last
 * SHARD_HISTORY_MAX are kept: a state stays small whatever the resumes.
 */
#ifndef SHARD_RESUME_HISTORY_H
#define SHARD_RESUME_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"

#define SHARD_HISTORY_MAX 8
/* The topologies a reading may say: a state's own bounds (read/state.c). */
#define SHARD_HISTORY_WORLD_MAX (1 << 20)
#define SHARD_HISTORY_WORKERS_MAX (1 << 16)
#define SHARD_HISTORY_CONSUMERS_MAX (1ll << 24)
#define SHARD_STATE_RESUMES_TAG ";resumes="

typedef struct ShardReading {
    uint64_t step;    /* the rank's steps of the epoch delivered before it */
    int world, workers;
    char *cut;        /* the cut it began from (a line's cut), NULL: the epoch's start */
} ShardReading;

typedef struct ShardHistory {
    ShardReading v[SHARD_HISTORY_MAX];
    size_t n;
    int dropped; /* readings before v[0] were let go */
} ShardHistory;

/* Parses "STEP@WORLD.WORKERS@CUT|..." (CUT with '/' for ';', "-" for the epoch's start)
 * into h (empty first). 0, or SHARD_ERR_INVALID with msg (SHARD_ERROR_MAX bytes), or
 * SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_history_parse(ShardHistory *h, const char *text, char *msg);
/* Appends h as text to buf (size bytes, NUL-terminated); 0 or SHARD_ERR_INVALID when it
 * does not fit. */
SHARD_HIDDEN int shard_history_format(const ShardHistory *h, char *buf, size_t size);
/* Adds a reading (cut copied; NULL: the epoch's start), the oldest let go past the most
 * kept. 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_history_add(ShardHistory *h, uint64_t step, int world, int workers,
                                   const char *cut);
/* A copy of src into dst (empty first). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_history_copy(ShardHistory *dst, const ShardHistory *src);
SHARD_HIDDEN void shard_history_free(ShardHistory *h);

#endif /* SHARD_RESUME_HISTORY_H */
