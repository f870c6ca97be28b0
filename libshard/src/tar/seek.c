/*
 * Random access (indexed.h).
 */
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/error.h"
#include "shard/names.h"
#include "tar/seek.h"
#include "tar/tar.h"

struct ShardIndexed {
    ShardSource *src;
    ShardIndex idx;
    int zstd, plain;
    ShardSeekEntry *frames;
    size_t nframes;
    uint64_t *frame_doff, *frame_coff; /* cumulative decompressed / compressed offsets */
    ZSTD_DCtx *dctx;
    ShardBuf frame;   /* the decompressed frame cached */
    size_t frame_no;  /* which frame is in it, SIZE_MAX for none */
    ShardBuf packed;  /* a compressed frame, when the source has no mapping */
};

int shard_indexed_open(ShardIndexed **out, ShardSource *src, const char *index_url, int required,
                       const char *compression, char *err)
{
    *out = NULL;
    ShardIndexed *x = calloc(1, sizeof *x);
    if (!x)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", src->url);
    x->src = src;
    x->zstd = !strcmp(compression, "zstd");
    x->plain = !strcmp(compression, "none");
    x->frame_no = SIZE_MAX;
    int rc = 0;
    if (x->zstd) {
        uint64_t tb;
        rc = shard_seek_table_read(src, &x->frames, &x->nframes, &tb, err);
        if (rc == SHARD_ERR_NOT_FOUND || rc == SHARD_ERR_UNSUPPORTED)
            rc = 0;
    }
    if (!rc && !index_url) {
        shard_indexed_free(&x);
        return 0;
    }
    if (!rc) {
        rc = shard_index_load(&x->idx, index_url, src->remote, err);
        if (rc == SHARD_ERR_NOT_FOUND && !required) {
            shard_indexed_free(&x);
            return 0;
        }
    }
    if (rc) {
        shard_indexed_free(&x);
        return rc;
    }
    *out = x;
    return 0;
}

int shard_indexed_can_seek(const ShardIndexed *x)
{
    return shard_source_seekable(x->src) && (x->plain || (x->zstd && x->nframes));
}

uint64_t shard_indexed_count(const ShardIndexed *x) { return x->idx.nsamples; }

int shard_indexed_stream_from(const ShardIndexed *x, uint64_t i, uint64_t *off)
{
    if (!x->plain || i == 0 || i > x->idx.nsamples || x->idx.first[i - 1] >= x->idx.first[i])
        return 0; /* sample i - 1 has no member to end at */
    const ShardIndexEntry *e = &x->idx.entries[x->idx.first[i] - 1]; /* sample i - 1's last */
    *off = (e->offset + e->size + 511) / 512 * 512;
    return 1;
}

static int prepare_frames(ShardIndexed *x, char *err)
{
    if (x->frame_doff)
        return 0;
    x->frame_doff = malloc((x->nframes + 1) * sizeof *x->frame_doff);
    x->frame_coff = malloc((x->nframes + 1) * sizeof *x->frame_coff);
    x->dctx = ZSTD_createDCtx();
    if (!x->frame_doff || !x->frame_coff || !x->dctx)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", x->src->url);
    x->frame_doff[0] = x->frame_coff[0] = 0;
    for (size_t k = 0; k < x->nframes; k++) {
        x->frame_doff[k + 1] = x->frame_doff[k] + x->frames[k].dsize;
        x->frame_coff[k + 1] = x->frame_coff[k] + x->frames[k].csize;
    }
    return 0;
}

/* Copies size bytes at tar offset off into the field being read, decompressing frames as
 * needed; a frame may not claim more than limit bytes decompressed. */
static int read_zst_range(ShardIndexed *x, uint64_t off, uint64_t size, uint64_t limit,
                          ShardSampleBuf *sb, char *err)
{
    const char *url = x->src->url;
    int rc = prepare_frames(x, err);
    if (rc)
        return rc;
    uint64_t end = x->frame_doff[x->nframes];
    if (off > end || size > end - off || (off == end && size))
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: tar bytes %llu..%llu lie past the end of the data (%llu bytes)",
                          url, (unsigned long long)off, (unsigned long long)(off + size),
                          (unsigned long long)end);
    if (shard_sb_reserve(sb, (size_t)size)) /* the field at once, not frame by frame */
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
    while (size) {
        /* the frame holding off: last frame whose start <= off */
        size_t lo = 0, hi = x->nframes;
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (x->frame_doff[mid] <= off)
                lo = mid;
            else
                hi = mid;
        }
        if (x->frame_no != lo) {
            const ShardSeekEntry *e = &x->frames[lo];
            x->frame.len = 0;
            x->frame_no = SIZE_MAX;
            if (e->dsize > limit)
                return shard_fail(err, SHARD_ERR_FORMAT,
                                  "%s: zstd frame %zu at offset %llu claims %llu bytes "
                                  "decompressed, more than the limit of %llu (max_member_size)",
                                  url, lo, (unsigned long long)x->frame_coff[lo],
                                  (unsigned long long)e->dsize, (unsigned long long)limit);
            if (shard_buf_reserve(&x->frame, e->dsize ? e->dsize : 1))
                return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
            const unsigned char *packed =
                shard_source_view(x->src, x->frame_coff[lo], e->csize, &x->packed);
            if (!packed)
                return shard_fail(err, SHARD_ERR_IO, "%s", x->src->err);
            double t0 = shard_seconds();
            size_t r = ZSTD_decompressDCtx(x->dctx, x->frame.data, e->dsize, packed, e->csize);
            x->src->cost.unpack_seconds += shard_seconds() - t0;
            x->src->cost.unpack_bytes += ZSTD_isError(r) ? 0 : r;
            if (ZSTD_isError(r) || r != e->dsize)
                return shard_fail(err, SHARD_ERR_FORMAT, "%s: zstd frame %zu at offset %llu: %s",
                                  url, lo, (unsigned long long)x->frame_coff[lo],
                                  ZSTD_isError(r) ? ZSTD_getErrorName(r)
                                                  : "size differs from the seek table");
            x->frame.len = r;
            x->frame_no = lo;
        }
        uint64_t in = off - x->frame_doff[lo];
        uint64_t take = x->frame.len - in < size ? x->frame.len - in : size;
        if (shard_sb_append(sb, x->frame.data + in, (size_t)take))
            return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
        off += take;
        size -= take;
    }
    return 0;
}

/* Reads the field entry e of sample i (index line i + 2) into rec: a view of the mapping
 * where the source can hold it, else a copy (a .tar.zst's through its frames). */
static int read_field(ShardIndexed *x, uint64_t i, const ShardIndexEntry *e, ShardFieldRec *rec,
                      uint64_t limit, ShardSampleBuf *sb, char *err)
{
    ShardSource *src = x->src;
    const char *name = e->name ? e->name : e->ext;
    unsigned char *dst;
    if (e->size > limit)
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: index line %llu: member '%s' of %llu bytes, more than the limit "
                          "of %llu (max_member_size)",
                          src->url, (unsigned long long)i + 2, name, (unsigned long long)e->size,
                          (unsigned long long)limit);
    if (x->zstd)
        return read_zst_range(x, e->offset, e->size, limit, sb, err);
    if (src->size >= 0 &&
        (e->offset > (uint64_t)src->size || e->size > (uint64_t)src->size - e->offset))
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: index line %llu: member '%s' at offset %llu size %llu lies past "
                          "the end of the shard (%llu bytes)",
                          src->url, (unsigned long long)i + 2, name,
                          (unsigned long long)e->offset, (unsigned long long)e->size,
                          (unsigned long long)src->size);
    if (src->map && (rec->hold = shard_source_hold(src, src->map + e->offset, e->size))) {
        rec->view = src->map + e->offset;
        rec->data = SIZE_MAX;
        return 0;
    }
    if (!(dst = shard_sb_room(sb, (size_t)e->size)))
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", src->url);
    int rc = shard_source_read_at(src, e->offset, dst, (size_t)e->size);
    if (rc)
        return shard_fail(err, rc, "%s", src->err);
    shard_sb_grew(sb, (size_t)e->size);
    return 0;
}

int shard_indexed_read(ShardIndexed *x, uint64_t i, const ShardFileSettings *s, ShardSampleBuf *sb,
                       uint64_t *offset, char *err)
{
    shard_sb_reset(sb);
    const char *url = x->src->url;
    uint64_t limit = s->max_member_size ? s->max_member_size : SHARD_DEFAULT_MAX_MEMBER;
    uint64_t lo = x->idx.first[i], hi = x->idx.first[i + 1];
    /* the key, from the first member's name (v1.1 has no names: "") */
    const char *first = lo < hi ? x->idx.entries[lo].name : NULL;
    size_t ks = 0, kl = 0;
    const char *field;
    if (first && shard_name_split(first, &ks, &kl, &field))
        kl = 0;
    if (lo < hi && shard_sb_set_key(sb, first ? first + ks : "", kl))
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
    for (uint64_t k = lo; k < hi; k++) {
        const ShardIndexEntry *e = &x->idx.entries[k];
        ShardFieldRec *rec = shard_sb_add(sb, e->ext, e->name ? e->name : e->ext, s->lowercase);
        if (!rec)
            return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
        rec->size = e->size;
        rec->offset = e->offset;
        int rc = read_field(x, i, e, rec, limit, sb, err);
        if (rc)
            return rc;
    }
    uint64_t start = x->idx.entries[lo].offset;
    *offset = start >= 512 ? start - 512 : 0;
    return 0;
}

void shard_indexed_free(ShardIndexed **px)
{
    if (!px || !*px)
        return;
    ShardIndexed *x = *px;
    shard_index_clear(&x->idx);
    free(x->frames);
    free(x->frame_doff);
    free(x->frame_coff);
    ZSTD_freeDCtx(x->dctx);
    shard_buf_free(&x->frame);
    shard_buf_free(&x->packed);
    free(x);
    *px = NULL;
}
