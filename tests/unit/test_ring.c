/* The uploader's check of a loader's host batch against its ring (gpu/ring.c), which runs
 * without a GPU: a batch of more images than a device buffer holds, or of images of another
 * size, is refused naming both, instead of being copied past the buffer's end. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpu/ring.h"

TestSuite(ring, .timeout = 30);

Test(ring, a_host_batch_must_fit_the_ring)
{
    ShardUploadSettings s;
    shard_upload_default_settings(&s);
    s.batch_size = 8;
    s.height = 12;
    s.width = 20;
    char msg[SHARD_ERROR_MAX];
    size_t img = 12 * 20 * 3;
    cr_assert_eq(shard_ring_fits(&s, 8, img, msg), 0);
    cr_assert_eq(shard_ring_fits(&s, 1, img, msg), 0);
    cr_assert_eq(shard_ring_fits(&s, 9, img, msg), SHARD_ERR_INVALID, "more than a buffer holds");
    cr_assert(strstr(msg, "9 images") && strstr(msg, "at most 8") && strstr(msg, "20x12"), "%s",
              msg);
    cr_assert_eq(shard_ring_fits(&s, 8, img + 3, msg), SHARD_ERR_INVALID, "a wider image");
    cr_assert(strstr(msg, "723 bytes") && strstr(msg, "720 bytes each"), "%s", msg);
    cr_assert_eq(shard_ring_fits(&s, 8, img * 4, msg), SHARD_ERR_INVALID, "float32 images");
    cr_assert_eq(shard_ring_fits(&s, 0, img, msg), SHARD_ERR_INVALID, "an empty batch");
}
