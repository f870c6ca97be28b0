/*
 * What kind of JPEG a file is, from its header alone (libjpeg reads it; nothing is
 * decoded): whether the GPU's JPEG decoder takes it, and if not, why.
 */
#ifndef SHARD_DECODE_JPEGKIND_H
#define SHARD_DECODE_JPEGKIND_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"

typedef enum ShardJpegKind {
    SHARD_JPEG_GPU_OK = 0,       /* baseline, 8-bit, YCbCr 4:4:4 / 4:2:2 / 4:2:0 or grey */
    SHARD_JPEG_NOT_JPEG = 1,     /* another format, or a header libjpeg refuses */
    SHARD_JPEG_PROGRESSIVE = 2,  /* progressive or arithmetic-coded */
    SHARD_JPEG_COLOUR = 3,       /* CMYK, YCCK, RGB or another colour space */
    SHARD_JPEG_SAMPLING = 4,     /* 4:4:0, 4:1:1 or another chroma sampling */
    SHARD_JPEG_OTHER = 5,        /* 12-bit, larger than max_pixels, no end-of-image marker */
    SHARD_JPEG_KINDS = 6,
} ShardJpegKind;

/* The kind of the JPEG in data, and its size in *width, *height when known. max_pixels:
 * the most pixels one may declare (0: no limit). */
SHARD_HIDDEN ShardJpegKind shard_jpeg_kind(const void *data, size_t size, uint64_t max_pixels,
                                           int *width, int *height);

/* "progressive" and so on, for stats and messages */
SHARD_HIDDEN const char *shard_jpeg_kind_name(ShardJpegKind k);

#endif /* SHARD_DECODE_JPEGKIND_H */
