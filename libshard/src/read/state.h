/*
 * The reader's state as text (state.c): where it stands and every setting that fixes the
 * order of the rest of the epoch, so that a state restored where it does not fit is
 * refused, naming what differs.
 */
#ifndef SHARD_READ_STATE_H
#define SHARD_READ_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "resume/resume.h"
#include "read/readerdef.h"

/* Fingerprints the reader's shard list (URLs, counts, sources) and weights, once at open.
 * 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_reader_fingerprint(ShardReader *r);
/* The aspect buckets' fingerprint (r->bucket_plan's sizes and batch), for states: after
 * shard_reader_fingerprint. 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_reader_fingerprint_buckets(ShardReader *r);

/* The job's state, this consumer (r's) at position in order o (the loader's batches may
 * lag the reader's epoch), every other consumer in step by units of unit samples, into buf
 * (size bytes). 0, SHARD_ERR_INVALID when it does not fit, SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_reader_state_at(const ShardReader *r, const ShardOrder *o,
                                       uint64_t position, uint64_t unit, char *buf, size_t size);

/* What a state says, once checked. */
typedef struct ShardStateIn {
    uint64_t epoch, seed, total, delivered, taken;
    uint64_t since; /* resampled: samples delivered since its draws' start */
    uint32_t parts;
    int world, workers; /* the topology it was taken on */
    const char *cut;  /* into the state's text: a line's cut, "left=...;edges=...", or NULL */
    const char *runs; /* into it: the cut as runs of partitions (v3's, v4's "parts="), or NULL */
    uint64_t step;    /* the rank's steps of the epoch delivered (0 where not said) */
    const char *resumes; /* into it: the epoch's readings on other topologies, or NULL */
    char *text;      /* the state without its checksum, which cut points into: the caller
                        frees it once the restore is done */
} ShardStateIn;

/* Reads state and checks it against r's settings: its checksum, its numbers against what a
 * job can have, every difference (and every compared setting it does not say) named in
 * r->err (SHARD_ERR_INVALID). A reader that drew its own seed takes the state's. On success
 * in->text is the caller's to free. */
SHARD_HIDDEN int shard_reader_state_check(ShardReader *r, const char *state, ShardStateIn *in);

#endif /* SHARD_READ_STATE_H */
