/*
 * libshard — reading one shard: its samples in order, or any sample by its index.
 *
 * Reads every tar dialect WebDataset reads (ustar, pax, GNU long names, "./" prefixes),
 * plain or compressed (.tar.gz/.tgz, .tar.zst), from a local path or "pipe:COMMAND".
 * Members group into samples by WebDataset's rule (formats/shard.md, section 2): the key
 * is the path up to the first dot of the basename; consecutive members with one key form
 * a sample; field names are lower-cased. Unlike WebDataset, a key that comes back after
 * other keys, and a field given twice in a sample, are errors rather than silently split
 * or overwritten samples.
 *
 * Member data of a local uncompressed tar is handed out as views into the mapped file (no
 * copy); otherwise it is copied once into a buffer reused from sample to sample.
 *
 * A ShardFile is used by one thread at a time.
 */
#ifndef SHARD_FILE_H
#define SHARD_FILE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ShardFile ShardFile;

typedef struct ShardFileSettings {
    int lowercase;     /**< lower-case field names as WebDataset does (default 1) */
    int load_index;    /**< load the shard's .idx when present, for seeking (default 1) */
    const char *index; /**< index path; NULL: the shard's own (x.tar -> x.idx); borrowed */
    /** Called for each member left out of the samples, as WebDataset leaves them out (not a
     *  regular file, no dot in the basename, a hidden or "__" name), with the reason;
     *  NULL to skip them silently. Called on the reading thread; member is borrowed. */
    void (*on_skip)(void *cookie, const char *member, uint64_t offset, const char *why);
    void *cookie; /**< passed to on_skip; borrowed */
} ShardFileSettings;

/** One field of a sample, as read. Everything is borrowed from the ShardFile and valid
 *  until the next call on it. */
typedef struct ShardFieldView {
    const char *name;          /**< field ("jpg", "seg.png"), lower-cased by default */
    const char *member;        /**< the member's full path in the tar, as stored */
    const unsigned char *data; /**< the member's bytes */
    uint64_t size;             /**< number of bytes */
    uint64_t offset;           /**< offset of the data in the uncompressed tar */
} ShardFieldView;

/** A sample as read: borrowed from the ShardFile, valid until the next call on it. */
typedef struct ShardSampleView {
    const char *key;              /**< WebDataset key, without a leading "./" */
    const char *url;              /**< the shard, as opened */
    uint64_t index;               /**< position of the sample in the shard, from 0 */
    uint64_t offset;              /**< tar offset of its first member's header */
    const ShardFieldView *fields; /**< nfields fields in tar order */
    size_t nfields;
} ShardSampleView;

/** Fills s with the defaults written beside each field. */
SHARD_API void shard_file_default_settings(ShardFileSettings *s);

/**
 * Opens a shard: a path, or "pipe:COMMAND" (the command's standard output is read).
 * @param out receives the handle, owned by the caller (shard_file_free); NULL on failure
 * @param url borrowed, copied
 * @param s settings, NULL for the defaults; borrowed
 * @param err optional; what failed and where
 */
SHARD_API int shard_file_open(ShardFile **out, const char *url, const ShardFileSettings *s,
                              ShardError *err);

/**
 * Reads the next sample.
 * @param out receives a view valid until the next call on f
 * @return 0, SHARD_EOS after the last sample, or an error (the message names the shard,
 *         the byte offset and the member); after an error f only returns that error
 */
SHARD_API int shard_file_next(ShardFile *f, const ShardSampleView **out);

/**
 * Positions f so that the next shard_file_next returns sample i, reading only that
 * sample's bytes (through the index, and for .tar.zst the seek table's frames).
 * @return 0; SHARD_ERR_UNSUPPORTED without an index or for a stream that cannot seek
 *         (pipes, .tar.gz); SHARD_ERR_NOT_FOUND if i is past the last sample
 */
SHARD_API int shard_file_seek(ShardFile *f, uint64_t i);

/** @return the number of samples as the index gives it, or -1 without an index */
SHARD_API int64_t shard_file_count(const ShardFile *f);

/** @return "none", "gzip" or "zstd": how the shard is compressed */
SHARD_API const char *shard_file_compression(const ShardFile *f);

/** @return bytes of the shard as stored, -1 for a pipe */
SHARD_API int64_t shard_file_size(const ShardFile *f);

/** @return the message of the last failure (borrowed), "" if none */
SHARD_API const char *shard_file_error(const ShardFile *f);

/** Closes the shard and sets *f to NULL; accepts NULL. */
SHARD_API void shard_file_free(ShardFile **f);

/**
 * Expands a shard list: brace patterns ("train-{000000..000099}.tar", "{a,b}", several
 * braces, zero padding kept), a manifest (a path ending in ".json", urls resolved against
 * its folder), or a plain path or URL (returned as it is).
 * @param out receives an array of *n strings, owned by the caller: shard_urls_free
 * @param err optional; a malformed pattern or unreadable manifest
 */
SHARD_API int shard_urls_expand(const char *spec, char ***out, size_t *n, ShardError *err);

/** Frees an array from shard_urls_expand; accepts NULL. */
SHARD_API void shard_urls_free(char **urls, size_t n);

/** @return the index path of a shard: ".tar", ".tar.zst", ".tar.gz", ".tgz" replaced by
 *  ".idx" (formats/index.md); owned by the caller (free) */
SHARD_API char *shard_index_path(const char *url);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_FILE_H */
