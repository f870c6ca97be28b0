/*
 * Exact duplicates among a pack plan's inputs (dedup.c): ShardPackSettings.dedup.
 */
#ifndef SHARD_PACK_DEDUP_H
#define SHARD_PACK_DEDUP_H

#include "base/attr.h"
#include "shard/pack.h"

/* Leaves out of p's inputs each one whose bytes equal an earlier input's (in the order they
 * were added), listing it in p->dups with the one kept; before keys are given and the
 * inputs shuffled. Local inputs only: a remote one is refused, naming it. 0, or an error
 * reported into err. */
SHARD_HIDDEN int shard_pack_dedup(ShardPackPlan *p, ShardError *err);

#endif /* SHARD_PACK_DEDUP_H */
