/*
 * A list file as a pack scan reads it (listfile.h): TSV with a header row naming a `path` column
 * (plus `label` and any others), or JSONL objects with "path", optional "label" and any other
 * fields, which go into the sample's .json. A list may name remote files (http, https, gs,
 * s3 URLs): their sizes, which the plan cuts shards by, are asked for by `inflight` threads
 * at once (a HEAD request each, or GCS's one-byte range), through the plan's ShardRemote
 * with its retries.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/text.h"
#include "base/thread.h"
#include "pack/inputs.h"
#include "pack/listfile.h"
#include "pack/packplan.h"
#include "remote/store.h"
#include "shard/names.h"
#include "source/open.h"

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
    if (!(row->path = strdup(path))) {
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
            if (!(t->cols[i] = strdup(fields[i])))
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
    row->path = strdup(fields[t->path_col]);
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
                if (!(c->classes[c->nclasses] = strdup(s)))
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
    qsort(c->classes, c->nclasses, sizeof *c->classes, shard_scan_name_cmp);
    return 0;
}

/* A remote file's name in the dataset: its URL without the scheme, a user and password,
 * the query and the fragment ("https://u:p@host/a/b.jpg?x=1" gives "host/a/b.jpg"), from
 * which its key is derived: nothing of a credential goes into a shard. */
static char *url_rel(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *end = p + strcspn(p, "/?#"), *user = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@')
            user = q;
    p = user ? user + 1 : p;
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
            x->failed = strdup(err[0] ? err : "cannot learn its size");
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
    ShardRemote *r = shard_pack_plan_reach(c->plan, msg);
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
    shard_threads_run(size_thread, &j, nt < n ? nt : n);
    free(j.items);
    for (size_t i = 0; i < c->n; i++) {
        Item *x = &c->v[i];
        if (!x->remote)
            continue;
        if (x->failed) {
            x->dropped = 1;
            shard_scan_bad(c, x->path, SHARD_PACK_UNREADABLE, x->failed);
        } else if (x->size == 0) {
            x->dropped = 1;
            shard_scan_bad(c, x->path, SHARD_PACK_EMPTY, "zero-byte file");
        }
    }
    return 0;
}

/* The rows of the list file, TSV with a header naming its columns or JSONL objects, into
 * *rows (*nrows of them); *base receives the list's folder, which relative paths are
 * resolved against. 0, or an error with err. */
static int read_rows(const char *file, ListRow **rows_out, size_t *nrows_out, char **base_out,
                     ShardError *err)
{
    FILE *f = fopen(file, "rb");
    if (!f) {
        int e = errno;
        char msg[SHARD_ERROR_MAX];
        int code = shard_fail(msg, shard_errno_code(e), "%s: cannot open list: %s", file, strerror(e));
        return shard_report(err, code, msg);
    }
    char *base = *base_out = shard_dir_of(file);
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
    *rows_out = rows;
    *nrows_out = nrows;
    return rc;
}

/* The rows as the scan's inputs (their rows freed); base: the list's folder. */
static int add_rows(Scan *c, ListRow *rows, size_t nrows, const char *base, const char *file,
                    int rc, ShardError *err)
{
    if (!rc)
        rc = list_classes(c, rows, nrows, file, err);
    for (size_t i = 0; i < nrows; i++) {
        if (!rc && !c->nomem) {
            const char *p = rows[i].path;
            int remote = (shard_store_can(p) & SHARD_STORE_COSTLY) != 0;
            char *full = remote || p[0] == '/' ? strdup(p) : shard_scan_join(c, base, p);
            char *relcopy = remote ? url_rel(p) : NULL;
            const char *rel = remote ? relcopy : p;
            while (rel && rel[0] == '.' && rel[1] == '/')
                rel += 2;
            while (rel && *rel == '/')
                rel++;
            if (remote && !relcopy)
                c->nomem = 1;
            const char *ext = rel ? shard_scan_image_ext(rel) : NULL;
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
                shard_scan_bad(c, full, SHARD_PACK_NOT_IMAGE, "no image extension (jpg, jpeg, png, webp, ...)");
            else
                shard_scan_add(c, full, rel, ext, label, cls, extra);
            free(extra);
            free(full);
            free(relcopy);
        }
        free(rows[i].path);
        json_decref(rows[i].label);
        json_decref(rows[i].extra);
    }
    free(rows);
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

int shard_scan_list(Scan *c, const char *file, ShardError *err)
{
    ListRow *rows = NULL;
    size_t nrows = 0;
    char *base = NULL;
    int rc = read_rows(file, &rows, &nrows, &base, err);
    rc = add_rows(c, rows, nrows, base, file, rc, err);
    free(base);
    return rc;
}
