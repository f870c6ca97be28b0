/*
 * A whole file or object written through a sink (shard/writer.h: shard_put).
 */
#include "base/error.h"
#include "shard/writer.h"
#include "sink/sink.h"

int shard_put(const char *url, const void *data, size_t n, ShardRemote *remote, ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    ShardSinkSettings s = {.sync = 1, .remote = remote};
    int rc = shard_sink_put(url, data, n, &s, msg);
    return rc ? shard_report(err, rc, msg) : 0;
}
