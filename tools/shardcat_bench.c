/*
 * shardcat bench — the user's pipeline on the user's shards: decoded batches per second for
 * a sweep of decode threads, fetch streams and queue depths (warm-up left out, medians of
 * repeats), each with the stage the others waited on, beside the decoder's own ceiling on the
 * same images; the best setting and how near the defaults come to it.
 */
#include <getopt.h>
#include <spawn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <shard/shard.h>

#include "shardcat.h"
#include "cli.h"

#define MAX_LIST 16
#define CEILING_IMAGES 4096
#define CEILING_BYTES ((size_t)256 << 20)

typedef struct Bench {
    char **urls;
    size_t nurls;
    double seconds, warmup;
    int repeats, json, bar, stats, peer;
    size_t batch_size, shuffle;
    int size, fast;
    uint64_t threads[MAX_LIST], streams[MAX_LIST], depths[MAX_LIST];
    size_t nthreads, nstreams, ndepths;
} Bench;

typedef struct Result {
    uint64_t threads, streams, depth;
    double rate; /* samples/s, median of the repeats */
    char verdict[256];
    ShardLoaderStats stats; /* of the last repeat */
} Result;

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
          "                     (python3 -m libshard.peer; $SHARD_PYTHON, else /usr/bin/python3)\n"
          "  --json             one JSON document (with the stages)   -q: no progress line\n",
          f);
}

static int parse_list(const char *arg, uint64_t *out, size_t *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    *n = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_LIST || cli_parse_u64(t, &out[*n]) || out[*n] == 0 || out[*n] > 4096)
            return -1;
        (*n)++;
    }
    return *n ? 0 : -1;
}

static void loader_settings(const Bench *b, ShardLoaderSettings *s, uint64_t threads,
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

/* One run: samples/s after the warm-up; its statistics at its end. -1 on an error (said). */
static double run_once(const Bench *b, uint64_t threads, uint64_t streams, uint64_t depth,
                       ShardLoaderStats *out)
{
    ShardLoaderSettings s;
    loader_settings(b, &s, threads, streams, depth);
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
            fprintf(stderr, "shardcat: %s\n", shard_loader_error(l));
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

/* ---- the ceiling: the decoder alone ---------------------------------------------------- */

typedef struct Images {
    unsigned char **data;
    size_t *size, n;
    uint64_t *seed;
    ShardTransform t;
    double until;
    uint64_t decoded;
} Images;

static void *decode_main(void *arg)
{
    Images *im = arg;
    size_t bytes = shard_transform_output_size(&im->t);
    unsigned char *out = malloc(bytes);
    char msg[256];
    uint64_t n = 0;
    for (size_t i = 0; out && cli_now() < im->until; i = (i + 1) % im->n, n++)
        shard_decode_transform(im->data[i], im->size[i], &im->t, im->seed[i], out, msg,
                               sizeof msg);
    free(out);
    im->decoded = n;
    return NULL;
}

/* The first samples the pipeline makes with these settings (at most CEILING_IMAGES, or
 * CEILING_BYTES of images): each one's image bytes and the seed of its crop, scale and
 * flip (ShardBatch.seeds), so that decoding them alone is the very work the decode stage
 * did for them. */
static void first_images(const Bench *b, uint64_t streams, uint64_t depth, Images *im)
{
    ShardLoaderSettings s;
    loader_settings(b, &s, 1, streams, depth);
    s.raw_fields = s.image_fields ? s.image_fields : "jpg;jpeg;png";
    im->t = s.transform;
    ShardLoader *l;
    ShardError err;
    if (shard_loader_open(&l, &s, &err))
        return;
    const ShardBatch *bt;
    size_t bytes = 0;
    while (im->n < CEILING_IMAGES && bytes < CEILING_BYTES && shard_loader_next(l, &bt) == 0) {
        for (size_t i = 0; i < bt->size && im->n < CEILING_IMAGES; i++)
            for (size_t k = 0; k < bt->nfields; k++) {
                const ShardBatchField *f = &bt->fields[k];
                size_t len = (size_t)(f->offsets[i + 1] - f->offsets[i]);
                if (!f->present[i] || !(im->data[im->n] = malloc(len ? len : 1)))
                    continue;
                memcpy(im->data[im->n], f->data + f->offsets[i], len);
                im->size[im->n] = len;
                im->seed[im->n++] = bt->seeds[i];
                bytes += len;
                break;
            }
        shard_batch_release(l, bt);
    }
    shard_loader_free(&l);
}

/* Samples/s of libjpeg-turbo alone on the pipeline's first images (first_images), one copy
 * per thread, each decoding them all in turn; 0 when none was read. */
static double ceiling(const Bench *b, uint64_t threads, uint64_t streams, uint64_t depth,
                      size_t *images)
{
    Images im = {calloc(CEILING_IMAGES, sizeof *im.data), calloc(CEILING_IMAGES, sizeof *im.size),
                 0, calloc(CEILING_IMAGES, sizeof *im.seed), {0}, 0, 0};
    if (im.data && im.size && im.seed)
        first_images(b, streams, depth, &im);
    *images = im.n;
    double rate = 0;
    if (im.n) {
        Images *each = calloc(threads, sizeof *each);
        pthread_t *t = calloc(threads, sizeof *t);
        double t0 = cli_now(), dur = b->seconds < 3 ? b->seconds : 3;
        uint64_t started = 0, total = 0;
        for (uint64_t i = 0; each && t && i < threads; i++) {
            each[i] = im;
            each[i].until = t0 + dur;
            started += pthread_create(&t[i], NULL, decode_main, &each[i]) == 0;
        }
        for (uint64_t i = 0; i < started; i++) {
            pthread_join(t[i], NULL);
            total += each[i].decoded;
        }
        rate = (double)total / (cli_now() - t0);
        free(each);
        free(t);
    }
    for (size_t i = 0; i < im.n; i++)
        free(im.data[i]);
    free(im.data);
    free(im.size);
    free(im.seed);
    return rate;
}

/* ---- the peer: WebDataset + PIL on the same shards --------------------------------------- */

typedef struct Peer {
    double rate;          /* samples/s, 0 when it did not run */
    char pipeline[256];   /* what ran, or why it did not */
} Peer;

/* Runs python3 -m libshard.peer on the shards with workers processes for the same time and
 * batches (it prints one JSON line), filling p. */
static void run_peer(const Bench *b, uint64_t workers, Peer *p)
{
    const char *py = getenv("SHARD_PYTHON");
    if (!py || !*py)
        py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    char secs[32], warm[32], nw[32], bs[32], size[32];
    snprintf(secs, sizeof secs, "%g", b->seconds);
    snprintf(warm, sizeof warm, "%g", b->warmup);
    snprintf(nw, sizeof nw, "%llu", (unsigned long long)workers);
    snprintf(bs, sizeof bs, "%zu", b->batch_size);
    snprintf(size, sizeof size, "%d", b->size);
    const char *fixed[] = {py, "-m", "libshard.peer", "--seconds", secs, "--warmup", warm,
                           "--workers", nw, "--batch-size", bs, "--image-size", size};
    size_t nf = sizeof fixed / sizeof *fixed;
    char **argv = calloc(nf + b->nurls + 1, sizeof *argv);
    int fd[2] = {-1, -1};
    p->rate = 0;
    snprintf(p->pipeline, sizeof p->pipeline, "not run: %s -m libshard.peer failed", py);
    if (!argv || pipe(fd)) {
        free(argv);
        return;
    }
    for (size_t i = 0; i < nf; i++)
        argv[i] = (char *)fixed[i];
    for (size_t i = 0; i < b->nurls; i++)
        argv[nf + i] = b->urls[i];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    pid_t pid;
    int rc = posix_spawnp(&pid, py, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    free(argv);
    char out[4096];
    size_t n = 0;
    ssize_t k;
    while (!rc && n < sizeof out - 1 && (k = read(fd[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)k;
    out[n] = 0;
    close(fd[0]);
    int status = 0;
    if (rc || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        return; /* its own messages went to stderr */
    json_error_t je;
    json_t *doc = json_loads(out, JSON_DISABLE_EOF_CHECK, &je);
    const char *name = NULL;
    double rate = 0;
    if (doc && !json_unpack(doc, "{s:F,s:s}", "samples_per_second", &rate, "pipeline", &name)) {
        p->rate = rate;
        snprintf(p->pipeline, sizeof p->pipeline, "%s", name);
    }
    json_decref(doc);
}

/* ---- the command ------------------------------------------------------------------------ */

int shardcat_bench(int argc, char **argv)
{
    int cpus = shard_cpus_available();
    Bench b = {.seconds = 10, .warmup = 2, .repeats = 3, .batch_size = 256, .shuffle = 1000,
               .size = 224, .fast = 1};
    b.threads[b.nthreads++] = (uint64_t)(cpus > 1 ? cpus / 2 : 1);
    if (cpus > 1)
        b.threads[b.nthreads++] = (uint64_t)cpus;
    b.streams[0] = 2, b.streams[1] = 4, b.nstreams = 2;
    b.depths[0] = 64, b.ndepths = 1;
    int quiet = 0;
    enum { O_SECONDS = 300, O_WARMUP, O_REPEATS, O_THREADS, O_STREAMS, O_DEPTH, O_BATCH, O_SIZE,
           O_SHUFFLE, O_NOFAST, O_JSON, O_STATS, O_PEER };
    static const struct option longopts[] = {
        {"seconds", required_argument, NULL, O_SECONDS}, {"warmup", required_argument, NULL, O_WARMUP},
        {"repeats", required_argument, NULL, O_REPEATS}, {"threads", required_argument, NULL, O_THREADS},
        {"streams", required_argument, NULL, O_STREAMS}, {"queue-depth", required_argument, NULL, O_DEPTH},
        {"batch-size", required_argument, NULL, O_BATCH}, {"image-size", required_argument, NULL, O_SIZE},
        {"shuffle", required_argument, NULL, O_SHUFFLE}, {"no-fast", no_argument, NULL, O_NOFAST},
        {"json", no_argument, NULL, O_JSON}, {"quiet", no_argument, NULL, 'q'},
        {"stats", no_argument, NULL, O_STATS}, {"peer", no_argument, NULL, O_PEER},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
        switch (c) {
        case O_SECONDS:
        case O_WARMUP: {
            char *end;
            double d = strtod(optarg, &end);
            if (*end || !(d >= 0) || d > 86400 || (c == O_SECONDS && d <= 0))
                return cli_usage_error("shardcat", "--seconds and --warmup want seconds");
            *(c == O_SECONDS ? &b.seconds : &b.warmup) = d;
            break;
        }
        case O_REPEATS:
            if (cli_parse_u64(optarg, &v) || v < 1 || v > 100)
                return cli_usage_error("shardcat", "--repeats wants 1 to 100");
            b.repeats = (int)v;
            break;
        case O_THREADS:
        case O_STREAMS:
        case O_DEPTH: {
            uint64_t *list = c == O_THREADS ? b.threads : c == O_STREAMS ? b.streams : b.depths;
            size_t *n = c == O_THREADS ? &b.nthreads : c == O_STREAMS ? &b.nstreams : &b.ndepths;
            if (parse_list(optarg, list, n))
                return cli_usage_error("shardcat", "--threads, --streams and --queue-depth want "
                                                   "a list of whole numbers, e.g. 1,2,4");
            break;
        }
        case O_BATCH:
        case O_SIZE:
        case O_SHUFFLE:
            if (cli_parse_u64(optarg, &v) || (c != O_SHUFFLE && (v < 1 || v > 16384)))
                return cli_usage_error("shardcat", "--batch-size, --image-size and --shuffle "
                                                   "want whole numbers");
            if (c == O_BATCH)
                b.batch_size = (size_t)v;
            else if (c == O_SIZE)
                b.size = (int)v;
            else
                b.shuffle = (size_t)v;
            break;
        case O_NOFAST: b.fast = 0; break;
        case O_JSON: b.json = 1; break;
        case O_STATS: b.stats = 1; break;
        case O_PEER: b.peer = 1; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        case ':': return cli_usage_error("shardcat", "a bench option wants a value");
        default: {
            char msg[256];
            snprintf(msg, sizeof msg, "unknown option '%s'", argv[optind - 1]);
            return cli_usage_error("shardcat", msg);
        }
        }
    }
    if (optind >= argc)
        return cli_usage_error("shardcat", "bench wants the shards to read");
    b.urls = argv + optind;
    b.nurls = (size_t)(argc - optind);
    b.bar = !quiet && isatty(2);

    size_t nruns = b.nthreads * b.nstreams * b.ndepths;
    Result *res = calloc(nruns, sizeof *res);
    double *rates = calloc((size_t)b.repeats, sizeof *rates);
    if (!res || !rates) {
        free(res);
        free(rates);
        fprintf(stderr, "shardcat: out of memory\n");
        return 1;
    }
    CliProgress pg;
    cli_progress_begin(&pg, b.bar, "runs", nruns * (size_t)b.repeats);
    size_t k = 0, done = 0;
    int status = 0;
    for (size_t i = 0; i < b.nthreads && !status; i++)
        for (size_t j = 0; j < b.nstreams && !status; j++)
            for (size_t d = 0; d < b.ndepths && !status; d++, k++) {
                Result *r = &res[k];
                r->threads = b.threads[i], r->streams = b.streams[j], r->depth = b.depths[d];
                for (int rep = 0; rep < b.repeats && !status; rep++) {
                    cli_progress_update(&pg, done++, 0, 1);
                    rates[rep] = run_once(&b, r->threads, r->streams, r->depth, &r->stats);
                    snprintf(r->verdict, sizeof r->verdict, "%s", r->stats.verdict);
                    status = rates[rep] < 0;
                }
                qsort(rates, (size_t)b.repeats, sizeof *rates, cmp_double);
                r->rate = rates[b.repeats / 2];
            }
    cli_progress_clear(&pg);
    free(rates);
    if (status) {
        free(res);
        return 1;
    }
    uint64_t ceiling_threads = b.threads[0];
    size_t best = 0;
    for (size_t i = 0; i < nruns; i++) {
        if (res[i].rate > res[best].rate)
            best = i;
        if (res[i].threads > ceiling_threads)
            ceiling_threads = res[i].threads;
    }
    size_t ceil_images = 0; /* the best setting's first images, decoded as it decoded them */
    double ceil_rate = ceiling(&b, ceiling_threads, res[best].streams, res[best].depth,
                               &ceil_images);
    Peer peer = {0, ""};
    if (b.peer) /* one DataLoader worker per decode thread of the ceiling: a core each */
        run_peer(&b, ceiling_threads, &peer);
    /* the defaults: threads for every CPU, the reader's 4 streams of 64 */
    const Result *def = NULL;
    for (size_t i = 0; i < nruns; i++)
        if (res[i].threads == (uint64_t)cpus && res[i].streams == 4 && res[i].depth == 64)
            def = &res[i];
    if (b.json) {
        json_t *o = json_object(), *runs = json_array();
        for (size_t i = 0; i < nruns; i++) {
            json_t *run = json_pack("{s:I,s:I,s:I,s:f,s:s}", "threads", (json_int_t)res[i].threads,
                                    "streams", (json_int_t)res[i].streams, "queue_depth",
                                    (json_int_t)res[i].depth, "samples_per_second", res[i].rate,
                                    "bottleneck", res[i].verdict);
            json_t *stages = json_object();
            for (int k = 0; k < SHARD_STAGES; k++) {
                const ShardStageStats *g = &res[i].stats.stages[k];
                if (!g->threads) /* not in this pipeline (upload) */
                    continue;
                json_object_set_new(stages, g->name,
                                    json_pack("{s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:I,s:I}", "threads",
                                              (json_int_t)g->threads, "items",
                                              (json_int_t)g->items, "bytes", (json_int_t)g->bytes,
                                              "seconds", g->seconds, "busy_seconds",
                                              g->busy_seconds, "wait_input_seconds",
                                              g->wait_input_seconds, "wait_output_seconds",
                                              g->wait_output_seconds, "queue_fill",
                                              (json_int_t)g->queue_fill, "queue_capacity",
                                              (json_int_t)g->queue_capacity));
            }
            json_object_set_new(run, "stages", stages);
            json_array_append_new(runs, run);
        }
        json_object_set_new(o, "runs", runs);
        json_object_set_new(o, "ceiling", json_pack("{s:f,s:I,s:I}", "samples_per_second",
                                                    ceil_rate, "threads",
                                                    (json_int_t)ceiling_threads, "images",
                                                    (json_int_t)ceil_images));
        if (b.peer)
            json_object_set_new(o, "peer", json_pack("{s:f,s:s,s:I}", "samples_per_second",
                                                     peer.rate, "pipeline", peer.pipeline,
                                                     "workers", (json_int_t)ceiling_threads));
        json_object_set_new(o, "best", json_pack("{s:I,s:I,s:I,s:f}", "threads",
                                                 (json_int_t)res[best].threads, "streams",
                                                 (json_int_t)res[best].streams, "queue_depth",
                                                 (json_int_t)res[best].depth,
                                                 "samples_per_second", res[best].rate));
        json_object_set_new(o, "defaults_share_of_best",
                            def && res[best].rate > 0 ? json_real(def->rate / res[best].rate)
                                                      : json_null());
        char *text = json_dumps(o, JSON_INDENT(1));
        if (text)
            puts(text);
        free(text);
        json_decref(o);
        free(res);
        return 0;
    }
    printf("%zu run%s of %g s (after %g s of warm-up), medians of %d; batch %zu, %dx%d%s\n",
           nruns, nruns == 1 ? "" : "s", b.seconds, b.warmup, b.repeats, b.batch_size, b.size,
           b.size, b.fast ? "" : ", full decode");
    printf("threads streams queue  samples/s  bottleneck\n");
    for (size_t i = 0; i < nruns; i++) {
        printf("%7llu %7llu %5llu %10.1f  %s\n", (unsigned long long)res[i].threads,
               (unsigned long long)res[i].streams, (unsigned long long)res[i].depth, res[i].rate,
               res[i].verdict);
        for (int k = 0; b.stats && k < SHARD_STAGES; k++) {
            const ShardStageStats *g = &res[i].stats.stages[k];
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
    if (ceil_rate > 0)
        printf("ceiling: libjpeg-turbo alone, %llu thread%s, on the best setting's first %zu "
               "images with their crops and scales: %.1f samples/s\n",
               (unsigned long long)ceiling_threads, ceiling_threads == 1 ? "" : "s", ceil_images,
               ceil_rate);
    if (b.peer && peer.rate > 0)
        printf("peer: %s: %.1f samples/s\n", peer.pipeline, peer.rate);
    else if (b.peer)
        printf("peer: %s\n", peer.pipeline);
    printf("best: --threads %llu --streams %llu --queue-depth %llu: %.1f samples/s",
           (unsigned long long)res[best].threads, (unsigned long long)res[best].streams,
           (unsigned long long)res[best].depth, res[best].rate);
    if (ceil_rate > 0)
        printf(", %.2f of the ceiling", res[best].rate / ceil_rate);
    if (peer.rate > 0)
        printf(", %.1fx the peer", res[best].rate / peer.rate);
    putchar('\n');
    if (def && res[best].rate > 0)
        printf("defaults (threads %d, streams 4, queue 64): %.2f of the best\n", cpus,
               def->rate / res[best].rate);
    free(res);
    return 0;
}
