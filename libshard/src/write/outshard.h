/*
 * The shard a writer is writing (outshard.c): its file, opened under a temporary name; the tar
 * stream into it, through zstd frames for .tar.zst; at its end the seek table, its index,
 * the rename, and what is known of it kept for the manifest.
 */
#ifndef SHARD_WRITE_OUTSHARD_H
#define SHARD_WRITE_OUTSHARD_H

#include <stddef.h>

#include "base/attr.h"
#include "write/writerdef.h"

/* The path of the shard being written, for messages. */
SHARD_HIDDEN const char *shard_writer_path(const ShardWriter *w);
/* Opens the next shard's file and tar stream. 0 or an error with w->err. */
SHARD_HIDDEN int shard_writer_start_shard(ShardWriter *w);
/* Compresses the first len bytes of the frame buffer as one frame, appends it to the file
 * and keeps the rest of the buffer for the next frame. */
SHARD_HIDDEN int shard_writer_flush_frame(ShardWriter *w, size_t len);
/* Completes the shard: the tar's end, the last frame and the seek table, the index, the
 * fsync and rename; its ShardFileInfo kept. */
SHARD_HIDDEN int shard_writer_finish_shard(ShardWriter *w);

#endif /* SHARD_WRITE_OUTSHARD_H */
