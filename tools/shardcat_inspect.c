/*
 * shardcat's commands that look inside shards: ls (the samples), info (a shard's summary)
 * and cat (one member's bytes); extract is shardcat_extract.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shardcat_inspect.h"
#include "shardcat_walk.h"

/* ---- ls ------------------------------------------------------------------------------ */

static void print_sample(const ShardSampleView *v, int json)
{
    if (json) {
        json_t *o = json_object(), *fields = json_object();
        json_object_set_new(o, "__key__", cli_json_text(v->key));
        json_object_set_new(o, "__url__", cli_json_url(v->url));
        for (size_t k = 0; k < v->nfields; k++) {
            json_t *name = cli_json_text(v->fields[k].name);
            json_object_set_new(fields, json_string_value(name),
                                json_integer((json_int_t)v->fields[k].size));
            json_decref(name);
        }
        json_object_set_new(o, "fields", fields);
        shardcat_json_line(o);
        return;
    }
    cli_print_path(stdout, v->key);
    for (size_t k = 0; k < v->nfields; k++) {
        fputs(k ? " " : "  ", stdout);
        cli_print_path(stdout, v->fields[k].name);
        printf(":%lluB", (unsigned long long)v->fields[k].size); /* a size */
    }
    putchar('\n');
}

static ShardcatNext ls_shard(ShardcatWalk *w, const ShardListEntry *shard)
{
    ShardFileSettings s;
    shard_file_default_settings(&s);
    /* names and sizes: from the index where it is proven to be the shard's, else from the
     * headers, the data seeked over */
    s.headers_only = 1;
    ShardFile *f = shardcat_open_shard(w, shard->url, &s);
    if (!f)
        return SHARDCAT_FAILED;
    const ShardSampleView *v;
    int rc;
    while ((rc = shard_file_next(f, &v)) == 0)
        print_sample(v, w->cli->json);
    ShardcatNext next = SHARDCAT_NEXT;
    if (rc != SHARD_EOS) {
        fflush(stdout);
        fprintf(stderr, "shardcat: %s\n", shard_file_error(f));
        next = SHARDCAT_FAILED;
    }
    shard_file_free(&f);
    return next;
}

int shardcat_ls(const ShardcatCli *cli, ShardRemote *remote)
{
    ShardcatWalk w = {.visit = ls_shard};
    return shardcat_each_shard(cli, remote, (size_t)cli->nargs, &w);
}

/* ---- info ---------------------------------------------------------------------------- */

/* What info counts over a shard's samples. */
typedef struct Tally {
    uint64_t samples, members, payload, tarsize;
    json_t *fields; /* {name: members} */
} Tally;

static void tally_sample(Tally *t, const ShardSampleView *v)
{
    t->samples++;
    t->members += v->nfields;
    for (size_t k = 0; k < v->nfields; k++) {
        const ShardFieldView *fv = &v->fields[k];
        json_t *name = cli_json_text(fv->name);
        json_t *c = json_object_get(t->fields, json_string_value(name));
        json_object_set_new(t->fields, json_string_value(name),
                            json_integer(c ? json_integer_value(c) + 1 : 1));
        json_decref(name);
        t->payload += fv->size;
        t->tarsize = fv->offset + ((fv->size + 511) & ~(uint64_t)511) + 1024;
    }
}

/* " name:count" for each field, then the line's end. */
static void print_fields(json_t *fields)
{
    const char *name;
    json_t *val;
    json_object_foreach(fields, name, val) {
        putchar(' ');
        cli_print_path(stdout, name);
        printf(":%lld", (long long)json_integer_value(val));
    }
    putchar('\n');
}

/* Prints a shard's tally (and takes its fields). */
static void print_info(const char *url, ShardFile *f, Tally *t, int json)
{
    char *ipath = shard_index_path(url);
    int has_index = ipath && shard_file_count(f) >= 0;
    json_t *o = json_object();
    json_object_set_new(o, "url", cli_json_url(url));
    json_object_set_new(o, "samples", json_integer((json_int_t)t->samples));
    json_object_set_new(o, "members", json_integer((json_int_t)t->members));
    json_object_set_new(o, "payload_bytes", json_integer((json_int_t)t->payload));
    json_object_set_new(o, "tar_bytes", json_integer((json_int_t)t->tarsize));
    json_object_set_new(o, "file_bytes", json_integer((json_int_t)shard_file_size(f)));
    json_object_set_new(o, "compression", json_string(shard_file_compression(f)));
    json_object_set_new(o, "index", has_index ? cli_json_url(ipath) : json_null());
    json_object_set_new(o, "index_samples", json_integer((json_int_t)shard_file_count(f)));
    json_object_set_new(o, "fields", t->fields);
    if (json) {
        shardcat_json_line(o);
        free(ipath);
        return;
    }
    char hb[32], ht[32], ib[4096];
    cli_print_url(stdout, url);
    printf("\n  samples      %llu (%llu members)\n  bytes        %s stored, %s as tar "
           "(%s)\n  index        %s\n  fields      ",
           (unsigned long long)t->samples, (unsigned long long)t->members,
           cli_human_bytes((double)shard_file_size(f), hb, sizeof hb),
           cli_human_bytes((double)t->tarsize, ht, sizeof ht), shard_file_compression(f),
           has_index ? cli_url(ipath, ib, sizeof ib) : "none");
    print_fields(t->fields);
    json_decref(o);
    free(ipath);
}

/* Every shard's tally added up, for the totals after the last one. */
typedef struct Info {
    uint64_t shards, samples, members, payload, tarsize, filesize;
    json_t *fields; /* {name: members} */
} Info;

static void add_tally(Info *in, const Tally *t, int64_t filesize)
{
    in->shards++;
    in->samples += t->samples;
    in->members += t->members;
    in->payload += t->payload;
    in->tarsize += t->tarsize;
    in->filesize += filesize > 0 ? (uint64_t)filesize : 0;
    const char *name;
    json_t *val;
    json_object_foreach(t->fields, name, val) {
        json_t *c = json_object_get(in->fields, name);
        json_object_set_new(in->fields, name,
                            json_integer(json_integer_value(val) + (c ? json_integer_value(c) : 0)));
    }
}

static ShardcatNext info_shard(ShardcatWalk *w, const ShardListEntry *shard)
{
    ShardFileSettings s;
    shard_file_default_settings(&s);
    s.headers_only = 1;
    ShardFile *f = shardcat_open_shard(w, shard->url, &s);
    if (!f)
        return SHARDCAT_FAILED;
    Tally t = {0, 0, 0, 0, json_object()};
    const ShardSampleView *v;
    int rc;
    while ((rc = shard_file_next(f, &v)) == 0)
        tally_sample(&t, v);
    ShardcatNext next = SHARDCAT_NEXT;
    if (rc != SHARD_EOS) {
        fprintf(stderr, "shardcat: %s\n", shard_file_error(f));
        json_decref(t.fields);
        next = SHARDCAT_FAILED;
    } else {
        add_tally(w->cookie, &t, shard_file_size(f));
        print_info(shard->url, f, &t, w->cli->json);
    }
    shard_file_free(&f);
    return next;
}

/* The classes the operands' manifests name (libshard.classes), in order, each once. */
static json_t *manifest_classes(const ShardcatWalk *w)
{
    json_t *out = json_array(), *seen = json_object();
    for (int k = 0; k < w->cli->nargs; k++) {
        const ShardManifest *m = shard_list_manifest(w->list, (size_t)k);
        for (size_t i = 0; m && i < shard_manifest_class_count(m); i++) {
            const char *c = shard_manifest_class(m, i);
            if (!json_object_get(seen, c)) {
                json_object_set_new(seen, c, json_true());
                json_array_append_new(out, cli_json_text(c));
            }
        }
    }
    json_decref(seen);
    return out;
}

/* Totals after more than one shard, or a manifest's: how big the data set is. */
static int info_end(ShardcatWalk *w, int stopped)
{
    Info *in = w->cookie;
    json_t *classes = manifest_classes(w);
    if (stopped || (in->shards < 2 && !json_array_size(classes))) {
        json_decref(classes);
        return 0;
    }
    if (w->cli->json) {
        json_t *o = json_object(), *t = json_object();
        json_object_set_new(t, "shards", json_integer((json_int_t)in->shards));
        json_object_set_new(t, "samples", json_integer((json_int_t)in->samples));
        json_object_set_new(t, "members", json_integer((json_int_t)in->members));
        json_object_set_new(t, "payload_bytes", json_integer((json_int_t)in->payload));
        json_object_set_new(t, "tar_bytes", json_integer((json_int_t)in->tarsize));
        json_object_set_new(t, "file_bytes", json_integer((json_int_t)in->filesize));
        json_object_set_new(t, "fields", json_incref(in->fields));
        json_object_set_new(t, "classes", classes);
        json_object_set_new(o, "total", t);
        shardcat_json_line(o);
        return 0;
    }
    char hb[32], ht[32];
    printf("total: %llu shard%s\n  samples      %llu (%llu members)\n  bytes        %s stored, "
           "%s as tar\n  fields      ",
           (unsigned long long)in->shards, in->shards == 1 ? "" : "s", (unsigned long long)in->samples,
           (unsigned long long)in->members, cli_human_bytes((double)in->filesize, hb, sizeof hb),
           cli_human_bytes((double)in->tarsize, ht, sizeof ht));
    print_fields(in->fields);
    if (json_array_size(classes))
        printf("  classes      %zu (from the manifest)\n", json_array_size(classes));
    json_decref(classes);
    return 0;
}

/* info --aspect-buckets: the buckets and the samples nearest each, from the image sizes
 * beside the indexes (a plain tar's made into the index cache, as a reader makes its index). */
static int aspect_info(const ShardcatCli *cli, ShardRemote *remote)
{
    ShardListSettings s;
    shard_list_default_settings(&s);
    s.remote = remote;
    s.manifest_commands = cli->manifest_commands;
    s.manifest_local = cli->manifest_local;
    s.build_indexes = SHARD_INDEXES_WHERE_CHEAP;
    s.columns = 1;
    s.progress = cli->bar;
    ShardList *l = NULL;
    ShardError err;
    ShardAspectBucket *b = NULL;
    size_t n = 0;
    uint64_t none = 0, total = 0;
    int side = cli->image_size ? cli->image_size : 224;
    if (shard_list_expand(&l, (const char *const *)cli->args, (size_t)cli->nargs, &s, &err) ||
        shard_aspect_buckets(l, cli->aspect_buckets, side, remote, &b, &n, &none, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        shard_list_free(&l);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        total += b[i].samples;
    if (cli->json) {
        json_t *o = json_object(), *a = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(a, json_pack("{s:i,s:i,s:I}", "height", b[i].height, "width",
                                               b[i].width, "samples", (json_int_t)b[i].samples));
        json_object_set_new(o, "buckets", a);
        json_object_set_new(o, "samples", json_integer((json_int_t)total));
        json_object_set_new(o, "no_size", json_integer((json_int_t)none));
        shardcat_json_line(o);
    } else {
        int scaled = !strncmp(cli->aspect_buckets, "sdxl", 4) || !strncmp(cli->aspect_buckets,
                                                                           "auto", 4);
        printf("%zu bucket%s (%s", n, n == 1 ? "" : "s", cli->aspect_buckets);
        if (scaled)
            printf(" at %d", side);
        printf("), %llu samples, %zu shard%s\n", (unsigned long long)total, shard_list_count(l),
               shard_list_count(l) == 1 ? "" : "s");
        printf("  height x width   aspect     samples   share\n");
        for (size_t i = 0; i < n; i++)
            printf("  %6d x %-6d  %6.3f  %10llu  %5.1f%%\n", b[i].height, b[i].width,
                   (double)b[i].width / b[i].height, (unsigned long long)b[i].samples,
                   total ? 100.0 * (double)b[i].samples / (double)total : 0.0);
        if (none)
            printf("  no image size: %llu (no image, or a header that does not parse)\n",
                   (unsigned long long)none);
    }
    free(b);
    shard_list_free(&l);
    return 0;
}

int shardcat_info(const ShardcatCli *cli, ShardRemote *remote)
{
    if (cli->aspect_buckets)
        return aspect_info(cli, remote);
    Info in = {.fields = json_object()};
    ShardcatWalk w = {.visit = info_shard, .end = info_end, .cookie = &in};
    int status = shardcat_each_shard(cli, remote, (size_t)cli->nargs, &w);
    json_decref(in.fields);
    return status;
}

/* ---- cat ----------------------------------------------------------------------------- */

/* The member asked: KEY.FIELD, the field after the first dot of the basename. */
typedef struct Cat {
    const char *member;
    size_t klen;       /* KEY's length */
    const char *field; /* FIELD */
} Cat;

/* Writes the field of the sample v that cat asks for. */
static ShardcatNext cat_field(const Cat *c, const char *url, const ShardSampleView *v,
                              int lowercase)
{
    for (size_t k = 0; k < v->nfields; k++) {
        /* fields come lower-cased (ASCII only, formats/shard.md 2.2): so is the one asked */
        if (!shard_field_equal(v->fields[k].name, c->field, lowercase))
            continue;
        size_t n = fwrite(v->fields[k].data, 1, v->fields[k].size, stdout);
        if (n != v->fields[k].size || fflush(stdout) != 0) {
            fprintf(stderr, "shardcat: writing to stdout: %s\n", strerror(errno));
            return SHARDCAT_ABORT;
        }
        return SHARDCAT_DONE;
    }
    char ub[4096];
    fprintf(stderr, "shardcat: %s: sample '%.*s' has no field '%s' (it has",
            cli_url(url, ub, sizeof ub), (int)c->klen, c->member, c->field);
    for (size_t k = 0; k < v->nfields; k++) {
        fputs(k ? ", " : " ", stderr);
        cli_print_path(stderr, v->fields[k].name);
    }
    fputs(")\n", stderr);
    return SHARDCAT_ABORT;
}

/* The first shard that holds KEY gives the member (or says it has no such field). */
static ShardcatNext cat_shard(ShardcatWalk *w, const ShardListEntry *shard)
{
    const Cat *c = w->cookie;
    ShardFileSettings s;
    shard_file_default_settings(&s);
    ShardFile *f = shardcat_open_shard(w, shard->url, &s);
    if (!f)
        return SHARDCAT_ABORT;
    const ShardSampleView *v;
    int rc;
    ShardcatNext next = SHARDCAT_NEXT;
    while ((rc = shard_file_next(f, &v)) == 0) {
        if (strlen(v->key) == c->klen && !strncmp(v->key, c->member, c->klen)) {
            next = cat_field(c, shard->url, v, s.lowercase);
            break;
        }
    }
    if (rc && rc != SHARD_EOS) {
        fprintf(stderr, "shardcat: %s\n", shard_file_error(f));
        next = SHARDCAT_ABORT;
    }
    shard_file_free(&f);
    return next;
}

static int cat_end(ShardcatWalk *w, int stopped)
{
    if (stopped)
        return 0;
    const Cat *c = w->cookie;
    size_t count = shard_list_count(w->list);
    char ub[4096];
    if (count == 1)
        fprintf(stderr, "shardcat: %s: no sample '%.*s'\n",
                cli_url(shard_list_entry(w->list, 0)->url, ub, sizeof ub), (int)c->klen,
                c->member);
    else
        fprintf(stderr, "shardcat: no sample '%.*s' in any of %zu shards\n", (int)c->klen,
                c->member, count);
    return 1;
}

/* The member KEY.FIELD from the first shard of SHARD that holds KEY (a manifest or pattern
 * is searched shard by shard, in order). */
int shardcat_cat(const ShardcatCli *cli, ShardRemote *remote)
{
    const char *member = cli->args[1];
    const char *slash = strrchr(member, '/');
    const char *dot = strchr(slash ? slash + 1 : member, '.');
    Cat c = {member, (size_t)(dot - member), dot + 1};
    ShardcatWalk w = {.visit = cat_shard, .end = cat_end, .cookie = &c};
    return shardcat_each_shard(cli, remote, 1, &w);
}
