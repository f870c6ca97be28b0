/*
 * A JPEG's kind from its header (jpegkind.h): jpeg_read_header, never a decode.
 */
#include <string.h>

#include "decode/jpeg.h"
#include "decode/jpegerr.h"
#include "decode/jpegkind.h"
#include "shard/image.h"

const char *shard_jpeg_kind_name(ShardJpegKind k)
{
    static const char *const names[SHARD_JPEG_KINDS] = {
        "baseline", "not a JPEG", "progressive", "colour space", "chroma sampling", "other"};
    return (unsigned)k < SHARD_JPEG_KINDS ? names[k] : "?";
}

/* The frame's sampling as the GPU's decoder takes it: luma 1x1, 2x1 or 2x2 over chroma 1x1. */
static int sampling_ok(const struct jpeg_decompress_struct *d)
{
    if (d->num_components == 1)
        return 1;
    const jpeg_component_info *c = d->comp_info;
    int h = c[0].h_samp_factor, v = c[0].v_samp_factor;
    if (!((h == 1 && v == 1) || (h == 2 && v == 1) || (h == 2 && v == 2)))
        return 0;
    for (int k = 1; k < 3; k++)
        if (c[k].h_samp_factor != 1 || c[k].v_samp_factor != 1)
            return 0;
    return 1;
}

ShardJpegKind shard_jpeg_kind(const void *data, size_t size, uint64_t max_pixels, int *width,
                              int *height)
{
    *width = *height = 0;
    const char *fmt = shard_image_format(data, size);
    if (!fmt || strcmp(fmt, "jpeg"))
        return SHARD_JPEG_NOT_JPEG;
    /* cut files go to the CPU decoder, which names what is wrong with them */
    if (!shard_jpeg_has_eoi(data, size))
        return SHARD_JPEG_OTHER;
    struct jpeg_decompress_struct d;
    ShardJpegErr e;
    d.err = shard_jpeg_err_init(&e);
    volatile ShardJpegKind kind = SHARD_JPEG_NOT_JPEG;
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&d);
        return kind;
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, (const unsigned char *)data, (unsigned long)size);
    jpeg_read_header(&d, TRUE);
    *width = (int)d.image_width;
    *height = (int)d.image_height;
    if (d.progressive_mode || d.arith_code)
        kind = SHARD_JPEG_PROGRESSIVE;
    else if (d.data_precision != 8 ||
             (max_pixels && (uint64_t)d.image_width * d.image_height > max_pixels))
        kind = SHARD_JPEG_OTHER;
    else if (!((d.num_components == 3 && d.jpeg_color_space == JCS_YCbCr) ||
               (d.num_components == 1 && d.jpeg_color_space == JCS_GRAYSCALE)))
        kind = SHARD_JPEG_COLOUR;
    else if (!sampling_ok(&d))
        kind = SHARD_JPEG_SAMPLING;
    else
        kind = SHARD_JPEG_GPU_OK;
    jpeg_destroy_decompress(&d);
    return kind;
}
