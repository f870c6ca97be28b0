/*
 * libshard — image identification and checking (decoding for training is in decode.h).
 *
 * All functions here are thread-safe and keep no state between calls.
 */
#ifndef SHARD_IMAGE_H
#define SHARD_IMAGE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Identifies an image by its leading bytes.
 * @return a static name: "jpeg", "png", "gif", "webp", "bmp", "tiff" or "pnm";
 *         NULL if the bytes are none of these
 */
SHARD_API const char *shard_image_format(const void *data, size_t size);

/**
 * Whether the loader decodes images of a format shard_image_format names (JPEG, PNG and
 * WebP; not GIF, BMP, TIFF or PNM, which are packed and read as bytes). NULL: 0.
 */
SHARD_API int shard_image_decoded(const char *format);

/**
 * Checks that data is an image. JPEGs are decoded in full with libjpeg-turbo and any
 * warning (truncated data, corrupt entropy data) counts as a failure; PNGs and WebPs are
 * decoded as the loader decodes them; other formats are checked by signature only. The
 * decoders' default limits apply (ShardTransform: max_pixels, max_decode_memory,
 * max_scans).
 * @param msg optional buffer for what is wrong (e.g. "corrupt JPEG: premature end of data")
 * @return 0, SHARD_ERR_FORMAT if the bytes are not an image, SHARD_ERR_DECODE if the
 *         image does not decode cleanly or passes a limit
 */
SHARD_API int shard_image_verify(const void *data, size_t size, char *msg, size_t msgsize);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_IMAGE_H */
