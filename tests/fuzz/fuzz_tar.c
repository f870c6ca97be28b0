/* The tar and sample reader on any bytes: plain, gzip or zstd tars (libarchive finds the
 * filter), grouping, escapes in messages; then headers only. Built twice: this target with
 * limits of its own (a member of 1 MiB, a sample of 2 MiB, 1000 members), so that an input
 * declaring large members is refused at once and the fuzzer runs thousands a second, and
 * fuzz_tarlimits (FUZZ_REAL_LIMITS) with the library's (256 MiB a member and a sample,
 * 100000 members a sample), which a small compressed or sparse input may declare. */
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
#ifndef FUZZ_REAL_LIMITS
    s.max_member_size = 1 << 20;
    s.max_sample_size = 2 << 20;
    s.max_fields = 1000;
#endif
    ShardFile *f;
    ShardError err;
    if (shard_file_open_memory(&f, data, size, "fuzz.tar", &s, &err) != 0)
        return 0;
    const ShardSampleView *v;
    uint64_t sum = 0;
#ifdef FUZZ_REAL_LIMITS
    const int most = 10000;
#else
    const int most = 64; /* a few samples show the grouping; the rest is the same work */
#endif
    for (int n = 0; n < most && shard_file_next(f, &v) == 0; n++)
        for (size_t k = 0; k < v->nfields; k++)
            sum += v->fields[k].size && v->fields[k].data ? v->fields[k].data[v->fields[k].size - 1]
                                                          : 0;
    (void)sum;
    (void)strlen(shard_file_error(f));
    shard_file_free(&f);
    return 0;
}
