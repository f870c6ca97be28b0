/*
 * The pack plan's insides, shared by its files: the plan (packplan.c), the writing of one of its
 * shards (packshard.c) and a run's folder and manifest (output.c).
 */
#ifndef SHARD_PACK_PACKPLANDEF_H
#define SHARD_PACK_PACKPLANDEF_H

#include <stddef.h>
#include <stdint.h>

#include "remote/store.h"
#include "shard/pack.h"
#include "shard/remote.h"
#include "shard/writer.h"
#include "sink/lock.h"

typedef struct Input {
    ShardPackInput in; /* strings point at the copies below */
    char *path, *rel, *field, *class_name, *extra;
    char *key;
} Input;

/* An input left out as a duplicate (dedup.c): its strings, the kept input's path (the
 * kept Input's own copy) and their SHA-256 in hex. */
typedef struct ShardPackDup {
    Input dropped;
    const char *kept;
    int64_t kept_label; /* the kept input's label (-1: none), which its copy's gives way to */
    char sha256[65];
} ShardPackDup;

struct ShardPackPlan {
    ShardPackSettings s;
    char *pattern;
    Input *v;
    size_t n, cap;
    char **classes;
    size_t nclasses;
    size_t *first; /* nshards + 1 boundaries */
    size_t nshards;
    ShardStore *out;     /* where the pattern's shards and the pack's record go: made with
                            the plan */
    ShardRemote *remote; /* a reference: remote inputs are read and a bucket written through
                            it; the caller's, the output's, or made for the first remote
                            input; NULL while none needs one */
    int built;
    /* the output set's locks, from shard_pack_prepare on (output.c): the set's, alone for a
     * whole run, shared by a part set's runs; and a part's own */
    ShardSinkLock set_lock, part_lock;
    int locked;
    /* a resume (record.c): the shards an earlier run of this plan finished, kept (nshards
     * entries, url NULL for one to write; NULL before shard_pack_prepare), and whether its
     * record was found */
    ShardFileInfo *kept;
    int resumed;
    int complete;  /* a resume of a set its record says is whole, its manifest as written:
                      every shard kept, nothing to write */
    int recording; /* a marker in the record after each shard written (prepare, attach) */
    size_t replaced; /* files of an earlier set removed (manifests, shards, indexes) */
    ShardPackDup *dups; /* settings.dedup: the inputs left out, in input order */
    size_t ndups;
};

#endif /* SHARD_PACK_PACKPLANDEF_H */
