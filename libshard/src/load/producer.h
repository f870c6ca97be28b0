/*
 * The loader's producer thread (producer.c): it takes free batch slots, fills each with the
 * reader's samples and deals them to the decode pool; and the calls that start, stop and
 * take from it.
 */
#ifndef SHARD_LOAD_PRODUCER_H
#define SHARD_LOAD_PRODUCER_H

#include "base/attr.h"
#include "load/decodepool.h"
#include "load/loaderdef.h"

/* The decode pool's callback (cookie: the loader): a sample decoded, or failed; the slot
 * whose last sample it was goes to the ready queue. On the decoding thread. */
SHARD_HIDDEN void shard_loader_decoded(void *cookie, const ShardDecodeJob *j, int rc,
                                       const char *msg);
/* Starts the producer at the caller's next batch; 0 or an error with l->err. */
SHARD_HIDDEN int shard_loader_start_producer(ShardLoader *l);
/* Stops the producer and takes back every slot it filled: afterwards every slot is either
 * free or held by the caller, and no thread writes one. */
SHARD_HIDDEN void shard_loader_stop_producer(ShardLoader *l);
/* Receives one slot from the ready queue (waiting for it), parked for its turn. */
SHARD_HIDDEN void shard_loader_receive(ShardLoader *l);
/* As shard_loader_receive, waiting at most seconds (<= 0: as long as it takes): 0, or
 * SHARD_AGAIN when no batch came in that time. */
SHARD_HIDDEN int shard_loader_receive_for(ShardLoader *l, double seconds);

#endif /* SHARD_LOAD_PRODUCER_H */
