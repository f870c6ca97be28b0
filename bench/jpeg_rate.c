/*
 * libjpeg-turbo's own decode rate on one core: every JPEG under the given folder, read into
 * memory first, then decoded in full to RGB with the library defaults (ISLOW IDCT, fancy
 * upsampling), as libshard's full decode does. Prints images/s, and the CPU time per image.
 *
 *     jpeg_rate FOLDER [ROUNDS]
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h>

static unsigned char **files;
static size_t *sizes, nfiles, capfiles;

static int add(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    size_t n = strlen(path);
    if (type != FTW_F || n < 4 || strcasecmp(path + n - 4, ".jpg"))
        return 0;
    if (nfiles == capfiles) {
        capfiles = capfiles ? capfiles * 2 : 1024;
        files = realloc(files, capfiles * sizeof *files);
        sizes = realloc(sizes, capfiles * sizeof *sizes);
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    files[nfiles] = malloc((size_t)st->st_size);
    sizes[nfiles] = fread(files[nfiles], 1, (size_t)st->st_size, f);
    fclose(f);
    nfiles++;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: jpeg_rate FOLDER [ROUNDS]\n");
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 1;
    nftw(argv[1], add, 16, FTW_PHYS);
    struct jpeg_decompress_struct ci;
    struct jpeg_error_mgr err;
    ci.err = jpeg_std_error(&err);
    jpeg_create_decompress(&ci);
    unsigned char *rgb = NULL;
    size_t cap = 0;
    double pixels = 0;
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    for (int r = 0; r < rounds; r++)
        for (size_t i = 0; i < nfiles; i++) {
            jpeg_mem_src(&ci, files[i], (unsigned long)sizes[i]);
            jpeg_read_header(&ci, TRUE);
            ci.out_color_space = JCS_RGB;
            jpeg_start_decompress(&ci);
            size_t need = (size_t)ci.output_width * ci.output_height * 3;
            if (need > cap)
                rgb = realloc(rgb, cap = need);
            while (ci.output_scanline < ci.output_height) {
                JSAMPROW row = rgb + (size_t)ci.output_scanline * ci.output_width * 3;
                jpeg_read_scanlines(&ci, &row, 1);
            }
            pixels += (double)ci.output_width * ci.output_height;
            jpeg_finish_decompress(&ci);
        }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    printf("images %zu seconds %.3f images_per_s %.1f mpixels_per_s %.1f cpu_ms_per_image %.3f\n",
           nfiles * (size_t)rounds, dt, nfiles * rounds / dt, pixels / dt / 1e6,
           cpu * 1e3 / (double)(nfiles * (size_t)rounds));
    jpeg_destroy_decompress(&ci);
    return 0;
}
