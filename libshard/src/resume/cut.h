/*
 * The cut (cut.c; formats/order.md, sections 4 and 5): what is left of an epoch whose
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
/* Frees what c holds (a zeroed one accepted). */
SHARD_HIDDEN void shard_cut_free(ShardCut *c);

/* Points left in [lo, hi). */
SHARD_HIDDEN uint64_t shard_cut_left_in(const ShardCut *c, uint64_t lo, uint64_t hi);
/* Consumer c's points left. */
SHARD_HIDDEN uint64_t shard_cut_rest(const ShardCut *c, size_t consumer);

/* Regions for world ranks of workers each, the consumers' blocks of whole partitions of
 * parts partitions (partition.c). 0 or SHARD_ERR_NOMEM. */
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
SHARD_HIDDEN int shard_cut_advance(ShardCut *c, uint64_t bs, int drop_last, uint64_t batches,
                                   int first, const uint64_t *pads);

/* dst's left, region by region, from the cut from[c] of the consumer that read it (one per
 * consumer of dst's regions, which every one shares). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_join(ShardCut *dst, const ShardCut *const *from);

/* The cut as text: "left=A-B,C-D,...;edges=E,F,..." (the regions' inner edges). 0, or
 * SHARD_ERR_INVALID when it does not fit in cap bytes. */
SHARD_HIDDEN int shard_cut_format(const ShardCut *c, char *out, size_t cap);
/* Reads such a text into c (uninitialised) for a line of length points and world ranks of
 * workers each: 0, SHARD_ERR_INVALID with msg (SHARD_ERROR_MAX) saying where it is wrong,
 * SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_parse(ShardCut *c, const char *text, uint64_t length, int world,
                                 int workers, char *msg);

#endif /* SHARD_RESUME_CUT_H */
