/*
 * shardcat bench's command line (shardcat_bench_cli.h): its options read into a Bench,
 * and the loader's settings each setting of the sweep means.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "shardcat_bench_cli.h"

static void usage(FILE *f)
{
    fputs("usage: shardcat bench SHARD... [options]\n\n"
          "Decoded batches per second on these shards for each setting swept (warm-up left out,\n"
          "median of repeats), with the stage the others waited on; the decoder's ceiling\n"
          "(libjpeg-turbo alone, one copy per thread, on the best setting's first images with\n"
          "the very crops and scales the pipeline used); the best setting.\n\n"
          "  --seconds S        measured time of each run (default 10)\n"
          "  --warmup S         time first left out of each run (default 2)\n"
          "  --repeats N        runs of each setting (default 3)\n"
          "  --threads LIST     decode threads to try, e.g. 1,2,4 (default: half and all of\n"
          "                     the CPUs this process may use)\n"
          "  --streams LIST     fetch streams to try (default 2,4)\n"
          "  --queue-depth LIST samples read ahead per stream (default 64)\n"
          "  --batch-size N     (default 256)   --image-size N (default 224)\n"
          "  --shuffle N        shuffle buffer (default 1000)   --no-fast: full decode\n"
          "  --stats            each run's stages: busy and waiting shares, queue fill\n"
          "  --peer             also run the WebDataset + PIL pipeline on the same shards\n"
          "                     (the module libshard.peer, run by $SHARD_PYTHON, else the\n"
          "                     python3 beside shardcat, the venv's, /usr/bin/python3)\n"
          "  --json             one JSON document (with the stages)   -q: no progress line\n",
          f);
}

static int parse_list(const char *arg, uint64_t *out, size_t *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    *n = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == BENCH_MAX_LIST || cli_parse_u64(t, &out[*n]) || out[*n] == 0 || out[*n] > 4096)
            return -1;
        (*n)++;
    }
    return *n ? 0 : -1;
}

enum { O_SECONDS = 300, O_WARMUP, O_REPEATS, O_THREADS, O_STREAMS, O_DEPTH, O_BATCH, O_SIZE,
       O_SHUFFLE, O_NOFAST, O_JSON, O_STATS, O_PEER };

static const struct option long_options[] = {
    {"seconds", required_argument, NULL, O_SECONDS},
    {"warmup", required_argument, NULL, O_WARMUP},
    {"repeats", required_argument, NULL, O_REPEATS},
    {"threads", required_argument, NULL, O_THREADS},
    {"streams", required_argument, NULL, O_STREAMS},
    {"queue-depth", required_argument, NULL, O_DEPTH},
    {"batch-size", required_argument, NULL, O_BATCH},
    {"image-size", required_argument, NULL, O_SIZE},
    {"shuffle", required_argument, NULL, O_SHUFFLE},
    {"no-fast", no_argument, NULL, O_NOFAST},
    {"json", no_argument, NULL, O_JSON},
    {"quiet", no_argument, NULL, 'q'},
    {"stats", no_argument, NULL, O_STATS},
    {"peer", no_argument, NULL, O_PEER},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void default_options(Bench *b)
{
    int cpus = shard_cpus_available();
    *b = (Bench){.seconds = 10, .warmup = 2, .repeats = 3, .batch_size = 256, .shuffle = 1000,
                 .size = 224, .fast = 1, .cpus = cpus};
    b->threads[b->nthreads++] = (uint64_t)(cpus > 1 ? cpus / 2 : 1);
    if (cpus > 1)
        b->threads[b->nthreads++] = (uint64_t)cpus;
    b->streams[0] = 2, b->streams[1] = 4, b->nstreams = 2;
    b->depths[0] = 64, b->ndepths = 1;
}

/* An option with a number or list; -1, or 2 after saying what is wrong. */
static int value_option(int c, const char *arg, Bench *b)
{
    uint64_t v;
    switch (c) {
    case O_SECONDS:
    case O_WARMUP: {
        char *end;
        double d = strtod(arg, &end);
        if (*end || !(d >= 0) || d > 86400 || (c == O_SECONDS && d <= 0))
            return cli_usage_error("shardcat", "--seconds and --warmup want seconds");
        *(c == O_SECONDS ? &b->seconds : &b->warmup) = d;
        break;
    }
    case O_REPEATS:
        if (cli_parse_u64(arg, &v) || v < 1 || v > 100)
            return cli_usage_error("shardcat", "--repeats wants 1 to 100");
        b->repeats = (int)v;
        break;
    case O_THREADS:
    case O_STREAMS:
    case O_DEPTH: {
        uint64_t *list = c == O_THREADS ? b->threads : c == O_STREAMS ? b->streams : b->depths;
        size_t *n = c == O_THREADS ? &b->nthreads : c == O_STREAMS ? &b->nstreams : &b->ndepths;
        if (parse_list(arg, list, n))
            return cli_usage_error("shardcat", "--threads, --streams and --queue-depth want "
                                               "a list of whole numbers, e.g. 1,2,4");
        break;
    }
    default: /* O_BATCH, O_SIZE, O_SHUFFLE */
        if (cli_parse_u64(arg, &v) || (c != O_SHUFFLE && (v < 1 || v > 16384)))
            return cli_usage_error("shardcat", "--batch-size, --image-size and --shuffle "
                                               "want whole numbers");
        if (c == O_BATCH)
            b->batch_size = (size_t)v;
        else if (c == O_SIZE)
            b->size = (int)v;
        else
            b->shuffle = (size_t)v;
    }
    return -1;
}

/* Reads bench's command line (argv[0] is "bench") into b; -1, or the exit status after
 * help or bad usage. */
int bench_parse_options(int argc, char **argv, Bench *b)
{
    default_options(b);
    int c, quiet = 0, status = -1;
    optind = 1;
    opterr = 0;
    while (status < 0 && (c = getopt_long(argc, argv, ":qh", long_options, NULL)) != -1) {
        switch (c) {
        case O_NOFAST: b->fast = 0; break;
        case O_JSON: b->json = 1; break;
        case O_STATS: b->stats = 1; break;
        case O_PEER: b->peer = 1; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        case ':': return cli_usage_error("shardcat", "a bench option wants a value");
        case '?': return cli_option_error("shardcat", c, argv[optind - 1], long_options);
        default: status = value_option(c, optarg, b);
        }
    }
    if (status >= 0)
        return status;
    if (optind >= argc)
        return cli_usage_error("shardcat", "bench wants the shards to read");
    b->urls = argv + optind;
    b->nurls = (size_t)(argc - optind);
    b->bar = !quiet && isatty(2);
    return -1;
}

void bench_loader_settings(const Bench *b, ShardLoaderSettings *s, uint64_t threads,
                           uint64_t streams, uint64_t depth)
{
    shard_loader_default_settings(s);
    s->reader.urls = (const char *const *)b->urls;
    s->reader.nurls = b->nurls;
    s->reader.seed = 0;
    s->reader.have_seed = 1;
    s->reader.rank = 0;
    s->reader.world_size = 1;
    s->reader.shuffle_buffer = b->shuffle;
    s->reader.streams = (size_t)streams;
    s->reader.queue_depth = (size_t)depth;
    s->batch_size = b->batch_size;
    s->threads = (int)threads;
    s->transform.width = s->transform.height = b->size;
    s->transform.fast = b->fast;
}
