/*
 * zstd's seekable format (formats/zstd.md): the seek table that ends a .tar.zst.
 */
#ifndef SHARD_ZSTDSEEK_H
#define SHARD_ZSTDSEEK_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define SHARD_SEEK_SKIPPABLE_MAGIC 0x184D2A5Eu
#define SHARD_SEEK_FOOTER_MAGIC 0x8F92EAB1u
#define SHARD_SEEK_FOOTER_SIZE 9u
#define SHARD_SEEK_CHECKSUM_FLAG 0x80u

typedef struct ShardSeekEntry {
    uint32_t csize;    /* compressed bytes of the frame */
    uint32_t dsize;    /* decompressed bytes of the frame */
    uint32_t checksum; /* low 32 bits of XXH64 of the decompressed bytes */
} ShardSeekEntry;

/* Appends the seek table frame for n entries (with checksums) to out. */
SHARD_HIDDEN int shard_seek_table_encode(const ShardSeekEntry *e, size_t n, ShardBuf *out);

#endif /* SHARD_ZSTDSEEK_H */
