/*
 * Memory buffers as sources (memory.h).
 */
#include <stddef.h>

#include "base/error.h"
#include "source/memory.h"

/* A buffer is a mapping the caller made: source.c does all the reading. */
static const ShardSourceOps mem_ops = {.kind = "memory"};

int shard_source_memory(ShardSource **out, const void *data, size_t size, const char *url,
                        char *err)
{
    *out = NULL;
    ShardSource *s = shard_source_new(&mem_ops, url ? url : "memory");
    if (!s)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url ? url : "memory");
    s->map = data ? data : (const unsigned char *)""; /* an empty buffer is mapped too */
    s->size = (int64_t)size;
    *out = s;
    return 0;
}
