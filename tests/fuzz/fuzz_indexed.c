/* Reading by index: a tar and an .idx beside it, both from the input (the .idx first, up to
 * the first NUL byte; the tar after it). The index is parsed with the library's limits and
 * checked against the tar at open (its first and last headers, the archive's end); then
 * every sample is read by number, forwards and backwards, and listed headers only. A lying
 * index must give errors, never bytes of the wrong member or memory past the limits. The
 * .idx is a memfd, opened by its /proc path as any index file is. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <shard/shard.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_all(ShardFile *f)
{
    const ShardSampleView *v;
    uint64_t sum = 0;
    for (int n = 0; n < 1000 && shard_file_next(f, &v) == 0; n++)
        for (size_t k = 0; k < v->nfields; k++)
            sum += v->fields[k].size && v->fields[k].data ? v->fields[k].data[0] : 0;
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul)
        return 0;
    size_t ilen = (size_t)(nul - data);
    int index_fd = memfd_create("fuzz.idx", MFD_CLOEXEC);
    if (index_fd < 0 || pwrite(index_fd, data, ilen, 0) != (ssize_t)ilen)
        abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", index_fd);
    for (int headers_only = 0; headers_only < 2; headers_only++) {
        ShardFileSettings s;
        shard_file_default_settings(&s);
        s.index = path;
        s.headers_only = headers_only;
        ShardFile *f;
        ShardError err;
        if (shard_file_open_memory(&f, nul + 1, size - ilen - 1, "fuzz.tar", &s, &err) != 0)
            continue;
        int64_t n = shard_file_count(f);
        if (headers_only) {
            read_all(f);
        } else {
            for (int64_t i = n - 1; i >= 0 && n - i <= 64; i--) {
                const ShardSampleView *v;
                if (shard_file_seek(f, (uint64_t)i) == 0 && shard_file_next(f, &v) == 0 &&
                    v->nfields && v->fields[0].size && v->fields[0].data)
                    (void)v->fields[0].data[v->fields[0].size - 1];
            }
            if (n > 0 && shard_file_seek(f, 0) == 0)
                read_all(f);
        }
        (void)strlen(shard_file_error(f));
        shard_file_free(&f);
    }
    close(index_fd);
    return 0;
}
