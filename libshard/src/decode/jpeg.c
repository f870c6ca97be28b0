/*
 * JPEG decoding (jpeg.h).
 */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

#include "decode/crop.h"
#include "decode/jpeg.h"
#include "decode/jpegerr.h"
#include "decode/limit.h"
#include "decode/scratch.h"

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

/* Chooses the DCT scale (the smallest of 1/8, 1/4, 1/2 at which box b still has the output's
 * pixels, on the fast path) and the decoder's options. */
static void jpeg_options(struct jpeg_decompress_struct *ci, const ShardTransform *t,
                        const ShardBox *b, int cropping)
{
    int num = 8;
    if (cropping && t->fast) {
        /* libjpeg-turbo has SIMD IDCTs for these; the other M/8 scales run plain C IDCTs
         * (and chroma at odd sizes) that cost more than they save. */
        for (num = 1; num < 8; num *= 2)
            if (b->w * num / 8 >= t->width && b->h * num / 8 >= t->height)
                break;
    }
    ci->scale_num = (unsigned)num;
    ci->scale_denom = 8;
    /* a reused decompressor keeps the last image's choices: set both ways every time */
    if (cropping && t->fast) {
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
}

/* The rows [*y0, *y1) and columns [*x0, *x1) of the scaled image (sw x sh, fx and fy of the
 * full size) that the resampler will read: box b plus the filter's reach (its support grows
 * with the shrink factor). */
static void jpeg_window(const struct jpeg_decompress_struct *ci, const ShardTransform *t,
                        const ShardBox *b, double fx, double fy, int *x0, int *x1, int *y0,
                        int *y1)
{
    int sw = (int)ci->output_width, sh = (int)ci->output_height;
    double rx = b->w * fx / t->width, ry = b->h * fy / t->height;
    double mx = (rx < 1 ? 1 : rx) + 1, my = (ry < 1 ? 1 : ry) + 1;
    *x0 = (int)floor(b->x * fx - mx);
    *x1 = (int)ceil((b->x + b->w) * fx + mx);
    *y0 = (int)floor(b->y * fy - my);
    *y1 = (int)ceil((b->y + b->h) * fy + my);
    *x0 = *x0 < 0 ? 0 : *x0;
    *y0 = *y0 < 0 ? 0 : *y0;
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
        *y0 -= *y0 % group;
    *x1 = *x1 > sw ? sw : *x1;
    *y1 = *y1 > sh ? sh : *y1;
}

/* Reads out_h rows of out_w pixels into buf (RGB; CMYK converted row by row through row),
 * as many per call as libjpeg gives: one at a time, the 2:1 vertical upsamplers would decode
 * two and copy the spare one out. */
static void jpeg_rows(struct jpeg_decompress_struct *ci, unsigned char *buf, JSAMPROW *rows,
                      unsigned char *row, int cmyk, int out_w, int out_h, int bpp)
{
    for (int y = 0; y < out_h; y++)
        rows[y] = buf + (size_t)y * (size_t)out_w * (size_t)bpp;
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
}

/* Box b of the full-size image mapped into the decoded window's pixels (scaled by fx, fy,
 * starting at column cx and row y0, out_w x out_h), kept inside it. */
static ShardBox window_box(const ShardBox *b, double fx, double fy, double cx, double y0,
                           int out_w, int out_h)
{
    ShardBox o = {b->x * fx - cx, b->y * fy - y0, b->w * fx, b->h * fy};
    if (o.x < 0)
        o.x = 0;
    if (o.y < 0)
        o.y = 0;
    if (o.x + o.w > out_w)
        o.w = out_w - o.x;
    if (o.y + o.h > out_h)
        o.h = out_h - o.y;
    return o;
}

uint64_t shard_jpeg_memory(const struct jpeg_decompress_struct *ci, int cmyk)
{
    uint64_t w = ci->output_width, h = ci->output_height;
    uint64_t bytes = w * h * 3 + w * (cmyk ? 4 : 3) * 32 + h * sizeof(JSAMPROW) + (1 << 20);
    /* several scans, or one per component: every coefficient is kept until the last */
    if (ci->progressive_mode || ci->comps_in_scan < ci->num_components)
        for (int c = 0; c < ci->num_components; c++) {
            const jpeg_component_info *k = &ci->comp_info[c];
            uint64_t bw = ((uint64_t)k->width_in_blocks + k->h_samp_factor) / k->h_samp_factor *
                          k->h_samp_factor; /* padded to whole iMCUs, as libjpeg pads */
            uint64_t bh = ((uint64_t)k->height_in_blocks + k->v_samp_factor) / k->v_samp_factor *
                          k->v_samp_factor;
            bytes += bw * bh * DCTSIZE2 * sizeof(JCOEF);
        }
    return bytes;
}

static int out_of_memory(char *msg, size_t msgsize)
{
    if (msg)
        snprintf(msg, msgsize, "out of memory");
    return SHARD_ERR_NOMEM;
}

int shard_jpeg_decode(ShardScratch *sc, const void *data, size_t size, const ShardTransform *t,
                      ShardRng *rng, ShardBox *box_out, int bpp, unsigned char **rgb, int *rw,
                      int *rh, char *msg, size_t msgsize)
{
    Jpeg *j = jpeg_object(sc);
    if (!j)
        return out_of_memory(msg, msgsize);
    struct jpeg_decompress_struct *ci = &j->ci;
    j->err.warned = 0;
    j->err.limited = 0;
    if (setjmp(j->err.jump)) {
        jpeg_abort_decompress(ci); /* ready for the next image */
        if (msg)
            snprintf(msg, msgsize, "%s%s", shard_jpeg_what(&j->err), j->err.msg);
        return SHARD_ERR_DECODE;
    }
    shard_jpeg_limit_scans(ci, &j->err, shard_scan_limit(t));
    jpeg_mem_src(ci, data, (unsigned long)size);
    jpeg_read_header(ci, TRUE);
    int W = (int)ci->image_width, H = (int)ci->image_height;
    int big = shard_too_big("a JPEG", (uint64_t)W, (uint64_t)H, shard_pixel_limit(t), msg, msgsize);
    if (big) {
        jpeg_abort_decompress(ci); /* ready for the next image */
        return big;
    }
    int cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    if (cmyk && bpp == 4) {
        jpeg_abort_decompress(ci);
        if (msg)
            snprintf(msg, msgsize, "a CMYK JPEG is not decoded to RGBX");
        return SHARD_ERR_UNSUPPORTED;
    }
    /* RGBX: libjpeg-turbo writes 0xFF in the fourth byte */
    ci->out_color_space = cmyk ? JCS_CMYK : bpp == 4 ? JCS_EXT_RGBX : JCS_RGB;
    ShardBox b = {0, 0, W, H};
    if (box_out)
        b = shard_crop_box(t, W, H, rng);
    jpeg_options(ci, t, &b, box_out != NULL);
    jpeg_calc_output_dimensions(ci);
    uint64_t limit = shard_decode_memory_limit(t);
    int rc = shard_scratch_admit(sc, shard_jpeg_memory(ci, cmyk), limit, "a JPEG", (uint64_t)W,
                                 (uint64_t)H, msg, msgsize);
    if (rc) {
        jpeg_abort_decompress(ci);
        return rc;
    }
    ci->mem->max_memory_to_use = (long)(limit < LONG_MAX ? limit : LONG_MAX);
    jpeg_start_decompress(ci);
    int sw = (int)ci->output_width, sh = (int)ci->output_height;
    double fx = (double)sw / W, fy = (double)sh / H;
    int x0 = 0, x1 = sw, y0 = 0, y1 = sh;
    if (box_out && t->fast)
        jpeg_window(ci, t, &b, fx, fy, &x0, &x1, &y0, &y1);
    JDIMENSION cx = (JDIMENSION)x0, cw = (JDIMENSION)(x1 - x0);
    if (cw < (JDIMENSION)sw)
        jpeg_crop_scanline(ci, &cx, &cw); /* widens to iMCU boundaries */
    int out_w = (int)cw, out_h = y1 - y0;
    unsigned char *buf = shard_scratch(sc, SHARD_SCR_PIXELS,
                                       (size_t)out_w * (size_t)out_h * (size_t)bpp);
    unsigned char *row = cmyk ? shard_scratch(sc, SHARD_SCR_CMYK, (size_t)ci->output_width * 4) : NULL;
    JSAMPROW *rows = shard_scratch(sc, SHARD_SCR_ROWS, (size_t)(out_h > 0 ? out_h : 1) * sizeof *rows);
    if (!buf || !rows || (cmyk && !row)) {
        jpeg_abort_decompress(ci);
        return out_of_memory(msg, msgsize);
    }
    if (y0 > 0)
        jpeg_skip_scanlines(ci, (JDIMENSION)y0);
    jpeg_rows(ci, buf, rows, row, cmyk, out_w, out_h, bpp);
    if (ci->output_scanline < ci->output_height)
        jpeg_abort_decompress(ci); /* the rows below the box are not needed */
    else
        jpeg_finish_decompress(ci);
    if (j->err.warned) {
        if (msg)
            snprintf(msg, msgsize, "corrupt JPEG: %s", j->err.msg);
        return SHARD_ERR_DECODE;
    }
    if (box_out)
        *box_out = window_box(&b, fx, fy, (double)cx, (double)y0, out_w, out_h);
    *rgb = buf;
    *rw = out_w;
    *rh = out_h;
    return 0;
}

int shard_jpeg_has_eoi(const void *data, size_t size)
{
    const unsigned char *p = data;
    size_t lo = size > 65536 ? size - 65536 : 0;
    for (size_t i = size; i >= lo + 2; i--)
        if (p[i - 2] == 0xff && p[i - 1] == 0xd9)
            return 1;
    return 0;
}
