/*
 * shardcat bench's parts (not installed): its command line and the loader settings it means
 * (shardcat_bench_cli.c), the sweep and its report (shardcat_bench.c), and what the sweep is
 * compared with (shardcat_bench_compare.c): the decoder alone on the same images (the
 * ceiling) and the WebDataset + PIL pipeline on the same shards (the peer).
 */
#ifndef SHARD_TOOLS_SHARDCAT_BENCH_H
#define SHARD_TOOLS_SHARDCAT_BENCH_H

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

/* Samples/s of libjpeg-turbo alone, threads copies, on the first images the pipeline makes
 * with streams and depth (each with its crop and scale); 0 when none was read. *images:
 * how many. */
double bench_ceiling(const Bench *b, uint64_t threads, uint64_t streams, uint64_t depth,
                     size_t *images);

typedef struct BenchPeer {
    double rate;        /* samples/s, 0 when it did not run */
    char pipeline[256]; /* what ran, or why it did not */
} BenchPeer;

/* Runs python3 -m libshard.peer on the shards with workers processes for the same time and
 * batches (it prints one JSON line), filling p. */
void bench_peer(const Bench *b, uint64_t workers, BenchPeer *p);

#endif /* SHARD_TOOLS_SHARDCAT_BENCH_H */
