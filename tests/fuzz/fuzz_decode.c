/* JPEG, PNG and WebP decode with a crop and a DCT scale: the first 8 bytes choose the output size,
 * crop, flip, fast path and seed; the rest is the image (its size from its header too). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    ShardTransform t;
    shard_transform_default_settings(&t);
    t.width = 1 + data[0] % 64;
    t.height = 1 + data[1] % 64;
    t.crop = (ShardCrop)(data[2] % 3);
    t.flip = data[3] & 1;
    t.fast = (data[3] >> 1) & 1;
    t.dtype = (data[3] >> 2) & 1 ? SHARD_DTYPE_FLOAT32 : SHARD_DTYPE_UINT8;
    t.layout = (data[3] >> 3) & 1 ? SHARD_LAYOUT_NHWC : SHARD_LAYOUT_NCHW;
    t.max_pixels = 1 << 22; /* the fuzzer's memory is the bound */
    uint64_t seed = (uint64_t)data[4] | (uint64_t)data[5] << 8;
    void *out = malloc(shard_transform_output_size(&t));
    char msg[256];
    if (out)
        shard_decode_transform(data + 8, size - 8, &t, seed, out, msg, sizeof msg);
    free(out);
    (void)shard_image_format(data + 8, size - 8);
    int w, h;
    size_t need = 0;
    /* the header alone: a size for any bytes, or more bytes asked for than were given */
    if (shard_image_geometry(data + 8, size - 8, &w, &h, &need, msg, sizeof msg) == SHARD_AGAIN &&
        need <= size - 8)
        abort();
    if (size - 8 < 1 << 16)
        shard_image_verify(data + 8, size - 8, msg, sizeof msg);
    return 0;
}
