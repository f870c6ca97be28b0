/*
 * shardcat's commands that check shards and make what they lack: verify (structure,
 * index, seek table, manifest checksums, key rules; with --decode the images) and index
 * (a DALI .idx for a shard made elsewhere).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "shardcat_health.h"
#include "shardcat_verify.h"
#include "shardcat_walk.h"

/* ---- verify -------------------------------------------------------------------------- */

typedef struct Verify {
    uint64_t failed; /* shards */
    json_t *defects; /* this shard's defects' messages (with --json) */
} Verify;

/* the most defects' messages a shard's JSON line lists (all are counted) */
#define JSON_DEFECTS 100

static void print_defect(void *cookie, const char *msg)
{
    Verify *vf = cookie;
    fprintf(stderr, "shardcat: %s\n", msg);
    if (vf->defects && json_array_size(vf->defects) < JSON_DEFECTS)
        json_array_append_new(vf->defects, cli_json_text(msg));
}

/* error: what kept the shard from being read, else the first defect's message, NULL when
 * there is none; defects: every defect's message (taken) */
static void print_verdict_json(const char *url, int rc, const ShardVerifyResult *r,
                               const ShardVerifySettings *s, const char *error, json_t *defects)
{
    json_t *o = json_object();
    json_object_set_new(o, "url", cli_json_url(url));
    json_object_set_new(o, "ok", json_boolean(rc == 0));
    json_object_set_new(o, "samples", json_integer((json_int_t)r->samples));
    json_object_set_new(o, "members", json_integer((json_int_t)r->members));
    json_object_set_new(o, "index", json_boolean(r->has_index));
    json_object_set_new(o, "columns", json_boolean(r->has_columns));
    json_object_set_new(o, "frames", json_integer((json_int_t)r->frames));
    if (s->decode)
        json_object_set_new(o, "jpegs", json_integer((json_int_t)r->jpegs));
    if (s->decode)
        json_object_set_new(o, "images", json_integer((json_int_t)r->images));
    json_object_set_new(o, "manifest", s->expect ? json_boolean(rc == 0) : json_null());
    json_object_set_new(o, "defects",
                        json_integer((json_int_t)(rc ? (r->defects ? r->defects : 1) : 0)));
    if (!error && json_array_size(defects))
        error = json_string_value(json_array_get(defects, 0));
    json_object_set_new(o, "error", error ? cli_json_text(error) : json_null());
    json_object_set_new(o, "defect_messages", defects);
    shardcat_json_line(o);
}

static void print_verdict(const char *url, int rc, const ShardVerifyResult *r,
                          const ShardVerifySettings *s)
{
    cli_print_url(stdout, url);
    if (rc) {
        printf(": FAILED (%llu defect%s)\n", (unsigned long long)(r->defects ? r->defects : 1),
               r->defects > 1 ? "s" : "");
        return;
    }
    printf(": ok: %llu samples, %llu members%s", (unsigned long long)r->samples,
           (unsigned long long)r->members, r->has_index ? ", index matches" : ", no index");
    if (r->has_columns)
        printf(", image sizes (.cols) match");
    if (r->frames)
        printf(", %llu zstd frame%s checked", (unsigned long long)r->frames,
               r->frames == 1 ? "" : "s");
    if (s->decode)
        printf(", %llu JPEGs decode", (unsigned long long)r->jpegs);
    if (s->decode && r->images > r->jpegs)
        printf(", %llu other images decode", (unsigned long long)(r->images - r->jpegs));
    if (s->expect)
        printf(", manifest size and checksums match");
    putchar('\n');
}

/* A failed local shard whose index another shard beside it shares (one stem, another
 * extension: a .tar and a .tar.zst set of one name share STEM-NNNNNN.idx), named as the
 * likely cause. */
static void say_shared_index(const char *url)
{
    static const char *const exts[] = {".tar", ".tar.gz", ".tgz", ".tar.zst"};
    if (strstr(url, "://"))
        return;
    char *ipath = shard_index_path(url);
    size_t stem = ipath ? strlen(ipath) - 4 : 0; /* without ".idx" */
    for (size_t i = 0; ipath && i < sizeof exts / sizeof *exts; i++) {
        char other[4096];
        if (snprintf(other, sizeof other, "%.*s%s", (int)stem, ipath, exts[i]) >= (int)sizeof other ||
            !strcmp(other, url) || access(other, F_OK) != 0)
            continue;
        char a[4096], b[4096], c[4096];
        fprintf(stderr, "shardcat: %s: its index %s is also %s's (one stem, another set): the "
                        "later pack wrote the index of both; pack one set under another name "
                        "and make its index again (shardcat index)\n", cli_url(url, a, sizeof a),
                cli_url(ipath, b, sizeof b), cli_url(other, c, sizeof c));
        break;
    }
    free(ipath);
}

static ShardcatNext verify_shard(ShardcatWalk *w, const ShardListEntry *shard)
{
    Verify *vf = w->cookie;
    ShardVerifySettings s;
    shard_verify_default_settings(&s);
    s.remote = w->remote;
    s.decode = w->cli->decode;
    s.expect = shard->info;
    s.on_defect = print_defect;
    s.cookie = vf;
    vf->defects = w->cli->json ? json_array() : NULL;
    ShardVerifyResult r;
    ShardError err;
    int rc = shard_verify(shard->url, &s, &r, &err);
    cli_progress_clear(&w->pg);
    w->bytes += rc ? 0 : (double)r.filesize;
    /* A defect was said as it was found (print_defect), err left unset: only a shard that
     * could not be read has a message in it. */
    const char *error = rc && rc != SHARD_ERR_FORMAT && rc != SHARD_ERR_CHECKSUM ? err.message
                                                                                : NULL;
    if (error)
        fprintf(stderr, "shardcat: %s\n", error);
    if (rc) {
        vf->failed++;
        say_shared_index(shard->url);
    }
    if (w->cli->json)
        print_verdict_json(shard->url, rc, &r, &s, error, vf->defects);
    else
        print_verdict(shard->url, rc, &r, &s);
    vf->defects = NULL;
    fflush(stdout);
    return rc ? SHARDCAT_FAILED : SHARDCAT_NEXT;
}

static int by_url(const void *a, const void *b)
{
    return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

/* Shards the list names more than once (a manifest's lines repeated): the readers read
 * their samples that many times. Each said; the number of them. */
static size_t named_twice(const ShardList *list)
{
    size_t n = shard_list_count(list), twice = 0;
    const char **urls = malloc((n ? n : 1) * sizeof *urls);
    const char ***order = malloc((n ? n : 1) * sizeof *order);
    if (!urls || !order) {
        free(urls);
        free(order);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        urls[i] = shard_list_entry(list, i)->url;
        order[i] = &urls[i];
    }
    qsort(order, n, sizeof *order, by_url);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(*order[i], *order[i - 1]) && (i < 2 || strcmp(*order[i], *order[i - 2]))) {
            fputs("shardcat: ", stderr);
            cli_print_url(stderr, *order[i]);
            fputs(": listed more than once: readers read its samples as often\n", stderr);
            twice++;
        }
    free(order);
    free(urls);
    return twice;
}

static int verify_end(ShardcatWalk *w, int stopped)
{
    const Verify *vf = w->cookie;
    size_t twice = named_twice(w->list);
    if (shard_list_count(w->list) > 1 && !w->cli->json)
        printf("%zu shards, %llu failed%s\n", shard_list_count(w->list),
               (unsigned long long)vf->failed, twice ? ", some listed twice" : "");
    size_t unhealthy = stopped ? 0 : shardcat_set_health(w);
    return twice != 0 || unhealthy != 0;
}

int shardcat_verify(const ShardcatCli *cli, ShardRemote *remote)
{
    Verify vf = {0};
    ShardcatWalk w = {.visit = verify_shard, .end = verify_end, .cookie = &vf, .progress = 1};
    return shardcat_each_shard(cli, remote, (size_t)cli->nargs, &w);
}

/* ---- index --------------------------------------------------------------------------- */

static ShardcatNext index_shard(ShardcatWalk *w, const ShardListEntry *shard)
{
    ShardError err;
    uint64_t n;
    int rc = shard_index_build(shard->url, NULL, &n, &err);
    cli_progress_clear(&w->pg);
    if (rc) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return SHARDCAT_FAILED;
    }
    char *ipath = shard_index_path(shard->url), ib[4096];
    printf("%s: %llu samples\n", ipath ? cli_url(ipath, ib, sizeof ib) : "", (unsigned long long)n);
    free(ipath);
    if (!w->cli->geometry)
        return SHARDCAT_NEXT;
    ShardGeometryStats st;
    if (shard_geometry_build(shard->url, NULL, NULL, w->remote, 0, &st, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return SHARDCAT_FAILED;
    }
    char *cpath = shard_columns_path(shard->url);
    printf("%s: %llu samples' image sizes, %llu bytes of their headers read\n",
           cpath ? cli_url(cpath, ib, sizeof ib) : "", (unsigned long long)st.samples,
           (unsigned long long)st.bytes_read);
    free(cpath);
    return SHARDCAT_NEXT;
}

int shardcat_index(const ShardcatCli *cli, ShardRemote *remote)
{
    ShardcatWalk w = {.visit = index_shard, .progress = 1};
    return shardcat_each_shard(cli, remote, (size_t)cli->nargs, &w);
}
