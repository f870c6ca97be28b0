/*
 * Resume: an epoch's order, the state that says how far it went, and the cut that carries
 * it onto any number of ranks and workers (formats/order.md). Files outside this folder
 * include this header alone. The reader (read/) plans an epoch's order with it
 * (shard_partition_auto, shard_order_new, shard_order_begin), restores one from a state's
 * cut (shard_cut_parse, shard_cut_of_runs, shard_runs_parse: read/restore.c), takes a state
 * (shard_order_cut_at, shard_cut_format, shard_state_seal: read/state.c) and merges states
 * (statemerge.c).
 *
 * DESIGN
 * - An epoch's order: the shards shuffled by (seed, epoch), their samples in sequence, cut
 *   into P canonical partitions of consecutive samples, lengths a sample apart
 *   (cut.c). Each partition is a deterministic stream (its shards read round-robin by
 *   the streams, then its own shuffle buffer), so its samples come in the same order
 *   whoever reads them.
 * - The line: with every count known the partitions laid end to end make a line [0, T'),
 *   point g of partition p being sample g - start(p) of p's stream. Consumer c (rank x
 *   workers + worker) reads what is left of its region [edge[c], edge[c + 1]); a fresh
 *   epoch's regions are the consumers' blocks of whole partitions (cut.c).
 * - A state is the cut: the spans of the line not yet delivered and the regions they are
 *   read in, with the settings that fix the order (compared at a restore, a difference
 *   refused by name) and a seal (statetext.c). Without counts it says how far each
 *   partition was delivered, in runs (cuttext.c).
 * - Spreading: a restore on the topology the state was taken on keeps its regions, so the
 *   epoch goes on as though never stopped; on another, what is left is spread in order
 *   over the new consumers, each rank the same count give or take a sample and each worker
 *   a split of its rank's (shard_cut_spread). A consumer then reads pieces, a partition's
 *   stream from one sample to another, replaying the partition to the piece's first sample
 *   (order.c; the replay is read/steps.c's). Equal mode adds the fewest repeats that give
 *   every rank as many batches (shard_cut_pads).
 * - Arithmetic and text only: nothing here reads a shard or waits. An order's positions
 *   (entered, taken) are atomics the reading thread sets and a state reads.
 */
#ifndef SHARD_RESUME_RESUME_H
#define SHARD_RESUME_RESUME_H

#include "resume/buckets.h"
#include "resume/cut.h"
#include "resume/order.h"
#include "resume/cuttext.h"
#include "resume/history.h"
#include "resume/statetext.h"

#endif /* SHARD_RESUME_RESUME_H */
