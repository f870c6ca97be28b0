/*
 * libshard — image identification and checking (decoding for training is in decode.h).
 *
 * All functions here are thread-safe and keep no state between calls.
 */
#ifndef SHARD_IMAGE_H
#define SHARD_IMAGE_H

#include "common.h"
#include "list.h"
#include "remote.h"

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
 * An image's size as stored, from its header alone (JPEG: the frame header, its EXIF
 * orientation not applied, as PIL's Image.size; PNG: IHDR; WebP: VP8, VP8L or VP8X's
 * canvas): what a loader plans batches by shape from without decoding. data may be the
 * image's first bytes only: when the header lies past them, SHARD_AGAIN and *need the
 * bytes to read (at least) before asking again, so that a ranged read takes no more than
 * the header (a JPEG's: past its EXIF and other application segments); given the whole
 * image, SHARD_AGAIN says it is cut short.
 * @param need optional; receives the bytes wanted on SHARD_AGAIN
 * @param msg optional buffer for what is wrong, with the byte offset
 * @return 0 and *width, *height; SHARD_AGAIN; SHARD_ERR_DECODE for a header that is not
 *         what its format says; SHARD_ERR_UNSUPPORTED for a format the loader does not
 *         decode (or none)
 */
SHARD_API int shard_image_geometry(const void *data, size_t size, int *width, int *height,
                                   size_t *need, char *msg, size_t msgsize);

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

/** An aspect bucket and the samples nearest it (shard_aspect_buckets). */
typedef struct ShardAspectBucket {
    int height, width;
    uint64_t samples; /**< samples whose image is nearest it in log aspect ratio */
} ShardAspectBucket;

/**
 * The aspect buckets a spec gives for a list's samples, and how many samples go to each,
 * from the image sizes beside the shards' indexes alone (ShardListEntry.columns: the list
 * expanded with ShardListSettings.columns), no sample byte read; memory of one shard's
 * sizes at a time.
 * @param spec "HxW[,HxW...]" (heights and widths, 8 to 16384), "sdxl" (the 1024 x 1024
 *        family of 64-aligned sizes, scaled by side / 1024), "auto" or "auto:K" (K sizes of
 *        side x side pixels' area fitted to the list's aspect histogram; 8 by default)
 * @param side the image size the named sets and auto are scaled to
 * @param remote what remote columns are read through (borrowed; NULL: the defaults)
 * @param out receives *n buckets, malloc'd, owned by the caller (free)
 * @param none optional; receives the samples with no image size (no image, or one whose
 *        header does not parse)
 * @return 0; SHARD_ERR_INVALID for a bad spec (named); SHARD_ERR_NOT_FOUND for a shard
 *         without image sizes (named, with `shardcat index --geometry`); SHARD_ERR_FORMAT
 *         for sizes that are not the shard's count; the source's errors
 */
SHARD_API int shard_aspect_buckets(const ShardList *l, const char *spec, int side,
                                   ShardRemote *remote, ShardAspectBucket **out, size_t *n,
                                   uint64_t *none, ShardError *err);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_IMAGE_H */
