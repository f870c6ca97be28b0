/*
 * shardcat's command line (its help in shardcat_help.c): the options read with
 * getopt_long into the tool's settings (ShardcatCli) and the library's (show's
 * ShardLoaderSettings, the stream's ShardReaderSettings in it, every command's
 * ShardRemoteSettings), and the operands' checks.
 * Help goes to stdout, bad usage to stderr with exit status 2.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "shardcat_cli.h"
#include "shardcat_help.h"

static int die_usage(const char *msg)
{
    return cli_usage_error("shardcat", msg);
}

/* ---- options ------------------------------------------------------------------------- */

/* Options from O_SHUFFLE on place and order a stream (stream, show and batch), from
 * O_SAMPLES on go with stream only, from O_COUNT on with show only, from O_STEP on with
 * batch only (--batch-size and --drop-last with stream too). */
enum { O_CMDS = 150, O_LOCAL, O_GEOMETRY, O_ASPECT, O_KEYS, O_CACHE = 200, O_CACHE_SIZE, O_RETRIES, O_TIMEOUT, O_STALL, O_BACKOFF, O_CA,
       O_SHUFFLE = 256, O_SEED, O_EPOCH, O_RANK, O_WORLD, O_WORKER, O_WORKERS, O_MODE, O_PAD,
       O_EPOCH_SAMPLES, O_STREAMS, O_SKIP, O_STATE, O_MIX, O_MAP, O_INDEX_CACHE,
       O_MAKE_INDEXES, O_PARTITIONS, O_MEMORY,
       O_SAMPLES = 300, O_STATS,
       O_COUNT = 350, O_COLUMNS, O_SIZE, O_CROP, O_FLIP, O_NOFAST,
       O_STEP = 400, O_BATCH_SIZE, O_DROP_LAST, O_KEY, O_SHOW };

static const char short_options[] = ":C:o:hq";

static const struct option long_options[] = {
    {"json", no_argument, NULL, 'J'},
    {"decode", no_argument, NULL, 'D'},
    {"help", no_argument, NULL, 'h'},
    {"quiet", no_argument, NULL, 'q'},
    {"allow-manifest-commands", no_argument, NULL, O_CMDS},
    {"allow-manifest-local", no_argument, NULL, O_LOCAL},
    {"geometry", no_argument, NULL, O_GEOMETRY},
    {"aspect-buckets", required_argument, NULL, O_ASPECT},
    {"keys", required_argument, NULL, O_KEYS},
    {"cache-dir", required_argument, NULL, O_CACHE},
    {"cache-size", required_argument, NULL, O_CACHE_SIZE},
    {"retries", required_argument, NULL, O_RETRIES},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"stall-timeout", required_argument, NULL, O_STALL},
    {"backoff", required_argument, NULL, O_BACKOFF},
    {"ca-bundle", required_argument, NULL, O_CA},
    {"shuffle", required_argument, NULL, O_SHUFFLE},
    {"memory-budget", required_argument, NULL, O_MEMORY},
    {"seed", required_argument, NULL, O_SEED},
    {"epoch", required_argument, NULL, O_EPOCH},
    {"rank", required_argument, NULL, O_RANK},
    {"world-size", required_argument, NULL, O_WORLD},
    {"worker", required_argument, NULL, O_WORKER},
    {"workers", required_argument, NULL, O_WORKERS},
    {"mode", required_argument, NULL, O_MODE},
    {"pad", no_argument, NULL, O_PAD},
    {"epoch-samples", required_argument, NULL, O_EPOCH_SAMPLES},
    {"streams", required_argument, NULL, O_STREAMS},
    {"skip-errors", no_argument, NULL, O_SKIP},
    {"samples", required_argument, NULL, O_SAMPLES},
    {"state", required_argument, NULL, O_STATE},
    {"stats", no_argument, NULL, O_STATS},
    {"mix", required_argument, NULL, O_MIX},
    {"map", no_argument, NULL, O_MAP},
    {"index-cache", required_argument, NULL, O_INDEX_CACHE},
    {"make-indexes", required_argument, NULL, O_MAKE_INDEXES},
    {"partitions", required_argument, NULL, O_PARTITIONS},
    {"count", required_argument, NULL, O_COUNT},
    {"columns", required_argument, NULL, O_COLUMNS},
    {"image-size", required_argument, NULL, O_SIZE},
    {"crop", required_argument, NULL, O_CROP},
    {"flip", no_argument, NULL, O_FLIP},
    {"no-fast", no_argument, NULL, O_NOFAST},
    {"step", required_argument, NULL, O_STEP},
    {"batch-size", required_argument, NULL, O_BATCH_SIZE},
    {"drop-last", no_argument, NULL, O_DROP_LAST},
    {"key", required_argument, NULL, O_KEY},
    {"show", no_argument, NULL, O_SHOW},
    {NULL, 0, NULL, 0},
};

/* The remote options; -1, or 2 after saying what is wrong. */
static int remote_option(int c, const char *arg, ShardRemoteSettings *ro)
{
    uint64_t v;
    switch (c) {
    case O_CACHE: ro->cache_dir = arg; break;
    case O_CACHE_SIZE:
        if (cli_parse_size(arg, &ro->cache_bytes))
            return die_usage("--cache-size wants a size, e.g. 100G");
        break;
    case O_RETRIES:
        if (cli_parse_u64(arg, &v) || v > 1000)
            return die_usage("--retries wants a whole number up to 1000");
        ro->retries = (int)v;
        break;
    case O_TIMEOUT:
    case O_STALL:
    case O_BACKOFF: {
        char *end;
        double d = strtod(arg, &end);
        if (*end || !(d >= 0) || d > 86400)
            return die_usage("--timeout, --stall-timeout and --backoff want seconds");
        if (c == O_TIMEOUT)
            ro->connect_timeout = d;
        else if (c == O_STALL)
            ro->stall_timeout = d;
        else
            ro->backoff = d;
        break;
    }
    case O_CA: ro->ca_bundle = arg; break;
    }
    return -1;
}

/* --mix WEIGHT:SPEC, the weight first: a spec may hold ':' (URLs) but a weight not. At most
 * one source per argument, so the lists are made argc long. */
static int add_mix(ShardcatCli *cli, ShardReaderSettings *rs, char *arg, int argc)
{
    char *colon = strchr(arg, ':'), *end;
    double w = colon ? strtod(arg, &end) : 0;
    if (!colon || end != colon || !(w > 0) || !colon[1])
        return die_usage("--mix wants WEIGHT:SPEC, e.g. --mix 0.7:a/train.json");
    if (!cli->mix) {
        cli->mix = calloc((size_t)argc, sizeof *cli->mix);
        cli->spec = calloc((size_t)argc, sizeof *cli->spec);
        if (!cli->mix || !cli->spec)
            return die_usage("out of memory");
    }
    cli->spec[cli->nmix] = colon + 1;
    cli->mix[cli->nmix] = (ShardMixInput){&cli->spec[cli->nmix], 1, w};
    cli->nmix++;
    rs->sources = cli->mix;
    rs->nsources = cli->nmix;
    return -1;
}

/* Whole-number stream options that count something: rank, workers, streams. */
static int count_option(int c, const char *arg, ShardReaderSettings *rs)
{
    uint64_t v;
    if (cli_parse_u64(arg, &v) || v > (1u << 30))
        return die_usage("rank, world size, worker, workers and streams want whole numbers");
    if (c == O_RANK)
        rs->rank = (int)v;
    else if (c == O_WORLD)
        rs->world_size = (int)v;
    else if (c == O_WORKER)
        rs->worker = (int)v;
    else if (c == O_WORKERS)
        rs->num_workers = (int)v;
    else
        rs->streams = (size_t)v;
    return -1;
}

/* The stream options; -1, or 2 after saying what is wrong. */
static int stream_option(int c, char *arg, ShardcatCli *cli, ShardReaderSettings *rs, int argc)
{
    uint64_t v;
    switch (c) {
    case O_SHUFFLE: {
        char *colon = strchr(arg, ':');
        if (colon)
            *colon = 0;
        if (cli_parse_u64(arg, &v))
            return die_usage("--shuffle wants N or N:INITIAL");
        rs->shuffle_buffer = (size_t)v;
        if (colon) {
            if (cli_parse_u64(colon + 1, &v))
                return die_usage("--shuffle wants N or N:INITIAL");
            rs->shuffle_initial = (size_t)v;
        }
        break;
    }
    case O_MEMORY:
        if (cli_parse_size(arg, &v))
            return die_usage("--memory-budget wants a size (bytes, or with K, M, G)");
        rs->memory_budget = (size_t)v;
        break;
    case O_SEED:
        if (cli_parse_u64(arg, &rs->seed))
            return die_usage("--seed wants a whole number");
        rs->have_seed = 1;
        break;
    case O_EPOCH:
        if (cli_parse_u64(arg, &rs->epoch))
            return die_usage("--epoch wants a whole number");
        break;
    case O_RANK:
        cli->have_rank = 1;
        return count_option(c, arg, rs);
    case O_WORLD:
    case O_WORKER:
    case O_WORKERS:
    case O_STREAMS: return count_option(c, arg, rs);
    case O_MODE:
        cli->have_mode = 1;
        if (!strcmp(arg, "exact"))
            rs->mode = SHARD_MODE_EXACT;
        else if (!strcmp(arg, "equal"))
            rs->mode = SHARD_MODE_EQUAL;
        else if (!strcmp(arg, "resampled"))
            rs->mode = SHARD_MODE_RESAMPLED;
        else
            return die_usage("--mode wants exact, equal or resampled");
        break;
    case O_PAD: rs->pad = 1; break;
    case O_EPOCH_SAMPLES:
        if (cli_parse_u64(arg, &rs->epoch_samples))
            return die_usage("--epoch-samples wants a whole number");
        break;
    case O_SKIP: rs->skip_errors = 1; break;
    case O_SAMPLES:
        if (cli_parse_u64(arg, &cli->samples))
            return die_usage("--samples wants a whole number");
        cli->have_samples = 1;
        break;
    case O_STATE: cli->state = arg; break;
    case O_MIX: return add_mix(cli, rs, arg, argc);
    case O_STATS: cli->stats = 1; break;
    case O_MAP: rs->map_files = 1; break;
    case O_INDEX_CACHE: rs->index_cache = arg; break;
    case O_PARTITIONS:
        if (cli_parse_u64(arg, &v) || v > (1u << 20))
            return die_usage("--partitions wants a whole number (0: chosen from the data)");
        rs->partitions = (uint32_t)v;
        break;
    case O_MAKE_INDEXES:
        if (!strcmp(arg, "auto"))
            rs->make_indexes = SHARD_READER_INDEXES_AUTO;
        else if (!strcmp(arg, "always"))
            rs->make_indexes = SHARD_READER_INDEXES_ALWAYS;
        else if (!strcmp(arg, "never"))
            rs->make_indexes = SHARD_READER_INDEXES_NEVER;
        else
            return die_usage("--make-indexes wants auto, always or never");
        break;
    }
    return -1;
}

/* show's options: the batch and the transform; -1, or 2 after saying what is wrong. */
static int show_option(int c, const char *arg, ShardcatCli *cli, ShardLoaderSettings *ls)
{
    uint64_t v;
    switch (c) {
    case O_COUNT:
    case O_COLUMNS:
    case O_SIZE:
        if (cli_parse_u64(arg, &v) || v < 1 || v > (c == O_COUNT ? UINT32_MAX : 4096))
            return die_usage("--columns and --image-size want 1 to 4096, --count a count");
        if (c == O_COUNT) /* show's is checked once the command is known */
            ls->batch_size = (size_t)(cli->shard_samples = v);
        else if (c == O_COLUMNS)
            cli->columns = (int)v;
        else
            ls->transform.width = ls->transform.height = cli->image_size = (int)v;
        break;
    case O_CROP:
        if (!strcmp(arg, "random_resized"))
            ls->transform.crop = SHARD_CROP_RANDOM_RESIZED;
        else if (!strcmp(arg, "center"))
            ls->transform.crop = SHARD_CROP_CENTER;
        else if (!strcmp(arg, "none") || !strcmp(arg, "resize"))
            ls->transform.crop = SHARD_CROP_NONE;
        else if (!strcmp(arg, "cover"))
            ls->transform.crop = SHARD_CROP_COVER;
        else if (!strcmp(arg, "cover_random"))
            ls->transform.crop = SHARD_CROP_COVER_RANDOM;
        else
            return die_usage("--crop wants random_resized, center, none, cover or cover_random");
        break;
    case O_FLIP: ls->transform.flip = 1; break;
    case O_NOFAST: ls->transform.fast = 0; break;
    }
    return -1;
}

/* batch's options: the step or key, and the job's batches; -1, or 2 after saying what is
 * wrong. */
static int batch_option(int c, const char *arg, ShardcatCli *cli, ShardLoaderSettings *ls)
{
    uint64_t v;
    switch (c) {
    case O_STEP:
        if (cli_parse_u64(arg, &cli->step))
            return die_usage("--step wants a whole number");
        cli->have_step = 1;
        break;
    case O_BATCH_SIZE:
        if (cli_parse_u64(arg, &v) || v < 1 || v > (1u << 24))
            return die_usage("--batch-size wants 1 to 16777216");
        ls->batch_size = (size_t)v;
        ls->reader.batch_size = v; /* stream's; the loader and the step plan set their own */
        cli->have_batch_size = 1;
        break;
    case O_DROP_LAST: ls->drop_last = ls->reader.drop_last = 1; break;
    case O_KEY: cli->key = arg; break;
    case O_SHOW: cli->show = 1; break;
    }
    return -1;
}

/* The options after COMMAND; -1, or the exit status after help or bad usage. */
static int read_options(int argc, char **argv, ShardcatCli *cli, ShardLoaderSettings *ls,
                        ShardRemoteSettings *ro)
{
    ShardReaderSettings *rs = &ls->reader;
    int c, quiet = 0, placing = 0, stream_only = 0, show_only = 0, batch_only = 0, count = 0,
        status = -1, sized_only = 1, count_only = 1, batching = 0;
    optind = 2;
    opterr = 0; /* one message for an unknown option, ours */
    while (status < 0 && (c = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
        switch (c) {
        case 'J': cli->json = 1; break;
        case 'D': cli->decode = 1; break;
        case 'C': cli->dir = optarg; break;
        case 'o': cli->output = optarg; break;
        case 'h': return shardcat_help(argv[1]);
        case 'q': quiet = 1; break;
        case O_CMDS: cli->manifest_commands = 1; break;
        case O_LOCAL: cli->manifest_local = 1; break;
        case O_GEOMETRY: cli->geometry = 1; break;
        case O_ASPECT: cli->aspect_buckets = optarg; break;
        case O_KEYS: cli->keys = optarg; break;
        case ':':
        case '?': return cli_option_error("shardcat", c, argv[optind - 1], long_options);
        default:
            if (c >= O_STEP) {
                batching = 1;
                batch_only |= c != O_BATCH_SIZE && c != O_DROP_LAST; /* stream's batches too */
                status = batch_option(c, optarg, cli, ls);
            } else if (c >= O_COUNT) {
                show_only = 1;
                sized_only &= c == O_SIZE;
                count_only &= c == O_COUNT;
                count |= c == O_COUNT;
                status = show_option(c, optarg, cli, ls);
            } else if (c >= O_SHUFFLE) {
                placing = 1;
                stream_only |= c >= O_SAMPLES && c != O_STATS; /* batch's too */
                status = stream_option(c, optarg, cli, rs, argc);
            } else {
                status = remote_option(c, optarg, ro);
            }
        }
    }
    if (status >= 0)
        return status;
    ShardcatCommand cmd = cli->command;
    if (stream_only && cmd != SHARDCAT_STREAM)
        return die_usage("that option goes with stream");
    if (placing && cmd != SHARDCAT_STREAM && cmd != SHARDCAT_SHOW && cmd != SHARDCAT_BATCH)
        return die_usage("that option goes with stream, show and batch");
    if (cli->stats && cmd != SHARDCAT_STREAM && cmd != SHARDCAT_BATCH)
        return die_usage("--stats goes with stream and batch");
    if (batch_only && cmd != SHARDCAT_BATCH)
        return die_usage("that option goes with batch");
    if (batching && cmd != SHARDCAT_BATCH && cmd != SHARDCAT_STREAM)
        return die_usage("--batch-size and --drop-last go with batch and stream");
    if (cli->keys && cmd != SHARDCAT_STREAM && cmd != SHARDCAT_SHOW && cmd != SHARDCAT_BATCH &&
        cmd != SHARDCAT_SUBSET)
        return die_usage("--keys goes with stream, show, batch and subset");
    int subset_count = cmd == SHARDCAT_SUBSET && show_only && count_only; /* --count N */
    if (cli->aspect_buckets && cmd != SHARDCAT_INFO && cmd != SHARDCAT_SHOW &&
        cmd != SHARDCAT_STREAM && cmd != SHARDCAT_BATCH)
        return die_usage("--aspect-buckets goes with info, show, stream and batch");
    if (cli->aspect_buckets && cmd == SHARDCAT_STREAM && !cli->have_batch_size)
        return die_usage("stream --aspect-buckets wants --batch-size B, the job's: which batch "
                         "a sample is in is part of the order");
    /* --image-size scales the named and fitted buckets: info's and batch's too */
    int info_size = (cmd == SHARDCAT_INFO || cmd == SHARDCAT_BATCH) && cli->aspect_buckets &&
                    sized_only && !cli->output;
    if ((show_only || cli->output) && cmd != SHARDCAT_SHOW && !(cmd == SHARDCAT_BATCH && cli->show) &&
        !info_size && !(cmd == SHARDCAT_MANIFEST && !show_only) &&
        !(cmd == SHARDCAT_SUBSET && (!show_only || subset_count)))
        return die_usage(cmd == SHARDCAT_BATCH ? "that option goes with show, and with batch --show"
                                               : "that option goes with show");
    if (count && cmd == SHARDCAT_SHOW && cli->shard_samples > 4096)
        return die_usage("show --count wants 1 to 4096");
    if (count && cmd == SHARDCAT_BATCH)
        return die_usage("batch --show draws the step's batch: --batch-size B, the job's, not --count");
    cli->args = argv + optind;
    cli->nargs = argc - optind;
    cli->bar = !quiet && isatty(2); /* a progress line where someone watches */
    return -1;
}

int shardcat_parse(int argc, char **argv, ShardcatCli *cli, ShardLoaderSettings *loader,
                   ShardRemoteSettings *remote)
{
    memset(cli, 0, sizeof *cli);
    cli->command = SHARDCAT_UNKNOWN;
    shard_loader_default_settings(loader);
    loader->batch_size = 16;
    shard_remote_default_settings(remote);
    if (argc < 2)
        return shardcat_usage(stderr), 2;
    const char *name = argv[1];
    if (!strcmp(name, "-h") || !strcmp(name, "--help"))
        return shardcat_usage(stdout), 0;
    if (!strcmp(name, "--version") || !strcmp(name, "-V")) {
        printf("shardcat (libshard) %s\n", shard_version());
        return 0;
    }
    cli->name = name;
    cli->command = shardcat_command_named(name);
    return read_options(argc, argv, cli, loader, remote);
}

/* ---- operands ------------------------------------------------------------------------ */

/* A placement variable ($RANK, $WORLD_SIZE) where no flag gave the value: 0 and *v (left
 * as it is when unset), or 2 after naming a value that is not a whole number. */
static int env_placement(const char *name, const char *flag, int *v, int *from_env)
{
    const char *s = getenv(name);
    if (*v >= 0 || !s || !*s)
        return 0;
    uint64_t x;
    if (cli_parse_u64(s, &x) || x > (1u << 30)) {
        fprintf(stderr, "shardcat: $%s='%s' is not a whole number (unset it, or pass %s)\n",
                name, s, flag);
        return 2;
    }
    *v = (int)x;
    *from_env = 1;
    return 0;
}

/* The consumer's placement: flags, else $RANK and $WORLD_SIZE (a split that came from the
 * environment is said, so that a shell inside a job's allocation does not show a part of
 * the data unawares), each checked against the other and named as given. */
int shardcat_placement(const ShardcatCli *cli, ShardReaderSettings *rs)
{
    int rank_env = 0, world_env = 0;
    if (env_placement("RANK", "--rank", &rs->rank, &rank_env) ||
        env_placement("WORLD_SIZE", "--world-size", &rs->world_size, &world_env))
        return 2;
    int rank = rs->rank < 0 ? 0 : rs->rank, world = rs->world_size < 0 ? 1 : rs->world_size;
    if (world < 1 || rs->num_workers < 1) {
        fprintf(stderr, "shardcat: %s=%d: at least 1\n",
                world < 1 ? (world_env ? "$WORLD_SIZE" : "--world-size") : "--workers",
                world < 1 ? world : rs->num_workers);
        return 2;
    }
    if (rank >= world) {
        fprintf(stderr, "shardcat: %s=%d is not below %s=%d\n", rank_env ? "$RANK" : "--rank",
                rank, world_env ? "$WORLD_SIZE" : "--world-size", world);
        return 2;
    }
    if (rs->worker >= rs->num_workers) {
        fprintf(stderr, "shardcat: --worker=%d is not below --workers=%d\n", rs->worker,
                rs->num_workers);
        return 2;
    }
    if ((rank_env || world_env) && world > 1)
        fprintf(stderr, "shardcat: reading rank %d of %d, from %s (--rank and --world-size "
                        "choose)\n",
                rank, world, rank_env && world_env ? "$RANK and $WORLD_SIZE"
                             : rank_env          ? "$RANK"
                                                 : "$WORLD_SIZE");
    rs->rank = rank;
    rs->world_size = world;
    if (!cli->have_mode)
        rs->mode = world > 1 ? SHARD_MODE_EQUAL : SHARD_MODE_EXACT;
    return 0;
}

static int check_stream(const ShardcatCli *cli)
{
    if (cli->nargs < 1 && !cli->nmix)
        return die_usage("no shards given");
    if (cli->decode || cli->dir)
        return die_usage("--decode and -C do not go with stream");
    if (cli->nmix && cli->nargs) {
        fprintf(stderr, "shardcat: give the shards as arguments or with --mix, not both\n");
        return 2;
    }
    return -1;
}

static int check_show(const ShardcatCli *cli)
{
    if (!cli->output)
        return die_usage("show wants -o FILE, the PNG to write");
    if (cli->nargs < 1 && !cli->nmix)
        return die_usage("no shards given");
    if (cli->decode || cli->dir || cli->json)
        return die_usage("--decode, -C and --json do not go with show");
    if (cli->nmix && cli->nargs) {
        fprintf(stderr, "shardcat: give the shards as arguments or with --mix, not both\n");
        return 2;
    }
    return -1;
}

static int check_batch(const ShardcatCli *cli)
{
    if (cli->nargs < 1 && !cli->nmix)
        return die_usage("no shards given");
    if (cli->nmix && cli->nargs)
        return die_usage("give the shards as arguments or with --mix, not both");
    if (cli->have_step == !!cli->key)
        return die_usage("batch wants --step N or --key K");
    if (!cli->have_batch_size)
        return die_usage("batch wants --batch-size B, the job's");
    if (cli->decode || cli->dir)
        return die_usage("--decode and -C do not go with batch");
    if (cli->show && (!cli->have_step || !cli->output))
        return die_usage("batch --show draws a step: --step N and -o FILE");
    if (cli->show && cli->json)
        return die_usage("--json does not go with --show");
    return -1;
}

int shardcat_check(const ShardcatCli *cli)
{
    ShardcatCommand c = cli->command;
    if (c == SHARDCAT_BATCH)
        return check_batch(cli);
    if (c == SHARDCAT_STREAM)
        return check_stream(cli);
    if (c == SHARDCAT_SHOW)
        return check_show(cli);
    if (cli->json && c != SHARDCAT_LS && c != SHARDCAT_INFO && c != SHARDCAT_VERIFY)
        return die_usage("--json goes with ls, info, verify and stream");
    if (cli->decode && c != SHARDCAT_VERIFY)
        return die_usage("--decode goes with verify");
    if (cli->dir && c != SHARDCAT_EXTRACT)
        return die_usage("-C goes with extract");
    if (cli->geometry && c != SHARDCAT_INDEX)
        return die_usage("--geometry goes with index");
    if (c == SHARDCAT_CAT) {
        if (cli->nargs != 2)
            return die_usage("cat wants SHARD KEY.FIELD");
        const char *member = cli->args[1], *slash = strrchr(member, '/');
        if (!strchr(slash ? slash + 1 : member, '.'))
            return die_usage("cat wants KEY.FIELD, e.g. n01440764/img_0001.jpg");
        return -1;
    }
    if (c == SHARDCAT_UNKNOWN) {
        const char *names[32];
        size_t n = shardcat_command_names(names, 31);
        names[n++] = "bench";
        const char *near = cli_closest(cli->name, names, n);
        char msg[256];
        if (near)
            snprintf(msg, sizeof msg, "unknown command '%.100s' (did you mean '%s'?)", cli->name,
                     near);
        else
            snprintf(msg, sizeof msg, "unknown command '%.100s' (ls, cat, info, verify, index, "
                                      "repair, manifest, subset, extract, stream, show, batch, bench)",
                     cli->name);
        return die_usage(msg);
    }
    if (cli->nargs < 1)
        return die_usage("no SHARD given");
    if (c == SHARDCAT_EXTRACT && !cli->dir)
        return die_usage("extract wants -C DIR");
    if (c == SHARDCAT_REPAIR && (cli->nargs != 1 || !strstr(cli->args[0], ".json")))
        return die_usage("repair wants one MANIFEST (the set's .json, which may be gone)");
    if (c == SHARDCAT_MANIFEST && !cli->output)
        return die_usage("manifest wants -o X.json");
    if (c == SHARDCAT_SUBSET && (!cli->output || !cli->keys))
        return die_usage("subset wants --keys FILE and -o OUT/NAME-%06d.tar");
    return -1;
}

void shardcat_cli_free(ShardcatCli *cli)
{
    free(cli->mix);
    free(cli->spec);
    cli->mix = NULL;
    cli->spec = NULL;
    cli->nmix = 0;
}
