/*
 * libshard — the streaming reader: a shard list in, an endless, well-mixed, correctly
 * partitioned stream of samples out, for one consumer of a distributed training job.
 *
 * An epoch's order (formats/order.md) depends only on the seed and the epoch, so every
 * consumer computes it on its own: the shards shuffled, their samples in sequence, the
 * sequence cut into canonical partitions, each read through a shuffle buffer of its own as
 * a deterministic stream; a rank takes a contiguous block of partitions and each of its
 * workers a part of that block, reading its partitions one after the other. A partition
 * reads several of its shards at once, interleaved sample by sample. So each partition's
 * samples come in the same order on any number of ranks and workers, whatever the thread
 * timing, and a state (the epoch, how far each partition was delivered, the settings that
 * fix the order) continues the epoch on another number of ranks and workers, delivering
 * every sample not yet delivered exactly once.
 *
 * Threads: one fetch thread per stream reads shards ahead into bounded queues; everything
 * else runs on the thread that calls shard_reader_next. Memory is bounded by the settings:
 * the streams' queues and the samples they are reading (streams x queue_depth samples, and
 * at most memory_budget bytes) and shuffle_buffer samples, plus the samples the caller keeps
 * from shard_reader_take (each may hold its shard's mapping open).
 */
#ifndef SHARD_READER_H
#define SHARD_READER_H

#include "common.h"
#include "remote.h"
#include "file.h"
#include "list.h"
#include "sample.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How an epoch's samples are split between consumers. */
typedef enum ShardMode {
    /** Each sample of the epoch goes to exactly one consumer; counts differ by at most one
     *  sample between consumers when sample counts are known. */
    SHARD_MODE_EXACT = 0,
    /** Every rank gets the same number of samples (needs sample counts): the remainder is
     *  dropped, or padded by repeating samples from the start of the epoch (pad). */
    SHARD_MODE_EQUAL = 1,
    /** Shards drawn with replacement, endless or epoch_samples long per consumer. */
    SHARD_MODE_RESAMPLED = 2,
} ShardMode;

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
    /** The batch size the consumer's samples are taken in (the loader sets its own), with
     *  drop_last: equal mode's repeats after a resume on another topology give every rank
     *  the same number of batches, and states count other consumers in these (default 1) */
    uint64_t batch_size;
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
    /** Let a remote manifest list local paths and file:// URLs
     *  (ShardListSettings.manifest_local; default 0) */
    int manifest_local;
    /** Map local shards (ShardFileSettings.map): zero-copy, about twice the raw reading
     *  speed, but a shard truncated while mapped kills the process (default 0) */
    int map_files;
    /** Bytes the fetch streams may hold, all together (default 268435456, 256 MiB; 0:
     *  only queue_depth and the per-sample limit bound them). Each stream's share is
     *  halved between its queue and the sample it is reading, and a sample larger than
     *  that half, memory_budget / (2 x streams), is an error naming this setting (skipped
     *  and counted with skip_errors): memory follows this setting whatever the samples
     *  weigh. Raise it for large samples (video: streams x 2 x the largest sample). */
    size_t memory_budget;
    /** Where the indexes libshard makes for shards without one are kept
     *  (ShardListSettings.index_cache; NULL: the default folder). Borrowed. */
    const char *index_cache;
    /** Make the indexes of shards that have no count (plain tars: no manifest, no .idx)
     *  at open, kept in index_cache: SHARD_READER_INDEXES_AUTO (0, default) for every shard
     *  where the mode needs every count (a mix, equal mode, epoch_samples outside
     *  resampled mode), else for uncompressed tars, local or remote (a walk over their
     *  headers; a remote one's bytes streamed once per machine), so that a state moves to
     *  any topology and the order is the same wherever the bytes live (formats/order.md);
     *  SHARD_READER_INDEXES_ALWAYS
     *  (the epoch's length known for any list, as len() wants it);
     *  SHARD_READER_INDEXES_NEVER (a mode that needs counts is refused, naming the shard) */
    int make_indexes;
    /** Canonical partitions of an epoch (formats/order.md), 0 for a count chosen from the
     *  data: the largest of 2880, 1440, 720, 360, 240, 120, 60, 24, 12, 6, 2, 1 that leaves
     *  partitions of at least max(shuffle_buffer, 256, streams x the mean shard's samples)
     *  (a shard each without counts), else world_size x the least of 1, 2, 3, 4, 6, 12,
     *  24, 36, 48, 60, ... that gives every worker as many. A count the topology does not
     *  fit (fewer partitions than consumers; equal mode: one world_size does not divide)
     *  is spread, partitions split at a sample; resampled mode refuses it. A state keeps
     *  its own, and resumes on any topology (default 0) */
    uint32_t partitions;
    int drop_last; /**< see batch_size (default 0) */
    /** Aspect-ratio buckets (NULL: none; borrowed for shard_reader_open, copied): "HxW[,HxW
     *  ...]", "sdxl" or "auto[:K]" (shard_aspect_buckets), the named sets scaled to
     *  aspect_side. The samples come in batches of batch_size, each one bucket's: a
     *  sample goes to the bucket nearest its image's aspect (the shards' image sizes,
     *  ShardListEntry.columns), and a batch is delivered when its bucket's batch_size-th
     *  sample comes on the epoch's line, so which batch a sample is in is part of the
     *  epoch's order and states resume it on any topology. Samples whose batch is not
     *  complete at the line's end make at most one partial batch per bucket, delivered by
     *  the consumer whose region ends the line (dropped with drop_last). Memory: at most
     *  buckets x (batch_size - 1) samples wait for their batch. Needs every shard's count
     *  and image sizes; exact mode. A sample without an image size is an error, or with
     *  skip_errors in no batch (on every consumer alike, counted: skipped_unsized); a
     *  shard's rest skipped after an error stops the reading even so, since it would move
     *  every later sample's place (default NULL) */
    const char *aspect_buckets;
    int aspect_side; /**< the output side named sets and "auto" are scaled to (default 256) */
    /** Name the samples without reading them (default 0): the epoch's order from the
     *  manifests and indexes alone, for shard_reader_name_next and shard_reader_seek (which
     *  step in the question "which samples were in step N"). No fetch thread runs and no
     *  sample byte is read; every shard's count is needed (made_indexes is then 'always'),
     *  and each shard's index is read for its names when first named. Refused with
     *  resampled mode, whose draws are no order to look up. shard_reader_take and
     *  shard_reader_next are refused on such a reader. */
    unsigned char order_only;
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[3];
    /** A view: the path of a file of sample keys, one a line (NULL: every sample; borrowed
     *  for shard_reader_open). Only the samples whose __key__ it lists are planned and read:
     *  each shard's chosen samples are found in its index before any shard byte is read
     *  (an index is made where a shard has none, as make_indexes 'always'), a shard with
     *  none chosen is not opened, and each chosen sample is read through the index alone.
     *  Counts, len and states follow the view; a state records it (its chosen samples'
     *  count and fingerprint) and is refused by a reader with another. Keys that choose no
     *  sample are counted (ShardReaderStats.keys_missing), never an error. Memory: the
     *  file's size plus 9 bytes a key while the view is made, then 8 bytes a chosen
     *  sample. With sources, the view of each is its chosen samples (a mix's shares are of
     *  the views' sizes). Exact and equal modes; refused with aspect_buckets, for now
     *  (default NULL) */
    const char *keys;
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
    /** samples a bucketed reading left out under skip_errors, their image's size unknown
     *  (aspect_buckets; each kept among the errors) */
    uint64_t skipped_unsized;
    /** keys: the keys given (each once), those that chose no sample, the samples chosen */
    uint64_t keys_given, keys_missing, keys_chosen;
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
 * A sample's aspect bucket (aspect_buckets).
 * @param it a sample shard_reader_take gave (borrowed); NULL: the one shard_reader_next gave
 *        last
 * @param height, width receive the bucket's size (optional)
 * @param batch_end receives 1 when the sample is its batch's last (optional)
 * @return the bucket's number, or -1 when the reader is not bucketed or gave none
 */
SHARD_API int shard_reader_bucket(const ShardReader *r, const ShardItem *it, int *height,
                                  int *width, int *batch_end);

/**
 * The reader's aspect buckets (aspect_buckets, "auto" fitted at open).
 * @param heights, widths receive up to n sizes (optional)
 * @return how many buckets there are; 0 when the reader is not bucketed
 */
SHARD_API size_t shard_reader_buckets(const ShardReader *r, int *heights, int *widths, size_t n);

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

/** Bytes that hold any state shard_reader_state or shard_loader_state writes: a cut of
 *  three runs per consumer for 8192 consumers. Allocate it; a state seldom needs 1 KiB. */
#define SHARD_READER_STATE_MAX (512 * 1024)

/**
 * The state of the job at this consumer's position: "v4:EPOCH:SEED:" then KEY=VALUE pairs,
 * comma-separated, of every setting that fixes the epoch's order (mode, pad,
 * epoch_samples, shuffle_shards, shuffle_buffer, shuffle_initial, streams, sources, a
 * fingerprint of the weights, shards, counted, list: a fingerprint of the shards' names
 * (the last part of their URLs) and counts, so the same shards moved from disk to a bucket
 * keep their states; partitions and total), those it was taken on (world_size,
 * num_workers), then ';' and the cut: with every count known, the epoch's samples not yet
 * delivered and the consumers' regions ("left=480-2000,2480-4000;edges=2000"), without,
 * how far each partition was delivered, in runs ("parts=0-11:d,12:117,13-23:0,...";
 * formats/order.md). This consumer's position is exact; every other consumer is taken to
 * have delivered as many samples as this one since its reading began (or all it had), as
 * ranks in step do, or, without counts, is not said ("A-B:?"). Any consumer's state
 * therefore restores every consumer of a job in step.
 * @param buf receives the NUL-terminated state; caller-owned, size bytes
 * @return 0; SHARD_ERR_INVALID when it does not fit in size bytes
 */
SHARD_API int shard_reader_state(const ShardReader *r, char *buf, size_t size);

/**
 * The job's state after each rank delivered `batches` batches of batch_size (drop_last)
 * since this reader's epoch or restore began, taking its num_workers workers' batches in
 * turn from worker `first` as a DataLoader does (a worker whose stream ended is skipped;
 * a DataLoader begins at its worker 0, which a caller may have read another worker's
 * partitions, to go on in the turn an interrupted one was at). For
 * a training loop's main process that counts batches and holds no reader of its own
 * (libshard.torch.ShardLoader): open a reader with the job's settings, restore the state
 * the run began from (no reading happens until a sample is taken), ask here.
 * @return 0; SHARD_ERR_UNSUPPORTED without every shard's count; SHARD_ERR_INVALID when it
 *         does not fit in size bytes
 */
SHARD_API int shard_reader_state_after(const ShardReader *r, uint64_t batches, uint64_t batch_size,
                                       int drop_last, int first, char *buf, size_t size);

/**
 * Continues the epoch from a state taken by shard_reader_state (or shard_loader_state,
 * shard_reader_state_after) on readers with the same order settings, on any number of
 * ranks and workers: on the topology it was taken on, this consumer's own rest, in the
 * order of the uninterrupted run; on another, its share of what is left, spread so that
 * ranks get counts a sample apart (a partition split at a sample where it must); equal
 * mode adds at most a batch of repeats (marked) so that every rank still gets the same
 * number of batches. Every sample not yet delivered comes once over the job. Reading
 * starts at the next take: a partition entered in its middle is replayed on the samples'
 * identities and only the samples still in its shuffle buffer are read (by index where
 * there is one). A state whose settings differ from this reader's is refused, naming each
 * with its value in the state and here; so is one that does not say how far this
 * consumer's partitions were delivered (without counts), and one of an older order (0.2's
 * v1, v2), saying how to go on; libshard 0.4's v3 states are read. A reader made without
 * a seed takes the state's. Later epochs run as on this topology from the start.
 * @return 0; SHARD_ERR_INVALID for a malformed state or one taken with other settings
 */
SHARD_API int shard_reader_restore(ShardReader *r, const char *state);

/**
 * One state from the states of a job's consumers (ranks, or DataLoader workers) taken at
 * the same point (each consumer's own position from its own state), for shards without counts, where a consumer's state says only its own
 * partitions: each partition as the consumer that reads it says (a consumer's own
 * partitions are exact), else as any state says.
 * @param states, n the states (borrowed); the same epoch, seed and settings
 * @param buf receives the merged state (size bytes, SHARD_READER_STATE_MAX suffice)
 * @return 0; SHARD_ERR_INVALID (states of other settings, malformed, too long)
 */
SHARD_API int shard_reader_state_merge(const char *const *states, size_t n, char *buf,
                                       size_t size, ShardError *err);

/** @return rank `rank`'s batches of batch_size (drop_last) in the epoch (-1: this
 *  reader's rank), its num_workers workers' together (each ends on its own partial batch),
 *  from the epoch's start or a restore's cut; -1 without every shard's count, endless, or
 *  no such rank */
SHARD_API int64_t shard_reader_rank_batches(const ShardReader *r, int rank, uint64_t batch_size,
                                            int drop_last);

/** @return the partition count of the current epoch (the setting, the one chosen, or a
 *  restored state's) */
SHARD_API uint32_t shard_reader_partitions(const ShardReader *r);

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

/** @return the number of samples this consumer gets in the epoch (after a restore: those
 *  of its partitions delivered before included, and equal mode's repeats), -1 if unknown
 *  (no counts, or endless resampling) */
SHARD_API int64_t shard_reader_epoch_length(const ShardReader *r);

/** Fills st with the counters so far. */
SHARD_API void shard_reader_stats(const ShardReader *r, ShardReaderStats *st);

/**
 * The errors kept in skip mode, oldest first: i from 0; NULL past the last (at most 16 kept).
 */
SHARD_API const char *shard_reader_kept_error(const ShardReader *r, size_t i);

/** @return the message of the last failure (borrowed), "" if none */
SHARD_API const char *shard_reader_error(const ShardReader *r);

/** A sample named without reading it (ShardReaderSettings.order_only). Strings borrowed:
 *  valid until the next call on the reader. */
typedef struct ShardSampleName {
    const char *key;   /**< its key, from its shard's index */
    const char *url;   /**< its shard, as listed */
    uint32_t shard;    /**< the shard's number in shard_reader_list */
    uint64_t index;    /**< the sample's number in its shard, from 0 */
    uint64_t position; /**< its place in this consumer's epoch, from 0 (aspect_buckets: its
                            batch's last place) */
    int repeat;        /**< equal mode's pad: a repeat of a sample from the epoch's start */
    int bucket;        /**< aspect_buckets: its bucket's number, else -1 */
    int batch_end;     /**< aspect_buckets: 1 when it is its batch's last, else 0 */
} ShardSampleName;

/**
 * An order_only reader's next sample, named from the order alone: the one the same reader
 * reading would give (with skip_errors: the planned one, as though no sample failed).
 * @return 0, SHARD_EOS at the epoch's end, or an error (a shard with no index to name its
 *         samples from, named)
 */
SHARD_API int shard_reader_name_next(ShardReader *r, ShardSampleName *out);

/**
 * Moves an order_only reader so that its next sample is the one at `position` of this
 * consumer's epoch (the epoch set, or the state restored; positions from the epoch's
 * start): only the partition it lies in is replayed, on identities. Past the epoch's end,
 * the next call ends the epoch.
 * @return 0, or SHARD_ERR_INVALID (not order_only; a position delivered before the
 *         restored state's reading began)
 */
SHARD_API int shard_reader_seek(ShardReader *r, uint64_t position);

/**
 * Makes an order_only reader name consumer (rank, worker)'s order of the same topology
 * (world_size, num_workers) from the start of epoch e: one reader, its list and indexes,
 * answers for every consumer of a job.
 * @return 0, or SHARD_ERR_INVALID (not order_only; a rank or worker out of range, named)
 */
SHARD_API int shard_reader_set_consumer(ShardReader *r, int rank, int worker, uint64_t e);

/** Indexes an order_only reader has read to name samples (the bytes it read: these and the
 *  list's). */
SHARD_API uint64_t shard_reader_indexes_read(const ShardReader *r);

/** Stops the threads, frees the reader and sets *r to NULL; accepts NULL. */
SHARD_API void shard_reader_free(ShardReader **r);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_READER_H */
