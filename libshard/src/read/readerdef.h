/*
 * The streaming reader's insides, shared by its three files: the handle (reader.c), an
 * epoch's order (epoch.c) and a restore's replay (resume.c). It puts together the shard
 * list (catalog/list.c), the epoch plan (plan.c) or a mix (mix.c), the fetch stage
 * (fetch.c) and the shuffle buffer (shuffle.c).
 *
 * DESIGN
 * - Plan: shard_epoch_plan gives this consumer's segments for the epoch (resampled mode
 *   draws shards instead). A mix (mix.c) gives segments per source, each source read by
 *   streams of its own, and says which source each of the consumer's samples comes from;
 *   the round-robin then runs over that source's streams. Segments are dealt to S streams
 *   statically: stream k reads segments k, k+S, k+2S, ... in order. The consumer takes
 *   one sample from each stream in turn (round-robin over streams that still have
 *   samples), then passes them through the shuffle buffer. Which stream yields next, and which buffer slot is drawn, depend
 *   only on the plan, the sample counts and the seeded generator, never on timing.
 * - Threads: the fetch stage's, one per stream, started at the epoch's first pull (after
 *   any restore) and stopped when the epoch is left. Everything else, including the
 *   shuffle buffer, runs on the thread that calls shard_reader_next; samples cross threads
 *   only through the fetch stage's queues.
 * - Samples from local uncompressed tars are views into the shard's mapping, holding the
 *   shard's source open; other samples are copied once into a block of their own.
 * - Resume: with every count known, restoring position P replays the round-robin and the
 *   buffer on sample identities alone (shard, sample number) for P steps, then reads the
 *   buffered samples by index and starts each stream where the replay left it. Without
 *   counts it replays by reading (and dropping) P samples.
 */
#ifndef SHARD_READ_READERDEF_H
#define SHARD_READ_READERDEF_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "read/fetch.h"
#include "read/mix.h"
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
    uint64_t position;
    ShardSegment *segs;
    size_t nsegs;
    ShardRemote *own_remote; /* made when the settings named none */
    int counts_known; /* every segment's count is known */
    int seed_drawn;   /* no seed was given: a restored state's replaces the drawn one */
    size_t counted;   /* shards whose sample count is known */
    char list_fp[17], weights_fp[17]; /* state.c's fingerprints, for states */
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
    double wait;     /* shard_reader_set_wait: the longest a take waits, 0: no limit */
    int pending_src; /* the source drawn for a pull that had to wait, -1: none */
    int start_due;   /* the fetch threads start at the first pull: a restore or set_epoch
                        right after open or an epoch change reads nothing it drops */
    atomic_ullong samples, bytes; /* read by other threads' statistics (load/loader.c) */
};


#endif /* SHARD_READ_READERDEF_H */
