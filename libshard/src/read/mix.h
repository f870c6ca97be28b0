/*
 * Weighted mixing of several sources into one epoch (mix.c), planned for the reader
 * (streamreader.c). Not installed.
 */
#ifndef SHARD_READ_MIX_H
#define SHARD_READ_MIX_H

#include "base/attr.h"
#include "read/epochplan.h"

typedef struct ShardMixSource {
    uint32_t lo, n;    /* its shards: [lo, lo + n) of the reader's list */
    double weight;
    uint64_t size;     /* samples in its shards */
    uint64_t quota;    /* its samples in each epoch, all consumers together */
    uint64_t key;      /* seeds this epoch's draws of its places in the sequence */
    uint64_t head;     /* its samples before the next position, in the current pass */
    ShardSegList segs; /* this consumer's segments of it, this epoch */
} ShardMixSource;

typedef struct ShardMix {
    ShardMixSource *src;
    size_t n;
    uint64_t total;    /* samples in the epoch's sequence, all consumers together */
    uint64_t pos, end; /* this consumer's next position and its end (past total: padding) */
} ShardMix;

/* n sources, zeroed: the caller sets each one's lo, n and weight. 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_mix_init(ShardMix *m, size_t n);

/* Each source's size from counts (all known) and its quota of an epoch of total samples
 * (0: the sizes summed). 0, or a code with the reason in err (SHARD_ERROR_MAX bytes). */
SHARD_HIDDEN int shard_mix_size(ShardMix *m, const uint64_t *counts, uint64_t total, char *err);

/* Plans the consumer's epoch p->epoch: each source's segments and the start position. */
SHARD_HIDDEN int shard_mix_plan(ShardMix *m, const uint64_t *counts, const ShardPlanSettings *p);

/* Plans the range [a, b) of epoch p->epoch's sequence (past total: padding's repeats), as
 * a consumer's or a partition's: each source's segments and the start position. */
SHARD_HIDDEN int shard_mix_plan_range(ShardMix *m, const uint64_t *counts,
                                      const ShardPlanSettings *p, uint64_t a, uint64_t b);

/* The source of the consumer's next sample, advancing; -1 past its last. */
SHARD_HIDDEN int shard_mix_next(ShardMix *m);

SHARD_HIDDEN void shard_mix_free(ShardMix *m);

#endif /* SHARD_READ_MIX_H */
