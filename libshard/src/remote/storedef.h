/*
 * A store's insides (store.c), shared by the stores of remote/: the row of operations each
 * kind of store fills (localstore.c, bucketstore.c, readonly.c) and the handle a URL
 * resolves to. A new kind of store is one more row: its file, and its line in store.c.
 */
#ifndef SHARD_REMOTE_STOREDEF_H
#define SHARD_REMOTE_STOREDEF_H

#include <stdint.h>

#include "remote/objectname.h"
#include "remote/storecan.h"
#include "shard/remote.h"

typedef struct ShardStore ShardStore;

/* One kind of store: what it can do and its operations (store.h says what each
 * guarantees). An operation a store cannot do is NULL: store.c refuses it, naming the URL
 * and the store. */
typedef struct ShardStoreRow {
    const char *name; /* as messages name it: "a folder", "a GCS bucket" */
    unsigned can;     /* SHARD_STORE_* */
    int network;      /* read through a ShardRemote, made with the store */
    /* SHARD_STORE_FILES: the kernel path of url (a pointer into it) */
    const char *(*path)(const char *url);
    int (*list)(const ShardStore *st, const char *dir, ShardListFn fn, void *cookie, char *err);
    int (*stat)(const ShardStore *st, const char *url, uint64_t *size, char *err);
    int (*remove)(const ShardStore *st, const char *url, char *err);
    int (*room)(const ShardStore *st, const char *dir, char *err);
    void (*tidy)(const ShardStore *st, const char *dir);
    int (*hold)(const ShardStore *st, const char *dir, int *fd, char *err);
} ShardStoreRow;

struct ShardStore {
    const ShardStoreRow *row;
    ShardRemote *remote; /* a reference for a row with network; else NULL */
};

#endif /* SHARD_REMOTE_STOREDEF_H */
