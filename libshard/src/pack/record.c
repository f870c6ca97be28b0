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
#include "shard/file.h"
#include "shard/verify.h"
#include "sink/sink.h"
#include "source/open.h"

#define PLAN_MAX ((size_t)1 << 30)

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
static char *plan_url(const ShardPackPlan *p, const char *dir)
{
    char *out = NULL;
    int n = p->s.nparts ? asprintf(&out, "%splan.part-%llu-of-%llu", dir,
                                   (unsigned long long)p->s.part, (unsigned long long)p->s.nparts)
                        : asprintf(&out, "%splan", dir);
    return n < 0 ? NULL : out;
}

static ShardRemote *remote_for(ShardPackPlan *p, const char *url, char *msg)
{
    return shard_sink_in_bucket(url) ? shard_pack_plan_remote(p, msg) : NULL;
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

/* The plan's last line: a plan without it was cut on its way up (a store that keeps what
 * came of a killed upload, as s3rver does), before any shard of its run was written. */
#define PLAN_END "end\n"

/* p's plan as the record keeps it: a line per setting, a line per shard of the part, the
 * end. */
static int plan_text(const ShardPackPlan *p, ShardBuf *b)
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
    return rc ? rc : shard_buf_printf(b, "%s", PLAN_END);
}

/* The next line of text at *pos (without its newline), into line; 0 at the end. */
static int next_line(const char *text, size_t *pos, char *line, size_t size)
{
    if (!text[*pos])
        return 0;
    size_t n = strcspn(text + *pos, "\n");
    snprintf(line, size, "%.*s", (int)(n < size ? n : size - 1), text + *pos);
    *pos += n + (text[*pos + n] == '\n');
    return 1;
}

/* The options that differ between two options lines' JSON, "name: A then, B now; ...". */
static void options_differ(const char *then, const char *now, char *out, size_t size)
{
    json_t *a = json_loads(then, 0, NULL), *b = json_loads(now, 0, NULL);
    const char *k;
    json_t *v;
    size_t n = 0;
    out[0] = 0;
    json_object_foreach(b, k, v) {
        json_t *w = json_object_get(a, k);
        if (w && json_equal(v, w))
            continue;
        char *sa = w ? json_dumps(w, JSON_ENCODE_ANY) : NULL, *sb = json_dumps(v, JSON_ENCODE_ANY);
        n += (size_t)snprintf(out + n, n < size ? size - n : 0, "%s%s %s then, %s now",
                              n ? "; " : "", k, sa ? sa : "unset", sb ? sb : "?");
        free(sa);
        free(sb);
        if (n >= size)
            break;
    }
    json_decref(a);
    json_decref(b);
}

/* What differs between the record's plan and p's, in words, into why; 0 when they agree. */
static int plan_differs(const ShardPackPlan *p, const char *then, const char *now, char *why,
                        size_t size)
{
    size_t a = 0, b = 0;
    char la[8192], lb[8192];
    for (;;) {
        int ha = next_line(then, &a, la, sizeof la), hb = next_line(now, &b, lb, sizeof lb);
        if (!ha && !hb)
            return 0;
        if (ha && hb && !strcmp(la, lb))
            continue;
        if (!ha || !hb) {
            snprintf(why, size, "the plan has %s shards than the record's (the input changed)",
                     ha ? "fewer" : "more");
        } else if (!strncmp(la, "options ", 8) && !strncmp(lb, "options ", 8)) {
            char d[2048];
            options_differ(la + 8, lb + 8, d, sizeof d);
            snprintf(why, size, "the options changed: %s", d);
        } else if (!strncmp(la, "shard ", 6) && !strncmp(lb, "shard ", 6)) {
            unsigned long long j, na, nb, ba, bb;
            char fa[4200] = "", fb[4200] = "";
            sscanf(la, "shard %llu %llu %llu %*s %4199[^\n]", &j, &na, &ba, fa);
            sscanf(lb, "shard %*u %llu %llu %*s %4199[^\n]", &nb, &bb, fb);
            char *url = shard_pack_numbered(p->pattern, j);
            if (na == nb && ba == bb && !strcmp(fa, fb)) /* the same names and sizes */
                snprintf(why, size, "the input changed: shard %llu (%s) holds %llu files from "
                                    "%s (%llu bytes) as it did, but their paths, URLs (signing "
                                    "aside: a new version of an object), labels or extra "
                                    "fields differ", j, url ? url : "?", na, fa, ba);
            else
                snprintf(why, size, "the input changed: shard %llu (%s) held %llu files from "
                                    "%s (%llu bytes) then, %llu files from %s (%llu bytes) now",
                         j, url ? url : "?", na, fa, ba, nb, fb, bb);
            free(url);
        } else {
            char *sa = strchr(la, ' '), *sb = strchr(lb, ' ');
            snprintf(why, size, "%.*s: %.1500s then, %.1500s now", (int)(sa ? sa - la : 0), la,
                     sa ? sa + 1 : la, sb ? sb + 1 : lb);
        }
        return 1;
    }
}

/* n bytes as the record's object url: in a folder, made first, and made again when the
 * last part of a set to finish took it away meanwhile (the parts of a set share it). */
static int put_in_record(const char *dir, const char *url, const void *data, size_t n,
                         const ShardSinkSettings *ss, char *msg)
{
    if (shard_sink_in_bucket(dir))
        return shard_sink_put(url, data, n, ss, msg);
    const char *local = shard_source_local_path(dir);
    int rc = 0;
    for (int tries = 0; tries < 4; tries++) {
        if (mkdir(local, 0777) != 0 && errno != EEXIST)
            return shard_fail(msg, shard_errno_code(errno), "%s: cannot make the pack's record "
                              "folder: %s", dir, strerror(errno));
        struct stat st; /* checked whole before the run; a link put there since is refused */
        if (lstat(local, &st) == 0 && !S_ISDIR(st.st_mode))
            return shard_fail(msg, SHARD_ERR_INVALID, "%s: the pack record's place holds %s, "
                              "not the folder shardpack makes there: it is not followed; remove "
                              "it (or pack into another folder)", dir, shard_file_kind(st.st_mode));
        if (!(rc = shard_sink_put(url, data, n, ss, msg)) || stat(local, &st) == 0)
            return rc;
    }
    return rc;
}

int shard_pack_record_start(ShardPackPlan *p, char *msg)
{
    char *dir = shard_pack_record_dir(p), *url = dir ? plan_url(p, dir) : NULL;
    ShardBuf text = {0};
    int rc = url ? plan_text(p, &text) : SHARD_ERR_NOMEM;
    if (rc == SHARD_ERR_NOMEM)
        shard_fail(msg, rc, "out of memory");
    ShardSinkSettings ss = {.sync = p->s.sync};
    if (!rc && shard_sink_in_bucket(dir) && !(ss.remote = remote_for(p, dir, msg)))
        rc = SHARD_ERR_NOMEM;
    if (!rc)
        rc = put_in_record(dir, url, text.data, text.len, &ss, msg);
    shard_buf_free(&text);
    free(url);
    free(dir);
    return rc;
}

/* A marker's name parsed: shard j and its manifest entry (url unset); 0, or -1 for a name
 * that is not a marker. */
static int parse_marker(const char *name, unsigned long long *j, ShardFileInfo *info)
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
    int rc = 0;
    ShardSinkSettings ss = {.sync = p->s.sync};
    if (shard_sink_in_bucket(dir) && !(ss.remote = remote_for((ShardPackPlan *)p, dir, msg)))
        rc = SHARD_ERR_NOMEM;
    if (!rc)
        rc = put_in_record(dir, url, "", 0, &ss, msg);
    free(url);
    free(dir);
    return rc;
}

/* Whether name is one the record writes: its plan, a part's plan, a shard's marker. */
static int record_name(const char *name)
{
    unsigned long long j, a, b;
    ShardFileInfo info;
    int end = 0;
    return !strcmp(name, "plan") || !parse_marker(name, &j, &info) ||
           (sscanf(name, "plan.part-%llu-of-%llu%n", &a, &b, &end) == 2 && !name[end]);
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

int shard_pack_record_folder(const char *dir, int *fdp, char *msg)
{
    *fdp = -1;
    if (shard_sink_in_bucket(dir))
        return 0; /* objects: no links, no devices; names are checked as listed */
    char path[4096];
    const char *local = shard_source_local_path(dir);
    size_t n = strlen(local);
    while (n > 1 && local[n - 1] == '/') /* "D/.STEM.pack/" would follow a link */
        n--;
    if (n >= sizeof path)
        return shard_fail(msg, SHARD_ERR_INVALID, "%s: path too long", dir);
    memcpy(path, local, n);
    path[n] = 0;
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0
                               : shard_fail(msg, shard_errno_code(errno), "%s: %s", path,
                                            strerror(errno));
    int fd = S_ISDIR(st.st_mode) ? open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (fd < 0)
        return shard_fail(msg, SHARD_ERR_INVALID,
                          "%s: the pack record's place holds %s, not the folder shardpack makes "
                          "there: it is neither followed nor cleared; remove it (or pack into "
                          "another folder)", path, shard_file_kind(st.st_mode));
    DIR *d = fdopendir(dup(fd));
    if (d) /* a dup shares its offset with fd: from the start */
        rewinddir(d);
    int rc = d ? 0 : shard_fail(msg, shard_errno_code(errno), "%s: cannot list: %s", path,
                                strerror(errno));
    for (struct dirent *e; !rc && (e = readdir(d));) {
        const char *name = e->d_name;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        int regular = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
        if (!regular || !(record_name(name) || record_temporary(name)))
            rc = shard_fail(msg, SHARD_ERR_INVALID,
                            "%s/%s: %s in the pack record's folder, which holds only what "
                            "shardpack writes there (plan, shard-... markers): nothing in it is "
                            "followed or removed; take it out of the folder (or pack into "
                            "another folder)",
                            path, name, regular ? "a file shardpack did not write"
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
 * run; for a part, the whole run's plan, this part's plan and its shards' markers. */
static int dropped(const ShardPackPlan *p, const char *name)
{
    unsigned long long j;
    ShardFileInfo info;
    size_t lo, hi;
    if (!p->s.nparts || !strcmp(name, "plan"))
        return 1;
    shard_pack_plan_part(p, &lo, &hi);
    char *mine = plan_url(p, "");
    int drop = (mine && !strcmp(name, mine)) ||
               (!parse_marker(name, &j, &info) && j >= lo && j < hi);
    free(mine);
    return drop;
}

/* The record in a bucket cleared: its objects dropped() takes; any other object under its
 * prefix refused, naming it, and nothing removed. */
static int clear_bucket(ShardPackPlan *p, const char *dir, char *msg)
{
    ShardPackListing l;
    int rc = shard_pack_list(p, dir, &l, msg);
    ShardRemote *r = rc ? NULL : remote_for(p, dir, msg);
    if (!rc && !r)
        rc = SHARD_ERR_NOMEM;
    for (size_t i = 0; i < l.n && !rc; i++)
        if (!record_name(l.v[i].name))
            rc = shard_fail(msg, SHARD_ERR_INVALID,
                            "%s%s: an object shardpack did not write, under the pack record's "
                            "prefix, which holds only what shardpack writes there (plan, "
                            "shard-... markers): nothing was removed; take it away (or pack "
                            "under another prefix)", dir, l.v[i].name);
    for (size_t i = 0; i < l.n && !rc; i++) {
        char *url = NULL;
        if (!dropped(p, l.v[i].name))
            continue;
        rc = asprintf(&url, "%s%s", dir, l.v[i].name) < 0
                 ? shard_fail(msg, SHARD_ERR_NOMEM, "out of memory")
                 : shard_sink_remove(url, r, msg);
        free(url);
    }
    shard_pack_listing_free(&l);
    return rc;
}

/* Removes from the record's folder fd the temporaries that no live writer holds and, with p,
 * the names dropped() takes; relative to fd: nothing outside the folder can be reached. */
static int clear_folder(int fd, const char *dir, const ShardPackPlan *p, char *msg)
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
        } else if (p && record_name(name) && dropped(p, name) && unlinkat(fd, name, 0) != 0 &&
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
    int fd, rc = shard_pack_record_folder(dir, &fd, msg);
    if (!rc && fd >= 0) /* markers a killed run was writing */
        rc = clear_folder(fd, dir, NULL, msg);
    if (fd >= 0)
        close(fd);
    free(dir);
    return rc;
}

int shard_pack_record_clear(ShardPackPlan *p, char *msg)
{
    char *dir = shard_pack_record_dir(p);
    if (!dir)
        return shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    int fd, rc = shard_pack_record_folder(dir, &fd, msg);
    if (!rc && fd >= 0) {
        rc = clear_folder(fd, dir, p, msg);
        close(fd);
        if (!rc) /* gone when nothing of another part is left */
            rmdir(shard_source_local_path(dir));
    } else if (!rc && shard_sink_in_bucket(dir)) {
        rc = clear_bucket(p, dir, msg);
    }
    free(dir);
    return rc;
}

/* Whether a finished shard in a folder is still what its marker records: a file of its own
 * (not a link), its SHA-256 and count, and its index its own (read back: the cost of
 * reading the set once, against packing it again). In a bucket its listed size is taken:
 * reading every object back would cost what the resume saves. */
static int still_whole(const char *path, const ShardFileInfo *info)
{
    if (shard_sink_in_bucket(path))
        return 1;
    struct stat st;
    if (lstat(shard_source_local_path(path), &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    ShardVerifySettings vs;
    shard_verify_default_settings(&vs);
    vs.expect = info;
    vs.check_index = 1;
    vs.max_defects = 1;
    ShardVerifyResult r;
    return shard_verify(path, &vs, &r, NULL) == 0 && r.has_index;
}

int shard_pack_record_resume(ShardPackPlan *p, int *found, char *msg)
{
    *found = 0;
    char *dir = shard_pack_record_dir(p), *url = dir ? plan_url(p, dir) : NULL;
    ShardBuf then = {0}, now = {0};
    ShardPackListing marks = {0}, out = {0};
    int rc = url ? 0 : shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    ShardRemote *r = rc ? NULL : remote_for(p, url, msg);
    if (!rc && shard_sink_in_bucket(url) && !r)
        rc = SHARD_ERR_NOMEM;
    if (!rc)
        rc = plan_text(p, &now) ? shard_fail(msg, SHARD_ERR_NOMEM, "out of memory") : 0;
    if (!rc) { /* read no more of the record's plan than this run's, and a margin: a larger
                  one differs, whatever it holds */
        size_t max = now.len + 4096 < PLAN_MAX ? now.len + 4096 : PLAN_MAX;
        rc = shard_source_slurp(url, r, &then, max, msg);
        if (rc == SHARD_ERR_NOT_FOUND) { /* no earlier run of this set to resume */
            rc = 0;
            goto done;
        }
        if (rc == SHARD_ERR_FORMAT && strstr(msg, "larger than"))
            rc = shard_fail(msg, SHARD_ERR_STATE, "cannot resume: the record's plan (%s) is "
                            "larger than this run's (%zu bytes): the input or the options "
                            "changed; run again without --resume to pack anew", url, now.len);
        size_t n = strlen(PLAN_END);
        if (!rc && (then.len < n || memcmp(then.data + then.len - n, PLAN_END, n)))
            goto done; /* its plan was cut going up: nothing of that run came after it */
    }
    char why[4096];
    if (!rc && plan_differs(p, (const char *)then.data, (const char *)now.data, why, sizeof why))
        rc = shard_fail(msg, SHARD_ERR_STATE, "cannot resume: %s; the record of the earlier run "
                        "(%s) says what it packed: run again without --resume to pack anew",
                        why, url);
    char *first = rc ? NULL : shard_pack_numbered(p->pattern, 0);
    char *outdir = first ? shard_dir_of(first) : NULL, *slash = NULL;
    if (!rc && (!outdir || asprintf(&slash, "%s/", outdir) < 0))
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = shard_pack_list(p, dir, &marks, msg);
    if (!rc)
        rc = shard_pack_list(p, shard_sink_in_bucket(slash) ? slash : outdir, &out, msg);
    free(first);
    free(outdir);
    free(slash);
    size_t lo, hi;
    shard_pack_plan_part(p, &lo, &hi);
    if (!rc && !p->kept && !(p->kept = calloc(p->nshards + 1, sizeof *p->kept)))
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < marks.n && !rc; i++) {
        unsigned long long j;
        ShardFileInfo info;
        if (parse_marker(marks.v[i].name, &j, &info) || j < lo || j >= hi || p->kept[j].url)
            continue;
        char *path = shard_pack_numbered(p->pattern, j), *ipath = path ? shard_index_path(path) : NULL;
        uint64_t size;
        if (!ipath) {
            rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
        } else if (shard_pack_listing_size(&out, shard_base_name(path), &size) &&
                   size == info.filesize && shard_pack_listing_size(&out, shard_base_name(ipath), NULL) &&
                   still_whole(path, &info)) {
            info.url = path; /* the plan's now */
            path = NULL;
            p->kept[j] = info;
        }
        free(path);
        free(ipath);
    }
    if (!rc)
        *found = 1;
done:
    shard_pack_listing_free(&marks);
    shard_pack_listing_free(&out);
    shard_buf_free(&then);
    shard_buf_free(&now);
    free(url);
    free(dir);
    return rc;
}
