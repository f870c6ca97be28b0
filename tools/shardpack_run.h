/*
 * One shardpack run (shardpack_run.c): the shards of a plan written by worker threads, the
 * progress bar, what was skipped and why. main (shardpack.c) plans, scans, runs this,
 * then writes the manifest and the summary. Not installed.
 */
#ifndef SHARD_TOOLS_SHARDPACK_RUN_H
#define SHARD_TOOLS_SHARDPACK_RUN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <shard/shard.h>

#include "shardpack_cli.h"

/* The summary's names of the skip reasons, in the order it prints them. */
enum { SKIP_NAME, SKIP_EMPTY, SKIP_UNREADABLE, SKIP_NOT_IMAGE, SKIP_CORRUPT, SKIP_CHANGED,
       SKIP_UNDECODED, SKIP_OTHER, NSKIP };
extern const char *const shardpack_skip_names[NSKIP];

/* The image formats packed that the loader does not decode, counted kind by kind. */
enum { NUNDECODED = 6 };
extern const char *const shardpack_undecoded_names[NUNDECODED];

/* One pack run, shared by main and the workers. */
typedef struct ShardpackRun {
    const ShardpackCli *o;
    ShardPackPlan *plan;
    ShardFileInfo *infos;      /* per shard of the plan; url NULL until written */
    size_t shard_lo, shard_hi; /* this part's shards */
    unsigned char *kept;       /* per shard: kept from an interrupted run (--resume) */
    size_t nkept;
    uint64_t kept_samples, kept_bytes; /* theirs, in the manifest */
    atomic_size_t next;
    atomic_int failed;
    atomic_ullong samples_done, bytes_done;
    atomic_size_t shards_done; /* written whole by this run, each with its record's marker */
    atomic_ullong skipped[NSKIP];
    char *ignored_names[3]; /* the first files a folder scan left out, for the summary */
    char *duplicates;       /* --dedup: the report's URL, when inputs were left out */
    size_t relabelled;      /* duplicates whose copy left out had another label */
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
 * progress bar on a terminal meanwhile; the shards a resume keeps (shard_pack_kept) are
 * taken as they are, said first. A shard that fails fails the run (run->failed,
 * run->error); the workers are joined before it returns.
 * @return 0; 1 after saying why it could not start (out of memory, no thread), workers
 *         perhaps still running: the caller leaves at once
 */
int shardpack_run_write(ShardpackRun *run);

/* Inputs skipped, over every reason. */
uint64_t shardpack_run_skipped(ShardpackRun *run);

/* With --dedup: the inputs left out as duplicates, listed in STEM.duplicates.tsv beside the
 * set's manifest (dropped, kept, SHA-256); *url its name (malloc'd) or NULL when there were
 * none. 0, or 1 after saying why not. */
int shardpack_write_duplicates(ShardpackRun *run, const char *manifest, char **url);

#endif /* SHARD_TOOLS_SHARDPACK_RUN_H */
