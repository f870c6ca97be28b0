/*
 * shardcat bench — the user's pipeline on the user's shards: decoded batches per second for
 * a sweep of decode threads, fetch streams and queue depths (warm-up left out, medians of
 * repeats), each with the stage the others waited on, beside the decoder's own ceiling on the
 * same images (shardcat_bench_compare.c); the best setting and how near the defaults come
 * to it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "shardcat_bench.h"
#include "shardcat_bench_cli.h"
#include "shardcat_bench_compare.h"

typedef struct Result {
    uint64_t threads, streams, depth;
    double rate; /* samples/s, median of the repeats */
    char verdict[256];
    ShardLoaderStats stats; /* of the last repeat */
} Result;

/* What the sweep is set beside. */
typedef struct Summary {
    size_t best;                /* the run of the best setting */
    const Result *def;          /* the defaults' run, NULL when not swept */
    uint64_t ceiling_threads;   /* the most threads swept */
    double ceiling;             /* bench_ceiling on the best setting */
    size_t ceiling_images;
    BenchPeer peer;
} Summary;

/* ---- the sweep ----------------------------------------------------------------------- */

/* One run: samples/s after the warm-up; its statistics at its end. -1 on an error (said). */
static double run_once(const Bench *b, uint64_t threads, uint64_t streams, uint64_t depth,
                       ShardLoaderStats *out)
{
    ShardLoaderSettings s;
    bench_loader_settings(b, &s, threads, streams, depth);
    ShardLoader *l;
    ShardError err;
    if (shard_loader_open(&l, &s, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return -1;
    }
    double t0 = cli_now(), start = 0;
    uint64_t before = 0, epoch = 0;
    ShardLoaderStats st;
    for (;;) {
        const ShardBatch *batch;
        int rc = shard_loader_next(l, &batch);
        if (rc == SHARD_EOS) { /* short data: epoch after epoch (read ahead, no stall) */
            if (shard_loader_set_epoch(l, ++epoch))
                rc = SHARD_ERR_STATE;
            else
                continue;
        }
        if (rc) {
            char face[SHARD_ERROR_MAX + 256];
            fprintf(stderr, "shardcat: %s\n", cli_face(shard_loader_error(l), face, sizeof face));
            shard_loader_free(&l);
            return -1;
        }
        shard_batch_release(l, batch);
        double now = cli_now();
        if (!start && now - t0 >= b->warmup) {
            shard_loader_stats(l, &st);
            before = st.stages[SHARD_STAGES - 1].items;
            start = now;
        } else if (start && now - start >= b->seconds) {
            break;
        }
    }
    shard_loader_stats(l, out);
    double rate = (double)(out->stages[SHARD_STAGES - 1].items - before) / (cli_now() - start);
    shard_loader_free(&l);
    return rate;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs every setting (threads x streams x depths, in that order) b->repeats times into
 * res; 1 after an error (said). */
static int sweep(const Bench *b, Result *res, size_t nruns)
{
    double *rates = calloc((size_t)b->repeats, sizeof *rates);
    if (!rates) {
        fprintf(stderr, "shardcat: out of memory\n");
        return 1;
    }
    CliProgress pg;
    cli_progress_begin(&pg, b->bar, "runs", nruns * (size_t)b->repeats);
    size_t k = 0, done = 0;
    int status = 0;
    for (size_t i = 0; i < b->nthreads && !status; i++)
        for (size_t j = 0; j < b->nstreams && !status; j++)
            for (size_t d = 0; d < b->ndepths && !status; d++, k++) {
                Result *r = &res[k];
                r->threads = b->threads[i], r->streams = b->streams[j], r->depth = b->depths[d];
                for (int rep = 0; rep < b->repeats && !status; rep++) {
                    cli_progress_update(&pg, done++, 0, 1);
                    rates[rep] = run_once(b, r->threads, r->streams, r->depth, &r->stats);
                    snprintf(r->verdict, sizeof r->verdict, "%s", r->stats.verdict);
                    status = rates[rep] < 0;
                }
                qsort(rates, (size_t)b->repeats, sizeof *rates, cmp_double);
                r->rate = rates[b->repeats / 2];
            }
    cli_progress_clear(&pg);
    free(rates);
    return status;
}

/* The best setting, the defaults' run, and the ceiling and peer beside them. */
static void summarize(const Bench *b, const Result *res, size_t nruns, Summary *s)
{
    s->ceiling_threads = b->threads[0];
    s->best = 0;
    for (size_t i = 0; i < nruns; i++) {
        if (res[i].rate > res[s->best].rate)
            s->best = i;
        if (res[i].threads > s->ceiling_threads)
            s->ceiling_threads = res[i].threads;
    }
    const Result *best = &res[s->best];
    /* the best setting's first images, decoded as it decoded them */
    s->ceiling_images = 0;
    s->ceiling = bench_ceiling(b, s->ceiling_threads, best->streams, best->depth,
                               &s->ceiling_images);
    s->peer = (BenchPeer){0, ""};
    if (b->peer) /* one DataLoader worker per decode thread of the ceiling: a core each */
        bench_peer(b, s->ceiling_threads, &s->peer);
    /* the defaults: threads for every CPU, the reader's 4 streams of 64 */
    s->def = NULL;
    for (size_t i = 0; i < nruns; i++)
        if (res[i].threads == (uint64_t)b->cpus && res[i].streams == 4 && res[i].depth == 64)
            s->def = &res[i];
}

/* ---- the report ---------------------------------------------------------------------- */

static json_t *run_json(const Result *r)
{
    json_t *run = json_pack("{s:I,s:I,s:I,s:f,s:s}", "threads", (json_int_t)r->threads,
                            "streams", (json_int_t)r->streams, "queue_depth",
                            (json_int_t)r->depth, "samples_per_second", r->rate, "bottleneck",
                            r->verdict);
    json_t *stages = json_object();
    for (int k = 0; k < SHARD_STAGES; k++) {
        const ShardStageStats *g = &r->stats.stages[k];
        if (!g->threads) /* not in this pipeline (upload) */
            continue;
        json_object_set_new(stages, g->name,
                            json_pack("{s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:I,s:I}", "threads",
                                      (json_int_t)g->threads, "items", (json_int_t)g->items,
                                      "bytes", (json_int_t)g->bytes, "seconds", g->seconds,
                                      "busy_seconds", g->busy_seconds, "wait_input_seconds",
                                      g->wait_input_seconds, "wait_output_seconds",
                                      g->wait_output_seconds, "queue_fill",
                                      (json_int_t)g->queue_fill, "queue_capacity",
                                      (json_int_t)g->queue_capacity));
    }
    json_object_set_new(run, "stages", stages);
    return run;
}

static void report_json(const Bench *b, const Result *res, size_t nruns, const Summary *s)
{
    const Result *best = &res[s->best];
    json_t *o = json_object(), *runs = json_array();
    for (size_t i = 0; i < nruns; i++)
        json_array_append_new(runs, run_json(&res[i]));
    json_object_set_new(o, "runs", runs);
    json_object_set_new(o, "ceiling", json_pack("{s:f,s:I,s:I}", "samples_per_second",
                                                s->ceiling, "threads",
                                                (json_int_t)s->ceiling_threads, "images",
                                                (json_int_t)s->ceiling_images));
    if (b->peer)
        json_object_set_new(o, "peer", json_pack("{s:f,s:s,s:I}", "samples_per_second",
                                                 s->peer.rate, "pipeline", s->peer.pipeline,
                                                 "workers", (json_int_t)s->ceiling_threads));
    json_object_set_new(o, "best", json_pack("{s:I,s:I,s:I,s:f}", "threads",
                                             (json_int_t)best->threads, "streams",
                                             (json_int_t)best->streams, "queue_depth",
                                             (json_int_t)best->depth, "samples_per_second",
                                             best->rate));
    json_object_set_new(o, "defaults_share_of_best",
                        s->def && best->rate > 0 ? json_real(s->def->rate / best->rate)
                                                 : json_null());
    char *text = json_dumps(o, JSON_INDENT(1));
    if (text)
        puts(text);
    free(text);
    json_decref(o);
}

/* --stats: a run's stages, busy and waiting shares and queue fill. */
static void print_stages(const ShardLoaderStats *st)
{
    for (int k = 0; k < SHARD_STAGES; k++) {
        const ShardStageStats *g = &st->stages[k];
        double t = g->seconds > 0 ? g->seconds : 1;
        if (!g->threads)
            continue;
        if (k == SHARD_STAGE_LIST) { /* once, before the others: no shares of a run */
            printf("        %-10s %llu shard%s in %.3f s\n", g->name,
                   (unsigned long long)g->items, g->items == 1 ? "" : "s", g->seconds);
            continue;
        }
        printf("        %-10s %2u thread%s  busy %5.1f%%  waiting for input %5.1f%%, for "
               "output %5.1f%%  queue %zu/%zu\n", g->name, g->threads,
               g->threads == 1 ? " " : "s", 100 * g->busy_seconds / t,
               100 * g->wait_input_seconds / t, 100 * g->wait_output_seconds / t,
               g->queue_fill, g->queue_capacity);
    }
}

static void report_text(const Bench *b, const Result *res, size_t nruns, const Summary *s)
{
    const Result *best = &res[s->best];
    printf("%zu run%s of %g s (after %g s of warm-up), medians of %d; batch %zu, %dx%d%s\n",
           nruns, nruns == 1 ? "" : "s", b->seconds, b->warmup, b->repeats, b->batch_size,
           b->size, b->size, b->fast ? "" : ", full decode");
    printf("threads streams queue  samples/s  bottleneck\n");
    for (size_t i = 0; i < nruns; i++) {
        printf("%7llu %7llu %5llu %10.1f  %s\n", (unsigned long long)res[i].threads,
               (unsigned long long)res[i].streams, (unsigned long long)res[i].depth, res[i].rate,
               res[i].verdict);
        if (b->stats)
            print_stages(&res[i].stats);
    }
    if (s->ceiling > 0)
        printf("ceiling: libjpeg-turbo alone, %llu thread%s, on the best setting's first %zu "
               "images with their crops and scales: %.1f samples/s\n",
               (unsigned long long)s->ceiling_threads, s->ceiling_threads == 1 ? "" : "s",
               s->ceiling_images, s->ceiling);
    if (b->peer && s->peer.rate > 0)
        printf("peer: %s: %.1f samples/s\n", s->peer.pipeline, s->peer.rate);
    else if (b->peer)
        printf("peer: %s\n", s->peer.pipeline);
    printf("best: --threads %llu --streams %llu --queue-depth %llu: %.1f samples/s",
           (unsigned long long)best->threads, (unsigned long long)best->streams,
           (unsigned long long)best->depth, best->rate);
    if (s->ceiling > 0)
        printf(", %.2f of the ceiling", best->rate / s->ceiling);
    if (s->peer.rate > 0)
        printf(", %.1fx the peer", best->rate / s->peer.rate);
    putchar('\n');
    if (s->def && best->rate > 0)
        printf("defaults (threads %d, streams 4, queue 64): %.2f of the best\n", b->cpus,
               s->def->rate / best->rate);
}

/* ---- the command --------------------------------------------------------------------- */

int shardcat_bench(int argc, char **argv)
{
    Bench b;
    int status = bench_parse_options(argc, argv, &b);
    if (status >= 0)
        return status;
    size_t nruns = b.nthreads * b.nstreams * b.ndepths;
    Result *res = calloc(nruns, sizeof *res);
    if (!res) {
        fprintf(stderr, "shardcat: out of memory\n");
        return 1;
    }
    if (sweep(&b, res, nruns)) {
        free(res);
        return 1;
    }
    Summary s;
    summarize(&b, res, nruns, &s);
    if (b.json)
        report_json(&b, res, nruns, &s);
    else
        report_text(&b, res, nruns, &s);
    free(res);
    return 0;
}
