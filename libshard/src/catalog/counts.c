/*
 * The sample counts of a list's shards (counts.h).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/thread.h"
#include "catalog/counts.h"
#include "catalog/indexcache.h"
#include "catalog/listdef.h"
#include "remote/store.h"
#include "source/open.h"
#include "tar/idx.h"

/* The sample count the index beside a shard promises, or SHARD_COUNT_UNKNOWN. Only the
 * index's first line is read. */
static uint64_t index_count(const char *url, ShardRemote *remote)
{
    if (!(shard_store_can(url) & SHARD_STORE_BESIDE))
        return SHARD_COUNT_UNKNOWN;
    char *ip = shard_index_path(url);
    ShardSource *s = NULL;
    char err[SHARD_ERROR_MAX];
    uint64_t n = SHARD_COUNT_UNKNOWN;
    if (ip && shard_source_open(&s, ip, remote, 0, err) == 0) {
        ShardBuf tmp = {0};
        const void *head = NULL;
        ssize_t len = 0;
        if (s->size >= 0 && shard_source_seekable(s)) {
            len = s->size < 64 ? (ssize_t)s->size : 64;
            head = shard_source_view(s, 0, (size_t)len, &tmp);
        } else {
            len = shard_source_read(s, &head);
        }
        int64_t c = head && len > 0 ? shard_index_header_count(head, (size_t)len) : -1;
        if (c >= 0)
            n = (uint64_t)c;
        shard_buf_free(&tmp);
        shard_source_put(s);
    }
    free(ip);
    return n;
}

#define COUNT_THREADS 16

typedef struct Counter {
    ShardList *l;
    const ShardListSettings *s;
    char *dir;               /* the index cache (build_indexes) */
    atomic_size_t next;      /* the next entry to look at */
    atomic_size_t made;      /* indexes looked for in the cache or made so far */
    size_t tomake;           /* shards without a count, to look for or make */
    pthread_mutex_t mu;      /* the first error, the progress line */
    int rc;
    char err[SHARD_ERROR_MAX];
    double shown;            /* when the progress line was last drawn, 0: never */
} Counter;

static void progress(Counter *c, int last)
{
    if (!c->s->progress || !c->tomake || !isatty(2))
        return;
    double now = shard_seconds();
    pthread_mutex_lock(&c->mu);
    if (last ? c->shown > 0 : now - c->shown >= 0.2) {
        fprintf(stderr, "\rlibshard: indexing shards that have no index: %zu of %zu%s",
                atomic_load(&c->made), c->tomake, last ? "\n" : "");
        c->shown = now;
    }
    pthread_mutex_unlock(&c->mu);
}

/* Whether an index of url is a walk over its headers: an uncompressed tar, local or remote
 * (a remote one's bytes streamed once per machine, its index then kept in the cache), so
 * that the plan is the same wherever the bytes live (formats/order.md). */
static int cheap(const char *url)
{
    size_t n = strcspn(url, "?#"); /* a signed URL's query is no part of its name */
    return (shard_store_can(url) & SHARD_STORE_BESIDE) && n > 4 &&
           !strncasecmp(url + n - 4, ".tar", 4);
}

int shard_list_makes_for(const ShardListSettings *s, const char *url)
{
    return s->build_indexes && (s->build_indexes != SHARD_INDEXES_WHERE_CHEAP || cheap(url));
}

/* Whether entry e is made an index for, where it has none. */
static int to_make(const ShardListSettings *s, const ShardListEntry *e)
{
    return s->build_indexes != SHARD_INDEXES_WHERE_CHEAP || cheap(e->url);
}

/* Entry e's count: from its index's first line, else (build_indexes) its index made or
 * found in the cache. */
static void count_one(Counter *c, ShardListEntry *e)
{
    uint64_t beside = index_count(e->url, c->s->remote);
    if (!e->info)
        e->nsamples = beside;
    if (e->info && beside != SHARD_COUNT_UNKNOWN && beside != e->nsamples) {
        pthread_mutex_lock(&c->mu); /* the manifest and the index disagree: one is wrong */
        if (!c->rc)
            c->rc = shard_fail(c->err, SHARD_ERR_FORMAT,
                               "%s: its manifest says %llu samples and its index %llu (one of "
                               "them is out of date: 'shardcat verify' says which)", e->url,
                               (unsigned long long)e->nsamples, (unsigned long long)beside);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    if (beside != SHARD_COUNT_UNKNOWN || !c->dir || !to_make(c->s, e))
        return;
    char err[SHARD_ERROR_MAX], *path;
    uint64_t n;
    int built;
    int rc = shard_index_cached(c->dir, e->url, c->s->remote, &path, &n, &built, err);
    atomic_fetch_add(&c->made, 1);
    pthread_mutex_lock(&c->mu);
    if (rc && c->s->build_indexes == SHARD_INDEXES_WHERE_CHEAP) {
        /* made where cheap, not needed: the reading says what is wrong with the shard */
    } else if (rc && !c->rc) {
        c->rc = rc;
        snprintf(c->err, sizeof c->err, "%s", err);
    } else if (!rc && e->info && e->nsamples != n) {
        c->rc = shard_fail(c->err, SHARD_ERR_FORMAT,
                           "%s: has %llu samples, and its manifest says %llu", e->url,
                           (unsigned long long)n, (unsigned long long)e->nsamples);
        free(path);
    } else if (!rc) {
        e->nsamples = n;
        e->index = path;
        *(built ? &c->l->built : &c->l->cached) += 1;
    }
    pthread_mutex_unlock(&c->mu);
    progress(c, 0);
}

static void *count_main(void *arg)
{
    Counter *c = arg;
    for (size_t i; (i = atomic_fetch_add(&c->next, 1)) < c->l->n;)
        if (!c->l->v[i].info || c->s->build_indexes == SHARD_INDEXES_FOR_SEEKING)
            count_one(c, &c->l->v[i]);
    return NULL;
}

/* The counts of the shards no manifest described, from their indexes' first lines (and
 * with build_indexes, from indexes made for those without): several at a time, so that a
 * long brace pattern over a store far away does not pay one round trip after another, and
 * plain shards are scanned in parallel. */
int shard_list_fill_counts(ShardList *l, const ShardListSettings *s, char *msg)
{
    size_t costly = 0, todo = 0;
    int seeking = s->build_indexes == SHARD_INDEXES_FOR_SEEKING;
    for (size_t i = 0; i < l->n; i++) {
        int look = !l->v[i].info || seeking;
        unsigned can = shard_store_can(l->v[i].url);
        todo += look && (can & SHARD_STORE_BESIDE) && to_make(s, &l->v[i]);
        costly += look && (can & SHARD_STORE_COSTLY);
    }
    Counter c = {.l = l, .s = s};
    if (s->build_indexes && todo) {
        if (!(c.dir = shard_index_cache_dir(s->index_cache, s->remote)))
            return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
        c.tomake = todo;
    }
    pthread_mutex_init(&c.mu, NULL);
    size_t want = c.dir ? todo : costly > 1 ? costly : 0;
    size_t most = s->threads ? s->threads : COUNT_THREADS;
    if (most > COUNT_THREADS)
        most = COUNT_THREADS;
    shard_threads_run(count_main, &c, want > most ? most : want);
    progress(&c, 1);
    pthread_mutex_destroy(&c.mu);
    free(c.dir);
    if (c.rc)
        return shard_fail(msg, c.rc, "%s", c.err);
    return 0;
}
