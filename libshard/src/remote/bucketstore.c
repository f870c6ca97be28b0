/*
 * Buckets as stores (bucketstore.h): gs:// and s3://, through the store's remote handle.
 * A prefix is no object: it needs no making, and goes with its last object.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "remote/bucketstore.h"
#include "remote/object.h"
#include "remote/upload.h"

static int bucket_list(const ShardStore *st, const char *dir, ShardListFn fn, void *cookie,
                       char *err)
{
    size_t n = strlen(dir);
    if (n && dir[n - 1] == '/')
        return shard_object_list(st->remote, dir, fn, cookie, err);
    char *prefix = NULL;
    if (asprintf(&prefix, "%s/", dir) < 0)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", dir);
    int rc = shard_object_list(st->remote, prefix, fn, cookie, err);
    free(prefix);
    return rc;
}

typedef struct Found {
    const char *url;
    uint64_t size;
    int found;
} Found;

static int exact(void *cookie, const char *url, uint64_t size)
{
    Found *f = cookie;
    if (!strcmp(url, f->url)) {
        f->size = size;
        f->found = 1;
    }
    return 0;
}

/* The listing of url's own name as a prefix: one request, as a HEAD would be, that also
 * tells an object from a prefix of others' names. */
static int bucket_stat(const ShardStore *st, const char *url, uint64_t *size, char *err)
{
    Found f = {url, 0, 0};
    int rc = shard_object_list(st->remote, url, exact, &f, err);
    if (!rc && !f.found)
        rc = shard_fail(err, SHARD_ERR_NOT_FOUND, "%s: no such object", url);
    *size = f.size;
    return rc;
}

static int bucket_remove(const ShardStore *st, const char *url, char *err)
{
    return shard_object_delete(st->remote, url, err);
}

static int bucket_room(const ShardStore *st, const char *dir, char *err)
{
    (void)st;
    return shard_object_writable(dir, err);
}

/* One row for both: their conventions differ in the requests (object.c), not here. */
const ShardStoreRow shard_store_bucket = {
    .name = "a bucket (gs://, s3://)",
    .can = SHARD_STORE_WRITE | SHARD_STORE_LIST | SHARD_STORE_BESIDE | SHARD_STORE_COSTLY,
    .network = 1,
    .list = bucket_list,
    .stat = bucket_stat,
    .remove = bucket_remove,
    .room = bucket_room,
};
