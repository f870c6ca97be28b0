/*
 * libshard — checking shards, and indexing shards made elsewhere.
 */
#ifndef SHARD_VERIFY_H
#define SHARD_VERIFY_H

#include "common.h"
#include "remote.h"
#include "writer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ShardVerifySettings {
    int decode;      /**< decode every JPEG fully with libjpeg-turbo, and name each image
                         the loader does not decode (GIF, BMP, TIFF, PNM) (default 0) */
    /** compare the shard's .idx, when present, member by member, and the columns beside it
     *  (.cols, formats/columns.md), when present, sample by sample (default 1) */
    int check_index;
    /** What a manifest says of this shard (size, checksums, counts); NULL when none.
     *  Borrowed for the call. */
    const ShardFileInfo *expect;
    /** Called once per defect with a message naming the shard, the byte offset and the
     *  member; NULL to only count them. Called on the calling thread. */
    void (*on_defect)(void *cookie, const char *message);
    void *cookie;           /**< passed to on_defect; borrowed */
    unsigned max_defects;   /**< stop after this many defects in one shard (default 20) */
    /** Where a remote shard is read through; NULL: one made for the call. Borrowed. */
    ShardRemote *remote;
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[56];
} ShardVerifySettings;

typedef struct ShardVerifyResult {
    uint64_t samples;  /**< samples read */
    uint64_t members;  /**< members taken into samples */
    uint64_t tarsize;  /**< uncompressed tar bytes */
    uint64_t filesize; /**< bytes as stored */
    uint64_t frames;   /**< zstd frames listed in the seek table (0: none) */
    uint64_t jpegs;    /**< JPEGs decoded (with decode) */
    uint64_t images;   /**< images decoded (with decode): JPEGs, PNGs and WebPs */
    int has_index;     /**< a .idx was found and compared */
    uint64_t defects;  /**< defects found */
    int has_columns;   /**< columns (.cols) were found beside the index and compared */
} ShardVerifyResult;

/** Fills s with the defaults written beside each field. */
SHARD_API void shard_verify_default_settings(ShardVerifySettings *s);

/**
 * Reads a whole shard and checks it: tar structure and WebDataset grouping, every zstd
 * frame against its checksum and the seek table, the .idx against the members, the
 * manifest's size, checksums and counts, and with decode every JPEG.
 * @param r optional; filled with what was read and found
 * @param err optional; filled when the shard cannot be read at all (missing file)
 * @return 0 when no defect was found; SHARD_ERR_FORMAT or SHARD_ERR_CHECKSUM when defects
 *         were found (each reported through on_defect); another error when it could not
 *         check (the shard is missing or unreadable)
 */
SHARD_API int shard_verify(const char *url, const ShardVerifySettings *s, ShardVerifyResult *r,
                           ShardError *err);

/**
 * Writes the index of a shard made by any tool (formats/index.md, DALI's v1.2), atomically.
 * @param idx_path where to write it; NULL for the shard's own index path
 * @param nsamples optional; receives the number of samples
 * @param err optional; what failed and where
 */
SHARD_API int shard_index_build(const char *url, const char *idx_path, uint64_t *nsamples,
                                ShardError *err);

/** What shard_geometry_build read and wrote. */
typedef struct ShardGeometryStats {
    uint64_t samples;    /**< samples in the index */
    uint64_t bytes_read; /**< bytes of the shard read: the image headers' (a compressed
                              shard: its images' bytes, read whole) */
    uint64_t skipped;    /**< images whose header did not parse ("-"; skip_errors) */
} ShardGeometryStats;

/**
 * Writes the columns beside a shard's index (formats/columns.md: each sample's image width
 * and height, as PIL's Image.size gives them) from the index's offsets and a ranged read of
 * each image's header alone: about a kilobyte a sample, a JPEG's large application segments
 * read past, no pixel (a compressed shard, .tar.zst or .tar.gz, is read whole, once: no
 * range reaches into its stream). A shard with an index, local or remote; atomically.
 * @param idx_url the index to read offsets from; NULL: the one beside the shard
 * @param cols_path where to write; NULL: beside the index (shard_columns_path)
 * @param remote what remote shards are read and written through (borrowed; NULL: the
 *        defaults)
 * @param skip_errors 0: an image whose header does not parse is an error naming the shard,
 *        sample, member and offset; 1: its values are "-" and it is counted
 * @param st optional; receives what was read
 * @return 0; SHARD_ERR_NOT_FOUND without an index; SHARD_ERR_DECODE for a bad header;
 *         SHARD_ERR_FORMAT when a compressed shard's samples are not its index's; the
 *         source's and sink's errors
 */
SHARD_API int shard_geometry_build(const char *url, const char *idx_url, const char *cols_path,
                                   ShardRemote *remote, int skip_errors, ShardGeometryStats *st,
                                   ShardError *err);

/** The columns' path of a shard: its index's (shard_index_path) with ".cols" for ".idx";
 *  malloc'd, NULL when out of memory. */
SHARD_API char *shard_columns_path(const char *url);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_VERIFY_H */
