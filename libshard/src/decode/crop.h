/*
 * The crop box (crop.c): torchvision's RandomResizedCrop.get_params drawn from a sample's
 * generator, the evaluation crop (Resize + CenterCrop as one box), an aspect bucket's
 * cover crop (middle or random), or the whole image.
 */
#ifndef SHARD_DECODE_CROP_H
#define SHARD_DECODE_CROP_H

#include "base/attr.h"
#include "base/rng.h"
#include "shard/decode.h"

typedef struct ShardBox {
    double x, y, w, h; /* in full-size pixels */
} ShardBox;

/* The box of a W x H image that t's crop takes, its draws from r. */
SHARD_HIDDEN ShardBox shard_crop_box(const ShardTransform *t, int W, int H, ShardRng *r);

#endif /* SHARD_DECODE_CROP_H */
