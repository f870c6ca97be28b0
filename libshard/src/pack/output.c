/*
 * A pack run's output around its shards (shard/pack.h): the folder or bucket made ready (an
 * earlier run's manifest gone, and in a folder the temporaries of a killed run), what an earlier run left past this one's shards, and
 * the manifest that goes with the plan.
 */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "base/error.h"
#include "base/keyset.h"
#include "base/text.h"
#include "pack/packplan.h"
#include "pack/packplandef.h"
#include "sink/sink.h"
#include "shard/file.h"
#include "shard/manifest.h"
#include "shard/pack.h"
#include "write/shardwriter.h"

/* A lock file's path: the manifest's name (shard_pack_manifest_path) hidden, ".lock" for
 * ".json"; the set's, or with part a part's own. malloc'd. */
static char *lock_path(const ShardPackPlan *p, int part)
{
    ShardPackSettings t = p->s;
    t.pattern = p->pattern;
    if (!part)
        t.nparts = t.part = 0;
    char *m = shard_pack_manifest_path(&t);
    size_t n = m ? strlen(m) : 0;
    char *out = m ? malloc(n + 3) : NULL;
    if (out) {
        const char *base = strrchr(m, '/');
        size_t dir = base ? (size_t)(base - m) + 1 : 0;
        memcpy(out, m, dir);
        out[dir] = '.';
        memcpy(out + dir + 1, m + dir, n - dir - 5); /* without ".json" */
        strcpy(out + dir + 1 + (n - dir - 5), ".lock");
    }
    free(m);
    return out;
}

/* One writer per output set: the set's lock (a whole run alone, a part set's runs shared)
 * and a part's own. */
static int lock_output(ShardPackPlan *p, char *msg)
{
    static const char hint[] = "one run writes a set at a time (the parts of one --part set "
                               "together)";
    char *set = lock_path(p, 0), *part = p->s.nparts ? lock_path(p, 1) : NULL;
    int rc = !set || (p->s.nparts && !part) ? shard_fail(msg, SHARD_ERR_NOMEM, "out of memory")
                                            : 0;
    if (!rc)
        rc = shard_sink_lock(&p->set_lock, set, p->s.nparts != 0, p->pattern, NULL, hint, msg);
    if (!rc && part)
        rc = shard_sink_lock(&p->part_lock, part, 0, p->pattern, ", a part", hint, msg);
    if (rc)
        shard_sink_unlock(&p->set_lock);
    free(set);
    free(part);
    return rc;
}

int shard_pack_prepare(ShardPackPlan *p, const char *manifest_path, ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    /* before anything of the set is touched; a bucket's outputs are not locked */
    if (!p->locked && !shard_sink_in_bucket(p->pattern)) {
        int rc = lock_output(p, msg);
        if (rc)
            return shard_report(err, rc, msg);
        p->locked = 1;
    }
    if (manifest_path) {
        int remote = shard_sink_in_bucket(manifest_path);
        ShardRemote *r = remote ? shard_pack_plan_remote((ShardPackPlan *)p, msg) : NULL;
        int rc = remote && !r ? SHARD_ERR_NOMEM : shard_sink_remove(manifest_path, r, msg);
        if (rc)
            return shard_report(err, rc, msg);
    }
    /* temporaries of killed runs: in folders only (an upload that never completed is no
     * object). First those of this part's shards and indexes. */
    ShardKeySet mine = {.owns = 1};
    size_t lo, hi;
    shard_pack_plan_part(p, &lo, &hi);
    int shards_local = !shard_sink_in_bucket(p->pattern);
    char *first = shards_local ? shard_pack_numbered(p->pattern, lo) : NULL;
    char *dir = first ? shard_dir_of(first) : NULL;
    int rc = !shards_local || (first && dir) ? 0 : SHARD_ERR_NOMEM;
    for (size_t j = lo; shards_local && j < hi && !rc; j++) {
        char *path = shard_pack_numbered(p->pattern, j), *ipath = path ? shard_index_path(path) : NULL;
        char *a = path ? strdup(shard_base_name(path)) : NULL;
        char *b = ipath ? strdup(shard_base_name(ipath)) : NULL;
        if (!a || !b || shard_keyset_insert(&mine, a) < 0 || shard_keyset_insert(&mine, b) < 0)
            rc = SHARD_ERR_NOMEM;
        free(path);
        free(ipath);
    }
    if (!rc && shards_local)
        shard_sink_sweep(dir, &mine);
    shard_keyset_free(&mine);
    if (!rc && manifest_path && !shard_sink_in_bucket(manifest_path)) { /* a run killed while
                                                                        writing its manifest */
        ShardKeySet m = {.owns = 1};
        char *mdir = shard_dir_of(manifest_path), *mbase = strdup(shard_base_name(manifest_path));
        if (mdir && mbase && shard_keyset_insert(&m, mbase) >= 0)
            shard_sink_sweep(mdir, &m);
        else {
            free(mbase);
            rc = SHARD_ERR_NOMEM;
        }
        shard_keyset_free(&m);
        free(mdir);
    }
    free(first);
    free(dir);
    return rc ? shard_report(err, rc, "out of memory") : 0;
}

size_t shard_pack_leftovers(const ShardPackPlan *p, void (*fn)(void *cookie, const char *path),
                            void *cookie)
{
    size_t found = 0;
    if (p->s.nparts || shard_sink_in_bucket(p->pattern))
        return 0; /* a part does not know how many shards the others write; a bucket is
                     not listed for this */
    /* an earlier run numbered its shards on from 0: follow the numbers past this run's */
    for (uint64_t k = p->nshards;; k++) {
        char *path = shard_pack_numbered(p->pattern, k), *ipath = path ? shard_index_path(path) : NULL;
        int any = 0;
        struct stat st;
        if (path && stat(path, &st) == 0) {
            fn(cookie, path);
            found++;
            any = 1;
        }
        if (ipath && stat(ipath, &st) == 0) {
            fn(cookie, ipath);
            found++;
            any = 1;
        }
        free(path);
        free(ipath);
        if (!any)
            break;
    }
    return found;
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

/* The packing options, as the manifest records them. */
static char *options_json(const ShardPackPlan *p)
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
    if (p->s.max_side) { /* only then, so that earlier manifests stay as they were */
        json_object_set_new(j, "max_side", json_integer(p->s.max_side));
        json_object_set_new(j, "quality", json_integer(p->s.quality));
    }
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

int shard_pack_manifest(ShardManifest **out, const ShardPackPlan *p, const char *manifest_path)
{
    *out = NULL;
    char *stem = strdup(manifest_path);
    char *opts = options_json(p);
    if (!stem || !opts) {
        free(stem);
        free(opts);
        return SHARD_ERR_NOMEM;
    }
    char *b = basename(stem);
    char *dot = strrchr(b, '.');
    if (dot)
        *dot = 0;
    char *part = strstr(b, ".part-");
    if (part)
        *part = 0;
    ShardManifest *m;
    int rc = shard_manifest_new(&m, b);
    if (!rc && !(rc = shard_manifest_set_options(m, opts)))
        rc = shard_manifest_set_classes(m, (const char *const *)p->classes, p->nclasses);
    if (!rc && p->s.nparts)
        rc = shard_manifest_set_part(m, p->s.part, p->s.nparts, (size_t)p->nshards);
    free(stem);
    free(opts);
    if (rc) {
        shard_manifest_free(&m);
        return rc;
    }
    *out = m;
    return 0;
}

int shard_pack_manifest_write(const ShardPackPlan *p, const ShardManifest *m,
                              const char *manifest_path, ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    ShardRemote *r = NULL;
    if (shard_sink_in_bucket(manifest_path) && !(r = shard_pack_plan_remote((ShardPackPlan *)p, msg)))
        return shard_report(err, SHARD_ERR_NOMEM, msg);
    return shard_manifest_write_remote(m, manifest_path, r, err);
}
