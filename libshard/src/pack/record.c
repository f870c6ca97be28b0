/*
 * A pack's record (record.h), in D/.STEM.pack/ beside the shards, a folder or a bucket's
 * prefix alike:
 *   plan (plan.part-I-of-N for a part)   written before the first shard: the pattern,
 *                          the options, the inputs' count and for each shard of the part
 *                          its inputs' count, bytes and digest (paths, names, sizes,
 *                          labels, keys) and its first input's name
 *   shard-J-N-SIZE-TAR-MD5-SHA256   an empty object per finished shard J, written after
 *                          the shard: its manifest entry in its name, so that one listing
 *                          tells a resume everything
 * A run that replaces a set removes the earlier record before anything else; every shard
 * the store holds after that is this plan's, whole (sinks make an object appear only
 * whole), so a resume keeps a shard with a marker at its recorded size and its index, and
 * writes the rest: the set is what an uninterrupted run writes, byte for byte.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/digest.h"
#include "base/dirs.h"
#include "base/error.h"
#include "base/text.h"
#include "base/url.h"
#include "pack/convention.h"
#include "pack/packplan.h"
#include "pack/packplandef.h"
#include "pack/record.h"
#include "remote/store.h"
#include "shard/file.h"
#include "shard/verify.h"
#include "sink/sink.h"
#include "source/open.h"

char *shard_pack_record_dir(const ShardPackPlan *p)
{
    ShardPackSettings t = p->s;
    t.pattern = p->pattern;
    t.nparts = t.part = 0;
    char *m = shard_pack_manifest_path(&t); /* D/STEM.json */
    if (!m)
        return NULL;
    const char *base = shard_base_name(m);
    size_t dir = (size_t)(base - m), n = strlen(base);
    char *out = malloc(dir + n + 16);
    if (out)
        snprintf(out, dir + n + 16, "%.*s.%.*s.pack/", (int)dir, m, (int)(n - 5), base);
    free(m);
    return out;
}

/* The record's object name (in dir) of p's plan. */
char *shard_pack_record_plan_url(const ShardPackPlan *p, const char *dir)
{
    char *out = NULL;
    int n = p->s.nparts ? asprintf(&out, "%splan.part-%llu-of-%llu", dir,
                                   (unsigned long long)p->s.part, (unsigned long long)p->s.nparts)
                        : asprintf(&out, "%splan", dir);
    return n < 0 ? NULL : out;
}

/* ---- the plan ------------------------------------------------------------------------ */

/* The digest of shard j's inputs: everything of each that goes into the shard. */
static int inputs_digest(const ShardPackPlan *p, size_t j, char hex[65])
{
    ShardDigests d;
    if (shard_digests_init(&d, 0, 1))
        return SHARD_ERR_NOMEM;
    for (size_t i = p->first[j]; i < p->first[j + 1]; i++) {
        const Input *x = &p->v[i];
        char num[64];
        /* a URL as it names its object whoever signs for it: a list signed anew resumes,
         * another version (a versionId, a generation) does not */
        char *path = shard_url_unsigned(x->path);
        if (!path) {
            char md5[33];
            shard_digests_final(&d, md5, hex); /* frees its state */
            return SHARD_ERR_NOMEM;
        }
        const char *parts[] = {path, x->rel, x->field, x->class_name, x->extra, x->key};
        for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
            shard_digests_update(&d, parts[k] ? parts[k] : "", strlen(parts[k] ? parts[k] : "") + 1);
        free(path);
        int n = snprintf(num, sizeof num, "%llu %lld", (unsigned long long)x->in.size,
                         (long long)x->in.label);
        shard_digests_update(&d, num, (size_t)n + 1);
    }
    char md5[33];
    shard_digests_final(&d, md5, hex);
    return 0;
}

/* p's plan as the record keeps it: a line per setting, a line per shard of the part, the
 * end. */
int shard_pack_record_plan_text(const ShardPackPlan *p, ShardBuf *b)
{
    char *opts = shard_pack_options_json(p);
    size_t lo, hi;
    shard_pack_plan_part(p, &lo, &hi);
    int rc = opts ? 0 : SHARD_ERR_NOMEM;
    if (!rc)
        rc = shard_buf_printf(b, "libshard pack record 1\npattern %s\npart %llu of %llu\n"
                                 "checksums %d\noptions %s\ninputs %zu\nshards %zu\n",
                              p->pattern, (unsigned long long)p->s.part,
                              (unsigned long long)(p->s.nparts ? p->s.nparts : 1),
                              p->s.checksums, opts, p->n, p->nshards);
    free(opts);
    for (size_t j = lo; j < hi && !rc; j++) {
        char hex[65];
        uint64_t bytes = 0;
        for (size_t i = p->first[j]; i < p->first[j + 1]; i++)
            bytes += p->v[i].in.size;
        json_t *rel = json_string(p->v[p->first[j]].rel);
        char *q = rel ? json_dumps(rel, JSON_ENCODE_ANY) : NULL;
        rc = q && !inputs_digest(p, j, hex)
                 ? shard_buf_printf(b, "shard %zu %zu %llu %s %s\n", j, p->first[j + 1] - p->first[j],
                                    (unsigned long long)bytes, hex, q)
                 : SHARD_ERR_NOMEM;
        free(q);
        json_decref(rel);
    }
    return rc ? rc : shard_buf_printf(b, "%s", SHARD_PACK_PLAN_END);
}

/* The record's place refused (the store's message in msg), as the record names it. */
static int not_ours(int rc, char *msg)
{
    if (rc == SHARD_ERR_INVALID) {
        char why[SHARD_ERROR_MAX];
        snprintf(why, sizeof why, "%s", msg);
        shard_fail(msg, rc, "%.1500s: the pack record's place, not the folder shardpack makes "
                   "there; remove it (or pack into another folder)", why);
    }
    return rc;
}

/* n bytes as the record's object url, its place made first, and made again when the last
 * part of a set to finish took it away meanwhile (the parts of a set share it). */
static int put_in_record(const ShardPackPlan *p, const char *dir, const char *url,
                         const void *data, size_t n, char *msg)
{
    ShardSinkSettings ss = {.sync = p->s.sync, .remote = shard_store_remote(p->out)};
    int rc = 0;
    for (int tries = 0; tries < 4; tries++) {
        /* checked whole before the run; a link put there since is refused */
        if ((rc = shard_store_room(p->out, dir, msg)))
            return not_ours(rc, msg);
        if ((rc = shard_sink_put(url, data, n, &ss, msg)) != SHARD_ERR_NOT_FOUND ||
            (shard_store_can(dir) & SHARD_STORE_COSTLY)) /* a bucket's prefix is never taken away */
            return rc;
    }
    return rc;
}

int shard_pack_record_start(const ShardPackPlan *p, char *msg)
{
    char *dir = shard_pack_record_dir(p), *url = dir ? shard_pack_record_plan_url(p, dir) : NULL;
    ShardBuf text = {0};
    int rc = url ? shard_pack_record_plan_text(p, &text) : SHARD_ERR_NOMEM;
    if (rc == SHARD_ERR_NOMEM)
        shard_fail(msg, rc, "out of memory");
    if (!rc)
        rc = put_in_record(p, dir, url, text.data, text.len, msg);
    shard_buf_free(&text);
    free(url);
    free(dir);
    return rc;
}

/* A marker's name parsed: shard j and its manifest entry (url unset); 0, or -1 for a name
 * that is not a marker. */
int shard_pack_record_marker(const char *name, unsigned long long *j, ShardFileInfo *info)
{
    unsigned long long n, size, tar;
    char md5[40], sha[80];
    int end = 0;
    if (sscanf(name, "shard-%llu-%llu-%llu-%llu-%39[0-9a-fnoe]-%79[0-9a-fnoe]%n", j, &n, &size,
               &tar, md5, sha, &end) != 6 || name[end])
        return -1;
    memset(info, 0, sizeof *info);
    info->nsamples = n;
    info->filesize = size;
    info->tarsize = tar;
    size_t lm = strlen(md5), ls = strlen(sha);
    if ((strcmp(md5, "none") && lm != 32) || (strcmp(sha, "none") && ls != 64))
        return -1;
    if (lm == 32)
        memcpy(info->md5, md5, 33);
    if (ls == 64)
        memcpy(info->sha256, sha, 65);
    return 0;
}

int shard_pack_record_done(const ShardPackPlan *p, size_t j, const ShardFileInfo *info, char *msg)
{
    char *dir = shard_pack_record_dir(p), *url = NULL;
    if (!dir || asprintf(&url, "%sshard-%zu-%llu-%llu-%llu-%s-%s", dir, j,
                         (unsigned long long)info->nsamples, (unsigned long long)info->filesize,
                         (unsigned long long)info->tarsize, info->md5[0] ? info->md5 : "none",
                         info->sha256[0] ? info->sha256 : "none") < 0) {
        free(dir);
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    }
    int rc = put_in_record(p, dir, url, "", 0, msg);
    free(url);
    free(dir);
    return rc;
}

char *shard_pack_record_done_name(const ShardPackPlan *p, const char *sha256)
{
    char *out = NULL;
    int n = p->s.nparts ? asprintf(&out, "done.part-%llu-of-%llu-%s", (unsigned long long)p->s.part,
                                   (unsigned long long)p->s.nparts, sha256)
                        : asprintf(&out, "done-%s", sha256);
    return n < 0 ? NULL : out;
}

/* Whether name is a set's or a part's completion marker (shard_pack_record_done_name); its
 * part and part count into *a and *b (0 and 0 for a whole set's). */
static int done_marker(const char *name, unsigned long long *a, unsigned long long *b)
{
    int end = 0;
    char sha[80];
    *a = *b = 0;
    if (sscanf(name, "done-%79[0-9a-f]%n", sha, &end) != 1 || name[end] || strlen(sha) != 64)
        end = 0;
    if (!end && (sscanf(name, "done.part-%llu-of-%llu-%79[0-9a-f]%n", a, b, sha, &end) != 3 ||
                 name[end] || strlen(sha) != 64))
        end = 0;
    return end != 0;
}

/* Whether name is one the record writes: its plan, a part's plan, a shard's marker, a
 * completion marker. */
static int record_name(const char *name)
{
    unsigned long long j, a, b;
    ShardFileInfo info;
    int end = 0;
    return !strcmp(name, "plan") || !shard_pack_record_marker(name, &j, &info) ||
           (sscanf(name, "plan.part-%llu-of-%llu%n", &a, &b, &end) == 2 && !name[end]) ||
           done_marker(name, &a, &b);
}

/* Whether name is a sink's temporary (".NAME.tmp-RANDOM", sink/filesink.c) of a name the
 * record writes: a killed run's, or a live writer's. */
static int record_temporary(const char *name)
{
    const char *tmp = NULL;
    for (const char *q = name; (q = strstr(q, ".tmp-")); q++)
        tmp = q;
    if (name[0] != '.' || !tmp)
        return 0;
    char *base = strndup(name + 1, (size_t)(tmp - name - 1));
    int ours = base && record_name(base);
    free(base);
    return ours;
}

int shard_pack_record_folder(const ShardPackPlan *p, const char *dir, int *fdp, char *msg)
{
    /* a bucket's objects: no links, no devices; names are checked as listed */
    int fd, rc = shard_store_hold(p->out, dir, &fd, msg);
    *fdp = -1;
    if (rc || fd < 0)
        return not_ours(rc, msg);
    struct stat st;
    DIR *d = fdopendir(dup(fd));
    if (d) /* a dup shares its offset with fd: from the start */
        rewinddir(d);
    rc = d ? 0 : shard_fail(msg, shard_errno_code(errno), "%s: cannot list: %s", dir,
                            strerror(errno));
    for (struct dirent *e; !rc && (e = readdir(d));) {
        const char *name = e->d_name;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        int regular = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
        if (!regular || !(record_name(name) || record_temporary(name)))
            rc = shard_fail(msg, SHARD_ERR_INVALID,
                            "%s%s: %s in the pack record's folder, which holds only what "
                            "shardpack writes there (plan, shard-... markers): nothing in it is "
                            "followed or removed; take it out of the folder (or pack into "
                            "another folder)",
                            dir, name, regular ? "a file shardpack did not write"
                                                : shard_file_kind(st.st_mode));
    }
    if (d)
        closedir(d);
    if (rc)
        close(fd);
    else
        *fdp = fd;
    return rc;
}

/* Whether a clear of p's record drops name, one the record writes: all of them for a whole
 * run; for a part, the whole run's plan, this part's plan, its shards' markers and its
 * completion marker. With markers_only, the plans stay. */
static int dropped(const ShardPackPlan *p, const char *name, int markers_only)
{
    unsigned long long j, a, b;
    ShardFileInfo info;
    size_t lo, hi;
    int plan = !strcmp(name, "plan") || !strncmp(name, "plan.part-", 10);
    if (markers_only && plan)
        return 0;
    if (!p->s.nparts || !strcmp(name, "plan"))
        return 1;
    shard_pack_plan_part(p, &lo, &hi);
    char *mine = shard_pack_record_plan_url(p, "");
    int drop = (mine && !strcmp(name, mine)) ||
               (!shard_pack_record_marker(name, &j, &info) && j >= lo && j < hi) ||
               (done_marker(name, &a, &b) && a == p->s.part && b == p->s.nparts);
    free(mine);
    return drop;
}

/* The record in a bucket cleared: its objects dropped() takes; any other object under its
 * prefix refused, naming it, and nothing removed. */
static int clear_bucket(const ShardPackPlan *p, const char *dir, int markers_only, char *msg)
{
    ShardPackListing l;
    int rc = shard_pack_list(p, dir, &l, msg);
    for (size_t i = 0; i < l.n && !rc; i++)
        if (!record_name(l.v[i].name))
            rc = shard_fail(msg, SHARD_ERR_INVALID,
                            "%s%s: an object shardpack did not write, under the pack record's "
                            "prefix, which holds only what shardpack writes there (plan, "
                            "shard-... markers): nothing was removed; take it away (or pack "
                            "under another prefix)", dir, l.v[i].name);
    for (size_t i = 0; i < l.n && !rc; i++) {
        char *url = NULL;
        if (!dropped(p, l.v[i].name, markers_only))
            continue;
        rc = asprintf(&url, "%s%s", dir, l.v[i].name) < 0
                 ? shard_fail(msg, SHARD_ERR_NOMEM, "out of memory")
                 : shard_store_remove(p->out, url, msg);
        free(url);
    }
    shard_pack_listing_free(&l);
    return rc;
}

/* Removes from the record's folder fd the temporaries that no live writer holds and, with p,
 * the names dropped() takes; relative to fd: nothing outside the folder can be reached. */
static int clear_folder(int fd, const char *dir, const ShardPackPlan *p, int markers_only,
                        char *msg)
{
    DIR *d = fdopendir(dup(fd));
    if (!d)
        return shard_fail(msg, shard_errno_code(errno), "%s: cannot list: %s", dir, strerror(errno));
    rewinddir(d); /* a dup shares its offset with fd: from the start */
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        const char *name = e->d_name;
        if (record_temporary(name)) {
            int t = openat(fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            if (t >= 0 && flock(t, LOCK_EX | LOCK_NB) == 0)
                unlinkat(fd, name, 0); /* nobody writes it: a killed writer's */
            if (t >= 0)
                close(t);
        } else if (p && record_name(name) && dropped(p, name, markers_only) &&
                   unlinkat(fd, name, 0) != 0 &&
                   errno != ENOENT) {
            rc = shard_fail(msg, shard_errno_code(errno), "%s%s: cannot remove: %s", dir, name,
                            strerror(errno));
        }
    }
    closedir(d);
    return rc;
}

int shard_pack_record_check(const ShardPackPlan *p, char *msg)
{
    char *dir = shard_pack_record_dir(p);
    if (!dir)
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    int fd, rc = shard_pack_record_folder(p, dir, &fd, msg);
    if (!rc && fd >= 0) /* markers a killed run was writing */
        rc = clear_folder(fd, dir, NULL, 0, msg);
    if (fd >= 0)
        close(fd);
    free(dir);
    return rc;
}

/* Clears p's record: all of it, or its markers alone (markers_only: the plans kept). */
static int clear(const ShardPackPlan *p, int markers_only, char *msg)
{
    char *dir = shard_pack_record_dir(p);
    if (!dir)
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    int fd, rc = shard_pack_record_folder(p, dir, &fd, msg);
    if (!rc && fd >= 0) { /* a folder: removals relative to it */
        rc = clear_folder(fd, dir, p, markers_only, msg);
        close(fd);
        if (!rc && !markers_only) /* gone when nothing of another part is left */
            shard_store_tidy(p->out, dir);
    } else if (!rc) { /* objects by name, as listed (no folder: nothing listed) */
        rc = clear_bucket(p, dir, markers_only, msg);
    }
    free(dir);
    return rc;
}

int shard_pack_record_clear(const ShardPackPlan *p, char *msg) { return clear(p, 0, msg); }

void shard_pack_record_sha256(const ShardPackPlan *p, const char *url, char hex[65])
{
    ShardBuf b = {0};
    char msg[SHARD_ERROR_MAX], md5[33];
    ShardDigests d;
    ShardStore *st;
    hex[0] = 0;
    int rc = shard_store_open(&st, url, p->remote, msg);
    if (!rc && !shard_source_slurp(url, shard_store_remote(st), &b, (size_t)256 << 20, msg) &&
        !shard_digests_init(&d, 0, 1)) {
        shard_digests_update(&d, b.data, b.len);
        shard_digests_final(&d, md5, hex);
    }
    shard_store_free(&st);
    shard_buf_free(&b);
}

int shard_pack_record_finish(const ShardPackPlan *p, const char *manifest_path, char *msg)
{
    char manifest_sha256[65];
    shard_pack_record_sha256(p, manifest_path, manifest_sha256);
    if (!manifest_sha256[0])
        return shard_fail(msg, SHARD_ERR_IO, "%s: cannot be read back", manifest_path);
    int rc = clear(p, 1, msg);
    char *dir = rc ? NULL : shard_pack_record_dir(p), *name = NULL, *url = NULL;
    if (!rc && (!dir || !(name = shard_pack_record_done_name(p, manifest_sha256)) ||
                asprintf(&url, "%s%s", dir, name) < 0)) {
        url = NULL;
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    }
    if (!rc)
        rc = put_in_record(p, dir, url, "", 0, msg);
    free(url);
    free(name);
    free(dir);
    return rc;
}
