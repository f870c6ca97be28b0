/*
 * What the JPEG kernels (jpeg.cu) take: one entry per image of a batch in device memory,
 * and the batch's output size by value. Shared by nvcc's and the C compiler's view, so
 * only fixed-size fields.
 */
#ifndef SHARD_GPU_JPEGARGS_H
#define SHARD_GPU_JPEGARGS_H

enum { SHARD_JPEG_RGBI = 9 }; /* css: plane 0 holds interleaved RGB already */

typedef struct ShardJpegImage {
    const unsigned char *plane[3]; /* Y, Cb, Cr as nvJPEG wrote them (YUV), or RGB */
    unsigned int pitch[3];
    int w, h;          /* the image */
    int cw, ch;        /* its chroma planes */
    int css;           /* NVJPEG_CSS_444 / 422 / 420 / GRAY, or SHARD_JPEG_RGBI */
    unsigned char *rgb; /* w x h x 3: the decoded image, colour converted */
    unsigned char *tmp; /* (y1 - y0) x out_w x 3: the horizontal pass's rows */
    int y0, y1;        /* rows of rgb the vertical pass reads */
    float box[4];      /* x, y, width, height of the crop in rgb, as PIL's box */
    int flip;          /* mirrored */
    int pad;
    unsigned char *out; /* out_h x out_w x 3: the image's place in the batch */
} ShardJpegImage;

typedef struct ShardJpegArgs {
    const ShardJpegImage *images; /* device */
    int out_w, out_h;
    int rows; /* the most rows any image's horizontal pass makes (grid size) */
    int pixels; /* the most pixels any image has (grid size) */
} ShardJpegArgs;

#endif /* SHARD_GPU_JPEGARGS_H */
