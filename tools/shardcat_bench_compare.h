/*
 * What shardcat bench's sweep is compared with (shardcat_bench_compare.c): the decoder
 * alone on the same images (the ceiling) and the WebDataset + PIL pipeline on the same
 * shards (the peer). Not installed.
 */
#ifndef SHARD_TOOLS_SHARDCAT_BENCH_COMPARE_H
#define SHARD_TOOLS_SHARDCAT_BENCH_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "shardcat_bench_cli.h"

/* Samples/s of libjpeg-turbo alone, threads copies, on the first images the pipeline makes
 * with streams and depth (each with its crop and scale); 0 when none was read. *images:
 * how many. */
double bench_ceiling(const Bench *b, uint64_t threads, uint64_t streams, uint64_t depth,
                     size_t *images);

typedef struct BenchPeer {
    double rate;        /* samples/s, 0 when it did not run */
    char pipeline[640]; /* what ran, or why it did not */
} BenchPeer;

/* Runs python3 -m libshard.peer on the shards with workers processes for the same time and
 * batches (it prints one JSON line), filling p: its rate, or why it did not run and how to
 * point it at an interpreter ($SHARD_PYTHON, else the python3 beside shardcat, the active
 * venv's, /usr/bin/python3). */
void bench_peer(const Bench *b, uint64_t workers, BenchPeer *p);

#endif /* SHARD_TOOLS_SHARDCAT_BENCH_COMPARE_H */
