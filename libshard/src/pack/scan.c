/*
 * The pack plan's input scan (shard/pack.h, shard_pack_plan_scan): an ImageFolder tree or a
 * list file into the plan's inputs and class names, in the order formats/shard.md section 1
 * gives. It lives in the library so that shardpack, a Python packer and the workers of a
 * cluster all plan from the same list of inputs.
 *
 * A bad input is reported through the callback and the scan goes on, so that one run names
 * every bad file; the scan then fails with the first one unless each was left out.
 *
 * A list may name remote files (http, https, gs, s3 URLs). Their sizes, which the plan cuts
 * shards by, are asked for by `inflight` threads at once (a HEAD request each, or GCS's
 * one-byte range), through the plan's ShardRemote with its retries.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/text.h"
#include "base/thread.h"
#include "pack/plan.h"
#include "shard/names.h"
#include "shard/pack.h"
#include "source/open.h"
#include "source/source.h"
#include "source/url.h"

static const char *const image_exts[] = {"jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif", "tiff", "webp"};

typedef struct Item {
    char *path;  /* to open */
    char *rel;   /* as the dataset names it */
    char *field; /* lower-cased extension */
    char *extra; /* JSON object text, or NULL */
    long label;
    size_t class_index; /* into Scan.classes when label >= 0 and named */
    int named;
    int remote;   /* a URL: its size is asked for after the list is read */
    int dropped;  /* a remote file found bad: not added to the plan */
    char *failed; /* why a remote file's size could not be had */
    uint64_t size;
} Item;

typedef struct Scan {
    ShardPackPlan *plan;
    const ShardPackScanCallbacks *cb;
    Item *v;
    size_t n, cap;
    char **classes;
    size_t nclasses;
    uint64_t ignored;
    int nomem;
    int failed;               /* a bad input was not left out */
    char first[SHARD_ERROR_MAX]; /* the first such, for the error */
    int first_code;
} Scan;

static const char *image_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name)
        return NULL;
    for (size_t i = 0; i < sizeof image_exts / sizeof *image_exts; i++)
        if (!strcasecmp(dot + 1, image_exts[i]))
            return dot + 1;
    return NULL;
}

static char *dup_or_flag(Scan *c, const char *s)
{
    char *p = shard_strdup(s);
    if (!p)
        c->nomem = 1;
    return p;
}

static char *join_path(Scan *c, const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (!p) {
        c->nomem = 1;
        return NULL;
    }
    snprintf(p, n, "%s%s%s", a, (*a && a[strlen(a) - 1] != '/') ? "/" : "", b);
    return p;
}

static void scan_free(Scan *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].path);
        free(c->v[i].rel);
        free(c->v[i].field);
        free(c->v[i].extra);
        free(c->v[i].failed);
    }
    free(c->v);
    for (size_t i = 0; i < c->nclasses; i++)
        free(c->classes[i]);
    free(c->classes);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in a folder, sorted bytewise, hidden entries left out; NULL with *err set (0 when
 * out of memory, flagged). */
static char **list_dir(Scan *c, const char *dir, size_t *count, int *err)
{
    *count = 0;
    *err = 0;
    DIR *d = opendir(dir);
    if (!d) {
        *err = errno;
        return NULL;
    }
    size_t n = 0, cap = 64;
    char **v = malloc(cap * sizeof *v);
    struct dirent *e;
    while (v && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (shard_array_grow(&v, &cap, n + 1, sizeof *v, 64))
            goto oom;
        if (!(v[n] = shard_strdup(e->d_name)))
            goto oom;
        n++;
    }
    closedir(d);
    if (!v) {
        c->nomem = 1;
        return NULL;
    }
    qsort(v, n, sizeof *v, name_cmp);
    *count = n;
    return v;
oom:
    closedir(d);
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
    c->nomem = 1;
    return NULL;
}

/* A bad input: left out when the callback says so, else remembered as the scan's error. */
static void scan_bad(Scan *c, const char *path, ShardPackBad reason, const char *what)
{
    if (c->cb && c->cb->on_bad && c->cb->on_bad(c->cb->cookie, path, reason, what))
        return;
    if (!c->failed) {
        c->first_code = reason == SHARD_PACK_UNREADABLE ? SHARD_ERR_IO : SHARD_ERR_FORMAT;
        shard_fail(c->first, c->first_code, "%s: %s", path, what);
    }
    c->failed = 1;
}

static void add_file(Scan *c, const char *path, const char *rel, const char *ext, long label,
                     long class_index, const char *extra)
{
    if (!shard_utf8_valid(path, strlen(path))) {
        scan_bad(c, path, SHARD_PACK_BAD_NAME, "file name is not valid UTF-8");
        return;
    }
    int remote = shard_url_is_remote(path);
    struct stat st;
    memset(&st, 0, sizeof st);
    if (remote) {
        st.st_mode = S_IFREG;
        st.st_size = 1; /* asked for later */
    } else if (stat(path, &st) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot stat: %s", strerror(errno));
        scan_bad(c, path, SHARD_PACK_UNREADABLE, msg);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        scan_bad(c, path, SHARD_PACK_UNREADABLE, "not a regular file");
        return;
    }
    if (st.st_size == 0) {
        scan_bad(c, path, SHARD_PACK_EMPTY, "zero-byte file");
        return;
    }
    if (shard_array_grow(&c->v, &c->cap, c->n + 1, sizeof *c->v, 1024)) {
        c->nomem = 1;
        return;
    }
    Item *x = &c->v[c->n];
    memset(x, 0, sizeof *x);
    x->path = dup_or_flag(c, path);
    x->rel = dup_or_flag(c, rel);
    x->field = dup_or_flag(c, ext);
    x->extra = extra ? dup_or_flag(c, extra) : NULL;
    c->n++; /* freed with the rest even when a copy failed */
    if (c->nomem)
        return;
    for (char *p = x->field; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    x->label = label;
    x->remote = remote;
    x->named = class_index >= 0;
    x->class_index = class_index >= 0 ? (size_t)class_index : 0;
    x->size = (uint64_t)st.st_size;
}

/* Walks a class folder depth-first in sorted order, following links as ImageFolder does;
 * depth is bounded so that a link loop ends. */
static void walk(Scan *c, const char *root, const char *rel, long label, int depth)
{
    char *dir = join_path(c, root, rel);
    if (!dir)
        return;
    size_t n;
    int err;
    char **names = list_dir(c, dir, &n, &err);
    if (!names) {
        if (err) {
            char msg[256];
            snprintf(msg, sizeof msg, "cannot read folder: %s", strerror(err));
            scan_bad(c, dir, SHARD_PACK_UNREADABLE, msg);
        }
        free(dir);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char *r = c->nomem ? NULL : join_path(c, rel, names[i]);
        char *full = r ? join_path(c, root, r) : NULL;
        struct stat st;
        if (!full) {
            /* out of memory: flagged, the rest is only freed */
        } else if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (depth < 64)
                walk(c, root, r, label, depth + 1);
        } else {
            const char *ext = image_ext(names[i]);
            if (ext)
                add_file(c, full, r, ext, label, label, NULL);
            else
                c->ignored++;
        }
        free(r);
        free(full);
        free(names[i]);
    }
    free(names);
    free(dir);
}

static int item_cmp(const void *a, const void *b)
{
    return strcmp(((const Item *)a)->rel, ((const Item *)b)->rel);
}

static int scan_folder(Scan *c, const char *root, ShardError *err)
{
    size_t n;
    int e;
    char **names = list_dir(c, root, &n, &e);
    if (!names) {
        if (!e)
            return SHARD_ERR_NOMEM;
        char msg[SHARD_ERROR_MAX];
        int code = shard_fail(msg, shard_errno_code(e), "%s: cannot read folder: %s", root, strerror(e));
        return shard_report(err, code, msg);
    }
    c->classes = calloc(n ? n : 1, sizeof *c->classes);
    if (!c->classes)
        c->nomem = 1;
    for (size_t i = 0; i < n; i++) {
        char *full = c->nomem ? NULL : join_path(c, root, names[i]);
        struct stat st;
        if (full && stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (!shard_utf8_valid(names[i], strlen(names[i]))) {
                scan_bad(c, full, SHARD_PACK_BAD_NAME, "class folder name is not valid UTF-8");
                free(names[i]);
            } else {
                c->classes[c->nclasses++] = names[i];
            }
        } else {
            if (full)
                c->ignored++;
            free(names[i]);
        }
        free(full);
    }
    free(names);
    if (c->nomem)
        return SHARD_ERR_NOMEM;
    if (c->nclasses == 0 && !c->failed) {
        char msg[SHARD_ERROR_MAX];
        shard_fail(msg, SHARD_ERR_INVALID, "%s: no class folders (ImageFolder layout: SRC/CLASS/IMAGE)", root);
        return shard_report(err, SHARD_ERR_INVALID, msg);
    }
    for (size_t k = 0; k < c->nclasses && !c->nomem; k++)
        walk(c, root, c->classes[k], (long)k, 0);
    if (c->nomem)
        return SHARD_ERR_NOMEM;
    /* formats/shard.md 1.6: samples in byte-wise order of their relative paths. */
    qsort(c->v, c->n, sizeof *c->v, item_cmp);
    return 0;
}

/* ---- list files --------------------------------------------------------------------- */

typedef struct ListRow {
    char *path;
    json_t *label; /* integer, string, or NULL */
    json_t *extra; /* object */
} ListRow;

static long class_index(const Scan *c, const char *name)
{
    for (size_t i = 0; i < c->nclasses; i++)
        if (!strcmp(c->classes[i], name))
            return (long)i;
    return -1;
}

static int list_fail(ShardError *err, const char *file, size_t line, const char *what)
{
    char msg[SHARD_ERROR_MAX];
    shard_fail(msg, SHARD_ERR_FORMAT, "%s: line %zu: %s", file, line, what);
    return shard_report(err, SHARD_ERR_FORMAT, msg);
}

static char *strip_eol(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

/* One JSONL line into a row; 0, or an error reported. */
static int jsonl_row(const char *line, ListRow *row, const char *file, size_t lineno, ShardError *err)
{
    json_error_t je;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        char msg[300];
        snprintf(msg, sizeof msg, "not a JSON object: %s", o ? "" : je.text);
        json_decref(o);
        return list_fail(err, file, lineno, msg);
    }
    const char *path = json_string_value(json_object_get(o, "path"));
    if (!path || !*path) {
        json_decref(o);
        return list_fail(err, file, lineno, "no \"path\" string");
    }
    if (json_object_get(o, "class")) {
        json_decref(o);
        return list_fail(err, file, lineno, "\"class\" is reserved: give class names as \"label\"");
    }
    if (!(row->path = shard_strdup(path))) {
        json_decref(o);
        return SHARD_ERR_NOMEM;
    }
    row->label = json_incref(json_object_get(o, "label"));
    json_object_del(o, "path");
    json_object_del(o, "label");
    row->extra = o;
    return 0;
}

typedef struct Tsv {
    char **cols;
    size_t ncols;
    int path_col, label_col;
} Tsv;

/* One TSV line (the first names the columns: *header set); 0, or an error reported. */
static int tsv_row(Tsv *t, char *line, ListRow *row, int *header, const char *file, size_t lineno,
                   ShardError *err)
{
    size_t n = 1;
    for (const char *p = line; *p; p++)
        n += *p == '\t';
    char **fields = malloc(n * sizeof *fields);
    if (!fields)
        return SHARD_ERR_NOMEM;
    n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(line, "\t", &save); tok; tok = strtok_r(NULL, "\t", &save))
        fields[n++] = tok;
    int rc = 0;
    *header = 0;
    if (!t->cols) {
        *header = 1;
        t->cols = calloc(n ? n : 1, sizeof *t->cols);
        if (!t->cols) {
            free(fields);
            return SHARD_ERR_NOMEM;
        }
        t->ncols = n;
        int class_col = 0;
        for (size_t i = 0; i < n; i++) {
            if (!(t->cols[i] = shard_strdup(fields[i])))
                rc = SHARD_ERR_NOMEM;
            if (!strcmp(fields[i], "path"))
                t->path_col = (int)i;
            if (!strcmp(fields[i], "label"))
                t->label_col = (int)i;
            if (!strcmp(fields[i], "class"))
                class_col = 1;
        }
        free(fields);
        if (rc)
            return rc;
        if (class_col)
            return list_fail(err, file, lineno, "the 'class' column is reserved: give class names as 'label'");
        if (t->path_col < 0)
            return list_fail(err, file, lineno, "the header row names no 'path' column");
        return 0;
    }
    if (n != t->ncols) {
        free(fields);
        char msg[128];
        snprintf(msg, sizeof msg, "%zu fields where the header has %zu", n, t->ncols);
        return list_fail(err, file, lineno, msg);
    }
    row->path = shard_strdup(fields[t->path_col]);
    row->extra = json_object();
    if (!row->path || !row->extra)
        rc = SHARD_ERR_NOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        if ((int)i == t->path_col)
            continue;
        if ((int)i == t->label_col) {
            char *end;
            long v = strtol(fields[i], &end, 10);
            row->label = (*fields[i] && !*end) ? json_integer(v) : json_string(fields[i]);
            continue;
        }
        if (json_object_set_new(row->extra, t->cols[i], json_string(fields[i])))
            rc = SHARD_ERR_NOMEM;
    }
    free(fields);
    return rc;
}

/* String labels are class names, numbered in sorted order like ImageFolder's. */
static int list_classes(Scan *c, ListRow *rows, size_t nrows, const char *file, ShardError *err)
{
    size_t nnames = 0, ints = 0;
    c->classes = calloc(nrows ? nrows : 1, sizeof *c->classes);
    if (!c->classes)
        return SHARD_ERR_NOMEM;
    for (size_t i = 0; i < nrows; i++) {
        if (json_is_string(rows[i].label)) {
            const char *s = json_string_value(rows[i].label);
            if (class_index(c, s) < 0) {
                if (!(c->classes[c->nclasses] = shard_strdup(s)))
                    return SHARD_ERR_NOMEM;
                c->nclasses++;
            }
            nnames++;
        } else if (json_is_integer(rows[i].label)) {
            if (json_integer_value(rows[i].label) < 0)
                return list_fail(err, file, i + 1, "negative label");
            ints++;
        } else if (rows[i].label) {
            return list_fail(err, file, i + 1, "label is neither an integer nor a class name");
        }
    }
    if (nnames && ints) {
        char msg[SHARD_ERROR_MAX];
        shard_fail(msg, SHARD_ERR_FORMAT, "%s: labels mix integers and class names", file);
        return shard_report(err, SHARD_ERR_FORMAT, msg);
    }
    qsort(c->classes, c->nclasses, sizeof *c->classes, name_cmp);
    return 0;
}

/* A remote file's name in the dataset: its URL without the scheme, query and fragment
 * ("https://host/a/b.jpg?x=1" gives "host/a/b.jpg"), from which its key is derived. */
static char *url_rel(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    return strndup(p, strcspn(p, "?#"));
}

typedef struct SizeJob {
    Scan *c;
    ShardRemote *remote;
    size_t *items; /* indexes of remote items */
    size_t n;
    atomic_size_t next;
} SizeJob;

/* One of the threads asking for remote files' sizes. */
static void *size_thread(void *arg)
{
    SizeJob *j = arg;
    size_t k;
    while ((k = atomic_fetch_add(&j->next, 1)) < j->n) {
        Item *x = &j->c->v[j->items[k]];
        ShardSource *s = NULL;
        char err[SHARD_ERROR_MAX];
        int64_t size = -1;
        if (!shard_source_open(&s, x->path, j->remote, SHARD_SOURCE_SEQUENTIAL, err)) {
            size = shard_source_size(s);
            if (size < 0)
                snprintf(err, sizeof err, "%s", s->err);
            shard_source_put(s);
        }
        if (size < 0)
            x->failed = shard_strdup(err[0] ? err : "cannot learn its size");
        else
            x->size = (uint64_t)size;
    }
    return NULL;
}

/* The sizes of the list's remote files, inflight at once; the bad ones reported in list
 * order and dropped. */
static int stat_remote(Scan *c, char *msg)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        n += c->v[i].remote;
    if (!n)
        return 0;
    ShardRemote *r = shard_pack_plan_remote(c->plan, msg);
    if (!r)
        return SHARD_ERR_NOMEM;
    SizeJob j = {c, r, malloc(n * sizeof(size_t)), n, 0};
    if (!j.items)
        return SHARD_ERR_NOMEM;
    n = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].remote)
            j.items[n++] = i;
    size_t nt = shard_pack_plan_inflight(c->plan);
    nt = nt < n ? nt : n;
    pthread_t *t = calloc(nt, sizeof *t);
    size_t started = 0;
    while (t && started < nt && !shard_thread_start(&t[started], size_thread, &j))
        started++;
    if (!started)
        size_thread(&j); /* no thread to be had: one at a time, here */
    for (size_t i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    free(t);
    free(j.items);
    for (size_t i = 0; i < c->n; i++) {
        Item *x = &c->v[i];
        if (!x->remote)
            continue;
        if (x->failed) {
            x->dropped = 1;
            scan_bad(c, x->path, SHARD_PACK_UNREADABLE, x->failed);
        } else if (x->size == 0) {
            x->dropped = 1;
            scan_bad(c, x->path, SHARD_PACK_EMPTY, "zero-byte file");
        }
    }
    return 0;
}

static int scan_list(Scan *c, const char *file, ShardError *err)
{
    FILE *f = fopen(file, "rb");
    if (!f) {
        int e = errno;
        char msg[SHARD_ERROR_MAX];
        int code = shard_fail(msg, shard_errno_code(e), "%s: cannot open list: %s", file, strerror(e));
        return shard_report(err, code, msg);
    }
    char *base = shard_dir_of(file);
    ListRow *rows = NULL;
    size_t nrows = 0, caprows = 0, lineno = 0;
    char *line = NULL;
    size_t linecap = 0;
    Tsv tsv = {NULL, 0, -1, -1};
    int jsonl = -1, rc = base ? 0 : SHARD_ERR_NOMEM;
    while (!rc && getline(&line, &linecap, f) >= 0) {
        lineno++;
        strip_eol(line);
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            continue;
        if (jsonl < 0)
            jsonl = *p == '{';
        if (!shard_utf8_valid(line, strlen(line))) {
            rc = list_fail(err, file, lineno, "not valid UTF-8");
            break;
        }
        ListRow row = {0};
        int header = 0;
        rc = jsonl ? jsonl_row(line, &row, file, lineno, err)
                   : tsv_row(&tsv, line, &row, &header, file, lineno, err);
        if (!rc && !header && shard_array_grow(&rows, &caprows, nrows + 1, sizeof *rows, 1024))
            rc = SHARD_ERR_NOMEM;
        if (!rc && !header)
            rows[nrows++] = row;
        else {
            free(row.path);
            json_decref(row.label);
            json_decref(row.extra);
        }
    }
    free(line);
    fclose(f);
    for (size_t i = 0; i < tsv.ncols; i++)
        free(tsv.cols[i]);
    free(tsv.cols);
    if (!rc)
        rc = list_classes(c, rows, nrows, file, err);
    for (size_t i = 0; i < nrows; i++) {
        if (!rc && !c->nomem) {
            const char *p = rows[i].path;
            int remote = shard_url_is_remote(p);
            char *full = remote || p[0] == '/' ? shard_strdup(p) : join_path(c, base, p);
            char *relcopy = remote ? url_rel(p) : NULL;
            const char *rel = remote ? relcopy : p;
            while (rel && rel[0] == '.' && rel[1] == '/')
                rel += 2;
            while (rel && *rel == '/')
                rel++;
            if (remote && !relcopy)
                c->nomem = 1;
            const char *ext = rel ? image_ext(rel) : NULL;
            long label = -1, cls = -1;
            if (json_is_integer(rows[i].label))
                label = (long)json_integer_value(rows[i].label);
            else if (json_is_string(rows[i].label))
                label = cls = class_index(c, json_string_value(rows[i].label));
            char *extra = json_object_size(rows[i].extra)
                              ? json_dumps(rows[i].extra, JSON_COMPACT | JSON_SORT_KEYS)
                              : NULL;
            if (c->nomem || !full || (json_object_size(rows[i].extra) && !extra))
                c->nomem = 1;
            else if (!ext)
                scan_bad(c, full, SHARD_PACK_NOT_IMAGE, "no image extension (jpg, jpeg, png, webp, ...)");
            else
                add_file(c, full, rel, ext, label, cls, extra);
            free(extra);
            free(full);
            free(relcopy);
        }
        free(rows[i].path);
        json_decref(rows[i].label);
        json_decref(rows[i].extra);
    }
    free(rows);
    free(base);
    if (!rc && c->nomem)
        rc = SHARD_ERR_NOMEM;
    if (!rc) {
        char msg[SHARD_ERROR_MAX] = "";
        if ((rc = stat_remote(c, msg)))
            shard_report(err, rc, msg[0] ? msg : "out of memory");
    }
    if (!rc && c->n == 0 && !c->failed) {
        char msg[SHARD_ERROR_MAX];
        shard_fail(msg, SHARD_ERR_INVALID, "%s: the list names no files", file);
        rc = shard_report(err, SHARD_ERR_INVALID, msg);
    }
    return rc;
}

int shard_pack_plan_scan(ShardPackPlan *p, const char *src, int list, const ShardPackScanCallbacks *cb,
                         uint64_t *ignored, ShardError *err)
{
    Scan c;
    memset(&c, 0, sizeof c);
    c.plan = p;
    c.cb = cb;
    if (ignored)
        *ignored = 0;
    if (!p || !src)
        return shard_report(err, SHARD_ERR_INVALID, "pack scan: no plan or no source");
    int rc = list ? scan_list(&c, src, err) : scan_folder(&c, src, err);
    if (!rc && c.nomem)
        rc = SHARD_ERR_NOMEM;
    if (!rc && c.failed)
        rc = shard_report(err, c.first_code, c.first);
    size_t live = 0;
    for (size_t i = 0; i < c.n; i++)
        live += !c.v[i].dropped;
    if (!rc && live == 0) {
        char msg[SHARD_ERROR_MAX];
        shard_fail(msg, SHARD_ERR_INVALID, "%s: no images found", src);
        rc = shard_report(err, SHARD_ERR_INVALID, msg);
    }
    for (size_t i = 0; i < c.n && !rc; i++) {
        const Item *x = &c.v[i];
        if (x->dropped)
            continue;
        ShardPackInput in = {x->path, x->rel, x->field, x->label,
                             x->named ? c.classes[x->class_index] : NULL, x->extra, x->size};
        rc = shard_pack_plan_add(p, &in);
    }
    if (!rc)
        rc = shard_pack_plan_set_classes(p, (const char *const *)c.classes, c.nclasses);
    if (rc == SHARD_ERR_NOMEM)
        shard_report(err, rc, "pack scan: out of memory");
    else if (rc && err && !err->message[0])
        shard_report(err, rc, "pack scan failed");
    if (ignored)
        *ignored = c.ignored;
    scan_free(&c);
    return rc;
}
