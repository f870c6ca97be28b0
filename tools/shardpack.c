/*
 * shardpack — turn an image folder (or a list file) into WebDataset shards with an index
 * per shard and a manifest.
 *
 * DESIGN: the main thread scans the input and builds the library's pack plan
 * (shard/pack.h: keys, the shuffle, which samples go into which numbered shard, from file
 * sizes alone). The plan is a pure function of the input and options, so the output does
 * not depend on --jobs, and --part I/N packs a disjoint slice of the very same plan.
 * Worker threads take whole shards from a shared counter and write each through the
 * library; the main thread only shows progress and, at the end, writes the manifest from
 * the shards' infos in shard order.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <shard/shard.h>

#include "cli.h"

enum { ON_ERROR_FAIL, ON_ERROR_SKIP };

/* The summary's names of the skip reasons, in the order it prints them. */
enum { SKIP_NAME, SKIP_EMPTY, SKIP_UNREADABLE, SKIP_NOT_IMAGE, SKIP_CORRUPT, SKIP_CHANGED, NSKIP };
static const char *const skip_names[NSKIP] = {
    "invalid name", "zero-byte", "unreadable", "not an image", "corrupt image", "changed while packing",
};
static const int skip_reason[] = {
    [SHARD_PACK_UNREADABLE] = SKIP_UNREADABLE,
    [SHARD_PACK_CHANGED] = SKIP_CHANGED,
    [SHARD_PACK_NOT_IMAGE] = SKIP_NOT_IMAGE,
    [SHARD_PACK_CORRUPT] = SKIP_CORRUPT,
    [SHARD_PACK_BAD_NAME] = SKIP_NAME,
    [SHARD_PACK_EMPTY] = SKIP_EMPTY,
};

typedef struct Options {
    const char *src;
    const char *pattern;
    const char *manifest;
    uint64_t maxcount, maxsize, frame_size;
    int level;
    int compress; /* -1: from the pattern */
    int have_shuffle;
    uint64_t seed;
    int jobs;
    int verify;
    int on_error;
    int list;
    uint64_t part, nparts;
    int have_part;
    int fsync;
    int checksums;
    int quiet;
    int tty; /* stderr is a terminal: progress bar, and lines start with \r over it */
    int64_t mtime;
    uint32_t max_side;
    int quality;
    uint64_t upload_part;
    uint32_t inflight;
} Options;

typedef struct Run {
    const Options *o;
    ShardPackPlan *plan;
    ShardFileInfo *infos;      /* per shard of the plan; url NULL until written */
    size_t shard_lo, shard_hi; /* this part's shards */
    atomic_size_t next;
    atomic_int failed;
    atomic_ullong samples_done, bytes_done;
    atomic_ullong skipped[NSKIP];
    pthread_mutex_t lock; /* error message, stderr */
    char error[2048];
    pthread_cond_t cond;
    int workers_left;
    size_t scan_named; /* bad inputs the scan named, the run failing */
} Run;

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
          "      --manifest PATH    manifest path (default: the pattern's stem + .json)\n"
          "      --no-fsync         do not fsync shards before renaming them into place\n"
          "      --checksum LIST    digests in the manifest: sha256 (default), md5 (what wids\n"
          "                         carries), md5,sha256, or none\n"
          "      --no-checksum      same as --checksum none\n"
          "  -q, --quiet            no progress bar and no summary\n"
          "      --join             join part manifests into -o MANIFEST\n"
          "  -h, --help             this help\n"
          "  -V, --version          the version\n",
          f);
}

static void die_usage(const char *msg)
{
    exit(cli_usage_error("shardpack", msg));
}

/* ---- packing ------------------------------------------------------------------------- */

static void record_error(Run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void record_error(Run *run, const char *fmt, ...)
{
    pthread_mutex_lock(&run->lock);
    if (!run->error[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(run->error, sizeof run->error, fmt, ap);
        va_end(ap);
    }
    atomic_store(&run->failed, 1);
    pthread_mutex_unlock(&run->lock);
}

/* A bad input found by the scan: named, and skipped or fatal by --on-error. */
static int on_scan_bad(void *cookie, const char *path, ShardPackBad reason, const char *what)
{
    Run *run = cookie;
    char buf[4096];
    cli_escape_path(path, buf, sizeof buf);
    if (run->o->on_error == ON_ERROR_FAIL) {
        fprintf(stderr, "shardpack: %s: %s\n", buf, what);
        run->scan_named++;
        return 0;
    }
    if (!run->o->quiet)
        fprintf(stderr, "shardpack: skipping %s: %s\n", buf, what);
    atomic_fetch_add(&run->skipped[skip_reason[reason]], 1);
    return 1;
}

/* A bad input found while packing: 1 to skip it, 0 after failing the run. */
static int on_bad(void *cookie, size_t input, ShardPackBad reason, const char *what)
{
    Run *run = cookie;
    char path[4096];
    cli_escape_path(shard_pack_plan_input(run->plan, input)->path, path, sizeof path);
    if (run->o->on_error == ON_ERROR_FAIL) {
        record_error(run, "%s: %s", path, what);
        return 0;
    }
    atomic_fetch_add(&run->skipped[skip_reason[reason]], 1);
    if (!run->o->quiet) {
        pthread_mutex_lock(&run->lock);
        fprintf(stderr, "%sshardpack: skipping %s: %s\n", run->o->tty ? "\r" : "", path, what);
        pthread_mutex_unlock(&run->lock);
    }
    return 1;
}

/* Progress; stops the shard when another one failed. */
static int on_written(void *cookie, size_t input, uint64_t bytes)
{
    Run *run = cookie;
    (void)input;
    atomic_fetch_add(&run->samples_done, 1);
    atomic_fetch_add(&run->bytes_done, bytes);
    return atomic_load(&run->failed);
}

static void *worker(void *arg)
{
    Run *run = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    ShardPackCallbacks cb = {on_bad, on_written, run};
    while (!atomic_load(&run->failed)) {
        size_t j = atomic_fetch_add(&run->next, 1);
        if (j >= run->shard_hi)
            break;
        ShardError err;
        if (shard_pack_write_shard(run->plan, j, &cb, &run->infos[j], &err)) {
            record_error(run, "%s", err.message);
            break;
        }
    }
    pthread_mutex_lock(&run->lock);
    run->workers_left--;
    pthread_cond_signal(&run->cond);
    pthread_mutex_unlock(&run->lock);
    return NULL;
}

static uint64_t total_skipped(Run *run)
{
    uint64_t t = 0;
    for (int i = 0; i < NSKIP; i++)
        t += atomic_load(&run->skipped[i]);
    return t;
}

static void progress(Run *run, uint64_t total_samples, uint64_t total_bytes, double t0, int final)
{
    uint64_t n = atomic_load(&run->samples_done), b = atomic_load(&run->bytes_done);
    double dt = cli_now() - t0;
    double rate = dt > 0 ? (double)b / dt : 0;
    double eta = rate > 0 ? (double)(total_bytes - (b < total_bytes ? b : total_bytes)) / rate : 0;
    int width = 30;
    int fill = total_samples ? (int)((double)n * width / (double)total_samples) : width;
    char bar[64], hb[32], hr[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %llu/%llu samples  %s  %s/s  ETA %.0fs  %s", bar,
            (unsigned long long)n, (unsigned long long)total_samples, cli_human_bytes((double)b, hb, sizeof hb),
            cli_human_bytes(rate, hr, sizeof hr), eta, final ? "\n" : "");
    fflush(stderr);
}

/* ---- main ---------------------------------------------------------------------------- */

static int check_output_dir(const char *pattern)
{
    if (strstr(pattern, "://"))
        return 0; /* a bucket: the library says what is wrong with it */
    char *copy = strdup(pattern);
    if (!copy) {
        fprintf(stderr, "shardpack: out of memory\n");
        return -1;
    }
    char *d = dirname(copy);
    struct stat st;
    int rc = 0;
    /* made when missing, parents too, as mkdir -p */
    for (char *p = d + 1; stat(d, &st) != 0 && errno == ENOENT && p;) {
        p = strchr(p, '/');
        if (p)
            *p = 0;
        if (mkdir(d, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "shardpack: cannot make the output folder %s: %s\n", d,
                    strerror(errno));
            free(copy);
            return -1;
        }
        if (p)
            *p++ = '/';
    }
    if (stat(d, &st) != 0) {
        fprintf(stderr, "shardpack: output folder %s: %s\n", d, strerror(errno));
        rc = -1;
    } else if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "shardpack: output folder %s: not a folder\n", d);
        rc = -1;
    } else if (access(d, W_OK | X_OK) != 0) {
        fprintf(stderr, "shardpack: output folder %s: not writable: %s\n", d, strerror(errno));
        rc = -1;
    }
    free(copy);
    return rc;
}

static int do_join(const char *out, char **parts, int n)
{
    if (!out)
        die_usage("--join needs -o MANIFEST");
    if (n == 0)
        die_usage("--join needs the part manifests");
    ShardManifest **m = calloc((size_t)n, sizeof *m);
    ShardError err;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (shard_manifest_read(&m[i], parts[i], &err)) {
            fprintf(stderr, "shardpack: %s\n", err.message);
            rc = 1;
        }
    }
    ShardManifest *joined = NULL;
    if (!rc && shard_manifest_join(&joined, (const ShardManifest *const *)m, (size_t)n, &err)) {
        fprintf(stderr, "shardpack: %s\n", err.message);
        rc = 1;
    }
    char *stem = rc ? NULL : strdup(out);
    if (stem) {
        char *b = basename(stem);
        char *dot = strrchr(b, '.');
        if (dot && dot != b)
            *dot = 0;
        shard_manifest_set_name(joined, b);
        free(stem);
    } else if (!rc) {
        fprintf(stderr, "shardpack: out of memory\n");
        rc = 1;
    }
    if (!rc && shard_manifest_write(joined, out, &err)) {
        fprintf(stderr, "shardpack: %s\n", err.message);
        rc = 1;
    }
    if (!rc)
        fprintf(stderr, "shardpack: joined %d manifests: %zu shards, %llu samples -> %s\n", n,
                shard_manifest_count(joined), (unsigned long long)shard_manifest_samples(joined), out);
    for (int i = 0; i < n; i++)
        shard_manifest_free(&m[i]);
    free(m);
    shard_manifest_free(&joined);
    return rc;
}

static void print_leftover(void *cookie, const char *path)
{
    (void)cookie;
    fputs("shardpack: not this run's: ", stderr);
    cli_print_path(stderr, path);
    fputc('\n', stderr);
}

int main(int argc, char **argv)
{
    Options o = {0};
    o.maxcount = 100000;
    o.maxsize = 3000000000ull;
    o.frame_size = 4u << 20;
    o.level = 3;
    o.compress = -1;
    o.jobs = 1;
    o.fsync = 1;
    o.checksums = SHARD_DIGEST_SHA256;
    o.quality = 95;
    int join = 0;
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    if (sde && *sde)
        o.mtime = strtoll(sde, NULL, 10);

    enum { OPT_COMPRESS = 256, OPT_FRAME, OPT_SHUFFLE, OPT_VERIFY, OPT_ON_ERROR, OPT_LIST,
           OPT_PART, OPT_MANIFEST, OPT_NO_FSYNC, OPT_NO_CHECKSUM, OPT_CHECKSUM, OPT_JOIN, OPT_RESIZE,
           OPT_QUALITY, OPT_UPLOAD_PART, OPT_INFLIGHT };
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},   {"maxcount", required_argument, NULL, 'c'},
        {"maxsize", required_argument, NULL, 's'},  {"compress", required_argument, NULL, OPT_COMPRESS},
        {"level", required_argument, NULL, 'l'},    {"frame-size", required_argument, NULL, OPT_FRAME},
        {"shuffle", required_argument, NULL, OPT_SHUFFLE}, {"jobs", required_argument, NULL, 'j'},
        {"verify", no_argument, NULL, OPT_VERIFY},  {"on-error", required_argument, NULL, OPT_ON_ERROR},
        {"list", no_argument, NULL, OPT_LIST},      {"part", required_argument, NULL, OPT_PART},
        {"manifest", required_argument, NULL, OPT_MANIFEST},
        {"no-fsync", no_argument, NULL, OPT_NO_FSYNC}, {"no-checksum", no_argument, NULL, OPT_NO_CHECKSUM},
        {"checksum", required_argument, NULL, OPT_CHECKSUM},
        {"resize", required_argument, NULL, OPT_RESIZE}, {"quality", required_argument, NULL, OPT_QUALITY},
        {"upload-part", required_argument, NULL, OPT_UPLOAD_PART},
        {"inflight", required_argument, NULL, OPT_INFLIGHT}, {"quiet", no_argument, NULL, 'q'},
        {"join", no_argument, NULL, OPT_JOIN},      {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;
    uint64_t v;
    opterr = 0; /* one message for an unknown option, ours */
    while ((c = getopt_long(argc, argv, ":o:c:s:l:j:qhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': o.pattern = optarg; break;
        case 'c':
            if (cli_parse_u64(optarg, &o.maxcount) || o.maxcount == 0)
                die_usage("--maxcount wants a whole number of samples per shard, at least 1");
            break;
        case 's':
            if (cli_parse_size(optarg, &o.maxsize))
                die_usage("--maxsize wants a size such as 1G, 500MB or 3e9");
            break;
        case OPT_COMPRESS:
            if (!strcmp(optarg, "none"))
                o.compress = SHARD_COMPRESSION_NONE;
            else if (!strcmp(optarg, "zstd"))
                o.compress = SHARD_COMPRESSION_ZSTD;
            else
                die_usage("--compress wants none or zstd");
            break;
        case 'l':
            if (cli_parse_u64(optarg, &v) || v < 1 || v > 22)
                die_usage("--level wants 1..22");
            o.level = (int)v;
            break;
        case OPT_FRAME:
            if (cli_parse_size(optarg, &o.frame_size) || o.frame_size == 0 || o.frame_size > (1u << 30))
                die_usage("--frame-size wants a size between 1 and 1GiB");
            break;
        case OPT_SHUFFLE:
            if (cli_parse_u64(optarg, &o.seed))
                die_usage("--shuffle wants a seed (a whole number)");
            o.have_shuffle = 1;
            break;
        case 'j':
            if (cli_parse_u64(optarg, &v) || v < 1 || v > 1024)
                die_usage("--jobs wants 1..1024");
            o.jobs = (int)v;
            break;
        case OPT_VERIFY: o.verify = 1; break;
        case OPT_ON_ERROR:
            if (!strcmp(optarg, "fail"))
                o.on_error = ON_ERROR_FAIL;
            else if (!strcmp(optarg, "skip"))
                o.on_error = ON_ERROR_SKIP;
            else
                die_usage("--on-error wants fail or skip");
            break;
        case OPT_LIST: o.list = 1; break;
        case OPT_PART: {
            char *slash = strchr(optarg, '/');
            char a[32] = {0};
            if (!slash || (size_t)(slash - optarg) >= sizeof a)
                die_usage("--part wants I/N, e.g. 0/4");
            memcpy(a, optarg, (size_t)(slash - optarg));
            if (cli_parse_u64(a, &o.part) || cli_parse_u64(slash + 1, &o.nparts) || o.nparts == 0 ||
                o.part >= o.nparts)
                die_usage("--part wants I/N with 0 <= I < N");
            o.have_part = 1;
            break;
        }
        case OPT_MANIFEST: o.manifest = optarg; break;
        case OPT_NO_FSYNC: o.fsync = 0; break;
        case OPT_NO_CHECKSUM: o.checksums = 0; break;
        case OPT_RESIZE:
            if (cli_parse_u64(optarg, &v) || v < 1 || v > 65500)
                die_usage("--resize wants a longer side of 1..65500 pixels");
            o.max_side = (uint32_t)v;
            break;
        case OPT_QUALITY:
            if (cli_parse_u64(optarg, &v) || v < 1 || v > 100)
                die_usage("--quality wants 1..100");
            o.quality = (int)v;
            break;
        case OPT_INFLIGHT:
            if (cli_parse_u64(optarg, &v) || v < 1 || v > 256)
                die_usage("--inflight wants 1..256");
            o.inflight = (uint32_t)v;
            break;
        case OPT_UPLOAD_PART:
            if (cli_parse_size(optarg, &o.upload_part) || o.upload_part < 1)
                die_usage("--upload-part wants a size such as 64MiB");
            break;
        case OPT_CHECKSUM:
            if (shard_digests_parse(optarg, &o.checksums))
                die_usage("--checksum wants sha256, md5, md5,sha256 or none");
            break;
        case 'q': o.quiet = 1; break;
        case OPT_JOIN: join = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("shardpack (libshard) %s\n", shard_version()); return 0;
        case ':': {
            char msg[256];
            snprintf(msg, sizeof msg, "%s wants a value", argv[optind - 1]);
            die_usage(msg);
            break;
        }
        default: {
            char msg[256];
            snprintf(msg, sizeof msg, "unknown option '%s'", argv[optind - 1]);
            die_usage(msg);
        }
        }
    }
    if (join)
        return do_join(o.pattern, argv + optind, argc - optind);
    if (optind + 1 != argc)
        die_usage(optind >= argc ? "no SRC given" : "more than one SRC given");
    o.src = argv[optind];
    if (!o.pattern)
        die_usage("no output pattern: -o out/train-%06d.tar");
    if (!cli_ends_with(o.pattern, ".tar") && !cli_ends_with(o.pattern, ".tar.zst"))
        die_usage("the output pattern must end in .tar or .tar.zst");
    int zstd = cli_ends_with(o.pattern, ".tar.zst");
    if (o.compress == SHARD_COMPRESSION_ZSTD && !zstd)
        die_usage("--compress zstd wants a pattern ending in .tar.zst");
    if (o.compress == SHARD_COMPRESSION_NONE && zstd)
        die_usage("--compress none wants a pattern ending in .tar");
    /* The library judges the pattern now rather than after the scan. */
    ShardPackSettings ps;
    shard_pack_default_settings(&ps);
    ps.pattern = o.pattern;
    ps.maxcount = o.maxcount;
    ps.maxsize = o.maxsize;
    ps.compression = o.compress < 0 ? SHARD_COMPRESSION_AUTO : (ShardCompression)o.compress;
    ps.level = o.level;
    ps.frame_size = o.frame_size;
    ps.shuffle = o.have_shuffle;
    ps.shuffle_seed = o.seed;
    if (o.have_part)
        ps.part = o.part, ps.nparts = o.nparts;
    ps.verify = o.verify;
    ps.mtime = o.mtime < 0 ? 0 : o.mtime;
    ps.checksums = o.checksums;
    ps.sync = o.fsync;
    ps.max_side = o.max_side;
    ps.quality = o.quality;
    if (o.inflight)
        ps.inflight = o.inflight;
    ShardRemote *remote = NULL;
    if (o.upload_part) {
        ShardRemoteSettings rs;
        shard_remote_default_settings(&rs);
        rs.upload_part = o.upload_part;
        ShardError rerr;
        if (shard_remote_new(&remote, &rs, &rerr)) {
            fprintf(stderr, "shardpack: %s\n", rerr.message);
            return 1;
        }
        ps.remote = remote; /* the plan keeps its own reference */
    }
    ShardPackPlan *plan;
    ShardError perr;
    int prc = shard_pack_plan_new(&plan, &ps, &perr);
    shard_remote_free(&remote);
    if (prc) {
        fprintf(stderr, "shardpack: %s\n", perr.message);
        return 2;
    }
    if (check_output_dir(o.pattern))
        return 1;
    struct stat st;
    if (stat(o.src, &st) != 0) {
        fprintf(stderr, "shardpack: %s: %s\n", o.src, strerror(errno));
        return 1;
    }
    if (!o.list && !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "shardpack: %s: not a folder (use --list for a list file)\n", o.src);
        return 1;
    }
    char *manifest = o.manifest ? strdup(o.manifest) : shard_pack_manifest_path(&ps);
    if (!manifest) {
        fprintf(stderr, "shardpack: out of memory\n");
        return 1;
    }

    double t0 = cli_now();
    Run run;
    memset(&run, 0, sizeof run);
    run.o = &o;
    pthread_mutex_init(&run.lock, NULL);
    pthread_cond_init(&run.cond, NULL);
    ShardPackScanCallbacks scb = {on_scan_bad, &run};
    uint64_t ignored = 0;
    int rc = shard_pack_plan_scan(plan, o.src, o.list, &scb, &ignored, &perr);
    /* A scan that named bad inputs fails with the first of them: said already. */
    if (rc && (!run.scan_named || rc == SHARD_ERR_NOMEM))
        fprintf(stderr, "shardpack: %s\n", perr.message);
    if (!rc && shard_pack_plan_build(plan, &perr)) {
        fprintf(stderr, "shardpack: %s\n", perr.message);
        rc = -1;
    }
    if (rc) {
        shard_pack_plan_free(&plan);
        free(manifest);
        return 1;
    }
    /* No manifest while shards are written: one left by an earlier run, or half a run,
     * would name shards that are not this run's. */
    if (shard_pack_prepare(plan, manifest, &perr)) {
        fprintf(stderr, "shardpack: %s\n", perr.message);
        shard_pack_plan_free(&plan);
        free(manifest);
        return 1;
    }
    run.plan = plan;
    run.infos = calloc(shard_pack_plan_shards(plan) + 1, sizeof *run.infos);
    if (!run.infos) {
        fprintf(stderr, "shardpack: out of memory\n");
        return 1;
    }
    shard_pack_plan_part(plan, &run.shard_lo, &run.shard_hi);
    atomic_store(&run.next, run.shard_lo);
    uint64_t total_samples = 0, total_bytes = 0;
    for (size_t j = run.shard_lo; j < run.shard_hi; j++) {
        size_t first, end;
        shard_pack_plan_shard(plan, j, &first, &end);
        for (size_t i = first; i < end; i++) {
            total_samples++;
            total_bytes += shard_pack_plan_input(plan, i)->size;
        }
    }

    int tty = o.tty = !o.quiet && isatty(2);
    int nthreads = o.jobs;
    if ((size_t)nthreads > run.shard_hi - run.shard_lo)
        nthreads = (int)(run.shard_hi - run.shard_lo);
    pthread_t *threads = calloc((size_t)(nthreads ? nthreads : 1), sizeof *threads);
    run.workers_left = nthreads;
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&threads[i], NULL, worker, &run)) {
            fprintf(stderr, "shardpack: cannot start a thread\n");
            return 1;
        }
    }
    pthread_mutex_lock(&run.lock);
    while (run.workers_left > 0) {
        if (tty) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&run.cond, &run.lock, &ts);
            progress(&run, total_samples, total_bytes, t0, 0);
        } else {
            pthread_cond_wait(&run.cond, &run.lock);
        }
    }
    pthread_mutex_unlock(&run.lock);
    for (int i = 0; i < nthreads; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    if (tty)
        progress(&run, total_samples, total_bytes, t0, 1);

    int status = 0;
    size_t nwritten = 0;
    uint64_t stored = 0;
    if (atomic_load(&run.failed)) {
        fprintf(stderr, "shardpack: %s\n", run.error);
        fprintf(stderr, "shardpack: failed; no manifest written (complete shards already renamed "
                        "into place stay, the incomplete one was removed)\n");
        status = 1;
    } else {
        ShardManifest *m;
        ShardError err;
        if (shard_pack_manifest(&m, plan, manifest)) {
            fprintf(stderr, "shardpack: out of memory\n");
            return 1;
        }
        for (size_t j = run.shard_lo; j < run.shard_hi; j++) {
            if (!run.infos[j].url)
                continue;
            if (shard_manifest_add(m, &run.infos[j])) {
                fprintf(stderr, "shardpack: out of memory\n");
                return 1;
            }
            nwritten++;
            stored += run.infos[j].filesize;
        }
        if (shard_manifest_write(m, manifest, &err)) {
            fprintf(stderr, "shardpack: %s\n", err.message);
            status = 1;
        }
        shard_manifest_free(&m);
        if (!status && shard_pack_leftovers(plan, print_leftover, NULL))
            fprintf(stderr, "shardpack: the files above are from an earlier run into the same "
                            "folder and not in the manifest: remove them\n");
    }
    if (!o.quiet && !status) {
        double dt = cli_now() - t0;
        char hb[32], hr[32];
        fprintf(stderr, "shardpack: %llu samples in %zu shards, %s in %.2f s (%s/s)",
                (unsigned long long)atomic_load(&run.samples_done), nwritten,
                cli_human_bytes((double)stored, hb, sizeof hb), dt,
                cli_human_bytes(dt > 0 ? (double)atomic_load(&run.bytes_done) / dt : 0, hr, sizeof hr));
        uint64_t sk = total_skipped(&run);
        if (sk) {
            fprintf(stderr, "; skipped %llu (", (unsigned long long)sk);
            const char *sep = "";
            for (int i = 0; i < NSKIP; i++) {
                uint64_t k = atomic_load(&run.skipped[i]);
                if (k) {
                    fprintf(stderr, "%s%llu %s", sep, (unsigned long long)k, skip_names[i]);
                    sep = ", ";
                }
            }
            fputc(')', stderr);
        }
        if (ignored)
            fprintf(stderr, "; ignored %llu files without an image extension", (unsigned long long)ignored);
        fprintf(stderr, "; manifest %s\n", manifest);
    }
    for (size_t j = 0; j < shard_pack_plan_shards(plan); j++)
        free((char *)run.infos[j].url);
    free(run.infos);
    shard_pack_plan_free(&plan);
    free(manifest);
    return status;
}
