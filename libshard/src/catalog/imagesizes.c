/*
 * Image geometry beside the index (shard/verify.h: shard_geometry_build): each sample's
 * image size, from its index's offsets and a ranged read of each image's header alone
 * (shard_image_geometry says how many bytes it needs), or for a compressed shard from one
 * read of it whole, written as the columns beside the index (formats/columns.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/error.h"
#include "shard/file.h"
#include "shard/image.h"
#include "shard/sample.h"
#include "shard/verify.h"
#include "sink/sink.h"
#include "source/open.h"
#include "source/source.h"
#include "tar/columns.h"
#include "tar/idx.h"

/* The first read of an image: a JPEG's frame header lies within it unless large application
 * segments come before. */
#define FIRST_READ 1024

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

/* The entry of sample i's image (the image field of lowest rank), or NULL. */
static const ShardIndexEntry *image_of(const ShardIndex *x, uint64_t i)
{
    const ShardIndexEntry *best = NULL;
    int rank = -1;
    for (uint64_t e = x->first[i]; e < x->first[i + 1]; e++)
        if (shard_columns_better_image(x->entries[e].ext, &rank))
            best = &x->entries[e];
    return best;
}

static int compressed(const char *url)
{
    size_t n = strcspn(url, "?#"); /* a signed URL's query is no part of its name */
    return (n > 4 && !strncasecmp(url + n - 4, ".zst", 4)) ||
           (n > 3 && !strncasecmp(url + n - 3, ".gz", 3)) ||
           (n > 4 && !strncasecmp(url + n - 4, ".tgz", 4));
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

/* The sizes of a compressed shard's images, read whole in order (no range reaches into a
 * zstd or gzip stream's middle): the index's count of samples into v. */
static int whole_sizes(const char *url, ShardRemote *remote, const ShardIndex *x, uint32_t *v,
                       int skip_errors, ShardGeometryStats *s, char *msg)
{
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    fs.load_index = 0;
    fs.remote = remote;
    ShardFile *f;
    ShardError e;
    int rc = shard_file_open(&f, url, &fs, &e);
    if (rc)
        return shard_fail(msg, rc, "%s", e.message);
    const ShardSampleView *sv;
    uint64_t i = 0;
    int said = 0; /* msg holds this loop's own failure */
    while (!(rc = shard_file_next(f, &sv))) {
        if (i == x->nsamples) {
            rc = shard_fail(msg, SHARD_ERR_FORMAT, "%s: more samples than its index's %llu "
                            "(sample '%s' at offset %llu): make the index again (shardcat "
                            "index)", url, (unsigned long long)x->nsamples, sv->key,
                            (unsigned long long)sv->offset);
            said = 1;
            break;
        }
        const ShardFieldView *image = shard_columns_image_of(sv);
        uint32_t *out = v + 2 * i++;
        out[0] = out[1] = SHARD_COLUMN_NONE;
        if (!image)
            continue;
        s->bytes_read += image->size;
        char why[256];
        if (!shard_columns_geometry(image->data, (size_t)image->size, out, why, sizeof why))
            continue;
        if (!skip_errors) {
            rc = shard_fail(msg, SHARD_ERR_DECODE, "%s: sample %llu, member '%s' at offset "
                            "%llu: %s", url, (unsigned long long)(i - 1), image->member,
                            (unsigned long long)image->offset, why);
            said = 1;
            break;
        }
        s->skipped++;
    }
    if (rc == SHARD_EOS)
        rc = i == x->nsamples ? 0
                              : shard_fail(msg, SHARD_ERR_FORMAT, "%s: %llu samples, its index "
                                           "lists %llu: make the index again (shardcat index)",
                                           url, (unsigned long long)i,
                                           (unsigned long long)x->nsamples);
    else if (rc && !said)
        shard_fail(msg, rc, "%s", shard_file_error(f));
    shard_file_free(&f);
    return rc;
}

int shard_geometry_build(const char *url, const char *idx_url, const char *cols_path,
                         ShardRemote *remote, int skip_errors, ShardGeometryStats *st,
                         ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    ShardGeometryStats zero = {0};
    if (st)
        *st = zero;
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
    int whole = compressed(url);
    rc = !v ? shard_fail(msg, SHARD_ERR_NOMEM, "out of memory")
         : whole ? whole_sizes(url, remote, &x, v, skip_errors, &s, msg)
                 : shard_source_open(&src, url, remote, 0, msg);
    for (uint64_t i = 0; !rc && !whole && i < x.nsamples; i++) {
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
    if (!rc && !(text = shard_columns_format(shard_geometry_names, SHARD_GEOMETRY_NCOLS, v,
                                             x.nsamples, &len)))
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    if (!rc && !(path = cols_path ? strdup(cols_path) : shard_columns_path(url)))
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    ShardSinkSettings ks = {.sync = 1, .remote = remote};
    if (!rc)
        rc = shard_sink_put(path, text, len, &ks, msg);
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
