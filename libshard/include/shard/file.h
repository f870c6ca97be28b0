/*
 * libshard — reading one shard: its samples in order, or any sample by its index.
 *
 * Reads every tar dialect WebDataset reads (ustar, pax, GNU long names, "./" prefixes),
 * plain or compressed (.tar.gz/.tgz, .tar.zst), from a local path, "pipe:COMMAND" or a
 * remote URL (http://, https://, gs://, s3://: remote.h).
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
#include "remote.h"
#include "sample.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ShardFile ShardFile;

/** What is known of one shard file: what a writer wrote, what a manifest says of it. */
typedef struct ShardFileInfo {
    /** Path or URL of the shard. In a manifest read from disk, already resolved against
     *  the manifest's folder. Owned by whoever owns the struct (writer or manifest). */
    const char *url;
    uint64_t nsamples; /**< samples in the shard */
    uint64_t filesize; /**< bytes of the file as stored (compressed for .tar.zst) */
    uint64_t tarsize;  /**< bytes of the uncompressed tar; 0 if unknown */
    char md5[33];      /**< hex MD5 of the stored file, "" if unknown */
    char sha256[65];   /**< hex SHA-256 of the stored file, "" if unknown */
} ShardFileInfo;

/** Why a member is left out of the samples (ShardFileSettings.on_skip_reason). */
typedef enum ShardSkipReason {
    SHARD_SKIP_NO_NAME = 1,  /**< the header has no name */
    SHARD_SKIP_FOLDER = 2,   /**< a folder */
    SHARD_SKIP_SYMLINK = 3,  /**< a symbolic link */
    SHARD_SKIP_HARDLINK = 4, /**< a hard link */
    SHARD_SKIP_SPECIAL = 5,  /**< not a regular file (device, FIFO, ...) */
    SHARD_SKIP_NOT_FIELD = 6 /**< no dot in the basename, or a hidden or "__" name */
} ShardSkipReason;

typedef struct ShardFileSettings {
    int lowercase;     /**< lower-case field names as WebDataset does (default 1) */
    int load_index;    /**< load the shard's .idx when present, for seeking (default 1) */
    const char *index; /**< index path; NULL: the shard's own (x.tar -> x.idx); borrowed */
    /** Called for each member left out of the samples, as WebDataset leaves them out (not a
     *  regular file, no dot in the basename, a hidden or "__" name), with the reason as
     *  text; NULL to skip them silently. Called on the reading thread; member is borrowed.
     *  Not called when on_skip_reason is set. */
    void (*on_skip)(void *cookie, const char *member, uint64_t offset, const char *why);
    void *cookie; /**< passed to on_skip and on_skip_reason; borrowed */
    /** As on_skip, with the reason as a code beside the text; NULL for none (default). */
    void (*on_skip_reason)(void *cookie, const char *member, uint64_t offset,
                           ShardSkipReason reason, const char *why);
    /** Where a remote shard (http, https, gs, s3) is read through; NULL: one made for this
     *  shard with the default settings. Borrowed: it must outlive the file. */
    ShardRemote *remote;
    /** Limits against hostile shards, each an error naming the shard, offset and member
     *  (0: the default). The largest member, by its declared size: a
     *  sparse or compressed member cannot make the reader hold more. Default 256 MiB. */
    uint64_t max_member_size;
    uint32_t max_fields; /**< the most members in one sample (default 100000) */
    uint32_t max_name;   /**< the longest member name, in bytes (default 4096) */
    /** Map a local file (mmap): member data of an uncompressed tar are then views into the
     *  mapping, with no copy; but a file truncated while mapped kills the process with
     *  SIGBUS. Default 0: read() and pread(), a cut file an error like any other. */
    int map;
    /** Read the members' headers only (a listing, an index): every field's data is NULL,
     *  its size and offset as stored, and the bytes between headers are skipped by seeking
     *  where the source can (a local file), as bsdtar does. Default 0. */
    int headers_only;
    /** The largest sample: its members' declared sizes added up (default 256 MiB), on
     *  every path (in order, by index, headers only), refused before its bytes are read. */
    uint64_t max_sample_size;
    /** Each regular file a sample of its own, as WebDataset's tar_file_iterator reads a
     *  tar: its key and its one field's member are the path as stored, the field's name is
     *  "" (names are neither split nor checked, a path may come again); only what is not a
     *  regular file is left out (on_skip). The caller groups. Default 0. */
    int members;
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[20];
} ShardFileSettings;

/* ShardFieldView and ShardSampleView (sample.h): views from a ShardFile are borrowed from
 * it and valid until the next call on it. */

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
 * Opens a shard held in memory (a buffer the caller fetched, a test's bytes): read as a
 * local shard is, with random access through an index only when s names one.
 * @param data size bytes, borrowed: unchanged and valid until f and every item taken from
 *        it are freed
 * @param name names the shard in messages and views (copied); NULL for "memory"
 */
SHARD_API int shard_file_open_memory(ShardFile **out, const void *data, size_t size,
                                     const char *name, const ShardFileSettings *s,
                                     ShardError *err);

typedef struct ShardStream ShardStream; /* stream.h */

/**
 * Reads a stream (stream.h) as a shard from its start: the stream's source passes to the
 * shard, so nothing is opened or requested again (a caller that opened a URL before knowing
 * it held a tar: WebDataset's url_opener).
 * @param out receives the shard, owned by the caller (shard_file_free); NULL on failure
 * @param stream nothing read from it yet; taken over: *stream becomes NULL, on failure too
 * @param s settings, NULL for the defaults; borrowed
 * @return 0; SHARD_ERR_INVALID when bytes were read from the stream; as shard_file_open
 */
SHARD_API int shard_file_open_stream(ShardFile **out, ShardStream **stream,
                                     const ShardFileSettings *s, ShardError *err);

/**
 * Reads the next sample.
 * @param out receives a view valid until the next call on f
 * @return 0, SHARD_EOS after the last sample, or an error (the message names the shard,
 *         the byte offset and the member); after an error f only returns that error
 */
SHARD_API int shard_file_next(ShardFile *f, const ShardSampleView **out);

/**
 * Reads the next sample as an owned item (sample.h): its bytes stay valid after the next
 * call and after f is freed, until shard_item_free (views into a mapped shard keep the
 * mapping alive; other bytes are copied once).
 * @param out receives the item, owned by the caller; NULL at the end or on failure
 * @return as shard_file_next
 */
SHARD_API int shard_file_take(ShardFile *f, ShardItem **out);

/**
 * Positions f so that the next shard_file_next returns sample i, reading only that
 * sample's bytes (through the index, and for .tar.zst the seek table's frames).
 * @return 0; SHARD_ERR_UNSUPPORTED without an index or for a stream that cannot seek
 *         (pipes, .tar.gz); SHARD_ERR_NOT_FOUND if i is past the last sample
 */
SHARD_API int shard_file_seek(ShardFile *f, uint64_t i);

/** @return the number of samples as the index gives it, or -1 without an index (a remote
 *  shard's index is read at the first call) */
SHARD_API int64_t shard_file_count(const ShardFile *f);

/** @return "none", "gzip" or "zstd": how the shard is compressed */
SHARD_API const char *shard_file_compression(const ShardFile *f);

/** @return bytes of the shard as stored, -1 for a pipe */
SHARD_API int64_t shard_file_size(const ShardFile *f);

/** @return the message of the last failure (borrowed), "" if none */
SHARD_API const char *shard_file_error(const ShardFile *f);

/** Closes the shard and sets *f to NULL; accepts NULL. */
SHARD_API void shard_file_free(ShardFile **f);

/** @return the index path of a shard: ".tar", ".tar.zst", ".tar.gz", ".tgz" replaced by
 *  ".idx" (formats/index.md); owned by the caller (free) */
SHARD_API char *shard_index_path(const char *url);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_FILE_H */
