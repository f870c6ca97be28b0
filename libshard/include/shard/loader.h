/*
 * libshard — the batch loader: the streaming reader, a pool of decode threads and a ring
 * of reusable batch buffers. Batches hold decoded images (one contiguous buffer), labels
 * and keys, in the reader's deterministic order whatever the decode timing.
 *
 * Threads: one producer thread takes samples from the reader and deals them to batch
 * slots; `threads` decode threads decode each into its place in the batch buffer; the
 * caller's thread only waits for the next complete batch. Memory: `batches` batch buffers,
 * allocated once and reused; keys and raw fields go into per-batch buffers that grow to the
 * largest batch and are then reused: no allocation per sample in steady state beyond the
 * reader's. Everything a batch hands out (images, labels, keys, raw fields) comes from the
 * allocator hook (common.h says on which threads it is called).
 */
#ifndef SHARD_LOADER_H
#define SHARD_LOADER_H

#include "common.h"
#include "decode.h"
#include "reader.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ShardLoaderSettings {
    ShardReaderSettings reader; /**< what to read and how to split and shuffle it */
    ShardTransform transform;   /**< decode and augmentation */
    size_t batch_size;          /**< samples per batch (default 256) */
    int drop_last;              /**< drop the epoch's last batch when it is short (default 0:
                                     keep); skip_errors never shortens a batch (a skipped
                                     sample's place holds a marked repeat) */
    int threads;                /**< decode threads; 0: one per CPU this process may use,
                                     shard_cpus_available (default 0) */
    size_t batches;             /**< batch buffers in the ring (default 4): prefetch depth
                                     plus the batches the caller holds */
    /** Field names tried in order for the image, ';'-separated (default "jpg;jpeg;png;webp") */
    const char *image_fields;
    const char *label_field;    /**< decimal class index (default "cls"); NULL for none */
    /** Memory for the batches' images and labels (pinned host memory, for instance); NULL
     *  for shard_default_allocator(). Borrowed: must outlive the loader. */
    const ShardAllocator *allocator;
    /** Fields carried raw into each batch, ';'-separated (the image or label field too,
     *  when named); "*" (default): every field but the image and the label; NULL or "":
     *  none */
    const char *raw_fields;
    /** A sample whose label field is missing or not a decimal class index:
     *  SHARD_LABEL_ERROR (default) makes it an error naming the sample and the field (left
     *  out and counted under reader.skip_errors); SHARD_LABEL_MINUS_ONE gives it label -1 */
    int missing_label;
    /** Where to write a trace of the stages' spans (Chrome trace event JSON: Perfetto,
     *  chrome://tracing) when the loader is freed; NULL: none (default). Borrowed for
     *  shard_loader_open (copied). shard_loader_trace_write writes one at any time. */
    const char *trace_path;
    /** The most spans a trace keeps (default 1048576, about 40 MB); later ones are counted
     *  in its otherData.dropped_spans */
    size_t trace_spans;
    /** The memory the decode threads' decodes take together, as each image's header says
     *  (an upper bound of what the decoder and the resize allocate; default 536870912,
     *  512 MiB; 0: no bound): a decode waits while the others hold too much, so that
     *  threads x the largest image need not fit. An image over this, or over
     *  transform.max_decode_memory (512 MiB), is refused, an error naming the sample. Each
     *  decode thread also keeps up to 16 MiB of buffers between images. */
    size_t decode_memory;
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[28];
} ShardLoaderSettings;

enum { SHARD_LABEL_ERROR = 0, SHARD_LABEL_MINUS_ONE = 1 };

/** One raw field of a batch: the samples' bytes back to back. */
typedef struct ShardBatchField {
    const char *name;              /**< field name, "json" */
    const unsigned char *data;     /**< sample i's bytes: data[offsets[i] .. offsets[i + 1]) */
    const uint64_t *offsets;       /**< size + 1 offsets */
    const unsigned char *present;  /**< size flags: 0 where sample i has no such field */
} ShardBatchField;

typedef struct ShardBatch {
    size_t size;              /**< samples in the batch (the last may be short) */
    void *images;             /**< size images of image_bytes each, as the transform says */
    size_t image_bytes;       /**< bytes per image */
    int64_t *labels;          /**< size labels; -1 where a sample has none (no label_field,
                                   or missing_label SHARD_LABEL_MINUS_ONE) */
    const char *const *keys;  /**< size sample keys */
    const char *const *urls;  /**< size shard urls */
    uint64_t epoch;           /**< epoch of the batch */
    uint64_t index;           /**< batch number within the epoch */
    size_t nfields;           /**< raw fields (settings.raw_fields), in order of first use */
    const ShardBatchField *fields; /**< nfields raw fields */
    /** size: each sample's index in the data set, the same whatever the shuffle, split or
     *  epoch: earlier shards' sample counts (in the shard list's order) plus its index in
     *  its shard; UINT64_MAX where counts are unknown */
    const uint64_t *indices;
    /** size flags: 1 where the sample is padding, a repeat of one the epoch delivers
     *  elsewhere (equal mode's; or, with skip_errors, one of the batch in a skipped
     *  sample's place), to leave out when gathering results */
    const unsigned char *repeats;
    /** size: each sample's seed for its random choices (crop, scale, flip), as
     *  shard_decode_transform takes it: the sample's image decoded alone with the batch's
     *  transform and this seed is the batch's image. It follows from the seed, the epoch
     *  and the sample (its shard, index and ShardSegment.round), not from the rank, the
     *  worker or the sample's place in the batch order. */
    const uint64_t *seeds;
    /** size: each sample's source in a mix (its index in ShardReaderSettings.sources); 0
     *  without a mix */
    const uint32_t *sources;
    /** Samples whose images the GPU decodes (an uploader with ShardUploadSettings.decoder
     *  "auto" or "gpu" asked for them): gpu_count of them, in batch order, their places in
     *  images not written on the host; each one's JPEG bytes (borrowed from the batch) and
     *  their sizes. 0 and NULL for every other batch. */
    size_t gpu_count;
    const uint32_t *gpu_index;
    const unsigned char *const *gpu_data;
    const size_t *gpu_size;
    /** size, with a GPU decoder hooked (else NULL): for each sample the GPU did not take, why
     *  (the decoder's code, counted in ShardUploadStats), 0 for the ones it took */
    const unsigned char *gpu_why;
    /** The images' size: the transform's, or with aspect_buckets the batch's bucket's */
    int height, width;
    /** With aspect_buckets the batch's bucket (its number in shard_reader_buckets), else -1 */
    int bucket;
} ShardBatch;

typedef struct ShardLoader ShardLoader;

/** Fills s with the defaults written beside each field (and the reader's and transform's). */
SHARD_API void shard_loader_default_settings(ShardLoaderSettings *s);

/**
 * Opens the reader and starts the threads.
 * @param out receives the loader, owned by the caller (shard_loader_free)
 * @param s borrowed; copied
 * @param err optional; what failed and where
 */
SHARD_API int shard_loader_open(ShardLoader **out, const ShardLoaderSettings *s, ShardError *err);

/**
 * Waits for the next batch of the epoch.
 * @param out receives the batch, valid until shard_batch_release (or the loader is freed)
 * @return 0; SHARD_EOS at the end of the epoch; SHARD_AGAIN when shard_loader_set_wait's wait
 *         passed first; SHARD_ERR_STATE when every batch buffer is
 *         held by the caller; another error with shard_loader_error saying which sample,
 *         shard and member failed (unless the reader skips errors: then bad samples are
 *         left out of their batch and counted)
 */
SHARD_API int shard_loader_next(ShardLoader *l, const ShardBatch **out);

/** Gives a batch buffer back to the ring; may be called from any thread. */
SHARD_API void shard_batch_release(ShardLoader *l, const ShardBatch *b);

/** Starts epoch e from its beginning (held batches stay valid until released). On failure
 *  shard_loader_next returns the same error until an epoch or a restore succeeds. */
SHARD_API int shard_loader_set_epoch(ShardLoader *l, uint64_t e);

/** The job's state after the last batch returned, for restore: shard_reader_state's form
 *  (reader.h), this loader's partitions exact and every other consumer in step with it
 *  (as many batches of batch_size since its epoch or restore began, or all it had). */
SHARD_API int shard_loader_state(const ShardLoader *l, char *buf, size_t size);

/** Continues the epoch of a state (shard_reader_restore: on any number of ranks and
 *  workers, with the same order settings; the batch size may differ).
 *  A malformed state changes nothing; a state the reader refuses (taken with other
 *  settings) leaves shard_loader_next returning that error until an epoch or a restore
 *  succeeds. */
SHARD_API int shard_loader_restore(ShardLoader *l, const char *state);

/** @return batches per epoch for this consumer, -1 if unknown */
SHARD_API int64_t shard_loader_epoch_batches(const ShardLoader *l);

/** @return the reader's seed */
SHARD_API uint64_t shard_loader_seed(const ShardLoader *l);

/** The longest shard_loader_next waits for a batch before it returns SHARD_AGAIN, having
 *  changed nothing (default 0: as long as it takes): a caller that must stay responsive (to
 *  Ctrl-C, a deadline) waits in slices. Not thread-safe against a running next. */
SHARD_API void shard_loader_set_wait(ShardLoader *l, double seconds);

/** Stops the loader's threads, and the commands and transfers they wait on (a pipe:
 *  shard's command is ended), at once; held batches stay valid. shard_loader_next then
 *  fails until set_epoch or restore. For a caller giving up (Ctrl-C) that may not get to
 *  shard_loader_free (a process leaving with _exit). */
SHARD_API void shard_loader_stop(ShardLoader *l);

/** Batch buffers the caller holds (returned by shard_loader_next, not yet released), and
 *  the ring's size (ShardLoaderSettings.batches): a caller that keeps batches copies one
 *  out before the ring runs dry. */
SHARD_API void shard_loader_held(const ShardLoader *l, size_t *held, size_t *batches);

/** @return samples left out of batches in skip mode (reader.skip_errors), all reasons */
SHARD_API uint64_t shard_loader_skipped(const ShardLoader *l);

/** @return batches dropped in skip mode because every one of their samples was left out
 *  (a batch with one good sample keeps its size: the skipped samples' places hold marked
 *  repeats of its good ones, ShardBatch.repeats) */
SHARD_API uint64_t shard_loader_skipped_batches(const ShardLoader *l);

/** Why the loader left a sample out in skip mode. */
typedef enum ShardBadSample {
    SHARD_BAD_IMAGE = 1,    /**< the image did not decode (corrupt, truncated, unsupported) */
    SHARD_BAD_NO_IMAGE = 2, /**< no image field */
    SHARD_BAD_LABEL = 3,    /**< the label field is missing or not a class index */
    SHARD_BAD_N
} ShardBadSample;

/** @return samples left out for that reason so far (skip mode) */
SHARD_API uint64_t shard_loader_skipped_by(const ShardLoader *l, ShardBadSample why);

/** The reader's counters (shards and samples it skipped after errors, ...), since the loader
 *  opened, as of the epoch the caller is in: what the loader has read ahead into the next
 *  epoch counts once the caller moves there (shard_loader_set_epoch). See
 *  shard_reader_stats. */
SHARD_API void shard_loader_reader_stats(const ShardLoader *l, ShardReaderStats *out);

/** One stage of the pipeline, counted since the loader opened. A stage's time is busy
 *  (working, I/O included), waiting for input, or waiting for room for its output.
 *  Stages run inline on one thread (fetch, decompress and parse on each fetch stream) share
 *  its time: while one works, the one before waits for output and the one after for input.
 *  "list" runs once, before the others: its seconds are its own, outside wall_seconds. */
typedef struct ShardStageStats {
    const char *name;            /**< "list", "fetch", "decompress", "parse", "shuffle",
                                      "batch", "decode", "upload", "deliver" (static) */
    unsigned threads;            /**< threads the stage runs on (shuffle and batch share one);
                                      0: the stage is not in this pipeline (upload, but for
                                      shard_uploader_loader_stats) */
    uint64_t items;              /**< samples through the stage (list: shards) */
    uint64_t bytes;              /**< their bytes (fetch: as stored; decompress: out of zstd;
                                      parse, shuffle, batch: members; decode and deliver:
                                      decoded images) */
    double seconds;              /**< threads x the loader's life: busy + both waits */
    double busy_seconds;         /**< working (fetch: opening and reading shards, waiting on
                                      the disk or network included) */
    double wait_input_seconds;   /**< blocked on the stage before, or with no work (a fetch
                                      stream between shards, the producer between epochs) */
    double wait_output_seconds;  /**< blocked on the stage after (a full queue, no buffer) */
    size_t queue_fill, queue_capacity; /**< the queue after the stage, now */
} ShardStageStats;

enum {
    SHARD_STAGE_LIST, SHARD_STAGE_FETCH, SHARD_STAGE_DECOMPRESS, SHARD_STAGE_PARSE,
    SHARD_STAGE_SHUFFLE, SHARD_STAGE_BATCH, SHARD_STAGE_DECODE, SHARD_STAGE_UPLOAD,
    SHARD_STAGE_DELIVER, SHARD_STAGES
};

typedef struct ShardLoaderStats {
    double wall_seconds;                   /**< since the shards were listed */
    ShardStageStats stages[SHARD_STAGES];  /**< in data-flow order (SHARD_STAGE_*);
                                                "deliver" is the caller: its busy time is
                                                the caller's own work (the training step),
                                                its input wait the time it waited for a
                                                batch */
    int bottleneck;   /**< the stage the others wait on (an index into stages; never list) */
    /** The list stage's indexes: made at open for shards without one, and found in the
     *  cache (ShardReaderStats) */
    uint64_t indexes_built, indexes_cached;
    /** Decodes that waited for room in decode_memory (ShardLoaderSettings) */
    uint64_t decode_memory_waits;
    /** What the numbers say, e.g. "decode: busy 97% of 2 threads; batch waits on it for
     *  room 41%, deliver for batches 52%", or that the caller is the limit */
    char verdict[256];
} ShardLoaderStats;

/**
 * Writes the spans recorded so far (a loader opened with trace_path) to path, in the Chrome
 * trace event format: one span per shard fetched, per batch shuffled and assembled, per
 * sample decoded and per wait of the caller for a batch, on the threads that ran them.
 * @return 0; SHARD_ERR_STATE when the loader records no trace; SHARD_ERR_IO
 */
SHARD_API int shard_loader_trace_write(const ShardLoader *l, const char *path, ShardError *err);

/**
 * The aspect buckets (aspect_buckets) and the samples delivered in each since the loader
 * opened; any thread.
 * @param heights, widths, samples receive up to n entries, in shard_reader_buckets' order
 *        (each optional)
 * @return the number of buckets; 0 when the loader is not bucketed
 */
SHARD_API size_t shard_loader_buckets(const ShardLoader *l, int *heights, int *widths,
                                      uint64_t *samples, size_t n);

/** Fills out with every stage's counters and names the bottleneck; any thread. */
SHARD_API void shard_loader_stats(const ShardLoader *l, ShardLoaderStats *out);

/** @return the message of the last failure (borrowed), "" if none */
SHARD_API const char *shard_loader_error(const ShardLoader *l);

/** Stops the threads and frees everything; accepts NULL; sets *l to NULL. */
SHARD_API void shard_loader_free(ShardLoader **l);

/**
 * Which samples were in step N: a job's batches named from the order alone (manifests and
 * indexes; no sample byte read), for the job's loader settings and topology. A rank's
 * steps are its workers' batches as a DataLoader hands them out (worker 0 first, then each
 * in turn, a worker whose batches ended passed over), counted from the epoch's start.
 */
typedef struct ShardStepPlan ShardStepPlan;

/** One sample of a step. Strings borrowed from the plan: valid until its next call. */
typedef struct ShardStepSample {
    const char *key;   /**< the sample's key */
    const char *url;   /**< its shard */
    uint32_t shard;    /**< the shard's number in the job's shard list */
    uint64_t index;    /**< the sample's number in its shard, from 0 */
    int rank, worker;  /**< the consumer that delivers it */
    uint64_t position; /**< its place in that consumer's epoch */
    uint64_t step;     /**< the rank's step it is in, from the epoch's start */
    uint64_t slot;     /**< its place in that step's batch */
    int repeat;        /**< equal mode's pad ("__pad__"): a repeat of an earlier sample */
} ShardStepSample;

/** shard_step_keys' rank: every rank's batch of the step, rank after rank */
enum { SHARD_STEP_ALL_RANKS = -1 };

/**
 * Opens a step plan for the job s describes: its reader settings (the seed given:
 * have_seed), batch_size and drop_last; s->reader.world_size and num_workers are the job's
 * topology (rank and worker are ignored). Shards without an index are indexed once (the
 * index cache), as the loader would for a mode that needs every count.
 * @param state the state the job resumed its epoch from (shard_loader_state's, the job's;
 *        NULL: none), checked as a restore checks it: its epoch's steps are named across the
 *        topologies it ran on (the state records its last 8), from the epoch's start.
 *        Borrowed for the call.
 * @param out receives the plan, owned by the caller (shard_step_plan_free)
 * @return 0, or the reader's error (a shard list that does not open, resampled mode, a
 *         state of other settings, named)
 */
SHARD_API int shard_step_plan_open(ShardStepPlan **out, const ShardLoaderSettings *s,
                                   const char *state, ShardError *err);

/** Steps of epoch `epoch` on rank `rank`; a negative error code (the message:
 *  shard_step_plan_error). */
SHARD_API int64_t shard_step_plan_steps(ShardStepPlan *p, uint64_t epoch, int rank);

/**
 * The samples of step `step` of epoch `epoch` on rank `rank` (SHARD_STEP_ALL_RANKS: every
 * rank's), in batch order; only the partition each lies in is replayed.
 * @param out receives the samples, borrowed from the plan until its next call
 * @return 0, or SHARD_ERR_INVALID (a step past the epoch's end, naming its last; a rank not
 *         below the world size the job had at that step, naming it; a step before the
 *         readings the state keeps), or an index's error
 */
SHARD_API int shard_step_keys(ShardStepPlan *p, uint64_t epoch, uint64_t step, int rank,
                              const ShardStepSample **out, size_t *n);

/**
 * The reverse: every (step, rank, slot) of key in epoch `epoch` (a mix may repeat a
 * sample). Names the whole epoch of every consumer: its time and memory are the epoch's
 * order's, read index by index (bench/RESULTS.md).
 * @return 0, SHARD_ERR_NOT_FOUND ("not in epoch E"), or an index's error
 */
SHARD_API int shard_step_where(ShardStepPlan *p, const char *key, uint64_t epoch,
                               const ShardStepSample **out, size_t *n);

/** A consumer of a job: its topology then, and its place in it. */
typedef struct ShardStepConsumer {
    int world_size, num_workers; /**< the job's topology at the step */
    int rank, worker;            /**< the consumer that delivers the step */
} ShardStepConsumer;

/**
 * The state from which the consumer that delivers step `step` of rank `rank` delivers that
 * step's batch first: a loader of the plan's settings placed as *who says (its reader's
 * world_size, num_workers, rank and worker), restored to it, hands out the very batch,
 * decoded and augmented as the job had it (shardcat batch --show draws it).
 * @param buf receives the state (SHARD_READER_STATE_MAX is always enough)
 * @return 0, or SHARD_ERR_INVALID (a step past the epoch's end on that rank; a rank not
 *         below the world size then; the state does not fit in size bytes)
 */
SHARD_API int shard_step_state(ShardStepPlan *p, uint64_t epoch, uint64_t step, int rank,
                               ShardStepConsumer *who, char *buf, size_t size);

/** The order_only reader the plan names samples with (its list, remote and statistics);
 *  borrowed from the plan. */
SHARD_API ShardReader *shard_step_plan_reader(ShardStepPlan *p);

/** The plan's world size: the job's now. */
SHARD_API int shard_step_plan_world(const ShardStepPlan *p);

/** What the plan's last failing call said. */
SHARD_API const char *shard_step_plan_error(const ShardStepPlan *p);

/** Frees a plan and sets *p to NULL; accepts NULL. */
SHARD_API void shard_step_plan_free(ShardStepPlan **p);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_LOADER_H */
