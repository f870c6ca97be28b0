/*
 * Separable resampling as PIL does it (libImaging/Resample.c's method, written anew): a
 * triangle (bilinear) filter whose support grows with the shrink factor, so shrinking
 * averages instead of aliasing; coefficients normalized, applied in 22-bit fixed point,
 * horizontal pass first with an 8-bit intermediate, then vertical.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "shard/decode.h"

#define PRECISION_BITS (32 - 8 - 2)

typedef struct Coeffs {
    int *bounds; /* per output pixel: first input index, count */
    int32_t *k;  /* per output pixel: ksize fixed-point weights */
    int ksize;
} Coeffs;

static double triangle(double x)
{
    if (x < 0)
        x = -x;
    return x < 1 ? 1 - x : 0;
}

static int coeffs_make(Coeffs *c, int in_size, double in0, double in1, int out_size)
{
    double scale = (in1 - in0) / out_size;
    double filterscale = scale < 1 ? 1 : scale;
    double support = 1.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    c->ksize = ksize;
    c->bounds = malloc((size_t)out_size * 2 * sizeof *c->bounds);
    c->k = malloc((size_t)out_size * (size_t)ksize * sizeof *c->k);
    double *kd = malloc((size_t)ksize * sizeof *kd);
    if (!c->bounds || !c->k || !kd) {
        free(c->bounds);
        free(c->k);
        free(kd);
        return SHARD_ERR_NOMEM;
    }
    double ss = 1.0 / filterscale;
    for (int xx = 0; xx < out_size; xx++) {
        double center = in0 + (xx + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        double ww = 0;
        int x;
        for (x = 0; x < xmax && x < ksize; x++) {
            double w = triangle((x + xmin - center + 0.5) * ss);
            kd[x] = w;
            ww += w;
        }
        if (x < xmax)
            xmax = x;
        int32_t *k = c->k + (size_t)xx * (size_t)ksize;
        for (x = 0; x < ksize; x++) {
            double w = x < xmax && ww != 0 ? kd[x] / ww : 0;
            /* round half away from zero, as PIL */
            k[x] = (int32_t)(w < 0 ? w * (1 << PRECISION_BITS) - 0.5 : w * (1 << PRECISION_BITS) + 0.5);
        }
        c->bounds[xx * 2] = xmin;
        c->bounds[xx * 2 + 1] = xmax;
    }
    free(kd);
    return 0;
}

static void coeffs_free(Coeffs *c)
{
    free(c->bounds);
    free(c->k);
}

static inline unsigned char clip8(int64_t v)
{
    v = (v + (1 << (PRECISION_BITS - 1))) >> PRECISION_BITS;
    return v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v;
}

int shard_resize_rgb(const unsigned char *in, int w, int h, double x0, double y0, double bw,
                     double bh, unsigned char *out, int out_w, int out_h)
{
    if (w <= 0 || h <= 0 || out_w <= 0 || out_h <= 0 || bw <= 0 || bh <= 0 || x0 < 0 || y0 < 0 ||
        x0 + bw > w + 1e-6 || y0 + bh > h + 1e-6)
        return SHARD_ERR_INVALID;
    Coeffs ch, cv;
    if (coeffs_make(&ch, w, x0, x0 + bw, out_w))
        return SHARD_ERR_NOMEM;
    if (coeffs_make(&cv, h, y0, y0 + bh, out_h)) {
        coeffs_free(&ch);
        return SHARD_ERR_NOMEM;
    }
    /* Only the rows the vertical pass reads go through the horizontal pass. */
    int ybox0 = cv.bounds[0];
    int ybox1 = cv.bounds[(out_h - 1) * 2] + cv.bounds[(out_h - 1) * 2 + 1];
    int rows = ybox1 - ybox0;
    unsigned char *tmp = malloc((size_t)rows * (size_t)out_w * 3);
    if (!tmp) {
        coeffs_free(&ch);
        coeffs_free(&cv);
        return SHARD_ERR_NOMEM;
    }
    for (int y = 0; y < rows; y++) {
        const unsigned char *src = in + (size_t)(y + ybox0) * (size_t)w * 3;
        unsigned char *dst = tmp + (size_t)y * (size_t)out_w * 3;
        for (int xx = 0; xx < out_w; xx++) {
            int xmin = ch.bounds[xx * 2], xmax = ch.bounds[xx * 2 + 1];
            const int32_t *k = ch.k + (size_t)xx * (size_t)ch.ksize;
            int64_t s0 = 0, s1 = 0, s2 = 0;
            const unsigned char *p = src + (size_t)xmin * 3;
            for (int x = 0; x < xmax; x++, p += 3) {
                s0 += (int64_t)p[0] * k[x];
                s1 += (int64_t)p[1] * k[x];
                s2 += (int64_t)p[2] * k[x];
            }
            dst[xx * 3] = clip8(s0);
            dst[xx * 3 + 1] = clip8(s1);
            dst[xx * 3 + 2] = clip8(s2);
        }
    }
    size_t stride = (size_t)out_w * 3;
    for (int yy = 0; yy < out_h; yy++) {
        int ymin = cv.bounds[yy * 2] - ybox0, ymax = cv.bounds[yy * 2 + 1];
        const int32_t *k = cv.k + (size_t)yy * (size_t)cv.ksize;
        unsigned char *dst = out + (size_t)yy * stride;
        for (size_t xx = 0; xx < stride; xx++) {
            int64_t s = 0;
            const unsigned char *p = tmp + (size_t)ymin * stride + xx;
            for (int y = 0; y < ymax; y++, p += stride)
                s += (int64_t)*p * k[y];
            dst[xx] = clip8(s);
        }
    }
    free(tmp);
    coeffs_free(&ch);
    coeffs_free(&cv);
    return 0;
}
