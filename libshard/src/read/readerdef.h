/*
 * The streaming reader's insides, shared by its files: the handle (streamreader.c), an epoch's
 * reading piece after piece (epoch.c), a partition's steps and their replay
 * (steps.c), a restore (restore.c) and states (state.c). It puts together the shard
 * list (catalog/shardlist.c), the epoch plan (epochplan.c) or a mix (mix.c), the fetch stage
 * (fetch.c) and the shuffle buffer (shuffle.c).
 *
 * DESIGN
 * - Order (resume/resume.h, formats/order.md): each epoch the sequence of the shuffled
 *   shards' samples (or of a mix's) is cut into P canonical partitions, each a
 *   deterministic stream. With every count known, the partitions laid end to end are a
 *   line of points; a consumer reads what is left of its region of it, in pieces (a
 *   partition's stream from one sample to another), one after the other, then the
 *   repeats equal mode may add. A fresh epoch's regions are blocks of whole partitions;
 *   a resume elsewhere spreads what is left over the new consumers, splitting a partition
 *   at a sample where it must. Entering a piece plans its partition's range of the
 *   sequence as a consumer's (shard_epoch_plan_range, or a mix's, which also says which
 *   source each of its samples comes from, the round-robin then running over that
 *   source's streams); without counts a partition is every P-th shard and a consumer
 *   reads its block of them whole. Resampled mode draws shards per partition instead, the
 *   block's partitions in turn, in one endless stream. Segments are dealt to S streams
 *   statically: stream k reads segments k, k+S, k+2S, ... in order. The consumer takes
 *   one sample from each stream in turn (round-robin over streams that still have
 *   samples), then passes them through the partition's shuffle buffer, seeded by the
 *   partition. Which stream yields next, and which buffer slot is drawn, depend only on
 *   the plan, the sample counts and the seeded generator, never on timing or topology.
 * - Threads: the fetch stage's, one per stream, started at the epoch's first pull (after
 *   any restore) and stopped when the epoch is left. Everything else, including the
 *   shuffle buffer, runs on the thread that calls shard_reader_next; samples cross threads
 *   only through the fetch stage's queues.
 * - Samples from local uncompressed tars are views into the shard's mapping, holding the
 *   shard's source open; other samples are copied once into a block of their own.
 * - Resume: a state's cut says what is left of the epoch and the regions it was read in.
 *   Entering a piece that begins N samples into its partition, with every count known,
 *   replays the partition's round-robin and buffer on sample identities alone (shard,
 *   sample number) for N steps, then reads the buffered samples by index and starts each
 *   stream where the replay left it; without counts (or skipping errors) it reads and
 *   drops N samples. A piece that ends inside its partition stops there.
 */
#ifndef SHARD_READ_READERDEF_H
#define SHARD_READ_READERDEF_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "read/fetch.h"
#include "read/mix.h"
#include "resume/resume.h"
#include "read/shuffle.h"
#include "shard/reader.h"

/* One fetch stream as the consumer's side sees it. */
typedef struct ReaderStream {
    size_t start_seg;  /* where its fetch thread starts: its n-th segment, */
    uint64_t start_off; /* at this many samples in */
    size_t sim_seg;    /* replay bookkeeping (identities): next segment, offset in it */
    uint64_t sim_off;
    int active;        /* it has samples left this epoch */
    ShardHold *last;   /* the storage its last sample came from (held) */
} ReaderStream;

struct ShardReader {
    ShardReaderSettings s;
    ShardList *list;
    uint64_t *counts; /* samples per shard, SHARD_COUNT_UNKNOWN where not known */
    size_t nurls;
    double list_started, list_seconds; /* open_list: when, and how long */
    char err[SHARD_ERROR_MAX];
    int failed;

    uint64_t epoch;
    uint64_t position; /* samples of its block delivered this epoch (the order's base
                          before a restore's reading began included) */
    ShardOrder *order; /* this epoch's (or a restore's) */
    int64_t cur;       /* the order's piece being read (0 .. n - 1), n for the repeats,
                          n + 1 past them; -1 before the first */
    int cur_open;      /* cur has samples to give: not yet drained */
    uint64_t line_next; /* the line's point (partitions end to end) of cur's next sample */
    struct ShardBucketPlan *bucket_plan; /* aspect buckets (bucketplan.c), NULL: none */
    struct ShardBucketLine *bucketed;    /* their reading (bucketline.c) */
    uint64_t readings; /* readings begun (shard_reader_reset): a bucketed one starts anew */
    uint64_t piece_left; /* samples cur has still to give; UINT64_MAX: to its partition's end */
    uint64_t drop_left; /* a partition entered N samples in without counts: N to drop */
    uint64_t resume_skip; /* resampled, resumed on its own topology: samples to pass over */
    int64_t prefetched; /* the piece whose streams read while cur's buffer drains; -1 */
    uint64_t mix_own_total; /* the mix's length for this topology (a state's may differ) */
    ShardSegment *segs;
    size_t nsegs;
    ShardRemote *own_remote; /* made when the settings named none */
    int counts_known; /* every segment's count is known */
    int seed_drawn;   /* no seed was given: a restored state's replaces the drawn one */
    size_t counted;   /* shards whose sample count is known */
    char list_fp[17], weights_fp[17], buckets_fp[17]; /* state.c's fingerprints, for states */
    int64_t epoch_length;

    ShardMix mix; /* several sources, or epoch_samples outside resampled mode */
    int mixing;

    ReaderStream *streams; /* per source (one unless mixing), per streams of it */
    size_t nstreams;
    size_t per;      /* streams per source */
    size_t *rr;      /* per source: the stream whose turn it is */
    ShardFetch *fetch;
    ShardShuffle shuffle;
    ShardItem *last; /* handed out by shard_reader_next, released at the next call */
    struct ShardKeyView *view; /* keys: the samples chosen (catalog/keyview.h), NULL: all */
    struct ShardNames *names; /* order_only: the indexes that name samples, made when first
                                 asked */
    double wait;     /* shard_reader_set_wait: the longest a take waits, 0: no limit */
    int pending_src; /* the source drawn for a pull that had to wait, -1: none */
    int start_due;   /* the fetch threads start at the first pull: a restore or set_epoch
                        right after open or an epoch change reads nothing it drops */
    atomic_ullong samples, bytes; /* read by other threads' statistics (load/batchloader.c) */
    atomic_ullong unsized;        /* aspect_buckets, skip_errors: left out (bucketline.c) */
};


#endif /* SHARD_READ_READERDEF_H */
