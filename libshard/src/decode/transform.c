/*
 * Decoding and transforms (shard/decode.h): an image decoded by its format (jpeg.c, png.c, webp.c),
 * cropped (crop.c), resampled (resize.c) and stored in the output's type and layout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "decode/crop.h"
#include "decode/transform.h"
#include "decode/jpeg.h"
#include "decode/limit.h"
#include "decode/png.h"
#include "decode/resize.h"
#include "decode/scratch.h"
#include "decode/webp.h"
#include "shard/decode.h"
#include "shard/image.h"
#ifdef SHARD_RESIZE_X86
#include "decode/x86/planar.h"
#endif

void shard_transform_default_settings(ShardTransform *t)
{
    memset(t, 0, sizeof *t);
    t->width = 224;
    t->height = 224;
    t->crop = SHARD_CROP_RANDOM_RESIZED;
    t->scale_min = 0.08;
    t->scale_max = 1.0;
    t->ratio_min = 3.0 / 4.0;
    t->ratio_max = 4.0 / 3.0;
    t->center_fraction = 0.875;
    t->flip = 0;
    t->fast = 1;
    t->layout = SHARD_LAYOUT_NCHW;
    t->dtype = SHARD_DTYPE_UINT8;
    t->mean[0] = 0.485f, t->mean[1] = 0.456f, t->mean[2] = 0.406f;
    t->std[0] = 0.229f, t->std[1] = 0.224f, t->std[2] = 0.225f;
    t->max_pixels = DEFAULT_MAX_PIXELS;
    t->max_decode_memory = DEFAULT_MAX_DECODE_MEMORY;
    t->max_scans = DEFAULT_MAX_SCANS;
}

size_t shard_transform_output_size(const ShardTransform *t)
{
    return (size_t)t->width * (size_t)t->height * 3 * (t->dtype == SHARD_DTYPE_FLOAT32 ? 4 : 1);
}

/* The whole image (of format fmt, as shard_image_format says) as RGB in the scratch's
 * pixel buffer. */
static int decode_rgb(ShardScratch *sc, const char *fmt, const void *data, size_t size,
                      const ShardTransform *t, unsigned char **out, int *width, int *height,
                      char *msg, size_t msgsize)
{
    if (fmt && !strcmp(fmt, "jpeg"))
        return shard_jpeg_decode(sc, data, size, t, NULL, NULL, 3, out, width, height, msg,
                                 msgsize);
    if (fmt && !strcmp(fmt, "png"))
        return shard_png_decode(sc, data, size, t, out, width, height, msg, msgsize);
    if (fmt && !strcmp(fmt, "webp"))
        return shard_webp_decode(sc, data, size, t, out, width, height, msg, msgsize);
    if (msg)
        snprintf(msg, msgsize, "%s images are not decoded (JPEG, PNG and WebP are)",
                 fmt ? fmt : "unknown");
    return SHARD_ERR_UNSUPPORTED;
}

int shard_decode_rgb(const void *data, size_t size, unsigned char **out, int *width, int *height,
                     char *msg, size_t msgsize)
{
    *out = NULL;
    ShardScratch sc = {0};
    unsigned char *px;
    int rc = decode_rgb(&sc, shard_image_format(data, size), data, size, NULL, &px, width, height, msg,
                        msgsize);
    if (!rc)
        *out = shard_scratch_take(&sc, SHARD_SCR_PIXELS); /* px: the caller's now */
    shard_scratch_release(&sc);
    return rc;
}

int shard_decode_rgbx(const void *data, size_t size, unsigned char **out, int *width,
                      int *height, char *msg, size_t msgsize)
{
    *out = NULL;
    const char *fmt = shard_image_format(data, size);
    if (!fmt || strcmp(fmt, "jpeg")) {
        if (msg)
            snprintf(msg, msgsize, "%s images are not decoded to RGBX (JPEGs are)",
                     fmt ? fmt : "unknown");
        return SHARD_ERR_UNSUPPORTED;
    }
    ShardScratch sc = {0};
    unsigned char *px;
    int rc = shard_jpeg_decode(&sc, data, size, NULL, NULL, NULL, 4, &px, width, height, msg,
                               msgsize);
    if (!rc)
        *out = shard_scratch_take(&sc, SHARD_SCR_PIXELS); /* px: the caller's now */
    shard_scratch_release(&sc);
    return rc;
}

void shard_rgb_planar(const unsigned char *rgb, int w, int h, unsigned char *out)
{
    size_t plane = (size_t)w * (size_t)h, i = 0;
    unsigned char *r = out, *g = out + plane, *b = out + 2 * plane;
#ifdef SHARD_RESIZE_X86
    if (__builtin_cpu_supports("ssse3"))
        i = shard_rgb_planar_ssse3(rgb, plane, r, g, b);
#endif
    for (; i < plane; i++) {
        r[i] = rgb[3 * i];
        g[i] = rgb[3 * i + 1];
        b[i] = rgb[3 * i + 2];
    }
}

/* ---- output ---------------------------------------------------------------------------- */

/* From interleaved RGB to NHWC or float, mirrored when flip (uint8 NCHW is written by the
 * resampler itself). */
static void store(const ShardTransform *t, const unsigned char *rgb, int flip, void *out)
{
    int W = t->width, H = t->height;
    size_t plane = (size_t)W * H;
    if (t->dtype == SHARD_DTYPE_UINT8 && t->layout == SHARD_LAYOUT_NHWC && !flip) {
        memcpy(out, rgb, plane * 3);
        return;
    }
    float scale[3], bias[3];
    for (int c = 0; c < 3; c++) {
        scale[c] = 1.0f / (255.0f * t->std[c]);
        bias[c] = -t->mean[c] / t->std[c];
    }
    for (int y = 0; y < H; y++) {
        const unsigned char *src = rgb + (size_t)y * W * 3;
        for (int x = 0; x < W; x++) {
            const unsigned char *p = src + (size_t)(flip ? W - 1 - x : x) * 3;
            for (int c = 0; c < 3; c++) {
                size_t o = t->layout == SHARD_LAYOUT_NHWC ? ((size_t)y * W + x) * 3 + c
                                                           : c * plane + (size_t)y * W + x;
                if (t->dtype == SHARD_DTYPE_UINT8)
                    ((unsigned char *)out)[o] = p[c];
                else
                    ((float *)out)[o] = p[c] * scale[c] + bias[c];
            }
        }
    }
}

int shard_decode_transform_with(ShardScratch *sc, const void *data, size_t size,
                                const ShardTransform *t, uint64_t seed, void *out, char *msg,
                                size_t msgsize)
{
    if (t->width <= 0 || t->height <= 0 || t->width > 16384 || t->height > 16384) {
        if (msg)
            snprintf(msg, msgsize, "output size %dx%d is not valid", t->width, t->height);
        return SHARD_ERR_INVALID;
    }
    ShardRng rng;
    shard_rng_init(&rng, seed, SHARD_RNG_CROP, 0, 0, 0);
    const char *fmt = shard_image_format(data, size);
    unsigned char *rgb = NULL;
    int w = 0, h = 0, rc;
    ShardBox box;
    if (fmt && !strcmp(fmt, "jpeg")) {
        /* The fast path stops after the crop's last row, so libjpeg never sees a cut end:
         * look for the end-of-image marker instead (trailing bytes after it are allowed). */
        if (t->fast && !shard_jpeg_has_eoi(data, size)) {
            if (msg)
                snprintf(msg, msgsize, "corrupt JPEG: truncated (no end-of-image marker)");
            return SHARD_ERR_DECODE;
        }
        rc = shard_jpeg_decode(sc, data, size, t, &rng, &box, 3, &rgb, &w, &h, msg, msgsize);
    } else {
        rc = decode_rgb(sc, fmt, data, size, t, &rgb, &w, &h, msg, msgsize);
        if (!rc)
            box = shard_crop_box(t, w, h, &rng);
    }
    if (rc)
        return rc;
    int flip = t->flip && (shard_rng_next(&rng) >> 63);
    /* uint8 NCHW goes straight into the caller's planes (mirrored there); other outputs
     * through an RGB buffer that store() converts */
    int direct = t->dtype == SHARD_DTYPE_UINT8 && t->layout == SHARD_LAYOUT_NCHW;
    unsigned char *dst = direct ? out
                                : shard_scratch(sc, SHARD_SCR_RESIZED, (size_t)t->width * t->height * 3);
    /* The vertical-first resampler: within 1 of PIL (shard_resize_rgb is PIL's bytes). */
    rc = dst ? shard_resize_fast(sc, rgb, w, h, box.x, box.y, box.w, box.h, dst, t->width,
                                 t->height, direct, direct && flip)
             : SHARD_ERR_NOMEM;
    if (rc) {
        if (msg)
            snprintf(msg, msgsize, rc == SHARD_ERR_NOMEM ? "out of memory"
                                   : "cannot resize a %dx%d image's crop", w, h);
        return rc;
    }
    if (!direct)
        store(t, dst, flip, out);
    return 0;
}

int shard_transform_box(const ShardTransform *t, int width, int height, uint64_t seed,
                        double box[4], int *flip)
{
    if (width <= 0 || height <= 0 || t->width <= 0 || t->height <= 0)
        return SHARD_ERR_INVALID;
    /* the draws shard_decode_transform_with makes, in its order */
    ShardRng rng;
    shard_rng_init(&rng, seed, SHARD_RNG_CROP, 0, 0, 0);
    ShardBox b = shard_crop_box(t, width, height, &rng);
    int f = t->flip && (shard_rng_next(&rng) >> 63);
    box[0] = b.x, box[1] = b.y, box[2] = b.w, box[3] = b.h;
    if (flip)
        *flip = f;
    return 0;
}

int shard_decode_transform(const void *data, size_t size, const ShardTransform *t, uint64_t seed,
                           void *out, char *msg, size_t msgsize)
{
    ShardScratch sc = {0};
    int rc = shard_decode_transform_with(&sc, data, size, t, seed, out, msg, msgsize);
    shard_scratch_release(&sc);
    return rc;
}
