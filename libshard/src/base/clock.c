/*
 * The clock stages are timed with (base/clock.h).
 */
#include <stdatomic.h>
#include <time.h>

#include "base/clock.h"

double shard_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t shard_nanoseconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void shard_add_seconds(_Atomic double *counter, double d)
{
    double v = atomic_load(counter);
    while (!atomic_compare_exchange_weak(counter, &v, v + d))
        ;
}

struct timespec shard_deadline(clockid_t clock, double seconds)
{
    struct timespec t;
    clock_gettime(clock, &t);
    long long ns = (long long)(seconds * 1e9) + t.tv_nsec;
    t.tv_sec += (time_t)(ns / 1000000000);
    t.tv_nsec = (long)(ns % 1000000000);
    return t;
}
