/*
 * The walk over the shards a shardcat command is given (shardcat_walk.c), and what the
 * commands share: a shard opened through the walk's remote, a JSON line.
 */
#ifndef SHARD_TOOLS_SHARDCAT_WALK_H
#define SHARD_TOOLS_SHARDCAT_WALK_H

#include <stddef.h>

#include <jansson.h>
#include <shard/shard.h>

#include "cli.h"
#include "shardcat_cli.h"

/* What a visit tells the walk. */
typedef enum ShardcatNext {
    SHARDCAT_NEXT,   /* this shard went well: on to the next */
    SHARDCAT_FAILED, /* this shard failed (said): on to the next; the exit status is 1 */
    SHARDCAT_DONE,   /* the command is done: no more shards */
    SHARDCAT_ABORT,  /* the command failed (said): no more shards; the exit status is 1 */
} ShardcatNext;

typedef struct ShardcatWalk ShardcatWalk;

/* One command's walk over the shards its operands name (shardcat_each_shard). The
 * command fills the first part; the walk keeps the second, which the callbacks read. */
struct ShardcatWalk {
    /* Called for each shard, in order. */
    ShardcatNext (*visit)(ShardcatWalk *w, const ShardListEntry *shard);
    /* Optional: once the list is made, before the first shard; nonzero ends the walk with
     * exit status 1 (said) and no end. */
    int (*begin)(ShardcatWalk *w);
    /* Optional: after the last shard, or after the visit that said DONE or ABORT
     * (stopped); its return (0 or 1) joins the exit status. */
    int (*end)(ShardcatWalk *w, int stopped);
    void *cookie;  /* the command's own; borrowed */
    int progress;  /* a progress line of shards done (a terminal, more than one shard) */

    const ShardcatCli *cli;
    ShardRemote *remote; /* every shard is read through it; borrowed */
    const ShardList *list;
    size_t index; /* the shard being visited */
    double bytes; /* bytes so far, on the progress line: a visit adds its shard's */
    CliProgress pg; /* a visit clears it (cli_progress_clear) before it prints */
};

/*
 * Expands the first nspecs operands into one shard list (with what each manifest says of
 * its shards), then runs w over it: begin, visit on each shard with the progress line
 * drawn, end. A list that cannot be made is said, and nothing visited.
 * @return the exit status: 1 when the list could not be made, begin failed, a visit said
 *         FAILED or ABORT, or end returned 1; else 0
 */
int shardcat_each_shard(const ShardcatCli *cli, ShardRemote *remote, size_t nspecs,
                        ShardcatWalk *w);

/* Opens a shard through the walk's remote; NULL after saying why. */
ShardFile *shardcat_open_shard(const ShardcatWalk *w, const char *url, ShardFileSettings *s);

/* Prints o as one compact line on stdout and drops the reference to it. */
void shardcat_json_line(json_t *o);

#endif /* SHARD_TOOLS_SHARDCAT_WALK_H */
