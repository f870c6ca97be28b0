/*
 * shardcat's command line (shardcat_cli.c): what each command is given, and the
 * library's settings it fills. Not installed.
 */
#ifndef SHARD_TOOLS_SHARDCAT_CLI_H
#define SHARD_TOOLS_SHARDCAT_CLI_H

#include <stddef.h>
#include <stdint.h>

#include <shard/shard.h>

#include "shardcat_help.h"

/* What the command line asks that is the tool's own; the library's settings it fills
 * (ShardLoaderSettings for show, its reader for stream, ShardRemoteSettings for every
 * command) are apart. */
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
    int geometry;          /* --geometry: index writes the columns beside the index too */
    const char *aspect_buckets; /* info --aspect-buckets SPEC: samples counted by bucket;
                                   show: a batch drawn per bucket */
    int image_size;             /* --image-size N, 0 when not given */
    const char *keys;           /* --keys FILE: stream, show, batch: the samples it lists
                                   alone; subset: those it writes */
    uint64_t shard_samples;     /* subset --count N: samples a shard written (0: not given) */
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
    int have_rank;     /* --rank given (batch: that rank only) */
    /* batch's own */
    uint64_t step;     /* --step N */
    int have_step;
    const char *key;   /* --key K */
    int have_batch_size; /* --batch-size B */
    int show;          /* --show: the step drawn into -o FILE, as show draws */
    /* show's own */
    const char *output; /* -o FILE: the PNG */
    int columns;        /* --columns N; 0: as square as the count allows */
} ShardcatCli;

/*
 * Reads the command line (of any command but bench, which reads its own) into cli and
 * the library's settings (each filled with its defaults first: the loader's are the Python
 * dataset's, batches of 16 for show). Help and --version go to stdout, bad usage to stderr.
 * @return -1 to go on and run the command; otherwise the exit status to leave with (0
 *         after help or the version, 2 after bad usage)
 */
int shardcat_parse(int argc, char **argv, ShardcatCli *cli, ShardLoaderSettings *loader,
                   ShardRemoteSettings *remote);

/*
 * The operands' checks that come once the remote is made (a remote setting the library
 * refuses is said first).
 * @return -1 when the command may run, else 2 after saying why
 */
int shardcat_check(const ShardcatCli *cli);

/* stream's and show's placement, completed in reader: its flags, else $RANK and $WORLD_SIZE (said on
 * stderr when they split the data), checked; and without --mode, the mode the Python
 * dataset takes: equal with several ranks (every rank the same count), else exact.
 * @return 0, or 2 after saying what is wrong */
int shardcat_placement(const ShardcatCli *cli, ShardReaderSettings *reader);

/* Frees what shardcat_parse allocated (the --mix lists). */
void shardcat_cli_free(ShardcatCli *cli);

#endif /* SHARD_TOOLS_SHARDCAT_CLI_H */
