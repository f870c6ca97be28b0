/*
 * Encoding and decoding of the seek table of zstd's seekable format.
 */
#include <stdlib.h>

#include "base/buf.h"
#include "base/error.h"
#include "source/source.h"
#include "tar/seektable.h"

static void put_le32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

int shard_seek_table_encode(const ShardSeekEntry *e, size_t n, ShardBuf *out)
{
    if (n > UINT32_MAX / 12 - 1)
        return SHARD_ERR_INVALID;
    size_t payload = n * 12 + SHARD_SEEK_FOOTER_SIZE;
    int rc = shard_buf_reserve(out, 8 + payload);
    if (rc)
        return rc;
    unsigned char *p = out->data + out->len;
    put_le32(p, SHARD_SEEK_SKIPPABLE_MAGIC);
    put_le32(p + 4, (uint32_t)payload);
    p += 8;
    for (size_t i = 0; i < n; i++, p += 12) {
        put_le32(p, e[i].csize);
        put_le32(p + 4, e[i].dsize);
        put_le32(p + 8, e[i].checksum);
    }
    put_le32(p, (uint32_t)n);
    p[4] = SHARD_SEEK_CHECKSUM_FLAG;
    put_le32(p + 5, SHARD_SEEK_FOOTER_MAGIC);
    out->len += 8 + payload;
    return 0;
}

static uint32_t get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The footer's frame count and entry size, and the whole table's size; -1 when the last
 * bytes are not a seek table footer. */
static int footer(const unsigned char *foot, uint32_t *frames, size_t *esize, uint64_t *total)
{
    if (get_le32(foot + 5) != SHARD_SEEK_FOOTER_MAGIC)
        return -1;
    *frames = get_le32(foot);
    *esize = (foot[4] & SHARD_SEEK_CHECKSUM_FLAG) ? 12 : 8;
    *total = (uint64_t)*frames * *esize + SHARD_SEEK_FOOTER_SIZE + 8;
    return 0;
}

int shard_seek_table_decode(const unsigned char *t, uint64_t tbytes, uint64_t size,
                            const char *url, ShardSeekEntry **e, size_t *n, char *err)
{
    *e = NULL;
    *n = 0;
    uint32_t frames;
    size_t esize;
    uint64_t total;
    if (tbytes < 8 + SHARD_SEEK_FOOTER_SIZE || tbytes > size ||
        footer(t + tbytes - SHARD_SEEK_FOOTER_SIZE, &frames, &esize, &total) || total != tbytes)
        return shard_fail(err, SHARD_ERR_FORMAT, "%s: seek table at offset %llu: malformed",
                          url, (unsigned long long)(size - (tbytes < size ? tbytes : size)));
    uint64_t payload = total - 8;
    if (get_le32(t) != SHARD_SEEK_SKIPPABLE_MAGIC || get_le32(t + 4) != payload)
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: seek table at offset %llu: no skippable frame of %llu bytes "
                          "holds it",
                          url, (unsigned long long)(size - total), (unsigned long long)payload);
    ShardSeekEntry *v = malloc((frames ? frames : 1) * sizeof *v);
    if (!v)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
    uint64_t csum = 0;
    for (uint32_t i = 0; i < frames; i++) {
        const unsigned char *p = t + 8 + (size_t)i * esize;
        v[i].csize = get_le32(p);
        v[i].dsize = get_le32(p + 4);
        v[i].checksum = esize == 12 ? get_le32(p + 8) : 0;
        v[i].has_checksum = esize == 12;
        csum += v[i].csize;
    }
    if (csum != size - total) {
        free(v);
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: seek table at offset %llu: its frames add up to %llu bytes, the "
                          "file has %llu before the table",
                          url, (unsigned long long)(size - total), (unsigned long long)csum,
                          (unsigned long long)(size - total));
    }
    *e = v;
    *n = frames;
    return 0;
}

int shard_seek_table_read(ShardSource *src, ShardSeekEntry **e, size_t *n, uint64_t *table_bytes,
                          char *err)
{
    *e = NULL;
    *n = 0;
    if (!shard_source_seekable(src))
        return SHARD_ERR_UNSUPPORTED;
    int64_t known = shard_source_size(src);
    if (known < 0)
        return src->ops->stat ? shard_fail(err, SHARD_ERR_IO, "%s", src->err)
                              : SHARD_ERR_UNSUPPORTED;
    uint64_t size = (uint64_t)known;
    if (size < 8 + SHARD_SEEK_FOOTER_SIZE)
        return SHARD_ERR_NOT_FOUND;
    ShardBuf tmp = {0};
    const unsigned char *foot = shard_source_view(src, size - SHARD_SEEK_FOOTER_SIZE,
                                                  SHARD_SEEK_FOOTER_SIZE, &tmp);
    uint32_t frames;
    size_t esize;
    uint64_t total;
    int rc;
    if (!foot) {
        rc = shard_fail(err, SHARD_ERR_IO, "%s", src->err);
    } else if (footer(foot, &frames, &esize, &total)) {
        rc = SHARD_ERR_NOT_FOUND;
    } else if (foot[4] & 0x7c) {
        rc = shard_fail(err, SHARD_ERR_FORMAT,
                        "%s: seek table at offset %llu: reserved descriptor bits are set",
                        src->url, (unsigned long long)(size - SHARD_SEEK_FOOTER_SIZE));
    } else if (total > size) {
        rc = shard_fail(err, SHARD_ERR_FORMAT,
                        "%s: seek table: %u frames do not fit in a file of %llu bytes", src->url,
                        frames, (unsigned long long)size);
    } else {
        const unsigned char *t = shard_source_view(src, size - total, (size_t)total, &tmp);
        rc = t ? shard_seek_table_decode(t, total, size, src->url, e, n, err)
               : shard_fail(err, SHARD_ERR_IO, "%s", src->err);
        if (!rc)
            *table_bytes = total;
    }
    shard_buf_free(&tmp);
    return rc;
}
