/* The GPU's JPEG decode, what runs without a GPU: the measured split against a simulated
 * pair of decoders, nvJPEG missing, and which JPEGs the GPU takes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "decode/jpegkind.h"
#include "gpu/nvjpeg.h"
#include "gpu/split.h"
#include "shard/common.h"
#include "testjpeg.h"

/* A simulated pair: the CPU threads decode at cpu_rate images/s (all threads), the GPU path
 * takes overhead seconds per call plus per_image each (a batched decode's shape). A batch's
 * time is the slower side's; measurements carry noise of +-noise (relative). */
typedef struct Sim {
    double cpu_rate, overhead, per_image, noise;
    unsigned rng;
} Sim;

static double jitter(Sim *s)
{
    s->rng = s->rng * 1103515245u + 12345u;
    return 1.0 + s->noise * (((s->rng >> 8) & 0xffff) / 32768.0 - 1.0);
}

static double batch_time(const Sim *s, int n, int gpu)
{
    double cpu = (n - gpu) / s->cpu_rate;
    double g = gpu ? s->overhead + gpu * s->per_image : 0;
    return cpu > g ? cpu : g;
}

/* Images per second over batches of n, with a fixed share for the GPU. */
static double fixed_rate(const Sim *s, int n, double share)
{
    ShardSplit sp;
    shard_split_init(&sp, share, 1);
    double t = 0;
    for (int b = 0; b < 100; b++) {
        int gpu = 0;
        for (int i = 0; i < n; i++)
            gpu += shard_split_take(&sp);
        t += batch_time(s, n, gpu);
    }
    return 100.0 * n / t;
}

/* The split measuring as it goes: the rate of the last 100 of 300 batches. */
static double auto_rate(Sim *s, int n, double *share_out)
{
    ShardSplit sp;
    shard_split_init(&sp, 0.5, 0);
    double t = 0;
    int threads = 16;
    for (int b = 0; b < 300; b++) {
        int gpu = 0;
        for (int i = 0; i < n; i++)
            gpu += shard_split_take(&sp);
        double bt = batch_time(s, n, gpu);
        if (b >= 200)
            t += bt;
        /* busy seconds summed over the threads; the GPU call's own time */
        double cpu_busy = (n - gpu) / s->cpu_rate * threads * jitter(s);
        double gpu_secs = gpu ? (s->overhead + gpu * s->per_image) * jitter(s) : 0;
        shard_split_observe(&sp, n - gpu, cpu_busy, threads, gpu, gpu_secs);
    }
    *share_out = shard_split_share(&sp);
    return 100.0 * n / t;
}

static double best_fixed(const Sim *s, int n, double *at)
{
    double best = 0;
    for (int k = 0; k <= 100; k++) {
        double r = fixed_rate(s, n, k / 100.0);
        if (r > best)
            best = r, *at = k / 100.0;
    }
    return best;
}

Test(split, converges_within_5_percent_of_the_best_fixed_split_over_a_sweep_of_speeds)
{
    /* CPU from 2,000 to 20,000 images/s; the GPU from 4,000 to 40,000, with a per-call cost */
    const double cpus[] = {2000, 6000, 11000, 20000};
    const double gpus[] = {4000, 9000, 24000, 40000};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++) {
            Sim s = {cpus[a], 0.002, 1.0 / gpus[b], 0.05, 7u + (unsigned)(a * 4 + b)};
            double at = 0, share = 0;
            double best = best_fixed(&s, 256, &at);
            double got = auto_rate(&s, 256, &share);
            cr_expect(got >= 0.95 * best,
                      "cpu %.0f/s, gpu %.0f/s: auto %.0f/s (share %.3f) against the best "
                      "fixed %.0f/s (share %.2f)", cpus[a], gpus[b], got, share, best, at);
        }
}

Test(split, a_wrong_fixed_split_is_outside_the_5_percent)
{
    /* the control: the criterion above can fail; an even split of a 4:1 pair does */
    Sim s = {4000, 0.002, 1.0 / 16000, 0, 1};
    double at = 0;
    double best = best_fixed(&s, 256, &at);
    cr_expect(fixed_rate(&s, 256, 0.5) < 0.95 * best);
    cr_expect(at > 0.7 && at < 0.85, "best share %.2f", at);
}

Test(split, follows_a_change_of_speed)
{
    Sim s = {4000, 0.002, 1.0 / 16000, 0.05, 3};
    double share = 0;
    auto_rate(&s, 256, &share);
    cr_expect(share > 0.7, "share %.3f with the GPU 4x the CPU", share);
    s.cpu_rate = 32000; /* the CPU now far faster (a bigger machine, smaller images) */
    double at = 0;
    double best = best_fixed(&s, 256, &at);
    cr_expect(auto_rate(&s, 256, &share) >= 0.95 * best);
    cr_expect(share < 0.5, "share %.3f with the CPU 2x the GPU", share);
}

Test(split, fixed_settings_stay_and_take_every_or_no_sample)
{
    ShardSplit g, c;
    shard_split_init(&g, 1.0, 1);
    shard_split_init(&c, 0.0, 1);
    int gs = 0, cs = 0;
    for (int i = 0; i < 1000; i++)
        gs += shard_split_take(&g), cs += shard_split_take(&c);
    shard_split_observe(&g, 100, 0.001, 16, 1, 10); /* a fixed split does not move */
    cr_expect_eq(gs, 1000);
    cr_expect_eq(cs, 0);
    cr_expect_eq(shard_split_share(&g), 1.0);
}

Test(split, the_share_holds_within_a_sample_per_batch)
{
    ShardSplit sp;
    shard_split_init(&sp, 0.3, 1);
    for (int b = 0; b < 50; b++) {
        int gpu = 0;
        for (int i = 0; i < 100; i++)
            gpu += shard_split_take(&sp);
        cr_expect(gpu >= 29 && gpu <= 31, "batch %d: %d of 100", b, gpu);
    }
}

Test(nvjpeg, missing_is_a_clear_error_naming_what_and_where_to_put_it)
{
    ShardNvjpeg j;
    char msg[SHARD_ERROR_MAX];
    int rc = shard_nvjpeg_load(&j, "/nonexistent/libnvjpeg.so.13", msg);
    cr_expect_eq(rc, SHARD_ERR_NOCUDA);
    cr_expect(strstr(msg, "no nvJPEG") && strstr(msg, "/nonexistent/libnvjpeg.so.13") &&
                  strstr(msg, "SHARD_NVJPEG"),
              "%s", msg);
    /* a library that is not nvJPEG: the symbol it lacks is named */
    rc = shard_nvjpeg_load(&j, "libjpeg.so.62", msg);
    cr_expect_eq(rc, SHARD_ERR_NOCUDA);
    cr_expect(strstr(msg, "lacks nvjpegGetProperty"), "%s", msg);
    /* by soname: here, where the toolkit has no nvJPEG, the names tried are given */
    if (shard_nvjpeg_load(&j, NULL, msg) == SHARD_ERR_NOCUDA)
        cr_expect(strstr(msg, "libnvjpeg.so.13"), "%s", msg);
    else
        shard_nvjpeg_unload(&j);
}

static void grey_ramp(int x, int y, int w, int h, int seed, unsigned char rgb[3])
{
    (void)h, (void)seed;
    rgb[0] = (unsigned char)(x * 255 / w);
    rgb[1] = (unsigned char)(y * 3);
    rgb[2] = (unsigned char)(x ^ y);
}

/* A 64 x 48 JPEG with these options: malloc'd */
static unsigned char *jpeg_with(int h0, int v0, int progressive, J_COLOR_SPACE cs,
                                unsigned long *size)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    jpeg_mem_dest(&c, &out, size);
    c.image_width = 64;
    c.image_height = 48;
    c.input_components = cs == JCS_CMYK ? 4 : 3;
    c.in_color_space = cs == JCS_CMYK ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&c);
    if (cs == JCS_CMYK)
        jpeg_set_colorspace(&c, JCS_CMYK);
    c.comp_info[0].h_samp_factor = h0;
    c.comp_info[0].v_samp_factor = v0;
    if (progressive)
        jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    unsigned char row[64 * 4];
    while (c.next_scanline < c.image_height) {
        for (int x = 0; x < 64; x++)
            for (int k = 0; k < c.input_components; k++)
                row[x * c.input_components + k] = (unsigned char)(x * 4 + k * 30 + c.next_scanline);
        JSAMPROW r[1] = {row};
        jpeg_write_scanlines(&c, r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return out;
}

Test(jpegkind, the_gpu_takes_baseline_444_422_420_and_grey_only)
{
    struct {
        int h, v, prog;
        J_COLOR_SPACE cs;
        ShardJpegKind want;
    } cases[] = {
        {2, 2, 0, JCS_YCbCr, SHARD_JPEG_GPU_OK},      {2, 1, 0, JCS_YCbCr, SHARD_JPEG_GPU_OK},
        {1, 1, 0, JCS_YCbCr, SHARD_JPEG_GPU_OK},      {1, 2, 0, JCS_YCbCr, SHARD_JPEG_SAMPLING},
        {4, 1, 0, JCS_YCbCr, SHARD_JPEG_SAMPLING},    {2, 2, 1, JCS_YCbCr, SHARD_JPEG_PROGRESSIVE},
        {1, 1, 0, JCS_CMYK, SHARD_JPEG_COLOUR},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned long size = 0;
        unsigned char *j = jpeg_with(cases[i].h, cases[i].v, cases[i].prog, cases[i].cs, &size);
        int w, h;
        ShardJpegKind k = shard_jpeg_kind(j, size, 0, &w, &h);
        cr_expect_eq(k, cases[i].want, "case %zu: %s, not %s", i, shard_jpeg_kind_name(k),
                     shard_jpeg_kind_name(cases[i].want));
        cr_expect(w == 64 && h == 48);
        /* cut short: the CPU names what is wrong */
        cr_expect_eq(shard_jpeg_kind(j, size / 2, 0, &w, &h), SHARD_JPEG_OTHER);
        /* more pixels than allowed */
        if (cases[i].want == SHARD_JPEG_GPU_OK)
            cr_expect_eq(shard_jpeg_kind(j, size, 64 * 48 - 1, &w, &h), SHARD_JPEG_OTHER);
        free(j);
    }
    unsigned long size = 0;
    unsigned char *g = tu_jpeg(32, 32, grey_ramp, 0, &size);
    int w, h;
    cr_expect_eq(shard_jpeg_kind(g, size, 0, &w, &h), SHARD_JPEG_GPU_OK);
    free(g);
    static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0};
    cr_expect_eq(shard_jpeg_kind(png, sizeof png, 0, &w, &h), SHARD_JPEG_NOT_JPEG);
}
