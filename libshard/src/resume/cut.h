/*
 * The line's arithmetic (cut.c; formats/order.md, sections 3 to 5). Canonical partitions: an
 * epoch's sequence cut into P partitions of consecutive samples, which the consumers of a
 * fresh epoch take whole where they fit. The cut: what is left of an epoch whose
 * every count is known, and which consumer reads which of it. The epoch's partitions laid
 * end to end make a line [0, length): point g of partition p's range is sample g - start(p)
 * of p's own stream (its order after the shuffle buffer), not sample g of the sequence. Left
 * is the points not yet delivered; consumer c (rank * workers + worker) reads what is left
 * of its region [edge[c], edge[c + 1]), in order, entering a partition at any sample (a
 * resume replays its stream to it). A fresh epoch's regions are the consumers' blocks of
 * whole partitions; a resume on the topology the cut was taken on keeps them, so the epoch
 * goes on as though never stopped; on another, what is left is spread over the new
 * consumers: each rank the same count give or take a sample, and each worker of a rank.
 * So any topology resumes, and the ranks differ by at most a batch.
 * The arithmetic only: no reading. Not installed.
 */
#ifndef SHARD_RESUME_CUT_H
#define SHARD_RESUME_CUT_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "shard/plan.h"

/* ---- canonical partitions ---- */

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

/* ---- the cut ---- */

/* [a, b) of the line. */
typedef struct ShardSpan {
    uint64_t a, b;
} ShardSpan;

/* What one consumer reads next: partition p's stream from sample `from` to `to` (exclusive;
 * SHARD_COUNT_UNKNOWN: to its end, without counts). */
typedef struct ShardPiece {
    uint32_t p;
    uint64_t from, to;
} ShardPiece;

typedef struct ShardCut {
    uint64_t length;  /* the line's, the epoch's T' */
    ShardSpan *left;  /* ascending, disjoint, none empty nor touching the next */
    size_t n, cap;
    int world, workers; /* the topology the regions are for */
    uint64_t *edge;   /* [world * workers + 1], ascending, edge[0] = 0, the last = length */
} ShardCut;

/* An epoch of length points with none delivered, and no regions yet. 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_init(ShardCut *c, uint64_t length);
/* dst a copy of src (dst uninitialised). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_copy(ShardCut *dst, const ShardCut *src);
/* Appends [a, b) to what is left (after every span there, merged with the last where they
 * touch; nothing for an empty one). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_push(ShardCut *c, uint64_t a, uint64_t b);
/* Room for the regions of world ranks of workers each, edges zeroed but the last (the
 * line's length). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_regions(ShardCut *c, int world, int workers);
/* Frees what c holds (a zeroed one accepted). */
SHARD_HIDDEN void shard_cut_free(ShardCut *c);

/* Points left in [lo, hi). */
SHARD_HIDDEN uint64_t shard_cut_left_in(const ShardCut *c, uint64_t lo, uint64_t hi);
/* Consumer c's points left. */
SHARD_HIDDEN uint64_t shard_cut_rest(const ShardCut *c, size_t consumer);

/* Regions for world ranks of workers each, the consumers' blocks of whole partitions of
 * parts partitions. 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_blocks(ShardCut *c, uint32_t parts, int world, int workers);
/* Regions for world ranks of workers each that spread what is left, in order: rank r its
 * split of it (sizes a sample apart, the larger first), worker k of a rank its split of the
 * rank's. Any two ranks' batches then differ by at most one, whatever the batch size, which
 * the regions do not depend on (a resume may change it). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_spread(ShardCut *c, int world, int workers);

/* Consumer c's reading: what is left of its region cut at partitions' ends, into a
 * malloc'd *out of *n pieces (parts partitions over the line). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_pieces(const ShardCut *c, size_t consumer, uint32_t parts,
                                  ShardPiece **out, size_t *n);

/* Batches of n samples: n / bs rounded up, or down with drop_last. */
SHARD_HIDDEN uint64_t shard_cut_batches(uint64_t n, uint64_t bs, int drop_last);

/* Equal mode: the repeats pads[consumer] each consumer reads after its pieces so that every
 * rank has as many batches of bs as the one with most, the fewest that do: a rank short
 * pads its last worker with samples (or its last worker). All zero where the ranks agree. */
SHARD_HIDDEN void shard_cut_pads(const ShardCut *c, uint64_t bs, int drop_last, uint64_t *pads);

/* Rank rank's batches of bs from c on, its workers' together (pads as above, or NULL). */
SHARD_HIDDEN uint64_t shard_cut_rank_batches(const ShardCut *c, int rank, uint64_t bs,
                                             int drop_last, const uint64_t *pads);

/* Marks the first took[c] points of each consumer's region left delivered (took: one entry
 * per consumer; more than it has: all). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_take(ShardCut *c, const uint64_t *took);

/* Marks delivered what every rank delivered in `batches` batches of bs: a rank takes its
 * workers' batches in turn from worker `first`, skipping those whose stream has ended, as
 * a DataLoader does; a worker's stream is its reading then pads[c] repeats (NULL: none),
 * cut into batches (the last short, or dropped with drop_last). 0, SHARD_ERR_INVALID,
 * SHARD_ERR_NOMEM. */
/* A rank's `batches` dealt over its workers as a DataLoader takes them: whole turns over
 * the workers that still have batches (left[w] each), the last, partial turn from worker
 * first; got[w] receives each one's. */
SHARD_HIDDEN void shard_cut_deal(const uint64_t *left, int workers, uint64_t batches, int first,
                                 uint64_t *got);
SHARD_HIDDEN int shard_cut_advance(ShardCut *c, uint64_t bs, int drop_last, uint64_t batches,
                                   int first, const uint64_t *pads);

/* dst's left, region by region, from the cut from[c] of the consumer that read it (one per
 * consumer of dst's regions, which every one shares). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_join(ShardCut *dst, const ShardCut *const *from);

#endif /* SHARD_RESUME_CUT_H */
