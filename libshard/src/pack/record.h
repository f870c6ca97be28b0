/*
 * A pack's record (record.c): what a run means to write and what it finished, beside its
 * output, so that a run killed at any point can be resumed exactly (shard/pack.h:
 * ShardPackSettings.resume).
 */
#ifndef SHARD_PACK_RECORD_H
#define SHARD_PACK_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "shard/pack.h"
#include "pack/listing.h"
#include "shard/writer.h"

/* The record's folder for p's set: D/.STEM.pack/ beside the pattern (a bucket's prefix
 * alike), with the trailing slash; malloc'd, NULL when out of memory. */
SHARD_HIDDEN char *shard_pack_record_dir(const ShardPackPlan *p);

/* The record's folder dir, when local, as ours or refused: a folder (not a link to one), every
 * name in it a regular file the record writes (its plans, markers, their temporaries); a
 * link, FIFO, device or foreign file at its place or in it refused, naming it. *fd receives
 * the folder opened (O_NOFOLLOW), the caller's to close, or -1 when there is none (a bucket:
 * its names are checked as listed). 0, or an error with msg (SHARD_ERROR_MAX bytes). */
SHARD_HIDDEN int shard_pack_record_folder(const char *dir, int *fd, char *msg);

/* Checks p's record folder (shard_pack_record_folder) and removes the temporaries killed
 * runs left in it, before anything reads or writes the record. 0, or an error with msg. */
SHARD_HIDDEN int shard_pack_record_check(const ShardPackPlan *p, char *msg);

/* Removes the earlier record of p's set: all of it for a whole run; for a part, the whole
 * run's plan, this part's plan and the markers of this part's shards; only names the record
 * writes, relative to its folder opened without following links (a foreign name refused, as
 * shard_pack_record_folder). 0, or an error with msg (SHARD_ERROR_MAX bytes). */
SHARD_HIDDEN int shard_pack_record_clear(ShardPackPlan *p, char *msg);

/* Writes p's plan into the record (before any shard). 0, or an error with msg. */
SHARD_HIDDEN int shard_pack_record_start(ShardPackPlan *p, char *msg);

/* Reads the record of an earlier run into p: *found 0 when there is none (nothing kept);
 * else its plan compared with p's (a difference refused, naming it: SHARD_ERR_STATE) and
 * the shards it finished that the store still holds at their recorded sizes, with their
 * indexes, kept (p->kept). 0, or an error with msg. */
SHARD_HIDDEN int shard_pack_record_resume(ShardPackPlan *p, int *found, char *msg);

/* Records shard j of p as finished, its manifest entry info in the marker's name (written
 * after the shard, so a marker means a complete shard). 0, or an error with msg. */
SHARD_HIDDEN int shard_pack_record_done(const ShardPackPlan *p, size_t j,
                                        const ShardFileInfo *info, char *msg);

#endif /* SHARD_PACK_RECORD_H */
