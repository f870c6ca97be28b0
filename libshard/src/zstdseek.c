/*
 * Encoding (and later decoding) of the seek table of zstd's seekable format.
 */
#include "zstdseek.h"

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
