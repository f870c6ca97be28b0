/*
 * A pack's record read back (recordresume.h): the earlier run's plan against this one's, a
 * difference named down to the option or the shard; the shards it finished kept where the
 * store still holds them as their markers record; a set whose completion marker names its
 * manifest as it is, complete.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/digest.h"
#include "base/error.h"
#include "base/text.h"
#include "catalog/manifest_remote.h"
#include "pack/listing.h"
#include "pack/packplan.h"
#include "pack/packplandef.h"
#include "pack/record.h"
#include "pack/recordresume.h"
#include "remote/store.h"
#include "shard/file.h"
#include "shard/manifest.h"
#include "shard/verify.h"
#include "source/open.h"

#define PLAN_MAX ((size_t)1 << 30)

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


/* Whether a finished shard in a folder is still what its marker records: a file of its own
 * (not a link), its SHA-256 and count, its index and columns its own (read back: the cost of
 * reading the set once, against packing it again). In a bucket its listed size is taken:
 * reading every object back would cost what the resume saves. */
static int still_whole(const ShardPackPlan *p, const char *path, const ShardFileInfo *info)
{
    if (shard_store_can(path) & SHARD_STORE_COSTLY)
        return 1;
    uint64_t size;
    char msg[SHARD_ERROR_MAX];
    if (shard_store_stat(p->out, path, &size, msg) != 0) /* a file of its own, not a link */
        return 0;
    ShardVerifySettings vs;
    shard_verify_default_settings(&vs);
    vs.expect = info;
    vs.check_index = 1;
    vs.max_defects = 1;
    ShardVerifyResult r;
    return shard_verify(path, &vs, &r, NULL) == 0 && r.has_index && r.has_columns;
}

/* The record's plan of p, read: *present 0 when there is none to go by (no record, or a plan
 * cut on its way up); else compared with p's, a difference refused, naming it. 0, or an
 * error with msg. */
static int read_plan(ShardPackPlan *p, const char *url, ShardRemote *r, int *present,
                     char *msg)
{
    ShardBuf then = {0}, now = {0};
    *present = 0;
    int rc = shard_pack_record_plan_text(p, &now) ? shard_fail(msg, SHARD_ERR_NOMEM,
                                                                "out of memory") : 0;
    if (!rc) { /* read no more of the record's plan than this run's, and a margin: a larger
                  one differs, whatever it holds */
        size_t max = now.len + 4096 < PLAN_MAX ? now.len + 4096 : PLAN_MAX;
        rc = shard_source_slurp(url, r, &then, max, msg);
        if (rc == SHARD_ERR_NOT_FOUND) /* no earlier run of this set */
            rc = 0;
        else if (rc == SHARD_ERR_FORMAT && strstr(msg, "larger than"))
            rc = shard_fail(msg, SHARD_ERR_STATE, "cannot resume: the record's plan (%s) is "
                            "larger than this run's (%zu bytes): the input or the options "
                            "changed; run again without --resume to pack anew", url, now.len);
        else if (!rc) {
            size_t n = strlen(SHARD_PACK_PLAN_END); /* without it: cut going up, nothing after */
            *present = then.len >= n &&
                       !memcmp(then.data + then.len - n, SHARD_PACK_PLAN_END, n);
        }
    }
    char why[4096];
    if (!rc && *present &&
        plan_differs(p, (const char *)then.data, (const char *)now.data, why, sizeof why))
        rc = shard_fail(msg, SHARD_ERR_STATE, "cannot resume: %s; the record of the earlier run "
                        "(%s) says what it packed: run again without --resume to pack anew",
                        why, url);
    shard_buf_free(&then);
    shard_buf_free(&now);
    return rc;
}

int shard_pack_record_resume(ShardPackPlan *p, int *found, char *msg)
{
    *found = 0;
    char *dir = shard_pack_record_dir(p), *url = dir ? shard_pack_record_plan_url(p, dir) : NULL;
    ShardPackListing marks = {0}, out = {0};
    int rc = url ? 0 : shard_fail(msg, SHARD_ERR_NOMEM, "out of memory"), present = 0;
    ShardRemote *r = shard_store_remote(p->out);
    if (!rc)
        rc = read_plan(p, url, r, &present, msg);
    if (!present)
        goto done;
    char *first = rc ? NULL : shard_pack_numbered(p->pattern, 0);
    char *outdir = first ? shard_dir_of(first) : NULL;
    if (!rc && !outdir)
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = shard_pack_list(p, dir, &marks, msg);
    if (!rc)
        rc = shard_pack_list(p, outdir, &out, msg);
    free(first);
    free(outdir);
    size_t lo, hi;
    shard_pack_plan_part(p, &lo, &hi);
    if (!rc && !p->kept && !(p->kept = calloc(p->nshards + 1, sizeof *p->kept)))
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < marks.n && !rc; i++) {
        unsigned long long j;
        ShardFileInfo info;
        if (shard_pack_record_marker(marks.v[i].name, &j, &info) || j < lo || j >= hi || p->kept[j].url)
            continue;
        char *path = shard_pack_numbered(p->pattern, j), *ipath = path ? shard_index_path(path) : NULL;
        char *cpath = path ? shard_columns_path(path) : NULL;
        uint64_t size;
        if (!ipath || !cpath) {
            rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
        } else if (shard_pack_listing_size(&out, shard_base_name(path), &size) &&
                   size == info.filesize && shard_pack_listing_size(&out, shard_base_name(ipath), NULL) &&
                   shard_pack_listing_size(&out, shard_base_name(cpath), NULL) &&
                   still_whole(p, path, &info)) {
            info.url = path; /* the plan's now */
            path = NULL;
            p->kept[j] = info;
        }
        free(path);
        free(ipath);
        free(cpath);
    }
    if (!rc)
        *found = 1;
done:
    shard_pack_listing_free(&marks);
    shard_pack_listing_free(&out);
    free(url);
    free(dir);
    return rc;
}


/* The shards p keeps as the manifest at manifest_path lists them, when it lists p's
 * numbering whole; 0, or -1 when it does not. */
static int kept_from_manifest(ShardPackPlan *p, const char *manifest_path, ShardRemote *r)
{
    ShardManifest *m = NULL;
    ShardError e;
    size_t lo, hi;
    shard_pack_plan_part(p, &lo, &hi);
    if (shard_manifest_read_remote(&m, manifest_path, r, &e) ||
        shard_manifest_count(m) != hi - lo ||
        (!p->kept && !(p->kept = calloc(p->nshards + 1, sizeof *p->kept)))) {
        shard_manifest_free(&m);
        return -1;
    }
    int rc = 0;
    for (size_t j = lo; j < hi && !rc; j++) {
        const ShardFileInfo *e2 = shard_manifest_shard(m, j - lo);
        char *path = shard_pack_numbered(p->pattern, j);
        if (!path || strcmp(shard_base_name(e2->url), shard_base_name(path))) {
            free(path);
            rc = -1;
            break;
        }
        p->kept[j] = *e2;
        p->kept[j].url = path;
    }
    shard_manifest_free(&m);
    return rc;
}

int shard_pack_record_complete(ShardPackPlan *p, const char *manifest_path, int *complete,
                               char *msg)
{
    *complete = 0;
    char *dir = shard_pack_record_dir(p), *url = dir ? shard_pack_record_plan_url(p, dir) : NULL;
    int rc = url ? 0 : shard_fail(msg, SHARD_ERR_NOMEM, "out of memory"), present = 0;
    ShardRemote *r = shard_store_remote(p->out); /* the record's, beside the shards */
    ShardRemote *mr = p->remote; /* NULL: the defaults, for a manifest in a bucket */
    if (!rc)
        rc = read_plan(p, url, r, &present, msg); /* a changed plan refused, named */
    ShardPackListing marks = {0};
    if (!rc && present)
        rc = shard_pack_list(p, dir, &marks, msg);
    char hex[65] = "", *done = NULL;
    if (!rc && present && marks.n)
        shard_pack_record_sha256(p, manifest_path, hex);
    if (!rc && hex[0] && !(done = shard_pack_record_done_name(p, hex)))
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    if (!rc && done && shard_pack_listing_size(&marks, done, NULL) &&
        !kept_from_manifest(p, manifest_path, mr))
        *complete = 1;
    shard_pack_listing_free(&marks);
    free(done);
    free(url);
    free(dir);
    return rc;
}
