/*
 * PIL's bilinear filter (Resample.c's precompute_coeffs), written once for the CPU's
 * resampler (resize.c) and the GPU's JPEG kernels (gpu/jpeg.cu, built with nvcc): the
 * window each output pixel reads and its 22-bit fixed-point weights. The same arithmetic
 * on both (nvcc with -fmad=false) gives the same weights, so a sample comes out alike
 * whichever decoder took it.
 */
#ifndef SHARD_DECODE_PILFILTER_H
#define SHARD_DECODE_PILFILTER_H

#ifdef __CUDACC__
#define SHARD_PIL_FN __host__ __device__ static inline
#else
#define SHARD_PIL_FN static inline
#endif

#define PRECISION_BITS (32 - 8 - 2)

/* The filter's stretch for scale input pixels per output pixel: antialiased when
 * shrinking (support grows with it), bilinear's support 1 when enlarging. */
SHARD_PIL_FN double shard_pil_filterscale(double scale) { return scale < 1.0 ? 1.0 : scale; }

/* Output pixel xx's window over [0, in_size): its center, first input index *xmin and
 * count (the return), for an axis of scale input pixels per output pixel from in0. */
SHARD_PIL_FN int shard_pil_window(int in_size, double in0, double scale, int xx, double *center,
                                  int *xmin)
{
    double support = 1.0 * shard_pil_filterscale(scale);
    *center = in0 + (xx + 0.5) * scale;
    int lo = (int)(*center - support + 0.5);
    if (lo < 0)
        lo = 0;
    int hi = (int)(*center + support + 0.5);
    if (hi > in_size)
        hi = in_size;
    *xmin = lo;
    return hi - lo;
}

/* The triangle's weight of input pixel xmin + x for a window centred at center. */
SHARD_PIL_FN double shard_pil_weight(int x, int xmin, double center, double scale)
{
    double t = (x + xmin - center + 0.5) * (1.0 / shard_pil_filterscale(scale));
    t = t < 0 ? -t : t;
    return t < 1.0 ? 1.0 - t : 0.0;
}

/* A normalised weight in fixed point, rounded half away from zero as PIL. */
SHARD_PIL_FN int shard_pil_fixed(double w)
{
    return (int)(w < 0 ? w * (1 << PRECISION_BITS) - 0.5 : w * (1 << PRECISION_BITS) + 0.5);
}

#endif /* SHARD_DECODE_PILFILTER_H */
