/*
 * shardcat batch: a job's step named from the order alone (shard_step_keys), or every step
 * a key is in (shard_step_where), one line per sample.
 */
#include <stdio.h>

#include "cli.h"
#include "shardcat_batch.h"
#include "shardcat_show.h"
#include "shardcat_walk.h"

static void print_sample(const ShardStepSample *x, int json)
{
    if (json) {
        json_t *j = json_object();
        json_object_set_new(j, "step", json_integer((json_int_t)x->step));
        json_object_set_new(j, "rank", json_integer(x->rank));
        json_object_set_new(j, "worker", json_integer(x->worker));
        json_object_set_new(j, "slot", json_integer((json_int_t)x->slot));
        json_object_set_new(j, "__key__", cli_json_text(x->key));
        json_object_set_new(j, "__url__", cli_json_url(x->url));
        json_object_set_new(j, "index", json_integer((json_int_t)x->index));
        json_object_set_new(j, "position", json_integer((json_int_t)x->position));
        json_object_set_new(j, "pad", json_boolean(x->repeat));
        shardcat_json_line(j);
        return;
    }
    printf("%llu\t%d\t%d\t%llu\t", (unsigned long long)x->step, x->rank, x->worker,
           (unsigned long long)x->slot);
    cli_print_path(stdout, x->key);
    putchar('\t');
    cli_print_url(stdout, x->url);
    if (x->repeat)
        fputs("\tpad", stdout);
    putchar('\n');
}

/* --show: the consumer that delivered the step, restored to where it did, draws its first
 * batch as shardcat show does. */
static int draw_step(const ShardcatCli *cli, ShardLoaderSettings *ls, ShardRemote *remote,
                     ShardStepPlan *p)
{
    ShardReaderSettings *rs = &ls->reader;
    int world = shard_step_plan_world(p);
    if (!cli->have_rank && world > 1) {
        fprintf(stderr, "shardcat: batch --show draws one rank's batch: --rank R (of %d)\n",
                world);
        shard_step_plan_free(&p);
        return 2;
    }
    char *state = malloc(SHARD_READER_STATE_MAX);
    ShardStepConsumer who;
    int rc = state ? shard_step_state(p, rs->epoch, cli->step, cli->have_rank ? rs->rank : 0,
                                      &who, state, SHARD_READER_STATE_MAX)
                   : SHARD_ERR_NOMEM;
    if (rc) {
        char face[SHARD_ERROR_MAX + 256];
        fprintf(stderr, "shardcat: %s\n",
                state ? cli_face(shard_step_plan_error(p), face, sizeof face) : "out of memory");
        free(state);
        shard_step_plan_free(&p);
        return 1;
    }
    shard_step_plan_free(&p);
    rs->world_size = who.world_size;
    rs->num_workers = who.num_workers;
    rs->rank = who.rank;
    rs->worker = who.worker;
    int status = shardcat_show_from(cli, ls, remote, state);
    free(state);
    return status;
}

int shardcat_batch(const ShardcatCli *cli, ShardLoaderSettings *ls, ShardRemote *remote)
{
    ShardReaderSettings *rs = &ls->reader;
    if (!rs->have_seed) {
        fprintf(stderr, "shardcat: batch wants --seed S, the job's: another seed is another "
                        "order\n");
        return 2;
    }
    if (rs->worker) {
        fprintf(stderr, "shardcat: batch names every worker's batches: --worker does not go "
                        "with it (--workers N: the job's)\n");
        return 2;
    }
    rs->urls = (const char *const *)cli->args;
    rs->nurls = (size_t)cli->nargs;
    rs->remote = remote;
    rs->manifest_commands = cli->manifest_commands;
    rs->manifest_local = cli->manifest_local;
    rs->aspect_buckets = cli->aspect_buckets;
    rs->keys = cli->keys;
    ShardStepPlan *p;
    ShardError err;
    if (shard_step_plan_open(&p, ls, cli->state, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return 1;
    }
    if (cli->show)
        return draw_step(cli, ls, remote, p);
    const ShardStepSample *v;
    size_t n;
    int rc = cli->key ? shard_step_where(p, cli->key, rs->epoch, &v, &n)
                      : shard_step_keys(p, rs->epoch, cli->step,
                                        cli->have_rank ? rs->rank : SHARD_STEP_ALL_RANKS, &v,
                                        &n);
    if (rc) {
        char face[SHARD_ERROR_MAX + 256];
        fprintf(stderr, "shardcat: %s\n", cli_face(shard_step_plan_error(p), face, sizeof face));
        shard_step_plan_free(&p);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        print_sample(&v[i], cli->json);
    if (cli->stats) { /* what naming them read: the list's and the indexes' bytes */
        ShardReader *r = shard_step_plan_reader(p);
        ShardRemoteStats rs;
        shard_remote_stats(shard_reader_remote(r), &rs);
        ShardReaderStats st;
        shard_reader_stats(r, &st);
        fprintf(stderr, "shardcat: %llu shards listed in %.3f s (indexes: %llu made, %llu from "
                        "the cache); %llu indexes read to name samples; remote: %llu requests, "
                        "%llu bytes\n",
                (unsigned long long)st.shards, st.list_seconds,
                (unsigned long long)st.indexes_built, (unsigned long long)st.indexes_cached,
                (unsigned long long)shard_reader_indexes_read(r),
                (unsigned long long)rs.requests, (unsigned long long)rs.bytes);
    }
    shard_step_plan_free(&p);
    return 0;
}
