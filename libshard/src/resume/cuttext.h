/*
 * The cut as text (cuttext.c; formats/order.md, section 4): with every count known the
 * line's cut, "left=A-B,...;edges=E,...", else the runs of partitions delivered. Not
 * installed.
 */
#ifndef SHARD_RESUME_CUTTEXT_H
#define SHARD_RESUME_CUTTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "resume/cut.h"

/* The cut as text: "left=A-B,C-D,...;edges=E,F,..." (the regions' inner edges). 0, or
 * SHARD_ERR_INVALID when it does not fit in cap bytes. */
SHARD_HIDDEN int shard_cut_format(const ShardCut *c, char *out, size_t cap);
/* Reads such a text into c (uninitialised) for a line of length points and world ranks of
 * workers each: 0, SHARD_ERR_INVALID with msg (SHARD_ERROR_MAX) saying where it is wrong,
 * SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_parse(ShardCut *c, const char *text, uint64_t length, int world,
                                 int workers, char *msg);

/* A cut without counts as text: runs of partitions, "A-B:d" (done), "A-B:0" (untouched), "A-B:N" (N
 * delivered of each), "A-B:?" (not said), comma-separated, from pos[0..p) of partitions
 * len[0..p) (an entry SHARD_COUNT_UNKNOWN where not known; len NULL: the values are draws,
 * as resampled mode's). 0, or SHARD_ERR_INVALID when it does not fit in cap bytes. */
SHARD_HIDDEN int shard_runs_format(const uint64_t *pos, const uint64_t *len, uint32_t p,
                                  char *out, size_t cap);

/* Reads a cut into pos[0..p), checking it against the partitions' lengths (as above): 0, or
 * SHARD_ERR_INVALID with msg saying where it is wrong. */
SHARD_HIDDEN int shard_runs_parse(const char *text, const uint64_t *len, uint32_t p,
                                 uint64_t *pos, char *msg);

/* Runs of partitions (lengths len, parts of them, length in all) delivered from their start,
 * as a v3 state with counts gives them, read into a line's cut c (uninitialised) in the
 * blocks of world ranks of workers each: 0, SHARD_ERR_INVALID with msg, SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_cut_of_runs(ShardCut *c, const char *runs, const uint64_t *len,
                                   uint32_t parts, uint64_t length, int world, int workers,
                                   char *msg);

#endif /* SHARD_RESUME_CUTTEXT_H */
