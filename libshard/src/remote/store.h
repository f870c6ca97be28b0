/*
 * Stores (store.c): the one place a path or URL is told apart. A URL resolves to a store
 * once, at open: a local folder (localstore.c), a bucket (bucketstore.c over gcs.c and s3.c),
 * a web server (http://, https://) or a command's output (pipe:COMMAND) (readonly.c). Each
 * store answers the same operations; a caller calls them and never asks where the bytes
 * live. Reading and writing an object's bytes are the sources' and sinks' (source/open.h,
 * sink/sink.h), which open them through the store's row.
 *
 * A new kind of store is one file here (its operations, a ShardStoreRow: storedef.h) and
 * one row in store.c's switch.
 */
#ifndef SHARD_REMOTE_STORE_H
#define SHARD_REMOTE_STORE_H

#include <stdint.h>

#include "base/attr.h"
#include "shard/remote.h"
#include "remote/objectname.h"
#include "remote/storecan.h"

typedef struct ShardStore ShardStore;

/*
 * The store url names, resolved once: the row its scheme picks and, for a store read over
 * the network, the remote handle (a reference on remote, borrowed; NULL: one with the
 * defaults, made here).
 * @param out receives the store, owned by the caller (shard_store_free)
 * @return 0; SHARD_ERR_UNSUPPORTED naming the url and its scheme; SHARD_ERR_NOMEM
 */
SHARD_HIDDEN int shard_store_open(ShardStore **out, const char *url, ShardRemote *remote,
                                  char *err);
/* Frees *st and drops its remote reference; *st becomes NULL. Accepts NULL and *st NULL. */
SHARD_HIDDEN void shard_store_free(ShardStore **st);

/* What the store url names can do (SHARD_STORE_*), asked without opening it; 0 for a
 * scheme no store reads. */
SHARD_HIDDEN unsigned shard_store_can(const char *url);
/* The name of url's store as messages say it ("a folder", "the Hugging Face Hub (hf://, read
 * only)"), NULL for none. */
SHARD_HIDDEN const char *shard_store_name(const char *url);
/* The remote handle the store's objects are read and written through (borrowed, as long
 * as st lives); NULL for a store that needs none (a folder, a command). */
SHARD_HIDDEN ShardRemote *shard_store_remote(const ShardStore *st);
/* How url's bytes travel, for the switches alone (source/open.c, sink/sink.c): what its
 * store can do (with SHARD_STORE_FILES or SHARD_STORE_COMMAND), and into *path the kernel
 * path of a folder store's url (a pointer into url: a path, or file:///PATH's), else NULL. */
SHARD_HIDDEN unsigned shard_store_bytes(const char *url, const char **path);

/* The operations. url and dir name objects of st's kind (a folder's file, a bucket's
 * object); err (SHARD_ERROR_MAX bytes) names the URL. A read-only store (http(s), pipe:)
 * refuses remove and room with SHARD_ERR_UNSUPPORTED, naming the URL. */

/* The objects in the folder or under the prefix dir (with or without its '/'; hidden files
 * left out), each handed to fn in name order with its size and its full name (a folder's as a
 * path, file:// taken off; a bucket's as a URL). Not atomic: a listing sees
 * what was there while it ran. @return 0; 1 when dir names nothing (no such folder, a
 * store that lists nothing); fn's error, or another naming dir */
SHARD_HIDDEN int shard_store_list(const ShardStore *st, const char *dir, ShardListFn fn,
                                  void *cookie, char *err);
/* url's size. A folder's entry counts only as a regular file of its own: a link is not
 * followed. @return 0; SHARD_ERR_NOT_FOUND when there is none (err says so); another code */
SHARD_HIDDEN int shard_store_stat(const ShardStore *st, const char *url, uint64_t *size,
                                  char *err);
/* Removes url; one that does not exist is no error. Atomic: the object is there whole or
 * gone. */
SHARD_HIDDEN int shard_store_remove(const ShardStore *st, const char *url, char *err);
/* Makes dir a place objects can be put in: a folder made (one there kept; a link or
 * anything else at its name refused, not followed); a bucket's prefix needs nothing. */
SHARD_HIDDEN int shard_store_room(const ShardStore *st, const char *dir, char *err);
/* Removes dir when it holds nothing (a folder); a prefix goes with its last object. */
SHARD_HIDDEN void shard_store_tidy(const ShardStore *st, const char *dir);
/* Holds dir for removals by name that reach nothing outside it: *fd a descriptor of the
 * folder opened without following a link (the caller closes it), or -1 where names cannot
 * be links (a bucket) or dir does not exist. A link or another kind of file at dir is
 * refused, naming it. */
SHARD_HIDDEN int shard_store_hold(const ShardStore *st, const char *dir, int *fd, char *err);
/* What names url's object however it is written: a folder's file by its real path (one
 * file named two ways is one; NULL with errno when it cannot be resolved), any other URL
 * as given (NULL when out of memory). malloc'd. */
SHARD_HIDDEN char *shard_store_identity(const char *url);

#endif /* SHARD_REMOTE_STORE_H */
