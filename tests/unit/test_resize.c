/*
 * The decode pool's resampler (shard_resize_fast, internal) against PIL's bytes
 * (shard_resize_rgb, which the pixel tests hold equal to PIL): random boxes with fractional
 * edges, output sizes off the 8- and 16-pixel blocks, shrinking by up to 60 and enlarging,
 * planar and interleaved, mirrored or not; on each SIMD path this CPU has (LIBSHARD_SIMD
 * caps the choice, read when a scratch is first used). Within 1 of PIL everywhere, and
 * rarely 1 off: a rounding error shows in how often.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/resize.h"
#include "decode/scratch.h"
#include "shard/decode.h"

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static double uniform(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * (double)(next(s) >> 11) / (double)(1ull << 53);
}

/* Smooth gradients with noise and hard edges: every filter weight shows in the result. */
static unsigned char *picture(int w, int h)
{
    unsigned char *p = malloc((size_t)w * h * 3);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            unsigned char *q = p + ((size_t)y * w + x) * 3;
            int edge = ((x / 37) ^ (y / 23)) & 1;
            q[0] = (unsigned char)(x * 255 / w);
            q[1] = (unsigned char)(edge ? 250 : 5);
            q[2] = (unsigned char)(next(&s) >> 56);
        }
    return p;
}

static void check_path(const char *level)
{
    const int W = 523, H = 391;
    unsigned char *img = picture(W, H);
    size_t cap = (size_t)700 * 700 * 3;
    unsigned char *want = malloc(cap), *got = malloc(cap);
    /* the path taken: the one asked for, or the best this CPU has when that is lower */
    static const char *const order[] = {"none", "avx2", "avx512", "vnni"};
    ShardScratch best_sc = {0};
    unsetenv("LIBSHARD_SIMD");
    const char *best = shard_resize_path(&best_sc);
    int want_rank = 0, best_rank = 0;
    for (int i = 0; i < 4; i++) {
        if (!strcmp(order[i], level))
            want_rank = i;
        if (!strcmp(order[i], best))
            best_rank = i;
    }
    setenv("LIBSHARD_SIMD", level, 1);
    ShardScratch sc = {0};
    const char *path = shard_resize_path(&sc);
    cr_assert_str_eq(path, order[want_rank < best_rank ? want_rank : best_rank],
                     "LIBSHARD_SIMD=%s took the %s path (the CPU's best: %s)", level, path, best);
    cr_log_info("LIBSHARD_SIMD=%s: the %s path", level, path);
    uint64_t s = 12345;
    size_t total = 0, off_by_one = 0;
    for (int i = 0; i < 300; i++) {
        double bw = uniform(&s, 1, W), bh = uniform(&s, 1, H);
        double x0 = uniform(&s, 0, W - bw), y0 = uniform(&s, 0, H - bh);
        int ow = 1 + (int)(next(&s) % (i % 10 ? 260 : 700));
        int oh = 1 + (int)(next(&s) % (i % 10 ? 260 : 700));
        if (i % 7 == 0)
            bw = W - x0, ow = 1 + (int)(next(&s) % 9); /* shrinking by up to 500 */
        int planar = (int)(next(&s) & 1), flip = planar && (next(&s) & 1);
        cr_assert_eq(shard_resize_rgb(img, W, H, x0, y0, bw, bh, want, ow, oh), 0);
        cr_assert_eq(shard_resize_fast(&sc, img, W, H, x0, y0, bw, bh, got, ow, oh, planar, flip),
                     0);
        size_t plane = (size_t)ow * oh;
        total += plane * 3;
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++)
                for (int c = 0; c < 3; c++) {
                    int a = want[((size_t)y * ow + x) * 3 + c];
                    int xo = flip ? ow - 1 - x : x;
                    int b = planar ? got[c * plane + (size_t)y * ow + xo]
                                   : got[((size_t)y * ow + x) * 3 + c];
                    off_by_one += a != b;
                    cr_assert(abs(a - b) <= 1,
                              "LIBSHARD_SIMD=%s case %d: box (%.3f, %.3f, %.3f, %.3f) -> %dx%d "
                              "planar %d flip %d: pixel (%d, %d) channel %d is %d, PIL's %d",
                              level, i, x0, y0, bw, bh, ow, oh, planar, flip, x, y, c, b, a);
                }
    }
    /* Rounding right, 6% of the values here are 1 off PIL's (8% on the scalar path, which
     * rounds between the passes as PIL does, but with the passes the other way round); a
     * sum rounded a quarter off makes it 16%. */
    cr_assert(off_by_one * 10 <= total, "LIBSHARD_SIMD=%s: %zu of %zu values 1 off PIL's", level,
              off_by_one, total);
    shard_scratch_release(&sc);
    unsetenv("LIBSHARD_SIMD");
    free(img);
    free(want);
    free(got);
}

Test(resize, scalar_within_1_of_pil) { check_path("none"); }
Test(resize, avx2_within_1_of_pil) { check_path("avx2"); }
Test(resize, avx512_within_1_of_pil) { check_path("avx512"); }
Test(resize, best_path_within_1_of_pil) { check_path("vnni"); }

/* Planes from interleaved RGB, every width's tail past the SIMD path's 16 pixels a step. */
Test(resize, rgb_planar_splits_the_channels)
{
    for (int w = 1; w <= 40; w += 3) {
        int h = 3;
        size_t n = (size_t)w * h;
        unsigned char *rgb = malloc(n * 3), *out = malloc(n * 3);
        for (size_t i = 0; i < n * 3; i++)
            rgb[i] = (unsigned char)(i * 37 + 11);
        shard_rgb_planar(rgb, w, h, out);
        for (size_t i = 0; i < n; i++)
            for (int c = 0; c < 3; c++)
                cr_assert_eq(out[c * n + i], rgb[i * 3 + (size_t)c], "w %d pixel %zu channel %d",
                             w, i, c);
        free(rgb);
        free(out);
    }
}
