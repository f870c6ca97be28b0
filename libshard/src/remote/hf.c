/*
 * The Hugging Face Hub (hf.h): its URLs, its token, its revision and tree APIs.
 */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "remote/hf.h"
#include "remote/handle.h"
#include "remote/retry.h"

#define HF_PREFIX "hf://datasets/"
#define TREE_MAX (64u << 20) /* one page of a listing */

/* The Hub's base URL: HF_ENDPOINT (a mirror, a stand-in) or huggingface.co, without a
 * trailing slash, into b. */
static int endpoint(ShardBuf *b)
{
    const char *e = getenv("HF_ENDPOINT");
    if (!e || !*e)
        e = "https://huggingface.co";
    size_t n = strlen(e);
    while (n && e[n - 1] == '/')
        n--;
    return shard_buf_append(b, e, n);
}

int shard_hf_parse(ShardObject *o, const char *url, char *err)
{
    const char *p = url + strlen(HF_PREFIX);
    const char *slash = strncmp(url, HF_PREFIX, strlen(HF_PREFIX)) ? NULL : strchr(p, '/');
    const char *end = slash ? strchr(slash + 1, '/') : NULL;
    if (!slash || slash == p || !end || end == slash + 1)
        return shard_fail(err, SHARD_ERR_INVALID,
                          "%s: want hf://datasets/OWNER/NAME[@REVISION]/PATH (a data set's "
                          "files; models and spaces hold no shards)", url);
    const char *at = memchr(slash, '@', (size_t)(end - slash));
    size_t repo = (size_t)((at ? at : end) - p);
    o->bucket = strndup(p, repo);
    o->rev = at && at + 1 < end ? strndup(at + 1, (size_t)(end - at - 1)) : NULL;
    o->key = strdup(end + 1);
    if (!o->bucket || !o->key || (at && at + 1 < end && !o->rev))
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    return 0;
}

const char *shard_hf_token(ShardRemote *r)
{
    pthread_mutex_lock(&r->auth_mu);
    if (!r->hf_token_read) {
        r->hf_token_read = 1;
        const char *t = getenv("HF_TOKEN");
        if (t && *t) {
            r->hf_token = strdup(t);
        } else {
            char path[4096] = "";
            const char *file = getenv("HF_TOKEN_PATH"), *hfhome = getenv("HF_HOME"),
                       *home = getenv("HOME");
            if (file && *file)
                snprintf(path, sizeof path, "%s", file);
            else if (hfhome && *hfhome)
                snprintf(path, sizeof path, "%s/token", hfhome);
            else if (home && *home)
                snprintf(path, sizeof path, "%s/.cache/huggingface/token", home);
            FILE *f = *path ? fopen(path, "r") : NULL;
            char line[1024];
            if (f && fgets(line, sizeof line, f)) {
                size_t n = strlen(line);
                while (n && isspace((unsigned char)line[n - 1]))
                    line[--n] = 0;
                if (n)
                    r->hf_token = strdup(line);
                memset(line, 0, sizeof line);
            }
            if (f)
                fclose(f);
        }
    }
    pthread_mutex_unlock(&r->auth_mu);
    return r->hf_token;
}

/* The token as a bearer on a request to the Hub (none without a token). */
static int authorize(ShardRemote *r, ShardRequest *q)
{
    const char *t = shard_hf_token(r);
    return t ? shard_request_header(q, "Authorization: Bearer %s", t) : 0;
}

int shard_hf_request(ShardRemote *r, const ShardObject *o, ShardRequest *q, char *err)
{
    shard_remote_count(r, SHARD_REMOTE_RESOLVES, 1);
    ShardBuf u = {0};
    int rc = endpoint(&u) || shard_buf_printf(&u, "/datasets/%s/resolve/", o->bucket) ||
             shard_url_encode(&u, o->rev ? o->rev : "main", 0) ||
             shard_buf_printf(&u, "/") || shard_url_encode(&u, o->key, 1);
    q->url = (char *)u.data;
    if (!rc)
        rc = authorize(r, q);
    return rc ? shard_fail(err, SHARD_ERR_NOMEM, "out of memory") : 0;
}

/* The value of query parameter name in url (its length in *n), or NULL. */
static const char *query_param(const char *url, const char *name, size_t *n)
{
    const char *q = strchr(url, '?');
    size_t k = strlen(name);
    for (const char *p = q; p && *p; p = strchr(p, '&')) {
        p++;
        if (!strncmp(p, name, k) && p[k] == '=') {
            *n = strcspn(p + k + 1, "&#");
            return p + k + 1;
        }
    }
    return NULL;
}

static int64_t digits(const char *v, size_t n)
{
    int64_t t = 0;
    for (size_t i = 0; i < n && t < INT64_MAX / 10; i++) {
        if (!isdigit((unsigned char)v[i]))
            return -1;
        t = t * 10 + (v[i] - '0');
    }
    return n ? t : -1;
}

/* Seconds since 1970 of a SigV4 date (YYYYMMDDTHHMMSSZ), or -1. */
static int64_t amz_date(const char *v, size_t n)
{
    if (n != 16 || v[8] != 'T' || v[15] != 'Z')
        return -1;
    int64_t y = digits(v, 4), mo = digits(v + 4, 2), d = digits(v + 6, 2), h = digits(v + 9, 2),
            mi = digits(v + 11, 2), sec = digits(v + 13, 2);
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || mi < 0 || sec < 0)
        return -1;
    y -= mo <= 2; /* days from the civil date, the year starting in March */
    int64_t era = y / 400, yoe = y - era * 400, mp = (mo + 9) % 12;
    int64_t doy = (153 * mp + 2) / 5 + d - 1, doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = era * 146097 + doe - 719468;
    return days * 86400 + h * 3600 + mi * 60 + sec;
}

int64_t shard_hf_link_until(const char *url)
{
    int64_t until = INT64_MAX, t;
    size_t n, m;
    const char *e = query_param(url, "Expires", &n); /* a CloudFront signature's */
    if (e && (t = digits(e, n)) >= 0)
        until = t;
    const char *date = query_param(url, "X-Amz-Date", &n), *ttl = query_param(url, "X-Amz-Expires", &m);
    if (date && ttl && (t = amz_date(date, n)) >= 0 && digits(ttl, m) >= 0 &&
        t + digits(ttl, m) < until)
        until = t + digits(ttl, m);
    return until;
}

/* What a refusal of the Hub's means, for messages: the token, never its value. */
static const char *refusal(long status, const ShardRemote *r)
{
    if (status == 401 || status == 403)
        return r->hf_token ? ": HF_TOKEN (or the token file) is not allowed to read it"
                           : ": a gated or private data set wants a token: set HF_TOKEN";
    return status == 404 ? ": no such data set, revision or path" : "";
}

typedef struct Get {
    ShardRemote *r;
    const char *url;
} Get;

static int build_get(void *cookie, ShardRequest *q, char *err)
{
    Get *g = cookie;
    q->url = strdup(g->url);
    if (!q->url || authorize(g->r, q))
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    return 0;
}

/* A JSON answer of the Hub's API at url (shown as shown) into body; its response in rs. */
static int api_get(ShardRemote *r, const char *url, const char *shown, ShardBuf *body,
                   ShardResponse *rs, char *err)
{
    Get g = {r, url};
    long status;
    int rc = shard_request_whole(r, shown, build_get, &g, body, TREE_MAX, shard_remote_retries(r),
                                 &status, rs, err);
    if (!rc && status != 200)
        rc = shard_fail(err, status == 404 ? SHARD_ERR_NOT_FOUND : SHARD_ERR_IO,
                        "%s: the Hub answered HTTP %ld%s", shown, status, refusal(status, r));
    return rc;
}

static int is_commit(const char *rev)
{
    size_t n = 0;
    for (; rev[n]; n++)
        if (!isxdigit((unsigned char)rev[n]))
            return 0;
    return n == 40;
}

/* The commit revision o->rev (NULL: main) names, malloc'd into *sha. */
static int commit_of(ShardRemote *r, const ShardObject *o, char **sha, char *err)
{
    const char *rev = o->rev ? o->rev : "main";
    if (is_commit(rev))
        return (*sha = strdup(rev)) ? 0 : shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    ShardBuf u = {0}, body = {0};
    int rc = endpoint(&u) || shard_buf_printf(&u, "/api/datasets/%s/revision/", o->bucket) ||
             shard_url_encode(&u, rev, 0);
    if (rc)
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    ShardResponse rs;
    if (!rc)
        rc = api_get(r, (char *)u.data, o->url, &body, &rs, err);
    json_t *j = rc ? NULL : json_loads((char *)body.data, 0, NULL);
    const char *s = json_string_value(json_object_get(j, "sha"));
    if (!rc && (!s || !is_commit(s)))
        rc = shard_fail(err, SHARD_ERR_FORMAT, "%s: the Hub's answer for revision '%s' names "
                        "no commit", o->url, rev);
    if (!rc && !(*sha = strdup(s)))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    json_decref(j);
    shard_buf_free(&u);
    shard_buf_free(&body);
    return rc;
}

int shard_hf_parse_tree(const char *body, const char *shown, const char *under, ShardListFn fn,
                        void *cookie, char *err)
{
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    if (!json_is_array(j)) {
        json_decref(j);
        return shard_fail(err, SHARD_ERR_FORMAT, "%s: the Hub's tree listing is not a JSON "
                          "array", shown);
    }
    int rc = 0;
    size_t i, n = strlen(under);
    json_t *it;
    json_array_foreach(j, i, it) {
        const char *type = json_string_value(json_object_get(it, "type"));
        const char *path = json_string_value(json_object_get(it, "path"));
        json_t *size = json_object_get(it, "size");
        if (!type || strcmp(type, "file") || !path || strncmp(path, under, n))
            continue;
        if ((rc = fn(cookie, path, json_is_integer(size) ? (uint64_t)json_integer_value(size)
                                                          : 0)))
            break;
    }
    json_decref(j);
    return rc;
}

/* The next page's URL from a Link header's rel="next", into next ("" when none). */
static void next_page(const char *link, char *next, size_t cap)
{
    next[0] = 0;
    for (const char *p = link; (p = strchr(p, '<'));) {
        const char *e = strchr(p, '>');
        if (!e)
            return;
        const char *semi = e + 1, *comma = strchr(semi, ',');
        size_t span = comma ? (size_t)(comma - semi) : strlen(semi);
        char params[256];
        snprintf(params, sizeof params, "%.*s", (int)(span < 255 ? span : 255), semi);
        if (strstr(params, "rel=\"next\"") || strstr(params, "rel=next")) {
            size_t n = (size_t)(e - p - 1);
            if (n < cap)
                snprintf(next, cap, "%.*s", (int)n, p + 1);
            return;
        }
        p = e;
    }
}

/* The files listed, kept to be given in name order. */
typedef struct File {
    char *path;
    uint64_t size;
} File;

typedef struct Files {
    File *v;
    size_t n, cap;
} Files;

static int keep_file(void *cookie, const char *path, uint64_t size)
{
    Files *f = cookie;
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 256;
        File *v = realloc(f->v, cap * sizeof *v);
        if (!v)
            return SHARD_ERR_NOMEM;
        f->v = v;
        f->cap = cap;
    }
    if (!(f->v[f->n].path = strdup(path)))
        return SHARD_ERR_NOMEM;
    f->v[f->n++].size = size;
    return 0;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const File *)a)->path, ((const File *)b)->path);
}

/* The tree's first page: the API's tree of the commit, under the prefix's folder. */
static int tree_url(ShardBuf *u, const ShardObject *prefix, const char *sha)
{
    size_t dir = strlen(prefix->key);
    while (dir && prefix->key[dir - 1] == '/')
        dir--;
    char *d = strndup(prefix->key, dir);
    int rc = !d || endpoint(u) ||
             shard_buf_printf(u, "/api/datasets/%s/tree/%s", prefix->bucket, sha) ||
             (dir && (shard_buf_printf(u, "/") || shard_url_encode(u, d, 1))) ||
             shard_buf_printf(u, "?recursive=true");
    free(d);
    return rc ? SHARD_ERR_NOMEM : 0;
}

int shard_hf_list(ShardRemote *r, const ShardObject *prefix, ShardListFn fn, void *cookie,
                  char *err)
{
    char *sha = NULL, next[2048];
    ShardBuf u = {0}, body = {0}, url = {0};
    Files f = {0};
    int rc = commit_of(r, prefix, &sha, err);
    if (!rc && tree_url(&u, prefix, sha))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    for (const char *page = (char *)u.data; !rc && page && *page; page = next) {
        ShardResponse rs;
        body.len = 0;
        if ((rc = api_get(r, page, prefix->url, &body, &rs, err)))
            break;
        if ((rc = shard_hf_parse_tree((char *)body.data, prefix->url, prefix->key, keep_file,
                                      &f, err)) == SHARD_ERR_NOMEM)
            shard_fail(err, rc, "out of memory");
        next_page(rs.link, next, sizeof next);
    }
    if (!rc)
        qsort(f.v, f.n, sizeof *f.v, by_path);
    for (size_t i = 0; !rc && i < f.n; i++) {
        url.len = 0;
        if (shard_buf_printf(&url, HF_PREFIX "%s@%s/%s", prefix->bucket, sha, f.v[i].path))
            rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
        else
            rc = fn(cookie, (char *)url.data, f.v[i].size);
    }
    for (size_t i = 0; i < f.n; i++)
        free(f.v[i].path);
    free(f.v);
    free(sha);
    shard_buf_free(&u);
    shard_buf_free(&body);
    shard_buf_free(&url);
    return rc;
}

/* Listing a folder of the Hub. */
static int hub_list(const ShardStore *st, const char *dir, ShardListFn fn, void *cookie,
                    char *err)
{
    ShardObject o = {.kind = SHARD_OBJ_HF, .url = dir};
    int rc = shard_hf_parse(&o, dir, err);
    if (!rc)
        rc = shard_hf_list(st->remote, &o, fn, cookie, err);
    free(o.bucket);
    free(o.rev);
    free(o.key);
    return rc;
}

const ShardStoreRow shard_store_hub = {
    .name = "the Hugging Face Hub (hf://, read only)",
    .can = SHARD_STORE_LIST | SHARD_STORE_BESIDE | SHARD_STORE_COSTLY,
    .network = 1,
    .list = hub_list,
};
