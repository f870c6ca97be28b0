/*
 * libshard — the streaming reader: a shard list in, an endless, well-mixed, correctly
 * partitioned stream of samples out, for one consumer of a distributed training job.
 *
 * An epoch's plan (shard shuffle, split by rank, then by worker) depends only on the seed
 * and the epoch, so every consumer computes the same plan on its own. A consumer reads
 * several of its shards at once, interleaves them sample by sample, and mixes them through
 * a shuffle buffer. The sequence it yields is a pure function of (seed, epoch, rank, world
 * size, worker, worker count) and the data, whatever the thread timing, and its state is
 * two numbers (epoch, position) from which a new reader continues the same sequence, with
 * the settings that fix the order, so that a reader that differs refuses it.
 *
 * Threads: one fetch thread per stream reads shards ahead into bounded queues; everything
 * else runs on the thread that calls shard_reader_next. Memory is bounded by the settings:
 * the streams' queues (streams x queue_depth samples, and at most memory_budget bytes, one
 * sample per stream at least) and shuffle_buffer samples, plus the samples the caller keeps
 * from shard_reader_take (each may hold its shard's mapping open).
 */
#ifndef SHARD_READER_H
#define SHARD_READER_H

#include "common.h"
#include "remote.h"
#include "file.h"
#include "list.h"
#include "plan.h"
#include "sample.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One source of a mix: shard specs as ShardReaderSettings.urls takes them, and a weight. */
typedef struct ShardMixInput {
    const char *const *urls; /**< borrowed for shard_reader_open (copied) */
    size_t nurls;
    double weight; /**< > 0: the source's share of each epoch is weight / (sum of weights) */
} ShardMixInput;

typedef struct ShardReaderSettings {
    /** Shard list specs: paths, brace patterns, manifests, "pipe:" urls, in order; they are
     *  expanded and concatenated. Borrowed for shard_reader_open (copied). */
    const char *const *urls;
    size_t nurls;
    uint64_t seed;     /**< seed of every random choice */
    int have_seed;     /**< 0: a fresh random seed (shard_reader_seed tells it) (default 0) */
    uint64_t epoch;    /**< the epoch to start at (default 0) */
    int rank;          /**< -1: from $RANK, else 0 (default -1) */
    int world_size;    /**< -1: from $WORLD_SIZE, else 1 (default -1) */
    int worker;        /**< this consumer's worker within its rank (default 0) */
    int num_workers;   /**< workers per rank (default 1) */
    /** default SHARD_MODE_EXACT: every sample once, ranks perhaps a sample apart. With
     *  several ranks under DDP choose SHARD_MODE_EQUAL (every rank the same count), as
     *  shardcat stream and the Python dataset do when no mode is given. */
    ShardMode mode;
    int pad;           /**< equal mode: pad the remainder instead of dropping it (default 0) */
    /** Samples per consumer and epoch. Resampled mode: 0 endless. Exact and equal modes:
     *  0 for a pass over the data; else the shards are read as a mix of one source (see
     *  sources): repeated or a different part each epoch (default 0) */
    uint64_t epoch_samples;
    int shuffle_shards;     /**< shuffle the shard order each epoch (default 1) */
    size_t shuffle_buffer;  /**< sample shuffle buffer size, 0 for none (default 0) */
    size_t shuffle_initial; /**< samples in the buffer before the first is yielded;
                                 0 for the whole buffer (default 0) */
    size_t streams;         /**< shards read at once and interleaved (default 4) */
    size_t queue_depth;     /**< samples read ahead per stream (default 64) */
    int skip_errors;        /**< 0: fail on the first bad shard or member; 1: skip, count and
                                 keep the first errors for a report (default 0) */
    /** With counts known, a rank's samples are split between its workers in multiples of
     *  this many (the batch size), so only the last worker ends on a partial batch and the
     *  rank's batch count does not depend on the worker count (default 1) */
    uint64_t worker_align;
    /** Where remote shards (http, https, gs, s3) are read through, shared with other
     *  readers; NULL: the reader makes its own with the default settings (remote.h).
     *  Borrowed: it must outlive the reader. */
    ShardRemote *remote;
    /**
     * Several sources mixed by weight, instead of urls (NULL, 0: none). An epoch holds
     * epoch_samples per consumer (0: the sources' sizes summed, divided between the
     * consumers as one source's would be); each source gives its weight's share of it,
     * repeated pass after pass (each pass shuffled anew) when smaller than that share, a
     * different part each epoch when larger. The sources' samples are interleaved at random
     * from the seed, each source spread evenly through the epoch, then pass through the
     * shuffle buffer. Needs every shard's sample count; exact and equal modes. Each source
     * gets `streams` streams. Borrowed for shard_reader_open (copied).
     */
    const ShardMixInput *sources;
    size_t nsources;
    /** Let manifests name "pipe:COMMAND" shards (ShardListSettings.manifest_commands;
     *  default 0) */
    int manifest_commands;
    /** Map local shards (ShardFileSettings.map): zero-copy, about twice the raw reading
     *  speed, but a shard truncated while mapped kills the process (default 0) */
    int map_files;
    /** Bytes the fetch streams may hold read ahead, all together (default 268435456, 256
     *  MiB; 0: only queue_depth bounds them): with large samples the queues hold fewer,
     *  so memory follows this setting whatever the samples weigh (a stream always holds
     *  one) */
    size_t memory_budget;
    /** Where the indexes libshard makes for shards without one are kept
     *  (ShardListSettings.index_cache; NULL: the default folder). Borrowed. */
    const char *index_cache;
    /** Make the indexes of shards that have no count (plain tars: no manifest, no .idx)
     *  at open, kept in index_cache: SHARD_READER_INDEXES_AUTO (0, default) where the mode
     *  needs every count (a mix, equal mode, epoch_samples outside resampled mode),
     *  SHARD_READER_INDEXES_ALWAYS (the epoch's length known for any list, as len() wants
     *  it), SHARD_READER_INDEXES_NEVER (such a mode is refused, naming the shard) */
    int make_indexes;
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[12];
} ShardReaderSettings;

/** ShardReaderSettings.make_indexes */
enum {
    SHARD_READER_INDEXES_AUTO = 0,
    SHARD_READER_INDEXES_ALWAYS = 1,
    SHARD_READER_INDEXES_NEVER = 2
};

typedef struct ShardReaderStats {
    uint64_t samples;        /**< samples yielded */
    uint64_t bytes;          /**< member bytes yielded */
    uint64_t shards_opened;  /**< shard opens by the fetch threads */
    double wait_seconds;     /**< time shard_reader_next waited for data from the fetch threads */
    uint64_t skipped_shards; /**< shards (or their rest) skipped after an error */
    uint64_t skipped_samples;/**< samples known to be lost with them, when counts are known */
    uint64_t errors;         /**< errors seen (skip_errors) */
    double list_seconds;     /**< listing the shards at open: manifests, prefixes, counts */
    uint64_t shards;         /**< shards listed */
    /** The fetch threads' time (summed over them) in their inline stages: reading (opening
     *  shards, their I/O, waiting on the disk or network), decompressing .tar.zst frames,
     *  and parsing (the tar, the samples; inflating a .tar.gz, which libarchive does inside
     *  its parser, counts here) */
    double read_seconds, decompress_seconds, parse_seconds;
    uint64_t read_bytes;     /**< bytes read from the shards, as stored (compressed) */
    uint64_t decompressed_bytes; /**< bytes out of the .tar.zst frames decompressed */
    uint64_t indexes_built;  /**< indexes made at open for shards without one */
    uint64_t indexes_cached; /**< such indexes found in the cache, made by an earlier open */
} ShardReaderStats;

typedef struct ShardReader ShardReader;

/** Fills s with the defaults written beside each field. */
SHARD_API void shard_reader_default_settings(ShardReaderSettings *s);

/**
 * Expands the shard list, reads sample counts (manifests, or the .idx headers of local
 * shards), and starts the fetch threads on the first epoch.
 * @param out receives the reader, owned by the caller (shard_reader_free); NULL on failure
 * @param err optional; what failed and where
 */
SHARD_API int shard_reader_open(ShardReader **out, const ShardReaderSettings *s, ShardError *err);

/**
 * The next sample of this consumer's stream.
 * @param key, url receive the sample's key and shard (borrowed, valid until the next call)
 * @param fields, nfields receive its fields (borrowed, valid until the next call)
 * @return 0; SHARD_EOS at the end of the epoch (call shard_reader_set_epoch to go on);
 *         SHARD_AGAIN when shard_reader_set_wait's wait passed first; or
 *         an error (shard_reader_error says which shard, offset and member)
 */
SHARD_API int shard_reader_next(ShardReader *r, const char **key, const char **url,
                                const ShardFieldView **fields, size_t *nfields);

/**
 * The next sample as an owned item (sample.h), for a consumer that keeps samples past the
 * next call or hands them to another thread (a decode pool).
 * @param out receives the item, owned by the caller (shard_item_free); NULL at the end
 * @return as shard_reader_next
 */
SHARD_API int shard_reader_take(ShardReader *r, ShardItem **out);

/** @return the expanded shard list (borrowed, valid until the reader is freed) */
SHARD_API const ShardList *shard_reader_list(const ShardReader *r);

/** @return the ShardRemote remote shards are read through (its statistics: remote.h);
 *  borrowed, valid while r is */
SHARD_API ShardRemote *shard_reader_remote(const ShardReader *r);

/** Starts epoch e from its beginning (threads and buffers are kept). */
SHARD_API int shard_reader_set_epoch(ShardReader *r, uint64_t e);

/** Bytes that hold any state shard_reader_state or shard_loader_state writes. */
#define SHARD_READER_STATE_MAX 512

/**
 * The reader's state: "v2:EPOCH:POSITION:SEED:" then KEY=VALUE pairs, comma-separated, of
 * every setting that fixes the order of the rest of the epoch (world_size, rank,
 * num_workers, worker, mode, pad, epoch_samples, shuffle_shards, shuffle_buffer,
 * shuffle_initial, streams, worker_align, sources, weights, shards, counted, list: the
 * last a fingerprint of the shards' names, the last part of their URLs, and counts, so the
 * same shards moved from disk to a bucket keep their states), at most SHARD_READER_STATE_MAX
 * bytes.
 * @param buf receives the NUL-terminated state; caller-owned, size bytes
 * @return 0; SHARD_ERR_INVALID when it does not fit in size bytes
 */
SHARD_API int shard_reader_state(const ShardReader *r, char *buf, size_t size);

/**
 * Continues from a state taken by shard_reader_state on a reader with the same settings:
 * the samples it yields next are exactly those the other reader would have yielded next.
 * Skipped samples are not read where an index allows seeking. A state whose recorded
 * settings differ from this reader's is refused, the message naming each one with its
 * value in the state and here (the rank and worker excepted: rank 0's state restores the
 * other ranks, their positions agreeing); a reader made without a seed takes the state's.
 * 0.2's "v1:EPOCH:POSITION:SEED" states, which record only the seed, are still read.
 * @return 0; SHARD_ERR_INVALID for a malformed state or one taken with other settings
 */
SHARD_API int shard_reader_restore(ShardReader *r, const char *state);

/** The longest shard_reader_next and shard_reader_take wait for a sample before they
 *  return SHARD_AGAIN, having taken nothing (default 0: as long as it takes): a caller that
 *  must stay responsive (to Ctrl-C, a deadline) waits in slices. */
SHARD_API void shard_reader_set_wait(ShardReader *r, double seconds);

/** Stops the reader's threads, and the commands and transfers they wait on (a pipe:
 *  shard's command is ended), at once; takes then fail until set_epoch or restore. For a
 *  caller giving up (Ctrl-C) that may not get to shard_reader_free. */
SHARD_API void shard_reader_stop(ShardReader *r);

/** @return the seed in use (the given one or the fresh random one) */
SHARD_API uint64_t shard_reader_seed(const ShardReader *r);

/** @return the number of samples this consumer gets per epoch, -1 if unknown (no counts,
 *  or endless resampling) */
SHARD_API int64_t shard_reader_epoch_length(const ShardReader *r);

/** Fills st with the counters so far. */
SHARD_API void shard_reader_stats(const ShardReader *r, ShardReaderStats *st);

/**
 * The errors kept in skip mode, oldest first: i from 0; NULL past the last (at most 16 kept).
 */
SHARD_API const char *shard_reader_kept_error(const ShardReader *r, size_t i);

/** @return the message of the last failure (borrowed), "" if none */
SHARD_API const char *shard_reader_error(const ShardReader *r);

/** Stops the threads, frees the reader and sets *r to NULL; accepts NULL. */
SHARD_API void shard_reader_free(ShardReader **r);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_READER_H */
