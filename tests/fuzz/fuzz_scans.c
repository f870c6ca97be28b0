/* Progressive JPEGs of many scans: a fixed head (a grey image whose size the first four
 * bytes choose, up to 4096 x 4096, quantization and Huffman tables) and, from the input,
 * everything after it: scan headers and their entropy-coded data, as many as the input
 * holds. Decoded with the library's limits (max_scans, max_decode_memory): every input
 * ends within the scan limit's time, whatever its scans ask. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t segment(uint8_t *out, uint8_t marker, const uint8_t *payload, size_t n)
{
    out[0] = 0xFF, out[1] = marker, out[2] = (uint8_t)((n + 2) >> 8), out[3] = (uint8_t)(n + 2);
    memcpy(out + 4, payload, n);
    return n + 4;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    unsigned w = 1 + ((unsigned)data[0] << 8 | data[1]) % 4096;
    unsigned h = 1 + ((unsigned)data[2] << 8 | data[3]) % 4096;
    uint8_t *jpeg = malloc(size + 256);
    if (!jpeg)
        return 0;
    size_t n = 0;
    jpeg[n++] = 0xFF, jpeg[n++] = 0xD8;
    uint8_t dqt[65] = {0};
    memset(dqt + 1, 1, 64);
    n += segment(jpeg + n, 0xDB, dqt, sizeof dqt);
    uint8_t sof[] = {8, (uint8_t)(h >> 8), (uint8_t)h, (uint8_t)(w >> 8), (uint8_t)w, 1, 1, 0x11, 0};
    n += segment(jpeg + n, 0xC2, sof, sizeof sof);
    uint8_t dc[18] = {0x00, 1}; /* one code: category 0 */
    n += segment(jpeg + n, 0xC4, dc, sizeof dc);
    uint8_t ac[17 + 15] = {0x10, 0, 0, 0, 15}; /* 15 codes of 4 bits: EOBRUN r, r = 0..14 */
    for (int r = 0; r < 15; r++)
        ac[17 + r] = (uint8_t)(r << 4);
    n += segment(jpeg + n, 0xC4, ac, sizeof ac);
    memcpy(jpeg + n, data + 4, size - 4);
    n += size - 4;
    jpeg[n++] = 0xFF, jpeg[n++] = 0xD9;
    ShardTransform t;
    shard_transform_default_settings(&t);
    t.width = t.height = 32;
    t.fast = data[3] & 1;
    void *out = malloc(shard_transform_output_size(&t));
    char msg[256];
    if (out)
        shard_decode_transform(jpeg, n, &t, 1, out, msg, sizeof msg);
    shard_image_verify(jpeg, n, msg, sizeof msg);
    free(out);
    free(jpeg);
    return 0;
}
