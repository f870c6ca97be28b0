/*
 * The batch loader's insides, shared by its files: the handle and the caller's side
 * (batchloader.c), the producer thread (producer.c) and the statistics (loaderstats.c). It puts
 * together the reader (read/), batch assembly (batch.c), the decode pool (decodepool.c)
 * and a ring of batch buffers.
 *
 * DESIGN
 * - The ring: `batches` slots, each a batch buffer. Free slots wait in free_q; the
 *   producer thread takes one, fills it and deals its samples to the decode pool; the
 *   decoder that finishes a slot's last sample puts the slot into ready_q. Slots finish
 *   in any order, so the caller's thread parks early ones and hands batches out in the
 *   order the producer filled them: the reader's order, whatever the decode timing.
 *   A batch released by the caller goes back into free_q, from any thread.
 * - The queues carry slot handles and jobs, never pixels: decoders write each image into
 *   its place in the slot's buffer. Only the producer fills a slot; only the caller
 *   compacts and publishes it, once every job of it is done.
 * - At the epoch's end (or on the reader's error) the producer puts an END slot into
 *   ready_q, carrying the error, and ends. Stopping early (set_epoch, restore, free) puts
 *   a NULL into free_q to wake the producer, joins it, then waits for every slot it had
 *   taken to come back through ready_q (in-flight count), so no decoder writes a slot
 *   after it was reset.
 * - Each sample's random choices come from (seed, epoch, the sample: its shard, its index
 *   in it and which reading of it in the epoch this is), so augmentation is reproducible,
 *   survives a resume and is the same whichever consumer reads the sample.
 */
#ifndef SHARD_LOAD_LOADERDEF_H
#define SHARD_LOAD_LOADERDEF_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/queue.h"
#include "base/trace.h"
#include "load/batch.h"
#include "load/decodepool.h"
#include "shard/loader.h"

struct ShardLoader {
    ShardLoaderSettings s;
    ShardBatchSpec spec;
    char *image_fields, *label_field, *raw_fields; /* the settings' strings, copied */
    ShardReader *reader;
    char err[SHARD_ERROR_MAX];

    ShardSlot *slots;
    size_t nslots;
    ShardQueue free_q;  /* slots the producer may fill (and NULL, to stop it) */
    ShardQueue ready_q; /* slots whose samples are all decoded, and END slots */
    ShardDecodePool *pool;

    pthread_t producer;
    int producer_running;
    atomic_int stop;
    atomic_size_t inflight; /* slots the producer took that have not reached the caller */
    atomic_size_t held;     /* slots the caller holds */
    uint64_t next_fill;     /* the producer's */
    uint64_t fill_epoch;    /* the producer's: the epoch of the batches it fills */
    uint64_t fill_index;    /* the producer's: the next batch's number in that epoch */
    atomic_ullong ahead;    /* the epoch the producer went on into by itself (0: none) */
    pthread_mutex_t at_end_lock; /* guards at_end* and ahead_order */
    pthread_mutex_t defer_lock;  /* guards defer_*; the producer holds it deciding a batch */
    int (*defer_take)(void *ctx, const unsigned char *data, size_t size); /* load/defer.h's
                                    hook, NULL for none */
    void *defer_ctx;
    struct ShardOrder *ahead_order; /* that epoch's order (a reference) */
    ShardReaderStats at_end; /* the reader's counters when the producer left at_end_epoch */
    uint64_t at_end_epoch;
    int have_at_end;
    uint64_t epoch;         /* the caller's: of the batches it takes */

    /* the caller's side */
    ShardSlot **parked; /* finished before their turn */
    size_t nparked;
    uint64_t next_give;
    int ended;          /* the caller has seen this epoch's END */
    int broken;         /* a restore or new epoch failed: no producer runs, and next says so */
    uint64_t skipped;                  /* samples left out in skip mode, and by reason */
    uint64_t skipped_by[SHARD_BAD_N];
    uint64_t dropped_batches;          /* batches of skipped samples alone, dropped */
    uint64_t *offsets; /* per shard: samples in the shards before it, or NULL (the spec's) */
    uint32_t *sources; /* per shard: its source in a mix (the spec's) */
    atomic_ullong *bucket_samples; /* per aspect bucket: samples handed to the caller */
    size_t nbuckets;
    uint64_t delivered_position;
    struct ShardOrder *delivered_order; /* the order of the batches handed out (a reference) */

    /* statistics (shard_loader_stats) */
    double opened;                /* when */
    _Atomic double producer_time; /* seconds of ended producer runs */
    _Atomic double producer_start;/* when the running one began; 0: none runs */
    _Atomic double reader_time;   /* seconds the producer spent in shard_reader_take */
    atomic_ullong delivered, delivered_bytes; /* samples handed to the caller */
    ShardTrace *trace;            /* settings.trace_path: spans of every stage */
    double wait;                  /* shard_loader_set_wait: the longest next waits, 0: no limit */
    char *trace_path;
};

#endif /* SHARD_LOAD_LOADERDEF_H */
