/*
 * The decode pool's resampler on each SIMD path this CPU has, side by side in one process:
 * the first 300 JPEGs under FOLDER decoded once, one RandomResizedCrop box each (torchvision's
 * scale and ratio ranges) resized to 224x224 planar, mirrored every other image. Each image
 * is read through just before its resize, as the decoder leaves it in cache; the paths take
 * turns pass by pass and each keeps its best pass. Prints microseconds per resize and each
 * path's time over the AVX2 path's.
 *
 *     resize_bench FOLDER [PASSES]
 */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h>

#include "decode/resize.h"
#include "decode/scratch.h"


#define MAXIMG 300

static unsigned char *imgs[MAXIMG];
static int ws[MAXIMG], hs[MAXIMG], nimg;

static int add(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)ftw;
    size_t n = strlen(path);
    if (type != FTW_F || n < 4 || strcasecmp(path + n - 4, ".jpg") || nimg == MAXIMG)
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    struct jpeg_decompress_struct ci;
    struct jpeg_error_mgr err;
    ci.err = jpeg_std_error(&err);
    jpeg_create_decompress(&ci);
    jpeg_stdio_src(&ci, f);
    jpeg_read_header(&ci, TRUE);
    ci.out_color_space = JCS_RGB;
    jpeg_start_decompress(&ci);
    unsigned char *p = malloc((size_t)ci.output_width * ci.output_height * 3);
    while (ci.output_scanline < ci.output_height) {
        JSAMPROW row = p + (size_t)ci.output_scanline * ci.output_width * 3;
        jpeg_read_scanlines(&ci, &row, 1);
    }
    ws[nimg] = (int)ci.output_width, hs[nimg] = (int)ci.output_height, imgs[nimg++] = p;
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    fclose(f);
    return 0;
}

static double uniform(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (double)(*s >> 8) / (double)(1u << 24);
}

static volatile unsigned sink;

static void touch(const unsigned char *p, size_t n)
{
    unsigned s = 0;
    for (size_t i = 0; i < n; i += 64)
        s += p[i];
    sink = s;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: resize_bench FOLDER [PASSES]\n");
        return 2;
    }
    int passes = argc > 2 ? atoi(argv[2]) : 20;
    nftw(argv[1], add, 16, FTW_PHYS);
    if (!nimg) {
        fprintf(stderr, "resize_bench: no .jpg under %s\n", argv[1]);
        return 1;
    }
    double box[MAXIMG][4];
    unsigned s = 1;
    for (int i = 0; i < nimg; i++) {
        double area = (double)ws[i] * hs[i];
        for (;;) {
            double scale = 0.08 + 0.92 * uniform(&s);
            double ratio = exp(log(3.0 / 4) + (log(4.0 / 3) - log(3.0 / 4)) * uniform(&s));
            double cw = round(sqrt(area * scale * ratio)), ch = round(sqrt(area * scale / ratio));
            if (cw <= ws[i] && ch <= hs[i]) {
                box[i][0] = floor((ws[i] - cw) * uniform(&s));
                box[i][1] = floor((hs[i] - ch) * uniform(&s));
                box[i][2] = cw, box[i][3] = ch;
                break;
            }
        }
    }
    /* one scratch per path, the path fixed when the scratch is first used */
    static const char *const names[] = {"avx2", "avx512", "vnni"};
    ShardScratch sc[3];
    memset(sc, 0, sizeof sc);
    const char *took[3];
    int npaths = 0;
    for (int k = 0; k < 3; k++) {
        setenv("LIBSHARD_SIMD", names[k], 1);
        took[npaths] = shard_resize_path(&sc[npaths]);
        if (!strcmp(took[npaths], names[k]))
            npaths++;
        else
            shard_scratch_release(&sc[npaths]);
    }
    unsetenv("LIBSHARD_SIMD");
    if (!npaths) {
        fprintf(stderr, "resize_bench: this CPU has no AVX2: only the plain C path\n");
        return 1;
    }
    unsigned char *out = malloc((size_t)224 * 224 * 3);
    double best[3] = {1e30, 1e30, 1e30};
    for (int p = 0; p < passes; p++)
        for (int k = 0; k < npaths; k++) {
            double t = 0;
            for (int i = 0; i < nimg; i++) {
                touch(imgs[i], (size_t)ws[i] * hs[i] * 3);
                double t0 = seconds();
                if (shard_resize_fast(&sc[k], imgs[i], ws[i], hs[i], box[i][0], box[i][1],
                                      box[i][2], box[i][3], out, 224, 224, 1, i & 1)) {
                    fprintf(stderr, "resize_bench: resize failed\n");
                    return 1;
                }
                t += seconds() - t0;
            }
            if (t < best[k])
                best[k] = t;
        }
    printf("%d images, best of %d passes, us per 224x224 resize:\n", nimg, passes);
    for (int k = 0; k < npaths; k++)
        printf("  %-7s %7.1f   (%.2f of avx2)\n", took[k], best[k] / nimg * 1e6, best[k] / best[0]);
    for (int k = 0; k < npaths; k++)
        shard_scratch_release(&sc[k]);
    return 0;
}
