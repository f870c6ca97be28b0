/*
 * The library's threads (base/thread.h).
 */
#include <signal.h>
#include <stdlib.h>

#include "base/thread.h"

int shard_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

void shard_threads_run(void *(*fn)(void *), void *arg, size_t n)
{
    pthread_t *t = n > 1 ? calloc(n - 1, sizeof *t) : NULL;
    size_t nt = 0;
    while (t && nt + 1 < n && shard_thread_start(&t[nt], fn, arg) == 0)
        nt++;
    fn(arg); /* this thread too (alone when no thread could start) */
    while (nt)
        pthread_join(t[--nt], NULL);
    free(t);
}
