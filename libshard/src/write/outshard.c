/*
 * The shard a writer is writing (outshard.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <zstd.h>

#include "base/buf.h"
#include "base/error.h"
#include "remote/store.h"
#include "shard/file.h"
#include "sink/sink.h"
#include "tar/seektable.h"
#include "shard/verify.h"
#include "tar/columns.h"
#include "tar/idxbuild.h"
#include "write/outshard.h"
#include "write/writerdef.h"

const char *shard_writer_path(const ShardWriter *w)
{
    return w->path ? w->path : "(no shard)";
}

static la_ssize_t write_cb(struct archive *a, void *cookie, const void *buf, size_t n)
{
    ShardWriter *w = cookie;
    int rc = w->zstd ? shard_buf_append(&w->frame, buf, n)
                     : shard_sink_write(w->sink, buf, n, w->err);
    if (rc) {
        if (rc == SHARD_ERR_NOMEM)
            shard_fail(w->err, rc, "%s: out of memory", shard_writer_path(w));
        w->cb_rc = rc;
        archive_set_error(a, EIO, "%s", w->err);
        return -1;
    }
    w->tar_off += n;
    return (la_ssize_t)n;
}

int shard_writer_flush_frame(ShardWriter *w, size_t len)
{
    if (!len)
        return 0;
    size_t bound = ZSTD_compressBound(len);
    w->zout.len = 0;
    int rc = shard_buf_reserve(&w->zout, bound);
    if (rc)
        return shard_fail(w->err, rc, "%s: out of memory", shard_writer_path(w));
    size_t z = ZSTD_compress2(w->cctx, w->zout.data, bound, w->frame.data, len);
    if (ZSTD_isError(z))
        return shard_fail(w->err, SHARD_ERR_IO, "%s: zstd compression failed: %s",
                          shard_writer_path(w), ZSTD_getErrorName(z));
    if (len > MAX_FRAME_CONTENT || z > UINT32_MAX)
        return shard_fail(w->err, SHARD_ERR_UNSUPPORTED,
                          "%s: a frame of %zu bytes exceeds the seekable format's 2 GiB limit "
                          "(a single sample this large cannot go into a .tar.zst)",
                          shard_writer_path(w), len);
    if (shard_array_grow(&w->seek, &w->capseek, w->nseek + 1, sizeof *w->seek, 64))
        return shard_fail(w->err, SHARD_ERR_NOMEM, "%s: out of memory", shard_writer_path(w));
    /* The frame's content checksum (its last 4 bytes) is XXH64's low 32 bits, which is
     * exactly what the seek table stores. */
    const unsigned char *c = w->zout.data + z - 4;
    ShardSeekEntry *e = &w->seek[w->nseek++];
    e->csize = (uint32_t)z;
    e->dsize = (uint32_t)len;
    e->checksum = (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
    memmove(w->frame.data, w->frame.data + len, w->frame.len - len);
    w->frame.len -= len;
    return shard_sink_write(w->sink, w->zout.data, z, w->err);
}

int shard_writer_start_shard(ShardWriter *w)
{
    int n = snprintf(NULL, 0, w->pattern, (unsigned long long)w->next_number);
    free(w->path);
    w->path = malloc((size_t)n + 1);
    if (!w->path)
        return shard_fail(w->err, SHARD_ERR_NOMEM, "writer: out of memory");
    snprintf(w->path, (size_t)n + 1, w->pattern, (unsigned long long)w->next_number);
    ShardSinkSettings ks = {.sync = w->s.sync, .md5 = (w->s.checksums & SHARD_DIGEST_MD5) != 0,
                            .sha256 = (w->s.checksums & SHARD_DIGEST_SHA256) != 0, .remote = w->remote};
    int rc = shard_sink_open(&w->sink, w->path, &ks, w->err);
    if (rc)
        return rc;
    w->ar = archive_write_new();
    if (!w->ar)
        return shard_fail(w->err, SHARD_ERR_NOMEM, "writer: out of memory");
    w->tar_off = 0;
    w->count = 0;
    w->size_est = 0;
    w->idx.len = 0;
    w->nseek = 0;
    w->frame.len = 0;
    w->cb_rc = 0;
    if (archive_write_set_format_pax_restricted(w->ar) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(w->ar, 0) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(w->ar, 1) != ARCHIVE_OK ||
        archive_write_open2(w->ar, w, NULL, write_cb, NULL, NULL) != ARCHIVE_OK)
        return shard_fail(w->err, SHARD_ERR_IO, "%s: libarchive: %s", w->path,
                          archive_error_string(w->ar));
    w->open = 1;
    return 0;
}

static int record_info(ShardWriter *w, const ShardFileInfo *info)
{
    if (shard_array_grow(&w->infos, &w->capinfos, w->ninfos + 1, sizeof *w->infos, 16))
        return SHARD_ERR_NOMEM;
    w->infos[w->ninfos++] = *info;
    return 0;
}

/* "x.tar", "x.tar.zst", "x.tar.gz", "x.tgz" all index as "x.idx", as DALI's wds2idx names
 * them, so one index serves a shard compressed or not (offsets are of the plain tar); the
 * columns go beside it as "x.cols" (formats/columns.md), after it. */
static int write_index(ShardWriter *w)
{
    char *ipath = shard_index_path(w->path), *cpath = shard_columns_path(w->path);
    size_t len = 0;
    char *text = shard_columns_format(shard_geometry_names, SHARD_GEOMETRY_NCOLS, w->cols,
                                      w->count, &len);
    ShardSinkSettings ks = {.sync = w->s.sync, .remote = w->remote};
    int rc = ipath && cpath && text ? shard_index_put(ipath, w->count, &w->idx, &ks, w->err)
                                    : shard_fail(w->err, SHARD_ERR_NOMEM, "writer: out of memory");
    ShardSink *k = NULL;
    if (!rc)
        rc = shard_sink_open(&k, cpath, &ks, w->err);
    if (!rc && (rc = shard_sink_write(k, text, len, w->err)))
        shard_sink_abort(&k);
    if (!rc)
        rc = shard_sink_commit(&k, NULL, NULL, w->err);
    free(ipath);
    free(cpath);
    free(text);
    return rc;
}

/* The index and columns an earlier run left at this shard's names, removed. */
static int remove_index(ShardWriter *w)
{
    char *ipath = shard_index_path(w->path), *cpath = shard_columns_path(w->path);
    int rc = ipath && cpath ? shard_store_remove(w->store, ipath, w->err)
                            : shard_fail(w->err, SHARD_ERR_NOMEM, "writer: out of memory");
    if (!rc)
        rc = shard_store_remove(w->store, cpath, w->err);
    free(ipath);
    free(cpath);
    return rc;
}

int shard_writer_finish_shard(ShardWriter *w)
{
    int rc;
    if (archive_write_close(w->ar) != ARCHIVE_OK)
        return w->cb_rc ? w->cb_rc
                        : shard_fail(w->err, SHARD_ERR_IO, "%s: closing the tar: %s", w->path,
                                     archive_error_string(w->ar));
    archive_write_free(w->ar);
    w->ar = NULL;
    if (w->zstd) {
        if ((rc = shard_writer_flush_frame(w, w->frame.len)))
            return rc;
        ShardBuf table = {0};
        rc = shard_seek_table_encode(w->seek, w->nseek, &table);
        if (!rc)
            rc = shard_sink_write(w->sink, table.data, table.len, w->err);
        else
            shard_fail(w->err, rc, "%s: cannot encode the seek table", w->path);
        shard_buf_free(&table);
        if (rc)
            return rc;
    }
    ShardFileInfo info = {0};
    info.nsamples = w->count;
    info.tarsize = w->tar_off;
    info.filesize = shard_sink_size(w->sink);
    /* An earlier run's index goes first, then the shard, then its index: killed anywhere
     * between, a folder or bucket holds a shard without an index (a plain tar, which
     * readers index themselves), never an index beside another run's shard or none. */
    int with_index = w->s.write_index && w->count; /* none for an empty tar: DALI's needs a
                                                      sample */
    if (with_index && (rc = remove_index(w)))
        return rc;
    if ((rc = shard_sink_commit(&w->sink, info.md5, info.sha256, w->err)))
        return rc;
    if (with_index && (rc = write_index(w)))
        return rc;
    w->open = 0;
    w->next_number++;
    info.url = w->path;
    if (record_info(w, &info))
        return shard_fail(w->err, SHARD_ERR_NOMEM, "writer: out of memory");
    w->path = NULL; /* now owned by infos */
    return 0;
}
