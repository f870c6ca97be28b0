/*
 * shardcat bench's command line (shardcat_bench_cli.c): what it asks, and the loader
 * settings one setting of its sweep means. Not installed.
 */
#ifndef SHARD_TOOLS_SHARDCAT_BENCH_CLI_H
#define SHARD_TOOLS_SHARDCAT_BENCH_CLI_H

#include <stddef.h>
#include <stdint.h>

#include <shard/shard.h>

#define BENCH_MAX_LIST 16

/* What shardcat bench's command line asks. */
typedef struct Bench {
    char **urls; /* the shards; borrowed from argv */
    size_t nurls;
    double seconds, warmup;
    int repeats, json, bar, stats, peer;
    size_t batch_size, shuffle;
    int size, fast;
    int cpus; /* this process may use */
    uint64_t threads[BENCH_MAX_LIST], streams[BENCH_MAX_LIST], depths[BENCH_MAX_LIST];
    size_t nthreads, nstreams, ndepths;
} Bench;

/* Reads bench's command line (argv[0] is "bench") into b; -1, or the exit status after
 * help or bad usage. */
int bench_parse_options(int argc, char **argv, Bench *b);

/* The loader's settings for one setting of the sweep. */
void bench_loader_settings(const Bench *b, ShardLoaderSettings *s, uint64_t threads,
                           uint64_t streams, uint64_t depth);

#endif /* SHARD_TOOLS_SHARDCAT_BENCH_CLI_H */
