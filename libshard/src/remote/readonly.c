/*
 * The read-only stores (readonly.h). Neither removes nor makes room: store.c refuses
 * those, naming the URL. Their bytes are read by the sources (remote objects, a command's
 * pipe).
 */
#include "base/error.h"
#include "remote/readonly.h"

/* A web server lists nothing it could be held to: refused, saying what to do instead. */
static int web_list(const ShardStore *st, const char *dir, ShardListFn fn, void *cookie,
                    char *err)
{
    (void)st, (void)fn, (void)cookie;
    return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                      "%s: plain HTTP has no listing: name the shards (a brace pattern or a "
                      "manifest), or use gs:// or s3://", dir);
}

const ShardStoreRow shard_store_web = {
    .name = "plain HTTP (http://, https://)",
    .can = SHARD_STORE_BESIDE | SHARD_STORE_COSTLY,
    .network = 1,
    .list = web_list,
};

const ShardStoreRow shard_store_command = {
    .name = "a command's output (pipe:)",
    .can = SHARD_STORE_PRIVATE | SHARD_STORE_COMMAND,
};
