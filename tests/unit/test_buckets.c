/* Aspect-ratio buckets (libshard/src/resume/buckets.h): the sets a spec gives, the nearest
 * bucket of an image, and "auto" fitted to an aspect histogram. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "resume/buckets.h"

TestSuite(buckets, .timeout = 60);

static int has(const ShardBuckets *b, int h, int w)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i].height == h && b->v[i].width == w)
            return 1;
    return 0;
}

Test(buckets, sdxl_is_the_1024_family_of_64_aligned_sizes)
{
    ShardBuckets b;
    char err[SHARD_ERROR_MAX];
    cr_assert_eq(shard_buckets_parse(&b, "sdxl", 1024, err), 0, "%s", err);
    cr_assert(b.n >= 20 && b.auto_k == 0, "%zu", b.n);
    /* the sizes SDXL trained at are among them */
    cr_assert(has(&b, 1024, 1024) && has(&b, 896, 1152) && has(&b, 1152, 896) &&
              has(&b, 768, 1344) && has(&b, 512, 2048) && has(&b, 2048, 512));
    for (size_t i = 0; i < b.n; i++) {
        double area = (double)b.v[i].height * b.v[i].width;
        cr_assert(b.v[i].height % 64 == 0 && b.v[i].width % 64 == 0);
        cr_assert(fabs(area / (1024.0 * 1024.0) - 1) < 0.07, "%dx%d", b.v[i].height, b.v[i].width);
    }
    /* scaled by the image size: the same shapes at half the side */
    ShardBuckets h;
    cr_assert_eq(shard_buckets_parse(&h, "sdxl", 512, err), 0, "%s", err);
    cr_assert_eq(h.n, b.n);
    for (size_t i = 0; i < b.n; i++)
        cr_assert(h.v[i].height * 2 == b.v[i].height && h.v[i].width * 2 == b.v[i].width);
}

Test(buckets, lists_parse_and_bad_specs_are_named)
{
    ShardBuckets b;
    char err[SHARD_ERROR_MAX];
    cr_assert_eq(shard_buckets_parse(&b, "768x1024,1024x768,512x512", 224, err), 0, "%s", err);
    cr_assert(b.n == 3 && b.v[0].height == 768 && b.v[0].width == 1024 && b.v[2].width == 512);
    cr_assert_eq(shard_buckets_parse(&b, "auto", 512, err), 0);
    cr_assert(b.auto_k == SHARD_BUCKETS_AUTO_DEFAULT && b.n == 0);
    cr_assert_eq(shard_buckets_parse(&b, "auto:3", 512, err), 0);
    cr_assert_eq(b.auto_k, 3);
    const char *bad[] = {"", "12", "12x", "x12", "4x512", "512x99999", "512x512,", "512x512,,",
                         "auto:1", "auto:x", "auto:", "autox", "sdxl2", "-512x512", "512x512 "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        cr_assert_eq(shard_buckets_parse(&b, bad[i], 512, err), SHARD_ERR_INVALID, "'%s'", bad[i]);
        cr_assert(strstr(err, "aspect_buckets"), "'%s': %s", bad[i], err);
    }
    cr_assert_eq(shard_buckets_parse(&b, "512x512,256x256,512x512", 512, err), SHARD_ERR_INVALID);
    cr_assert(strstr(err, "512x512 given twice"), "%s", err);
    cr_assert_eq(shard_buckets_parse(&b, "sdxl", 4, err), SHARD_ERR_INVALID);
}

Test(buckets, an_image_goes_to_the_nearest_in_log_aspect)
{
    ShardBuckets b;
    char err[SHARD_ERROR_MAX];
    cr_assert_eq(shard_buckets_parse(&b, "512x512,384x512,512x384,288x512", 512, err), 0);
    cr_assert_eq(shard_bucket_of(&b, 640, 480), 1);  /* 4:3 */
    cr_assert_eq(shard_bucket_of(&b, 480, 640), 2);  /* 3:4 */
    cr_assert_eq(shard_bucket_of(&b, 500, 500), 0);
    cr_assert_eq(shard_bucket_of(&b, 1920, 1080), 3); /* 16:9 */
    cr_assert_eq(shard_bucket_of(&b, 4000, 100), 3);  /* past every bucket: the widest */
    /* between 1:1 and 4:3 the nearer in log ratio wins: sqrt(4/3) = 1.1547 is the middle */
    cr_assert_eq(shard_bucket_of(&b, 1150, 1000), 0);
    cr_assert_eq(shard_bucket_of(&b, 1160, 1000), 1);
}

Test(buckets, auto_fits_equal_area_sizes_to_the_histogram)
{
    uint64_t hist[SHARD_ASPECT_BINS] = {0};
    hist[shard_aspect_bin(640, 480)] = 600;
    hist[shard_aspect_bin(480, 640)] = 400;
    cr_assert_eq(shard_aspect_bin(7, 7), SHARD_ASPECT_BINS / 2);
    cr_assert_eq(shard_aspect_bin(1, 100), 0);
    cr_assert_eq(shard_aspect_bin(100, 1), SHARD_ASPECT_BINS - 1);
    ShardBuckets b;
    char err[SHARD_ERROR_MAX];
    cr_assert_eq(shard_buckets_parse(&b, "auto:2", 512, err), 0);
    shard_buckets_fit(&b, hist, 512);
    cr_assert_eq(b.n, 2);
    for (size_t i = 0; i < b.n; i++) {
        double area = (double)b.v[i].height * b.v[i].width, r = (double)b.v[i].width / b.v[i].height;
        cr_assert(b.v[i].height % 8 == 0 && b.v[i].width % 8 == 0);
        cr_assert(fabs(area / (512.0 * 512.0) - 1) < 0.04, "%dx%d", b.v[i].height, b.v[i].width);
        cr_assert(fabs(r - 4.0 / 3) < 0.05 || fabs(r - 3.0 / 4) < 0.05, "%f", r);
    }
    cr_assert_neq(shard_bucket_of(&b, 640, 480), shard_bucket_of(&b, 480, 640));
    /* one shape: the groups merge into one bucket; no image: the square */
    memset(hist, 0, sizeof hist);
    hist[shard_aspect_bin(300, 300)] = 50;
    cr_assert_eq(shard_buckets_parse(&b, "auto", 256, err), 0);
    shard_buckets_fit(&b, hist, 256);
    cr_assert(b.n == 1 && b.v[0].height == 256 && b.v[0].width == 256, "%zu", b.n);
    hist[shard_aspect_bin(300, 300)] = 0;
    shard_buckets_fit(&b, hist, 256);
    cr_assert(b.n == 1 && b.v[0].height == 256 && b.v[0].width == 256);
}

Test(buckets, batches_are_uniform_whole_and_each_sample_once)
{
    ShardGrouper g;
    const size_t nb = 5, B = 7, N = 2000;
    cr_assert_eq(shard_grouper_init(&g, nb, B), 0);
    static unsigned seen[2000];
    uint64_t x = 12345;
    size_t batches = 0, most = 0;
    for (uint64_t i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t b = (size_t)(x >> 33) % (i < N / 2 ? nb : 2); /* later buckets go quiet */
        ShardGroupItem it = {i, b, i * 3};
        const ShardGroupItem *out = shard_grouper_add(&g, b, &it);
        size_t held = 0;
        for (size_t k = 0; k < nb; k++) {
            size_t n;
            shard_grouper_pending(&g, k, &n);
            held += n;
        }
        most = held > most ? held : most;
        if (!out)
            continue;
        batches++;
        for (size_t k = 0; k < B; k++) {
            cr_assert_eq(out[k].shard, b, "a batch of one bucket");
            cr_assert(k == 0 || out[k].point > out[k - 1].point, "in the order they came");
            seen[out[k].point]++;
        }
        cr_assert_eq(out[B - 1].point, i, "a batch goes out at the point that completes it");
    }
    size_t partial = 0;
    for (size_t b = 0; b < nb; b++) {
        size_t n;
        const ShardGroupItem *v = shard_grouper_pending(&g, b, &n);
        cr_assert_lt(n, B);
        partial += n > 0;
        for (size_t k = 0; k < n; k++)
            seen[v[k].point]++;
    }
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(seen[i], 1, "sample %zu delivered %u times", i, seen[i]);
    cr_assert(most <= nb * (B - 1) && partial <= nb && batches >= (N - nb * B) / B);
    shard_grouper_free(&g);
    cr_assert_eq(shard_grouper_init(&g, 0, 4), SHARD_ERR_INVALID);
    cr_assert_eq(shard_grouper_init(&g, 3, 0), SHARD_ERR_INVALID);
}
