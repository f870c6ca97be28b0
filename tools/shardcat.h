/*
 * shardcat's parts (not installed): the command line (shardcat_cli.c), the walk over the
 * shards a command is given and what the commands share (shardcat_walk.c), and the
 * commands, grouped by what they do: inspect (ls, info, cat, extract), verify (verify,
 * index), stream, bench. main (shardcat.c) parses, makes the remote every shard is read
 * through, and runs the command.
 */
#ifndef SHARD_TOOLS_SHARDCAT_H
#define SHARD_TOOLS_SHARDCAT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <shard/shard.h>

#include "cli.h"

/* ---- the command line (shardcat_cli.c) ------------------------------------------------ */

typedef enum ShardcatCommand {
    SHARDCAT_UNKNOWN = -1, /* said by shardcat_check, after the options' own checks */
    SHARDCAT_LS,
    SHARDCAT_CAT,
    SHARDCAT_INFO,
    SHARDCAT_VERIFY,
    SHARDCAT_INDEX,
    SHARDCAT_EXTRACT,
    SHARDCAT_STREAM,
} ShardcatCommand;

/* What the command line asks that is the tool's own; the library's settings it fills
 * (ShardReaderSettings for stream, ShardRemoteSettings for every command) are apart. */
typedef struct ShardcatCli {
    const char *name; /* the command as written (argv[1]) */
    ShardcatCommand command;
    char **args; /* the operands: SHARD... (cat: SHARD KEY.FIELD); borrowed from argv */
    int nargs;
    int json;              /* --json: ls, info, verify, stream */
    int decode;            /* --decode: verify */
    const char *dir;       /* -C DIR: extract */
    int bar;               /* a progress line on stderr: a terminal, and no -q */
    int manifest_commands; /* --allow-manifest-commands */
    int manifest_local;    /* --allow-manifest-local */
    /* stream's own */
    uint64_t samples; /* --samples N: stop after N, print the state to resume from */
    int have_samples;
    const char *state; /* --state STATE: resume */
    int have_mode;     /* --mode given; else equal with several ranks, exact with one */
    int stats;         /* --stats */
    ShardMixInput *mix; /* --mix sources, each of one spec (its urls point at spec[i]);
                         * ShardReaderSettings.sources points at them */
    const char **spec;
    size_t nmix;
} ShardcatCli;

/*
 * Reads the command line (of any command but bench, which reads its own) into cli and
 * the library's settings (each filled with its defaults first). Help and --version go to
 * stdout, bad usage to stderr.
 * @return -1 to go on and run the command; otherwise the exit status to leave with (0
 *         after help or the version, 2 after bad usage)
 */
int shardcat_parse(int argc, char **argv, ShardcatCli *cli, ShardReaderSettings *reader,
                   ShardRemoteSettings *remote);

/*
 * The operands' checks that come once the remote is made (a remote setting the library
 * refuses is said first).
 * @return -1 when the command may run, else 2 after saying why
 */
int shardcat_check(const ShardcatCli *cli);

/* stream's placement, completed in reader: its flags, else $RANK and $WORLD_SIZE (said on
 * stderr when they split the data), checked; and without --mode, the mode the Python
 * dataset takes: equal with several ranks (every rank the same count), else exact.
 * @return 0, or 2 after saying what is wrong */
int shardcat_placement(const ShardcatCli *cli, ShardReaderSettings *reader);

/* Frees what shardcat_parse allocated (the --mix lists). */
void shardcat_cli_free(ShardcatCli *cli);

/* ---- the walk over the shards (shardcat_walk.c) --------------------------------------- */

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

/* ---- the commands: each returns the exit status ----------------------------------------- */

/* shardcat_inspect.c */
int shardcat_ls(const ShardcatCli *cli, ShardRemote *remote);
int shardcat_info(const ShardcatCli *cli, ShardRemote *remote);
int shardcat_cat(const ShardcatCli *cli, ShardRemote *remote);
int shardcat_extract(const ShardcatCli *cli, ShardRemote *remote);

/* shardcat_verify.c */
int shardcat_verify(const ShardcatCli *cli, ShardRemote *remote);
int shardcat_index(const ShardcatCli *cli, ShardRemote *remote);

/* shardcat_stream.c: reader is shardcat_parse's, completed here (urls, sources, remote) */
int shardcat_stream(const ShardcatCli *cli, ShardReaderSettings *reader, ShardRemote *remote);

/* shardcat_bench.c: argv[0] is "bench"; options of its own, read there */
int shardcat_bench(int argc, char **argv);

#endif /* SHARD_TOOLS_SHARDCAT_H */
