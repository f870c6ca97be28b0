/*
 * The clock stages are timed with.
 */
#ifndef SHARD_BASE_CLOCK_H
#define SHARD_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "base/attr.h"

/* Seconds from a monotonic clock (CLOCK_MONOTONIC). */
SHARD_HIDDEN double shard_seconds(void);
/* The same clock in nanoseconds. */
SHARD_HIDDEN uint64_t shard_nanoseconds(void);
/* The time on clock (CLOCK_MONOTONIC or CLOCK_REALTIME, as the condition variable waited
 * on uses) seconds from now: pthread_cond_timedwait's deadline. */
SHARD_HIDDEN struct timespec shard_deadline(clockid_t clock, double seconds);
/* Adds d to a counter of seconds other threads add to and read. */
SHARD_HIDDEN void shard_add_seconds(_Atomic double *counter, double d);

#endif /* SHARD_BASE_CLOCK_H */
