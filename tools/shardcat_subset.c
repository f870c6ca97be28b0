/*
 * shardcat subset: a view written down as a set of its own. The chosen samples are found in
 * the sources' indexes and read by index alone (as keys= reads them), in the sources' order,
 * and written with the writer shardpack uses: each member's bytes as they were, the shards
 * with their indexes and columns, and the set's manifest, into a folder or a bucket.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shardcat_subset.h"

#define SHARD_SAMPLES 10000

/* The reader of the chosen samples, in the sources' order (no shuffle, one stream). */
static ShardReader *open_view(const ShardcatCli *cli, ShardRemote *remote)
{
    ShardReaderSettings s;
    shard_reader_default_settings(&s);
    s.urls = (const char *const *)cli->args;
    s.nurls = (size_t)cli->nargs;
    s.keys = cli->keys;
    s.remote = remote;
    s.have_seed = 1;
    s.rank = 0;
    s.world_size = 1;
    s.mode = SHARD_MODE_EXACT;
    s.shuffle_shards = 0;
    s.shuffle_buffer = 0;
    s.streams = 1;
    s.partitions = 1;
    s.manifest_commands = cli->manifest_commands;
    s.manifest_local = cli->manifest_local;
    ShardReader *r;
    ShardError err;
    if (shard_reader_open(&r, &s, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return NULL;
    }
    return r;
}

/* Each sample of r into w; 0, or 1 after saying what failed. */
static int copy(ShardReader *r, ShardWriter *w, uint64_t *n)
{
    ShardField *fields = NULL;
    size_t cap = 0;
    int rc, status = 0;
    ShardItem *it;
    while (!status && (rc = shard_reader_take(r, &it)) == 0) {
        const ShardSampleView *v = shard_item_sample(it);
        if (v->nfields > cap) {
            ShardField *f = realloc(fields, v->nfields * sizeof *f);
            if (!f) {
                fprintf(stderr, "shardcat: out of memory\n");
                status = 1;
            } else {
                fields = f;
                cap = v->nfields;
            }
        }
        for (size_t i = 0; !status && i < v->nfields; i++)
            fields[i] = (ShardField){v->fields[i].name, v->fields[i].data,
                                     (size_t)v->fields[i].size};
        ShardSample s = {v->key, fields, v->nfields};
        if (!status && shard_writer_add(w, &s)) {
            fprintf(stderr, "shardcat: %s\n", shard_writer_error(w));
            status = 1;
        }
        *n += !status;
        shard_item_free(&it);
    }
    if (!status && rc != SHARD_EOS) {
        fprintf(stderr, "shardcat: %s\n", shard_reader_error(r));
        status = 1;
    }
    free(fields);
    return status;
}

/* The set's manifest: the writer's shards, named for the pattern's stem, at path. */
static int write_manifest(ShardWriter *w, const char *path, ShardRemote *remote)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(strlen(base) - 5), base); /* without .json */
    ShardManifest *m = NULL;
    ShardError err;
    int rc = shard_manifest_new(&m, name);
    for (size_t i = 0; !rc && i < shard_writer_count(w); i++)
        rc = shard_manifest_add(m, shard_writer_shard(w, i));
    if (rc) {
        fprintf(stderr, "shardcat: out of memory\n");
    } else if (shard_manifest_write_remote(m, path, remote, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        rc = 1;
    }
    shard_manifest_free(&m);
    return rc ? 1 : 0;
}

/* 0 when nothing is at path, 2 after saying a set is there, 1 after saying why it could
 * not be looked at. */
static int there_already(const char *path, ShardRemote *remote)
{
    ShardListSettings ls;
    shard_list_default_settings(&ls);
    ls.remote = remote;
    ls.counts = 0;
    ShardList *l = NULL;
    ShardError err;
    int rc = shard_list_expand(&l, &path, 1, &ls, &err);
    shard_list_free(&l);
    if (rc == SHARD_ERR_NOT_FOUND)
        return 0;
    if (rc) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return 1;
    }
    fprintf(stderr, "shardcat: %s is there already: a subset writes a new set (remove it, or "
                    "name another -o)\n", path);
    return 2;
}

int shardcat_subset(const ShardcatCli *cli, ShardRemote *remote)
{
    ShardPackSettings ps;
    shard_pack_default_settings(&ps);
    ps.pattern = cli->output;
    char *manifest = shard_pack_manifest_path(&ps);
    if (!manifest) {
        fprintf(stderr, "shardcat: out of memory\n");
        return 1;
    }
    ShardError err;
    int there = there_already(manifest, remote);
    if (there) {
        free(manifest);
        return there;
    }
    ShardReader *r = open_view(cli, remote);
    ShardWriterSettings ws;
    shard_writer_default_settings(&ws);
    ws.pattern = cli->output;
    ws.maxcount = cli->shard_samples ? cli->shard_samples : SHARD_SAMPLES;
    ws.remote = remote;
    ShardWriter *w = NULL;
    int status = r ? 0 : 1;
    if (!status && shard_writer_open(&w, &ws, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        status = 1;
    }
    uint64_t n = 0;
    if (!status)
        status = copy(r, w, &n);
    if (!status && shard_writer_finish(w)) {
        fprintf(stderr, "shardcat: %s\n", shard_writer_error(w));
        status = 1;
    }
    if (!status)
        status = write_manifest(w, manifest, remote);
    if (!status) {
        ShardReaderStats st;
        shard_reader_stats(r, &st);
        fprintf(stderr, "shardcat: %llu samples in %zu shards: %s; keys: %llu given, %llu "
                        "chose no sample\n", (unsigned long long)n, shard_writer_count(w),
                manifest, (unsigned long long)st.keys_given,
                (unsigned long long)st.keys_missing);
    }
    shard_writer_free(&w);
    shard_reader_free(&r);
    free(manifest);
    return status;
}
