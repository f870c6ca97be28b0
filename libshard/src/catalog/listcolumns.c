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

/* path (malloc'd, taken) when a file or object is there, else NULL (path freed). */
static char *there(char *path, ShardRemote *remote)
{
    char err[SHARD_ERROR_MAX];
    ShardSource *s = NULL;
    if (path && shard_source_open(&s, path, remote, 0, err) == 0) {
        /* a remote object is opened without a request: asked for now */
        int found = shard_source_size(s) >= 0 || !s->ops->stat || s->ops->stat(s) == 0;
        shard_source_put(s);
        if (found)
            return path;
    }
    free(path);
    return NULL;
}

/* Entry e's columns: beside it, else kept in the cache (its index made there first when it
 * has none: a manifest's plain tar). A failure to make them where the list makes only what
 * is cheap leaves none, as a failed index does; the reading that needs them names the shard. */
static void find_one(Finder *f, ShardListEntry *e)
{
    int local = shard_store_can(e->url) & SHARD_STORE_BESIDE;
    char err[SHARD_ERROR_MAX], *path = local ? there(shard_columns_path(e->url), f->s->remote) : NULL;
    char *made = NULL, *idx = NULL;
    uint64_t n = e->nsamples;
    int rc = 0, built;
    if (!path && f->dir && shard_list_makes_for(f->s, e->url)) {
        if (!e->index && !(idx = there(shard_index_path(e->url), f->s->remote)))
            rc = shard_index_cached(f->dir, e->url, f->s->remote, &made, &n, &built, err);
        free(idx);
        if (!rc)
            rc = shard_columns_cached(f->dir, e->url, made ? made : e->index, n, f->s->remote,
                                      &path, &built, err);
    }
    pthread_mutex_lock(&f->mu);
    if (rc && !f->rc && f->s->build_indexes != SHARD_INDEXES_WHERE_CHEAP) {
        f->rc = rc;
        snprintf(f->err, sizeof f->err, "%s", err);
    }
    e->columns = path;
    if (made && !e->index) {
        e->index = made;
        made = NULL;
        if (e->nsamples == SHARD_COUNT_UNKNOWN)
            e->nsamples = n;
    }
    pthread_mutex_unlock(&f->mu);
    free(made);
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
    size_t want = s->threads ? s->threads : COLUMN_THREADS;
    if (want > COLUMN_THREADS)
        want = COLUMN_THREADS;
    shard_threads_run(find_main, &f, want > l->n ? l->n : want);
    pthread_mutex_destroy(&f.mu);
    free(f.dir);
    return f.rc ? shard_fail(msg, f.rc, "%s", f.err) : 0;
}
