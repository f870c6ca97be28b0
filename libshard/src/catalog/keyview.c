/*
 * A key list's view of a shard list (keyview.h). The keys are sorted once and looked up
 * by bisection; each shard's index is read once, in list order, for its samples' keys.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/digest.h"
#include "base/error.h"
#include "base/thread.h"
#include "catalog/keyview.h"
#include "catalog/samplenames.h"
#include "source/open.h"

#define MISSING_NAMED 8

struct ShardKeyView {
    size_t nshards;
    uint64_t *first;  /* per shard, where its chosen samples start in pos (nshards + 1) */
    uint64_t *pos;    /* the chosen samples' numbers in their shards */
    uint64_t keys, missing;
    char *missing_key[MISSING_NAMED];
    size_t nmissing_named;
    char id[48];
};

typedef struct Keys {
    char *text;   /* the file, its lines cut into strings */
    char **key;   /* sorted, each once */
    unsigned char *found;
    size_t n;
} Keys;

static int by_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The keys of the file at path (read through remote where it is one) into k. */
static int read_keys(Keys *k, const char *path, ShardRemote *remote, char *err)
{
    ShardBuf b = {0};
    char why[SHARD_ERROR_MAX];
    int rc = shard_source_slurp(path, remote, &b, SIZE_MAX - 1, why);
    k->text = (char *)b.data;
    if (rc)
        return shard_fail(err, rc, "keys: %s", why);
    size_t len = b.len;
    if (memchr(k->text, 0, len))
        return shard_fail(err, SHARD_ERR_FORMAT, "keys: %s: not text (a NUL byte at offset "
                          "%zu): want one key a line", path, strlen(k->text));
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += k->text[i] == '\n';
    if (!(k->key = malloc(lines * sizeof *k->key)))
        return shard_fail(err, SHARD_ERR_NOMEM, "keys: %s: out of memory", path);
    for (char *p = k->text, *e; p && *p; p = e ? e + 1 : NULL) {
        if ((e = strchr(p, '\n')))
            *e = 0;
        size_t n = strlen(p);
        if (n && p[n - 1] == '\r')
            p[--n] = 0;
        if (n)
            k->key[k->n++] = p;
    }
    qsort(k->key, k->n, sizeof *k->key, by_key);
    size_t u = 0;
    for (size_t i = 0; i < k->n; i++)
        if (!u || strcmp(k->key[u - 1], k->key[i]))
            k->key[u++] = k->key[i];
    k->n = u;
    if (!(k->found = calloc(u ? u : 1, 1)))
        return shard_fail(err, SHARD_ERR_NOMEM, "keys: %s: out of memory", path);
    return 0;
}

static void free_keys(Keys *k)
{
    free(k->text);
    free(k->key);
    free(k->found);
}

/* The shards' indexes read at once: a view over a store far away pays one round trip
 * after another otherwise. */
#define VIEW_THREADS 8

typedef struct Chooser {
    const ShardList *l;
    const Keys *k;
    ShardRemote *remote;
    _Atomic unsigned char *found; /* per key: it chose a sample (any thread may set it) */
    uint64_t **pos;               /* per shard: its chosen samples' numbers */
    uint64_t *n;                  /* per shard: how many */
    atomic_size_t next;           /* the next shard to take */
    pthread_mutex_t mu;
    int rc;                       /* the first failure, said in err */
    char err[SHARD_ERROR_MAX];
} Chooser;

/* Shard s's chosen samples, from its index's keys, into c->pos[s] and c->n[s]. */
static int choose_one(Chooser *c, ShardNames *names, size_t s, char *err)
{
    const ShardListEntry *e = shard_list_entry(c->l, s);
    size_t len = strcspn(e->url, "?#");
    if ((len > 3 && !strncmp(e->url + len - 3, ".gz", 3)) ||
        (len > 4 && !strncmp(e->url + len - 4, ".tgz", 4)))
        return shard_fail(err, SHARD_ERR_UNSUPPORTED, "keys: %s: a view reads its samples by "
                          "index, and a gzip stream cannot seek: repack it as .tar, or as "
                          ".tar.zst with a seek table (shardpack --compress zstd)", e->url);
    if (e->nsamples == SHARD_COUNT_UNKNOWN)
        return shard_fail(err, SHARD_ERR_UNSUPPORTED, "keys: %s: no index to find its samples' "
                          "keys in (make one: shardcat index)", e->url);
    size_t cap = 0;
    for (uint64_t i = 0; i < e->nsamples; i++) {
        const char *key;
        int rc = shard_names_key(names, (uint32_t)s, i, &key, err);
        if (rc)
            return rc;
        char **hit = bsearch(&key, c->k->key, c->k->n, sizeof *c->k->key, by_key);
        if (!hit)
            continue;
        atomic_store_explicit(&c->found[hit - c->k->key], 1, memory_order_relaxed);
        if (c->n[s] == cap) {
            cap = cap ? 2 * cap : 64;
            uint64_t *p = realloc(c->pos[s], cap * sizeof *p);
            if (!p)
                return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
            c->pos[s] = p;
        }
        c->pos[s][c->n[s]++] = i;
    }
    return 0;
}

static void *choose_main(void *arg)
{
    Chooser *c = arg;
    ShardNames *names = shard_names_new(c->l, c->remote, 1);
    char err[SHARD_ERROR_MAX];
    int rc = names ? 0 : shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    for (size_t s; !rc && (s = atomic_fetch_add(&c->next, 1)) < shard_list_count(c->l);)
        rc = choose_one(c, names, s, err);
    if (rc) {
        atomic_store(&c->next, shard_list_count(c->l)); /* the others stop too */
        pthread_mutex_lock(&c->mu);
        if (!c->rc) {
            c->rc = rc;
            snprintf(c->err, sizeof c->err, "%s", err);
        }
        pthread_mutex_unlock(&c->mu);
    }
    shard_names_free(&names);
    return NULL;
}

/* Each shard's chosen samples, from its index's keys (several shards at once), into the
 * view in list order, and their fingerprint into d. */
static int choose(ShardKeyView *v, const ShardList *l, Keys *k, ShardRemote *remote,
                  ShardDigests *d, char *err)
{
    Chooser c = {.l = l, .k = k, .remote = remote};
    size_t n = v->nshards;
    c.found = calloc(k->n ? k->n : 1, sizeof *c.found);
    c.pos = calloc(n ? n : 1, sizeof *c.pos);
    c.n = calloc(n ? n : 1, sizeof *c.n);
    int rc = c.found && c.pos && c.n ? 0 : shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    if (!rc) {
        atomic_init(&c.next, 0);
        pthread_mutex_init(&c.mu, NULL);
        shard_threads_run(choose_main, &c, n < VIEW_THREADS ? n : VIEW_THREADS);
        pthread_mutex_destroy(&c.mu);
        if ((rc = c.rc))
            snprintf(err, SHARD_ERROR_MAX, "%s", c.err);
    }
    uint64_t total = 0;
    for (size_t s = 0; !rc && s < n; s++)
        total += c.n[s];
    if (!rc && !(v->pos = malloc((total ? total : 1) * sizeof *v->pos)))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    for (size_t s = 0, at = 0; !rc && s < n; s++) {
        char place[32]; /* the shard's place: the list's own fingerprint names the shards */
        snprintf(place, sizeof place, "shard %zu\n", s);
        shard_digests_update(d, place, strlen(place));
        v->first[s] = at;
        for (uint64_t j = 0; j < c.n[s]; j++) {
            char num[24];
            snprintf(num, sizeof num, "%llu\n", (unsigned long long)c.pos[s][j]);
            shard_digests_update(d, num, strlen(num));
            v->pos[at++] = c.pos[s][j];
        }
        v->first[s + 1] = at;
    }
    for (size_t i = 0; !rc && i < k->n; i++)
        k->found[i] = atomic_load_explicit(&c.found[i], memory_order_relaxed);
    for (size_t s = 0; c.pos && s < n; s++)
        free(c.pos[s]);
    free(c.pos);
    free(c.n);
    free(c.found);
    return rc;
}

int shard_keyview_new(ShardKeyView **out, const ShardList *l, const char *path,
                      ShardRemote *remote, char *err)
{
    *out = NULL;
    ShardKeyView *v = calloc(1, sizeof *v);
    Keys k = {0};
    ShardDigests d;
    if (!v || !(v->first = calloc(shard_list_count(l) + 1, sizeof *v->first)) ||
        shard_digests_init(&d, 0, 1)) {
        shard_keyview_free(&v);
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    }
    v->nshards = shard_list_count(l);
    int rc = read_keys(&k, path, remote, err);
    if (!rc)
        rc = choose(v, l, &k, remote, &d, err);
    char md5[33], sha[65];
    shard_digests_final(&d, md5, sha);
    v->keys = k.n;
    for (size_t i = 0; !rc && i < k.n; i++) {
        if (k.found[i])
            continue;
        if (v->nmissing_named < MISSING_NAMED &&
            !(v->missing_key[v->nmissing_named++] = strdup(k.key[i])))
            rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
        v->missing++;
    }
    snprintf(v->id, sizeof v->id, "%llu-%.16s", (unsigned long long)v->first[v->nshards], sha);
    free_keys(&k);
    if (rc)
        shard_keyview_free(&v);
    *out = v;
    return rc;
}

void shard_keyview_free(ShardKeyView **pv)
{
    ShardKeyView *v = *pv;
    if (!v)
        return;
    free(v->first);
    free(v->pos);
    for (size_t i = 0; i < v->nmissing_named; i++)
        free(v->missing_key[i]);
    free(v);
    *pv = NULL;
}

uint64_t shard_keyview_count(const ShardKeyView *v, size_t s)
{
    return v->first[s + 1] - v->first[s];
}

uint64_t shard_keyview_sample(const ShardKeyView *v, size_t s, uint64_t j)
{
    return v->pos[v->first[s] + j];
}

uint64_t shard_keyview_keys(const ShardKeyView *v) { return v->keys; }
uint64_t shard_keyview_missing(const ShardKeyView *v) { return v->missing; }
size_t shard_keyview_missing_named(const ShardKeyView *v) { return v->nmissing_named; }
const char *shard_keyview_missing_key(const ShardKeyView *v, size_t i) { return v->missing_key[i]; }
const char *shard_keyview_id(const ShardKeyView *v) { return v->id; }

/* ---- the public view (shard/list.h): the same, behind its own name ------------------ */

struct ShardView {
    ShardKeyView *kv;
};

int shard_view_new(ShardView **out, const ShardList *l, const char *keys, ShardRemote *remote,
                   ShardError *err)
{
    *out = NULL;
    char msg[SHARD_ERROR_MAX];
    ShardView *v = calloc(1, sizeof *v);
    if (!v)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    int rc = shard_keyview_new(&v->kv, l, keys, remote, msg);
    if (rc) {
        free(v);
        return shard_report(err, rc, msg);
    }
    *out = v;
    return 0;
}

uint64_t shard_view_count(const ShardView *v, size_t i) { return shard_keyview_count(v->kv, i); }

uint64_t shard_view_sample(const ShardView *v, size_t i, uint64_t j)
{
    return shard_keyview_sample(v->kv, i, j);
}

void shard_view_keys(const ShardView *v, uint64_t *given, uint64_t *missing)
{
    *given = shard_keyview_keys(v->kv);
    *missing = shard_keyview_missing(v->kv);
}

void shard_view_free(ShardView **pv)
{
    if (!pv || !*pv)
        return;
    shard_keyview_free(&(*pv)->kv);
    free(*pv);
    *pv = NULL;
}
