/*
 * shardpack's run: the bad inputs counted (or fatal), the worker threads that write the
 * shards, and the progress bar.
 *
 * DESIGN: worker threads take whole shards of the plan from a shared counter (run->next)
 * and write each through the library (shard_pack_write_shard), its info into the shard's
 * own slot of run->infos; the plan is read-only by then, so the output does not depend
 * on --jobs. The first failure is kept in run->error under run->lock and stops the
 * others at their next sample (on_written). The main thread only waits on run->cond,
 * drawing the progress bar from the atomic counters every 0.2 s on a terminal, then
 * joins the workers. Workers block every signal: they go to the main thread.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "shardpack_run.h"

const char *const shardpack_skip_names[NSKIP] = {
    "invalid name", "zero-byte", "unreadable", "not an image", "corrupt image", "changed while packing",
    "not decoded by the loader", "other",
};
const char *const shardpack_undecoded_names[NUNDECODED] = {"gif", "bmp", "tiff", "pnm", "broken",
                                                            "other"};
/* The summary's count for a reason; a reason added to the library after this tool, "other". */
static atomic_ullong *skip_slot(ShardpackRun *run, ShardPackBad reason)
{
    int k;
    switch (reason) {
    case SHARD_PACK_UNREADABLE: k = SKIP_UNREADABLE; break;
    case SHARD_PACK_CHANGED: k = SKIP_CHANGED; break;
    case SHARD_PACK_NOT_IMAGE: k = SKIP_NOT_IMAGE; break;
    case SHARD_PACK_CORRUPT: k = SKIP_CORRUPT; break;
    case SHARD_PACK_BAD_NAME: k = SKIP_NAME; break;
    case SHARD_PACK_EMPTY: k = SKIP_EMPTY; break;
    case SHARD_PACK_UNDECODED: k = SKIP_UNDECODED; break;
    default: k = SKIP_OTHER;
    }
    return &run->skipped[k];
}

/* An image the loader does not decode, packed: counted by its kind (what's first word). */
static void count_undecoded(ShardpackRun *run, const char *what)
{
    int k = NUNDECODED - 1;
    for (int i = 0; i < NUNDECODED - 1; i++) {
        size_t n = strlen(shardpack_undecoded_names[i]);
        if (!strncmp(what, shardpack_undecoded_names[i], n) && what[n] == ' ')
            k = i;
    }
    atomic_fetch_add(&run->undecoded[k], 1);
}

void shardpack_run_init(ShardpackRun *run, const ShardpackCli *o)
{
    memset(run, 0, sizeof *run);
    run->o = o;
    pthread_mutex_init(&run->lock, NULL);
    pthread_cond_init(&run->cond, NULL);
    run->t0 = cli_now();
}

static void record_error(ShardpackRun *run, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void record_error(ShardpackRun *run, const char *fmt, ...)
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

int shardpack_scan_bad(void *cookie, const char *path, ShardPackBad reason, const char *what)
{
    ShardpackRun *run = cookie;
    char buf[4096];
    cli_url(path, buf, sizeof buf); /* an input may be a URL: no credentials shown */
    if (reason == SHARD_PACK_IGNORED) { /* named in the summary, the first few */
        if (run->nignored_names < sizeof run->ignored_names / sizeof *run->ignored_names)
            run->ignored_names[run->nignored_names++] = strdup(buf);
        return 1;
    }
    if (run->o->on_error == ON_ERROR_FAIL) {
        fprintf(stderr, "shardpack: %s: %s%s\n", buf, what,
                reason == SHARD_PACK_EMPTY_CLASS
                    ? " (remove it; --on-error skip keeps it as a class with no samples)"
                    : "");
        run->scan_named++;
        return 0;
    }
    if (reason == SHARD_PACK_EMPTY_CLASS) {
        fprintf(stderr, "shardpack: keeping %s as a class with no samples: %s\n", buf, what);
        return 1;
    }
    if (!run->o->quiet)
        fprintf(stderr, "shardpack: skipping %s: %s\n", buf, what);
    atomic_fetch_add(skip_slot(run, reason), 1);
    return 1;
}

/* A bad input found while packing: 1 to skip it, 0 after failing the run. */
static int on_bad(void *cookie, size_t input, ShardPackBad reason, const char *what)
{
    ShardpackRun *run = cookie;
    char path[4096];
    cli_url(shard_pack_plan_input(run->plan, input)->path, path, sizeof path);
    if (reason == SHARD_PACK_UNDECODED && run->o->on_error == ON_ERROR_FAIL) {
        count_undecoded(run, what); /* packed; the summary names them by kind */
        return 0;
    }
    if (run->o->on_error == ON_ERROR_FAIL) {
        record_error(run, "%s: %s", path, what);
        return 0;
    }
    atomic_fetch_add(skip_slot(run, reason), 1);
    if (!run->o->quiet) {
        pthread_mutex_lock(&run->lock);
        fprintf(stderr, "%sshardpack: skipping %s: %s\n", run->tty ? "\r" : "", path, what);
        pthread_mutex_unlock(&run->lock);
    }
    return 1;
}

/* Progress; stops the shard when another one failed. */
static int on_written(void *cookie, size_t input, uint64_t bytes)
{
    ShardpackRun *run = cookie;
    (void)input;
    atomic_fetch_add(&run->samples_done, 1);
    atomic_fetch_add(&run->bytes_done, bytes);
    return atomic_load(&run->failed);
}

static void on_resized(void *cookie, size_t input, uint64_t bytes_in, uint64_t bytes_out)
{
    ShardpackRun *run = cookie;
    (void)input;
    atomic_fetch_add(&run->resized, 1);
    atomic_fetch_add(&run->resized_in, bytes_in);
    atomic_fetch_add(&run->resized_out, bytes_out);
}

static void *worker(void *arg)
{
    ShardpackRun *run = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    ShardPackCallbacks cb = {on_bad, on_written, run, on_resized};
    while (!atomic_load(&run->failed)) {
        size_t j = atomic_fetch_add(&run->next, 1);
        if (j >= run->shard_hi)
            break;
        if (run->kept[j])
            continue; /* finished by the interrupted run */
        ShardError err;
        if (shard_pack_write_shard(run->plan, j, &cb, &run->infos[j], &err)) {
            record_error(run, "%s", err.message);
            break;
        }
        atomic_fetch_add(&run->shards_done, 1);
    }
    pthread_mutex_lock(&run->lock);
    run->workers_left--;
    pthread_cond_signal(&run->cond);
    pthread_mutex_unlock(&run->lock);
    return NULL;
}

/* The run a SIGINT or SIGTERM interrupts: the one place a signal handler can find it. */
static ShardpackRun *interrupted_run;

static size_t put_text(char *buf, size_t n, size_t cap, const char *s)
{
    while (*s && n < cap)
        buf[n++] = *s++;
    return n;
}

static size_t put_number(char *buf, size_t n, size_t cap, size_t v)
{
    char digits[24];
    int k = 0;
    do
        digits[k++] = (char)('0' + v % 10);
    while ((v /= 10) && k < 24);
    while (k && n < cap)
        buf[n++] = digits[--k];
    return n;
}

/* Says what an interrupted run finished and how to go on, then dies of the signal as it
 * would have (exit status 130 for SIGINT). Async-signal-safe: atomics and write() only. */
static void on_interrupt(int sig)
{
    const ShardpackRun *run = interrupted_run;
    char buf[512];
    size_t n = put_text(buf, 0, sizeof buf, "\nshardpack: interrupted: ");
    n = put_number(buf, n, sizeof buf, atomic_load(&run->shards_done) + run->nkept);
    n = put_text(buf, n, sizeof buf, " of ");
    n = put_number(buf, n, sizeof buf, run->shard_hi - run->shard_lo);
    n = put_text(buf, n, sizeof buf, " shards finished, each recorded beside the set; the same "
                 "command with --resume keeps them and packs the rest\n");
    ssize_t w = write(2, buf, n);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

uint64_t shardpack_run_skipped(ShardpackRun *run)
{
    uint64_t t = 0;
    for (int i = 0; i < NSKIP; i++)
        t += atomic_load(&run->skipped[i]);
    return t;
}

static void progress(ShardpackRun *run, uint64_t total_samples, uint64_t total_bytes, int final)
{
    uint64_t n = atomic_load(&run->samples_done), b = atomic_load(&run->bytes_done);
    double dt = cli_now() - run->t0;
    double rate = dt > 0 ? (double)b / dt : 0;
    double eta = rate > 0 ? (double)(total_bytes - (b < total_bytes ? b : total_bytes)) / rate : 0;
    int width = 30;
    int fill = total_samples ? (int)((double)n * width / (double)total_samples) : width;
    char bar[64], hb[32], hr[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %llu/%llu samples  %s read  %s/s  ETA %.0fs  %s", bar,
            (unsigned long long)n, (unsigned long long)total_samples, cli_human_bytes((double)b, hb, sizeof hb),
            cli_human_bytes(rate, hr, sizeof hr), eta, final ? "\n" : "");
    fflush(stderr);
}

/* Waits for the workers to finish, redrawing the progress bar every 0.2 s on a terminal. */
static void wait_workers(ShardpackRun *run, uint64_t total_samples, uint64_t total_bytes)
{
    pthread_mutex_lock(&run->lock);
    while (run->workers_left > 0) {
        if (run->tty) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&run->cond, &run->lock, &ts);
            progress(run, total_samples, total_bytes, 0);
        } else {
            pthread_cond_wait(&run->cond, &run->lock);
        }
    }
    pthread_mutex_unlock(&run->lock);
}

int shardpack_run_write(ShardpackRun *run)
{
    ShardPackPlan *plan = run->plan;
    run->infos = calloc(shard_pack_plan_shards(plan) + 1, sizeof *run->infos);
    if (!run->infos) {
        fprintf(stderr, "shardpack: out of memory\n");
        return 1;
    }
    shard_pack_plan_part(plan, &run->shard_lo, &run->shard_hi);
    atomic_store(&run->next, run->shard_lo);
    run->kept = calloc(shard_pack_plan_shards(plan) + 1, 1);
    if (!run->kept) {
        fprintf(stderr, "shardpack: out of memory\n");
        return 1;
    }
    uint64_t total_samples = 0, total_bytes = 0;
    size_t left = 0;
    for (size_t j = run->shard_lo; j < run->shard_hi; j++) {
        int k = shard_pack_kept(plan, j, &run->infos[j]);
        if (k < 0) {
            fprintf(stderr, "shardpack: out of memory\n");
            return 1;
        }
        size_t first, end;
        shard_pack_plan_shard(plan, j, &first, &end);
        if (k) {
            run->kept[j] = 1;
            run->nkept++;
            run->kept_samples += run->infos[j].nsamples;
            for (size_t i = first; i < end; i++)
                run->kept_bytes += shard_pack_plan_input(plan, i)->size;
            continue;
        }
        left++;
        for (size_t i = first; i < end; i++) {
            total_samples++;
            total_bytes += shard_pack_plan_input(plan, i)->size;
        }
    }
    if (run->o->resume && !run->o->quiet) {
        char hb[32];
        if (shard_pack_complete(plan))
            fprintf(stderr, "shardpack: the set is complete: the record of the run that finished "
                            "it names its manifest as it is; nothing to do (without --resume "
                            "it is packed anew)\n");
        else if (shard_pack_resumed(plan))
            fprintf(stderr, "shardpack: resuming: %zu of %zu shards finished by the earlier run "
                            "kept (%llu samples); %zu to pack (%llu samples, %s)\n",
                    run->nkept, run->shard_hi - run->shard_lo,
                    (unsigned long long)run->kept_samples, left, (unsigned long long)total_samples,
                    cli_human_bytes((double)total_bytes, hb, sizeof hb));
        else
            fprintf(stderr, "shardpack: --resume: no record of an earlier run of this set; "
                            "packing all of it\n");
    }
    run->tty = !run->o->quiet && isatty(2);
    int nthreads = run->o->jobs;
    if ((size_t)nthreads > run->shard_hi - run->shard_lo)
        nthreads = (int)(run->shard_hi - run->shard_lo);
    pthread_t *threads = calloc((size_t)(nthreads ? nthreads : 1), sizeof *threads);
    run->workers_left = nthreads;
    interrupted_run = run; /* the workers block signals: they come to this thread */
    signal(SIGINT, on_interrupt);
    signal(SIGTERM, on_interrupt);
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&threads[i], NULL, worker, run)) {
            fprintf(stderr, "shardpack: cannot start a thread\n");
            return 1;
        }
    }
    wait_workers(run, total_samples, total_bytes);
    for (int i = 0; i < nthreads; i++)
        pthread_join(threads[i], NULL);
    signal(SIGINT, SIG_DFL); /* the shards are done: what follows is the manifest */
    signal(SIGTERM, SIG_DFL);
    free(threads);
    if (run->tty)
        progress(run, total_samples, total_bytes, 1);
    return 0;
}

/* A path as a TSV field: backslash, tab and newline escaped. */
static void tsv_field(FILE *f, const char *s)
{
    for (; *s; s++)
        fputs(*s == '\\' ? "\\\\" : *s == '\t' ? "\\t" : *s == '\n' ? "\\n" : (char[2]){*s, 0}, f);
}

int shardpack_write_duplicates(ShardpackRun *run, const char *manifest, char **url)
{
    *url = NULL;
    size_t n = shard_pack_plan_duplicates(run->plan);
    if (!n)
        return 0;
    /* beside the set's manifest: STEM.duplicates.tsv (one report for all of a set's parts) */
    size_t len = strlen(manifest);
    if (len > 5 && !strcmp(manifest + len - 5, ".json"))
        len -= 5;
    const char *part = NULL;
    for (const char *q = manifest; (q = strstr(q, ".part-")) && q < manifest + len; q++)
        part = q;
    if (part && strstr(part, "-of-"))
        len = (size_t)(part - manifest);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (asprintf(url, "%.*s.duplicates.tsv", (int)len, manifest) < 0 || !f) {
        *url = NULL;
        if (f)
            fclose(f);
        free(text);
        fprintf(stderr, "shardpack: out of memory\n");
        return 1;
    }
    fputs("dropped\tkept\tsha256\tdropped_label\tkept_label\n", f);
    for (size_t i = 0; i < n; i++) {
        const char *dropped, *kept, *sum;
        int64_t dl, kl;
        shard_pack_plan_duplicate(run->plan, i, &dropped, &kept, &sum);
        shard_pack_plan_duplicate_labels(run->plan, i, &dl, &kl);
        run->relabelled += dl != kl; /* a copy in another class: the kept one's label stands */
        tsv_field(f, dropped);
        fputc('\t', f);
        tsv_field(f, kept);
        fprintf(f, "\t%s\t%lld\t%lld\n", sum, (long long)dl, (long long)kl);
    }
    int rc = 0;
    if (fclose(f)) {
        fprintf(stderr, "shardpack: out of memory\n");
        rc = 1;
    } else {
        ShardError err;
        if (shard_put(*url, text, size, NULL, &err)) {
            fprintf(stderr, "shardpack: %s\n", err.message);
            rc = 1;
        }
    }
    free(text);
    return rc;
}
