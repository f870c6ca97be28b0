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
    for (size_t i = 0; i < n; i++)
        samples += shard_list_entry(l, i)->nsamples;
    if (shard_list_manifest_of(l, name, &m, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        status = 1;
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
