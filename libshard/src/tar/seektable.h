/*
 * zstd's seekable format (formats/zstd.md): the seek table that ends a .tar.zst.
 */
#ifndef SHARD_TAR_SEEKTABLE_H
#define SHARD_TAR_SEEKTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "base/buf.h"


#define SHARD_SEEK_SKIPPABLE_MAGIC 0x184D2A5Eu
#define SHARD_SEEK_FOOTER_MAGIC 0x8F92EAB1u
#define SHARD_SEEK_FOOTER_SIZE 9u
#define SHARD_SEEK_CHECKSUM_FLAG 0x80u

typedef struct ShardSeekEntry {
    uint32_t csize;    /* compressed bytes of the frame */
    uint32_t dsize;    /* decompressed bytes of the frame */
    uint32_t checksum; /* low 32 bits of XXH64 of the decompressed bytes */
    int has_checksum;  /* the table has checksums (Checksum_Flag): checksum is one */
} ShardSeekEntry;

/* Appends the seek table frame for n entries (with checksums) to out. */
SHARD_HIDDEN int shard_seek_table_encode(const ShardSeekEntry *e, size_t n, ShardBuf *out);

/* Decodes a seek table: t holds the table's tbytes (its skippable frame, footer included)
 * and file_size is the size of the whole object it ends. On success *e (malloc'd, *n
 * entries) is set; SHARD_ERR_FORMAT (with a message naming url and offset) when the table is
 * broken or its frames do not add up to the bytes before it. */
SHARD_HIDDEN int shard_seek_table_decode(const unsigned char *t, uint64_t tbytes, uint64_t file_size,
                                         const char *url, ShardSeekEntry **e, size_t *n, char *err);

/* Reads the seek table at the end of src through read_at (or its mapping). *table_bytes
 * receives the table's size. SHARD_ERR_NOT_FOUND when the object does not end in a seek
 * table; SHARD_ERR_FORMAT when it ends in a broken one; SHARD_ERR_UNSUPPORTED for a
 * source without random access. */
struct ShardSource;
SHARD_HIDDEN int shard_seek_table_read(struct ShardSource *src, ShardSeekEntry **e, size_t *n,
                                       uint64_t *table_bytes, char *err);

#endif /* SHARD_TAR_SEEKTABLE_H */
