/*
 * The image check of shardpack --verify (shard/image.h): a JPEG read through to its end
 * without a full decode, a PNG or WebP decoded whole as the loader would.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "decode/jpeg.h"
#include "decode/jpegerr.h"
#include "decode/limit.h"
#include "shard/decode.h"
#include "shard/image.h"

/* the decoders' defaults (limit.h) */
#define VERIFY_MAX_PIXELS DEFAULT_MAX_PIXELS

static int verify_jpeg(const void *data, size_t size, char *msg, size_t msgsize)
{
    struct jpeg_decompress_struct cinfo;
    ShardJpegErr err;
    memset(&err, 0, sizeof err);
    cinfo.err = shard_jpeg_err_init(&err);
    JSAMPLE *volatile row = NULL;
    if (setjmp(err.jump)) {
        free(row);
        jpeg_destroy_decompress(&cinfo);
        if (msg)
            snprintf(msg, msgsize, "%s%s", shard_jpeg_what(&err), err.msg);
        return SHARD_ERR_DECODE;
    }
    jpeg_create_decompress(&cinfo);
    shard_jpeg_limit_scans(&cinfo, &err, DEFAULT_MAX_SCANS);
    jpeg_mem_src(&cinfo, data, (unsigned long)size);
    jpeg_read_header(&cinfo, TRUE);
    /* progressive JPEGs keep every coefficient: a bomb's header alone asks for gigabytes */
    if ((uint64_t)cinfo.image_width * cinfo.image_height > VERIFY_MAX_PIXELS) {
        if (msg)
            snprintf(msg, msgsize, "a JPEG of %ux%u pixels, more than the limit of %llu",
                     (unsigned)cinfo.image_width, (unsigned)cinfo.image_height,
                     (unsigned long long)VERIFY_MAX_PIXELS);
        jpeg_destroy_decompress(&cinfo);
        return SHARD_ERR_DECODE;
    }
    /* Every coefficient is still entropy-decoded at 1/8 scale, which is where damage
     * shows, but the inverse DCT and colour work shrink to almost nothing. */
    cinfo.scale_num = 1;
    cinfo.scale_denom = 8;
    cinfo.dct_method = JDCT_IFAST;
    cinfo.do_fancy_upsampling = FALSE;
    jpeg_calc_output_dimensions(&cinfo);
    uint64_t need = shard_jpeg_memory(&cinfo, 0);
    if (need > DEFAULT_MAX_DECODE_MEMORY) {
        if (msg)
            snprintf(msg, msgsize, "a JPEG of %ux%u pixels needs %llu bytes to decode, more than "
                     "the limit of %llu (max_decode_memory)", (unsigned)cinfo.image_width,
                     (unsigned)cinfo.image_height, (unsigned long long)need,
                     (unsigned long long)DEFAULT_MAX_DECODE_MEMORY);
        jpeg_destroy_decompress(&cinfo);
        return SHARD_ERR_DECODE;
    }
    cinfo.mem->max_memory_to_use = (long)DEFAULT_MAX_DECODE_MEMORY;
    jpeg_start_decompress(&cinfo);
    row = malloc((size_t)cinfo.output_width * (size_t)cinfo.output_components);
    if (!row) {
        jpeg_destroy_decompress(&cinfo);
        if (msg)
            snprintf(msg, msgsize, "out of memory");
        return SHARD_ERR_NOMEM;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW rows[1] = {row};
        jpeg_read_scanlines(&cinfo, rows, 1);
    }
    jpeg_finish_decompress(&cinfo);
    free(row);
    jpeg_destroy_decompress(&cinfo);
    if (err.warned) {
        if (msg)
            snprintf(msg, msgsize, "corrupt JPEG: %s", err.msg);
        return SHARD_ERR_DECODE;
    }
    return 0;
}

int shard_image_verify(const void *data, size_t size, char *msg, size_t msgsize)
{
    const char *fmt = shard_image_format(data, size);
    if (!fmt) {
        if (msg)
            snprintf(msg, msgsize, "not an image (no JPEG, PNG, GIF, WebP, BMP, TIFF or PNM "
                                   "signature)");
        return SHARD_ERR_FORMAT;
    }
    if (!strcmp(fmt, "jpeg"))
        return verify_jpeg(data, size, msg, msgsize);
    if (shard_image_decoded(fmt)) { /* PNG, WebP: decoded whole, as the loader would */
        unsigned char *px;
        int w, h;
        int rc = shard_decode_rgb(data, size, &px, &w, &h, msg, msgsize);
        free(px);
        return rc;
    }
    return 0;
}
