/*
 * Stores (store.h): the switch from a URL to its store's row, and the operations as every
 * caller calls them.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/url.h"
#include "remote/bucketstore.h"
#include "remote/handle.h"
#include "remote/hf.h"
#include "remote/localstore.h"
#include "remote/readonly.h"
#include "remote/store.h"
#include "remote/storedef.h"

/* The switch: the one place a URL's scheme picks its store. A new store is a row here. */
static const ShardStoreRow *row_of(const char *url)
{
    if (!strncmp(url, "gs://", 5) || !strncmp(url, "s3://", 5))
        return &shard_store_bucket;
    if (!strncmp(url, "hf://", 5))
        return &shard_store_hub;
    if (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8))
        return &shard_store_web;
    if (shard_url_is_command(url))
        return &shard_store_command;
    if (shard_url_file_path(url) || !shard_url_has_scheme(url))
        return &shard_store_folder;
    return NULL;
}

int shard_store_open(ShardStore **out, const char *url, ShardRemote *remote, char *err)
{
    *out = NULL;
    const ShardStoreRow *row = row_of(url);
    if (!row)
        return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                          "%s: unsupported scheme '%.*s' (libshard reads paths, file:///PATH, "
                          "pipe:, http://, https://, gs://, s3:// and hf://)",
                          url, (int)(strstr(url, "://") - url), url);
    ShardStore *st = calloc(1, sizeof *st);
    if (!st)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
    if (row->network && !(st->remote = shard_remote_resolve(remote, err))) {
        free(st);
        return SHARD_ERR_NOMEM; /* err says what (shard_remote_resolve) */
    }
    st->row = row;
    *out = st;
    return 0;
}

void shard_store_free(ShardStore **st)
{
    if (!st || !*st)
        return;
    shard_remote_put((*st)->remote);
    free(*st);
    *st = NULL;
}

/* What url's store (its row, NULL for none) can do. */
static unsigned can_of(const ShardStoreRow *row, const char *url)
{
    unsigned can = row ? row->can : 0;
    int prefix = row && (row->network ? shard_url_is_prefix(url) : (can & SHARD_STORE_LIST) != 0);
    return prefix ? can | SHARD_STORE_PREFIX : can;
}

unsigned shard_store_can(const char *url) { return can_of(row_of(url), url); }

const char *shard_store_name(const char *url)
{
    const ShardStoreRow *row = row_of(url);
    return row ? row->name : NULL;
}

ShardRemote *shard_store_remote(const ShardStore *st) { return st->remote; }

unsigned shard_store_bytes(const char *url, const char **path)
{
    const ShardStoreRow *row = row_of(url);
    *path = row && row->path ? row->path(url) : NULL;
    return can_of(row, url);
}

static int cannot(const ShardStore *st, const char *url, const char *what, char *err)
{
    return shard_fail(err, SHARD_ERR_UNSUPPORTED, "%s: cannot be %s: %s is read, never "
                      "written (write to a folder, gs:// or s3://)", url, what, st->row->name);
}

int shard_store_list(const ShardStore *st, const char *dir, ShardListFn fn, void *cookie,
                     char *err)
{
    return st->row->list ? st->row->list(st, dir, fn, cookie, err) : 1;
}

int shard_store_stat(const ShardStore *st, const char *url, uint64_t *size, char *err)
{
    *size = 0;
    if (!st->row->stat)
        return shard_fail(err, SHARD_ERR_UNSUPPORTED, "%s: %s tells no size before it is read",
                          url, st->row->name);
    return st->row->stat(st, url, size, err);
}

int shard_store_remove(const ShardStore *st, const char *url, char *err)
{
    return st->row->remove ? st->row->remove(st, url, err) : cannot(st, url, "removed", err);
}

int shard_store_room(const ShardStore *st, const char *dir, char *err)
{
    return st->row->room ? st->row->room(st, dir, err) : cannot(st, dir, "written into", err);
}

void shard_store_tidy(const ShardStore *st, const char *dir)
{
    if (st->row->tidy)
        st->row->tidy(st, dir);
}

int shard_store_hold(const ShardStore *st, const char *dir, int *fd, char *err)
{
    *fd = -1;
    return st->row->hold ? st->row->hold(st, dir, fd, err) : 0;
}

char *shard_store_identity(const char *url)
{
    const char *path;
    shard_store_bytes(url, &path);
    return path ? realpath(path, NULL) : strdup(url);
}
