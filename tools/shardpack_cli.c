/*
 * shardpack's command line: the usage, the options read with getopt_long into the tool's
 * settings (ShardpackCli) and checked, and the library's ShardPackSettings made from them.
 * Help goes to stdout, bad usage to stderr with exit status 2.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shardpack_cli.h"

static void usage(FILE *f)
{
    fputs("usage: shardpack SRC -o PATTERN [options]\n"
          "       shardpack --join -o MANIFEST PART.json...\n"
          "\n"
          "Packs an image folder in ImageFolder layout (class = first-level folder) or, with\n"
          "--list, a TSV/JSONL list file into WebDataset shards (.tar or .tar.zst, by the\n"
          "pattern's extension), with a DALI-compatible .idx per shard and a manifest.\n"
          "\n"
          "  -o, --output PATTERN   shard names, e.g. out/train-%06d.tar or .tar.zst, or in a\n"
          "                         bucket: gs://BUCKET/train-%06d.tar, s3://BUCKET/...\n"
          "  -c, --maxcount N       samples per shard (default 100000)\n"
          "  -s, --maxsize SIZE     bytes per shard, e.g. 1G, 500MB (default 3e9)\n"
          "      --compress KIND    none or zstd (default: from PATTERN)\n"
          "  -l, --level N          zstd level 1..22 (default 3)\n"
          "      --frame-size SIZE  uncompressed bytes per zstd frame (default 4MiB)\n"
          "      --shuffle SEED     shuffle samples across the whole set before sharding\n"
          "  -j, --jobs N           shards packed in parallel (default 1; output identical)\n"
          "      --verify           decode every JPEG with libjpeg-turbo; corrupt ones are bad input\n"
          "      --resize N         re-encode JPEGs whose longer side exceeds N pixels to N\n"
          "                         (originals are packed as they are without it)\n"
          "      --quality Q        JPEG quality 1..100 for --resize (default 95)\n"
          "      --inflight N       remote files (URL lists) requested at once per job (default 16)\n"
          "      --upload-part SIZE into a bucket, shards over SIZE go up in parts of SIZE\n"
          "                         (GCS resumable, S3 multipart; default 64MiB)\n"
          "      --on-error MODE    fail (default) or skip: skip bad inputs and count them\n"
          "      --list             SRC is a list file: TSV with a header row naming a 'path'\n"
          "                         column (and 'label', and any others), or JSONL objects;\n"
          "                         paths may be http(s)://, gs:// or s3:// URLs\n"
          "      --part I/N         pack only part I (0-based) of N: a disjoint share of the shards\n"
          "      --resume           go on with an interrupted run of the same input and options:\n"
          "                         keep the shards it finished, pack the rest (a changed input\n"
          "                         or option is refused, naming it)\n"
          "      --dedup            pack each distinct image once: files whose bytes equal an\n"
          "                         earlier file's are left out and listed in STEM.duplicates.tsv\n"
          "      --manifest PATH    manifest path (default: the pattern's stem + .json)\n"
          "      --no-fsync         do not fsync shards before renaming them into place\n"
          "      --checksum LIST    digests in the manifest: sha256 (default), md5 (what wids\n"
          "                         carries), md5,sha256, or none\n"
          "      --no-checksum      same as --checksum none\n"
          "  -q, --quiet            no progress bar and no summary\n"
          "      --json             the summary as one JSON object on stdout (samples, shards,\n"
          "                         bytes, seconds, skipped, ignored, undecoded, resized)\n"
          "      --join             join part manifests into -o MANIFEST\n"
          "  -h, --help             this help\n"
          "  -V, --version          the version\n",
          f);
}

static int die_usage(const char *msg)
{
    return cli_usage_error("shardpack", msg);
}

enum { OPT_COMPRESS = 256, OPT_FRAME, OPT_SHUFFLE, OPT_VERIFY, OPT_ON_ERROR, OPT_LIST,
       OPT_PART, OPT_MANIFEST, OPT_NO_FSYNC, OPT_NO_CHECKSUM, OPT_CHECKSUM, OPT_JOIN, OPT_RESIZE,
       OPT_QUALITY, OPT_UPLOAD_PART, OPT_INFLIGHT, OPT_JSON, OPT_RESUME, OPT_DEDUP };

static const char short_options[] = ":o:c:s:l:j:qhV";

static const struct option long_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"maxcount", required_argument, NULL, 'c'},
    {"maxsize", required_argument, NULL, 's'},
    {"compress", required_argument, NULL, OPT_COMPRESS},
    {"level", required_argument, NULL, 'l'},
    {"frame-size", required_argument, NULL, OPT_FRAME},
    {"shuffle", required_argument, NULL, OPT_SHUFFLE},
    {"jobs", required_argument, NULL, 'j'},
    {"verify", no_argument, NULL, OPT_VERIFY},
    {"on-error", required_argument, NULL, OPT_ON_ERROR},
    {"list", no_argument, NULL, OPT_LIST},
    {"part", required_argument, NULL, OPT_PART},
    {"manifest", required_argument, NULL, OPT_MANIFEST},
    {"no-fsync", no_argument, NULL, OPT_NO_FSYNC},
    {"no-checksum", no_argument, NULL, OPT_NO_CHECKSUM},
    {"checksum", required_argument, NULL, OPT_CHECKSUM},
    {"resize", required_argument, NULL, OPT_RESIZE},
    {"quality", required_argument, NULL, OPT_QUALITY},
    {"upload-part", required_argument, NULL, OPT_UPLOAD_PART},
    {"inflight", required_argument, NULL, OPT_INFLIGHT},
    {"quiet", no_argument, NULL, 'q'},
    {"json", no_argument, NULL, OPT_JSON},
    {"resume", no_argument, NULL, OPT_RESUME},
    {"dedup", no_argument, NULL, OPT_DEDUP},
    {"join", no_argument, NULL, OPT_JOIN},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static void default_options(ShardpackCli *o)
{
    memset(o, 0, sizeof *o);
    o->maxcount = 100000;
    o->maxsize = 3000000000ull;
    o->frame_size = 4u << 20;
    o->level = 3;
    o->compress = -1;
    o->jobs = 1;
    o->fsync = 1;
    o->checksums = SHARD_DIGEST_SHA256;
    o->quality = 95;
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    if (sde && *sde)
        o->mtime = strtoll(sde, NULL, 10);
}

/* --part I/N */
static int part_option(const char *arg, ShardpackCli *o)
{
    const char *slash = strchr(arg, '/');
    char a[32] = {0};
    if (!slash || (size_t)(slash - arg) >= sizeof a)
        return die_usage("--part wants I/N, e.g. 0/4");
    memcpy(a, arg, (size_t)(slash - arg));
    if (cli_parse_u64(a, &o->part) || cli_parse_u64(slash + 1, &o->nparts) || o->nparts == 0 ||
        o->part >= o->nparts)
        return die_usage("--part wants I/N with 0 <= I < N");
    o->have_part = 1;
    return -1;
}

/* The options with a number, size or list of the output; -1, or 2 after saying what is
 * wrong with it. */
static int output_option(int c, const char *arg, ShardpackCli *o)
{
    uint64_t v;
    switch (c) {
    case 'c':
        if (cli_parse_u64(arg, &o->maxcount) || o->maxcount == 0)
            return die_usage("--maxcount wants a whole number of samples per shard, at least 1");
        break;
    case 's':
        if (cli_parse_size(arg, &o->maxsize))
            return die_usage("--maxsize wants a size such as 1G, 500MB or 3e9");
        break;
    case OPT_COMPRESS:
        if (!strcmp(arg, "none"))
            o->compress = SHARD_COMPRESSION_NONE;
        else if (!strcmp(arg, "zstd"))
            o->compress = SHARD_COMPRESSION_ZSTD;
        else
            return die_usage("--compress wants none or zstd");
        break;
    case 'l':
        if (cli_parse_u64(arg, &v) || v < 1 || v > 22)
            return die_usage("--level wants 1..22");
        o->level = (int)v;
        o->zstd_option = "--level";
        break;
    case OPT_FRAME:
        if (cli_parse_size(arg, &o->frame_size) || o->frame_size == 0 || o->frame_size > (1u << 30))
            return die_usage("--frame-size wants a size between 1 and 1GiB");
        o->zstd_option = "--frame-size";
        break;
    case OPT_UPLOAD_PART:
        if (cli_parse_size(arg, &o->upload_part) || o->upload_part < 1)
            return die_usage("--upload-part wants a size such as 64MiB");
        break;
    case OPT_CHECKSUM:
        if (shard_digests_parse(arg, &o->checksums))
            return die_usage("--checksum wants sha256, md5, md5,sha256 or none");
        break;
    }
    return -1;
}

/* The options of how inputs are read and packed; -1, or 2 after saying what is wrong. */
static int input_option(int c, const char *arg, ShardpackCli *o)
{
    uint64_t v;
    switch (c) {
    case OPT_SHUFFLE:
        if (cli_parse_u64(arg, &o->seed))
            return die_usage("--shuffle wants a seed (a whole number)");
        o->have_shuffle = 1;
        break;
    case 'j':
        if (cli_parse_u64(arg, &v) || v < 1 || v > 1024)
            return die_usage("--jobs wants 1..1024");
        o->jobs = (int)v;
        break;
    case OPT_ON_ERROR:
        if (!strcmp(arg, "fail"))
            o->on_error = ON_ERROR_FAIL;
        else if (!strcmp(arg, "skip"))
            o->on_error = ON_ERROR_SKIP;
        else
            return die_usage("--on-error wants fail or skip");
        break;
    case OPT_PART: return part_option(arg, o);
    case OPT_RESIZE:
        if (cli_parse_u64(arg, &v) || v < 1 || v > 65500)
            return die_usage("--resize wants a longer side of 1..65500 pixels");
        o->max_side = (uint32_t)v;
        break;
    case OPT_QUALITY:
        if (cli_parse_u64(arg, &v) || v < 1 || v > 100)
            return die_usage("--quality wants 1..100");
        o->quality = (int)v;
        break;
    case OPT_INFLIGHT:
        if (cli_parse_u64(arg, &v) || v < 1 || v > 256)
            return die_usage("--inflight wants 1..256");
        o->inflight = (uint32_t)v;
        break;
    default: return output_option(c, arg, o);
    }
    return -1;
}

/* The operands, and the options that go together; -1, or 2 after saying what is wrong. */
static int check_operands(int argc, char **argv, ShardpackCli *o)
{
    if (o->join) {
        o->operands = argv + optind;
        o->noperands = argc - optind;
        if (!o->pattern)
            return die_usage("--join needs -o MANIFEST");
        if (o->noperands == 0)
            return die_usage("--join needs the part manifests");
        return -1;
    }
    if (optind + 1 != argc)
        return die_usage(optind >= argc ? "no SRC given" : "more than one SRC given");
    o->src = argv[optind];
    if (!o->pattern)
        return die_usage("no output pattern: -o out/train-%06d.tar");
    if (!cli_ends_with(o->pattern, ".tar") && !cli_ends_with(o->pattern, ".tar.zst"))
        return die_usage("the output pattern must end in .tar or .tar.zst");
    int zstd = cli_ends_with(o->pattern, ".tar.zst");
    if (o->compress == SHARD_COMPRESSION_ZSTD && !zstd)
        return die_usage("--compress zstd wants a pattern ending in .tar.zst");
    if (o->compress == SHARD_COMPRESSION_NONE && zstd)
        return die_usage("--compress none wants a pattern ending in .tar");
    if (o->zstd_option && !zstd) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s sets zstd's compression, and %s ends in .tar: plain, "
                 "not compressed (name .tar.zst shards to compress them)", o->zstd_option,
                 o->pattern);
        return die_usage(msg);
    }
    return -1;
}

int shardpack_parse(int argc, char **argv, ShardpackCli *o)
{
    default_options(o);
    int c, status = -1;
    opterr = 0; /* one message for an unknown option, ours */
    while (status < 0 && (c = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
        switch (c) {
        case 'o': o->pattern = optarg; break;
        case OPT_VERIFY: o->verify = 1; break;
        case OPT_LIST: o->list = 1; break;
        case OPT_MANIFEST: o->manifest = optarg; break;
        case OPT_NO_FSYNC: o->fsync = 0; break;
        case OPT_NO_CHECKSUM: o->checksums = 0; break;
        case 'q': o->quiet = 1; break;
        case OPT_JSON: o->json = 1; break;
        case OPT_RESUME: o->resume = 1; break;
        case OPT_DEDUP: o->dedup = 1; break;
        case OPT_JOIN: o->join = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("shardpack (libshard) %s\n", shard_version()); return 0;
        case ':':
        case '?': return cli_option_error("shardpack", c, argv[optind - 1], long_options);
        default: status = input_option(c, optarg, o);
        }
    }
    if (status >= 0)
        return status;
    return check_operands(argc, argv, o);
}

void shardpack_settings(const ShardpackCli *o, ShardPackSettings *ps)
{
    shard_pack_default_settings(ps);
    ps->pattern = o->pattern;
    ps->maxcount = o->maxcount;
    ps->maxsize = o->maxsize;
    ps->compression = o->compress < 0 ? SHARD_COMPRESSION_AUTO : (ShardCompression)o->compress;
    ps->level = o->level;
    ps->frame_size = o->frame_size;
    ps->shuffle = o->have_shuffle;
    ps->shuffle_seed = o->seed;
    if (o->have_part)
        ps->part = o->part, ps->nparts = o->nparts;
    ps->verify = o->verify;
    ps->mtime = o->mtime < 0 ? 0 : o->mtime;
    ps->checksums = o->checksums;
    ps->sync = o->fsync;
    ps->max_side = o->max_side;
    ps->quality = o->quality;
    if (o->inflight)
        ps->inflight = o->inflight;
    ps->resume = o->resume;
    ps->dedup = o->dedup;
}
