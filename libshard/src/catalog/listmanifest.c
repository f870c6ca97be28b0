/*
 * A list written down as a manifest (list.h's shard_list_manifest_of): every shard as the
 * list names it (a listed one pinned where its store pins), with its count, so that whoever
 * reads the manifest lists nothing again and reads no index for counts.
 */
#include "base/error.h"
#include "shard/list.h"
#include "shard/manifest.h"

int shard_list_manifest_of(const ShardList *l, const char *name, ShardManifest **out,
                           ShardError *err)
{
    *out = NULL;
    ShardManifest *m;
    if (shard_manifest_new(&m, name))
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < shard_list_count(l); i++) {
        const ShardListEntry *e = shard_list_entry(l, i);
        if (e->nsamples == SHARD_COUNT_UNKNOWN) {
            char msg[SHARD_ERROR_MAX];
            shard_manifest_free(&m);
            return shard_report(err, shard_fail(msg, SHARD_ERR_UNSUPPORTED, "%s: no sample "
                                                "count (no manifest lists it and no .idx is "
                                                "beside it: shardcat index makes one)", e->url),
                                msg);
        }
        ShardFileInfo fi = e->info ? *e->info : (ShardFileInfo){0};
        fi.url = e->url;
        fi.nsamples = e->nsamples;
        if (shard_manifest_add(m, &fi)) {
            shard_manifest_free(&m);
            return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
        }
    }
    *out = m;
    return 0;
}
