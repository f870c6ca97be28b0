/*
 * shardcat repair MANIFEST (shardcat_repair.h): what a local set's own files can give back
 * without its source. The set is exactly the manifest's: the shards it lists and those of
 * their numbering in its folder (with the manifest gone, STEM-NNN.tar and .tar.zst), never
 * a file that merely shares its stem. Each is verified: one whose structure holds but
 * whose index or columns (its image sizes) are missing or wrong gets them again; a damaged one is read up to the
 * damage and its whole samples written as NAME.repaired.EXT beside it (the original is
 * left as it is); one whose bytes are not those the manifest records (bit rot: the tar
 * whole, its checksum not) keeps the manifest's entry, checksums and all, and its samples
 * before the first that does not decode are written as NAME.repaired.EXT; then the
 * manifest is written again from what was found, the earlier one's classes and options
 * kept. What cannot come back (a shard listed but gone, a shard with no whole sample, a
 * change that cannot be located) is named, and the exit status says so.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "shardcat_health.h"
#include "shardcat_repair.h"

/* A name and what it stands for, in an array sorted by name (looked up with bsearch). */
typedef struct Named {
    const char *name;
    const ShardFileInfo *entry;
} Named;

typedef struct Repair {
    const char *manifest;
    char *dir;  /* the manifest's folder, with its slash ("" for the working folder) */
    char *stem; /* its name without .json */
    ShardManifest *before; /* NULL when gone or unreadable */
    ShardManifest *after;
    Named *listed;         /* before's entries by base name */
    size_t nlisted;
    char (*numberings)[512]; /* the set's: its listed shards' (shardcat_numbering) */
    size_t nnumberings;
    Named *seen;           /* the names repair_shard took, sorted once all are in */
    size_t nseen, capseen;
    size_t repaired, unrepaired;
} Repair;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const Named *)a)->name, ((const Named *)b)->name);
}

static const Named *find(const Named *v, size_t n, const char *name)
{
    Named key = {name, NULL};
    return n ? bsearch(&key, v, n, sizeof *v, by_name) : NULL;
}

/* A path or URL as a log may show it (no password, no signed query), into buf. */
static const char *shown(const char *url, char *buf, size_t cap)
{
    shard_url_display(url, buf, cap);
    return buf;
}

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
    const Named *n = find(rp->listed, rp->nlisted, name);
    return n ? n->entry : NULL;
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
 * (*first, the number), or, with none (or one past 64 bits), no conversion; '%' doubled. */
static char *pattern_for(const char *path, uint64_t *first)
{
    const char *base = base_name(path), *end = path + strlen(path);
    while (end > base && (end[-1] < '0' || end[-1] > '9'))
        end--;
    const char *digits = end;
    while (digits > base && digits[-1] >= '0' && digits[-1] <= '9')
        digits--;
    errno = 0;
    if (end - digits > 19 || (strtoull(digits, NULL, 10), errno == ERANGE))
        digits = end; /* a number past 64 bits: the name as it is, never another's */
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
    out[n] = 0; /* no number: a pattern without a conversion names one file */
    return out;
}

/* Whether a sample's images decode (each field named as an image: jpg, jpeg, png, webp). */
static int decodes(const ShardSampleView *v)
{
    for (size_t i = 0; i < v->nfields; i++) {
        const char *n = v->fields[i].name;
        if (strcmp(n, "jpg") && strcmp(n, "jpeg") && strcmp(n, "png") && strcmp(n, "webp"))
            continue;
        unsigned char *px = NULL;
        int w, h;
        char msg[256];
        int rc = shard_decode_rgb(v->fields[i].data, (size_t)v->fields[i].size, &px, &w, &h,
                                  msg, sizeof msg);
        free(px);
        if (rc)
            return 0;
    }
    return 1;
}

/* How many of a damaged shard's samples are whole, read in order (its index not used: it
 * may be another shard's): those before the damage, the last one read only when an earlier
 * sample has its fields (else the damage cut it short); with decode, only those before the
 * first whose images do not decode. *more: the shard holds more than those. 0, or -1 after
 * saying why. */
static int whole_samples(const char *path, int decode, uint64_t *keep, int *more)
{
    ShardFile *f = NULL;
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    fs.load_index = 0;
    ShardError err;
    char buf[1024];
    if (shard_file_open(&f, path, &fs, &err)) {
        fprintf(stderr, "shardcat: %s: %s\n", shown(path, buf, sizeof buf), err.message);
        return -1;
    }
    enum { KINDS = 16 };
    char kinds[KINDS][256], now[256];
    size_t nkinds = 0;
    const ShardSampleView *v;
    uint64_t n = 0;
    int rc, last_new = 0;
    *more = 0;
    while ((rc = shard_file_next(f, &v)) == 0) {
        if (decode && !decodes(v)) {
            *more = 1;
            break;
        }
        field_names(v, now, sizeof now);
        size_t k = 0;
        while (k < nkinds && strcmp(kinds[k], now))
            k++;
        last_new = k == nkinds;
        if (last_new && nkinds < KINDS)
            snprintf(kinds[nkinds++], sizeof *kinds, "%s", now);
        n++;
    }
    if (rc != SHARD_EOS && !*more && n && last_new) { /* the damage cut the last one short */
        n--;
        *more = 1;
    }
    *more |= rc != SHARD_EOS && rc != 0;
    *keep = n;
    shard_file_free(&f);
    return 0;
}

/* A damaged shard's whole samples (whole_samples) written as NAME.repaired.EXT; its entry
 * into info, how many into *kept, whether the shard had more into *more. 0, or -1 after
 * saying why (none whole included). */
static int cut(const char *path, int decode, ShardFileInfo *info, uint64_t *kept, int *more)
{
    uint64_t keep;
    *kept = 0;
    if (whole_samples(path, decode, &keep, more) || !keep)
        return -1;
    char *out = repaired_name(path);
    ShardWriterSettings ws;
    shard_writer_default_settings(&ws);
    char *pattern = out ? pattern_for(out, &ws.first_shard) : NULL;
    ShardFile *f = NULL;
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    fs.load_index = 0;
    ShardError err;
    char buf[1024];
    if (!pattern || shard_file_open(&f, path, &fs, &err)) {
        fprintf(stderr, "shardcat: %s: %s\n", shown(path, buf, sizeof buf),
                pattern ? err.message : "out of memory");
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
    ShardField fields[64];
    while (!rc && *kept < keep && shard_file_next(f, &v) == 0) {
        if (v->nfields > 64)
            break;
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

/* A shard whose tar holds but whose bytes are not those its manifest entry had records:
 * bit rot. The entry stays (a verify still fails it); the samples before the first that
 * does not decode go to NAME.repaired.EXT; counted as not repaired. */
static void rotted(Repair *rp, const char *path, const ShardFileInfo *had)
{
    ShardFileInfo info = {0};
    uint64_t kept = 0;
    int more = 0;
    char buf[1024];
    const char *name = shown(path, buf, sizeof buf);
    if (cut(path, 1, &info, &kept, &more) == 0 && more) {
        printf("%s: damaged: its bytes are not those its manifest records (their SHA-256 or "
               "size differs), and sample %llu does not decode: its first %llu samples, "
               "whole, are %s; the original and its manifest entry are kept as they were\n",
               name, (unsigned long long)kept, (unsigned long long)kept, info.url);
    } else {
        if (info.url) /* every sample decodes: the copy would be the damaged shard again */
            remove(info.url);
        printf("%s: damaged: its bytes are not those its manifest records (their SHA-256 or "
               "size differs)%s; it and its manifest entry are kept as they were: pack it "
               "again from its source\n", name,
               more ? ", and its first sample does not decode"
                    : ", though every sample decodes: the change cannot be located");
    }
    free((char *)info.url);
    shard_manifest_add(rp->after, had);
    rp->unrepaired++;
}

/* Remembers that repair_shard took the shard called name. */
static void taken(Repair *rp, const char *name)
{
    if (rp->nseen == rp->capseen) {
        size_t cap = rp->capseen ? rp->capseen * 2 : 256;
        Named *v = realloc(rp->seen, cap * sizeof *v);
        if (!v)
            return; /* a name not remembered is said once more as "listed, gone" */
        rp->seen = v;
        rp->capseen = cap;
    }
    rp->seen[rp->nseen++] = (Named){name, NULL};
}

/* One shard of the set: kept, given its index and columns again, or cut; its entry into the new
 * manifest, or named as lost. */
static void repair_shard(Repair *rp, const char *path)
{
    const char *name = base_name(path);
    const ShardFileInfo *had = entry_for(rp, name);
    ShardVerifyResult r;
    ShardFileInfo info = {0};
    ShardError err;
    char buf[1024];
    taken(rp, name);
    int whole = verify(path, had, 1, &r) == 0 && r.has_index;
    if (whole && r.has_columns) {
        /* kept as it is */
    } else if (whole || verify(path, NULL, 0, &r) == 0) { /* its index or columns wrong */
        if (!whole && had && verify(path, had, 0, &r) != 0) {
            rotted(rp, path, had);
            return;
        }
        /* the image sizes: "-" for a header that does not parse, as the writer gives it */
        uint64_t n = r.samples;
        if ((!whole && shard_index_build(path, NULL, &n, &err)) ||
            shard_geometry_build(path, NULL, NULL, NULL, 1, NULL, &err)) {
            fprintf(stderr, "shardcat: %s\n", err.message);
            rp->unrepaired++;
            if (!whole) /* a whole shard stays listed */
                return;
        } else {
            printf("%s: %s made again (%llu samples)\n", shown(path, buf, sizeof buf),
                   whole ? "image sizes (.cols)" : "index and image sizes (.cols)",
                   (unsigned long long)n);
            rp->repaired++;
        }
    } else {
        uint64_t kept;
        int more;
        if (cut(path, 0, &info, &kept, &more)) {
            printf("%s: damaged, and no whole sample before the damage: left out\n",
                   shown(path, buf, sizeof buf));
            rp->unrepaired++;
            return;
        }
        printf("%s: damaged: its first %llu samples, whole, are %s (the original kept)\n",
               shown(path, buf, sizeof buf), (unsigned long long)kept, info.url);
        rp->repaired++;
        shard_manifest_add(rp->after, &info);
        free((char *)info.url);
        return;
    }
    info = had ? *had : (ShardFileInfo){.nsamples = r.samples, .filesize = r.filesize,
                                         .tarsize = r.tarsize};
    info.url = path;
    shard_manifest_add(rp->after, &info);
}

/* The set's shards in its folder, in name order (which are the set's: of_the_set); NULL
 * after saying why. */
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

/* Whether a name's numbering is one of the set's. */
static int numbered_in_set(const Repair *rp, const char *name)
{
    char t[512];
    unsigned long long k;
    if (shardcat_numbering(name, t, sizeof t, &k))
        return 0;
    for (size_t i = 0; i < rp->nnumberings; i++)
        if (!strcmp(t, rp->numberings[i]))
            return 1;
    return 0;
}

/* Whether the file called name belongs to the set: listed, or of the set's numbering;
 * never one an earlier repair made (made again here) or whose repaired copy is listed. */
static int of_the_set(const Repair *rp, const char *name)
{
    char *rep = repaired_name(name);
    int done = rep && entry_for(rp, base_name(rep)); /* repaired before: the original kept */
    free(rep);
    if (done)
        return 0;
    if (entry_for(rp, name))
        return 1;
    if (strstr(name, ".repaired."))
        return 0; /* one an earlier repair made that its manifest no longer lists */
    if (rp->before)
        return numbered_in_set(rp, name);
    /* no manifest: the writer's numbering of its stem, STEM-DIGITS.tar or .tar.zst */
    size_t n = strlen(rp->stem), d = strspn(name + n + 1, "0123456789");
    const char *ext = name + n + 1 + d;
    return !strncmp(name, rp->stem, n) && name[n] == '-' && d &&
           (!strcmp(ext, ".tar") || !strcmp(ext, ".tar.zst"));
}

/* The set's numberings: its listed shards'. */
static int numberings(Repair *rp)
{
    size_t n = rp->before ? rp->nlisted : 0;
    rp->numberings = malloc((n ? n : 1) * sizeof *rp->numberings);
    if (!rp->numberings)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char t[512];
        unsigned long long k;
        if (shardcat_numbering(rp->listed[i].name, t, sizeof t, &k))
            continue;
        size_t j = 0;
        while (j < rp->nnumberings && strcmp(rp->numberings[j], t))
            j++;
        if (j == rp->nnumberings) /* a few numberings at most: a set has one */
            snprintf(rp->numberings[rp->nnumberings++], 512, "%s", t);
    }
    return 0;
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
    size_t n = rp->before ? shard_manifest_count(rp->before) : 0;
    if (!(rp->listed = malloc((n ? n : 1) * sizeof *rp->listed)))
        return -1;
    for (size_t i = 0; i < n; i++) {
        const ShardFileInfo *e = shard_manifest_shard(rp->before, i);
        rp->listed[rp->nlisted++] = (Named){base_name(e->url), e};
    }
    qsort(rp->listed, rp->nlisted, sizeof *rp->listed, by_name);
    if (numberings(rp))
        return -1;
    if (rp->before) {
        size_t nc = shard_manifest_class_count(rp->before);
        const char **names = malloc((nc ? nc : 1) * sizeof *names);
        for (size_t i = 0; names && i < nc; i++)
            names[i] = shard_manifest_class(rp->before, i);
        if (!names || (nc && shard_manifest_set_classes(rp->after, names, nc)) ||
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

/* The listed shards repair did not find: nothing to make them from. */
static void say_gone(Repair *rp)
{
    qsort(rp->seen, rp->nseen, sizeof *rp->seen, by_name);
    for (size_t i = 0; i < rp->nlisted; i++) {
        const char *name = rp->listed[i].name;
        char *rep = repaired_name(name);
        int found = find(rp->seen, rp->nseen, name) || (rep && find(rp->seen, rp->nseen,
                                                                     base_name(rep)));
        free(rep);
        if (found)
            continue;
        const char *url = rp->listed[i].entry->url;
        char buf[1024];
        if (strstr(url, "://")) /* a URL: as a log may show it */
            printf("%s: listed, gone: it cannot be made again without the source\n",
                   shown(url, buf, sizeof buf));
        else
            printf("%s%s: listed, gone: it cannot be made again without the source\n", rp->dir,
                   name);
        rp->unrepaired++;
    }
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
    if (!status)
        say_gone(&rp); /* listed, not there: nothing to build it from */
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
    free(rp.listed);
    free(rp.numberings);
    free(rp.seen);
    return status || rp.unrepaired ? 1 : 0;
}
