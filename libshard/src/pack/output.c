/*
 * A pack run's output around its shards (shard/pack.h): the folder or bucket made ready (an
 * earlier run's manifest gone, and in a folder the temporaries of a killed run; then the
 * earlier set kept for a resume, or replaced: record.c), what an earlier run left past this
 * one's shards, and the manifest that goes with the plan.
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
#include "pack/record.h"
#include "pack/recordresume.h"
#include "remote/store.h"
#include "sink/sink.h"
#include "shard/file.h"
#include "shard/manifest.h"
#include "shard/pack.h"
#include "shard/verify.h"
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
        rc = shard_sink_lock_output(&p->set_lock, set, p->s.nparts != 0, p->pattern, NULL,
                                    hint, msg);
    if (!rc && part)
        rc = shard_sink_lock_output(&p->part_lock, part, 0, p->pattern, ", a part", hint, msg);
    if (rc)
        shard_sink_unlock(&p->set_lock);
    free(set);
    free(part);
    return rc;
}

/* The number a name of the pattern's form (its base name: prefix, digits, suffix) holds;
 * 0 and *k, or -1 when name is not of that form. */
static int numbered_as(const char *pattern_base, const char *name, unsigned long long *k)
{
    const char *pct = strchr(pattern_base, '%');
    if (!pct)
        return -1;
    size_t pre = (size_t)(pct - pattern_base);
    const char *conv = pct + 1 + strspn(pct + 1, "0123456789-+ #lhjzt");
    const char *suffix = *conv ? conv + 1 : conv;
    size_t n = strlen(name), suf = strlen(suffix);
    if (strncmp(name, pattern_base, pre) || n < pre + suf + 1 || strcmp(name + n - suf, suffix))
        return -1;
    size_t digits = n - pre - suf;
    if (strspn(name + pre, "0123456789") != digits || digits > 19)
        return -1;
    *k = strtoull(name + pre, NULL, 10);
    return 0;
}

/* url in dir (a folder or a bucket's prefix, with or without its '/') removed. */
static int remove_in(ShardPackPlan *p, const char *dir, const char *name, char *msg)
{
    char *url = NULL;
    size_t n = strlen(dir);
    if (asprintf(&url, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name) < 0)
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    int rc = shard_store_remove(p->out, url, msg);
    if (!rc)
        p->replaced++;
    free(url);
    return rc;
}

/* The folder (or bucket prefix, with its '/') that holds path, malloc'd. */
static char *listing_dir(const char *path)
{
    char *d = shard_dir_of(path), *out = NULL;
    if (d && asprintf(&out, "%s/", d) < 0)
        out = NULL;
    free(d);
    return out;
}

/* What of an earlier set could be read with the new one, gone: the set's manifests (for a
 * whole run also its parts'; a part's own is manifest_path, gone already) and the shards
 * and the indexes and columns beside them the pattern numbers (all of them for a whole run, a part's own for a part). */
static int remove_earlier_set(ShardPackPlan *p, int stem_manifests, char *msg)
{
    ShardPackSettings t = p->s;
    t.pattern = p->pattern;
    t.nparts = t.part = 0;
    char *set = shard_pack_manifest_path(&t), *first = shard_pack_numbered(p->pattern, 0);
    char *ipat = shard_index_path(p->pattern), *cpat = shard_columns_path(p->pattern);
    char *mdir = set ? listing_dir(set) : NULL, *sdir = first ? listing_dir(first) : NULL;
    int rc = mdir && sdir && ipat && cpat ? 0 : shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    ShardPackListing l = {0};
    if (!rc)
        rc = shard_pack_list(p, mdir, &l, msg);
    /* the set's manifest, and for a whole run its parts' (STEM.part-I-of-N.json); not when
     * the run's manifest is named otherwise (--manifest): those are another set's then */
    const char *stem = set ? shard_base_name(set) : "";
    size_t sn = strlen(stem) - 5; /* without ".json" */
    for (size_t i = 0; i < l.n && !rc && stem_manifests; i++) {
        const char *name = l.v[i].name;
        unsigned long long a, b;
        int end = 0;
        int part = !p->s.nparts && !strncmp(name, stem, sn) &&
                   sscanf(name + sn, ".part-%llu-of-%llu.json%n", &a, &b, &end) == 2 &&
                   !name[sn + (size_t)end];
        if (part || !strcmp(name, stem))
            rc = remove_in(p, mdir, name, msg);
    }
    shard_pack_listing_free(&l);
    if (!rc)
        rc = shard_pack_list(p, sdir, &l, msg);
    size_t lo, hi;
    shard_pack_plan_part(p, &lo, &hi);
    /* the pattern's shards, and the index and columns of each (another set's shards of
     * another extension may share their names: STEM-000000.idx beside .tar and .tar.zst) */
    ShardKeySet shards = {.owns = 1};
    const char *beside[] = {shard_base_name(ipat), shard_base_name(cpat)};
    for (size_t i = 0; i < l.n && !rc; i++) {
        unsigned long long k;
        if (numbered_as(shard_base_name(p->pattern), l.v[i].name, &k))
            continue;
        for (size_t b = 0; b < 2 && !rc; b++) {
            char *name = shard_pack_numbered(beside[b], k);
            int added = name ? shard_keyset_insert(&shards, name) : SHARD_ERR_NOMEM;
            if (added <= 0)
                free(name);
            if (added < 0)
                rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
        }
    }
    for (size_t i = 0; i < l.n && !rc; i++) {
        unsigned long long k;
        const char *name = l.v[i].name;
        int shard = !numbered_as(shard_base_name(p->pattern), name, &k);
        int index = !shard && (!numbered_as(beside[0], name, &k) || !numbered_as(beside[1], name, &k)) &&
                    shard_keyset_has(&shards, name);
        if ((shard || index) && (!p->s.nparts || (k >= lo && k < hi)))
            rc = remove_in(p, sdir, name, msg);
    }
    shard_keyset_free(&shards);
    shard_pack_listing_free(&l);
    free(set);
    free(first);
    free(ipat);
    free(cpat);
    free(mdir);
    free(sdir);
    return rc;
}

/* Whether name is a shard's (.tar, .tar.gz, .tgz, .tar.zst), as a folder's listing reads it. */
static int shard_named(const char *name)
{
    static const char *const exts[] = {".tar", ".tar.gz", ".tgz", ".tar.zst"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++)
        if (n > strlen(exts[i]) && !strcmp(name + n - strlen(exts[i]), exts[i]))
            return 1;
    return 0;
}

/* Another set's shard in the output folder whose index this pack would write (an index is
 * named for the shard's stem, as DALI's wds2idx names it: a .tar and a .tar.zst set of one
 * stem would share STEM-NNNNNN.idx): refused, naming both, before anything is written. */
static int refuse_shared_indexes(ShardPackPlan *p, char *msg)
{
    char *first = shard_pack_numbered(p->pattern, 0), *ipat = shard_index_path(p->pattern);
    char *sdir = first ? listing_dir(first) : NULL;
    int rc = sdir && ipat ? 0 : shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    ShardPackListing l = {0};
    if (!rc)
        rc = shard_pack_list(p, sdir, &l, msg);
    size_t lo, hi;
    shard_pack_plan_part(p, &lo, &hi);
    for (size_t i = 0; i < l.n && !rc; i++) {
        unsigned long long k, mine;
        const char *name = l.v[i].name;
        char *idx = NULL;
        if (!shard_named(name) || !numbered_as(shard_base_name(p->pattern), name, &mine) ||
            !(idx = shard_index_path(name)))
            continue;
        if (!numbered_as(shard_base_name(ipat), idx, &k) && k >= lo && k < hi) {
            char *ours = shard_pack_numbered(shard_base_name(p->pattern), k);
            rc = shard_fail(msg, SHARD_ERR_INVALID,
                            "%s%s%s (another set) would share its index %s with this pack's %s "
                            "(an index is named for its shard's stem, as DALI's wds2idx names "
                            "it): pack into another folder or under another name, or remove "
                            "that set first", sdir, sdir[strlen(sdir) - 1] == '/' ? "" : "/",
                            name, idx, ours ? ours : "shard");
            free(ours);
        }
        free(idx);
    }
    shard_pack_listing_free(&l);
    free(first);
    free(ipat);
    free(sdir);
    return rc;
}

/* The earlier set kept for a resume of this plan, else replaced: its record first (a run
 * killed from here on leaves none, and a resume then packs everything), then what of it
 * could be read with this one, then this plan's record. */
static int keep_or_replace(ShardPackPlan *p, const char *manifest_path, char *msg)
{
    ShardPackSettings t = p->s;
    t.pattern = p->pattern;
    char *own = shard_pack_manifest_path(&t); /* the pattern's own manifest name */
    int stem_manifests = !manifest_path || (own && !strcmp(own, manifest_path));
    free(own);
    int rc = shard_pack_record_check(p, msg); /* ours, or nothing in it is touched */
    if (!rc && p->s.resume)
        rc = shard_pack_record_resume(p, &p->resumed, msg);
    if (!rc && !p->resumed && !(rc = shard_pack_record_clear(p, msg)) &&
        !(rc = remove_earlier_set(p, stem_manifests, msg)))
        rc = shard_pack_record_start(p, msg);
    p->recording = !rc;
    return rc;
}

void shard_pack_attach(ShardPackPlan *p) { p->recording = 1; }

int shard_pack_kept(const ShardPackPlan *p, size_t j, ShardFileInfo *info)
{
    memset(info, 0, sizeof *info);
    if (!p->kept || j >= p->nshards || !p->kept[j].url)
        return 0;
    *info = p->kept[j];
    return (info->url = strdup(p->kept[j].url)) ? 1 : SHARD_ERR_NOMEM;
}

int shard_pack_resumed(const ShardPackPlan *p) { return p->resumed; }

int shard_pack_complete(const ShardPackPlan *p) { return p->complete; }

size_t shard_pack_replaced(const ShardPackPlan *p) { return p->replaced; }

int shard_pack_prepare(ShardPackPlan *p, const char *manifest_path, ShardError *err)
{
    if (!p->built)
        return shard_report(err, SHARD_ERR_STATE, "pack: build the plan before preparing its output");
    char msg[SHARD_ERROR_MAX];
    /* before anything of the set is touched; a bucket's outputs are not locked */
    if (!p->locked) {
        int rc = lock_output(p, msg);
        if (rc)
            return shard_report(err, rc, msg);
        p->locked = 1;
    }
    int shared = refuse_shared_indexes(p, msg); /* before anything is removed: a manifest too */
    if (shared)
        return shard_report(err, shared, msg);
    if (p->s.resume && manifest_path) { /* a finished set: nothing to touch */
        int rc = shard_pack_record_check(p, msg);
        if (!rc)
            rc = shard_pack_record_complete(p, manifest_path, &p->complete, msg);
        if (rc)
            return shard_report(err, rc, msg);
        if (p->complete) {
            p->resumed = 1;
            return 0;
        }
    }
    if (manifest_path) {
        ShardStore *m = NULL;
        int rc = shard_sink_check(manifest_path, msg); /* a name it can write, or nothing done */
        if (!rc)
            rc = shard_store_open(&m, manifest_path, p->remote, msg);
        if (!rc)
            rc = shard_store_remove(m, manifest_path, msg);
        shard_store_free(&m);
        if (rc)
            return shard_report(err, rc, msg);
    }
    /* temporaries of killed runs (a bucket has none: an upload that never completed is no
     * object). First those of this part's shards, indexes and columns. */
    ShardKeySet mine = {.owns = 1};
    size_t lo, hi;
    shard_pack_plan_part(p, &lo, &hi);
    char *first = shard_pack_numbered(p->pattern, lo);
    char *dir = first ? shard_dir_of(first) : NULL;
    int rc = first && dir ? 0 : SHARD_ERR_NOMEM;
    for (size_t j = lo; j < hi && !rc; j++) {
        char *path = shard_pack_numbered(p->pattern, j), *ipath = path ? shard_index_path(path) : NULL;
        char *cpath = path ? shard_columns_path(path) : NULL;
        char *a = path ? strdup(shard_base_name(path)) : NULL;
        char *b = ipath ? strdup(shard_base_name(ipath)) : NULL;
        char *c = cpath ? strdup(shard_base_name(cpath)) : NULL;
        if (!a || !b || !c || shard_keyset_insert(&mine, a) < 0 || shard_keyset_insert(&mine, b) < 0 ||
            shard_keyset_insert(&mine, c) < 0)
            rc = SHARD_ERR_NOMEM;
        free(path);
        free(ipath);
        free(cpath);
    }
    if (!rc)
        shard_sink_sweep(dir, &mine);
    shard_keyset_free(&mine);
    if (!rc && manifest_path) { /* a run killed while writing its manifest */
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
    if (rc)
        return shard_report(err, rc, "out of memory");
    rc = keep_or_replace(p, manifest_path, msg);
    return rc ? shard_report(err, rc, msg) : 0;
}

size_t shard_pack_leftovers(const ShardPackPlan *p, void (*fn)(void *cookie, const char *path),
                            void *cookie)
{
    size_t found = 0;
    if (p->s.nparts || (shard_store_can(p->pattern) & SHARD_STORE_COSTLY))
        return 0; /* a part does not know how many shards the others write; a store far
                     away is not asked for this, a request per name */
    /* an earlier run numbered its shards on from 0: follow the numbers past this run's */
    for (uint64_t k = p->nshards;; k++) {
        char *path = shard_pack_numbered(p->pattern, k);
        char *beside[3] = {path, path ? shard_index_path(path) : NULL,
                           path ? shard_columns_path(path) : NULL};
        int any = 0;
        for (size_t b = 0; b < 3; b++) {
            uint64_t size;
            char msg[SHARD_ERROR_MAX];
            if (beside[b] && shard_store_stat(p->out, beside[b], &size, msg) == 0) {
                fn(cookie, beside[b]);
                found++;
                any = 1;
            }
        }
        for (size_t b = 0; b < 3; b++)
            free(beside[b]);
        if (!any)
            break;
    }
    return found;
}

int shard_pack_manifest(ShardManifest **out, const ShardPackPlan *p, const char *manifest_path)
{
    *out = NULL;
    char *stem = strdup(manifest_path);
    char *opts = shard_pack_options_json(p);
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
    if (p->complete) /* the set as its record says it is: its manifest stays as it was */
        return 0;
    ShardStore *to;
    int rc = shard_store_open(&to, manifest_path, p->remote, msg);
    if (rc)
        return shard_report(err, rc, msg);
    rc = shard_manifest_write_remote(m, manifest_path, shard_store_remote(to), err);
    shard_store_free(&to);
    /* The set (or this part) is whole: its record keeps its plan and says so, the markers go
     * (a --resume then finds nothing to do). Left as it was when that fails: a --resume then
     * keeps every shard and writes the manifest again. */
    if (!rc && p->recording)
        shard_pack_record_finish(p, manifest_path, msg);
    return rc;
}
