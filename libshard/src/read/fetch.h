/*
 * The fetch stage: S streams, each a thread that opens its segments of the epoch's plan in
 * order and puts their samples, as owned items, into its own bounded queue. The consumer
 * takes from the streams in whatever order it likes (the reader: round-robin), so which
 * sample comes next never depends on which thread runs first.
 */
#ifndef SHARD_READ_FETCH_H
#define SHARD_READ_FETCH_H

#include <stdatomic.h>

#include "base/attr.h"
#include "base/queue.h"
#include "shard/list.h"
#include "shard/plan.h"
#include "tar/item.h"

/* Segment n of stream k of the current epoch into *out; 0 past the stream's last. */
typedef int (*ShardSegmentFn)(void *cookie, size_t stream, size_t n, ShardSegment *out);

typedef struct ShardFetchSettings {
    const ShardList *list;  /* the shards segments point into; borrowed */
    size_t streams;         /* >= 1 */
    size_t queue_depth;     /* samples read ahead per stream, >= 1 */
    int skip_errors;        /* skip, count and keep errors instead of stopping the stream */
    ShardSegmentFn segment; /* called on the stream's own thread */
    void *cookie;
    ShardRemote *remote;    /* remote shards are read through it; borrowed */
    int map;                /* map local shards (ShardFileSettings.map) */
    uint64_t memory_budget; /* bytes all streams' queues may hold together (0: queue_depth
                               alone); each stream gets its share, one sample at least */
    /* A view (keys): a segment's samples are its shard's chosen ones, read by index;
     * borrowed; NULL: every sample */
    const struct ShardKeyView *view;
} ShardFetchSettings;

typedef struct ShardFetchCounters {
    uint64_t shards_opened, skipped_shards, skipped_samples, errors;
    double take_wait; /* seconds the consumer waited on the streams' queues */
    uint64_t items, bytes;   /* put into the streams' queues */
    double put_wait;         /* seconds the streams waited on full queues */
    double alive;            /* seconds the stream threads ran, summed (running ones too) */
    double read, unpack;     /* of which reading (I/O waits included), decompressing */
    uint64_t read_bytes, unpack_bytes; /* from the sources; out of the decompressors */
    size_t fill, capacity;   /* of the queues, summed */
    size_t threads;          /* streams */
} ShardFetchCounters;

typedef struct ShardFetch ShardFetch;

/* Spans of the fetch threads go to trace (borrowed; NULL: none); before they start. */
struct ShardTrace;
SHARD_HIDDEN void shard_fetch_set_trace(ShardFetch *f, struct ShardTrace *trace);

SHARD_HIDDEN int shard_fetch_new(ShardFetch **out, const ShardFetchSettings *s);
/* Starts stream k's thread at its segment first, skipping skip samples of it. */
SHARD_HIDDEN int shard_fetch_start(ShardFetch *f, size_t k, size_t first, uint64_t skip);
/* Stops every thread and drops the items still queued; streams can start again after. */
SHARD_HIDDEN void shard_fetch_stop(ShardFetch *f);
/* From any thread: the first half of a stop, so that a consumer blocked in a take wakes
 * (SHARD_EOS) and gives up the epoch; the consumer's own shard_fetch_stop finishes it. */
SHARD_HIDDEN void shard_fetch_interrupt(ShardFetch *f);
/* The next item of stream k, waiting at most seconds for it (<= 0: as long as it takes):
 * 0 with *out, a sample or the stream's END or ERROR marker (after which the stream has
 * stopped), owned by the caller; SHARD_AGAIN when nothing came in that time; SHARD_EOS only
 * while the stage is stopping, which the consumer itself does. */
SHARD_HIDDEN int shard_fetch_take_for(ShardFetch *f, size_t k, double seconds, ShardItem **out);
SHARD_HIDDEN void shard_fetch_counters(ShardFetch *f, ShardFetchCounters *c);
/* An error of a stage after the fetch's in skip mode, counted and kept with its own. */
SHARD_HIDDEN void shard_fetch_keep_error(ShardFetch *f, const char *msg);
/* Shards (or their rests) skipped so far in skip mode. */
SHARD_HIDDEN uint64_t shard_fetch_skipped_shards(ShardFetch *f);
/* Error i kept in skip mode (at most 16), oldest first; NULL past the last. */
SHARD_HIDDEN const char *shard_fetch_kept_error(ShardFetch *f, size_t i);
SHARD_HIDDEN void shard_fetch_free(ShardFetch **f);

#endif /* SHARD_READ_FETCH_H */
