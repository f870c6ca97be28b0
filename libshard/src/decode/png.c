/*
 * PNG decoding (png.h).
 */
#include <stdio.h>
#include <string.h>

#include <png.h>

#include "decode/limit.h"
#include "decode/png.h"
#include "decode/scratch.h"

int shard_png_decode(ShardScratch *sc, const void *data, size_t size, const ShardTransform *t,
                      unsigned char **rgb, int *w, int *h, char *msg, size_t msgsize)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, data, size)) {
        if (msg)
            snprintf(msg, msgsize, "corrupt PNG: %s", img.message);
        return SHARD_ERR_DECODE;
    }
    /* RGBA, then the alpha dropped: what PIL's convert("RGB") gives, so PNGs come out as
     * the reference pipelines see them (grey and palettes expanded by libpng). */
    img.format = PNG_FORMAT_RGBA;
    int big = shard_too_big("a PNG", img.width, img.height, shard_pixel_limit(t), msg, msgsize);
    /* the RGBA pixels, libpng's rows (two, of up to 16 bits a sample), zlib's window, and
     * the chunks libpng keeps (an ICC profile: 8 MB at most) */
    if (!big)
        big = shard_scratch_admit(sc, (uint64_t)PNG_IMAGE_SIZE(img) + (uint64_t)img.width * 16 +
                                          (9 << 20),
                                  shard_decode_memory_limit(t), "a PNG", img.width, img.height,
                                  msg, msgsize);
    if (big) {
        png_image_free(&img);
        return big;
    }
    size_t n = (size_t)img.width * img.height;
    unsigned char *buf = shard_scratch(sc, SHARD_SCR_PIXELS, PNG_IMAGE_SIZE(img));
    if (!buf) {
        png_image_free(&img);
        if (msg)
            snprintf(msg, msgsize, "out of memory");
        return SHARD_ERR_NOMEM;
    }
    if (!png_image_finish_read(&img, NULL, buf, 0, NULL)) {
        if (msg)
            snprintf(msg, msgsize, "corrupt PNG: %s", img.message);
        png_image_free(&img);
        return SHARD_ERR_DECODE;
    }
    for (size_t i = 0; i < n; i++) {
        buf[3 * i] = buf[4 * i];
        buf[3 * i + 1] = buf[4 * i + 1];
        buf[3 * i + 2] = buf[4 * i + 2];
    }
    *rgb = buf;
    *w = (int)img.width;
    *h = (int)img.height;
    return 0;
}
