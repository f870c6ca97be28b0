/*
 * The pack plan (shard/pack.h): inputs, keys, the shuffle, and shards cut by the writer's
 * rule. Writing one shard of it is packshard.c's; a run's folder and manifest, output.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/keyset.h"
#include "base/rng.h"
#include "base/text.h"
#include "pack/packplan.h"
#include "pack/packplandef.h"
#include "pack/convention.h"
#include "pack/dedup.h"
#include "remote/handle.h"
#include "shard/names.h"
#include "shard/pack.h"
#include "sink/sink.h"
#include "write/shardwriter.h"

void shard_pack_default_settings(ShardPackSettings *s)
{
    /* the writing settings default as the writer's do */
    ShardWriterSettings w;
    shard_writer_default_settings(&w);
    memset(s, 0, sizeof *s);
    s->pattern = NULL;
    s->maxcount = w.maxcount;
    s->maxsize = w.maxsize;
    s->compression = w.compression;
    s->level = w.level;
    s->frame_size = w.frame_size;
    s->shuffle = 0;
    s->shuffle_seed = 0;
    s->part = 0;
    s->nparts = 0;
    s->verify = 0;
    s->mtime = w.mtime;
    s->checksums = w.checksums;
    s->sync = w.sync;
    s->max_side = 0;
    s->quality = 95;
    s->remote = NULL;
    s->inflight = 16;
    s->resume = 0;
    s->dedup = 0;
}

int shard_pack_plan_new(ShardPackPlan **out, const ShardPackSettings *s, ShardError *err)
{
    *out = NULL;
    if (s->nparts ? s->part >= s->nparts : s->part != 0)
        return shard_report(err, SHARD_ERR_INVALID, "pack: the part must be I of N, 0 <= I < N");
    if (s->max_side && (s->max_side > 65500 || s->quality < 1 || s->quality > 100))
        return shard_report(err, SHARD_ERR_INVALID,
                            "pack: resizing wants a longer side of 1..65500 pixels and a quality of 1..100");
    ShardPackPlan *p = calloc(1, sizeof *p);
    if (!p)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    p->set_lock.fd = p->part_lock.fd = -1;
    p->s = *s;
    if (p->s.mtime < 0)
        p->s.mtime = 0;
    if (p->s.inflight == 0)
        p->s.inflight = 1;
    if (p->s.inflight > 256)
        p->s.inflight = 256;
    p->remote = s->remote ? shard_remote_ref(s->remote) : NULL;
    p->s.remote = NULL; /* the plan's own reference is p->remote */
    p->pattern = s->pattern ? strdup(s->pattern) : NULL;
    p->s.pattern = p->pattern;
    /* Let the writer judge the pattern and the zstd options now, not after a long scan;
     * a pattern naming one file is the writer's, not a pack's, which numbers shards. */
    ShardWriterSettings ws;
    shard_pack_writer_settings(p, 0, &ws);
    ws.maxcount = 1;
    ShardWriter *w;
    int rc = shard_writer_open(&w, &ws, err);
    shard_writer_free(&w);
    char msg[SHARD_ERROR_MAX];
    /* the output's store, its remote the run's when it has one */
    if (!rc && (rc = shard_store_open(&p->out, p->pattern, p->remote, msg)))
        shard_report(err, rc, msg);
    if (!rc && !p->remote && shard_store_remote(p->out))
        p->remote = shard_remote_ref(shard_store_remote(p->out));
    if (rc) {
        shard_pack_plan_free(&p);
        return rc;
    }
    *out = p;
    return 0;
}

ShardRemote *shard_pack_plan_reach(ShardPackPlan *p, char *err)
{
    if (!p->remote)
        p->remote = shard_remote_resolve(NULL, err);
    return p->remote;
}

unsigned shard_pack_plan_inflight(const ShardPackPlan *p)
{
    return p->s.inflight;
}

static char *copy_or_null(const char *s, int *bad)
{
    char *c = s ? strdup(s) : NULL;
    if (s && !c)
        *bad = 1;
    return c;
}

int shard_pack_plan_add(ShardPackPlan *p, const ShardPackInput *in)
{
    if (p->built || !in->path || !in->rel)
        return SHARD_ERR_INVALID;
    if (shard_array_grow(&p->v, &p->cap, p->n + 1, sizeof *p->v, 1024))
        return SHARD_ERR_NOMEM;
    Input *x = &p->v[p->n];
    memset(x, 0, sizeof *x);
    int bad = 0;
    x->path = copy_or_null(in->path, &bad);
    x->rel = copy_or_null(in->rel, &bad);
    x->class_name = copy_or_null(in->class_name, &bad);
    x->extra = copy_or_null(in->extra_json, &bad);
    if (in->field) {
        x->field = copy_or_null(in->field, &bad);
    } else {
        const char *dot = strrchr(in->rel, '.');
        x->field = copy_or_null(dot && dot[1] ? dot + 1 : "bin", &bad);
        for (char *c = x->field; c && *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c - 'A' + 'a');
    }
    if (bad) {
        free(x->path), free(x->rel), free(x->class_name), free(x->extra), free(x->field);
        return SHARD_ERR_NOMEM;
    }
    char msg[SHARD_ERROR_MAX];
    if ((shard_store_can(x->path) & SHARD_STORE_COSTLY) && !shard_pack_plan_reach(p, msg)) {
        free(x->path), free(x->rel), free(x->class_name), free(x->extra), free(x->field);
        return SHARD_ERR_NOMEM;
    }
    x->in = (ShardPackInput){x->path, x->rel, x->field, in->label, x->class_name, x->extra,
                             in->size};
    p->n++;
    return 0;
}

int shard_pack_plan_set_classes(ShardPackPlan *p, const char *const *names, size_t n)
{
    char **c = calloc(n ? n : 1, sizeof *c);
    if (!c)
        return SHARD_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        if (!(c[i] = strdup(names[i]))) {
            while (i--)
                free(c[i]);
            free(c);
            return SHARD_ERR_NOMEM;
        }
    for (size_t i = 0; i < p->nclasses; i++)
        free(p->classes[i]);
    free(p->classes);
    p->classes = c;
    p->nclasses = n;
    return 0;
}

/* A URL of a list whose key (key) an earlier input has: refused, naming both as a log may
 * show them (two URLs of one object, signed twice or of two versions, would be one sample
 * twice under two keys); 0 when input i is a local file (a clash gets "_N"). */
static int url_clash(const ShardPackPlan *p, size_t i, const char *key, ShardError *err)
{
    if (!(shard_store_can(p->v[i].path) & SHARD_STORE_COSTLY))
        return 0;
    size_t k = 0;
    char *other = malloc(strlen(key) + 32);
    for (; other && k < i; k++) /* the earlier input of that key */
        if (shard_key_from_path(p->v[k].rel, other, strlen(p->v[k].rel) + 32) >= 0 &&
            !strcmp(other, key))
            break;
    free(other);
    char a[1024], b[1024], msg[SHARD_ERROR_MAX];
    shard_url_display(k < i ? p->v[k].path : "?", a, sizeof a);
    shard_url_display(p->v[i].path, b, sizeof b);
    shard_fail(msg, SHARD_ERR_INVALID, "%s and %s give one sample key, '%s' (a key is a URL's "
               "host and path, its query and any user and password left out): list each "
               "object once", a, b, key);
    return shard_report(err, SHARD_ERR_INVALID, msg);
}

/* Keys from relative paths, in input order; a clash gets the smallest free "_N" (a URL's,
 * refused: url_clash). */
static int assign_keys(ShardPackPlan *p, ShardError *err)
{
    ShardKeySet set = {0}; /* the keys belong to the inputs */
    int rc = 0;
    for (size_t i = 0; i < p->n && !rc; i++) {
        Input *x = &p->v[i];
        size_t cap = strlen(x->rel) + 32;
        char *key = malloc(cap);
        int n = key ? shard_key_from_path(x->rel, key, cap) : SHARD_ERR_NOMEM;
        if (n < 0) {
            char msg[SHARD_ERROR_MAX];
            shard_fail(msg, SHARD_ERR_FORMAT, "%s: cannot derive a sample key from this path",
                       x->path);
            rc = shard_report(err, key ? SHARD_ERR_FORMAT : SHARD_ERR_NOMEM, msg);
            free(key);
            break;
        }
        int added = shard_keyset_insert(&set, key);
        if (added == 0 && (rc = url_clash(p, i, key, err))) {
            free(key);
            break;
        }
        for (unsigned long k = 1; added == 0; k++) {
            char *alt = malloc((size_t)n + 24);
            if (!alt) {
                added = SHARD_ERR_NOMEM;
                break;
            }
            snprintf(alt, (size_t)n + 24, "%s_%lu", key, k);
            if ((added = shard_keyset_insert(&set, alt)) == 1) {
                free(key);
                key = alt;
            } else {
                free(alt);
            }
        }
        if (added < 0) {
            free(key);
            rc = shard_report(err, SHARD_ERR_NOMEM, "out of memory");
            break;
        }
        x->key = key;
    }
    shard_keyset_free(&set);
    for (size_t i = 0; rc && i < p->n; i++) { /* all or none, so a build can be tried again */
        free(p->v[i].key);
        p->v[i].key = NULL;
    }
    return rc;
}

int shard_pack_plan_build(ShardPackPlan *p, ShardError *err)
{
    if (p->built)
        return shard_report(err, SHARD_ERR_STATE, "pack: the plan is built already");
    int rc = p->s.dedup && !p->ndups ? shard_pack_dedup(p, err) : 0;
    if (!rc)
        rc = assign_keys(p, err);
    if (rc)
        return rc;
    if (p->s.shuffle) {
        ShardRng r;
        shard_rng_seed(&r, p->s.shuffle_seed);
        for (size_t i = p->n; i > 1; i--) {
            size_t j = (size_t)shard_rng_below(&r, i);
            Input t = p->v[i - 1];
            p->v[i - 1] = p->v[j];
            p->v[j] = t;
        }
    }
    /* the inputs moved: their view's strings still point at their own copies */
    p->first = malloc((p->n + 1) * sizeof *p->first);
    if (!p->first)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    uint64_t count = 0, size = 0;
    for (size_t i = 0; i < p->n; i++) {
        uint64_t s = shard_pack_sample_size(&p->v[i]);
        if (i == 0 || shard_writer_rotates(count, size, s, p->s.maxcount, p->s.maxsize)) {
            p->first[p->nshards++] = i;
            count = size = 0;
        }
        count++;
        size += s;
    }
    p->first[p->nshards] = p->n;
    p->built = 1;
    return 0;
}

size_t shard_pack_plan_inputs(const ShardPackPlan *p) { return p->n; }

size_t shard_pack_plan_duplicates(const ShardPackPlan *p) { return p->ndups; }

int shard_pack_plan_duplicate(const ShardPackPlan *p, size_t i, const char **dropped,
                              const char **kept, const char **sha256)
{
    if (i >= p->ndups)
        return SHARD_ERR_INVALID;
    *dropped = p->dups[i].dropped.path;
    *kept = p->dups[i].kept;
    *sha256 = p->dups[i].sha256;
    return 0;
}

int shard_pack_plan_duplicate_labels(const ShardPackPlan *p, size_t i, int64_t *dropped,
                                     int64_t *kept)
{
    if (i >= p->ndups)
        return SHARD_ERR_INVALID;
    *dropped = p->dups[i].dropped.in.label;
    *kept = p->dups[i].kept_label;
    return 0;
}

const ShardPackInput *shard_pack_plan_input(const ShardPackPlan *p, size_t i)
{
    return i < p->n ? &p->v[i].in : NULL;
}

const char *shard_pack_plan_key(const ShardPackPlan *p, size_t i)
{
    return i < p->n ? p->v[i].key : NULL;
}

size_t shard_pack_plan_shards(const ShardPackPlan *p) { return p->nshards; }

void shard_pack_plan_shard(const ShardPackPlan *p, size_t j, size_t *first, size_t *end)
{
    *first = j < p->nshards ? p->first[j] : p->n;
    *end = j < p->nshards ? p->first[j + 1] : p->n;
}

void shard_pack_plan_part(const ShardPackPlan *p, size_t *lo, size_t *hi)
{
    uint64_t parts = p->s.nparts ? p->s.nparts : 1;
    *lo = (size_t)(p->s.part * p->nshards / parts);
    *hi = (size_t)((p->s.part + 1) * p->nshards / parts);
}

void shard_pack_plan_free(ShardPackPlan **pp)
{
    if (!pp || !*pp)
        return;
    ShardPackPlan *p = *pp;
    shard_sink_unlock(&p->part_lock);
    shard_sink_unlock(&p->set_lock);
    for (size_t j = 0; p->kept && j < p->nshards; j++)
        free((char *)p->kept[j].url);
    free(p->kept);
    for (size_t i = 0; i < p->n; i++) {
        Input *x = &p->v[i];
        free(x->path), free(x->rel), free(x->field), free(x->class_name), free(x->extra);
        free(x->key);
    }
    free(p->v);
    for (size_t i = 0; i < p->ndups; i++) {
        Input *x = &p->dups[i].dropped;
        free(x->path), free(x->rel), free(x->field), free(x->class_name), free(x->extra);
    }
    free(p->dups);
    for (size_t i = 0; i < p->nclasses; i++)
        free(p->classes[i]);
    free(p->classes);
    free(p->first);
    free(p->pattern);
    shard_store_free(&p->out);
    shard_remote_put(p->remote);
    free(p);
    *pp = NULL;
}

/* Number k in a pattern, malloc'd (NULL when out of memory). */
char *shard_pack_numbered(const char *pattern, uint64_t k)
{
    int n = snprintf(NULL, 0, pattern, (unsigned long long)k);
    char *path = n < 0 ? NULL : malloc((size_t)n + 1);
    if (path)
        snprintf(path, (size_t)n + 1, pattern, (unsigned long long)k);
    return path;
}

/* The writer settings for shard j of the plan: one shard, numbered j, no rotation. */
void shard_pack_writer_settings(const ShardPackPlan *p, size_t j, ShardWriterSettings *w)
{
    shard_writer_default_settings(w);
    w->pattern = p->pattern;
    w->first_shard = j;
    w->maxcount = 0;
    w->maxsize = 0;
    w->compression = p->s.compression;
    w->level = p->s.level;
    w->frame_size = p->s.frame_size;
    w->mtime = p->s.mtime;
    w->sync = p->s.sync;
    w->checksums = p->s.checksums;
}

/* The packing options, as the manifest records them. */
char *shard_pack_options_json(const ShardPackPlan *p)
{
    int zstd = shard_writes_zstd(p->s.compression, p->pattern);
    json_t *j = json_object();
    json_object_set_new(j, "maxcount", json_integer((json_int_t)p->s.maxcount));
    json_object_set_new(j, "maxsize", json_integer((json_int_t)p->s.maxsize));
    json_object_set_new(j, "compression", json_string(zstd ? "zstd" : "none"));
    json_object_set_new(j, "level", json_integer(p->s.level));
    json_object_set_new(j, "frame_size", json_integer((json_int_t)p->s.frame_size));
    json_object_set_new(j, "shuffle_seed",
                        p->s.shuffle ? json_integer((json_int_t)p->s.shuffle_seed) : json_null());
    json_object_set_new(j, "verify", json_boolean(p->s.verify));
    json_object_set_new(j, "mtime", json_integer(p->s.mtime));
    if (p->s.dedup) /* likewise */
        json_object_set_new(j, "dedup", json_true());
    if (p->s.max_side) { /* only then, so that earlier manifests stay as they were */
        json_object_set_new(j, "max_side", json_integer(p->s.max_side));
        json_object_set_new(j, "quality", json_integer(p->s.quality));
    }
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

char *shard_pack_manifest_path(const ShardPackSettings *s)
{
    /* out/train-%06d.tar.zst -> out/train.json: cut the name at the conversion, then drop
     * the separator before it. */
    char *p = strdup(s->pattern);
    if (!p)
        return NULL;
    char *slash = strrchr(p, '/');
    char *name = slash ? slash + 1 : p;
    char *pct = strchr(name, '%');
    if (pct)
        *pct = 0;
    size_t n = strlen(name);
    while (n && (name[n - 1] == '-' || name[n - 1] == '_' || name[n - 1] == '.'))
        name[--n] = 0;
    char suffix[64] = ".json";
    if (s->nparts)
        snprintf(suffix, sizeof suffix, ".part-%llu-of-%llu.json", (unsigned long long)s->part,
                 (unsigned long long)s->nparts);
    size_t len = strlen(p) + strlen(suffix) + 16;
    char *out = malloc(len);
    if (out)
        snprintf(out, len, "%s%s%s", p, n ? "" : "dataset", suffix);
    free(p);
    return out;
}
