/*
 * shardcat repair MANIFEST (shardcat_repair.h): what a local set's own files can give back
 * without its source. Each shard of the set's numbering in the manifest's folder is
 * verified: one whose structure holds but whose index is missing or wrong gets its index
 * again; a damaged one is read up to the damage and its whole samples written as
 * NAME.repaired.EXT beside it (the original is left as it is); then the manifest is
 * written again from what was found, the earlier one's classes and options kept. What
 * cannot come back (a shard listed but gone, a shard with no whole sample) is named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "shardcat_health.h"
#include "shardcat_repair.h"

typedef struct Repair {
    const char *manifest;
    char *dir;  /* the manifest's folder, with its slash ("" for the working folder) */
    char *stem; /* its name without .json */
    ShardManifest *before; /* NULL when gone or unreadable */
    ShardManifest *after;
    size_t repaired, unrepaired;
} Repair;

static const char *base_name(const char *url)
{
    const char *s = strrchr(url, '/');
    return s ? s + 1 : url;
}

/* NAME.repaired.EXT for a shard NAME.EXT (EXT .tar or .tar.zst, or the last one). */
static char *repaired_name(const char *path)
{
    const char *ext = strstr(base_name(path), ".tar");
    if (!ext)
        ext = strrchr(base_name(path), '.');
    if (!ext)
        ext = path + strlen(path);
    char *out = NULL;
    return asprintf(&out, "%.*s.repaired%s", (int)(ext - path), path, ext) < 0 ? NULL : out;
}

/* The earlier manifest's entry for the shard called name, or NULL. */
static const ShardFileInfo *entry_for(const Repair *rp, const char *name)
{
    for (size_t i = 0; rp->before && i < shard_manifest_count(rp->before); i++) {
        const ShardFileInfo *e = shard_manifest_shard(rp->before, i);
        if (!strcmp(base_name(e->url), name))
            return e;
    }
    return NULL;
}

static int verify(const char *path, const ShardFileInfo *expect, int check_index,
                  ShardVerifyResult *r)
{
    ShardVerifySettings s;
    shard_verify_default_settings(&s);
    s.expect = expect;
    s.check_index = check_index;
    s.max_defects = 1;
    ShardError err;
    return shard_verify(path, &s, r, &err);
}

/* The field names of a sample, joined, for telling a whole sample from one cut short. */
static void field_names(const ShardSampleView *v, char *out, size_t cap)
{
    out[0] = 0;
    for (size_t i = 0; i < v->nfields; i++) {
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%s", i ? "," : "", v->fields[i].name);
    }
}

/* A writer's pattern naming path alone: its last run of digits as the one conversion
 * (*first, the number), or, with none, a conversion that prints nothing; '%' doubled. */
static char *pattern_for(const char *path, uint64_t *first)
{
    const char *base = base_name(path), *end = path + strlen(path);
    while (end > base && (end[-1] < '0' || end[-1] > '9'))
        end--;
    const char *digits = end;
    while (digits > base && digits[-1] >= '0' && digits[-1] <= '9')
        digits--;
    size_t cap = strlen(path) * 2 + 16, n = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    *first = 0;
    for (const char *c = path; *c; c++) {
        if (c == digits && digits < end) {
            n += (size_t)snprintf(out + n, cap - n, "%%0%dd", (int)(end - digits));
            *first = strtoull(digits, NULL, 10);
            c = end - 1;
            continue;
        }
        if (*c == '%')
            out[n++] = '%';
        out[n++] = *c;
    }
    out[n] = 0;
    if (digits == end) /* no number: one that prints nothing */
        snprintf(out + n, cap - n, "%%.0d");
    return out;
}

/* A damaged shard's whole samples (those before the damage; the last only when it has the
 * fields of the first) written as NAME.repaired.EXT; its entry into info. 0, or -1 after
 * saying why. */
static int cut(const char *path, ShardFileInfo *info, uint64_t *kept)
{
    char *out = repaired_name(path);
    ShardWriterSettings ws;
    shard_writer_default_settings(&ws);
    char *pattern = out ? pattern_for(out, &ws.first_shard) : NULL;
    ShardFile *f = NULL;
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    ShardError err;
    if (!pattern || shard_file_open(&f, path, &fs, &err)) {
        fprintf(stderr, "shardcat: %s: %s\n", path, pattern ? err.message : "out of memory");
        free(out);
        free(pattern);
        return -1;
    }
    ws.pattern = pattern;
    ws.maxcount = 0;
    ws.maxsize = 0;
    size_t len = strlen(out);
    ws.compression = len > 8 && !strcmp(out + len - 8, ".tar.zst") ? SHARD_COMPRESSION_ZSTD
                                                                  : SHARD_COMPRESSION_NONE;
    ShardWriter *w = NULL;
    int rc = shard_writer_open(&w, &ws, &err) ? -1 : 0;
    if (rc)
        fprintf(stderr, "shardcat: %s: %s\n", out, err.message);
    const ShardSampleView *v;
    char first[512] = "", now[512];
    ShardField fields[64];
    *kept = 0;
    while (!rc && shard_file_next(f, &v) == 0) {
        field_names(v, now, sizeof now);
        if (!first[0])
            snprintf(first, sizeof first, "%s", now);
        if (strcmp(now, first) || v->nfields > 64)
            break; /* fields missing: the damage cut it short */
        for (size_t i = 0; i < v->nfields; i++)
            fields[i] = (ShardField){v->fields[i].name, v->fields[i].data, (size_t)v->fields[i].size};
        ShardSample s = {v->key, fields, v->nfields};
        if (shard_writer_add(w, &s)) {
            fprintf(stderr, "shardcat: %s: %s\n", out, shard_writer_error(w));
            rc = -1;
        }
        (*kept)++;
    }
    if (!rc && (!*kept || shard_writer_finish(w) || shard_writer_count(w) != 1)) {
        if (*kept)
            fprintf(stderr, "shardcat: %s: %s\n", out, shard_writer_error(w));
        rc = -1;
    }
    if (!rc) {
        *info = *shard_writer_shard(w, 0);
        info->url = strdup(info->url);
        rc = info->url ? 0 : -1;
    }
    shard_writer_free(&w);
    shard_file_free(&f);
    free(out);
    free(pattern);
    return rc;
}

/* One shard of the set: kept, given its index again, or cut; its entry into the new
 * manifest, or named as lost. */
static void repair_shard(Repair *rp, const char *path)
{
    const char *name = base_name(path);
    const ShardFileInfo *had = entry_for(rp, name);
    ShardVerifyResult r;
    ShardFileInfo info = {0};
    ShardError err;
    if (verify(path, had, 1, &r) == 0 && r.has_index) {
        info = had ? *had : (ShardFileInfo){.nsamples = r.samples, .filesize = r.filesize,
                                             .tarsize = r.tarsize};
    } else if (verify(path, NULL, 0, &r) == 0) { /* whole: its index missing or wrong */
        uint64_t n;
        if (shard_index_build(path, NULL, &n, &err)) {
            fprintf(stderr, "shardcat: %s\n", err.message);
            rp->unrepaired++;
            return;
        }
        printf("%s: index made again (%llu samples)\n", path, (unsigned long long)n);
        rp->repaired++;
        info = (ShardFileInfo){.nsamples = r.samples, .filesize = r.filesize, .tarsize = r.tarsize};
        if (had && had->filesize == r.filesize && verify(path, had, 1, &r) == 0)
            info = *had; /* its checksums still hold */
    } else {
        uint64_t kept;
        if (cut(path, &info, &kept)) {
            printf("%s: damaged, and no whole sample before the damage: left out\n", path);
            rp->unrepaired++;
            return;
        }
        printf("%s: damaged: its first %llu samples, whole, are %s (the original kept)\n",
               path, (unsigned long long)kept, info.url);
        rp->repaired++;
        shard_manifest_add(rp->after, &info);
        free((char *)info.url);
        return;
    }
    info.url = path;
    shard_manifest_add(rp->after, &info);
}

/* The set's shards in its folder: its numbering's (the manifest's names, or STEM-*), in
 * name order, NAME.repaired.* left out (a repair makes them again); NULL after saying why. */
static ShardList *set_shards(const Repair *rp, ShardRemote *remote)
{
    ShardListSettings s;
    shard_list_default_settings(&s);
    s.counts = 0;
    s.remote = remote;
    const char *spec = rp->dir[0] ? rp->dir : "./";
    ShardList *l;
    ShardError err;
    if (shard_list_expand(&l, &spec, 1, &s, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return NULL;
    }
    return l;
}

static int of_the_set(const Repair *rp, const char *name)
{
    size_t n = strlen(rp->stem);
    char *rep = repaired_name(name);
    int done = rep && entry_for(rp, base_name(rep)); /* repaired before: the original kept */
    free(rep);
    if (done)
        return 0;
    if (entry_for(rp, name))
        return 1;
    if (strstr(name, ".repaired."))
        return 0; /* one an earlier repair made that its manifest no longer lists */
    return !strncmp(name, rp->stem, n) && (name[n] == '-' || name[n] == '_' || name[n] == '.');
}

static int start(Repair *rp, const char *manifest)
{
    rp->manifest = manifest;
    size_t cut = (size_t)(base_name(manifest) - manifest);
    const char *json = strstr(base_name(manifest), ".json");
    rp->dir = strndup(manifest, cut);
    rp->stem = strndup(base_name(manifest), (size_t)(json - base_name(manifest)));
    ShardError err;
    if (shard_manifest_read(&rp->before, manifest, &err)) {
        printf("%s: %s: made again from the shards beside it\n", manifest,
               err.code == SHARD_ERR_NOT_FOUND ? "gone" : "unreadable");
        rp->before = NULL;
    }
    if (!rp->dir || !rp->stem || shard_manifest_new(&rp->after, rp->stem))
        return -1;
    if (rp->before) {
        size_t n = shard_manifest_class_count(rp->before);
        const char **names = malloc((n ? n : 1) * sizeof *names);
        for (size_t i = 0; names && i < n; i++)
            names[i] = shard_manifest_class(rp->before, i);
        if (!names || (n && shard_manifest_set_classes(rp->after, names, n)) ||
            (shard_manifest_options(rp->before) &&
             shard_manifest_set_options(rp->after, shard_manifest_options(rp->before)))) {
            free(names);
            return -1;
        }
        free(names);
    }
    return 0;
}

typedef struct GapCtx {
    Repair *rp;
    const char *tmpl;
} GapCtx;

static void say_gap(void *cookie, unsigned long long k)
{
    GapCtx *g = cookie;
    char name[600];
    shardcat_numbered(g->tmpl, k, name, sizeof name);
    char path[1200];
    snprintf(path, sizeof path, "%s%s", g->rp->dir, name);
    if (entry_for(g->rp, name) || access(path, F_OK) == 0)
        return; /* named already: listed and gone, or there and damaged past repair */
    printf("%s%s: a gap in the numbering, not there: lost, or never written\n", g->rp->dir,
           name);
    g->rp->unrepaired++;
}

/* The numbers missing among the shards found (one numbering), each named. */
static void say_gaps(Repair *rp)
{
    size_t n = shard_manifest_count(rp->after), k = 0;
    unsigned long long *nums = malloc((n ? n : 1) * sizeof *nums);
    char tmpl[512] = "", t2[512];
    for (size_t i = 0; nums && i < n; i++) {
        if (shardcat_numbering(shard_manifest_shard(rp->after, i)->url, t2, sizeof t2, &nums[k]) ||
            (tmpl[0] && strcmp(t2, tmpl))) {
            k = 0; /* several numberings: no gap to tell */
            break;
        }
        snprintf(tmpl, sizeof tmpl, "%s", t2);
        k++;
    }
    GapCtx g = {rp, tmpl};
    if (k)
        shardcat_gaps(nums, k, say_gap, &g);
    free(nums);
}

int shardcat_repair(const ShardcatCli *cli, ShardRemote *remote)
{
    const char *manifest = cli->args[0];
    if (strstr(manifest, "://") && strncmp(manifest, "file://", 7)) {
        fprintf(stderr, "shardcat: %s: repair works on a set in a local folder (it writes "
                        "beside the shards): copy the set here first\n", manifest);
        return 1;
    }
    Repair rp = {0};
    int status = 0;
    ShardList *l = NULL;
    if (start(&rp, manifest) || !(l = set_shards(&rp, remote))) {
        if (!l && rp.dir)
            fprintf(stderr, "shardcat: %s: no set to repair\n", manifest);
        else
            fprintf(stderr, "shardcat: out of memory\n");
        status = 1;
    }
    for (size_t i = 0; !status && i < shard_list_count(l); i++) {
        const char *url = shard_list_entry(l, i)->url;
        if (of_the_set(&rp, base_name(url)))
            repair_shard(&rp, url);
    }
    /* listed, not there: nothing to build it from */
    for (size_t i = 0; !status && rp.before && i < shard_manifest_count(rp.before); i++) {
        const char *name = base_name(shard_manifest_shard(rp.before, i)->url);
        int found = 0;
        for (size_t j = 0; j < shard_manifest_count(rp.after) && !found; j++) {
            const char *now = base_name(shard_manifest_shard(rp.after, j)->url);
            char *rep = repaired_name(name);
            found = !strcmp(now, name) || (rep && !strcmp(now, base_name(rep)));
            free(rep);
        }
        if (!found) {
            printf("%s%s: listed, gone: it cannot be made again without the source\n", rp.dir,
                   name);
            rp.unrepaired++;
        }
    }
    if (!status)
        say_gaps(&rp);
    ShardError err;
    if (!status && shard_manifest_write(rp.after, manifest, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        status = 1;
    }
    if (!status)
        printf("%s: %zu shards, %llu samples; %zu repaired, %zu could not be\n", manifest,
               shard_manifest_count(rp.after),
               (unsigned long long)shard_manifest_samples(rp.after), rp.repaired, rp.unrepaired);
    shard_list_free(&l);
    shard_manifest_free(&rp.before);
    shard_manifest_free(&rp.after);
    free(rp.dir);
    free(rp.stem);
    return status || rp.unrepaired ? 1 : 0;
}
