/*
 * A restore's replay (resume.c).
 */
#ifndef SHARD_READ_RESUME_H
#define SHARD_READ_RESUME_H

#include <stdint.h>

#include "base/attr.h"
#include "read/readerdef.h"

/* Plans epoch and moves the reader to position in it, as though it had yielded that many
 * samples: with every count known, the round-robin and the buffer are replayed on sample
 * identities and the buffered samples read by index; without, position samples are read
 * and dropped. The fetch threads start at the next pull. */
SHARD_HIDDEN int shard_reader_replay(ShardReader *r, uint64_t epoch, uint64_t position);

#endif /* SHARD_READ_RESUME_H */
