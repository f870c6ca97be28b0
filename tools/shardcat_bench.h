/*
 * shardcat bench (shardcat_bench.c): the sweep of the user's own pipeline and its report.
 * Its command line is shardcat_bench_cli.c's, what it is compared with
 * shardcat_bench_compare.c's. Not installed.
 */
#ifndef SHARD_TOOLS_SHARDCAT_BENCH_H
#define SHARD_TOOLS_SHARDCAT_BENCH_H

/* argv[0] is "bench": options of its own, read by bench_parse_options. Returns the exit
 * status. */
int shardcat_bench(int argc, char **argv);

#endif /* SHARD_TOOLS_SHARDCAT_BENCH_H */
