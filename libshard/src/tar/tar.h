/*
 * Sequential reading of a shard: libarchive over a source (any tar dialect, plain, gzip or
 * zstd), members grouped into samples by WebDataset's rule (formats/shard.md, section 2).
 */
#ifndef SHARD_TAR_TAR_H
#define SHARD_TAR_TAR_H

#include "base/attr.h"
#include "shard/file.h"
#include "source/source.h"
#include "tar/samplebuf.h"

/* ShardFileSettings' limits when left 0: a sample of the largest size, held once with its
 * copy on the way, stays well under 1 GiB */
#define SHARD_DEFAULT_MAX_MEMBER ((uint64_t)256 << 20)
#define SHARD_DEFAULT_MAX_SAMPLE ((uint64_t)256 << 20)
#define SHARD_DEFAULT_MAX_FIELDS 100000u
#define SHARD_DEFAULT_MAX_NAME 4096u

typedef struct ShardTar ShardTar;

/* Opens the tar stream of src (borrowed: it must outlive the reader) from where src stands
 * (its start, or a sample's first header it was skipped to: offsets then count from the
 * shard's start all the same) and reads up to its first header, so that a source that is
 * no tar fails here. err: SHARD_ERROR_MAX bytes;
 * bad_frame (optional) is set on a failure that came from a zstd frame that does not
 * decompress (a damaged frame). */
SHARD_HIDDEN int shard_tar_open(ShardTar **out, ShardSource *src, const ShardFileSettings *s,
                                int *bad_frame, char *err);
/* "none", "gzip", "zstd" (libarchive's filter name for others). */
SHARD_HIDDEN const char *shard_tar_compression(const ShardTar *t);
/* Reads the next sample into sb; *offset receives the tar offset of its first header.
 * 0, SHARD_EOS, or an error with err naming the URL, offset and member. */
SHARD_HIDDEN int shard_tar_next(ShardTar *t, ShardSampleBuf *sb, uint64_t *offset, char *err);
/* Whether the failure came from a zstd frame that does not decompress (a damaged frame). */
SHARD_HIDDEN int shard_tar_bad_frame(const ShardTar *t);
SHARD_HIDDEN void shard_tar_free(ShardTar **t);

#endif /* SHARD_TAR_TAR_H */
