/*
 * Writing a manifest (shard/manifest.h: shard_manifest_write): local shard paths relative to
 * the manifest's folder, atomically (temporary name, fsync, rename); into a bucket, through
 * a temporary file uploaded whole.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/error.h"
#include "base/text.h"
#include "catalog/manifestdef.h"
#include "remote/store.h"
#include "sink/sink.h"

/* The last shard folder resolved (realpath walks every component: a set's shards share
 * their folder, resolved once). */
typedef struct RealDir {
    char dir[PATH_MAX], real[PATH_MAX];
} RealDir;

static int resolved(RealDir *c, const char *dir, char *real)
{
    if (c->dir[0] && !strcmp(c->dir, dir)) {
        memcpy(real, c->real, strlen(c->real) + 1);
        return 1;
    }
    if (!realpath(dir, real))
        return 0;
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    snprintf(c->real, sizeof c->real, "%s", real);
    return 1;
}

/* The url as the manifest in folder mdir_real records it: relative to that folder (with
 * "../" where the shard lies elsewhere), so a dataset can be moved as a whole. */
static char *relative_url(const char *url, const char *mdir_real, RealDir *cache)
{
    if (mdir_real && mdir_real[0] != '/') {
        /* a manifest in a bucket (its folder's identity a URL, not a real path): shards
         * beside it or below it by name, others absolute */
        size_t n = strlen(mdir_real);
        return strdup(!strncmp(url, mdir_real, n) && url[n] == '/' && url[n + 1] ? url + n + 1 : url);
    }
    if (!(shard_store_can(url) & SHARD_STORE_BESIDE) || !mdir_real)
        return strdup(url);
    char *sdir = shard_dir_of(url);
    char *copy = strdup(url);
    char real[PATH_MAX];
    char *out = NULL;
    if (sdir && copy && resolved(cache, sdir, real)) {
        const char *base = basename(copy);
        /* The longest common prefix of whole components. */
        size_t common = 0;
        for (size_t i = 0;; i++) {
            char a = mdir_real[i], b = real[i];
            if ((a == '/' || !a) && (b == '/' || !b))
                common = i;
            if (!a || !b || a != b)
                break;
        }
        if (!strcmp(mdir_real, "/") || !strcmp(real, "/"))
            common = 0;
        size_t ups = 0;
        for (const char *p = mdir_real + common; *p; p++)
            ups += *p == '/';
        if (!strcmp(mdir_real, "/"))
            ups = 0;
        const char *rest = real + common;
        while (*rest == '/')
            rest++;
        size_t n = 3 * ups + strlen(rest) + strlen(base) + 2;
        if ((out = malloc(n))) {
            out[0] = 0;
            for (size_t i = 0; i < ups; i++)
                strcat(out, "../");
            if (*rest) {
                strcat(out, rest);
                strcat(out, "/");
            }
            strcat(out, base);
        }
    }
    if (!out)
        out = strdup(url);
    free(sdir);
    free(copy);
    return out;
}

static json_t *to_json(const ShardManifest *m, const char *mdir_real)
{
    json_t *root = json_object();
    json_t *list = json_array();
    json_t *lib = json_object();
    json_t *classes = json_array();
    json_t *options = json_loads(m->options, 0, NULL);
    RealDir *cache = calloc(1, sizeof *cache);
    if (!root || !list || !lib || !classes || !options || !cache)
        goto fail;
    json_object_set_new(root, "__kind__", json_string(WIDS_KIND));
    json_object_set_new(root, "wids_version", json_integer(1));
    json_object_set_new(root, "name", json_string(m->name));
    for (size_t i = 0; i < m->n; i++) {
        const ShardFileInfo *s = &m->shards[i];
        char *url = relative_url(s->url, mdir_real, cache);
        json_t *o = json_object();
        if (!url || !o) {
            free(url);
            json_decref(o);
            goto fail;
        }
        json_object_set_new(o, "url", json_string(url));
        free(url);
        json_object_set_new(o, "nsamples", json_integer((json_int_t)s->nsamples));
        json_object_set_new(o, "filesize", json_integer((json_int_t)s->filesize));
        if (s->md5[0])
            json_object_set_new(o, "md5sum", json_string(s->md5));
        if (s->sha256[0])
            json_object_set_new(o, "sha256", json_string(s->sha256));
        json_object_set_new(o, "tarsize", json_integer((json_int_t)s->tarsize));
        json_array_append_new(list, o);
    }
    json_object_set_new(root, "shardlist", list);
    list = NULL;
    for (size_t i = 0; i < m->nclasses; i++)
        json_array_append_new(classes, json_string(m->classes[i]));
    json_object_set_new(lib, "version", json_integer(1));
    json_object_set_new(lib, "classes", classes);
    classes = NULL;
    json_object_set_new(lib, "nsamples", json_integer((json_int_t)shard_manifest_samples(m)));
    json_object_set_new(lib, "options", options);
    options = NULL;
    if (m->nparts)
        json_object_set_new(lib, "part", json_pack("{s:I,s:I,s:I}", "index", (json_int_t)m->part,
                                                   "of", (json_int_t)m->nparts, "shards",
                                                   (json_int_t)m->plan_shards));
    json_object_set_new(root, "libshard", lib);
    free(cache);
    return root;
fail:
    free(cache);
    json_decref(root);
    json_decref(list);
    json_decref(lib);
    json_decref(classes);
    json_decref(options);
    return NULL;
}

int shard_manifest_write(const ShardManifest *m, const char *path, ShardError *err)
{
    return shard_manifest_write_remote(m, path, NULL, err);
}

int shard_manifest_write_remote(const ShardManifest *m, const char *path, ShardRemote *remote,
                                ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    char *mdir = shard_dir_of(path);
    char real[PATH_MAX];
    /* the folder's real path, or a bucket's prefix as it is named */
    char *id = mdir ? shard_store_identity(mdir) : NULL;
    const char *mdir_real = id && strlen(id) < sizeof real ? strcpy(real, id) : NULL;
    free(id);
    free(mdir);
    if (!mdir_real) {
        int e = errno;
        shard_fail(msg, shard_errno_code(e), "%s: the manifest's folder is not usable: %s",
                   path, strerror(e));
        return shard_report(err, shard_errno_code(e), msg);
    }
    json_t *root = to_json(m, mdir_real);
    char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_ENSURE_ASCII) : NULL;
    json_decref(root);
    if (!text)
        return shard_report(err, SHARD_ERR_NOMEM, "manifest: out of memory");
    ShardSinkSettings ks = {.sync = 1, .remote = remote};
    ShardSink *k;
    int rc = shard_sink_open(&k, path, &ks, msg);
    if (!rc) {
        rc = shard_sink_write(k, text, strlen(text), msg);
        if (!rc)
            rc = shard_sink_write(k, "\n", 1, msg);
        if (!rc)
            rc = shard_sink_commit(&k, NULL, NULL, msg);
        else
            shard_sink_abort(&k);
    }
    free(text);
    return rc ? shard_report(err, rc, msg) : 0;
}
