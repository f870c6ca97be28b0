/*
 * Decoding and transforms (shard/decode.h).
 *
 * The JPEG fast path decides the crop box first (from the header's size), then asks
 * libjpeg-turbo for only that: the smallest DCT scale M/8 at which the box still covers
 * the output, jpeg_crop_scanline for the columns, jpeg_skip_scanlines for the rows above,
 * and stops after the box's last row. The resampler then maps the box (in scaled pixels,
 * fractions kept) onto the output, so the geometry is the same as a full decode's.
 */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

#include "decode/decode.h"
#include "base/rng.h"
#include "decode/jpegerr.h"
#include "decode/resize.h"
#include "decode/scratch.h"
#include "shard/decode.h"
#include "shard/image.h"

/* PIL's decompression-bomb limit (Image.MAX_IMAGE_PIXELS x 2, where it raises) */
#define DEFAULT_MAX_PIXELS 178956970ull

static uint64_t pixel_limit(const ShardTransform *t)
{
    return t && t->max_pixels ? t->max_pixels : DEFAULT_MAX_PIXELS;
}

/* An image declaring more pixels than max is refused before any memory goes to it. */
static int too_big(const char *what, uint64_t w, uint64_t h, uint64_t max, char *msg,
                   size_t msgsize)
{
    if (w * h <= max)
        return 0;
    if (msg)
        snprintf(msg, msgsize, "%s of %llux%llu pixels, more than the limit of %llu (max_pixels)",
                 what, (unsigned long long)w, (unsigned long long)h, (unsigned long long)max);
    return SHARD_ERR_DECODE;
}

void shard_transform_default(ShardTransform *t)
{
    memset(t, 0, sizeof *t);
    t->width = 224;
    t->height = 224;
    t->crop = SHARD_CROP_RANDOM_RESIZED;
    t->scale_min = 0.08;
    t->scale_max = 1.0;
    t->ratio_min = 3.0 / 4.0;
    t->ratio_max = 4.0 / 3.0;
    t->center_fraction = 0.875;
    t->flip = 0;
    t->fast = 1;
    t->layout = SHARD_LAYOUT_NCHW;
    t->dtype = SHARD_DTYPE_UINT8;
    t->mean[0] = 0.485f, t->mean[1] = 0.456f, t->mean[2] = 0.406f;
    t->std[0] = 0.229f, t->std[1] = 0.224f, t->std[2] = 0.225f;
    t->max_pixels = DEFAULT_MAX_PIXELS;
}

size_t shard_transform_output_size(const ShardTransform *t)
{
    return (size_t)t->width * (size_t)t->height * 3 * (t->dtype == SHARD_DTYPE_FLOAT32 ? 4 : 1);
}

static double uniform(ShardRng *r)
{
    return (double)(shard_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct Box {
    double x, y, w, h; /* in full-size pixels */
} Box;

/* torchvision's RandomResizedCrop.get_params, and the evaluation crop. */
static Box crop_box(const ShardTransform *t, int W, int H, ShardRng *r)
{
    Box b = {0, 0, W, H};
    if (t->crop == SHARD_CROP_NONE)
        return b;
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

/* ---- JPEG ------------------------------------------------------------------------------ */

static inline int muldiv255(int a, int b)
{
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

/* CMYK (Adobe-inverted when the marker says so) to RGB as Pillow converts it:
 * r = (255 - k) - c * (255 - k) / 255, rounded the same way. */
static void cmyk_row_to_rgb(const unsigned char *in, unsigned char *out, size_t n, int inverted)
{
    for (size_t i = 0; i < n; i++) {
        int c = in[4 * i], m = in[4 * i + 1], y = in[4 * i + 2], k = in[4 * i + 3];
        if (inverted)
            c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
        int nk = 255 - k;
        out[3 * i] = (unsigned char)(nk - muldiv255(c, nk));
        out[3 * i + 1] = (unsigned char)(nk - muldiv255(m, nk));
        out[3 * i + 2] = (unsigned char)(nk - muldiv255(y, nk));
    }
}

/* A libjpeg decompressor kept in a thread's scratch and reused from image to image. */
typedef struct Jpeg {
    struct jpeg_decompress_struct ci;
    ShardJpegErr err;
} Jpeg;

static void jpeg_object_free(void *p)
{
    Jpeg *j = p;
    jpeg_destroy_decompress(&j->ci);
    free(j);
}

static Jpeg *jpeg_object(ShardScratch *sc)
{
    if (sc->jpeg)
        return sc->jpeg;
    Jpeg *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->ci.err = shard_jpeg_err_init(&j->err);
    if (setjmp(j->err.jump)) {
        free(j);
        return NULL;
    }
    jpeg_create_decompress(&j->ci);
    sc->jpeg = j;
    sc->jpeg_free = jpeg_object_free;
    return j;
}

/* Decodes the box of a JPEG (fast: at a reduced scale) into the scratch's pixel buffer; box
 * is rewritten in that buffer's pixels. With box NULL the whole image at full size. */
static int jpeg_decode(ShardScratch *sc, const void *data, size_t size, const ShardTransform *t,
                       ShardRng *rng, Box *box_out, unsigned char **rgb, int *rw, int *rh,
                       char *msg, size_t msgsize)
{
    Jpeg *j = jpeg_object(sc);
    if (!j) {
        if (msg)
            snprintf(msg, msgsize, "out of memory");
        return SHARD_ERR_NOMEM;
    }
    struct jpeg_decompress_struct *ci = &j->ci;
    j->err.warned = 0;
    if (setjmp(j->err.jump)) {
        jpeg_abort_decompress(ci); /* ready for the next image */
        if (msg)
            snprintf(msg, msgsize, "corrupt JPEG: %s", j->err.msg);
        return SHARD_ERR_DECODE;
    }
    jpeg_mem_src(ci, data, (unsigned long)size);
    jpeg_read_header(ci, TRUE);
    int W = (int)ci->image_width, H = (int)ci->image_height;
    int big = too_big("a JPEG", (uint64_t)W, (uint64_t)H, pixel_limit(t), msg, msgsize);
    if (big) {
        jpeg_abort_decompress(ci); /* ready for the next image */
        return big;
    }
    int cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    ci->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    Box b = {0, 0, W, H};
    if (box_out) {
        b = crop_box(t, W, H, rng);
    }
    int num = 8;
    if (box_out && t->fast) {
        /* The smallest of 1/8, 1/4, 1/2 at which the box still has at least the output's
         * pixels: libjpeg-turbo has SIMD IDCTs for these; the other M/8 scales run plain C
         * IDCTs (and chroma at odd sizes) that cost more than they save. */
        for (num = 1; num < 8; num *= 2)
            if (b.w * num / 8 >= t->width && b.h * num / 8 >= t->height)
                break;
    }
    ci->scale_num = (unsigned)num;
    ci->scale_denom = 8;
    /* a reused decompressor keeps the last image's choices: set both ways every time */
    if (box_out && t->fast) {
        /* Training crops: the merged (non-fancy) chroma upsampler and the fast IDCT, both
         * SIMD in libjpeg-turbo, trade under a level of difference for speed. */
        ci->do_fancy_upsampling = FALSE;
        ci->dct_method = JDCT_IFAST;
    } else {
        ci->do_fancy_upsampling = TRUE;
        ci->dct_method = JDCT_ISLOW;
    }
    /* The merged upsampler converts colours itself, so libjpeg-turbo 2.1 then leaves cconvert
     * as the last image had it: freed with that image, and jpeg_skip_scanlines writes through
     * it (heap corruption). A fresh decompressor has it NULL; so does a reused one here. */
    ci->cconvert = NULL;
    jpeg_start_decompress(ci);
    int sw = (int)ci->output_width, sh = (int)ci->output_height;
    double fx = (double)sw / W, fy = (double)sh / H;
    /* The rows and columns of the scaled image the resampler will read: the box plus the
     * filter's reach (support grows with the shrink factor). */
    int x0 = 0, x1 = sw, y0 = 0, y1 = sh;
    if (box_out && t->fast) {
        double rx = b.w * fx / t->width, ry = b.h * fy / t->height;
        double mx = (rx < 1 ? 1 : rx) + 1, my = (ry < 1 ? 1 : ry) + 1;
        x0 = (int)floor(b.x * fx - mx);
        x1 = (int)ceil((b.x + b.w) * fx + mx);
        y0 = (int)floor(b.y * fy - my);
        y1 = (int)ceil((b.y + b.h) * fy + my);
        x0 = x0 < 0 ? 0 : x0;
        y0 = y0 < 0 ? 0 : y0;
        /* Skip whole iMCU rows only. libjpeg-turbo 2.1's jpeg_skip_scanlines, ending inside
         * a row group of the merged upsampler (no fancy upsampling, 2:1 vertical chroma),
         * hands out a row left from before the skip: stale bytes, different from run to run
         * (libjpeg-turbo issue #915). Decoding up to one iMCU row more avoids it. */
#if JPEG_LIB_VERSION >= 70
        int group = ci->max_v_samp_factor * ci->min_DCT_v_scaled_size;
#else
        int group = ci->max_v_samp_factor * ci->min_DCT_scaled_size;
#endif
        if (group > 1)
            y0 -= y0 % group;
        x1 = x1 > sw ? sw : x1;
        y1 = y1 > sh ? sh : y1;
    }
    JDIMENSION cx = (JDIMENSION)x0, cw = (JDIMENSION)(x1 - x0);
    if (cw < (JDIMENSION)sw)
        jpeg_crop_scanline(ci, &cx, &cw); /* widens to iMCU boundaries */
    int out_w = (int)cw, out_h = y1 - y0;
    unsigned char *buf = shard_scratch(sc, SHARD_SCR_PIXELS, (size_t)out_w * (size_t)out_h * 3);
    unsigned char *row = cmyk ? shard_scratch(sc, SHARD_SCR_CMYK, (size_t)ci->output_width * 4) : NULL;
    JSAMPROW *rows = shard_scratch(sc, SHARD_SCR_ROWS, (size_t)(out_h > 0 ? out_h : 1) * sizeof *rows);
    if (!buf || !rows || (cmyk && !row)) {
        jpeg_abort_decompress(ci);
        if (msg)
            snprintf(msg, msgsize, "out of memory");
        return SHARD_ERR_NOMEM;
    }
    if (y0 > 0)
        jpeg_skip_scanlines(ci, (JDIMENSION)y0);
    /* RGB rows go straight into buf, as many per call as libjpeg gives: one at a time, the
     * 2:1 vertical upsamplers decode two and copy the spare one out. */
    for (int y = 0; y < out_h; y++)
        rows[y] = buf + (size_t)y * (size_t)out_w * 3;
    for (int y = 0; y < out_h;) {
        JSAMPROW one = row;
        JSAMPROW *to = cmyk ? &one : rows + y;
        JDIMENSION got = jpeg_read_scanlines(ci, to, cmyk ? 1 : (JDIMENSION)(out_h - y));
        if (!got)
            break;
        if (cmyk)
            cmyk_row_to_rgb(row, rows[y], (size_t)out_w, ci->saw_Adobe_marker);
        y += (int)got;
    }
    if (ci->output_scanline < ci->output_height)
        jpeg_abort_decompress(ci); /* the rows below the box are not needed */
    else
        jpeg_finish_decompress(ci);
    if (j->err.warned) {
        if (msg)
            snprintf(msg, msgsize, "corrupt JPEG: %s", j->err.msg);
        return SHARD_ERR_DECODE;
    }
    if (box_out) {
        /* the box in the pixels of buf */
        box_out->x = b.x * fx - (double)cx;
        box_out->y = b.y * fy - (double)y0;
        box_out->w = b.w * fx;
        box_out->h = b.h * fy;
        if (box_out->x < 0)
            box_out->x = 0;
        if (box_out->y < 0)
            box_out->y = 0;
        if (box_out->x + box_out->w > out_w)
            box_out->w = out_w - box_out->x;
        if (box_out->y + box_out->h > out_h)
            box_out->h = out_h - box_out->y;
    }
    *rgb = buf;
    *rw = out_w;
    *rh = out_h;
    return 0;
}

/* Whether an end-of-image marker (FF D9) lies in the last 64 KiB. */
static int jpeg_has_eoi(const void *data, size_t size)
{
    const unsigned char *p = data;
    size_t lo = size > 65536 ? size - 65536 : 0;
    for (size_t i = size; i >= lo + 2; i--)
        if (p[i - 2] == 0xff && p[i - 1] == 0xd9)
            return 1;
    return 0;
}

/* ---- PNG ------------------------------------------------------------------------------- */

static int png_decode(ShardScratch *sc, const void *data, size_t size, uint64_t max_pixels,
                      unsigned char **rgb, int *w, int *h, char *msg, size_t msgsize)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, data, size)) {
        if (msg)
            snprintf(msg, msgsize, "corrupt PNG: %s", img.message);
        return SHARD_ERR_DECODE;
    }
    /* RGBA, then the alpha dropped: what PIL's convert("RGB") gives, so PNGs come out as
     * the reference pipelines see them (grey and palettes expanded by libpng). */
    img.format = PNG_FORMAT_RGBA;
    int big = too_big("a PNG", img.width, img.height, max_pixels, msg, msgsize);
    if (big) {
        png_image_free(&img);
        return big;
    }
    size_t n = (size_t)img.width * img.height;
    unsigned char *buf = shard_scratch(sc, SHARD_SCR_PIXELS, PNG_IMAGE_SIZE(img));
    if (!buf) {
        png_image_free(&img);
        if (msg)
            snprintf(msg, msgsize, "out of memory");
        return SHARD_ERR_NOMEM;
    }
    if (!png_image_finish_read(&img, NULL, buf, 0, NULL)) {
        if (msg)
            snprintf(msg, msgsize, "corrupt PNG: %s", img.message);
        png_image_free(&img);
        return SHARD_ERR_DECODE;
    }
    for (size_t i = 0; i < n; i++) {
        buf[3 * i] = buf[4 * i];
        buf[3 * i + 1] = buf[4 * i + 1];
        buf[3 * i + 2] = buf[4 * i + 2];
    }
    *rgb = buf;
    *w = (int)img.width;
    *h = (int)img.height;
    return 0;
}

/* The whole image (of format fmt, as shard_image_format says) as RGB in the scratch's
 * pixel buffer. */
static int decode_rgb(ShardScratch *sc, const char *fmt, const void *data, size_t size,
                      const ShardTransform *t, unsigned char **out, int *width, int *height,
                      char *msg, size_t msgsize)
{
    if (fmt && !strcmp(fmt, "jpeg"))
        return jpeg_decode(sc, data, size, t, NULL, NULL, out, width, height, msg, msgsize);
    if (fmt && !strcmp(fmt, "png"))
        return png_decode(sc, data, size, pixel_limit(t), out, width, height, msg, msgsize);
    if (msg)
        snprintf(msg, msgsize, "%s images are not decoded (JPEG and PNG are)",
                 fmt ? fmt : "unknown");
    return SHARD_ERR_UNSUPPORTED;
}

int shard_decode_rgb(const void *data, size_t size, unsigned char **out, int *width, int *height,
                     char *msg, size_t msgsize)
{
    *out = NULL;
    ShardScratch sc = {0};
    unsigned char *px;
    int rc = decode_rgb(&sc, shard_image_format(data, size), data, size, NULL, &px, width, height, msg,
                        msgsize);
    if (!rc)
        *out = shard_scratch_take(&sc, SHARD_SCR_PIXELS); /* px: the caller's now */
    shard_scratch_release(&sc);
    return rc;
}

/* ---- output ---------------------------------------------------------------------------- */

/* From interleaved RGB to NHWC or float, mirrored when flip (uint8 NCHW is written by the
 * resampler itself). */
static void store(const ShardTransform *t, const unsigned char *rgb, int flip, void *out)
{
    int W = t->width, H = t->height;
    size_t plane = (size_t)W * H;
    if (t->dtype == SHARD_DTYPE_UINT8 && t->layout == SHARD_LAYOUT_NHWC && !flip) {
        memcpy(out, rgb, plane * 3);
        return;
    }
    float scale[3], bias[3];
    for (int c = 0; c < 3; c++) {
        scale[c] = 1.0f / (255.0f * t->std[c]);
        bias[c] = -t->mean[c] / t->std[c];
    }
    for (int y = 0; y < H; y++) {
        const unsigned char *src = rgb + (size_t)y * W * 3;
        for (int x = 0; x < W; x++) {
            const unsigned char *p = src + (size_t)(flip ? W - 1 - x : x) * 3;
            for (int c = 0; c < 3; c++) {
                size_t o = t->layout == SHARD_LAYOUT_NHWC ? ((size_t)y * W + x) * 3 + c
                                                           : c * plane + (size_t)y * W + x;
                if (t->dtype == SHARD_DTYPE_UINT8)
                    ((unsigned char *)out)[o] = p[c];
                else
                    ((float *)out)[o] = p[c] * scale[c] + bias[c];
            }
        }
    }
}

int shard_decode_transform_with(ShardScratch *sc, const void *data, size_t size,
                                const ShardTransform *t, uint64_t seed, void *out, char *msg,
                                size_t msgsize)
{
    if (t->width <= 0 || t->height <= 0 || t->width > 16384 || t->height > 16384) {
        if (msg)
            snprintf(msg, msgsize, "output size %dx%d is not valid", t->width, t->height);
        return SHARD_ERR_INVALID;
    }
    ShardRng rng;
    shard_rng_init(&rng, seed, SHARD_RNG_CROP, 0, 0, 0);
    const char *fmt = shard_image_format(data, size);
    unsigned char *rgb = NULL;
    int w = 0, h = 0, rc;
    Box box;
    if (fmt && !strcmp(fmt, "jpeg")) {
        /* The fast path stops after the crop's last row, so libjpeg never sees a cut end:
         * look for the end-of-image marker instead (trailing bytes after it are allowed). */
        if (t->fast && !jpeg_has_eoi(data, size)) {
            if (msg)
                snprintf(msg, msgsize, "corrupt JPEG: truncated (no end-of-image marker)");
            return SHARD_ERR_DECODE;
        }
        rc = jpeg_decode(sc, data, size, t, &rng, &box, &rgb, &w, &h, msg, msgsize);
    } else {
        rc = decode_rgb(sc, fmt, data, size, t, &rgb, &w, &h, msg, msgsize);
        if (!rc)
            box = crop_box(t, w, h, &rng);
    }
    if (rc)
        return rc;
    int flip = t->flip && (shard_rng_next(&rng) >> 63);
    /* uint8 NCHW goes straight into the caller's planes (mirrored there); other outputs
     * through an RGB buffer that store() converts */
    int direct = t->dtype == SHARD_DTYPE_UINT8 && t->layout == SHARD_LAYOUT_NCHW;
    unsigned char *dst = direct ? out
                                : shard_scratch(sc, SHARD_SCR_RESIZED, (size_t)t->width * t->height * 3);
    /* The vertical-first resampler: within 1 of PIL (shard_resize_rgb is PIL's bytes). */
    rc = dst ? shard_resize_fast(sc, rgb, w, h, box.x, box.y, box.w, box.h, dst, t->width,
                                 t->height, direct, direct && flip)
             : SHARD_ERR_NOMEM;
    if (rc) {
        if (msg)
            snprintf(msg, msgsize, rc == SHARD_ERR_NOMEM ? "out of memory"
                                   : "cannot resize a %dx%d image's crop", w, h);
        return rc;
    }
    if (!direct)
        store(t, dst, flip, out);
    return 0;
}

int shard_transform_box(const ShardTransform *t, int width, int height, uint64_t seed,
                        double box[4], int *flip)
{
    if (width <= 0 || height <= 0 || t->width <= 0 || t->height <= 0)
        return SHARD_ERR_INVALID;
    /* the draws shard_decode_transform_with makes, in its order */
    ShardRng rng;
    shard_rng_init(&rng, seed, SHARD_RNG_CROP, 0, 0, 0);
    Box b = crop_box(t, width, height, &rng);
    int f = t->flip && (shard_rng_next(&rng) >> 63);
    box[0] = b.x, box[1] = b.y, box[2] = b.w, box[3] = b.h;
    if (flip)
        *flip = f;
    return 0;
}

int shard_decode_transform(const void *data, size_t size, const ShardTransform *t, uint64_t seed,
                           void *out, char *msg, size_t msgsize)
{
    ShardScratch sc = {0};
    int rc = shard_decode_transform_with(&sc, data, size, t, seed, out, msg, msgsize);
    shard_scratch_release(&sc);
    return rc;
}
