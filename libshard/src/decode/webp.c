/*
 * WebP decoding (webp.h): the size and kind from the bitstream's header first, so that a
 * declared size past the limit and an animation are refused before any pixel is decoded.
 */
#include <stdio.h>

#include <webp/decode.h>

#include "base/error.h"
#include "decode/limit.h"
#include "decode/scratch.h"
#include "decode/webp.h"

static const char *status_words(VP8StatusCode st)
{
    switch (st) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated";
    default: return "cannot decode";
    }
}

/* An upper bound of what libwebp 1.2 takes to decode f (size bytes) into RGB: the RGB out;
 * lossy, its caches (72 per column); a lossless image, or a lossy one's alpha (taken as
 * lossless-coded), its ARGB pixels and rows (4 (px + 17 w)), its transforms' and meta
 * images (px in all at most), and its Huffman tables, reserved up front for as many groups
 * as the meta image may name: at most one per 4 x 4 pixels, 65536, or one per 20 bits of
 * the file (five codes of 4 bits at least), each at most 5004 entries of 4 bytes. The
 * tables dominate: a small file may declare 65536 groups (1.3 GB). */
static uint64_t webp_memory(const WebPBitstreamFeatures *f, size_t size)
{
    uint64_t w = (uint64_t)f->width, h = (uint64_t)f->height, px = w * h;
    uint64_t groups = ((w + 3) / 4) * ((h + 3) / 4), coded = (uint64_t)size * 8 / 20 + 1;
    groups = groups < coded ? groups : coded;
    groups = groups < 65536 ? groups : 65536;
    uint64_t lossless = 4 * (px + 17 * w) + px + groups * 5004 * 4;
    uint64_t m = px * 3 + (1 << 20);
    if (f->format == 2)
        return m + lossless;
    return m + 72 * w + (f->has_alpha ? 2 * px + lossless : 0);
}

int shard_webp_decode(ShardScratch *sc, const void *data, size_t size, const ShardTransform *t,
                      unsigned char **rgb, int *w, int *h, char *msg, size_t msgsize)
{
    WebPBitstreamFeatures f;
    VP8StatusCode st = WebPGetFeatures(data, size, &f);
    if (st != VP8_STATUS_OK) {
        if (msg)
            snprintf(msg, msgsize, "corrupt WebP: %s", status_words(st));
        return SHARD_ERR_DECODE;
    }
    if (f.has_animation) {
        if (msg)
            snprintf(msg, msgsize, "animated WebP (%dx%d) is not decoded: store one frame as "
                     "the sample's image", f.width, f.height);
        return SHARD_ERR_UNSUPPORTED;
    }
    int big = shard_too_big("a WebP", (uint64_t)f.width, (uint64_t)f.height,
                            shard_pixel_limit(t), msg, msgsize);
    if (!big)
        big = shard_scratch_admit(sc, webp_memory(&f, size), shard_decode_memory_limit(t),
                                  f.format == 2 ? "a lossless WebP"
                                  : f.has_alpha ? "a WebP with alpha" : "a WebP",
                                  (uint64_t)f.width, (uint64_t)f.height, msg, msgsize);
    if (big)
        return big;
    size_t stride = (size_t)f.width * 3, n = stride * (size_t)f.height;
    unsigned char *buf = shard_scratch(sc, SHARD_SCR_PIXELS, n ? n : 1);
    if (!buf) {
        if (msg)
            snprintf(msg, msgsize, "out of memory");
        return SHARD_ERR_NOMEM;
    }
    /* RGB straight: libwebp keeps colour and alpha apart (not premultiplied), so dropping
     * the alpha leaves the colours PIL's convert("RGB") leaves */
    if (!WebPDecodeRGBInto(data, size, buf, n, (int)stride)) {
        if (msg)
            snprintf(msg, msgsize, "corrupt WebP: the %dx%d image does not decode", f.width,
                     f.height);
        return SHARD_ERR_DECODE;
    }
    *rgb = buf;
    *w = f.width;
    *h = f.height;
    return 0;
}
