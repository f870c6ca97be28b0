/*
 * The library's threads.
 */
#ifndef SHARD_BASE_THREAD_H
#define SHARD_BASE_THREAD_H

#include <pthread.h>
#include <stddef.h>

#include "base/attr.h"

/* pthread_create for a library thread: every signal blocked in it, as signals belong to
 * the application's threads (Python's main thread among them). 0 or pthread_create's code. */
SHARD_HIDDEN int shard_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* fn(arg) on n threads in all, the calling one among them (n - 1 started; alone when none
 * can be, or n is 0 or 1), every one joined before it returns: fn takes its work from arg
 * until none is left. */
SHARD_HIDDEN void shard_threads_run(void *(*fn)(void *), void *arg, size_t n);

#endif /* SHARD_BASE_THREAD_H */
