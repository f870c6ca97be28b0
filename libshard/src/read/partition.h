/*
 * Canonical partitions (partition.c; formats/order.md, sections 3 and 4): an epoch's
 * sequence cut into P partitions of consecutive samples that consumers take whole, and the
 * cut, how far each partition has been delivered, which a resume on another number of ranks
 * and workers goes on from. The arithmetic only: no reading.
 * Not installed.
 */
#ifndef SHARD_READ_PARTITION_H
#define SHARD_READ_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "shard/plan.h"

/* The epoch's length for t samples in p partitions: t in exact mode; in equal mode every
 * partition the same length, t - t mod p, or with pad ceil(t / p) * p (repeats past t). */
SHARD_HIDDEN uint64_t shard_partition_total(uint64_t t, uint32_t p, ShardMode mode, int pad);

/* Partition i's samples [*a, *b) of an epoch of total samples in p partitions, lengths
 * differing by at most one. */
SHARD_HIDDEN void shard_partition_range(uint64_t total, uint32_t p, uint32_t i, uint64_t *a,
                                        uint64_t *b);

/* The partitions [*lo, *hi) worker `worker` of rank `rank` takes, of world ranks of
 * workers each: the rank a contiguous block, the worker a contiguous part of it. */
SHARD_HIDDEN void shard_partition_block(uint32_t p, int world, int workers, int rank, int worker,
                                        uint32_t *lo, uint32_t *hi);

/* Whether world ranks of workers each can take p partitions in mode: 0, or
 * SHARD_ERR_INVALID with msg (SHARD_ERROR_MAX) naming what does not fit and a value that
 * would. */
SHARD_HIDDEN int shard_partition_check(uint32_t p, int world, int workers, ShardMode mode,
                                       char *msg);

/* The cut as text: runs of partitions, "A-B:d" (done), "A-B:0" (untouched), "I:N" (N
 * delivered), comma-separated, from pos[0..p) of partitions len[0..p). 0, or
 * SHARD_ERR_INVALID when it does not fit in cap bytes. */
SHARD_HIDDEN int shard_cut_format(const uint64_t *pos, const uint64_t *len, uint32_t p,
                                  char *out, size_t cap);

/* Reads a cut into pos[0..p), checking it against the partitions' lengths: 0, or
 * SHARD_ERR_INVALID with msg saying where it is wrong. */
SHARD_HIDDEN int shard_cut_parse(const char *text, const uint64_t *len, uint32_t p,
                                 uint64_t *pos, char *msg);

/* Advances pos by what world ranks of workers each delivered, each rank `batches` batches
 * of batch_size (data-parallel ranks move in step; a rank whose stream ended sooner
 * delivered all of it). A worker's stream is its block's partitions from pos on, one after
 * the other, cut into batches (the last short, or dropped with drop_last); a rank takes its
 * workers' batches in turn from worker `first`, skipping those whose stream has ended, as a
 * DataLoader does. 0, SHARD_ERR_INVALID (no batch size, rank or worker), SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_advance(uint64_t *pos, const uint64_t *len, uint32_t p, int world,
                                   int workers, uint64_t batch_size, int drop_last,
                                   uint64_t batches, int first);

#endif /* SHARD_READ_PARTITION_H */
