/*
 * JPEG decoding (jpeg.c) with libjpeg-turbo, one decompressor per thread kept in its scratch.
 *
 * The fast path decides the crop box first (from the header's size), then asks
 * libjpeg-turbo for only that: the smallest DCT scale M/8 at which the box still covers
 * the output, jpeg_crop_scanline for the columns, jpeg_skip_scanlines for the rows above,
 * and stops after the box's last row. The resampler then maps the box (in scaled pixels,
 * fractions kept) onto the output, so the geometry is the same as a full decode's.
 */
#ifndef SHARD_DECODE_JPEG_H
#define SHARD_DECODE_JPEG_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "base/rng.h"
#include "decode/crop.h"
#include "decode/scratch.h"
#include "shard/decode.h"

/* Decodes a JPEG into the scratch's pixel buffer (*rgb, *rw x *rh, bpp bytes a pixel: 3 for
 * RGB, 4 for RGBX, which a CMYK JPEG is not decoded to): with box_out, the crop t draws
 * from rng (on the fast path at a reduced scale, only the rows and columns it needs), and
 * *box_out the crop in those pixels; with box_out NULL, the whole image at full size. 0, or
 * SHARD_ERR_DECODE / SHARD_ERR_NOMEM / SHARD_ERR_UNSUPPORTED with msg. */
SHARD_HIDDEN int shard_jpeg_decode(ShardScratch *sc, const void *data, size_t size,
                                   const ShardTransform *t, ShardRng *rng, ShardBox *box_out,
                                   int bpp, unsigned char **rgb, int *rw, int *rh, char *msg,
                                   size_t msgsize);

/* The bytes a decode of ci as its output is set (scale, colour) takes: the output's pixels
 * and rows, and a JPEG of several scans' coefficients, all kept until the last scan. */
struct jpeg_decompress_struct;
SHARD_HIDDEN uint64_t shard_jpeg_memory(const struct jpeg_decompress_struct *ci, int cmyk);

/* Whether an end-of-image marker (FF D9) lies in the last 64 KiB: the fast path stops after
 * the crop's last row, so libjpeg never sees a cut end. */
SHARD_HIDDEN int shard_jpeg_has_eoi(const void *data, size_t size);

#endif /* SHARD_DECODE_JPEG_H */
