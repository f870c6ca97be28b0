/*
 * Shard lists (shard/list.h): brace patterns as WebDataset (braceexpand) writes them,
 * manifests, plain urls; and the sample counts indexes promise.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/text.h"
#include "base/thread.h"
#include "catalog/indexcache.h"
#include "catalog/manifest_remote.h"
#include "shard/file.h"
#include "shard/list.h"
#include "base/url.h"
#include "remote/store.h"
#include "remote/handle.h"
#include "remote/remotedef.h"
#include "source/open.h"
#include "tar/idx.h"

struct ShardList {
    ShardListEntry *v;
    size_t n, cap;
    ShardManifest **manifests; /* per spec, NULL where it was no manifest */
    size_t nspecs;
    uint64_t bytes; /* of the names brace patterns gave */
    uint64_t built, cached; /* indexes made, and found in the cache */
};

typedef ShardList List;

/* Appends a shard (taking url, which may be NULL after a failed copy). */
static int list_add(List *l, char *url, uint64_t nsamples, const ShardFileInfo *info, size_t spec)
{
    if (!url)
        return SHARD_ERR_NOMEM;
    if (shard_array_grow(&l->v, &l->cap, l->n + 1, sizeof *l->v, 16)) {
        free(url);
        return SHARD_ERR_NOMEM;
    }
    l->v[l->n++] = (ShardListEntry){url, nsamples, info, spec, NULL};
    return 0;
}

static int list_push(List *l, char *url, size_t spec)
{
    return list_add(l, url, SHARD_COUNT_UNKNOWN, NULL, spec);
}

static int expand(const char *s, List *l, char *err, const char *spec, size_t which);

/* Expands a's first na bytes, then b's first nb, then c, joined. */
static int expand_joined(const char *a, size_t na, const char *b, size_t nb, const char *c,
                         List *l, char *err, const char *spec, size_t which)
{
    size_t nc = strlen(c);
    char *s = malloc(na + nb + nc + 1);
    if (!s)
        return SHARD_ERR_NOMEM;
    memcpy(s, a, na);
    memcpy(s + na, b, nb);
    memcpy(s + na + nb, c, nc + 1);
    int rc = expand(s, l, err, spec, which);
    free(s);
    return rc;
}

/* the most names, and bytes of them, a list may hold: a typo ({0..9999999999}) fails
 * instead of filling memory */
#define MAX_EXPANSION 10000000ull
#define MAX_EXPANSION_BYTES (1ull << 30)

/* Expands the first brace group of s (recursively the rest) into l. */
static int expand(const char *s, List *l, char *err, const char *spec, size_t which)
{
    const char *open = strchr(s, '{');
    if (!open) {
        l->bytes += strlen(s) + 1;
        if (l->n >= MAX_EXPANSION || l->bytes > MAX_EXPANSION_BYTES)
            return shard_fail(err, SHARD_ERR_FORMAT,
                              "'%.200s': expands to more than %llu names or %llu bytes of them",
                              spec, MAX_EXPANSION, MAX_EXPANSION_BYTES);
        return list_push(l, strdup(s), which);
    }
    int depth = 0;
    const char *close = NULL;
    for (const char *p = open; *p; p++) {
        if (*p == '{')
            depth++;
        else if (*p == '}' && --depth == 0) {
            close = p;
            break;
        }
    }
    if (!close)
        return shard_fail(err, SHARD_ERR_FORMAT, "'%s': unmatched '{' at character %zu", spec,
                          (size_t)(open - s) + 1);
    size_t pre = (size_t)(open - s);
    const char *body = open + 1;
    size_t blen = (size_t)(close - body);
    const char *rest = close + 1;
    /* {A..B}: numeric range, zero padding from the wider bound */
    const char *dots = strstr(body, "..");
    if (dots && dots < close && !memchr(body, ',', blen)) {
        char *end;
        /* digits only: strtoull would take "-16" (as 2^64 - 16) and leading spaces */
        int ok = body[0] >= '0' && body[0] <= '9' && dots[2] >= '0' && dots[2] <= '9';
        unsigned long long a = strtoull(body, &end, 10);
        ok = ok && end == dots && body < dots;
        unsigned long long b = strtoull(dots + 2, &end, 10);
        ok = ok && end == close && dots + 2 < close;
        if (!ok)
            return shard_fail(err, SHARD_ERR_FORMAT, "'%s': '{%.*s}' is not a range like {000..123}",
                              spec, (int)blen, body);
        int width = (int)((size_t)(dots - body) > (size_t)(close - dots - 2) ? (size_t)(dots - body)
                                                                             : (size_t)(close - dots - 2));
        int pad = body[0] == '0' || dots[2] == '0';
        if (b < a || b - a >= MAX_EXPANSION)
            return shard_fail(err, SHARD_ERR_FORMAT, "'%s': range {%llu..%llu} is empty or too large",
                              spec, a, b);
        for (unsigned long long v = a;; v++) { /* to b included, which may be the largest */
            char num[32];
            int k = pad ? snprintf(num, sizeof num, "%0*llu", width, v) : snprintf(num, sizeof num, "%llu", v);
            int rc = expand_joined(s, pre, num, (size_t)k, rest, l, err, spec, which);
            if (rc)
                return rc;
            if (v == b)
                break;
        }
        return 0;
    }
    /* {a,b,c}: alternatives, split on top-level commas */
    const char *start = body;
    depth = 0;
    for (const char *p = body;; p++) {
        if (p == close || (*p == ',' && depth == 0)) {
            int rc = expand_joined(s, pre, start, (size_t)(p - start), rest, l, err, spec, which);
            if (rc)
                return rc;
            if (p == close)
                break;
            start = p + 1;
        } else if (*p == '{') {
            depth++;
        } else if (*p == '}') {
            depth--;
        }
    }
    return 0;
}

void shard_list_default_settings(ShardListSettings *s)
{
    memset(s, 0, sizeof *s);
    s->counts = 1;
}

/* The sample count the index beside a shard promises, or SHARD_COUNT_UNKNOWN. Only the
 * index's first line is read. */
static uint64_t index_count(const char *url, ShardRemote *remote)
{
    if (!shard_url_has_siblings(url))
        return SHARD_COUNT_UNKNOWN;
    char *ip = shard_index_path(url);
    ShardSource *s = NULL;
    char err[SHARD_ERROR_MAX];
    uint64_t n = SHARD_COUNT_UNKNOWN;
    if (ip && shard_source_open(&s, ip, remote, 0, err) == 0) {
        ShardBuf tmp = {0};
        const void *head = NULL;
        ssize_t len = 0;
        if (s->size >= 0 && shard_source_seekable(s)) {
            len = s->size < 64 ? (ssize_t)s->size : 64;
            head = shard_source_view(s, 0, (size_t)len, &tmp);
        } else {
            len = shard_source_read(s, &head);
        }
        int64_t c = head && len > 0 ? shard_index_header_count(head, (size_t)len) : -1;
        if (c >= 0)
            n = (uint64_t)c;
        shard_buf_free(&tmp);
        shard_source_put(s);
    }
    free(ip);
    return n;
}

#define COUNT_THREADS 16

typedef struct Counter {
    List *l;
    const ShardListSettings *s;
    char *dir;               /* the index cache (build_indexes) */
    atomic_size_t next;      /* the next entry to look at */
    atomic_size_t made;      /* indexes looked for in the cache or made so far */
    size_t tomake;           /* shards without a count, to look for or make */
    pthread_mutex_t mu;      /* the first error, the progress line */
    int rc;
    char err[SHARD_ERROR_MAX];
    double shown;            /* when the progress line was last drawn, 0: never */
} Counter;

static void progress(Counter *c, int last)
{
    if (!c->s->progress || !c->tomake || !isatty(2))
        return;
    double now = shard_seconds();
    pthread_mutex_lock(&c->mu);
    if (last ? c->shown > 0 : now - c->shown >= 0.2) {
        fprintf(stderr, "\rlibshard: indexing shards that have no index: %zu of %zu%s",
                atomic_load(&c->made), c->tomake, last ? "\n" : "");
        c->shown = now;
    }
    pthread_mutex_unlock(&c->mu);
}

/* Entry e's count: from its index's first line, else (build_indexes) its index made or
 * found in the cache. */
static void count_one(Counter *c, ShardListEntry *e)
{
    uint64_t beside = index_count(e->url, c->s->remote);
    if (!e->info)
        e->nsamples = beside;
    if (beside != SHARD_COUNT_UNKNOWN || !c->dir)
        return;
    char err[SHARD_ERROR_MAX], *path;
    uint64_t n;
    int built;
    int rc = shard_index_cached(c->dir, e->url, c->s->remote, &path, &n, &built, err);
    atomic_fetch_add(&c->made, 1);
    pthread_mutex_lock(&c->mu);
    if (rc && !c->rc) {
        c->rc = rc;
        snprintf(c->err, sizeof c->err, "%s", err);
    } else if (!rc && e->info && e->nsamples != n) {
        c->rc = shard_fail(c->err, SHARD_ERR_FORMAT,
                           "%s: has %llu samples, and its manifest says %llu", e->url,
                           (unsigned long long)n, (unsigned long long)e->nsamples);
        free(path);
    } else if (!rc) {
        e->nsamples = n;
        e->index = path;
        *(built ? &c->l->built : &c->l->cached) += 1;
    }
    pthread_mutex_unlock(&c->mu);
    progress(c, 0);
}

static void *count_main(void *arg)
{
    Counter *c = arg;
    for (size_t i; (i = atomic_fetch_add(&c->next, 1)) < c->l->n;)
        if (!c->l->v[i].info || c->s->build_indexes == SHARD_INDEXES_FOR_SEEKING)
            count_one(c, &c->l->v[i]);
    return NULL;
}

/* The counts of the shards no manifest described, from their indexes' first lines (and
 * with build_indexes, from indexes made for those without): several at a time, so that a
 * long brace pattern over a store far away does not pay one round trip after another, and
 * plain shards are scanned in parallel. */
static int counts(List *l, const ShardListSettings *s, char *msg)
{
    size_t costly = 0, todo = 0;
    int seeking = s->build_indexes == SHARD_INDEXES_FOR_SEEKING;
    for (size_t i = 0; i < l->n; i++) {
        int look = !l->v[i].info || seeking;
        todo += look && !shard_url_is_command(l->v[i].url);
        costly += look && shard_url_costly(l->v[i].url);
    }
    Counter c = {.l = l, .s = s};
    if (s->build_indexes && todo) {
        if (!(c.dir = shard_index_cache_dir(s->index_cache, s->remote)))
            return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
        c.tomake = todo;
    }
    pthread_mutex_init(&c.mu, NULL);
    pthread_t t[COUNT_THREADS];
    size_t nt = 0;
    size_t want = c.dir ? todo : costly > 1 ? costly : 0;
    size_t most = s->threads ? s->threads : COUNT_THREADS;
    if (most > COUNT_THREADS)
        most = COUNT_THREADS;
    if (want > most)
        want = most;
    while (nt + 1 < want && shard_thread_start(&t[nt], count_main, &c) == 0)
        nt++;
    count_main(&c); /* this thread too (alone when no thread could start) */
    while (nt)
        pthread_join(t[--nt], NULL);
    progress(&c, 1);
    pthread_mutex_destroy(&c.mu);
    free(c.dir);
    if (c.rc)
        return shard_fail(msg, c.rc, "%s", c.err);
    return 0;
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

/* Whether a spec names a manifest. */
static int is_manifest(const char *spec)
{
    return shard_ends_with(spec, ".json") && !shard_url_is_command(spec);
}

typedef struct Prefix {
    List *l;
    size_t which;
} Prefix;

/* Each shard (.tar, .tar.gz, .tgz, .tar.zst) of a prefix's listing; indexes, manifests and
 * anything else beside the shards left out. */
static int prefix_add(void *cookie, const char *url, uint64_t size)
{
    Prefix *p = cookie;
    (void)size;
    static const char *const shards[] = {".tar", ".tar.gz", ".tgz", ".tar.zst"};
    for (size_t i = 0; i < sizeof shards / sizeof *shards; i++)
        if (shard_ends_with(url, shards[i]))
            return list_push(p->l, strdup(url), p->which);
    return 0;
}

/* The shards under a prefix (gs://B/P/, s3://B/P/) in name order: GCS by prefix, S3 with
 * ListObjectsV2, page by page; plain HTTP has no listing (an error that says so). */
static int list_prefix(const char *spec, ShardRemote *remote, Prefix *p, char *msg)
{
    ShardRemote *r = remote ? shard_remote_ref(remote) : shard_remote_default(msg);
    if (!r)
        return SHARD_ERR_NOMEM;
    int rc = shard_object_list(r, spec, prefix_add, p, msg);
    shard_remote_put(r);
    return rc;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The shards in a local folder (as a gs:// or s3:// prefix lists its own), in name order:
 * 0, 1 when spec is no folder, or an error with msg. */
static int list_folder(const char *spec, List *l, size_t which, char *msg)
{
    const char *path = shard_url_file_path(spec);
    if (!path)
        path = shard_url_has_scheme(spec) ? NULL : spec;
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return 1;
    DIR *d = opendir(path);
    if (!d)
        return shard_fail(msg, SHARD_ERR_IO, "%s: cannot list the folder", spec);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    size_t plen = strlen(path);
    int slash = plen && path[plen - 1] == '/';
    for (struct dirent *e; !rc && (e = readdir(d));) {
        static const char *const shards[] = {".tar", ".tar.gz", ".tgz", ".tar.zst"};
        int is_shard = 0;
        for (size_t i = 0; i < sizeof shards / sizeof *shards; i++)
            is_shard |= shard_ends_with(e->d_name, shards[i]);
        if (!is_shard || e->d_name[0] == '.')
            continue;
        char *full = malloc(plen + strlen(e->d_name) + 2);
        if (!full || shard_array_grow(&names, &cap, n + 1, sizeof *names, 64)) {
            free(full);
            rc = SHARD_ERR_NOMEM;
            break;
        }
        sprintf(full, "%s%s%s", path, slash ? "" : "/", e->d_name);
        names[n++] = full;
    }
    closedir(d);
    if (!rc && n)
        qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        if (!rc)
            rc = list_push(l, names[i], which); /* takes it */
        else
            free(names[i]);
    }
    free(names);
    if (rc)
        return shard_fail(msg, rc, "out of memory");
    if (!n)
        return shard_fail(msg, SHARD_ERR_NOT_FOUND,
                          "%s: no shards in this folder (.tar, .tar.gz, .tgz, .tar.zst)", spec);
    return 0;
}

static int expand_one(List *l, const char *spec, size_t which, const ShardListSettings *s,
                      char *msg)
{
    ShardRemote *remote = s->remote;
    if (!strchr(spec, '{') && !shard_url_is_command(spec)) {
        int rc = list_folder(spec, l, which, msg);
        if (rc <= 0)
            return rc;
    }
    if (shard_url_is_prefix(spec)) {
        size_t first = l->n;
        Prefix p = {l, which};
        int rc = list_prefix(spec, remote, &p, msg);
        if (rc == SHARD_ERR_NOMEM)
            shard_fail(msg, rc, "out of memory");
        if (!rc && l->n == first)
            rc = shard_fail(msg, SHARD_ERR_NOT_FOUND, "%s: no shards under this prefix", spec);
        return rc;
    }
    if (is_manifest(spec)) {
        ShardError e;
        int rc = shard_manifest_read_remote(&l->manifests[which], spec, remote, &e);
        if (rc)
            return shard_fail(msg, rc, "%s", e.message);
        const ShardManifest *m = l->manifests[which];
        for (size_t i = 0; i < shard_manifest_count(m) && !rc; i++) {
            const ShardFileInfo *fi = shard_manifest_shard(m, i);
            /* a manifest from elsewhere must not run anything the user did not allow */
            if (shard_url_is_command(fi->url) && !s->manifest_commands)
                return shard_fail(msg, SHARD_ERR_INVALID,
                                  "%s: shardlist[%zu] is a command ('%.40s...'): a manifest "
                                  "runs commands only when allowed (manifest_commands; "
                                  "shardcat --allow-manifest-commands)",
                                  spec, i, fi->url);
            /* nor reach local files from elsewhere */
            if (shard_url_is_remote(spec) && !s->manifest_local && !shard_url_is_remote(fi->url) &&
                !shard_url_is_command(fi->url))
                return shard_fail(msg, SHARD_ERR_INVALID,
                                  "%s: shardlist[%zu] is a local file ('%.60s'): a remote "
                                  "manifest lists remote shards only unless allowed "
                                  "(manifest_local; shardcat --allow-manifest-local)",
                                  spec, i, fi->url);
            if (fi->nsamples == 0 && (rc = check_empty(fi->url, remote, spec, i, msg)))
                return rc;
            rc = list_add(l, strdup(fi->url), fi->nsamples, fi, which);
        }
        return rc ? shard_fail(msg, rc, "out of memory") : 0;
    }
    int rc = shard_url_is_command(spec) ? list_push(l, strdup(spec), which)
                                        : expand(spec, l, msg, spec, which);
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
        rc = counts(l, s, msg);
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
        free((char *)l->v[i].url);
        free((char *)l->v[i].index);
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
    for (size_t i = 0; v && i < l->n; i++) {
        v[i] = (char *)l->v[i].url; /* moved out of the list */
        l->v[i].url = NULL;
    }
    size_t count = l->n;
    if (!v)
        rc = shard_report(err, SHARD_ERR_NOMEM, "out of memory");
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
