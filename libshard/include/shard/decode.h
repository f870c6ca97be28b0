/*
 * libshard — decoding images into training tensors: JPEG with libjpeg-turbo (only the crop
 * region, at the smallest DCT scale that still covers the output), PNG with libpng, then
 * crop, resize (PIL's bilinear filter, antialiased; within 1 of PIL's bytes for the same box),
 * flip, layout and normalization.
 *
 * All functions are thread-safe and keep no state between calls.
 */
#ifndef SHARD_DECODE_H
#define SHARD_DECODE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ShardCrop {
    SHARD_CROP_RANDOM_RESIZED = 0, /**< torchvision's RandomResizedCrop (training) */
    SHARD_CROP_CENTER = 1,         /**< torchvision's Resize(floor(size / center_fraction))
                                        + CenterCrop(size), as one box (evaluation) */
    SHARD_CROP_NONE = 2,           /**< the whole image resized to the output size */
    /** resized to cover the output size, its aspect kept (the scale max(width / w,
     *  height / h), sides rounded), and the output's size taken from the middle: an aspect
     *  bucket's crop, as diffusion trainers make it */
    SHARD_CROP_COVER = 3,
    /** as SHARD_CROP_COVER, the output's size taken at a random place of the resized image
     *  (every whole-pixel offset as likely) */
    SHARD_CROP_COVER_RANDOM = 4,
} ShardCrop;

typedef enum ShardLayout {
    SHARD_LAYOUT_NHWC = 0, /**< height, width, channel (PIL / numpy order) */
    SHARD_LAYOUT_NCHW = 1, /**< channel, height, width (torch order) */
} ShardLayout;

typedef enum ShardDType {
    SHARD_DTYPE_UINT8 = 0,   /**< 0..255 */
    SHARD_DTYPE_FLOAT32 = 1, /**< (value / 255 - mean) / std per channel */
} ShardDType;

typedef struct ShardTransform {
    int width, height;          /**< output size (default 224 x 224) */
    ShardCrop crop;             /**< default SHARD_CROP_RANDOM_RESIZED */
    double scale_min, scale_max; /**< RandomResizedCrop area range (default 0.08, 1.0) */
    double ratio_min, ratio_max; /**< RandomResizedCrop aspect range (default 3/4, 4/3) */
    double center_fraction;     /**< SHARD_CROP_CENTER: crop / resized side (default 0.875) */
    int flip;                   /**< random horizontal flip with probability 1/2 (default 0) */
    int fast;                   /**< decode only the crop, at a reduced DCT scale (default 1);
                                     0 decodes the whole image at full size first */
    ShardLayout layout;         /**< default SHARD_LAYOUT_NCHW */
    ShardDType dtype;           /**< default SHARD_DTYPE_UINT8 */
    float mean[3], std[3];      /**< for FLOAT32 (default ImageNet's) */
    /** The most pixels an image may declare (width x height); a larger one is refused
     *  before any memory goes to it, as PIL's decompression-bomb limit does (default and
     *  0: 178956970, PIL's) */
    uint64_t max_pixels;
    /** The most memory one decode may take, as its header says (a progressive JPEG's
     *  coefficients, the decoded pixels, the decoder's rows; libjpeg's max_memory_to_use
     *  holds it too): a larger image is refused (default and 0: 536870912, 512 MiB) */
    uint64_t max_decode_memory;
    /** The most scans a JPEG may have: each scan of a progressive JPEG walks every block,
     *  so a small file of thousands of scans takes minutes (default and 0: 100; djpeg's
     *  -maxscans) */
    uint32_t max_scans;
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[12];
} ShardTransform;

/** Fills t with the defaults written beside each field. */
SHARD_API void shard_transform_default_settings(ShardTransform *t);

/** @return bytes of one output image: width * height * 3 * (1 or 4) */
SHARD_API size_t shard_transform_output_size(const ShardTransform *t);

/**
 * Decodes an image and applies the transform. Random choices (crop box, flip) come from
 * seed alone, so the same seed gives the same output.
 * @param out caller-owned buffer of shard_transform_output_size(t) bytes
 * @param msg optional buffer for what went wrong
 * @return 0; SHARD_ERR_DECODE for a corrupt image (libjpeg warnings count: truncated or
 *         damaged data); SHARD_ERR_UNSUPPORTED for a format other than JPEG, PNG and WebP
 */
SHARD_API int shard_decode_transform(const void *data, size_t size, const ShardTransform *t,
                                     uint64_t seed, void *out, char *msg, size_t msgsize);

/**
 * The crop box and mirroring that shard_decode_transform draws for a width x height image
 * with this seed: what an augmentation did, for labels that live in image coordinates
 * (boxes, keypoints) and for comparing the draws with torchvision's.
 * @param box receives x, y, width, height in pixels of the full image (fractions allowed)
 * @param flip receives 1 when the output is mirrored; may be NULL
 * @return 0; SHARD_ERR_INVALID for a size that is not positive
 */
SHARD_API int shard_transform_box(const ShardTransform *t, int width, int height, uint64_t seed,
                                  double box[4], int *flip);

/**
 * Decodes a whole image to 8-bit RGB at full size (greyscale and CMYK converted).
 * @param out receives a malloc'd buffer of *width * *height * 3 bytes, owned by the caller
 * @return as shard_decode_transform
 */
SHARD_API int shard_decode_rgb(const void *data, size_t size, unsigned char **out, int *width,
                               int *height, char *msg, size_t msgsize);

/**
 * Decodes a whole JPEG (grey or colour) to RGBX: four bytes a pixel, the fourth 255, the
 * layout PIL keeps RGB images in; the pixels are shard_decode_rgb's.
 * @param out receives a malloc'd buffer of *width * *height * 4 bytes, owned by the caller
 * @return as shard_decode_rgb; SHARD_ERR_UNSUPPORTED for another format or a CMYK JPEG
 */
SHARD_API int shard_decode_rgbx(const void *data, size_t size, unsigned char **out, int *width,
                                int *height, char *msg, size_t msgsize);

/**
 * Copies interleaved 8-bit RGB pixels (w x h x 3) into three planes, R then G then B
 * (3 x h x w: a CHW tensor's layout).
 * @param rgb w * h * 3 bytes, borrowed
 * @param out caller-owned, w * h * 3 bytes; not overlapping rgb
 */
SHARD_API void shard_rgb_planar(const unsigned char *rgb, int w, int h, unsigned char *out);

/**
 * Resizes an 8-bit RGB image (or the box x0, y0, bw, bh of it, in pixels, fractions
 * allowed) to out_w x out_h with PIL's bilinear filter (antialiased when shrinking): the
 * result equals PIL's Image.resize(..., BILINEAR, box) to within rounding.
 * @param out caller-owned, out_w * out_h * 3 bytes
 */
SHARD_API int shard_resize_rgb(const unsigned char *in, int w, int h, double x0, double y0,
                               double bw, double bh, unsigned char *out, int out_w, int out_h);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_DECODE_H */
