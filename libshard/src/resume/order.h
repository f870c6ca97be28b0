/*
 * An epoch's order as one consumer reads it (order.c; formats/order.md): the canonical
 * partitions (their count and lengths), the cut its reading began from (cut.h: what was
 * left and the consumers' regions; without counts, how far each partition was, in runs),
 * the pieces of partitions it reads in turn, and the repeats equal mode adds where the
 * ranks would differ. The reader makes one at each epoch and restore; it does not change
 * after, but for the positions at which the consumer enters its pieces and resampled
 * mode's draws taken, which the reading thread sets (atomics) and a state reads.
 * Reference-counted: a loader's batches keep the order they were read in, so that a state
 * taken while the reader has gone on into the next epoch is that of the batches handed
 * out.
 */
#ifndef SHARD_RESUME_ORDER_H
#define SHARD_RESUME_ORDER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "resume/cut.h"
#include "resume/history.h"
#include "shard/plan.h"

typedef struct ShardOrder {
    atomic_int refs;
    uint64_t epoch;
    ShardMode mode;
    int world, workers, rank, worker;
    size_t self;             /* this consumer: rank * workers + worker */
    uint32_t parts;          /* P */
    uint32_t lo, hi;         /* this consumer's block of whole partitions (without counts,
                                and resampled mode's draws) */
    uint64_t total;          /* T: the epoch's sequence (before equal mode's trim or pad) */
    uint64_t length;         /* T': what the partitions cut; 0 without counts */
    int counted;             /* every length is known (and not resampled): the cut is `cut` */
    uint64_t *len;           /* [parts]; SHARD_COUNT_UNKNOWN without counts */
    ShardCut cut;            /* counted: the cut the reading began from */
    uint64_t *start;         /* [parts], not counted: the runs the reading began from;
                                resampled: each partition's next draw */
    ShardPiece *piece;       /* what this consumer reads, in turn, before its repeats */
    size_t npieces;
    uint64_t pad;            /* equal mode's repeats after its pieces */
    uint64_t base;           /* samples of its region delivered before its reading began
                                (resampled: before its draws' start) */
    atomic_ullong *entered;  /* [npieces + 1]: its position when it entered each piece (the
                                repeats last); UINT64_MAX before */
    atomic_ullong taken;     /* resampled: one past the last of this consumer's draws (its
                                block's partitions in turn) a sample was taken from */
    uint64_t step0;          /* the rank's steps of the epoch before this reading began (a
                                restore's state's) */
    ShardHistory history;    /* the epoch's readings on other topologies, this one last;
                                empty when it ran on this one alone */
} ShardOrder;

/* An order of parts partitions (lengths len, NULL without counts) for consumer (rank,
 * worker) of world ranks of workers each, to be begun (shard_order_begin); NULL when out
 * of memory. */
SHARD_HIDDEN ShardOrder *shard_order_new(uint64_t epoch, ShardMode mode, int world, int workers,
                                         int rank, int worker, uint32_t parts, uint64_t total,
                                         uint64_t length, const uint64_t *len);
SHARD_HIDDEN ShardOrder *shard_order_ref(ShardOrder *o);
/* Drops a reference (NULL accepted); the last frees it. */
SHARD_HIDDEN void shard_order_put(ShardOrder *o);

/* Sets the cut the reading begins from: with counts `cut` (its regions for this topology;
 * NULL: none delivered, the consumers' blocks where the partitions fit them whole, else
 * spread), otherwise start, parts entries (resampled: draws; NULL: all 0), with equal
 * mode's repeats for batches of bs (drop_last). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_order_begin(ShardOrder *o, const ShardCut *cut, const uint64_t *start,
                                   uint64_t bs, int drop_last);

/* Equal mode's repeats after each consumer's pieces (rank * workers + worker) from the
 * start, for batches of bs (drop_last): zeros in other modes or where the ranks agree
 * already. malloc'd; NULL when out of memory. */
SHARD_HIDDEN uint64_t *shard_order_pads(const ShardOrder *o, uint64_t bs, int drop_last);

/* Rank rank's batches of bs (drop_last) from the start, its workers' together, repeats
 * included; -1 without counts or when out of memory. */
SHARD_HIDDEN int64_t shard_order_rank_batches(const ShardOrder *o, int rank, uint64_t bs,
                                              int drop_last);

/* Resampled mode: the draws each partition is at after every consumer of world ranks of
 * workers took `taken` draws from start (its block's partitions in turn), into next. */
SHARD_HIDDEN void shard_order_draws_after(const uint64_t *start, uint32_t parts, int world,
                                          int workers, uint64_t taken, uint64_t *next);

/* Resampled mode resumed on another topology: each of nparts partitions' next draw, into
 * next (room for the larger of parts and nparts): shard_order_draws_after where the
 * partitions are the state's, else every one past the last draw any had taken (no
 * exactly-once in this mode). */
SHARD_HIDDEN void shard_order_draws_resumed(const uint64_t *start, uint32_t parts, int world,
                                            int workers, uint64_t taken, uint32_t nparts,
                                            uint64_t *next);

/* Samples this consumer reads in the epoch, those of its region delivered before the start
 * included; -1 without counts. */
SHARD_HIDDEN int64_t shard_order_consumer_length(const ShardOrder *o);

/* With counts: the whole cut, with this consumer at position, every other consumer in step
 * with it (each as many units of unit samples delivered since its reading began, or all it
 * had), into out (uninitialised). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_order_cut_at(const ShardOrder *o, uint64_t position, uint64_t unit,
                                    ShardCut *out);

/* Without counts: the runs, pos[parts], this consumer's block exact and every other
 * partition not said (SHARD_CUT_UNKNOWN) unless done before; resampled: each partition's
 * draw at the start (the state adds the draws taken since). */
SHARD_HIDDEN void shard_order_runs_at(const ShardOrder *o, uint64_t position, uint64_t *pos);

#endif /* SHARD_RESUME_ORDER_H */
