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
    /* the RGB pixels, and a lossless image's ARGB ones inside libwebp */
    uint64_t px = (uint64_t)f.width * (uint64_t)f.height;
    if (!big)
        big = shard_scratch_admit(sc, px * 3 + (f.format == 2 ? px * 4 : 0) + (1 << 20),
                                  shard_decode_memory_limit(t), "a WebP", (uint64_t)f.width,
                                  (uint64_t)f.height, msg, msgsize);
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
