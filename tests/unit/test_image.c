#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <shard/image.h>

/* A real JPEG made with libjpeg: a smooth gradient with some texture. */
static unsigned char *make_jpeg(int w, int h, unsigned long *size)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    jpeg_mem_dest(&c, &out, size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    jpeg_start_compress(&c, TRUE);
    unsigned char *row = malloc((size_t)w * 3);
    while (c.next_scanline < c.image_height) {
        int y = (int)c.next_scanline;
        for (int x = 0; x < w; x++) {
            row[3 * x] = (unsigned char)(x * 255 / w);
            row[3 * x + 1] = (unsigned char)(y * 255 / h);
            row[3 * x + 2] = (unsigned char)((x * y) ^ (x + y));
        }
        JSAMPROW r[1] = {row};
        jpeg_write_scanlines(&c, r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    return out;
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
