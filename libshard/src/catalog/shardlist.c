/*
 * Shard lists (shard/list.h): each spec expanded into shards, in order: a folder or a
 * bucket's prefix listed (through the source switch), a manifest's shards, a command, or a
 * brace pattern's names (braces.c); then the counts (counts.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/text.h"
#include "catalog/braces.h"
#include "catalog/counts.h"
#include "catalog/listcolumns.h"
#include "catalog/listdef.h"
#include "catalog/manifest_remote.h"
#include "remote/store.h"
#include "shard/file.h"
#include "shard/list.h"

/* the most names, and bytes of them, a list may hold: a typo fails instead of filling
 * memory */
#define MAX_NAMES SHARD_BRACES_MAX_RANGE
#define MAX_NAME_BYTES (1ull << 30)

typedef ShardList List;

/* Appends a shard (taking url, which may be NULL after a failed copy; a manifest's shard,
 * with info, borrows its URL from the manifest, which the list keeps: a million shards'
 * URLs held once). */
static int list_add(List *l, char *url, uint64_t nsamples, const ShardFileInfo *info, size_t spec)
{
    if (!url)
        return SHARD_ERR_NOMEM;
    if (shard_array_grow(&l->v, &l->cap, l->n + 1, sizeof *l->v, 16)) {
        if (!info)
            free(url);
        return SHARD_ERR_NOMEM;
    }
    l->v[l->n++] = (ShardListEntry){url, nsamples, info, spec, NULL, NULL};
    return 0;
}

static int list_push(List *l, char *url, size_t spec)
{
    return list_add(l, url, SHARD_COUNT_UNKNOWN, NULL, spec);
}

void shard_list_default_settings(ShardListSettings *s)
{
    memset(s, 0, sizeof *s);
    s->counts = 1;
}

/* A shard its manifest counts 0 samples (spec's shardlist[i]): readers plan nothing for
 * it, so the count is checked here, as any count is where the shard is read. */
static int check_empty(const char *url, ShardRemote *remote, const char *spec, size_t i,
                       char *msg)
{
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    fs.remote = remote;
    fs.load_index = 0;
    fs.headers_only = 1;
    ShardFile *f;
    ShardError e;
    int rc = shard_file_open(&f, url, &fs, &e);
    if (rc)
        return shard_fail(msg, rc, "%s", e.message);
    const ShardSampleView *v;
    rc = shard_file_next(f, &v);
    if (rc == 0)
        rc = shard_fail(msg, SHARD_ERR_FORMAT,
                        "%s: shardlist[%zu] counts 0 samples, but %s holds sample '%s' at "
                        "offset %llu (the manifest is out of date)",
                        spec, i, url, v->key, (unsigned long long)v->offset);
    else if (rc == SHARD_EOS)
        rc = 0;
    else
        shard_fail(msg, rc, "%s", shard_file_error(f));
    shard_file_free(&f);
    return rc;
}

/* Whether a spec its store can (can: shard_store_can) names a manifest. */
static int is_manifest(const char *spec, unsigned can)
{
    return shard_ends_with(spec, ".json") && (can & SHARD_STORE_BESIDE);
}

typedef struct Names {
    List *l;
    const char *spec;
    size_t which;
} Names;

/* A name a brace pattern gave, within the list's bounds. */
static int name_add(void *cookie, char *name, char *err)
{
    Names *x = cookie;
    List *l = x->l;
    if (name)
        l->bytes += strlen(name) + 1;
    if (name && (l->n >= MAX_NAMES || l->bytes > MAX_NAME_BYTES)) {
        free(name);
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "'%.200s': expands to more than %llu names or %llu bytes of them",
                          x->spec, MAX_NAMES, MAX_NAME_BYTES);
    }
    return list_push(l, name, x->which);
}

/* Each shard (.tar, .tar.gz, .tgz, .tar.zst) of a folder's or a prefix's listing; indexes,
 * manifests and anything else beside the shards left out. */
static int listed_add(void *cookie, const char *url, uint64_t size)
{
    Names *x = cookie;
    (void)size;
    static const char *const shards[] = {".tar", ".tar.gz", ".tgz", ".tar.zst"};
    for (size_t i = 0; i < sizeof shards / sizeof *shards; i++)
        if (shard_ends_with(url, shards[i]))
            return list_push(x->l, strdup(url), x->which);
    return 0;
}

/* The shards of a local folder or a bucket's prefix (gs://B/P/, s3://B/P/), in name order:
 * 0, 1 when spec names neither, or an error with msg. */
static int expand_listing(List *l, const char *spec, unsigned can, size_t which,
                          ShardRemote *remote, char *msg)
{
    size_t first = l->n;
    Names x = {l, spec, which};
    ShardStore *st;
    int rc = shard_store_open(&st, spec, remote, msg);
    if (!rc)
        rc = shard_store_list(st, spec, listed_add, &x, msg);
    shard_store_free(&st);
    if (rc == SHARD_ERR_NOMEM)
        shard_fail(msg, rc, "out of memory");
    if (!rc && l->n == first)
        rc = shard_fail(msg, SHARD_ERR_NOT_FOUND, "%s: no shards %s (.tar, .tar.gz, .tgz, "
                        ".tar.zst)", spec, can & SHARD_STORE_COSTLY ? "under this prefix"
                                                                    : "in this folder");
    return rc;
}

/* The shards a manifest lists, each allowed by the settings and its count of 0 checked. */
static int expand_manifest(List *l, const char *spec, unsigned can, size_t which,
                           const ShardListSettings *s, char *msg)
{
    ShardError e;
    int rc = shard_manifest_read_remote(&l->manifests[which], spec, s->remote, &e);
    if (rc)
        return shard_fail(msg, rc, "%s", e.message);
    const ShardManifest *m = l->manifests[which];
    int from_afar = !(can & SHARD_STORE_PRIVATE);
    for (size_t i = 0; i < shard_manifest_count(m) && !rc; i++) {
        const ShardFileInfo *fi = shard_manifest_shard(m, i);
        unsigned its = shard_store_can(fi->url);
        /* a manifest must not run anything the user did not allow */
        if ((its & SHARD_STORE_PRIVATE) && !(its & SHARD_STORE_BESIDE) && !s->manifest_commands)
            return shard_fail(msg, SHARD_ERR_INVALID,
                              "%s: shardlist[%zu] is a command ('%.40s...'): a manifest "
                              "runs commands only when allowed (manifest_commands; "
                              "shardcat --allow-manifest-commands)",
                              spec, i, fi->url);
        /* nor reach local files from elsewhere */
        if (from_afar && !s->manifest_local &&
            (its & (SHARD_STORE_PRIVATE | SHARD_STORE_BESIDE)) ==
                (SHARD_STORE_PRIVATE | SHARD_STORE_BESIDE))
            return shard_fail(msg, SHARD_ERR_INVALID,
                              "%s: shardlist[%zu] is a local file ('%.60s'): a remote "
                              "manifest lists remote shards only unless allowed "
                              "(manifest_local; shardcat --allow-manifest-local)",
                              spec, i, fi->url);
        if (fi->nsamples == 0 && (rc = check_empty(fi->url, s->remote, spec, i, msg)))
            return rc;
        rc = list_add(l, (char *)fi->url, fi->nsamples, fi, which);
    }
    return rc ? shard_fail(msg, rc, "out of memory") : 0;
}

static int expand_one(List *l, const char *spec, size_t which, const ShardListSettings *s,
                      char *msg)
{
    unsigned can = shard_store_can(spec); /* asked once: the answer goes with the spec */
    if (!can) { /* no store reads it: refused here, naming it */
        ShardStore *none;
        return shard_store_open(&none, spec, NULL, msg);
    }
    if ((can & SHARD_STORE_PREFIX) && (!strchr(spec, '{') || shard_ends_with(spec, "/"))) {
        int rc = expand_listing(l, spec, can, which, s->remote, msg);
        if (rc <= 0)
            return rc;
    }
    if (is_manifest(spec, can))
        return expand_manifest(l, spec, can, which, s, msg);
    if (!(can & SHARD_STORE_BESIDE) && can) { /* a command's output: one shard */
        int rc = list_push(l, strdup(spec), which);
        return rc ? shard_fail(msg, rc, "out of memory") : 0;
    }
    Names x = {l, spec, which};
    int rc = shard_braces_expand(spec, spec, name_add, &x, msg);
    if (rc == SHARD_ERR_NOMEM)
        shard_fail(msg, rc, "out of memory");
    return rc;
}

int shard_list_expand(ShardList **out, const char *const *specs, size_t nspecs,
                      const ShardListSettings *s, ShardError *err)
{
    *out = NULL;
    ShardListSettings defaults;
    if (!s) {
        shard_list_default_settings(&defaults);
        s = &defaults;
    }
    char msg[SHARD_ERROR_MAX];
    List *l = calloc(1, sizeof *l);
    if (!l || !(l->manifests = calloc(nspecs ? nspecs : 1, sizeof *l->manifests))) {
        free(l);
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    }
    l->nspecs = nspecs;
    int rc = 0;
    for (size_t k = 0; k < nspecs && !rc; k++)
        rc = expand_one(l, specs[k], k, s, msg);
    if (!rc && s->counts)
        rc = shard_list_fill_counts(l, s, msg);
    if (!rc && s->columns)
        rc = shard_list_fill_columns(l, s, msg);
    if (rc) {
        shard_list_free(&l);
        return shard_report(err, rc, msg);
    }
    *out = l;
    return 0;
}

size_t shard_list_count(const ShardList *l) { return l->n; }

const ShardManifest *shard_list_manifest(const ShardList *l, size_t spec)
{
    return spec < l->nspecs ? l->manifests[spec] : NULL;
}

void shard_list_index_counts(const ShardList *l, uint64_t *built, uint64_t *cached)
{
    *built = l->built;
    *cached = l->cached;
}

const ShardListEntry *shard_list_entry(const ShardList *l, size_t i)
{
    return i < l->n ? &l->v[i] : NULL;
}

void shard_list_free(ShardList **pl)
{
    if (!pl || !*pl)
        return;
    ShardList *l = *pl;
    for (size_t i = 0; i < l->n; i++) {
        if (!l->v[i].info) /* a manifest's shards borrow their URLs from it */
            free((char *)l->v[i].url);
        free((char *)l->v[i].index);
        free((char *)l->v[i].columns);
    }
    free(l->v);
    for (size_t k = 0; k < l->nspecs; k++)
        shard_manifest_free(&l->manifests[k]);
    free(l->manifests);
    free(l);
    *pl = NULL;
}

int shard_urls_expand(const char *spec, char ***out, size_t *n, ShardError *err)
{
    *out = NULL;
    *n = 0;
    ShardListSettings s;
    shard_list_default_settings(&s);
    s.counts = 0;
    ShardList *l;
    int rc = shard_list_expand(&l, &spec, 1, &s, err);
    if (rc)
        return rc;
    char **v = calloc(l->n ? l->n : 1, sizeof *v);
    for (size_t i = 0; v && i < l->n && !rc; i++) {
        /* moved out of the list, or copied from the manifest that lends it */
        v[i] = l->v[i].info ? strdup(l->v[i].url) : (char *)l->v[i].url;
        if (!l->v[i].info)
            l->v[i].url = NULL;
        if (!v[i])
            rc = SHARD_ERR_NOMEM;
    }
    size_t count = l->n;
    if (!v || rc) {
        shard_urls_free(v, l->n);
        v = NULL;
        rc = shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    }
    shard_list_free(&l);
    if (rc)
        return rc;
    *out = v;
    *n = count;
    return 0;
}

void shard_urls_free(char **urls, size_t n)
{
    if (!urls)
        return;
    for (size_t i = 0; i < n; i++)
        free(urls[i]);
    free(urls);
}
