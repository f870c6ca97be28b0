/*
 * shardpack — turn an image folder (or a list file) into WebDataset shards with an index
 * per shard and a manifest.
 *
 * DESIGN: the main thread scans the input and builds the library's pack plan
 * (shard/pack.h: keys, the shuffle, which samples go into which numbered shard, from file
 * sizes alone). The plan is a pure function of the input and options, so the output does
 * not depend on --jobs, and --part I/N packs a disjoint slice of the very same plan.
 * Worker threads (shardpack_run.c) take whole shards from a shared counter and write each
 * through the library; the main thread only shows progress and, at the end, writes the
 * manifest from the shards' infos in shard order.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "shardpack_cli.h"
#include "shardpack_run.h"

/* ---- before the run ------------------------------------------------------------------ */

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

/* --json: o on stdout, its keys in the order set, and the reference dropped. */
static void put_json(json_t *o)
{
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text)
        puts(text);
    free(text);
    json_decref(o);
}

/* --join: the part manifests o->operands into one, -o MANIFEST. Returns the exit status. */
static int join(const ShardpackCli *o)
{
    const char *out = o->pattern;
    char **parts = o->operands;
    int n = o->noperands;
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
    char ub[4096];
    if (!rc && !o->quiet)
        fprintf(stderr, "shardpack: joined %d manifests: %zu shards, %llu samples -> %s\n", n,
                shard_manifest_count(joined), (unsigned long long)shard_manifest_samples(joined),
                cli_url(out, ub, sizeof ub));
    if (!rc && o->json) {
        json_t *j = json_object();
        json_object_set_new(j, "manifest", cli_json_url(out));
        json_object_set_new(j, "parts", json_integer(n));
        json_object_set_new(j, "shards", json_integer((json_int_t)shard_manifest_count(joined)));
        json_object_set_new(j, "samples", json_integer((json_int_t)shard_manifest_samples(joined)));
        put_json(j);
    }
    for (int i = 0; i < n; i++)
        shard_manifest_free(&m[i]);
    free(m);
    shard_manifest_free(&joined);
    return rc;
}

/* The plan for o, the library judging the pattern now rather than after the scan; -1, or
 * the exit status after saying why not. */
static int new_plan(const ShardpackCli *o, ShardPackSettings *ps, ShardPackPlan **plan)
{
    shardpack_settings(o, ps);
    ShardRemote *remote = NULL;
    {
        ShardRemoteSettings rs;
        shard_remote_default_settings(&rs);
        if (o->upload_part)
            rs.upload_part = o->upload_part;
        rs.on_retry = cli_on_retry;
        rs.on_retry_cookie = (void *)"shardpack";
        ShardError rerr;
        if (shard_remote_new(&remote, &rs, &rerr)) {
            fprintf(stderr, "shardpack: %s\n", rerr.message);
            return 1;
        }
        ps->remote = remote; /* the plan keeps its own reference */
    }
    ShardError perr;
    int prc = shard_pack_plan_new(plan, ps, &perr);
    shard_remote_free(&remote);
    if (prc) {
        fprintf(stderr, "shardpack: %s\n", perr.message);
        return 2;
    }
    return -1;
}

/* The output folder (made when missing) and the input; 0, or 1 after saying what is
 * wrong. */
static int check_paths(const ShardpackCli *o)
{
    if (check_output_dir(o->pattern))
        return 1;
    struct stat st;
    if (stat(o->src, &st) != 0) {
        fprintf(stderr, "shardpack: %s: %s\n", o->src, strerror(errno));
        return 1;
    }
    if (!o->list && !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "shardpack: %s: not a folder (use --list for a list file)\n", o->src);
        return 1;
    }
    return 0;
}

/* Scans the input into the plan and builds it, then clears the way for the shards; 0, or
 * 1 after saying why not. */
static int scan(ShardpackRun *run, const char *manifest, uint64_t *ignored)
{
    ShardPackScanCallbacks scb = {shardpack_scan_bad, run};
    ShardError perr;
    int rc = shard_pack_plan_scan(run->plan, run->o->src, run->o->list, &scb, ignored, &perr);
    /* A scan that named bad inputs fails with the first of them: said already. */
    if (rc && (!run->scan_named || rc == SHARD_ERR_NOMEM))
        fprintf(stderr, "shardpack: %s\n", perr.message);
    if (!rc && shard_pack_plan_build(run->plan, &perr)) {
        fprintf(stderr, "shardpack: %s\n", perr.message);
        rc = -1;
    }
    if (rc)
        return 1;
    /* No manifest while shards are written: one left by an earlier run, or half a run,
     * would name shards that are not this run's. */
    if (shard_pack_prepare(run->plan, manifest, &perr)) {
        fprintf(stderr, "shardpack: %s\n", perr.message);
        return 1;
    }
    if (shardpack_write_duplicates(run, manifest, &run->duplicates))
        return 1;
    size_t gone = shard_pack_replaced(run->plan);
    if (gone && !run->o->quiet)
        fprintf(stderr, "shardpack: an earlier set was here: its %zu file%s (shards, indexes, columns, "
                        "manifests%s) removed, to be replaced%s\n",
                gone, gone == 1 ? "" : "s", run->o->have_part ? " of this part" : "",
                run->o->resume ? "" : " (--resume keeps what an interrupted run of the same "
                                      "input and options finished)");
    return 0;
}

/* ---- after the run ------------------------------------------------------------------- */

static void print_leftover(void *cookie, const char *path)
{
    (void)cookie;
    fputs("shardpack: not this run's: ", stderr);
    cli_print_url(stderr, path);
    fputc('\n', stderr);
}

/* The manifest of the shards written, in shard order; then any files of an earlier run
 * left beside them. Returns the exit status; -1 out of memory (said). */
static int write_manifest(ShardpackRun *run, const char *manifest, size_t *nwritten,
                          uint64_t *stored)
{
    ShardManifest *m;
    ShardError err;
    if (shard_pack_manifest(&m, run->plan, manifest)) {
        fprintf(stderr, "shardpack: out of memory\n");
        return -1;
    }
    for (size_t j = run->shard_lo; j < run->shard_hi; j++) {
        if (!run->infos[j].url)
            continue;
        if (shard_manifest_add(m, &run->infos[j])) {
            fprintf(stderr, "shardpack: out of memory\n");
            return -1;
        }
        (*nwritten)++;
        *stored += run->infos[j].filesize;
    }
    int status = 0;
    if (shard_pack_manifest_write(run->plan, m, manifest, &err)) {
        fprintf(stderr, "shardpack: %s\n", err.message);
        status = 1;
    }
    shard_manifest_free(&m);
    if (!status && shard_pack_leftovers(run->plan, print_leftover, NULL))
        fprintf(stderr, "shardpack: the files above are from an earlier run into the same "
                        "folder and not in the manifest: remove them\n");
    return status;
}

static void print_summary(ShardpackRun *run, const char *manifest, size_t nwritten,
                          uint64_t stored, uint64_t ignored)
{
    double dt = cli_now() - run->t0;
    char hb[32], hr[32];
    /* a line per kind the loader does not decode, before the summary (the last line) */
    for (int i = 0; i < NUNDECODED; i++) {
        uint64_t k = atomic_load(&run->undecoded[i]);
        if (k && !strcmp(shardpack_undecoded_names[i], "broken"))
            fprintf(stderr, "shardpack: %llu JPEG, PNG or WebP image%s packed whose header does "
                            "not parse: the loader cannot decode %s, %s size is '-' in the "
                            "columns (--on-error skip leaves them out)\n",
                    (unsigned long long)k, k == 1 ? "" : "s", k == 1 ? "it" : "them",
                    k == 1 ? "its" : "their");
        else if (k)
            fprintf(stderr, "shardpack: %llu %s image%s packed that the loader does not decode "
                            "(JPEG, PNG and WebP are; --on-error skip leaves them out)\n",
                    (unsigned long long)k, shardpack_undecoded_names[i], k == 1 ? "" : "s");
    }
    char hi[32];
    /* the shards' bytes (tar headers and padding, or zstd frames), and the input's, which
     * the progress bar counts */
    fprintf(stderr, "shardpack: %llu samples in %zu shard%s, %s written from %s of input in "
                    "%.2f s (%s/s)",
            (unsigned long long)(atomic_load(&run->samples_done) + run->kept_samples), nwritten,
            nwritten == 1 ? "" : "s", cli_human_bytes((double)stored, hb, sizeof hb),
            cli_human_bytes((double)atomic_load(&run->bytes_done), hi, sizeof hi), dt,
            cli_human_bytes(dt > 0 ? (double)atomic_load(&run->bytes_done) / dt : 0, hr, sizeof hr));
    if (shard_pack_complete(run->plan))
        fprintf(stderr, "; complete already, nothing written");
    else if (run->nkept)
        fprintf(stderr, "; %zu shard%s kept from the interrupted run, %zu packed now", run->nkept,
                run->nkept == 1 ? "" : "s", nwritten - run->nkept);
    size_t nd = shard_pack_plan_duplicates(run->plan);
    if (nd) {
        fprintf(stderr, "; %zu duplicate%s left out (", nd, nd == 1 ? "" : "s");
        cli_print_url(stderr, run->duplicates);
        fputc(')', stderr);
        if (run->relabelled)
            fprintf(stderr, ", %zu of them of another label than the copy packed, whose label "
                            "stands (both in the report)", run->relabelled);
    }
    uint64_t sk = shardpack_run_skipped(run);
    if (sk) {
        fprintf(stderr, "; skipped %llu (", (unsigned long long)sk);
        const char *sep = "";
        for (int i = 0; i < NSKIP; i++) {
            uint64_t k = atomic_load(&run->skipped[i]);
            if (k) {
                fprintf(stderr, "%s%llu %s", sep, (unsigned long long)k, shardpack_skip_names[i]);
                sep = ", ";
            }
        }
        fputc(')', stderr);
    }
    uint64_t rs = atomic_load(&run->resized);
    if (rs) {
        char hi[32], ho[32];
        fprintf(stderr, "; re-encoded %llu JPEG%s over %u px (%s -> %s)", (unsigned long long)rs,
                rs == 1 ? "" : "s", (unsigned)run->o->max_side,
                cli_human_bytes((double)atomic_load(&run->resized_in), hi, sizeof hi),
                cli_human_bytes((double)atomic_load(&run->resized_out), ho, sizeof ho));
    } else if (run->o->max_side) {
        fprintf(stderr, "; no JPEG over %u px to re-encode", (unsigned)run->o->max_side);
    }
    if (ignored) {
        fprintf(stderr, "; ignored %llu file%s without an image extension (", (unsigned long long)ignored,
                ignored == 1 ? "" : "s");
        for (size_t i = 0; i < run->nignored_names; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", run->ignored_names[i]);
        fprintf(stderr, "%s)", ignored > run->nignored_names ? ", ..." : "");
    }
    char ub[4096];
    fprintf(stderr, "; manifest %s\n", cli_url(manifest, ub, sizeof ub));
}

/* --json: the summary as one object on stdout; its keys are the summary line's. */
static void print_json(ShardpackRun *run, const char *manifest, size_t nwritten, uint64_t stored,
                       uint64_t ignored)
{
    json_t *o = json_object(), *skipped = json_object(), *undecoded = json_object();
    json_t *names = json_array();
    for (int i = 0; i < NSKIP; i++) {
        uint64_t k = atomic_load(&run->skipped[i]);
        if (k)
            json_object_set_new(skipped, shardpack_skip_names[i], json_integer((json_int_t)k));
    }
    for (int i = 0; i < NUNDECODED; i++) {
        uint64_t k = atomic_load(&run->undecoded[i]);
        if (k)
            json_object_set_new(undecoded, shardpack_undecoded_names[i], json_integer((json_int_t)k));
    }
    for (size_t i = 0; i < run->nignored_names; i++)
        json_array_append_new(names, cli_json_text(run->ignored_names[i]));
    json_object_set_new(o, "manifest", cli_json_url(manifest));
    json_object_set_new(o, "samples", json_integer((json_int_t)(atomic_load(&run->samples_done) +
                                                                run->kept_samples)));
    json_object_set_new(o, "shards", json_integer((json_int_t)nwritten));
    json_object_set_new(o, "kept_shards", json_integer((json_int_t)run->nkept));
    json_object_set_new(o, "packed_shards", json_integer((json_int_t)(nwritten - run->nkept)));
    json_object_set_new(o, "bytes", json_integer((json_int_t)stored));
    json_object_set_new(o, "input_bytes", json_integer((json_int_t)atomic_load(&run->bytes_done)));
    json_object_set_new(o, "seconds", json_real(cli_now() - run->t0));
    json_object_set_new(o, "skipped", skipped);
    json_object_set_new(o, "duplicates",
                        json_integer((json_int_t)shard_pack_plan_duplicates(run->plan)));
    json_object_set_new(o, "duplicates_report",
                        run->duplicates ? cli_json_url(run->duplicates) : json_null());
    json_object_set_new(o, "ignored", json_integer((json_int_t)ignored));
    json_object_set_new(o, "ignored_first", names);
    json_object_set_new(o, "undecoded", undecoded);
    json_object_set_new(o, "resized", json_integer((json_int_t)atomic_load(&run->resized)));
    json_object_set_new(o, "resized_bytes_in", json_integer((json_int_t)atomic_load(&run->resized_in)));
    json_object_set_new(o, "resized_bytes_out",
                        json_integer((json_int_t)atomic_load(&run->resized_out)));
    put_json(o);
}

/* ---- main ---------------------------------------------------------------------------- */

/* Packs o->src into shards and their manifest. Returns the exit status. */
static int pack(const ShardpackCli *o)
{
    ShardPackSettings ps;
    ShardPackPlan *plan;
    int status = new_plan(o, &ps, &plan);
    if (status >= 0)
        return status;
    if (check_paths(o))
        return 1;
    char *manifest = o->manifest ? strdup(o->manifest) : shard_pack_manifest_path(&ps);
    if (!manifest) {
        fprintf(stderr, "shardpack: out of memory\n");
        return 1;
    }
    ShardpackRun run;
    shardpack_run_init(&run, o);
    run.plan = plan;
    uint64_t ignored = 0;
    if (scan(&run, manifest, &ignored)) {
        shard_pack_plan_free(&plan);
        free(manifest);
        return 1;
    }
    if (shardpack_run_write(&run))
        return 1; /* workers may still run: nothing of theirs is freed */
    size_t nwritten = 0;
    uint64_t stored = 0;
    if (atomic_load(&run.failed)) {
        fprintf(stderr, "shardpack: %s\n", run.error);
        fprintf(stderr, "shardpack: failed; no manifest written (complete shards already renamed "
                        "into place stay, the incomplete one was removed; the same run with "
                        "--resume keeps them and packs the rest)\n");
        status = 1;
    } else if ((status = write_manifest(&run, manifest, &nwritten, &stored)) < 0) {
        return 1;
    }
    if (!o->quiet && !status)
        print_summary(&run, manifest, nwritten, stored, ignored);
    if (o->json && !status)
        print_json(&run, manifest, nwritten, stored, ignored);
    for (size_t j = 0; j < shard_pack_plan_shards(plan); j++)
        free((char *)run.infos[j].url);
    free(run.infos);
    free(run.kept);
    for (size_t i = 0; i < run.nignored_names; i++)
        free(run.ignored_names[i]);
    free(run.duplicates);
    shard_pack_plan_free(&plan);
    free(manifest);
    return status;
}

int main(int argc, char **argv)
{
    ShardpackCli o;
    int status = shardpack_parse(argc, argv, &o);
    if (status >= 0)
        return status;
    if (o.join)
        return join(&o);
    return pack(&o);
}
