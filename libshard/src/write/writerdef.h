/*
 * The shard writer's insides, shared by its files: the writer (shardwriter.c) and the shard being
 * written (outshard.c).
 *
 * DESIGN: tar members through libarchive's pax-restricted (ustar) writer with
 * no record blocking, so every byte libarchive emits reaches write_cb at once and the
 * running count is the exact tar offset (which the .idx needs). For .tar.zst the tar
 * bytes collect in a frame buffer; a sample that takes it past frame_size closes the frame
 * before it (formats/zstd.md, 2.1), and the seek table goes at the end.
 */
#ifndef SHARD_WRITE_WRITERDEF_H
#define SHARD_WRITE_WRITERDEF_H

#include <locale.h>
#include <stddef.h>
#include <stdint.h>

#include <archive.h>
#include <archive_entry.h>
#include <zstd.h>

#include "base/buf.h"
#include "remote/store.h"
#include "shard/writer.h"
#include "sink/sink.h"
#include "tar/seektable.h"

#define MAX_FRAME_SIZE (1u << 30)
#define MAX_FRAME_CONTENT 0x80000000u /* ZSTD_SEEKABLE_MAX_FRAME_DECOMPRESSED_SIZE */

struct ShardWriter {
    ShardWriterSettings s;
    char *pattern;
    int zstd;
    int failed;
    int finished;
    int single;          /* the pattern names the one shard (no conversion) */
    ShardStore *store;   /* the pattern's, made at open */
    ShardRemote *remote; /* the store's, for a bucket's pattern (borrowed from it); else NULL */
    char err[SHARD_ERROR_MAX];
    uint64_t next_number;

    /* the shard being written */
    int open;
    ShardSink *sink;
    char *path;
    struct archive *ar;
    struct archive_entry *entry;
    uint64_t tar_off;
    uint64_t count;
    uint64_t size_est;
    int cb_rc;
    ShardBuf idx;
    uint32_t *cols; /* the shard's columns beside its index: width, height per sample */
    size_t capcols;

    /* zstd framing */
    ZSTD_CCtx *cctx;
    ShardBuf frame;
    ShardBuf zout;
    ShardSeekEntry *seek;
    size_t nseek, capseek;

    /* completed shards */
    ShardFileInfo *infos;
    size_t ninfos, capinfos;

    /* libarchive converts names through the calling thread's locale (nl_langinfo), and its
     * pax writer fails on non-ASCII names under "C": headers are written under C.UTF-8,
     * set for this thread only with uselocale, so output never depends on the process's
     * locale. */
    locale_t utf8;

    /* scratch reused across samples */
    ShardBuf name;
    const ShardField **sorted;
    size_t capsorted;
};

#endif /* SHARD_WRITE_WRITERDEF_H */
