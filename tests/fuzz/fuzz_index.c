/* The .idx parser (formats/index.md): the header count, then the whole text; the first byte
 * says how much of the rest is the text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tar/idx.h"
#include "shard/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    size_t cut = size > 1 ? 1 + (size_t)data[0] * (size - 1) / 255 : 1;
    char *text = malloc(cut);
    if (!text)
        return 0;
    memcpy(text, data + 1, cut - 1);
    text[cut - 1] = 0;
    ShardIndex idx;
    char err[SHARD_ERROR_MAX];
    (void)shard_index_header_count(text, cut - 1);
    if (shard_index_parse(&idx, text, cut - 1, "fuzz.idx", NULL, err) == 0)
        shard_index_clear(&idx);
    return 0;
}
