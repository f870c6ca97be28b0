/* The tar and sample reader on any bytes: plain, gzip or zstd tars (libarchive finds the
 * filter), grouping, escapes in messages, with the library's own limits (256 MiB a member
 * and a sample, 100000 members a sample): a small compressed or sparse input may declare
 * samples of several large members, which the limits must hold; then headers only. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <shard/shard.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ShardFileSettings s;
    shard_file_default_settings(&s);
    s.lowercase = size & 1;
    s.headers_only = (size >> 1) & 1;
    ShardFile *f;
    ShardError err;
    if (shard_file_open_memory(&f, data, size, "fuzz.tar", &s, &err) != 0)
        return 0;
    const ShardSampleView *v;
    uint64_t sum = 0;
    for (int n = 0; n < 10000 && shard_file_next(f, &v) == 0; n++)
        for (size_t k = 0; k < v->nfields; k++)
            sum += v->fields[k].size && v->fields[k].data ? v->fields[k].data[v->fields[k].size - 1]
                                                          : 0;
    (void)sum;
    (void)strlen(shard_file_error(f));
    shard_file_free(&f);
    return 0;
}
