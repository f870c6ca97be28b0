/*
 * Traces (trace.h). One mutex around an append: spans come at most once per decoded sample
 * and once per shard or batch, far below where it would show.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/trace.h"

typedef struct Span {
    const char *name;
    double start, end;
    uint64_t items;
    int tid;
} Span;

#define MAX_THREADS 256

struct ShardTrace {
    pthread_mutex_t lock;
    Span *v;
    size_t n, cap;
    uint64_t dropped;
    double origin; /* when the trace began: timestamps count from it */
    struct {
        int tid;
        char name[16];
    } threads[MAX_THREADS];
    size_t nthreads;
};

ShardTrace *shard_trace_new(size_t max_events)
{
    ShardTrace *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->cap = max_events ? max_events : 1;
    t->v = malloc(t->cap * sizeof *t->v);
    if (!t->v) {
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->origin = shard_seconds();
    return t;
}

void shard_trace_set_origin(ShardTrace *t, double origin) { t->origin = origin; }

void shard_trace_span(ShardTrace *t, const char *name, double start, double end, uint64_t items)
{
    if (!t)
        return;
    int tid = (int)syscall(SYS_gettid);
    pthread_mutex_lock(&t->lock);
    size_t k = 0;
    while (k < t->nthreads && t->threads[k].tid != tid)
        k++;
    if (k == t->nthreads && k < MAX_THREADS) { /* first span of this thread: its name */
        t->threads[k].tid = tid;
        if (pthread_getname_np(pthread_self(), t->threads[k].name, sizeof t->threads[k].name))
            snprintf(t->threads[k].name, sizeof t->threads[k].name, "thread");
        t->nthreads++;
    }
    if (t->n < t->cap)
        t->v[t->n++] = (Span){name, start, end, items, tid};
    else
        t->dropped++;
    pthread_mutex_unlock(&t->lock);
}

int shard_trace_render(ShardTrace *t, ShardBuf *out)
{
    ShardBuf *f = out;
    int bad = 0;
    int pid = (int)getpid();
    pthread_mutex_lock(&t->lock);
    bad |= shard_buf_printf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    bad |= shard_buf_printf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, "
               "\"args\": {\"name\": \"libshard\"}}", pid);
    for (size_t k = 0; k < t->nthreads; k++) {
        char name[64]; /* thread names are ours, but keep the JSON valid whatever they hold */
        size_t o = 0;
        for (const char *c = t->threads[k].name; *c && o < sizeof name - 1; c++)
            name[o++] = (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) ? '_' : *c;
        name[o] = 0;
        bad |= shard_buf_printf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                   "\"args\": {\"name\": \"%s\"}}", pid, t->threads[k].tid, name);
    }
    for (size_t i = 0; i < t->n; i++) {
        const Span *s = &t->v[i];
        bad |= shard_buf_printf(f, ",\n{\"name\": \"%s\", \"cat\": \"libshard\", \"ph\": \"X\", \"pid\": %d, "
                   "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"samples\": %llu}}",
                s->name, pid, s->tid, (s->start - t->origin) * 1e6, (s->end - s->start) * 1e6,
                (unsigned long long)s->items);
    }
    bad |= shard_buf_printf(f, "\n], \"otherData\": {\"dropped_spans\": %llu}}\n", (unsigned long long)t->dropped);
    pthread_mutex_unlock(&t->lock);
    return bad ? SHARD_ERR_NOMEM : 0;
}

void shard_trace_free(ShardTrace **pt)
{
    if (!pt || !*pt)
        return;
    ShardTrace *t = *pt;
    pthread_mutex_destroy(&t->lock);
    free(t->v);
    free(t);
    *pt = NULL;
}
