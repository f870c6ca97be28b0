/*
 * shardcat: the one walk over the shards a command is given, and what the commands share
 * (opening a shard, JSON output).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shardcat_walk.h"

/* Expands the specs into one list (with what each manifest says of its shards); NULL
 * after saying why one is unusable. */
static ShardList *collect(char **specs, size_t n, ShardRemote *remote, int manifest_commands,
                          int manifest_local)
{
    ShardListSettings s;
    shard_list_default_settings(&s);
    s.counts = 0;
    s.remote = remote;
    s.manifest_commands = manifest_commands;
    s.manifest_local = manifest_local;
    ShardList *l;
    ShardError err;
    if (shard_list_expand(&l, (const char *const *)specs, n, &s, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return NULL;
    }
    return l;
}

int shardcat_each_shard(const ShardcatCli *cli, ShardRemote *remote, size_t nspecs,
                        ShardcatWalk *w)
{
    ShardList *list = collect(cli->args, nspecs, remote, cli->manifest_commands,
                               cli->manifest_local);
    if (!list)
        return 1;
    w->cli = cli;
    w->remote = remote;
    w->list = list;
    w->bytes = 0;
    size_t count = shard_list_count(list);
    cli_progress_begin(&w->pg, w->progress && cli->bar && count > 1, "shards", count);
    int status = 0, stopped = 0;
    if (w->begin && w->begin(w)) {
        shard_list_free(&list);
        return 1;
    }
    for (w->index = 0; w->index < count && !stopped; w->index++) {
        cli_progress_update(&w->pg, w->index, w->bytes, 1);
        ShardcatNext next = w->visit(w, shard_list_entry(list, w->index));
        cli_progress_clear(&w->pg);
        if (next == SHARDCAT_FAILED || next == SHARDCAT_ABORT)
            status = 1;
        stopped = next == SHARDCAT_DONE || next == SHARDCAT_ABORT;
    }
    if (w->end && w->end(w, stopped))
        status = 1;
    shard_list_free(&list);
    w->list = NULL;
    return status;
}

ShardFile *shardcat_open_shard(const ShardcatWalk *w, const char *url, ShardFileSettings *s)
{
    ShardFile *f;
    ShardError err;
    s->remote = w->remote;
    if (shard_file_open(&f, url, s, &err)) {
        const ShardListEntry *e = shard_list_entry(w->list, w->index);
        int moved = err.code == SHARD_ERR_NOT_FOUND && e && e->info && !strstr(url, "://");
        fprintf(stderr, "shardcat: %s%s\n", err.message,
                moved ? " (a manifest's shard names resolve against the manifest's own folder)"
                      : "");
        return NULL;
    }
    return f;
}

void shardcat_json_line(json_t *o)
{
    char *line = json_dumps(o, JSON_COMPACT);
    if (line)
        puts(line);
    free(line);
    json_decref(o);
}
