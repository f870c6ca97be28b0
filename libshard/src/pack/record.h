/*
 * A pack's record (record.c): what a run means to write and what it finished, beside its
 * output, so that a run killed at any point can be resumed exactly (shard/pack.h:
 * ShardPackSettings.resume), and a finished set is known as finished; recordresume.c reads
 * it back.
 */
#ifndef SHARD_PACK_RECORD_H
#define SHARD_PACK_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "base/buf.h"
#include "pack/listing.h"
#include "shard/pack.h"
#include "shard/writer.h"

/* The plan's last line: a plan without it was cut on its way up (a store that keeps what came
 * of a killed upload, as s3rver does), before any shard of its run was written. */
#define SHARD_PACK_PLAN_END "end\n"

/* The record's folder for p's set: D/.STEM.pack/ beside the pattern (a bucket's prefix
 * alike), with the trailing slash; malloc'd, NULL when out of memory. */
SHARD_HIDDEN char *shard_pack_record_dir(const ShardPackPlan *p);

/* The record's folder dir (in p's output store), held as ours or refused: a folder (not a
 * link to one), every name in it a regular file the record writes (its plans, markers,
 * their temporaries); a link, FIFO, device or foreign file at its place or in it refused,
 * naming it. *fd receives the folder held (shard_store_hold), the caller's to close, or -1
 * when there is none (a bucket: its names are checked as listed). 0, or an error with msg
 * (SHARD_ERROR_MAX bytes). */
SHARD_HIDDEN int shard_pack_record_folder(const ShardPackPlan *p, const char *dir, int *fd,
                                          char *msg);

/* Checks p's record folder (shard_pack_record_folder) and removes the temporaries killed
 * runs left in it, before anything reads or writes the record. 0, or an error with msg. */
SHARD_HIDDEN int shard_pack_record_check(const ShardPackPlan *p, char *msg);

/* Removes the earlier record of p's set: all of it for a whole run; for a part, the whole
 * run's plan, this part's plan and the markers of this part's shards; only names the record
 * writes, relative to its folder opened without following links (a foreign name refused, as
 * shard_pack_record_folder). 0, or an error with msg (SHARD_ERROR_MAX bytes). */
SHARD_HIDDEN int shard_pack_record_clear(const ShardPackPlan *p, char *msg);

/* The record's object name (in dir, which ends in '/') of p's plan; malloc'd, NULL when out
 * of memory. */
SHARD_HIDDEN char *shard_pack_record_plan_url(const ShardPackPlan *p, const char *dir);
/* p's plan as the record keeps it, appended to b: a line per setting, a line per shard of
 * the part, the end. 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_pack_record_plan_text(const ShardPackPlan *p, ShardBuf *b);
/* A marker's name parsed: shard j and its manifest entry (url unset); 0, or -1 for a name
 * that is not a marker. */
SHARD_HIDDEN int shard_pack_record_marker(const char *name, unsigned long long *j,
                                          ShardFileInfo *info);
/* The name of the marker that says p's set (or part) is complete, its manifest's SHA-256 in
 * it; malloc'd, NULL when out of memory. */
SHARD_HIDDEN char *shard_pack_record_done_name(const ShardPackPlan *p, const char *sha256);
/* Writes p's plan into the record (before any shard). 0, or an error with msg. */
SHARD_HIDDEN int shard_pack_record_start(const ShardPackPlan *p, char *msg);

/* The SHA-256 (hex) of the object at url (a manifest, at most 256 MiB), "" when it cannot
 * be read. */
SHARD_HIDDEN void shard_pack_record_sha256(const ShardPackPlan *p, const char *url, char hex[65]);

/* p's set (or part) is whole, its manifest written at manifest_path: the markers go and a
 * completion marker names the manifest's SHA-256, the plans stay (a --resume of a finished
 * set then does nothing: shard_pack_record_complete). 0, or an error with msg. */
SHARD_HIDDEN int shard_pack_record_finish(const ShardPackPlan *p, const char *manifest_path,
                                          char *msg);

/* Records shard j of p as finished, its manifest entry info in the marker's name (written
 * after the shard, so a marker means a complete shard). 0, or an error with msg. */
SHARD_HIDDEN int shard_pack_record_done(const ShardPackPlan *p, size_t j,
                                        const ShardFileInfo *info, char *msg);

#endif /* SHARD_PACK_RECORD_H */
