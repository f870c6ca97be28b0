/*
 * libshard — the shard writer: samples in, complete shards out.
 *
 * A writer fills shards named by a printf pattern ("out/train-%06d.tar" or ".tar.zst"),
 * starts a new shard at maxcount samples or maxsize bytes, and writes each shard's index
 * ("train-000000.tar.zst" gets "train-000000.idx", formats/index.md)
 * when the shard is complete. Output is reproducible: the same samples and settings give
 * byte-identical files. A shard appears under its final name only once it is complete
 * (written to a hidden temporary name in the same folder, fsynced, renamed).
 *
 * A ShardWriter is used by one thread at a time; separate writers are independent.
 */
#ifndef SHARD_WRITER_H
#define SHARD_WRITER_H

#include "common.h"
#include "remote.h"
#include "file.h" /* ShardFileInfo */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ShardWriter ShardWriter;

typedef enum ShardCompression {
    SHARD_COMPRESSION_AUTO = 0, /**< from the pattern: ".tar.zst" gives zstd, else none */
    SHARD_COMPRESSION_NONE = 1, /**< plain tar */
    SHARD_COMPRESSION_ZSTD = 2, /**< zstd frames on sample boundaries + seek table */
} ShardCompression;

/** Digests of each shard for its manifest entry (ShardWriterSettings.checksums): bits. */
enum {
    SHARD_DIGEST_SHA256 = 1, /**< "sha256": fast where the CPU has SHA extensions */
    SHARD_DIGEST_MD5 = 2,    /**< "md5sum": what wids' shard indexes carry */
};

typedef struct ShardWriterSettings {
    /** Output pattern with exactly one integer conversion (%d, %06d, %u, ...): a path,
     *  file://, gs:// or s3:// (plain HTTP has no upload: refused). Without a conversion it
     *  names the one shard written, and maxcount and maxsize must be 0; that shard is
     *  written at finish even with no sample (an empty tar). Borrowed, copied by
     *  shard_writer_open. No default: must be set. */
    const char *pattern;
    uint64_t first_shard; /**< number given to the first shard (default 0) */
    uint64_t maxcount;    /**< samples per shard, 0 for no limit (default 100000) */
    /** Shard size limit in bytes as counted by shard_writer_sample_size(); a shard that
     *  holds a sample never grows past it with the next one; 0 for no limit (default 3e9) */
    uint64_t maxsize;
    ShardCompression compression; /**< default SHARD_COMPRESSION_AUTO */
    int level;                    /**< zstd level, 1..22 (default 3) */
    size_t frame_size;            /**< target uncompressed bytes per zstd frame (default 4 MiB) */
    int64_t mtime;                /**< mtime of every member (default 0) */
    /** write the .idx beside each shard, and the columns beside it (formats/columns.md:
     *  each sample's image size, from its header; "-" where it has no image or the header
     *  does not parse) (default 1) */
    int write_index;
    int checksums;                /**< digests of each shard: SHARD_DIGEST_* bits, 0 for none
                                       (default SHARD_DIGEST_SHA256) */
    int sync;                     /**< fsync shards and folders before renaming, writeback
                                       started as bytes are written (default 1) */
    /** gs:// and s3:// patterns: the remote the shards and indexes go up through, with its
     *  credentials, retries and upload_part; borrowed (the writer keeps a reference).
     *  NULL: one with the default settings (default). */
    ShardRemote *remote;
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[56];
} ShardWriterSettings;

/** One named field of a sample: a member "KEY.NAME" in the tar. */
typedef struct ShardField {
    const char *name; /**< field name, e.g. "jpg", "cls", "seg.png"; borrowed */
    const void *data; /**< bytes, borrowed for the duration of the call */
    size_t size;      /**< number of bytes */
} ShardField;

/** A sample: a key and its fields. Everything is borrowed for the duration of the call. */
typedef struct ShardSample {
    const char *key;          /**< e.g. "n01440764/n01440764_10026" (see formats/shard.md) */
    const ShardField *fields; /**< nfields fields, in any order (written sorted by name) */
    size_t nfields;
} ShardSample;

/** Fills s with the defaults written beside each field. */
SHARD_API void shard_writer_default_settings(ShardWriterSettings *s);

/**
 * Digests by name, as tools and bindings take them: "sha256", "md5", both comma-separated
 * in either order, or "none".
 * @param bits receives the SHARD_DIGEST_* bits
 * @return 0, or SHARD_ERR_INVALID for anything else (an unknown or empty name)
 */
SHARD_API int shard_digests_parse(const char *names, int *bits);

/**
 * Checks the settings and creates a writer. No file is created until the first sample.
 * @param out receives the writer, owned by the caller (shard_writer_free); NULL on failure
 * @param s settings; borrowed, copied
 * @param err optional; says which setting is wrong
 */
SHARD_API int shard_writer_open(ShardWriter **out, const ShardWriterSettings *s, ShardError *err);

/**
 * Writes one sample, starting a new shard first if the current one is full.
 * Keys must follow formats/shard.md (no '.' and no whitespace in the basename, no empty
 * component); field names must be non-empty, unique within the sample, without '/'.
 * After a failure other than SHARD_ERR_INVALID the writer is unusable (SHARD_ERR_STATE)
 * and its incomplete shard is removed when freed.
 * @param sample borrowed for the duration of the call
 */
SHARD_API int shard_writer_add(ShardWriter *w, const ShardSample *sample);

/**
 * Completes the current shard (tar end, last frame, seek table, fsync, rename, index).
 * The writer takes no further samples afterwards.
 */
SHARD_API int shard_writer_finish(ShardWriter *w);

/** @return the number of shards completed so far */
SHARD_API size_t shard_writer_count(const ShardWriter *w);

/** @return completed shard i (borrowed, valid until the writer is freed), NULL if out of range */
SHARD_API const ShardFileInfo *shard_writer_shard(const ShardWriter *w, size_t i);

/** @return the message of the last failure: what, which file, which member, which offset
 *  (borrowed, valid until the next call on w); "" if none */
SHARD_API const char *shard_writer_error(const ShardWriter *w);

/**
 * Frees the writer and sets *w to NULL. An unfinished shard is discarded: its temporary
 * file is removed and nothing appears under its final name. Accepts NULL.
 */
SHARD_API void shard_writer_free(ShardWriter **w);

/**
 * @return the bytes that sample counts for in maxsize: for each field, a 512-byte header
 * plus the data rounded up to 512 (the exact ustar size; pax headers for names longer than
 * ustar allows are not counted). Only names and sizes are read, data may be NULL.
 */
SHARD_API uint64_t shard_writer_sample_size(const ShardSample *sample);

/**
 * The rule that cuts shards, shared by the writer and the pack plan (pack.h): whether a
 * sample of sample_size bytes (shard_writer_sample_size) starts a new shard after one that
 * holds count samples of size bytes in all. maxcount and maxsize are 0 for no limit.
 * @return 1 when the shard is full for it: count reached maxcount, or the sample would take
 *         size past maxsize; 0 for an empty shard
 */
SHARD_API int shard_writer_rotates(uint64_t count, uint64_t size, uint64_t sample_size,
                                   uint64_t maxcount, uint64_t maxsize);

#ifdef __cplusplus
}
#endif

/**
 * Writes n bytes at data as the file or object url names (a path, file://, gs://, s3://),
 * whole or not at all: through a temporary beside it, fsynced and renamed into place, or
 * one upload. For what goes beside a set: a report, a picture.
 * @param remote gs://, s3://: borrowed; NULL for one with the default settings
 * @param err optional; names the URL
 */
SHARD_API int shard_put(const char *url, const void *data, size_t n, ShardRemote *remote,
                        ShardError *err);

#endif /* SHARD_WRITER_H */
