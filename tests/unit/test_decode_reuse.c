/* A decode thread's libjpeg decompressor, reused from image to image as the decode pool
 * reuses it: a big image decoded at a reduced scale (a colour converter), then a tall one at
 * full scale with its top rows skipped (the merged upsampler, no converter). libjpeg-turbo
 * 2.1 kept the first image's freed converter and wrote through it while skipping. The write
 * is inside libjpeg, which AddressSanitizer does not instrument, so meson runs this program
 * under valgrind (scripts/deps.sh installs it); it also checks every decode succeeds. */
#include <stdio.h>
#include <stdlib.h>

#include <shard/shard.h>

#include "decode/transform.h"
#include "decode/scratch.h"
#include "testjpeg.h"

static void pixel(int x, int y, int w, int h, int seed, unsigned char rgb[3])
{
    (void)w, (void)h;
    rgb[0] = (unsigned char)(x * 3), rgb[1] = (unsigned char)(y * 5), rgb[2] = (unsigned char)seed;
}

int main(void)
{
    static const int sizes[2][2] = {{400, 400}, {30, 120}};
    unsigned char *jpg[2];
    unsigned long size[2];
    for (int k = 0; k < 2; k++)
        jpg[k] = tu_jpeg(sizes[k][0], sizes[k][1], pixel, k, &size[k]);
    ShardTransform t;
    shard_transform_default_settings(&t);
    t.width = t.height = 16;
    t.crop = SHARD_CROP_CENTER;
    t.fast = 1;
    unsigned char out[16 * 16 * 3];
    char msg[256];
    ShardScratch sc = {0};
    int bad = 0;
    for (int i = 0; i < 20; i++) {
        int rc = shard_decode_transform_with(&sc, jpg[i % 2], size[i % 2], &t, (uint64_t)i, out,
                                             msg, sizeof msg);
        if (rc) {
            fprintf(stderr, "decode %d (%dx%d): %s\n", i, sizes[i % 2][0], sizes[i % 2][1], msg);
            bad = 1;
        }
    }
    shard_scratch_release(&sc);
    free(jpg[0]);
    free(jpg[1]);
    printf("%s\n", bad ? "FAILED" : "20 decodes with one decompressor: ok");
    return bad;
}
