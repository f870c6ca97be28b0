/* The resampler's geometry: any image size, box (fractions, outside the image, empty) and
 * output size, on every SIMD path the CPU has. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static double frac(const uint8_t *p, double scale)
{
    int16_t v;
    memcpy(&v, p, 2);
    return v * scale / 256.0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size <= 16)
        return 0;
    int w = 1 + data[0] % 200, h = 1 + data[1] % 200;
    int ow = 1 + data[2] % 100, oh = 1 + data[3] % 100;
    double x0 = frac(data + 4, w), y0 = frac(data + 6, h);
    double bw = frac(data + 8, w), bh = frac(data + 10, h);
    unsigned char *in = malloc((size_t)w * h * 3), *out = malloc((size_t)ow * oh * 3);
    if (in && out) {
        for (size_t i = 0; i < (size_t)w * h * 3; i++)
            in[i] = data[16 + i % (size - 16)] ^ (unsigned char)i;
        shard_resize_rgb(in, w, h, x0, y0, bw, bh, out, ow, oh);
    }
    free(in);
    free(out);
    return 0;
}
