/*
 * Canonical partitions (partition.c; formats/order.md, sections 3 and 4): an epoch's
 * sequence cut into P partitions of consecutive samples, which the consumers of a fresh
 * epoch take whole where they fit (cut.h spreads the rest elsewhere), and the runs that
 * say how far each partition has been delivered where the counts are not known. The
 * arithmetic only: no reading.
 * Not installed.
 */
#ifndef SHARD_RESUME_PARTITION_H
#define SHARD_RESUME_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "shard/plan.h"

/* A cut's value for a partition the state does not say (another consumer's, without the
 * counts that would tell it), and for one done whose length is not known. */
#define SHARD_CUT_UNKNOWN UINT64_MAX
#define SHARD_CUT_DONE (UINT64_MAX - 1)

/* The most partitions an epoch may have. */
#define SHARD_PARTITIONS_MAX (1u << 20)

/* The part [*lo, *hi) of [0, total) that piece k of m gets, sizes differing by at most
 * one, the larger first. */
SHARD_HIDDEN void shard_plan_split(uint64_t total, uint64_t m, uint64_t k, uint64_t *lo,
                                   uint64_t *hi);
/* The greatest common divisor of a and b (a when b is 0). */
SHARD_HIDDEN uint64_t shard_gcd(uint64_t a, uint64_t b);
/* The epoch's length for t samples in p partitions: t in exact mode; in equal mode every
 * partition the same length, t - t mod p, or with pad ceil(t / p) * p (repeats past t). */
SHARD_HIDDEN uint64_t shard_partition_total(uint64_t t, uint32_t p, ShardMode mode, int pad);

/* Partition i's samples [*a, *b) of an epoch of total samples in p partitions, lengths
 * differing by at most one, the longer ones spread evenly: any runs of partitions of the
 * same length (a rank's, a worker's) differ by at most one sample. */
SHARD_HIDDEN void shard_partition_range(uint64_t total, uint32_t p, uint32_t i, uint64_t *a,
                                        uint64_t *b);

/* The partitions [*lo, *hi) worker `worker` of rank `rank` takes, of world ranks of
 * workers each: the rank a contiguous block, the worker a contiguous part of it. */
SHARD_HIDDEN void shard_partition_block(uint32_t p, int world, int workers, int rank, int worker,
                                        uint32_t *lo, uint32_t *hi);

/* Whether world ranks of workers each can take p partitions in mode: 0, or
 * SHARD_ERR_INVALID with msg (SHARD_ERROR_MAX) naming what does not fit and a value that
 * would. Resampled mode's draws go by partition, which it needs whole. */
SHARD_HIDDEN int shard_partition_check(uint32_t p, int world, int workers, ShardMode mode,
                                       char *msg);

/* Whether world ranks of workers each take p partitions whole: every consumer one at least
 * and, in equal mode, every rank as many. Where not, what is left is spread (cut.h). */
SHARD_HIDDEN int shard_partition_whole(uint32_t p, int world, int workers, ShardMode mode);

/* The partition count for an epoch of t samples (counted) or of nshards shards of unknown
 * counts, read by `streams` streams through a shuffle buffer of shuffle samples: the
 * largest of 2880, 1440, 720, 360, 240, 120, 60, 24, 12, 6, 2, 1 that leaves partitions of
 * at least max(shuffle, 256, streams x the mean shard's samples) (a shard each without
 * counts); where that does not give every worker of world ranks of workers each the same
 * number, world x the least of 1, 2, 3, 4, 6, 12, 24, 36, 48, 60, ... (a multiple of
 * workers) that does. */
SHARD_HIDDEN uint32_t shard_partition_auto(uint64_t t, int counted, size_t nshards, size_t shuffle,
                                           size_t streams, int world, int workers, ShardMode mode);

/* A cut without counts as text: runs of partitions, "A-B:d" (done), "A-B:0" (untouched), "A-B:N" (N
 * delivered of each), "A-B:?" (not said), comma-separated, from pos[0..p) of partitions
 * len[0..p) (an entry SHARD_COUNT_UNKNOWN where not known; len NULL: the values are draws,
 * as resampled mode's). 0, or SHARD_ERR_INVALID when it does not fit in cap bytes. */
SHARD_HIDDEN int shard_runs_format(const uint64_t *pos, const uint64_t *len, uint32_t p,
                                  char *out, size_t cap);

/* Reads a cut into pos[0..p), checking it against the partitions' lengths (as above): 0, or
 * SHARD_ERR_INVALID with msg saying where it is wrong. */
SHARD_HIDDEN int shard_runs_parse(const char *text, const uint64_t *len, uint32_t p,
                                 uint64_t *pos, char *msg);

#endif /* SHARD_RESUME_PARTITION_H */
