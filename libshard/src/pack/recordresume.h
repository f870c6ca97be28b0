/*
 * A pack's record read back (recordresume.c): what an earlier run of the same plan finished,
 * kept by a resume; a finished set known as finished.
 */
#ifndef SHARD_PACK_RECORDRESUME_H
#define SHARD_PACK_RECORDRESUME_H

#include "base/attr.h"
#include "shard/pack.h"

/* Whether the record says p's set (or part) is complete and its manifest (manifest_path)
 * is the one the completing run wrote: *complete 1, and each shard kept (p->kept) as the
 * manifest lists it. A record whose plan differs from p's is refused, naming the change
 * (SHARD_ERR_STATE), as for resume. 0, or an error with msg. */
SHARD_HIDDEN int shard_pack_record_complete(ShardPackPlan *p, const char *manifest_path,
                                            int *complete, char *msg);

/* Reads the record of an earlier run into p: *found 0 when there is none (nothing kept);
 * else its plan compared with p's (a difference refused, naming it: SHARD_ERR_STATE) and
 * the shards it finished that the store still holds at their recorded sizes, with their
 * indexes, kept (p->kept). 0, or an error with msg. */
SHARD_HIDDEN int shard_pack_record_resume(ShardPackPlan *p, int *found, char *msg);

#endif /* SHARD_PACK_RECORDRESUME_H */
