/*
 * Dataset manifests (shard/manifest.h, formats/manifest.md): the object, its shards, class
 * names, options and part, and the join of a plan's parts. Reading one is manifest_read.c's,
 * writing one manifest_write.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>


#include "base/buf.h"
#include "base/error.h"
#include "catalog/manifestdef.h"
#include "shard/manifest.h"

int shard_manifest_set_part(ShardManifest *m, size_t part, size_t nparts, size_t plan_shards)
{
    if (part >= nparts)
        return SHARD_ERR_INVALID;
    m->part = part, m->nparts = nparts, m->plan_shards = plan_shards;
    return 0;
}

int shard_manifest_new(ShardManifest **out, const char *name)
{
    *out = NULL;
    ShardManifest *m = calloc(1, sizeof *m);
    if (!m)
        return SHARD_ERR_NOMEM;
    m->name = strdup(name ? name : "");
    m->options = strdup("{}");
    if (!m->name || !m->options) {
        shard_manifest_free(&m);
        return SHARD_ERR_NOMEM;
    }
    *out = m;
    return 0;
}

int shard_manifest_set_name(ShardManifest *m, const char *name)
{
    char *copy = strdup(name ? name : "");
    if (!copy)
        return SHARD_ERR_NOMEM;
    free(m->name);
    m->name = copy;
    return 0;
}

const char *shard_manifest_name(const ShardManifest *m) { return m->name; }

int shard_manifest_add(ShardManifest *m, const ShardFileInfo *info)
{
    if (!info || !info->url)
        return SHARD_ERR_INVALID;
    size_t cap = m->cap;
    if (shard_array_grow(&m->shards, &m->cap, m->n + 1, sizeof *m->shards, 64))
        return SHARD_ERR_NOMEM;
    if (m->datasets && m->cap != cap) { /* the datasets' slots follow the shards' */
        char **d = realloc(m->datasets, m->cap * sizeof *d);
        if (!d)
            return SHARD_ERR_NOMEM;
        memset(d + cap, 0, (m->cap - cap) * sizeof *d);
        m->datasets = d;
    }
    ShardFileInfo copy = *info;
    copy.url = strdup(info->url);
    if (!copy.url)
        return SHARD_ERR_NOMEM;
    m->shards[m->n++] = copy;
    return 0;
}

int shard_manifest_set_dataset(ShardManifest *m, size_t i, const char *dataset)
{
    if (i >= m->n)
        return SHARD_ERR_INVALID;
    if (!m->datasets && !(m->datasets = calloc(m->cap, sizeof *m->datasets)))
        return SHARD_ERR_NOMEM;
    char *copy = strdup(dataset);
    if (!copy)
        return SHARD_ERR_NOMEM;
    free(m->datasets[i]);
    m->datasets[i] = copy;
    return 0;
}

const char *shard_manifest_dataset(const ShardManifest *m, size_t i)
{
    return m->datasets && i < m->n ? m->datasets[i] : NULL;
}

static void free_classes(ShardManifest *m)
{
    for (size_t i = 0; i < m->nclasses; i++)
        free(m->classes[i]);
    free(m->classes);
    m->classes = NULL;
    m->nclasses = 0;
}

int shard_manifest_set_classes(ShardManifest *m, const char *const *names, size_t n)
{
    char **c = calloc(n ? n : 1, sizeof *c);
    if (!c)
        return SHARD_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!(c[i] = strdup(names[i]))) {
            while (i--)
                free(c[i]);
            free(c);
            return SHARD_ERR_NOMEM;
        }
    }
    free_classes(m);
    m->classes = c;
    m->nclasses = n;
    return 0;
}

int shard_manifest_set_options(ShardManifest *m, const char *json_object)
{
    json_t *o = json_loads(json_object, JSON_REJECT_DUPLICATES, NULL);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return SHARD_ERR_FORMAT;
    }
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        return SHARD_ERR_NOMEM;
    free(m->options);
    m->options = text;
    return 0;
}

size_t shard_manifest_count(const ShardManifest *m) { return m->n; }

const ShardFileInfo *shard_manifest_shard(const ShardManifest *m, size_t i)
{
    return i < m->n ? &m->shards[i] : NULL;
}

size_t shard_manifest_class_count(const ShardManifest *m) { return m->nclasses; }

const char *shard_manifest_class(const ShardManifest *m, size_t i)
{
    return i < m->nclasses ? m->classes[i] : NULL;
}

uint64_t shard_manifest_samples(const ShardManifest *m)
{
    uint64_t t = 0;
    for (size_t i = 0; i < m->n; i++)
        t += m->shards[i].nsamples;
    return t;
}

const char *shard_manifest_options(const ShardManifest *m) { return m->options; }

static int url_cmp(const void *a, const void *b)
{
    return strcmp(((const ShardFileInfo *)a)->url, ((const ShardFileInfo *)b)->url);
}

int shard_manifest_join(ShardManifest **out, const ShardManifest *const *parts, size_t n,
                        ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    *out = NULL;
    if (n == 0)
        return shard_report(err, SHARD_ERR_INVALID, "join: no manifests given");
    ShardManifest *m;
    if (shard_manifest_new(&m, parts[0]->name))
        return shard_report(err, SHARD_ERR_NOMEM, "join: out of memory");
    int rc = shard_manifest_set_classes(m, (const char *const *)parts[0]->classes,
                                        parts[0]->nclasses);
    if (!rc)
        rc = shard_manifest_set_options(m, parts[0]->options);
    for (size_t p = 0; p < n && !rc; p++) {
        const ShardManifest *q = parts[p];
        int same = q->nclasses == m->nclasses && !strcmp(q->options, m->options);
        for (size_t i = 0; same && i < q->nclasses; i++)
            same = !strcmp(q->classes[i], m->classes[i]);
        if (!same) {
            shard_fail(msg, SHARD_ERR_FORMAT,
                       "join: part %zu has other class names or packing options than part 0",
                       p);
            shard_manifest_free(&m);
            return shard_report(err, SHARD_ERR_FORMAT, msg);
        }
        for (size_t i = 0; i < q->n && !rc; i++)
            rc = shard_manifest_add(m, &q->shards[i]);
    }
    if (rc) {
        shard_manifest_free(&m);
        return shard_report(err, rc, "join: out of memory");
    }
    /* parts of one plan: each exactly once, and together every shard of it */
    size_t nparts = parts[0]->nparts;
    for (size_t p = 1; p < n && !rc; p++)
        if (parts[p]->nparts != nparts || parts[p]->plan_shards != parts[0]->plan_shards)
            rc = SHARD_ERR_FORMAT;
    if (rc) {
        shard_manifest_free(&m);
        return shard_report(err, rc, "join: the manifests are not parts of the same pack plan "
                                     "(their libshard.part counts differ)");
    }
    if (nparts) {
        unsigned char *seen = calloc(nparts, 1);
        if (!seen) {
            shard_manifest_free(&m);
            return shard_report(err, SHARD_ERR_NOMEM, "join: out of memory");
        }
        size_t dup = SIZE_MAX;
        for (size_t p = 0; p < n; p++)
            if (seen[parts[p]->part]++)
                dup = parts[p]->part;
        char missing[256] = "";
        size_t nmissing = 0, len = 0;
        for (size_t i = 0; i < nparts; i++)
            if (!seen[i] && nmissing++ < 16 && len < sizeof missing - 24)
                len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%zu",
                                        len ? ", " : "", i);
        free(seen);
        if (dup != SIZE_MAX || nmissing) {
            if (dup != SIZE_MAX)
                shard_fail(msg, SHARD_ERR_FORMAT, "join: part %zu of %zu is given twice", dup,
                           nparts);
            else
                shard_fail(msg, SHARD_ERR_FORMAT,
                           "join: an incomplete set: part%s %s%s of %zu missing (parts count "
                           "from 0; pack them with --part I/%zu)",
                           nmissing > 1 ? "s" : "", missing, nmissing > 16 ? ", ..." : "",
                           nparts, nparts);
            shard_manifest_free(&m);
            return shard_report(err, SHARD_ERR_FORMAT, msg);
        }
        if (m->n != parts[0]->plan_shards) {
            shard_fail(msg, SHARD_ERR_FORMAT, "join: the parts list %zu shards, their plan has "
                       "%zu", m->n, parts[0]->plan_shards);
            shard_manifest_free(&m);
            return shard_report(err, SHARD_ERR_FORMAT, msg);
        }
    }
    qsort(m->shards, m->n, sizeof *m->shards, url_cmp);
    for (size_t i = 1; i < m->n; i++) {
        if (!strcmp(m->shards[i - 1].url, m->shards[i].url)) {
            shard_fail(msg, SHARD_ERR_FORMAT, "join: shard %s is listed by more than one part",
                       m->shards[i].url);
            shard_manifest_free(&m);
            return shard_report(err, SHARD_ERR_FORMAT, msg);
        }
    }
    *out = m;
    return 0;
}

void shard_manifest_free(ShardManifest **pm)
{
    if (!pm || !*pm)
        return;
    ShardManifest *m = *pm;
    for (size_t i = 0; i < m->n; i++) {
        free((char *)m->shards[i].url);
        if (m->datasets)
            free(m->datasets[i]);
    }
    free(m->datasets);
    free(m->shards);
    free_classes(m);
    free(m->name);
    free(m->options);
    free(m);
    *pm = NULL;
}
