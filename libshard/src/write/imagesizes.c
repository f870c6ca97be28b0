/*
 * Image geometry beside the index (shard/verify.h: shard_geometry_build): each sample's
 * image size, from its index's offsets and a ranged read of each image's header alone
 * (shard_image_geometry says how many bytes it needs), written as the columns beside the
 * index (formats/columns.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "shard/file.h"
#include "shard/image.h"
#include "shard/verify.h"
#include "shard/writer.h"
#include "source/open.h"
#include "source/source.h"
#include "tar/columns.h"
#include "tar/idx.h"

/* The first read of an image: a JPEG's frame header lies within it unless large application
 * segments come before. */
#define FIRST_READ 1024

/* The image member the loader decodes by default: the first of these a sample has. */
static const char *const IMAGE_FIELDS[] = {"jpg", "jpeg", "png", "webp"};

char *shard_columns_path(const char *url)
{
    char *p = shard_index_path(url);
    size_t n = p ? strlen(p) : 0;
    char *out = p ? realloc(p, n + 2) : NULL; /* ".idx" -> ".cols" */
    if (!out) {
        free(p);
        return NULL;
    }
    memcpy(out + n - 4, ".cols", 6);
    return out;
}

/* The entry of sample i's image, or NULL. */
static const ShardIndexEntry *image_of(const ShardIndex *x, uint64_t i)
{
    for (size_t f = 0; f < sizeof IMAGE_FIELDS / sizeof *IMAGE_FIELDS; f++)
        for (uint64_t e = x->first[i]; e < x->first[i + 1]; e++)
            if (!strcmp(x->entries[e].ext, IMAGE_FIELDS[f]))
                return &x->entries[e];
    return NULL;
}

static int compressed(const char *url)
{
    size_t n = strlen(url);
    return (n > 4 && !strcmp(url + n - 4, ".zst")) || (n > 3 && !strcmp(url + n - 3, ".gz")) ||
           (n > 4 && !strcmp(url + n - 4, ".tgz"));
}

/* Sample i's image size into out[2] ({NONE, NONE} without an image), reading its header
 * through src; bytes read added to *bytes. */
static int sample_size(ShardSource *src, const ShardIndex *x, uint64_t i, const char *url,
                       ShardBuf *buf, uint32_t out[2], uint64_t *bytes, char *msg)
{
    out[0] = out[1] = SHARD_COLUMN_NONE;
    const ShardIndexEntry *e = image_of(x, i);
    if (!e)
        return 0;
    size_t want = e->size < FIRST_READ ? (size_t)e->size : FIRST_READ, have = 0;
    for (;;) {
        if (shard_buf_reserve(buf, want))
            return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
        if (want > have) {
            int rc = shard_source_read_at(src, e->offset + have, buf->data + have, want - have);
            if (rc)
                return shard_fail(msg, rc, "%.200s: sample %llu, member '%.100s' at offset "
                                  "%llu: %.600s", url, (unsigned long long)i,
                                  e->name ? e->name : e->ext, (unsigned long long)e->offset,
                                  src->err[0] ? src->err : "read failed");
            *bytes += want - have;
            have = want;
        }
        int w, h;
        size_t need = 0;
        char why[256];
        int rc = shard_image_geometry(buf->data, have, &w, &h, &need, why, sizeof why);
        if (!rc) {
            out[0] = (uint32_t)w;
            out[1] = (uint32_t)h;
            return 0;
        }
        if (rc == SHARD_AGAIN && need > have && need <= e->size) {
            want = need;
            continue;
        }
        return shard_fail(msg, SHARD_ERR_DECODE, "%s: sample %llu, member '%s' at offset %llu: %s",
                          url, (unsigned long long)i, e->name ? e->name : e->ext,
                          (unsigned long long)e->offset,
                          rc == SHARD_AGAIN ? "the image ends inside its header" : why);
    }
}

int shard_geometry_build(const char *url, const char *idx_url, const char *cols_path,
                         ShardRemote *remote, int skip_errors, ShardGeometryStats *st,
                         ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    ShardGeometryStats zero = {0};
    if (st)
        *st = zero;
    if (compressed(url)) {
        snprintf(msg, sizeof msg, "%.300s: reading each image's header by range needs an "
                 "uncompressed tar (the columns of a compressed shard are made where its bytes "
                 "are read whole: shardpack)", url);
        return shard_report(err, SHARD_ERR_UNSUPPORTED, msg);
    }
    char *beside = idx_url ? NULL : shard_index_path(url);
    ShardIndex x;
    int rc = shard_index_load(&x, idx_url ? idx_url : beside, remote, NULL, msg);
    free(beside);
    if (rc == SHARD_ERR_NOT_FOUND)
        snprintf(msg, sizeof msg, "%.300s has no index: make one first (shardcat index)", url);
    if (rc)
        return shard_report(err, rc, msg);
    ShardSource *src = NULL;
    uint32_t *v = calloc(x.nsamples ? (size_t)x.nsamples * 2 : 1, sizeof *v);
    ShardBuf buf = {0};
    ShardGeometryStats s = {0};
    rc = v ? shard_source_open(&src, url, remote, 0, msg)
           : shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; !rc && i < x.nsamples; i++) {
        rc = sample_size(src, &x, i, url, &buf, v + 2 * i, &s.bytes_read, msg);
        if (rc == SHARD_ERR_DECODE && skip_errors) { /* "-", counted */
            s.skipped++;
            rc = 0;
        }
    }
    s.samples = x.nsamples;
    shard_source_put(src);
    shard_buf_free(&buf);
    char *text = NULL, *path = NULL;
    size_t len = 0;
    static const char *const names[] = {"width", "height"};
    if (!rc && !(text = shard_columns_format(names, 2, v, x.nsamples, &len)))
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    if (!rc && !(path = cols_path ? strdup(cols_path) : shard_columns_path(url)))
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    ShardError put;
    if (!rc && (rc = shard_put(path, text, len, remote, &put)))
        snprintf(msg, sizeof msg, "%s", put.message);
    free(text);
    free(path);
    free(v);
    shard_index_clear(&x);
    if (rc)
        return shard_report(err, rc, msg);
    if (st)
        *st = s;
    return 0;
}
