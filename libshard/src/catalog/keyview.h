/*
 * A key list's view of a shard list (keyview.c): which samples of each shard a list of keys
 * chooses, found from the shards' indexes before any shard byte is read, so that a reader
 * plans the chosen samples alone (each shard's count is its chosen samples') and reads
 * only their bytes (each the sample's number in its shard).
 *
 * The list is a file of keys, one a line (a sample's __key__; blank lines and a line's
 * trailing '\r' ignored), held in memory while the view is made: about its size plus 9
 * bytes a key. The view then holds 8 bytes a chosen sample.
 */
#ifndef SHARD_CATALOG_KEYVIEW_H
#define SHARD_CATALOG_KEYVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "shard/list.h"
#include "shard/remote.h"

typedef struct ShardKeyView ShardKeyView;

/* The view of list l (borrowed while it is made) that the keys in the file at path choose,
 * each shard's index read through remote. @return 0, or an error with err (SHARD_ERROR_MAX
 * bytes) naming the file or the shard: unreadable, a shard without an index that names
 * its samples (a DALI v1.1 index), out of memory. */
SHARD_HIDDEN int shard_keyview_new(ShardKeyView **out, const ShardList *l, const char *path,
                                   ShardRemote *remote, char *err);
SHARD_HIDDEN void shard_keyview_free(ShardKeyView **v);

/* The samples of shard s chosen. */
SHARD_HIDDEN uint64_t shard_keyview_count(const ShardKeyView *v, size_t s);
/* The number in shard s of its j-th chosen sample (j < shard_keyview_count), in shard order. */
SHARD_HIDDEN uint64_t shard_keyview_sample(const ShardKeyView *v, size_t s, uint64_t j);

/* The keys given (each once), those chosen no sample, and the first few of those (i <
 * shard_keyview_missing_named), for messages. */
SHARD_HIDDEN uint64_t shard_keyview_keys(const ShardKeyView *v);
SHARD_HIDDEN uint64_t shard_keyview_missing(const ShardKeyView *v);
SHARD_HIDDEN size_t shard_keyview_missing_named(const ShardKeyView *v);
SHARD_HIDDEN const char *shard_keyview_missing_key(const ShardKeyView *v, size_t i);

/* What a state records of the view: "CHOSEN-FINGERPRINT", the chosen samples' count and
 * the first 16 hex digits of SHA-256 over each shard's place in the list and its chosen
 * sample numbers (the set chosen, whatever list of keys chose it). */
SHARD_HIDDEN const char *shard_keyview_id(const ShardKeyView *v);

#endif /* SHARD_CATALOG_KEYVIEW_H */
