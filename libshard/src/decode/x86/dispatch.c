/*
 * The resampler's x86-64 paths (resample.h): which one the CPU can run, and the set-up they
 * share (the box, the filter's weights as 16-bit integers or as a banded matrix of floats
 * per block of 8 output pixels), then the row loop in avx2.c or vnni.c.
 */
#include <string.h>

#include "decode/scratch.h"
#include "shard/common.h"
#include "decode/x86/simd.h"

/* The largest box the VNNI path copies into planes (16 MiB: an image of 2.3 megapixels). */
#define VNNI_SPLIT_MAX ((size_t)16 << 20)

__attribute__((target("avx2")))
void shard_column_pass_avx2(const unsigned char *src, size_t src_stride, int first, size_t n,
                            const Coeffs *c, int out_rows, unsigned char *dst, size_t dst_stride,
                            int32_t *acc)
{
    shard_column_pass(src, src_stride, first, n, c, out_rows, dst, dst_stride, acc);
}

int shard_resize_cpu_level(void)
{
    int level = SHARD_SIMD_NONE;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        level = SHARD_SIMD_AVX2;
        if (__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")) {
            level = SHARD_SIMD_AVX512;
            if (__builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni"))
                level = SHARD_SIMD_VNNI;
        }
    }
    return level;
}

int shard_resize_simd(ShardScratch *sc, int level, const ShardResizeBox *b, unsigned char *out,
                      int out_w, int out_h, int planar, int flip)
{
    const unsigned char *box = b->box;
    size_t in_stride = b->in_stride, box_stride = b->box_stride;
    int ybox0 = b->ybox0, xbox0 = b->xbox0, rows = b->rows, cols = b->cols;
    const Coeffs ch = *b->ch, cv = *b->cv;
    /* VNNI reads the box split into planes, a copy of it: past VNNI_SPLIT_MAX, the AVX-512
     * path, which reads it in place (a large image's decode stays at its estimate) */
    size_t pcols = ((size_t)cols + 31) & ~(size_t)31;
    if (level == SHARD_SIMD_VNNI && (size_t)rows * 3 * pcols > VNNI_SPLIT_MAX)
        level = SHARD_SIMD_AVX512;
    /* per block of 8 output pixels: where its inputs start, and the 8 pixels' weights
     * for each input of the span (one span for all: a loop of one length) */
    int blocks = (out_w + 7) / 8, span = 0;
    for (int bk = 0; bk < blocks; bk++)
        for (int xx = bk * 8; xx < out_w && xx < bk * 8 + 8; xx++) {
            int end = ch.bounds[xx * 2] + ch.bounds[xx * 2 + 1] - ch.bounds[bk * 16];
            span = end > span ? end : span;
        }
    span = level == SHARD_SIMD_VNNI ? (span + 3) & ~3 : (span + 1) & ~1; /* 4 or 2 at a time */
    size_t band_n = (size_t)blocks * (size_t)span * 8;
    int *start = shard_scratch(sc, SHARD_SCR_START, (size_t)blocks * sizeof(int));
    int16_t *kv = shard_scratch(sc, SHARD_SCR_KV, (size_t)out_h * (size_t)cv.ksize * sizeof(int16_t));
    int32_t *vw = shard_scratch(sc, SHARD_SCR_VW, ((size_t)cv.ksize / 2 + 1) * sizeof(int32_t));
    const unsigned char **vrow = shard_scratch(sc, SHARD_SCR_VROW, ((size_t)cv.ksize + 1) * sizeof(void *));
    int32_t *rowout = shard_scratch(sc, SHARD_SCR_ROWOUT, 3 * (((size_t)out_w + 7) & ~(size_t)7) * sizeof(int32_t));
    if (!start || !kv || !vw || !vrow || !rowout)
        return SHARD_ERR_NOMEM;
    for (int bk = 0; bk < blocks; bk++)
        start[bk] = ch.bounds[bk * 16] - xbox0;
    shard_weights16(&cv, out_h, kv);
    size_t plane = (size_t)out_w * (size_t)out_h;
    ResizeOut o = {planar ? NULL : out, {out, out + plane, out + 2 * plane}, flip};
    if (level == SHARD_SIMD_VNNI) {
        /* 16-bit weights in pairs: input t and t + 1 of each block's span, lane j */
        int16_t *band = shard_scratch(sc, SHARD_SCR_BAND, band_n * sizeof(int16_t));
        int16_t *kh = shard_scratch(sc, SHARD_SCR_KH, (size_t)out_w * (size_t)ch.ksize * sizeof(int16_t));
        /* the box in planes; one output row's sums in planes, with the last span's reach
         * past cols (zeros) */
        size_t pstride = (pcols + (size_t)span + 15) & ~(size_t)15;
        unsigned char *split = shard_scratch(sc, SHARD_SCR_TMP, (size_t)rows * 3 * pcols);
        int16_t *mid = shard_scratch(sc, SHARD_SCR_ROWF, 3 * pstride * sizeof(int16_t));
        if (!band || !kh || !split || !mid)
            return SHARD_ERR_NOMEM;
        memset(mid, 0, 3 * pstride * sizeof *mid);
        memset(band, 0, band_n * sizeof *band);
        shard_weights16(&ch, out_w, kh);
        for (int bk = 0; bk < blocks; bk++)
            for (int j = 0; j < 8 && bk * 8 + j < out_w; j++) {
                int xx = bk * 8 + j, off = ch.bounds[xx * 2] - ch.bounds[bk * 16];
                for (int t = 0; t < ch.bounds[xx * 2 + 1]; t++) {
                    int p = off + t;
                    band[(((size_t)bk * (size_t)span + (size_t)(p & ~1)) * 8 + (size_t)j * 2) + (size_t)(p & 1)] =
                        kh[(size_t)xx * (size_t)ch.ksize + (size_t)t];
                }
            }
        shard_split_planes(box, in_stride, rows, box_stride, pcols, split);
        shard_resize_vnni(split, pcols, ybox0, &cv, kv, (const int32_t *)band, start, span,
                    out_w, out_h, mid, pstride, rowout, vrow, vw, &o);
        return 0;
    }
    size_t npad = (box_stride + 31) & ~(size_t)31, rowf_n = npad + 3 * (size_t)span + 8;
    float *band = shard_scratch(sc, SHARD_SCR_BAND, band_n * sizeof(float));
    float *rowf = shard_scratch(sc, SHARD_SCR_ROWF, rowf_n * sizeof(float));
    if (!band || !rowf)
        return SHARD_ERR_NOMEM;
    /* the vertical sums come out VBITS above 1, which the horizontal weights undo */
    float unit = 1.0f / (float)(1 << PRECISION_BITS) / (float)(1 << VBITS);
    memset(band, 0, band_n * sizeof *band);
    for (int bk = 0; bk < blocks; bk++)
        for (int j = 0; j < 8 && bk * 8 + j < out_w; j++) {
            int xx = bk * 8 + j, off = ch.bounds[xx * 2] - ch.bounds[bk * 16];
            for (int t = 0; t < ch.bounds[xx * 2 + 1]; t++)
                band[((size_t)bk * (size_t)span + (size_t)(off + t)) * 8 + (size_t)j] =
                    (float)ch.k[(size_t)xx * (size_t)ch.ksize + (size_t)t] * unit;
        }
    /* the last span reads past the box's values, over weights of 0: finite values */
    memset(rowf + npad, 0, (rowf_n - npad) * sizeof *rowf);
    if (level == SHARD_SIMD_AVX512)
        shard_resize_avx512(box, in_stride, ybox0, box_stride, &cv, kv, band, start, span, out_w,
                      out_h, rowf, rowout, vrow, vw, &o);
    else
        shard_resize_avx2(box, in_stride, ybox0, box_stride, &cv, kv, band, start, span, out_w,
                    out_h, rowf, rowout, vrow, vw, &o);
    return 0;
}
