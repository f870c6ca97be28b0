/*
 * The pack plan (shard/pack.h): keys, the shuffle, shards cut by the writer's rule, the
 * sample convention (image, cls, json), writing one shard, and the manifest that goes
 * with the plan.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <libgen.h>
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
#include "pack/plan.h"
#include "pack/shrink.h"
#include "remote/remote.h"
#include "remote/upload.h"
#include "shard/file.h"
#include "shard/image.h"
#include "shard/names.h"
#include "shard/pack.h"
#include "source/open.h"
#include "source/url.h"
#include "write/writer.h"

typedef struct Input {
    ShardPackInput in; /* strings point at the copies below */
    char *path, *rel, *field, *class_name, *extra;
    char *key;
} Input;

struct ShardPackPlan {
    ShardPackSettings s;
    char *pattern;
    Input *v;
    size_t n, cap;
    char **classes;
    size_t nclasses;
    size_t *first; /* nshards + 1 boundaries */
    size_t nshards;
    ShardRemote *remote; /* a reference: remote inputs are read through it; NULL until one */
    pthread_mutex_t remote_mu;
    /* Packing into a bucket: the shards' URLs (the settings' pattern), while the writer
     * writes each shard into stage (a temporary folder) to be uploaded, then removed. */
    char *out_pattern;
    char *stage;
    int built;
};

/* Number k in a pattern, malloc'd (NULL when out of memory). */
static char *numbered_with(const char *pattern, uint64_t k)
{
    int n = snprintf(NULL, 0, pattern, (unsigned long long)k);
    char *path = n < 0 ? NULL : malloc((size_t)n + 1);
    if (path)
        snprintf(path, (size_t)n + 1, pattern, (unsigned long long)k);
    return path;
}


static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

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
}

/* The writer settings for shard j of the plan: one shard, numbered j, no rotation. */
static void writer_settings(const ShardPackPlan *p, size_t j, ShardWriterSettings *w)
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

/* Packing into gs:// or s3://: the writer writes into a temporary folder (p->stage), under
 * the pattern's file name, and each shard is uploaded when complete. */
static int stage_output(ShardPackPlan *p, ShardError *err)
{
    if (strncmp(p->pattern, "gs://", 5) && strncmp(p->pattern, "s3://", 5))
        return shard_report(err, SHARD_ERR_UNSUPPORTED,
                            "pack: shards can be written to a folder, gs:// or s3://, not plain HTTP");
    const char *tmpdir = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/libshard-pack-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(tmpl)) {
        char msg[SHARD_ERROR_MAX];
        int code = shard_fail(msg, shard_errno_code(errno), "%s: cannot make a staging folder: %s",
                              tmpl, strerror(errno));
        return shard_report(err, code, msg);
    }
    p->out_pattern = p->pattern;
    p->stage = shard_strdup(tmpl);
    size_t n = strlen(tmpl) + strlen(base_of(p->out_pattern)) + 2;
    p->pattern = malloc(n);
    if (!p->stage || !p->pattern)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    snprintf(p->pattern, n, "%s/%s", tmpl, base_of(p->out_pattern));
    p->s.sync = 0; /* staged files are uploaded, not kept */
    return 0;
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
    p->s = *s;
    if (p->s.mtime < 0)
        p->s.mtime = 0;
    if (p->s.inflight == 0)
        p->s.inflight = 1;
    if (p->s.inflight > 256)
        p->s.inflight = 256;
    pthread_mutex_init(&p->remote_mu, NULL);
    p->remote = s->remote ? shard_remote_ref(s->remote) : NULL;
    p->s.remote = NULL; /* the plan's own reference is p->remote */
    p->pattern = s->pattern ? shard_strdup(s->pattern) : NULL;
    if (p->pattern && shard_url_is_remote(p->pattern)) {
        int rc = stage_output(p, err);
        if (rc) {
            shard_pack_plan_free(&p);
            return rc;
        }
    }
    p->s.pattern = p->out_pattern ? p->out_pattern : p->pattern;
    /* Let the writer judge the pattern and the zstd options now, not after a long scan. */
    ShardWriterSettings ws;
    writer_settings(p, 0, &ws);
    ShardWriter *w;
    int rc = shard_writer_open(&w, &ws, err);
    shard_writer_free(&w);
    if (rc) {
        shard_pack_plan_free(&p);
        return rc;
    }
    *out = p;
    return 0;
}

ShardRemote *shard_pack_plan_remote(ShardPackPlan *p, char *err)
{
    pthread_mutex_lock(&p->remote_mu);
    if (!p->remote)
        p->remote = shard_remote_default(err);
    ShardRemote *r = p->remote;
    pthread_mutex_unlock(&p->remote_mu);
    return r;
}

unsigned shard_pack_plan_inflight(const ShardPackPlan *p)
{
    return p->s.inflight;
}

static char *copy_or_null(const char *s, int *bad)
{
    char *c = s ? shard_strdup(s) : NULL;
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
        if (!(c[i] = shard_strdup(names[i]))) {
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

/* Keys from relative paths, in input order; a clash gets the smallest free "_N". */
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

/* The sample's .json: its extra fields, path, label and class (and, resized, the
 * original's size). */
static char *sample_json(const Input *x, const ShardShrunk *shrunk)
{
    json_t *o = x->extra ? json_loads(x->extra, 0, NULL) : json_object();
    if (!o)
        return NULL;
    if (shrunk && shrunk->data) {
        json_object_set_new(o, "original_width", json_integer(shrunk->width));
        json_object_set_new(o, "original_height", json_integer(shrunk->height));
    }
    json_object_set_new(o, "path", json_string(x->rel));
    if (shard_url_is_remote(x->path))
        json_object_set_new(o, "url", json_string(x->path));
    if (x->in.label >= 0)
        json_object_set_new(o, "label", json_integer(x->in.label));
    if (x->class_name)
        json_object_set_new(o, "class", json_string(x->class_name));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

/* The fields of input x: image, cls (when labelled) and json. */
static size_t sample_fields(const Input *x, ShardField *f, const void *image, size_t image_size,
                            char *cls, const char *json)
{
    size_t n = 0;
    f[n++] = (ShardField){x->field, image, image_size};
    if (x->in.label >= 0) {
        int k = snprintf(cls, 24, "%lld", (long long)x->in.label);
        f[n++] = (ShardField){"cls", cls, (size_t)k};
    }
    f[n++] = (ShardField){"json", json, strlen(json)};
    return n;
}

static uint64_t sample_size(const Input *x)
{
    char *json = sample_json(x, NULL);
    char cls[24];
    ShardField f[3];
    ShardSample s = {x->key, f, sample_fields(x, f, NULL, x->in.size, cls, json ? json : "")};
    uint64_t size = shard_writer_sample_size(&s);
    free(json);
    return size;
}

int shard_pack_plan_build(ShardPackPlan *p, ShardError *err)
{
    if (p->built)
        return shard_report(err, SHARD_ERR_STATE, "pack: the plan is built already");
    int rc = assign_keys(p, err);
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
        uint64_t s = sample_size(&p->v[i]);
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

/* ---- writing a shard ------------------------------------------------------------------- */

/* Reads a whole file into *buf; returns 0, or an errno value, or -1 for a size change, -2
 * for a file that is no longer a regular one.
 * An input replaced by something that is no regular file (a FIFO, a device) since the scan
 * is refused at open, not waited on. */
static int read_input(const Input *x, unsigned char **buf, size_t *cap)
{
    int fd = open(x->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -2;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (*cap < x->in.size + 1) {
        free(*buf);
        *cap = x->in.size + 1;
        *buf = malloc(*cap);
        if (!*buf) {
            *cap = 0;
            close(fd);
            return ENOMEM;
        }
    }
    size_t got = 0;
    for (;;) {
        /* One byte more than expected, to notice a file that grew. */
        ssize_t k = read(fd, *buf + got, x->in.size + 1 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            return e;
        }
        if (k == 0)
            break;
        got += (size_t)k;
        if (got > x->in.size)
            break;
    }
    close(fd);
    return got == x->in.size ? 0 : -1;
}

/* Opens the remote inputs among [*next, min(i + w, end)) and starts their transfers, so
 * that w of them are on their way while one is written. A slot left NULL (the open
 * failed) is opened again when its turn comes, for the message. */
static void open_ahead(const ShardPackPlan *p, ShardRemote *r, ShardSource **ring, size_t w,
                       size_t i, size_t end, size_t *next)
{
    for (; *next < end && *next < i + w; (*next)++) {
        const Input *x = &p->v[*next];
        ShardSource *s = NULL;
        char err[SHARD_ERROR_MAX];
        if (r && shard_url_is_remote(x->path) &&
            !shard_source_open(&s, x->path, r, SHARD_SOURCE_SEQUENTIAL, err))
            shard_source_prefetch(s);
        ring[*next % w] = s;
    }
}

/* A remote input read whole through s (taken; NULL: opened now): 0, 1 when it cannot be
 * read (what says why, naming the URL and offset), -1 when its size is not the listed one. */
static int read_remote(ShardRemote *r, const Input *x, ShardSource *s, unsigned char **buf,
                       size_t *cap, char *what)
{
    if (!s && shard_source_open(&s, x->path, r, SHARD_SOURCE_SEQUENTIAL, what))
        return 1;
    if (*cap < x->in.size + 1) {
        free(*buf);
        *cap = x->in.size + 1;
        if (!(*buf = malloc(*cap))) {
            *cap = 0;
            shard_source_put(s);
            snprintf(what, SHARD_ERROR_MAX, "out of memory");
            return 1;
        }
    }
    size_t got = 0;
    const void *b;
    ssize_t k;
    int rc = 0;
    while ((k = shard_source_read(s, &b)) > 0) {
        if ((uint64_t)k > x->in.size - got) {
            rc = -1; /* grew: no need to read the rest */
            break;
        }
        memcpy(*buf + got, b, (size_t)k);
        got += (size_t)k;
    }
    if (k < 0) {
        snprintf(what, SHARD_ERROR_MAX, "%s", s->err);
        rc = 1;
    } else if (!rc && got != x->in.size) {
        rc = -1;
    }
    shard_source_put(s);
    return rc;
}

/* A bad input: 1 to leave it out, or 0 after the error is set. */
static int bad_input(const ShardPackCallbacks *cb, size_t i, const Input *x, ShardPackBad why,
                     const char *what, char *msg)
{
    if (cb && cb->on_bad && cb->on_bad(cb->cookie, i, why, what))
        return 1;
    shard_fail(msg, why == SHARD_PACK_UNREADABLE ? SHARD_ERR_IO : SHARD_ERR_FORMAT, "%s: %s",
               x->path, what);
    return 0;
}

/* A staged shard and its index put into the bucket (the index first, so that a shard
 * found there has its index), then removed here; info->url becomes the shard's URL. */
static int upload_shard(const ShardPackPlan *p, size_t j, ShardFileInfo *info, char *msg)
{
    ShardRemote *r = shard_pack_plan_remote((ShardPackPlan *)p, msg);
    char *url = numbered_with(p->out_pattern, j);
    char *ipath = shard_index_path(info->url), *iurl = url ? shard_index_path(url) : NULL;
    int rc = r && url && ipath && iurl ? 0 : SHARD_ERR_NOMEM;
    if (rc)
        shard_fail(msg, rc, "out of memory");
    if (!rc && access(ipath, F_OK) == 0)
        rc = shard_object_upload(r, iurl, ipath, msg);
    if (!rc)
        rc = shard_object_upload(r, url, info->url, msg);
    if (ipath)
        unlink(ipath);
    unlink(info->url);
    free((char *)info->url);
    info->url = url;
    if (rc) {
        free(url);
        info->url = NULL;
    }
    free(ipath);
    free(iurl);
    return rc;
}

int shard_pack_write_shard(const ShardPackPlan *p, size_t j, const ShardPackCallbacks *cb,
                           ShardFileInfo *info, ShardError *err)
{
    memset(info, 0, sizeof *info);
    if (!p->built || j >= p->nshards)
        return shard_report(err, SHARD_ERR_INVALID, "pack: no such shard in the plan");
    ShardWriterSettings ws;
    writer_settings(p, j, &ws);
    ShardWriter *w;
    int rc = shard_writer_open(&w, &ws, err);
    if (rc)
        return rc;
    char msg[SHARD_ERROR_MAX] = "";
    unsigned char *buf = NULL;
    size_t cap = 0, win = p->s.inflight, end = p->first[j + 1], next = p->first[j];
    ShardRemote *remote = NULL;
    for (size_t i = p->first[j]; i < end && !remote; i++)
        if (shard_url_is_remote(p->v[i].path) &&
            !(remote = shard_pack_plan_remote((ShardPackPlan *)p, msg)))
            rc = SHARD_ERR_NOMEM;
    ShardSource **ring = remote ? calloc(win, sizeof *ring) : NULL;
    if (remote && !ring)
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    for (size_t i = p->first[j]; i < end && !rc; i++) {
        const Input *x = &p->v[i];
        char what[SHARD_ERROR_MAX];
        int e;
        if (remote && shard_url_is_remote(x->path)) {
            open_ahead(p, remote, ring, win, i, end, &next);
            e = read_remote(remote, x, ring[i % win], &buf, &cap, what);
            ring[i % win] = NULL;
            if (e == 1) {
                if (!bad_input(cb, i, x, SHARD_PACK_UNREADABLE, what, msg))
                    rc = SHARD_ERR_IO;
                continue;
            }
            e = e ? -1 : 0;
        } else {
            e = read_input(x, &buf, &cap);
        }
        if (e) {
            if (e > 0)
                snprintf(what, sizeof what, "cannot read: %s", strerror(e));
            if (!bad_input(cb, i, x, e > 0 ? SHARD_PACK_UNREADABLE : SHARD_PACK_CHANGED,
                           e > 0 ? what
                           : e == -2 ? "no longer a regular file (replaced since the scan)"
                                     : "file changed size while packing",
                           msg))
                rc = e > 0 ? SHARD_ERR_IO : SHARD_ERR_FORMAT;
            continue;
        }
        int vr = p->s.verify ? shard_image_verify(buf, x->in.size, what, sizeof what)
                             : (shard_image_format(buf, x->in.size) ? 0 : SHARD_ERR_FORMAT);
        if (vr == SHARD_ERR_FORMAT && !p->s.verify)
            snprintf(what, sizeof what,
                     "not an image (no JPEG, PNG, GIF, WebP, BMP, TIFF or PNM signature)");
        if (vr) {
            if (!bad_input(cb, i, x, vr == SHARD_ERR_FORMAT ? SHARD_PACK_NOT_IMAGE : SHARD_PACK_CORRUPT,
                           what, msg))
                rc = vr;
            continue;
        }
        ShardShrunk shrunk = {0};
        if (p->s.max_side) {
            int sr = shard_jpeg_shrink(buf, x->in.size, (int)p->s.max_side, p->s.quality, &shrunk, what);
            if (sr) {
                if (!bad_input(cb, i, x, sr == SHARD_ERR_NOMEM ? SHARD_PACK_UNREADABLE : SHARD_PACK_CORRUPT,
                               what, msg))
                    rc = sr;
                continue;
            }
        }
        char *json = sample_json(x, &shrunk);
        char cls[24];
        ShardField f[3];
        ShardSample sample = {x->key, f,
                              sample_fields(x, f, shrunk.data ? shrunk.data : buf,
                                            shrunk.data ? shrunk.size : x->in.size, cls,
                                            json ? json : "{}")};
        int wr = json ? shard_writer_add(w, &sample) : SHARD_ERR_NOMEM;
        free(json);
        free(shrunk.data);
        if (wr) {
            rc = wr;
            snprintf(msg, sizeof msg, "%s", wr == SHARD_ERR_NOMEM && !json ? "out of memory"
                                                                             : shard_writer_error(w));
        } else if (cb && cb->on_written && cb->on_written(cb->cookie, i, x->in.size)) {
            rc = shard_fail(msg, SHARD_ERR_STATE, "pack: stopped");
        }
    }
    free(buf);
    for (size_t k = 0; ring && k < win; k++)
        shard_source_put(ring[k]); /* opened ahead of a failure */
    free(ring);
    if (!rc && shard_writer_finish(w)) {
        rc = SHARD_ERR_IO;
        snprintf(msg, sizeof msg, "%s", shard_writer_error(w));
    }
    if (!rc && shard_writer_count(w) == 1) {
        *info = *shard_writer_shard(w, 0);
        if (!(info->url = shard_strdup(info->url)))
            rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
        else if (p->out_pattern)
            rc = upload_shard(p, j, info, msg);
    }
    shard_writer_free(&w);
    return rc ? shard_report(err, rc, msg) : 0;
}

/* ---- a run's folder: before and after --------------------------------------------------- */

/* Shard number k's path, malloc'd (NULL when out of memory). */
static char *numbered(const ShardPackPlan *p, uint64_t k)
{
    return numbered_with(p->pattern, k);
}


/* Removes the temporaries (".NAME.tmp-*", atomicfile.c) an earlier, killed run left in dir
   for the NAMEs in names. */
static void remove_temporaries(const char *dir, const ShardKeySet *names)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *tmp = strstr(e->d_name, ".tmp-");
        if (e->d_name[0] != '.' || !tmp)
            continue;
        char *base = strndup(e->d_name + 1, (size_t)(tmp - e->d_name - 1));
        if (base && shard_keyset_has(names, base)) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        free(base);
    }
    if (d)
        closedir(d);
}

int shard_pack_prepare(const ShardPackPlan *p, const char *manifest_path, ShardError *err)
{
    if (manifest_path && shard_url_is_remote(manifest_path)) {
        /* in a bucket, uploads leave no temporaries: the earlier manifest is all to go */
        char msg[SHARD_ERROR_MAX];
        ShardRemote *r = shard_pack_plan_remote((ShardPackPlan *)p, msg);
        int rc = r ? shard_object_delete(r, manifest_path, msg) : SHARD_ERR_NOMEM;
        return rc ? shard_report(err, rc, msg) : 0;
    }
    if (manifest_path && unlink(manifest_path) != 0 && errno != ENOENT) {
        int e = errno;
        char msg[SHARD_ERROR_MAX];
        shard_fail(msg, shard_errno_code(e), "%s: cannot remove the earlier manifest: %s",
                   manifest_path, strerror(e));
        return shard_report(err, shard_errno_code(e), msg);
    }
    /* the names of this part's shards and indexes */
    ShardKeySet mine = {.owns = 1};
    size_t lo, hi;
    shard_pack_plan_part(p, &lo, &hi);
    char *first = numbered(p, lo), *dir = first ? shard_dir_of(first) : NULL;
    int rc = first && dir ? 0 : SHARD_ERR_NOMEM;
    for (size_t j = lo; j < hi && !rc; j++) {
        char *path = numbered(p, j), *ipath = path ? shard_index_path(path) : NULL;
        char *a = path ? shard_strdup(base_of(path)) : NULL;
        char *b = ipath ? shard_strdup(base_of(ipath)) : NULL;
        if (!a || !b || shard_keyset_insert(&mine, a) < 0 || shard_keyset_insert(&mine, b) < 0)
            rc = SHARD_ERR_NOMEM;
        free(path);
        free(ipath);
    }
    if (!rc)
        remove_temporaries(dir, &mine);
    shard_keyset_free(&mine);
    if (!rc && manifest_path) { /* a run killed while writing its manifest left one too */
        ShardKeySet m = {.owns = 1};
        char *mdir = shard_dir_of(manifest_path), *mbase = shard_strdup(base_of(manifest_path));
        if (mdir && mbase && shard_keyset_insert(&m, mbase) >= 0)
            remove_temporaries(mdir, &m);
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
    if (p->s.nparts || p->out_pattern)
        return 0; /* a part does not know how many shards the others write; a bucket is
                     not listed for this */
    /* an earlier run numbered its shards on from 0: follow the numbers past this run's */
    for (uint64_t k = p->nshards;; k++) {
        char *path = numbered(p, k), *ipath = path ? shard_index_path(path) : NULL;
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

/* ---- the manifest ---------------------------------------------------------------------- */

char *shard_pack_manifest_path(const ShardPackSettings *s)
{
    /* out/train-%06d.tar.zst -> out/train.json: cut the name at the conversion, then drop
     * the separator before it. */
    char *p = shard_strdup(s->pattern);
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
    char *stem = shard_strdup(manifest_path);
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

void shard_pack_plan_free(ShardPackPlan **pp)
{
    if (!pp || !*pp)
        return;
    ShardPackPlan *p = *pp;
    for (size_t i = 0; i < p->n; i++) {
        Input *x = &p->v[i];
        free(x->path), free(x->rel), free(x->field), free(x->class_name), free(x->extra);
        free(x->key);
    }
    free(p->v);
    for (size_t i = 0; i < p->nclasses; i++)
        free(p->classes[i]);
    free(p->classes);
    free(p->first);
    free(p->pattern);
    free(p->out_pattern);
    if (p->stage)
        rmdir(p->stage); /* each staged file went when uploaded or failed */
    free(p->stage);
    if (p->remote)
        shard_remote_put(p->remote);
    pthread_mutex_destroy(&p->remote_mu);
    free(p);
    *pp = NULL;
}
