/*
 * The image sizes of a list's shards (listcolumns.h).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/thread.h"
#include "catalog/counts.h"
#include "catalog/indexcache.h"
#include "catalog/listcolumns.h"
#include "catalog/listdef.h"
#include "remote/store.h"
#include "shard/verify.h"
#include "source/open.h"
#include "source/source.h"

#define COLUMN_THREADS 16

typedef struct Finder {
    ShardList *l;
    const ShardListSettings *s;
    char *dir;          /* the index cache, where the list makes indexes; else NULL */
    atomic_size_t next; /* the next entry to look at */
    pthread_mutex_t mu; /* the first error */
    int rc;
    char err[SHARD_ERROR_MAX];
} Finder;

/* The columns beside url's index, when they are there (malloc'd), else NULL. */
static char *beside(const char *url, ShardRemote *remote)
{
    if (!(shard_store_can(url) & SHARD_STORE_BESIDE))
        return NULL;
    char *p = shard_columns_path(url), err[SHARD_ERROR_MAX];
    ShardSource *s = NULL;
    if (p && shard_source_open(&s, p, remote, 0, err) == 0) {
        /* a remote object is opened without a request: asked for now */
        int there = shard_source_size(s) >= 0 || !s->ops->stat || s->ops->stat(s) == 0;
        shard_source_put(s);
        if (there)
            return p;
    }
    free(p);
    return NULL;
}

static void find_one(Finder *f, ShardListEntry *e)
{
    char err[SHARD_ERROR_MAX], *path = beside(e->url, f->s->remote);
    int rc = 0, built;
    if (!path && f->dir && e->nsamples != SHARD_COUNT_UNKNOWN &&
        shard_list_makes_for(f->s, e->url))
        rc = shard_columns_cached(f->dir, e->url, e->index, e->nsamples, f->s->remote, &path,
                                  &built, err);
    pthread_mutex_lock(&f->mu);
    if (rc && !f->rc) {
        f->rc = rc;
        snprintf(f->err, sizeof f->err, "%s", err);
    }
    e->columns = path;
    pthread_mutex_unlock(&f->mu);
}

static void *find_main(void *arg)
{
    Finder *f = arg;
    for (size_t i; (i = atomic_fetch_add(&f->next, 1)) < f->l->n;)
        find_one(f, &f->l->v[i]);
    return NULL;
}

int shard_list_fill_columns(ShardList *l, const ShardListSettings *s, char *msg)
{
    Finder f = {.l = l, .s = s};
    if (s->build_indexes && !(f.dir = shard_index_cache_dir(s->index_cache, s->remote)))
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&f.mu, NULL);
    pthread_t t[COLUMN_THREADS];
    size_t nt = 0, want = s->threads ? s->threads : COLUMN_THREADS;
    if (want > COLUMN_THREADS)
        want = COLUMN_THREADS;
    if (want > l->n)
        want = l->n;
    while (nt + 1 < want && shard_thread_start(&t[nt], find_main, &f) == 0)
        nt++;
    find_main(&f); /* this thread too */
    while (nt)
        pthread_join(t[--nt], NULL);
    pthread_mutex_destroy(&f.mu);
    free(f.dir);
    return f.rc ? shard_fail(msg, f.rc, "%s", f.err) : 0;
}
