/*
 * The GPU's JPEG path after nvJPEG: colour conversion, crop and resize into the batch, one
 * kernel each for the whole batch (blockIdx.y: the image). Each follows the CPU path
 * (decode/) step by step, so a sample comes out alike whichever decoder took it:
 * - shard_jpeg_rgb: libjpeg's "fancy" chroma upsampling (jdsample.c: a triangle filter,
 *   3/4 and 1/4, its rounding biases) and its fixed-point YCbCr -> RGB (jdcolor.c), from
 *   the planes nvJPEG wrote at the file's sampling;
 * - shard_jpeg_hpass, shard_jpeg_vpass: PIL's bilinear resample over the crop box
 *   (Resample.c: antialiased when shrinking, 22-bit fixed-point weights, each pass rounded
 *   to 8 bits), horizontal first as PIL does, the mirror applied as the CPU's store does.
 */
#include "decode/pilfilter.h"
#include "gpu/jpegargs.h"

__device__ static inline int clamp_i(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

__device__ static inline unsigned char clip8(int v)
{
    v >>= PRECISION_BITS;
    return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* jdcolor.c's tables, computed: SCALEBITS 16, FIX(x) = x * 65536 rounded */
__device__ static inline void ycc_rgb(int y, int cb, int cr, unsigned char *o)
{
    const int half = 1 << 15;
    int x_cr = cr - 128, x_cb = cb - 128;
    int r = y + ((91881 * x_cr + half) >> 16);
    int g = y + ((-22554 * x_cb + half - 46802 * x_cr) >> 16);
    int b = y + ((116130 * x_cb + half) >> 16);
    o[0] = (unsigned char)(r < 0 ? 0 : r > 255 ? 255 : r);
    o[1] = (unsigned char)(g < 0 ? 0 : g > 255 ? 255 : g);
    o[2] = (unsigned char)(b < 0 ? 0 : b > 255 ? 255 : b);
}

/* A chroma sample at full resolution, as libjpeg's fancy upsamplers make it. */
__device__ static inline int chroma(const unsigned char *p, unsigned pitch, int cw, int ch,
                                    int css, int X, int Y)
{
    if (css == 0) /* 4:4:4 */
        return p[(size_t)Y * pitch + X];
    int c = X >> 1, odd = X & 1;
    int cn = clamp_i(odd ? c + 1 : c - 1, 0, cw - 1);
    if (css == 1) { /* 4:2:2, h2v1_fancy_upsample */
        const unsigned char *row = p + (size_t)Y * pitch;
        return (row[c] * 3 + row[cn] + (odd ? 2 : 1)) >> 2;
    }
    /* 4:2:0, h2v2_fancy_upsample: the nearer row 3/4, the other 1/4 (edge rows repeated) */
    int r = Y >> 1;
    int rn = clamp_i((Y & 1) ? r + 1 : r - 1, 0, ch - 1);
    const unsigned char *r0 = p + (size_t)r * pitch, *r1 = p + (size_t)rn * pitch;
    int this_sum = r0[c] * 3 + r1[c], next_sum = r0[cn] * 3 + r1[cn];
    return (this_sum * 3 + next_sum + (odd ? 7 : 8)) >> 4;
}

extern "C" __global__ void shard_jpeg_rgb(ShardJpegArgs a)
{
    const ShardJpegImage *im = &a.images[blockIdx.y];
    long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (p >= (long long)im->w * im->h)
        return;
    int X = (int)(p % im->w), Y = (int)(p / im->w);
    unsigned char *o = im->rgb + p * 3;
    if (im->css == SHARD_JPEG_RGBI) {
        const unsigned char *s = im->plane[0] + (size_t)Y * im->pitch[0] + X * 3;
        o[0] = s[0], o[1] = s[1], o[2] = s[2];
        return;
    }
    int y = im->plane[0][(size_t)Y * im->pitch[0] + X];
    if (im->css == 6) { /* grey */
        o[0] = o[1] = o[2] = (unsigned char)y;
        return;
    }
    int cb = chroma(im->plane[1], im->pitch[1], im->cw, im->ch, im->css, X, Y);
    int cr = chroma(im->plane[2], im->pitch[2], im->cw, im->ch, im->css, X, Y);
    ycc_rgb(y, cb, cr, o);
}

/* Resample.c's precompute_coeffs for output position xx: the first input index, the
 * count, and the 22-bit weights (k: room for ksize of them). */
__device__ static int coeffs(int in_size, float in0, float in1, int out_size, int xx, int *k,
                             int kmax, int *xmin_out)
{
    double scale = (double)(in1 - in0) / out_size, center;
    int xmax = shard_pil_window(in_size, in0, scale, xx, &center, xmin_out);
    if (xmax > kmax)
        xmax = kmax;
    double w[64], ww = 0.0;
    for (int x = 0; x < xmax; x++) {
        w[x] = shard_pil_weight(x, *xmin_out, center, scale);
        ww += w[x];
    }
    for (int x = 0; x < xmax; x++)
        k[x] = shard_pil_fixed(ww != 0.0 ? w[x] / ww : w[x]);
    return xmax;
}

/* The crop's width, rows y0..y1 of rgb -> tmp (out_w wide). */
extern "C" __global__ void shard_jpeg_hpass(ShardJpegArgs a)
{
    const ShardJpegImage *im = &a.images[blockIdx.y];
    long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int rows = im->y1 - im->y0;
    if (p >= (long long)rows * a.out_w)
        return;
    int xx = (int)(p % a.out_w), r = (int)(p / a.out_w);
    int k[64], xmin;
    int n = coeffs(im->w, im->box[0], im->box[0] + im->box[2], a.out_w, xx, k, 64, &xmin);
    const unsigned char *src = im->rgb + ((size_t)(im->y0 + r) * im->w + xmin) * 3;
    int s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
    for (int x = 0; x < n; x++) {
        s0 += src[x * 3] * k[x];
        s1 += src[x * 3 + 1] * k[x];
        s2 += src[x * 3 + 2] * k[x];
    }
    unsigned char *o = im->tmp + p * 3;
    o[0] = clip8(s0), o[1] = clip8(s1), o[2] = clip8(s2);
}

/* tmp's rows -> the output, mirrored when the sample's draw says so. */
extern "C" __global__ void shard_jpeg_vpass(ShardJpegArgs a)
{
    const ShardJpegImage *im = &a.images[blockIdx.y];
    long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (p >= (long long)a.out_h * a.out_w)
        return;
    int xx = (int)(p % a.out_w), yy = (int)(p / a.out_w);
    int k[64], ymin;
    int n = coeffs(im->h, im->box[1], im->box[1] + im->box[3], a.out_h, yy, k, 64, &ymin);
    if (ymin < im->y0 || ymin + n > im->y1) /* the host's bounds, computed alike: never */
        n = 0, ymin = im->y0;
    const unsigned char *src = im->tmp + ((size_t)(ymin - im->y0) * a.out_w + xx) * 3;
    size_t stride = (size_t)a.out_w * 3;
    int s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
    for (int y = 0; y < n; y++) {
        const unsigned char *q = src + y * stride;
        s0 += q[0] * k[y];
        s1 += q[1] * k[y];
        s2 += q[2] * k[y];
    }
    int ox = im->flip ? a.out_w - 1 - xx : xx;
    unsigned char *o = im->out + ((size_t)yy * a.out_w + ox) * 3;
    o[0] = clip8(s0), o[1] = clip8(s1), o[2] = clip8(s2);
}
