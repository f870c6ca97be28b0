/*
 * An image's stored size from its header alone (shard/image.h). JPEG's frame header is
 * found by walking the marker segments by hand rather than through libjpeg's header read:
 * the walk knows how many bytes the header needs, which a ranged read of a remote shard
 * asks for; WebP's comes from libwebp (WebPGetFeatures), PNG's from IHDR's fixed place.
 */
#include <stdio.h>
#include <string.h>

#include <webp/decode.h>

#include "shard/image.h"

static int again(size_t *need, size_t n)
{
    if (need)
        *need = n;
    return SHARD_AGAIN;
}

static int bad(char *msg, size_t msgsize, const char *what, size_t at)
{
    if (msg && msgsize)
        snprintf(msg, msgsize, "%s at byte %zu", what, at);
    return SHARD_ERR_DECODE;
}

/* A start-of-frame marker: SOF0-SOF15 but DHT (C4), JPG (C8) and DAC (CC). */
static int is_sof(unsigned m) { return m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc; }

static int jpeg_size(const unsigned char *p, size_t size, int *w, int *h, size_t *need, char *msg,
                     size_t msgsize)
{
    size_t i = 2;
    for (;;) {
        if (size < i + 2)
            return again(need, i + 4);
        if (p[i] != 0xff)
            return bad(msg, msgsize, "JPEG: no marker", i);
        unsigned m = p[i + 1];
        if (m == 0xff) { /* fill bytes before a marker */
            i++;
            continue;
        }
        if (m == 0x01 || (m >= 0xd0 && m <= 0xd8)) { /* markers without a segment */
            i += 2;
            continue;
        }
        if (m == 0xd9 || m == 0xda)
            return bad(msg, msgsize, "JPEG: no frame header before the scan", i);
        if (size < i + 4)
            return again(need, i + 4);
        size_t len = (size_t)p[i + 2] << 8 | p[i + 3];
        if (len < 2)
            return bad(msg, msgsize, "JPEG: a segment shorter than its length field", i);
        if (is_sof(m)) {
            if (len < 8)
                return bad(msg, msgsize, "JPEG: a frame header too short", i);
            if (size < i + 9)
                return again(need, i + 9);
            *h = p[i + 5] << 8 | p[i + 6];
            *w = p[i + 7] << 8 | p[i + 8];
            if (!*w || !*h) /* a height given later (DNL), or none: not a size to plan by */
                return bad(msg, msgsize, "JPEG: a frame of no width or height", i);
            return 0;
        }
        i += 2 + len;
    }
}

static int png_size(const unsigned char *p, size_t size, int *w, int *h, size_t *need, char *msg,
                    size_t msgsize)
{
    if (size < 24)
        return again(need, 24);
    if (memcmp(p + 12, "IHDR", 4))
        return bad(msg, msgsize, "PNG: the first chunk is not IHDR", 8);
    unsigned long x = (unsigned long)p[16] << 24 | (unsigned long)p[17] << 16 | p[18] << 8 | p[19];
    unsigned long y = (unsigned long)p[20] << 24 | (unsigned long)p[21] << 16 | p[22] << 8 | p[23];
    if (!x || !y || x > 0x7fffffffUL || y > 0x7fffffffUL)
        return bad(msg, msgsize, "PNG: IHDR's width or height out of range", 16);
    *w = (int)x;
    *h = (int)y;
    return 0;
}

/* VP8X's canvas, a VP8L's or a VP8's frame: all within the first 30 bytes. */
#define WEBP_HEADER 30

static int webp_size(const unsigned char *p, size_t size, int *w, int *h, size_t *need, char *msg,
                     size_t msgsize)
{
    WebPBitstreamFeatures f;
    VP8StatusCode st = WebPGetFeatures(p, size, &f);
    if (st == VP8_STATUS_NOT_ENOUGH_DATA && size < WEBP_HEADER)
        return again(need, WEBP_HEADER);
    if (st != VP8_STATUS_OK)
        return bad(msg, msgsize, "WebP: its header does not parse", 0);
    *w = f.width;
    *h = f.height;
    return 0;
}

int shard_image_geometry(const void *data, size_t size, int *width, int *height, size_t *need,
                         char *msg, size_t msgsize)
{
    const unsigned char *p = data;
    if (msg && msgsize)
        msg[0] = 0;
    if (size < 12) /* every format's signature */
        return again(need, 12);
    const char *fmt = shard_image_format(data, size);
    if (fmt && !strcmp(fmt, "jpeg"))
        return jpeg_size(p, size, width, height, need, msg, msgsize);
    if (fmt && !strcmp(fmt, "png"))
        return png_size(p, size, width, height, need, msg, msgsize);
    if (fmt && !strcmp(fmt, "webp"))
        return webp_size(p, size, width, height, need, msg, msgsize);
    if (msg && msgsize)
        snprintf(msg, msgsize, "%s: not an image the loader decodes (JPEG, PNG, WebP)",
                 fmt ? fmt : "unknown bytes");
    return SHARD_ERR_UNSUPPORTED;
}
