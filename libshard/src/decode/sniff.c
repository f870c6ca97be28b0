/*
 * Image identification (shard/image.h): the format a file's first bytes name, and whether
 * libshard decodes it.
 */
#include <string.h>

#include "shard/image.h"

const char *shard_image_format(const void *data, size_t size)
{
    const unsigned char *p = data;
    if (size >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
        return "jpeg";
    if (size >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8))
        return "png";
    if (size >= 6 && (!memcmp(p, "GIF87a", 6) || !memcmp(p, "GIF89a", 6)))
        return "gif";
    if (size >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
        return "webp";
    if (size >= 14 && p[0] == 'B' && p[1] == 'M')
        return "bmp";
    if (size >= 4 && (!memcmp(p, "II*\0", 4) || !memcmp(p, "MM\0*", 4)))
        return "tiff";
    if (size >= 3 && p[0] == 'P' && p[1] >= '1' && p[1] <= '7' &&
        (p[2] == '\n' || p[2] == ' ' || p[2] == '\r' || p[2] == '\t'))
        return "pnm";
    return NULL;
}

int shard_image_decoded(const char *format)
{
    return format && (!strcmp(format, "jpeg") || !strcmp(format, "png") || !strcmp(format, "webp"));
}
