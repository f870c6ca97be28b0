/*
 * shardcat bench (bench.c): argv[0] is "bench". Returns the exit status.
 */
#ifndef SHARD_TOOLS_BENCH_H
#define SHARD_TOOLS_BENCH_H

int shardcat_bench(int argc, char **argv);

#endif /* SHARD_TOOLS_BENCH_H */
