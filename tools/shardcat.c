/*
 * shardcat — see inside shards, check them, index them, extract them.
 *
 * Every command takes shards as paths, brace patterns ("train-{000000..000099}.tar") or
 * manifests. Data goes to stdout, errors to stderr. Exit status: 0 success, 1 a defect or
 * failure was found, 2 bad usage.
 *
 * main reads the command line (shardcat_cli.c), makes the remote every shard is read
 * through, and runs the command: ls, info, cat (shardcat_inspect.c), extract
 * (shardcat_extract.c), verify, index (shardcat_verify.c), manifest (shardcat_manifest.c),
 * stream (shardcat_stream.c),
 * show (shardcat_show.c), batch (shardcat_batch.c), bench (shardcat_bench.c), all but the last three walking their
 * shards through shardcat_walk.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "shardcat_batch.h"
#include "shardcat_bench.h"
#include "shardcat_cli.h"
#include "shardcat_extract.h"
#include "shardcat_inspect.h"
#include "shardcat_manifest.h"
#include "shardcat_subset.h"
#include "shardcat_repair.h"
#include "shardcat_show.h"
#include "shardcat_stream.h"
#include "shardcat_verify.h"

/* The command, once its operands are checked. */
static int run(const ShardcatCli *cli, ShardLoaderSettings *loader, ShardRemote *remote)
{
    int status;
    switch (cli->command) {
    case SHARDCAT_STREAM: return shardcat_stream(cli, &loader->reader, remote);
    case SHARDCAT_SHOW: return shardcat_show(cli, loader, remote);
    case SHARDCAT_BATCH: return shardcat_batch(cli, loader, remote);
    case SHARDCAT_CAT: return shardcat_cat(cli, remote); /* says itself when stdout fails */
    case SHARDCAT_LS: status = shardcat_ls(cli, remote); break;
    case SHARDCAT_INFO: status = shardcat_info(cli, remote); break;
    case SHARDCAT_VERIFY: status = shardcat_verify(cli, remote); break;
    case SHARDCAT_INDEX: status = shardcat_index(cli, remote); break;
    case SHARDCAT_REPAIR: status = shardcat_repair(cli, remote); break;
    case SHARDCAT_MANIFEST: status = shardcat_manifest(cli, remote); break;
    case SHARDCAT_SUBSET: status = shardcat_subset(cli, remote); break;
    case SHARDCAT_EXTRACT: status = shardcat_extract(cli, remote); break;
    default: return 2; /* shardcat_check said so */
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (errno != EPIPE)
            fprintf(stderr, "shardcat: writing to stdout: %s\n", strerror(errno));
        return 1;
    }
    return status;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "bench")) /* options of its own */
        return shardcat_bench(argc - 1, argv + 1);
    ShardcatCli cli;
    ShardLoaderSettings loader;
    ShardRemoteSettings rs;
    int status = shardcat_parse(argc, argv, &cli, &loader, &rs);
    if (status >= 0) {
        shardcat_cli_free(&cli);
        return status;
    }
    ShardRemote *remote;
    ShardError err;
    rs.on_retry = cli_on_retry;
    rs.on_retry_cookie = (void *)"shardcat";
    if (shard_remote_new(&remote, &rs, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        shardcat_cli_free(&cli);
        return 2;
    }
    status = shardcat_check(&cli);
    if (status < 0 && (cli.command == SHARDCAT_STREAM || cli.command == SHARDCAT_SHOW ||
                       cli.command == SHARDCAT_BATCH) &&
        shardcat_placement(&cli, &loader.reader))
        status = 2;
    if (status < 0)
        status = run(&cli, &loader, remote);
    shard_remote_free(&remote);
    shardcat_cli_free(&cli);
    return status;
}
