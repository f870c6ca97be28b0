/*
 * shardpack's parts (not installed): the command line (shardpack_cli.c), the run that
 * writes the shards with worker threads (shardpack_run.c), and main's sequence: plan,
 * scan, write, manifest, summary; or --join (shardpack.c).
 */
#ifndef SHARD_TOOLS_SHARDPACK_H
#define SHARD_TOOLS_SHARDPACK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <shard/shard.h>

/* ---- the command line (shardpack_cli.c) ----------------------------------------------- */

enum { ON_ERROR_FAIL, ON_ERROR_SKIP };

/* What the command line asks, the tool's own; shardpack_settings makes the library's
 * ShardPackSettings from it. */
typedef struct ShardpackCli {
    const char *src;
    const char *pattern; /* -o: shards' names; with --join, the manifest to write */
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
    int json; /* --json: the summary as one JSON object on stdout */
    int64_t mtime;
    uint32_t max_side;
    int quality;
    uint64_t upload_part;
    uint32_t inflight;
    int join;            /* --join: the part manifests are the operands */
    char **operands;     /* --join's part manifests; borrowed from argv */
    int noperands;
} ShardpackCli;

/*
 * Reads the command line into o (filled with its defaults first, SOURCE_DATE_EPOCH
 * included) and checks it. Help and --version go to stdout, bad usage to stderr.
 * @return -1 to go on; otherwise the exit status to leave with (0 after help or the
 *         version, 2 after bad usage)
 */
int shardpack_parse(int argc, char **argv, ShardpackCli *o);

/* The library's pack settings for o (no remote: the caller sets one for --upload-part). */
void shardpack_settings(const ShardpackCli *o, ShardPackSettings *ps);

/* ---- the run (shardpack_run.c) -------------------------------------------------------- */

/* The summary's names of the skip reasons, in the order it prints them. */
enum { SKIP_NAME, SKIP_EMPTY, SKIP_UNREADABLE, SKIP_NOT_IMAGE, SKIP_CORRUPT, SKIP_CHANGED,
       SKIP_UNDECODED, SKIP_OTHER, NSKIP };
extern const char *const shardpack_skip_names[NSKIP];

/* The image formats packed that the loader does not decode, counted kind by kind. */
enum { NUNDECODED = 5 };
extern const char *const shardpack_undecoded_names[NUNDECODED];

/* One pack run, shared by main and the workers. */
typedef struct ShardpackRun {
    const ShardpackCli *o;
    ShardPackPlan *plan;
    ShardFileInfo *infos;      /* per shard of the plan; url NULL until written */
    size_t shard_lo, shard_hi; /* this part's shards */
    atomic_size_t next;
    atomic_int failed;
    atomic_ullong samples_done, bytes_done;
    atomic_ullong skipped[NSKIP];
    char *ignored_names[3]; /* the first files a folder scan left out, for the summary */
    size_t nignored_names;
    atomic_ullong undecoded[NUNDECODED]; /* packed all the same (no --on-error skip) */
    atomic_ullong resized, resized_in, resized_out; /* JPEGs re-encoded (--resize), bytes */
    pthread_mutex_t lock; /* error message, stderr */
    char error[2048];
    pthread_cond_t cond;
    int workers_left;
    size_t scan_named; /* bad inputs the scan named, the run failing */
    double t0;         /* when it started (cli_now), before the scan */
    int tty; /* stderr is a terminal, no -q: progress bar, and lines start with \r over it */
} ShardpackRun;

/* Sets up run for the options (no plan yet), starting its clock. */
void shardpack_run_init(ShardpackRun *run, const ShardpackCli *o);

/* ShardPackScanCallbacks.bad, with the run as cookie: a bad input found by the scan,
 * named, and skipped or fatal by --on-error. */
int shardpack_scan_bad(void *cookie, const char *path, ShardPackBad reason, const char *what);

/*
 * Writes this part's shards of run->plan with o->jobs worker threads, drawing the
 * progress bar on a terminal meanwhile. A shard that fails fails the run (run->failed,
 * run->error); the workers are joined before it returns.
 * @return 0; 1 after saying why it could not start (out of memory, no thread), workers
 *         perhaps still running: the caller leaves at once
 */
int shardpack_run_write(ShardpackRun *run);

/* Inputs skipped, over every reason. */
uint64_t shardpack_run_skipped(ShardpackRun *run);

#endif /* SHARD_TOOLS_SHARDPACK_H */
