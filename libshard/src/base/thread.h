/*
 * The library's threads.
 */
#ifndef SHARD_BASE_THREAD_H
#define SHARD_BASE_THREAD_H

#include <pthread.h>

#include "base/attr.h"

/* pthread_create for a library thread: every signal blocked in it, as signals belong to
 * the application's threads (Python's main thread among them). 0 or pthread_create's code. */
SHARD_HIDDEN int shard_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif /* SHARD_BASE_THREAD_H */
