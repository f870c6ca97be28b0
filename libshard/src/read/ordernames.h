/*
 * An order_only reader's hidden calls (ordernames.c; its public ones are in shard/reader.h):
 * naming a reading of an epoch's history, on the topology it ran on.
 */
#ifndef SHARD_READ_ORDERNAMES_H
#define SHARD_READ_ORDERNAMES_H

#include <stdint.h>

#include "base/attr.h"
#include "resume/resume.h"
#include "shard/reader.h"

/* The readings of the epoch a restored state left (the reader's order's: empty when it ran
 * on one topology), with the state's epoch, partitions, total and step; 0 from an epoch's
 * start (set_epoch). */
SHARD_HIDDEN const ShardHistory *shard_reader_readings(const ShardReader *r, uint64_t *epoch,
                                                       uint32_t *parts, uint64_t *total);

/* Makes an order_only reader name consumer (rank, worker) of reading g of epoch e (on g's
 * topology; g->cut, whose regions are for the topology of the reading before it, `before`,
 * spread over g's), with the state's partitions and total (0, 0: the epoch's own, as a
 * fresh plan chooses them). Its positions then start at shard_reader_reading_base. */
SHARD_HIDDEN int shard_reader_name_reading(ShardReader *r, uint64_t e, uint32_t parts,
                                           uint64_t total, const ShardReading *g,
                                           const ShardReading *before, int rank, int worker);

/* Where the reading named begins in its consumer's positions, and its samples from there
 * (equal mode's repeats included), into *base and *len. */
SHARD_HIDDEN void shard_reader_reading_span(const ShardReader *r, uint64_t *base, uint64_t *len);

/* Records in the named order the rank's steps before its reading began and the epoch's
 * readings v[0..n) (NULL: none), so that a state taken from it is the job's. 0 or
 * SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_reader_note_reading(ShardReader *r, uint64_t step0, const ShardReading *v,
                                           size_t n);

/* A bucketed reader's batches in the reading named (aspect_buckets; with its partials, in
 * equal mode its share) into *n: 0, or an error in the reader's message. A walk over the
 * epoch's line on identities. */
SHARD_HIDDEN int shard_reader_named_batches(ShardReader *r, uint64_t *n);

/* The order the reader names (borrowed). */
SHARD_HIDDEN const struct ShardOrder *shard_reader_order_of(const ShardReader *r);

#endif /* SHARD_READ_ORDERNAMES_H */
