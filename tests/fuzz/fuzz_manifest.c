/* The manifest parser (formats/manifest.md) and a wids descriptor's fields. */
#include <stdint.h>
#include <stdlib.h>

#include <shard/shard.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ShardManifest *m;
    ShardError err;
    if (shard_manifest_parse(&m, (const char *)data, size, "dir/fuzz.json", &err) == 0) {
        for (size_t i = 0; i < shard_manifest_count(m); i++)
            (void)shard_manifest_shard(m, i)->url;
        shard_manifest_free(&m);
    }
    return 0;
}
