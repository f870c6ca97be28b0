/*
 * shardcat's help (shardcat_help.c): the usage and each command's own, and the commands by
 * name. Not installed.
 */
#ifndef SHARD_TOOLS_SHARDCAT_HELP_H
#define SHARD_TOOLS_SHARDCAT_HELP_H

#include <stddef.h>
#include <stdio.h>

typedef enum ShardcatCommand {
    SHARDCAT_UNKNOWN = -1, /* said by shardcat_check (shardcat_cli.c), after the options' own checks */
    SHARDCAT_LS,
    SHARDCAT_CAT,
    SHARDCAT_INFO,
    SHARDCAT_VERIFY,
    SHARDCAT_INDEX,
    SHARDCAT_EXTRACT,
    SHARDCAT_STREAM,
    SHARDCAT_SHOW,
    SHARDCAT_REPAIR,
    SHARDCAT_BATCH,
    SHARDCAT_MANIFEST,
    SHARDCAT_SUBSET,
} ShardcatCommand;

/* The global help, to f. */
void shardcat_usage(FILE *f);
/* The help of the command called name (the global one for a name that is none) to
 * stdout; returns 0. */
int shardcat_help(const char *name);
/* The command called name, or SHARDCAT_UNKNOWN. */
ShardcatCommand shardcat_command_named(const char *name);
/* The commands' names (borrowed) into names, at most max; how many. */
size_t shardcat_command_names(const char **names, size_t max);

#endif /* SHARD_TOOLS_SHARDCAT_HELP_H */
