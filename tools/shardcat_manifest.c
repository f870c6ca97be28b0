/*
 * shardcat manifest: what a job's sources name, written down once. A folder or prefix is
 * listed (the Hub's revision resolved and pinned), each shard counted (its manifest's
 * count, its .idx, or an index made where that is cheap), and the whole written as one
 * manifest: the job then reads one file, with no listing and no index read for counts.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "shardcat_manifest.h"

/* The manifest's name: the output's file name without its .json. */
static void name_of(const char *path, char *out, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".json"))
        n -= 5;
    snprintf(out, cap, "%.*s", (int)n, base);
}

int shardcat_manifest(const ShardcatCli *cli, ShardRemote *remote)
{
    ShardListSettings ls;
    shard_list_default_settings(&ls);
    ls.remote = remote;
    ls.counts = 1;
    ls.build_indexes = SHARD_INDEXES_WHERE_CHEAP;
    ls.manifest_commands = cli->manifest_commands;
    ls.manifest_local = cli->manifest_local;
    ls.progress = cli->bar;
    ShardList *l = NULL;
    ShardManifest *m = NULL;
    ShardError err;
    char name[256];
    name_of(cli->output, name, sizeof name);
    if (shard_list_expand(&l, (const char *const *)cli->args, (size_t)cli->nargs, &ls, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return 1;
    }
    int status = 0;
    uint64_t samples = 0;
    size_t n = shard_list_count(l);
    if (shard_manifest_new(&m, name)) {
        fprintf(stderr, "shardcat: out of memory\n");
        status = 1;
    }
    for (size_t i = 0; !status && i < n; i++) {
        const ShardListEntry *e = shard_list_entry(l, i);
        if (e->nsamples == SHARD_COUNT_UNKNOWN) {
            fprintf(stderr, "shardcat: %s: no sample count (no manifest lists it and no .idx "
                            "is beside it: shardcat index makes one)\n", e->url);
            status = 1;
            break;
        }
        ShardFileInfo fi = e->info ? *e->info : (ShardFileInfo){0};
        fi.url = e->url;
        fi.nsamples = e->nsamples;
        samples += e->nsamples;
        if (shard_manifest_add(m, &fi)) {
            fprintf(stderr, "shardcat: out of memory\n");
            status = 1;
        }
    }
    if (!status && shard_manifest_write_remote(m, cli->output, remote, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        status = 1;
    }
    if (!status)
        fprintf(stderr, "shardcat: %zu shards, %llu samples: %s\n", n,
                (unsigned long long)samples, cli->output);
    shard_manifest_free(&m);
    shard_list_free(&l);
    return status;
}
