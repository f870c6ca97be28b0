/*
 * Resizing while packing (ShardPackSettings.max_side): a JPEG whose longer side exceeds the
 * limit is decoded whole, resized with PIL's antialiased bilinear filter so that its longer
 * side is the limit, and encoded again by libjpeg-turbo at the quality asked for, as FFCV's
 * max_resolution and img2dataset's resizing do: decode cost at training time follows pixels.
 *
 * Every step is exact integer arithmetic (libjpeg-turbo's accurate DCTs, the plain-C
 * resampler rather than the decode pool's SIMD one), so every machine of a packing cluster
 * writes the same bytes for the same input.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "pack/shrink.h"
#include "base/error.h"
#include "decode/jpegerr.h"
#include "shard/decode.h"
#include "shard/image.h"

/* Width, height and components from the JPEG's header. */
static int jpeg_header(const void *data, size_t size, int *w, int *h, int *comps, char *msg)
{
    struct jpeg_decompress_struct d;
    ShardJpegErr e;
    d.err = shard_jpeg_err_init(&e);
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&d);
        return shard_fail(msg, SHARD_ERR_DECODE, "JPEG header: %s", e.msg);
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, data, (unsigned long)size);
    jpeg_read_header(&d, TRUE);
    *w = (int)d.image_width;
    *h = (int)d.image_height;
    *comps = d.num_components;
    jpeg_destroy_decompress(&d);
    return 0;
}

/* rgb (w x h, 3 bytes a pixel; greyscale when gray: the R channel is taken) as a JPEG. */
static int jpeg_encode(const unsigned char *rgb, int w, int h, int gray, int quality,
                       unsigned char **out, size_t *out_size, char *msg)
{
    struct jpeg_compress_struct c;
    ShardJpegErr e;
    unsigned char *mem = NULL; /* address taken: in memory when longjmp comes back */
    unsigned long mem_size = 0;
    unsigned char *volatile row = NULL;
    c.err = shard_jpeg_err_init(&e);
    if (setjmp(e.jump)) {
        jpeg_destroy_compress(&c);
        free(mem);
        free(row);
        return shard_fail(msg, SHARD_ERR_DECODE, "JPEG encode: %s", e.msg);
    }
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &mem, &mem_size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = gray ? 1 : 3;
    c.in_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    c.dct_method = JDCT_ISLOW;
    c.optimize_coding = TRUE; /* smaller files for a second pass over each image's coefficients */
    if (gray && !(row = malloc((size_t)w > 0 ? (size_t)w : 1))) {
        jpeg_destroy_compress(&c);
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    }
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        const unsigned char *src = rgb + (size_t)c.next_scanline * (size_t)w * 3;
        JSAMPROW r = (JSAMPROW)src;
        if (gray) {
            for (int x = 0; x < w; x++)
                row[x] = src[3 * x];
            r = row;
        }
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    *out = mem;
    *out_size = mem_size;
    return 0;
}

int shard_jpeg_shrink(const void *data, size_t size, int max_side, int quality, ShardShrunk *out,
                      char *msg)
{
    memset(out, 0, sizeof *out);
    const char *fmt = shard_image_format(data, size);
    if (!fmt || strcmp(fmt, "jpeg") || max_side <= 0)
        return 0;
    int w, h, comps;
    int rc = jpeg_header(data, size, &w, &h, &comps, msg);
    if (rc)
        return rc;
    if (w <= max_side && h <= max_side)
        return 0;
    /* the longer side becomes max_side; the shorter keeps the aspect, rounded, at least 1 */
    int ow = w >= h ? max_side : (int)(((int64_t)w * max_side * 2 + h) / (2 * (int64_t)h));
    int oh = w >= h ? (int)(((int64_t)h * max_side * 2 + w) / (2 * (int64_t)w)) : max_side;
    ow = ow < 1 ? 1 : ow;
    oh = oh < 1 ? 1 : oh;
    unsigned char *rgb = NULL, *small = NULL;
    int dw, dh;
    rc = shard_decode_rgb(data, size, &rgb, &dw, &dh, msg, SHARD_ERROR_MAX);
    if (rc)
        return rc;
    small = malloc((size_t)ow * (size_t)oh * 3);
    if (!small) {
        free(rgb);
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    }
    rc = shard_resize_rgb(rgb, dw, dh, 0, 0, dw, dh, small, ow, oh);
    free(rgb);
    if (rc) {
        free(small);
        return shard_fail(msg, rc, "resize to %dx%d failed", ow, oh);
    }
    rc = jpeg_encode(small, ow, oh, comps == 1, quality, &out->data, &out->size, msg);
    free(small);
    if (rc)
        return rc;
    out->width = w;
    out->height = h;
    out->out_width = ow;
    out->out_height = oh;
    return 0;
}
