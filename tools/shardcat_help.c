/*
 * shardcat's help (shardcat_help.h): the usage, each command's own help, and the commands
 * by name. The man page and the completions are made from this text (tools/doc/docgen.py).
 */
#include <stdio.h>
#include <string.h>

#include "shardcat_help.h"

void shardcat_usage(FILE *f)
{
    fputs("usage: shardcat COMMAND [options] SHARD...\n"
          "\n"
          "  ls [--json] SHARD...          one line per sample: key and fields with their sizes\n"
          "                                in bytes (jpg:81234B cls:1B)\n"
          "  cat SHARD KEY.FIELD           the member's bytes to stdout\n"
          "  info [--json] SHARD...        samples, bytes, fields, compression, index\n"
          "  verify [--decode] [--json] SHARD...\n"
          "                                structure, index, seek table, manifest checksums,\n"
          "                                key rules; with --decode every image decodes and\n"
          "                                every image field holds its kind of image\n"
          "  index [--geometry] SHARD...   write SHARD's .idx (DALI v1.2) for shards made elsewhere;\n"
          "                                --geometry: the image sizes beside it too (.cols)\n"
          "  repair MANIFEST               rebuild a local set's indexes and manifest, cut a\n"
          "                                damaged shard to its whole samples (the original kept)\n"
          "  manifest SOURCE... -o X.json  the shards the sources name, listed (hf:// pinned to\n"
          "                                its commit) and counted, as one manifest\n"
          "  subset SOURCE... --keys FILE -o OUT/NAME-%06d.tar\n"
          "                                the samples FILE's keys choose, as a set of their own\n"
          "  extract SHARD... -C DIR       extract sample members into DIR, safely\n"
          "  bench SHARD... [--threads LIST] [--streams LIST] [--seconds S] ...\n"
          "                                decoded batches/s for each setting swept, the stage\n"
          "                                the others wait on, the decoder's ceiling, the best\n"
          "                                setting (shardcat bench --help)\n"
          "  stream URLS | --mix W:SPEC... [--shuffle N[:INITIAL]] [--seed S] [--epoch E]\n"
          "         [--rank R --world-size W] [--worker I --workers N]\n"
          "         [--mode exact|equal|resampled] [--pad]\n"
          "         [--epoch-samples N] [--streams N] [--partitions P] [--skip-errors]\n"
          "         [--batch-size B [--drop-last]] [--aspect-buckets SPEC]\n"
          "         [--keys FILE] [--samples N] [--state STATE] [--json] [--stats] [--map]\n"
          "         [--index-cache DIR] [--make-indexes auto|always|never]\n"
          "                                the streaming reader's samples, one line each (key, url);\n"
          "                                with --samples N it stops after N and prints the state\n"
          "                                to resume from on stderr; --mix W:SPEC (repeated) mixes\n"
          "                                sources, each W's share of every epoch; --map maps\n"
          "                                local shards (faster; a shard cut meanwhile: SIGBUS);\n"
          "                                shards with no count (plain tars) are indexed into\n"
          "                                --index-cache (default ~/.cache/libshard/index): local\n"
          "                                .tar files always, others where the mode needs counts\n"
          "                                (--make-indexes auto)\n"
          "  batch SHARD... --step N --batch-size B [--epoch E] [--rank R] ... | --key K\n"
          "                                which samples were in step N of an epoch (every\n"
          "                                rank's, or R's), or every step that holds key K,\n"
          "                                from the order alone: no sample read (shardcat\n"
          "                                batch --help)\n"
          "  show SHARD... -o FILE [--count N] [--image-size N] [--crop KIND] [--flip] ...\n"
          "                                a PNG of the samples as the loader delivers them\n"
          "                                (crops, flips; key and label under each), for a\n"
          "                                seed and epoch; stream's options place and order\n"
          "                                them (shardcat show --help)\n"
          "\n"
          "  -q, --quiet          no progress line (one is drawn on stderr, when it is a\n"
          "                       terminal, over many shards and for stream)\n"
          "  -h, --help           this help; shardcat COMMAND --help: that command's\n"
          "  -V, --version        the version\n"
          "\n"
          "Manifests (every command):\n"
          "  --allow-manifest-commands\n"
          "                       let a manifest list pipe:COMMAND shards (a manifest from\n"
          "                       elsewhere runs nothing without it)\n"
          "  --allow-manifest-local\n"
          "                       let a remote manifest list local paths and file://\n"
          "                       URLs (without it, it reaches remote shards only)\n"
          "\n"
          "Remote shards (every command):\n"
          "  --cache-dir DIR      keep remote shards in DIR (shared by processes)\n"
          "  --cache-size SIZE    the cache's limit, least recently used out first\n"
          "  --retries N          retries of a request that makes no progress (default 10; a\n"
          "                       refused connection or a name that does not resolve: 3)\n"
          "  --timeout S          connect timeout in seconds (default 10)\n"
          "  --stall-timeout S    cut and resume a transfer stalled this long (default 30)\n"
          "  --backoff S          first retry delay, doubled each retry (default 0.5)\n"
          "  --ca-bundle FILE     CA certificates (default: CURL_CA_BUNDLE, SSL_CERT_FILE)\n"
          "\n"
          "SHARD is a path, a brace pattern (train-{000000..000099}.tar), a manifest (.json),\n"
          "pipe:COMMAND, or http://, https://, gs://BUCKET/NAME, s3://BUCKET/KEY (the URLs\n"
          "also in patterns and manifests; gs:// and s3:// prefixes ending in / list every\n"
          "shard under them); file:///PATH is PATH. Exit status: 0 success, 1 a defect or\n"
          "failure, 2 bad usage.\n",
          f);
}


/* The commands, by name; each one's own help (shardcat COMMAND --help). */
static const struct {
    const char *name;
    ShardcatCommand command;
    const char *help; /* NULL: the global help's own section */
} commands[] = {
    {"ls", SHARDCAT_LS,
     "usage: shardcat ls [--json] SHARD...\n\n"
     "One line per sample: its key, then each field with its size in bytes (jpg:81234B).\n"
     "  --json   one JSON object per sample: __key__, __url__, fields {name: bytes}\n"},
    {"cat", SHARDCAT_CAT,
     "usage: shardcat cat SHARD KEY.FIELD\n\n"
     "Writes the member's bytes to stdout. SHARD may also be a manifest or a brace\n"
     "pattern: the first shard holding KEY gives it.\n"},
    {"info", SHARDCAT_INFO,
     "usage: shardcat info [--json] SHARD...\n"
     "       shardcat info --aspect-buckets SPEC [--image-size N] [--json] SHARD...\n\n"
     "Samples, bytes, fields, compression and index of each shard; after several\n"
     "shards or a manifest, the totals (and the manifest's classes).\n"
     "  --json   one JSON object per shard, then {\"total\": {...}}\n"
     "  --aspect-buckets SPEC   instead, the buckets SPEC gives (HxW,HxW..., sdxl,\n"
     "           auto or auto:K, scaled to --image-size, default 224) and the samples\n"
     "           nearest each in aspect ratio, from the image sizes beside the\n"
     "           indexes alone (a plain tar's made into the index cache)\n"},
    {"verify", SHARDCAT_VERIFY,
     "usage: shardcat verify [--decode] [--json] SHARD...\n\n"
     "Checks structure, index, zstd seek table, manifest size and checksums and the\n"
     "key rules; exit status 1 when any shard has a defect.\n"
     "  --decode  also decode every image (JPEG, PNG, WebP) within the decoders'\n"
     "            limits, and check every image field holds its kind\n"
     "  --json    one JSON object per shard: url, ok, samples, members, index,\n"
     "            frames, jpegs, images, manifest, defects, error (what kept it from being\n"
     "            read, else the first defect), defect_messages; then one per manifest:\n"
     "            set, listed, missing, gaps, unlisted, ok\n"
     "A manifest is also checked as a set against its folder: shards it lists that\n"
     "are not there, gaps in its numbering, shards of its numbering it does not list.\n"},
    {"index", SHARDCAT_INDEX,
     "usage: shardcat index [--geometry] SHARD...\n\n"
     "Writes SHARD's .idx (DALI v1.2) beside it, for shards made elsewhere.\n"
     "  --geometry   also the columns beside it (.cols: each sample's image width\n"
     "               and height, formats/columns.md), from each image's header alone\n"
     "               read by range, local or remote (a compressed shard is read\n"
     "               whole, once)\n"},
    {"repair", SHARDCAT_REPAIR,
     "usage: shardcat repair MANIFEST\n\n"
     "Rebuilds what a local set's files can give back without its source: indexes that\n"
     "are missing or do not match their shard, a damaged shard cut back to its last\n"
     "whole sample as NAME.repaired.tar (.tar.zst; the original kept), and the manifest\n"
     "from the shards found (the earlier one's classes and options kept, shards beside\n"
     "it of its numbering taken in). Says what it did and what it could not (a shard\n"
     "listed but gone); exit status 1 when something could not be repaired.\n"},
    {"subset", SHARDCAT_SUBSET,
     "usage: shardcat subset SOURCE... --keys FILE -o OUT/NAME-%06d.tar [--count N]\n\n"
     "Writes the samples whose keys FILE lists (one a line) as a set of their own: found in\n"
     "the sources' indexes and read by index alone (plain tars are indexed once, into the\n"
     "index cache), in the sources' order, each member's bytes as they were, into shards by\n"
     "the pattern (.tar or .tar.zst; a folder, gs:// or s3://) with their indexes and\n"
     "columns, and the set's manifest beside them (OUT/NAME.json). Says how many keys chose\n"
     "no sample. A set already there is refused (exit status 2).\n"
     "  --count N               samples a shard (default 10000)\n"},
    {"manifest", SHARDCAT_MANIFEST,
     "usage: shardcat manifest SOURCE... -o X.json\n\n"
     "Writes the shards the sources name (a folder or a prefix listed, brace patterns,\n"
     "manifests; hf:// listed once, pinned to the revision's commit) as one manifest,\n"
     "each shard with its sample count (its manifest's, its .idx, or an index made into\n"
     "the index cache where that is cheap), local or into gs:// or s3://. A job that\n"
     "reads X.json lists nothing and reads no index for counts. Exit status 1 when a\n"
     "shard has no count (shardcat index makes its .idx).\n"},
    {"extract", SHARDCAT_EXTRACT,
     "usage: shardcat extract SHARD... -C DIR\n\n"
     "Extracts the samples' members into DIR (no member leaves DIR).\n"},
    {"stream", SHARDCAT_STREAM,
     "usage: shardcat stream SHARD... | --mix W:SPEC... [options]\n\n"
     "The streaming reader's samples, one line each (key, url), as a training job's\n"
     "consumer reads them.\n"
     "  --shuffle N[:INITIAL]   a shuffle buffer of N samples (INITIAL before the first)\n"
     "  --memory-budget SIZE    what the streams may hold (default 256M; the shuffle\n"
     "                          buffer may hold this much, or more for a large shuffle)\n"
     "  --seed S --epoch E      the order's seed and the epoch (default: a fresh seed, 0)\n"
     "  --rank R --world-size W this consumer's rank; without them $RANK and $WORLD_SIZE\n"
     "                          are used when set (said on stderr), else rank 0 of 1\n"
     "  --worker I --workers N  this consumer's DataLoader worker\n"
     "  --mode exact|equal|resampled [--pad] [--epoch-samples N]\n"
     "                          (default: equal with several ranks, every rank the same\n"
     "                          count, as the Python dataset; exact on one)\n"
     "  --mix W:SPEC            (repeated) sources mixed, each W's share of every epoch\n"
     "  --streams N             shards read at once\n"
     "  --partitions P          canonical partitions of an epoch (default: chosen from\n"
     "                          the data); a state keeps its own\n"
     "  --skip-errors           skip bad shards and samples, counted\n"
     "  --batch-size B [--drop-last]\n"
     "                          the job's batches (equal mode's repeats and states count\n"
     "                          in them)\n"
     "  --aspect-buckets SPEC   batches of one aspect bucket each (HxW,HxW..., sdxl or\n"
     "                          auto[:K]), as the loader plans them; with --batch-size\n"
     "                          (--json adds __bucket__ and __batch_end__)\n"
     "  --keys FILE             only the samples whose keys FILE lists, one a line (a view:\n"
     "                          found in the indexes, only their bytes read; counted)\n"
     "  --samples N             stop after N samples and print the state to resume from\n"
     "                          (the job's: every consumer in step with this one; with\n"
     "                          --aspect-buckets, after the last whole batch)\n"
     "  --state STATE           resume from a state, on this or another rank and worker\n"
     "                          count\n"
     "  --json --stats --map    JSON lines; the stages' statistics; map local shards\n"
     "  --index-cache DIR       where plain tars' indexes are kept (default\n"
     "                          ~/.cache/libshard/index)\n"
     "  --make-indexes auto|always|never\n"
     "                          index shards with no count: auto, .tar files\n"
     "                          always (local or remote) and others where the mode\n"
     "                          needs counts\n"},
    {"batch", SHARDCAT_BATCH,
     "usage: shardcat batch SHARD... | --mix W:SPEC... --step N --batch-size B [options]\n"
     "       shardcat batch SHARD... | --mix W:SPEC... --key K --batch-size B [options]\n\n"
     "Which samples were in step N of an epoch, for a job of these settings and this\n"
     "topology: one line each (step, rank, worker, slot, key, url; \"pad\" after equal\n"
     "mode's repeats), from the manifests and indexes alone: no sample byte is read\n"
     "(plain tars are indexed once, into --index-cache). A rank's steps are its\n"
     "workers' batches as a DataLoader hands them out, worker 0 first.\n"
     "  --step N                the step, from the epoch's start\n"
     "  --key K                 instead: every step, rank and slot that holds key K\n"
     "  --batch-size B          the job's batch size (required)\n"
     "  --drop-last             the job drops each worker's short last batch\n"
     "  --aspect-buckets SPEC [--image-size N]\n"
     "                          the job's aspect buckets (and image size): each\n"
     "                          consumer's batches named in turn from its reading's start\n"
     "  --rank R                this rank's batch only (default: every rank's)\n"
     "  --json                  JSON lines\n"
     "  --show -o FILE          draw the step's batch (one rank's: --rank R) as show\n"
     "                          draws: the consumer that delivered it, restored to\n"
     "                          where it did; show's --image-size, --crop, --flip,\n"
     "                          --no-fast and --columns apply\n"
     "  --stats                 on stderr: shards listed, indexes read, remote bytes\n"
     "  --state STATE           the state the job resumed the epoch from (or saved\n"
     "                          later): steps count from the epoch's start across\n"
     "                          resumes, each named on the topology that delivered it\n"
     "  stream's --seed (required: the job's), --epoch, --shuffle, --world-size,\n"
     "  --workers, --mode, --pad, --mix, --streams, --partitions, --skip-errors,\n"
     "  --epoch-samples, --keys, --index-cache and --make-indexes: the job's settings\n"},
    {"show", SHARDCAT_SHOW,
     "usage: shardcat show SHARD... -o FILE [options]\n\n"
     "Draws the first batch the loader delivers for a seed and an epoch as a PNG grid:\n"
     "each tile the sample's image as the model sees it (the crop, the flip, the\n"
     "resize), its key and label under it. The loader's defaults are the Python\n"
     "dataset's; the tiles equal ShardDataset's batch with the same settings.\n"
     "  -o FILE                 the PNG to write\n"
     "  --count N               samples drawn (default 16)\n"
     "  --columns N             tiles a row (default: as square as the count allows)\n"
     "  --image-size N          each tile's side in pixels (default 224)\n"
     "  --crop KIND             random_resized (default), center, none (the whole\n"
     "                          image resized), cover (resized to cover, aspect kept,\n"
     "                          the middle taken) or cover_random (a random place)\n"
     "  --flip                  random horizontal flips, as flip=True\n"
     "  --no-fast               full-size decode, as fast=False\n"
     "  --aspect-buckets SPEC   a batch of each aspect bucket (HxW,HxW..., sdxl or\n"
     "                          auto[:K], scaled to --image-size), one grid under the\n"
     "                          other, as aspect_buckets batches them; --crop center\n"
     "                          is cover, random_resized cover_random\n"
     "  stream's --seed, --epoch, --shuffle, --rank, --world-size, --worker, --workers,\n"
     "  --mode, --pad, --mix, --streams, --partitions, --state, --skip-errors, --map,\n"
     "  --keys, --index-cache and --make-indexes choose which samples come first, as they do\n"
     "  for stream (without --seed, a fresh seed, said on stderr)\n"},
};
#define NCOMMANDS (sizeof commands / sizeof *commands)

/* The command's help, or the global one; returns 0. */
int shardcat_help(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(name, commands[i].name) && commands[i].help) {
            fputs(commands[i].help, stdout);
            fputs("\nShards: paths, file:// URLs, brace patterns, manifests, pipe:COMMAND, "
                  "http(s)://,\ngs:// and s3:// (see shardcat --help for remote options).\n",
                  stdout);
            return 0;
        }
    shardcat_usage(stdout);
    return 0;
}

ShardcatCommand shardcat_command_named(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(name, commands[i].name))
            return commands[i].command;
    return SHARDCAT_UNKNOWN;
}

size_t shardcat_command_names(const char **names, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < NCOMMANDS && n < max; i++)
        names[n++] = commands[i].name;
    return n;
}
