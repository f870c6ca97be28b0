/*
 * Dataset manifests (formats/manifest.md), read and written with jansson. Objects keep
 * insertion order in jansson, which makes the output byte-for-byte reproducible.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/text.h"
#include "catalog/manifest.h"
#include "remote/remote.h"
#include "remote/upload.h"
#include "shard/manifest.h"
#include "sink/atomicfile.h"
#include "source/open.h"
#include "source/url.h"

#define WIDS_KIND "wids-shard-index-v1"

struct ShardManifest {
    char *name;
    ShardFileInfo *shards;
    size_t n, cap;
    char **classes;
    size_t nclasses;
    char *options; /* compact JSON object text */
    size_t part, nparts, plan_shards; /* a part of a plan (nparts 0: not one) */
};

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
    m->name = shard_strdup(name ? name : "");
    m->options = shard_strdup("{}");
    if (!m->name || !m->options) {
        shard_manifest_free(&m);
        return SHARD_ERR_NOMEM;
    }
    *out = m;
    return 0;
}

int shard_manifest_set_name(ShardManifest *m, const char *name)
{
    char *copy = shard_strdup(name ? name : "");
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
    if (shard_array_grow(&m->shards, &m->cap, m->n + 1, sizeof *m->shards, 64))
        return SHARD_ERR_NOMEM;
    ShardFileInfo copy = *info;
    copy.url = shard_strdup(info->url);
    if (!copy.url)
        return SHARD_ERR_NOMEM;
    m->shards[m->n++] = copy;
    return 0;
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
        if (!(c[i] = shard_strdup(names[i]))) {
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


/* The url as the manifest in folder mdir_real records it: relative to that folder (with
 * "../" where the shard lies elsewhere), so a dataset can be moved as a whole. */
static char *relative_url(const char *url, const char *mdir_real)
{
    if (mdir_real && shard_url_is_remote(mdir_real)) {
        /* a manifest in a bucket: shards beside it or below it by name, others absolute */
        size_t n = strlen(mdir_real);
        return shard_strdup(!strncmp(url, mdir_real, n) && url[n] == '/' && url[n + 1] ? url + n + 1 : url);
    }
    if (!shard_url_has_siblings(url) || !mdir_real)
        return shard_strdup(url);
    char *sdir = shard_dir_of(url);
    char *copy = shard_strdup(url);
    char real[PATH_MAX];
    char *out = NULL;
    if (sdir && copy && realpath(sdir, real)) {
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
        out = shard_strdup(url);
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
    if (!root || !list || !lib || !classes || !options)
        goto fail;
    json_object_set_new(root, "__kind__", json_string(WIDS_KIND));
    json_object_set_new(root, "wids_version", json_integer(1));
    json_object_set_new(root, "name", json_string(m->name));
    for (size_t i = 0; i < m->n; i++) {
        const ShardFileInfo *s = &m->shards[i];
        char *url = relative_url(s->url, mdir_real);
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
    return root;
fail:
    json_decref(root);
    json_decref(list);
    json_decref(lib);
    json_decref(classes);
    json_decref(options);
    return NULL;
}

/* A manifest into a bucket: written to a temporary file, then uploaded (upload.c). */
static int write_remote(const char *path, const char *text, char *msg)
{
    const char *tmpdir = getenv("TMPDIR");
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/libshard-manifest-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    int fd = mkstemp(tmp);
    if (fd < 0)
        return shard_fail(msg, shard_errno_code(errno), "%s: cannot make a temporary file: %s", tmp,
                          strerror(errno));
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n && write(fd, "\n", 1) == 1
                 ? 0
                 : shard_fail(msg, SHARD_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    close(fd);
    ShardRemote *r = rc ? NULL : shard_remote_default(msg);
    if (!rc && !r)
        rc = SHARD_ERR_NOMEM;
    if (!rc)
        rc = shard_object_upload(r, path, tmp, msg);
    if (r)
        shard_remote_put(r);
    unlink(tmp);
    return rc;
}

int shard_manifest_write(const ShardManifest *m, const char *path, ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    char *mdir = shard_dir_of(path);
    char real[PATH_MAX];
    int remote = shard_url_is_remote(path);
    const char *mdir_real = mdir && (remote ? snprintf(real, sizeof real, "%s", mdir) < (int)sizeof real
                                            : realpath(mdir, real) != NULL)
                                ? real
                                : NULL;
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
    int rc = 0;
    if (remote) {
        rc = write_remote(path, text, msg);
    } else {
        ShardAtomicFile f;
        rc = shard_afile_open(&f, path, 1, 0, msg);
        if (!rc) {
            rc = shard_afile_write(&f, text, strlen(text), msg);
            if (!rc)
                rc = shard_afile_write(&f, "\n", 1, msg);
            if (!rc)
                rc = shard_afile_commit(&f, NULL, NULL, msg);
            else
                shard_afile_abort(&f);
        }
    }
    free(text);
    return rc ? shard_report(err, rc, msg) : 0;
}

static int bad(ShardError *err, const char *path, const char *what)
{
    char msg[SHARD_ERROR_MAX];
    shard_fail(msg, SHARD_ERR_FORMAT, "%s: not a libshard/wids manifest: %s", path, what);
    return shard_report(err, SHARD_ERR_FORMAT, msg);
}

static int get_u64(json_t *o, const char *key, uint64_t *v, int required)
{
    json_t *x = json_object_get(o, key);
    if (!x)
        return required ? -1 : 0;
    if (!json_is_integer(x) || json_integer_value(x) < 0)
        return -1;
    *v = (uint64_t)json_integer_value(x);
    return 0;
}

static int get_hex(json_t *o, const char *key, char *out, size_t len)
{
    json_t *x = json_object_get(o, key);
    out[0] = 0;
    if (!x)
        return 0;
    const char *s = json_string_value(x);
    if (!s || strlen(s) != len - 1)
        return -1;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
            return -1;
    memcpy(out, s, len);
    return 0;
}

/* The most a manifest may take: a million shards at a few hundred bytes each. */
#define MAX_MANIFEST_BYTES ((size_t)1 << 30)

int shard_manifest_read(ShardManifest **out, const char *path, ShardError *err)
{
    return shard_manifest_read_remote(out, path, NULL, err);
}

int shard_manifest_read_remote(ShardManifest **out, const char *path, ShardRemote *remote,
                               ShardError *err)
{
    *out = NULL;
    char msg[SHARD_ERROR_MAX];
    ShardBuf b = {0};
    int rc = shard_source_slurp(path, remote, &b, MAX_MANIFEST_BYTES, msg);
    if (!rc)
        rc = shard_manifest_parse(out, (const char *)b.data, b.len, path, err);
    else
        shard_report(err, rc, msg);
    shard_buf_free(&b);
    return rc;
}

int shard_manifest_parse(ShardManifest **out, const char *text, size_t len, const char *path,
                         ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    *out = NULL;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        shard_fail(msg, SHARD_ERR_FORMAT, "%s: line %d, column %d (byte %d): %s", path,
                   je.line, je.column, je.position, je.text);
        return shard_report(err, SHARD_ERR_FORMAT, msg);
    }
    int rc = SHARD_ERR_FORMAT;
    ShardManifest *m = NULL;
    json_t *list = json_object_get(root, "shardlist");
    const char *kind = json_string_value(json_object_get(root, "__kind__"));
    if (!json_is_object(root) || !json_is_array(list)) {
        rc = bad(err, path, "no \"shardlist\" array");
        goto out;
    }
    if (kind && strcmp(kind, WIDS_KIND)) {
        rc = bad(err, path, "\"__kind__\" is not \"" WIDS_KIND "\"");
        goto out;
    }
    if (shard_manifest_new(&m, json_string_value(json_object_get(root, "name")))) {
        rc = shard_report(err, SHARD_ERR_NOMEM, "manifest: out of memory");
        goto out;
    }
    size_t i;
    json_t *o;
    json_array_foreach(list, i, o) {
        const char *url = json_string_value(json_object_get(o, "url"));
        ShardFileInfo info = {0};
        if (!json_is_object(o) || !url || !*url || get_u64(o, "nsamples", &info.nsamples, 1) ||
            get_u64(o, "filesize", &info.filesize, 0) || get_u64(o, "tarsize", &info.tarsize, 0) ||
            get_hex(o, "md5sum", info.md5, sizeof info.md5) ||
            get_hex(o, "sha256", info.sha256, sizeof info.sha256)) {
            snprintf(msg, sizeof msg, "shardlist[%zu] lacks a valid url or nsamples, or has a "
                                      "malformed filesize, md5sum or sha256", i);
            rc = bad(err, path, msg);
            goto out;
        }
        char *full = shard_url_resolve(path, url);
        info.url = full;
        int arc = full ? shard_manifest_add(m, &info) : SHARD_ERR_NOMEM;
        free(full);
        if (arc) {
            rc = shard_report(err, arc, "manifest: out of memory");
            goto out;
        }
    }
    json_t *lib = json_object_get(root, "libshard");
    if (lib) {
        json_t *classes = json_object_get(lib, "classes");
        json_t *options = json_object_get(lib, "options");
        json_t *part = json_object_get(lib, "part");
        json_int_t pi = 0, pn = 0, ps = 0;
        if (part && (json_unpack(part, "{s:I,s:I,s:I}", "index", &pi, "of", &pn, "shards", &ps) ||
                     pi < 0 || pn <= pi || ps < 0)) {
            rc = bad(err, path, "\"libshard.part\" is not {\"index\", \"of\", \"shards\"} "
                     "with index < of");
            goto out;
        }
        if (part)
            shard_manifest_set_part(m, (size_t)pi, (size_t)pn, (size_t)ps);
        if (classes) {
            if (!json_is_array(classes)) {
                rc = bad(err, path, "\"libshard.classes\" is not an array");
                goto out;
            }
            size_t n = json_array_size(classes);
            const char **names = calloc(n ? n : 1, sizeof *names);
            if (!names) {
                rc = shard_report(err, SHARD_ERR_NOMEM, "manifest: out of memory");
                goto out;
            }
            json_t *c;
            int ok = 1;
            json_array_foreach(classes, i, c) {
                if (!(names[i] = json_string_value(c)))
                    ok = 0;
            }
            int crc = ok ? shard_manifest_set_classes(m, names, n) : SHARD_ERR_FORMAT;
            free(names);
            if (crc) {
                rc = crc == SHARD_ERR_FORMAT ? bad(err, path, "a class name is not a string")
                                             : shard_report(err, crc, "manifest: out of memory");
                goto out;
            }
        }
        if (options) {
            char *text = json_is_object(options) ? json_dumps(options, JSON_COMPACT) : NULL;
            if (!text) {
                rc = bad(err, path, "\"libshard.options\" is not an object");
                goto out;
            }
            free(m->options);
            m->options = text;
        }
    }
    rc = 0;
    *out = m;
    m = NULL;
out:
    shard_manifest_free(&m);
    json_decref(root);
    return rc;
}

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
    for (size_t i = 0; i < m->n; i++)
        free((char *)m->shards[i].url);
    free(m->shards);
    free_classes(m);
    free(m->name);
    free(m->options);
    free(m);
    *pm = NULL;
}
