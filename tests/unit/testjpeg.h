/* Real JPEGs for the tests, made with libjpeg (quality 90) from a pixel function. */
#ifndef SHARD_TESTJPEG_H
#define SHARD_TESTJPEG_H

#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

/* The colour of pixel (x, y) of a w x h image; seed is the caller's. */
typedef void (*tu_pixel_fn)(int x, int y, int w, int h, int seed, unsigned char rgb[3]);

/* A w x h JPEG: malloc'd, *size bytes. */
static inline unsigned char *tu_jpeg(int w, int h, tu_pixel_fn pixel, int seed, unsigned long *size)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    jpeg_mem_dest(&c, &out, size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    jpeg_start_compress(&c, TRUE);
    unsigned char *row = malloc((size_t)w * 3);
    while (c.next_scanline < c.image_height) {
        for (int x = 0; x < w; x++)
            pixel(x, (int)c.next_scanline, w, h, seed, row + 3 * x);
        JSAMPROW r[1] = {row};
        jpeg_write_scanlines(&c, r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    return out;
}

#endif /* SHARD_TESTJPEG_H */
