#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shard/decode.h>
#include <shard/image.h>

#include "testjpeg.h"

/* A smooth gradient with some texture. */
static void gradient(int x, int y, int w, int h, int seed, unsigned char rgb[3])
{
    (void)seed;
    rgb[0] = (unsigned char)(x * 255 / w);
    rgb[1] = (unsigned char)(y * 255 / h);
    rgb[2] = (unsigned char)((x * y) ^ (x + y));
}

static unsigned char *make_jpeg(int w, int h, unsigned long *size)
{
    return tu_jpeg(w, h, gradient, 0, size);
}

Test(image, formats)
{
    cr_assert_str_eq(shard_image_format("\xff\xd8\xff\xe0", 4), "jpeg");
    cr_assert_str_eq(shard_image_format("\x89PNG\r\n\x1a\n", 8), "png");
    cr_assert_str_eq(shard_image_format("GIF89a", 6), "gif");
    cr_assert_str_eq(shard_image_format("RIFF\0\0\0\0WEBPVP8 ", 16), "webp");
    cr_assert_str_eq(shard_image_format("P6\n4 4\n255\n", 11), "pnm");
    cr_assert_null(shard_image_format("hello world", 11));
    cr_assert_null(shard_image_format("\xff\xd8", 2));
}

Test(image, verify_good_jpeg)
{
    unsigned long n;
    unsigned char *j = make_jpeg(123, 77, &n);
    char msg[256] = "";
    cr_assert_eq(shard_image_verify(j, n, msg, sizeof msg), 0, "%s", msg);
    free(j);
}

Test(image, verify_truncated_jpeg)
{
    unsigned long n;
    unsigned char *j = make_jpeg(200, 150, &n);
    char msg[256] = "";
    cr_assert_eq(shard_image_verify(j, n / 2, msg, sizeof msg), SHARD_ERR_DECODE);
    cr_assert(strstr(msg, "corrupt JPEG"), "%s", msg);
    free(j);
}

Test(image, verify_damaged_entropy_data)
{
    unsigned long n;
    unsigned char *j = make_jpeg(200, 150, &n);
    /* A run of 0xFF bytes mid-scan reads as markers inside entropy-coded data. */
    memset(j + n / 2, 0xff, 64);
    char msg[256] = "";
    cr_assert_eq(shard_image_verify(j, n, msg, sizeof msg), SHARD_ERR_DECODE);
    free(j);
}

Test(image, verify_not_an_image)
{
    char msg[256] = "";
    cr_assert_eq(shard_image_verify("just text", 9, msg, sizeof msg), SHARD_ERR_FORMAT);
    cr_assert(strstr(msg, "not an image"), "%s", msg);
}

/* RGBX is RGB with a fourth byte of 255 (PIL's layout), on odd sizes; a PNG is not a JPEG. */
Test(image, rgbx_is_rgb_and_255)
{
    unsigned long size;
    unsigned char *jpg = tu_jpeg(37, 21, gradient, 0, &size);
    unsigned char *rgb, *rgbx;
    int w, h, w4, h4;
    char msg[256];
    cr_assert_eq(shard_decode_rgb(jpg, size, &rgb, &w, &h, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(shard_decode_rgbx(jpg, size, &rgbx, &w4, &h4, msg, sizeof msg), 0, "%s", msg);
    cr_assert(w == 37 && h == 21 && w4 == w && h4 == h);
    for (int i = 0; i < w * h; i++) {
        cr_assert_eq(memcmp(rgbx + 4 * i, rgb + 3 * i, 3), 0, "pixel %d", i);
        cr_assert_eq(rgbx[4 * i + 3], 255);
    }
    free(rgb);
    free(rgbx);
    free(jpg);
    static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0};
    cr_assert_eq(shard_decode_rgbx(png, sizeof png, &rgbx, &w, &h, msg, sizeof msg),
                 SHARD_ERR_UNSUPPORTED);
    cr_assert_null(rgbx);
    cr_assert(strstr(msg, "png"), "%s", msg);
}
