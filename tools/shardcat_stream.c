/*
 * shardcat stream: the streaming reader's samples, one line each (key, url), in the order
 * the reader gives them (shuffled, split by rank and worker, mixed); the state to resume
 * from and the reader's statistics on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "shardcat_stream.h"
#include "shardcat_walk.h"

/* Opens the reader on the operands or the --mix sources (s->sources, shardcat_parse's),
 * restored to --state; NULL after saying why not. */
static ShardReader *open_reader(const ShardcatCli *cli, ShardReaderSettings *s,
                                ShardRemote *remote)
{
    s->urls = (const char *const *)cli->args;
    s->nurls = (size_t)cli->nargs;
    s->remote = remote;
    s->manifest_commands = cli->manifest_commands;
    s->manifest_local = cli->manifest_local;
    s->aspect_buckets = cli->aspect_buckets;
    s->keys = cli->keys;
    ShardReader *r;
    ShardError err;
    if (shard_reader_open(&r, s, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return NULL;
    }
    if (!s->have_seed)
        fprintf(stderr, "shardcat: seed %llu (random; pass --seed to repeat this order)\n",
                (unsigned long long)shard_reader_seed(r));
    if (cli->state && shard_reader_restore(r, cli->state)) {
        char face[SHARD_ERROR_MAX + 256];
        fprintf(stderr, "shardcat: %s\n", cli_face(shard_reader_error(r), face, sizeof face));
        shard_reader_free(&r);
        return NULL;
    }
    return r;
}

static void print_sample(const ShardReader *r, const char *key, const char *url, int json)
{
    if (json) {
        json_t *j = json_object();
        json_object_set_new(j, "__key__", cli_json_text(key));
        json_object_set_new(j, "__url__", cli_json_url(url));
        int h, w, end;
        if (shard_reader_bucket(r, NULL, &h, &w, &end) >= 0) { /* --aspect-buckets */
            json_object_set_new(j, "__bucket__", json_pack("[ii]", h, w));
            json_object_set_new(j, "__batch_end__", json_boolean(end));
        }
        shardcat_json_line(j);
        return;
    }
    cli_print_path(stdout, key);
    putchar('\t');
    cli_print_url(stdout, url);
    putchar('\n');
}

/* Prints the samples (at most --samples); the last return of shard_reader_next. */
static int print_samples(const ShardcatCli *cli, ShardReader *r)
{
    int rc = 0;
    uint64_t n = 0;
    const char *key, *url;
    const ShardFieldView *fields;
    size_t nfields;
    int64_t length = shard_reader_epoch_length(r);
    uint64_t total = cli->have_samples ? cli->samples : length > 0 ? (uint64_t)length : 0;
    CliProgress pg;
    /* over the samples printed only when they go elsewhere: a terminal shows them */
    cli_progress_begin(&pg, cli->bar && !isatty(1), "samples", total);
    double bytes = 0;
    while ((!cli->have_samples || n < cli->samples) &&
           (rc = shard_reader_next(r, &key, &url, &fields, &nfields)) == 0) {
        for (size_t k = 0; k < nfields; k++)
            bytes += (double)fields[k].size;
        cli_progress_update(&pg, n, bytes, n == 0);
        print_sample(r, key, url, cli->json);
        n++;
    }
    cli_progress_update(&pg, n, bytes, 1);
    cli_progress_clear(&pg);
    fflush(stdout);
    return rc;
}

/* --stats: the remote's and the reader's counts and the stages' times, on stderr. */
static void print_stats(ShardReader *r)
{
    ShardRemoteStats rs;
    shard_remote_stats(shard_reader_remote(r), &rs);
    if (rs.requests || rs.cache_hits)
        fprintf(stderr,
                "shardcat: remote: %llu requests, %llu bytes, %llu retries, %llu resumes, "
                "%llu ranges answered whole, %llu replaced, %.3f s waiting on the network, "
                "cache %llu hits %llu misses, %llu resolves, %llu straight to a CDN link\n",
                (unsigned long long)rs.requests, (unsigned long long)rs.bytes,
                (unsigned long long)rs.retries, (unsigned long long)rs.resumes,
                (unsigned long long)rs.range_ignored, (unsigned long long)rs.replaced,
                rs.wait_seconds, (unsigned long long)rs.cache_hits,
                (unsigned long long)rs.cache_misses, (unsigned long long)rs.resolves,
                (unsigned long long)rs.direct);
    ShardReaderStats st;
    shard_reader_stats(r, &st);
    fprintf(stderr,
            "shardcat: %llu samples, %llu bytes, %llu shard opens, %.3f s waiting for data, "
            "%llu errors skipped (%llu shards, %llu samples lost)\n",
            (unsigned long long)st.samples, (unsigned long long)st.bytes,
            (unsigned long long)st.shards_opened, st.wait_seconds, (unsigned long long)st.errors,
            (unsigned long long)st.skipped_shards, (unsigned long long)st.skipped_samples);
    if (st.skipped_unsized)
        fprintf(stderr, "shardcat: %llu samples without an image size left out (in no aspect "
                "bucket)\n", (unsigned long long)st.skipped_unsized);
    fprintf(stderr,
            "shardcat: stages: list %llu shard%s in %.3f s (indexes: %llu made, %llu from the "
            "cache); fetch streams, summed: reading %.3f s (%llu bytes as stored), "
            "decompressing %.3f s (%llu bytes out), parsing %.3f s\n",
            (unsigned long long)st.shards, st.shards == 1 ? "" : "s", st.list_seconds,
            (unsigned long long)st.indexes_built, (unsigned long long)st.indexes_cached,
            st.read_seconds, (unsigned long long)st.read_bytes, st.decompress_seconds,
            (unsigned long long)st.decompressed_bytes, st.parse_seconds);
}

int shardcat_stream(const ShardcatCli *cli, ShardReaderSettings *reader, ShardRemote *remote)
{
    ShardReader *r = open_reader(cli, reader, remote);
    if (!r)
        return 1;
    int status = 0;
    int rc = print_samples(cli, r);
    if (rc && rc != SHARD_EOS) {
        char face[SHARD_ERROR_MAX + 256];
        fprintf(stderr, "shardcat: %s\n", cli_face(shard_reader_error(r), face, sizeof face));
        status = 1;
    }
    if (cli->have_samples) {
        char *state = malloc(SHARD_READER_STATE_MAX);
        if (state && !shard_reader_state(r, state, SHARD_READER_STATE_MAX))
            fprintf(stderr, "state: %s\n", state);
        else
            fprintf(stderr, "shardcat: the state does not fit in memory\n");
        free(state);
    }
    for (size_t i = 0; shard_reader_kept_error(r, i); i++)
        fprintf(stderr, "shardcat: skipped: %s\n", shard_reader_kept_error(r, i));
    if (cli->stats)
        print_stats(r);
    ShardReaderStats st;
    shard_reader_stats(r, &st);
    if (cli->keys) /* said whatever --stats: a key that chose nothing is no silent loss */
        fprintf(stderr, "shardcat: keys: %llu given, %llu samples chosen, %llu keys chose no "
                        "sample\n", (unsigned long long)st.keys_given,
                (unsigned long long)st.keys_chosen, (unsigned long long)st.keys_missing);
    ShardRemoteStats rs;
    shard_remote_stats(shard_reader_remote(r), &rs);
    if (rs.range_ignored) /* said whatever --stats: the bytes read exceed the shards' */
        fprintf(stderr, "shardcat: %llu Range requests were answered with the whole object: "
                        "each read from an offset fetched it from its start (%llu bytes read); "
                        "serve the shards from a server that honours Range (nginx, GCS, S3 do)\n",
                (unsigned long long)rs.range_ignored, (unsigned long long)rs.bytes);
    shard_reader_free(&r);
    return status;
}
