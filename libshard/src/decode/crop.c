/*
 * The crop box (crop.h).
 */
#include <math.h>
#include <stdint.h>

#include "base/rng.h"
#include "decode/crop.h"

static double uniform(ShardRng *r)
{
    return (double)(shard_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* A whole number in [0, n], each as likely (n small: the bias of the multiply is 2^-53). */
static int64_t upto(ShardRng *r, int64_t n)
{
    int64_t k = (int64_t)(uniform(r) * (double)(n + 1));
    return k > n ? n : k;
}

/* Resized to cover the output (aspect kept), the output's size taken from the middle or at
 * a random whole-pixel place: PIL's resize((rw, rh)) then crop, as one box of the original. */
static ShardBox cover_box(const ShardTransform *t, int W, int H, ShardRng *r)
{
    double s = fmax((double)t->width / W, (double)t->height / H);
    int64_t rw = (int64_t)nearbyint(W * s), rh = (int64_t)nearbyint(H * s);
    if (rw < t->width)
        rw = t->width;
    if (rh < t->height)
        rh = t->height;
    int64_t x = (rw - t->width) / 2, y = (rh - t->height) / 2;
    if (t->crop == SHARD_CROP_COVER_RANDOM) {
        x = upto(r, rw - t->width);
        y = upto(r, rh - t->height);
    }
    double sx = (double)W / (double)rw, sy = (double)H / (double)rh;
    ShardBox b = {x * sx, y * sy, t->width * sx, t->height * sy};
    return b;
}

ShardBox shard_crop_box(const ShardTransform *t, int W, int H, ShardRng *r)
{
    ShardBox b = {0, 0, W, H};
    if (t->crop == SHARD_CROP_NONE)
        return b;
    if (t->crop == SHARD_CROP_COVER || t->crop == SHARD_CROP_COVER_RANDOM)
        return cover_box(t, W, H, r);
    if (t->crop == SHARD_CROP_CENTER) {
        /* torchvision's Resize(n) + CenterCrop((height, width)), n = floor(size / fraction),
         * as one box of the original: the shorter side resized to n, the longer to
         * int(n * long / short) (so the two axes' scales differ a little), the crop at
         * round((resized - size) / 2) whole pixels, Python rounding half to even. */
        int out_short = t->width < t->height ? t->width : t->height;
        int64_t n = (int64_t)floor(out_short / t->center_fraction);
        int64_t lo = W < H ? W : H, hi = W < H ? H : W;
        int64_t nl = (int64_t)((double)(n * hi) / (double)lo);
        double rw = (double)(W <= H ? n : nl), rh = (double)(W <= H ? nl : n);
        double sx = W / rw, sy = H / rh;
        b.w = t->width * sx;
        b.h = t->height * sy;
        b.x = nearbyint((rw - t->width) / 2.0) * sx;
        b.y = nearbyint((rh - t->height) / 2.0) * sy;
        /* a crop larger than the resized image (torchvision pads it): the whole side */
        if (b.x < 0 || b.w > W)
            b.x = 0, b.w = W;
        if (b.y < 0 || b.h > H)
            b.y = 0, b.h = H;
        return b;
    }
    double area = (double)W * H;
    double lr0 = log(t->ratio_min), lr1 = log(t->ratio_max);
    for (int i = 0; i < 10; i++) {
        double target = area * (t->scale_min + (t->scale_max - t->scale_min) * uniform(r));
        double aspect = exp(lr0 + (lr1 - lr0) * uniform(r));
        int w = (int)lround(sqrt(target * aspect));
        int h = (int)lround(sqrt(target / aspect));
        if (w > 0 && h > 0 && w <= W && h <= H) {
            b.x = (double)shard_rng_below(r, (uint64_t)(W - w + 1));
            b.y = (double)shard_rng_below(r, (uint64_t)(H - h + 1));
            b.w = w;
            b.h = h;
            return b;
        }
    }
    double in_ratio = (double)W / H;
    int w = W, h = H;
    if (in_ratio < t->ratio_min)
        h = (int)lround(w / t->ratio_min);
    else if (in_ratio > t->ratio_max)
        w = (int)lround(h * t->ratio_max);
    b.w = w;
    b.h = h;
    b.x = (W - w) / 2;
    b.y = (H - h) / 2;
    return b;
}
