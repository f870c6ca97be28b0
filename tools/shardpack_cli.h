/*
 * shardpack's command line (shardpack_cli.c): what it asks, and the library's pack
 * settings made from it. Not installed.
 */
#ifndef SHARD_TOOLS_SHARDPACK_CLI_H
#define SHARD_TOOLS_SHARDPACK_CLI_H

#include <stddef.h>
#include <stdint.h>

#include <shard/shard.h>

enum { ON_ERROR_FAIL, ON_ERROR_SKIP };

/* What the command line asks, the tool's own; shardpack_settings makes the library's
 * ShardPackSettings from it. */
typedef struct ShardpackCli {
    const char *src;
    const char *pattern; /* -o: shards' names; with --join, the manifest to write */
    const char *manifest;
    uint64_t maxcount, maxsize, frame_size;
    int level;
    const char *zstd_option; /* --level or --frame-size, as given: zstd's, refused for .tar */
    int compress; /* -1: from the pattern */
    int have_shuffle;
    uint64_t seed;
    int jobs;
    int verify;
    int on_error;
    int list;
    uint64_t part, nparts;
    int have_part;
    int fsync;
    int checksums;
    int quiet;
    int json; /* --json: the summary as one JSON object on stdout */
    int64_t mtime;
    uint32_t max_side;
    int quality;
    uint64_t upload_part;
    uint32_t inflight;
    int resume;          /* --resume: keep what an interrupted run of this plan finished */
    int dedup;           /* --dedup: each distinct image once */
    int join;            /* --join: the part manifests are the operands */
    char **operands;     /* --join's part manifests; borrowed from argv */
    int noperands;
} ShardpackCli;

/*
 * Reads the command line into o (filled with its defaults first, SOURCE_DATE_EPOCH
 * included) and checks it. Help and --version go to stdout, bad usage to stderr.
 * @return -1 to go on; otherwise the exit status to leave with (0 after help or the
 *         version, 2 after bad usage)
 */
int shardpack_parse(int argc, char **argv, ShardpackCli *o);

/* The library's pack settings for o (no remote: the caller sets one for --upload-part). */
void shardpack_settings(const ShardpackCli *o, ShardPackSettings *ps);

#endif /* SHARD_TOOLS_SHARDPACK_CLI_H */
