/* The zstd seek table decoder (formats/zstd.md): the input is the table, the object it ends
 * as large as the first 8 bytes say. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shard/common.h"
#include "tar/seektable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t file_size;
    memcpy(&file_size, data, 8);
    ShardSeekEntry *e = NULL;
    size_t n = 0;
    char err[SHARD_ERROR_MAX];
    if (shard_seek_table_decode(data + 8, size - 8, file_size, "fuzz.tar.zst", &e, &n, err) == 0)
        free(e);
    return 0;
}
