/*
 * shardpack's input scan (packscan.h).
 */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <jansson.h>
#include <shard/shard.h>

#include "cli.h"
#include "packscan.h"

/* ---- input scan --------------------------------------------------------------------- */

static const char *const image_exts[] = {"jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif", "tiff", "webp"};

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

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) {
        fprintf(stderr, "shardpack: out of memory\n");
        exit(1);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p) {
        fprintf(stderr, "shardpack: out of memory\n");
        exit(1);
    }
    return p;
}

static char *join_path(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (!p) {
        fprintf(stderr, "shardpack: out of memory\n");
        exit(1);
    }
    snprintf(p, n, "%s%s%s", a, (*a && a[strlen(a) - 1] != '/') ? "/" : "", b);
    return p;
}

static Item *items_push(Items *it)
{
    if (it->n == it->cap) {
        it->cap = it->cap ? it->cap * 2 : 1024;
        it->v = xrealloc(it->v, it->cap * sizeof *it->v);
    }
    Item *x = &it->v[it->n++];
    memset(x, 0, sizeof *x);
    x->label = -1;
    return x;
}

/* Frees what the scan found (the plan has copies); the counts stay. */
void free_items(Items *it)
{
    for (size_t i = 0; i < it->n; i++) {
        free(it->v[i].path);
        free(it->v[i].rel);
        free(it->v[i].field);
        free(it->v[i].extra);
    }
    free(it->v);
    for (size_t i = 0; i < it->nclasses; i++)
        free(it->classes[i]);
    free(it->classes);
    it->v = NULL;
    it->classes = NULL;
    it->n = it->cap = it->nclasses = 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in a folder, sorted bytewise, hidden entries left out. */
static char **list_dir(const char *dir, size_t *count, int *err)
{
    DIR *d = opendir(dir);
    *count = 0;
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
        if (n == cap) {
            cap *= 2;
            char **p = realloc(v, cap * sizeof *v);
            if (!p)
                break;
            v = p;
        }
        v[n++] = xstrdup(e->d_name);
    }
    closedir(d);
    if (!v) {
        fprintf(stderr, "shardpack: out of memory\n");
        exit(1);
    }
    qsort(v, n, sizeof *v, name_cmp);
    *count = n;
    *err = 0;
    return v;
}

/* A bad input found while scanning: fatal or skipped, by --on-error. */
static void scan_bad(ScanCtx *c, const char *path, int reason, const char *what)
{
    char buf[4096];
    cli_escape_path(path, buf, sizeof buf);
    if (!c->skip) {
        fprintf(stderr, "shardpack: %s: %s\n", buf, what);
        c->failed = 1;
    } else {
        if (!c->quiet)
            fprintf(stderr, "shardpack: skipping %s: %s\n", buf, what);
        atomic_fetch_add(&c->skipped[reason], 1);
    }
}

static void add_file(ScanCtx *c, const char *path, const char *rel, const char *ext,
                     long label, const char *class_name, const char *extra)
{
    if (!shard_utf8_valid(path, strlen(path))) {
        scan_bad(c, path, SKIP_NAME, "file name is not valid UTF-8");
        return;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot stat: %s", strerror(errno));
        scan_bad(c, path, SKIP_UNREADABLE, msg);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        scan_bad(c, path, SKIP_UNREADABLE, "not a regular file");
        return;
    }
    if (st.st_size == 0) {
        scan_bad(c, path, SKIP_EMPTY, "zero-byte file");
        return;
    }
    Item *x = items_push(c->items);
    x->path = xstrdup(path);
    x->rel = xstrdup(rel);
    x->field = xstrdup(ext);
    for (char *p = x->field; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    x->label = label;
    x->class_name = class_name;
    x->extra = extra ? xstrdup(extra) : NULL;
    x->size = (uint64_t)st.st_size;
}

/* Walks a class folder depth-first in sorted order, following links as ImageFolder does;
 * depth is bounded so a link loop ends. */
static void walk(ScanCtx *c, const char *root, const char *rel, long label,
                 const char *class_name, int depth)
{
    char *dir = join_path(root, rel);
    size_t n;
    int err;
    char **names = list_dir(dir, &n, &err);
    if (!names) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot read folder: %s", strerror(err));
        scan_bad(c, dir, SKIP_UNREADABLE, msg);
        free(dir);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char *r = join_path(rel, names[i]);
        char *full = join_path(root, r);
        struct stat st;
        if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (depth < 64)
                walk(c, root, r, label, class_name, depth + 1);
        } else {
            const char *ext = image_ext(names[i]);
            if (ext)
                add_file(c, full, r, ext, label, class_name, NULL);
            else
                c->items->ignored++;
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

int pack_scan_folder(ScanCtx *c, const char *root)
{
    size_t n;
    int err;
    char **names = list_dir(root, &n, &err);
    if (!names) {
        fprintf(stderr, "shardpack: %s: cannot read folder: %s\n", root, strerror(err));
        return -1;
    }
    Items *it = c->items;
    it->classes = calloc(n ? n : 1, sizeof *it->classes);
    for (size_t i = 0; i < n; i++) {
        char *full = join_path(root, names[i]);
        struct stat st;
        if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (!shard_utf8_valid(names[i], strlen(names[i]))) {
                scan_bad(c, full, SKIP_NAME, "class folder name is not valid UTF-8");
                free(names[i]);
            } else {
                it->classes[it->nclasses++] = names[i];
            }
        } else {
            it->ignored++;
            free(names[i]);
        }
        free(full);
    }
    free(names);
    if (it->nclasses == 0) {
        fprintf(stderr, "shardpack: %s: no class folders (ImageFolder layout: SRC/CLASS/IMAGE)\n", root);
        return -1;
    }
    for (size_t k = 0; k < it->nclasses; k++)
        walk(c, root, it->classes[k], (long)k, it->classes[k], 0);
    /* formats/shard.md 1.6: samples in byte-wise order of their relative paths. */
    qsort(it->v, it->n, sizeof *it->v, item_cmp);
    return c->failed ? -1 : 0;
}

/* ---- list files --------------------------------------------------------------------- */

static int class_index(Items *it, const char *name)
{
    for (size_t i = 0; i < it->nclasses; i++)
        if (!strcmp(it->classes[i], name))
            return (int)i;
    return -1;
}

static char *dir_of(const char *path)
{
    char *t = xstrdup(path);
    char *d = xstrdup(dirname(t));
    free(t);
    return d;
}

typedef struct ListRow {
    char *path;
    json_t *label; /* integer, string, or NULL */
    json_t *extra; /* object */
} ListRow;

static int list_fail(const char *file, size_t line, const char *what)
{
    fprintf(stderr, "shardpack: %s: line %zu: %s\n", file, line, what);
    return -1;
}

static char *strip_eol(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

int pack_scan_list(ScanCtx *c, const char *file)
{
    FILE *f = fopen(file, "rb");
    if (!f) {
        fprintf(stderr, "shardpack: %s: cannot open list: %s\n", file, strerror(errno));
        return -1;
    }
    char *base = dir_of(file);
    ListRow *rows = NULL;
    size_t nrows = 0, caprows = 0, lineno = 0;
    char *line = NULL;
    size_t linecap = 0;
    char **cols = NULL;
    size_t ncols = 0;
    int jsonl = -1, rc = 0, path_col = -1, label_col = -1, class_col = 0;
    while (getline(&line, &linecap, f) >= 0) {
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
            rc = list_fail(file, lineno, "not valid UTF-8");
            break;
        }
        ListRow row = {0};
        if (jsonl) {
            json_error_t je;
            json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &je);
            if (!o || !json_is_object(o)) {
                char msg[300];
                snprintf(msg, sizeof msg, "not a JSON object: %s", o ? "" : je.text);
                json_decref(o);
                rc = list_fail(file, lineno, msg);
                break;
            }
            const char *path = json_string_value(json_object_get(o, "path"));
            if (!path || !*path) {
                json_decref(o);
                rc = list_fail(file, lineno, "no \"path\" string");
                break;
            }
            if (json_object_get(o, "class")) {
                json_decref(o);
                rc = list_fail(file, lineno, "\"class\" is reserved: give class names as \"label\"");
                break;
            }
            row.path = xstrdup(path);
            row.label = json_incref(json_object_get(o, "label"));
            json_object_del(o, "path");
            json_object_del(o, "label");
            row.extra = o;
        } else {
            /* TSV: the first row names the columns. */
            size_t n = 0;
            char *save = NULL, *tok;
            char **fields = NULL;
            for (tok = strtok_r(line, "\t", &save); tok; tok = strtok_r(NULL, "\t", &save)) {
                fields = xrealloc(fields, (n + 1) * sizeof *fields);
                fields[n++] = tok;
            }
            if (!cols) {
                cols = malloc(n * sizeof *cols);
                for (size_t i = 0; i < n; i++) {
                    cols[i] = xstrdup(fields[i]);
                    if (!strcmp(fields[i], "path"))
                        path_col = (int)i;
                    if (!strcmp(fields[i], "label"))
                        label_col = (int)i;
                    if (!strcmp(fields[i], "class"))
                        class_col = 1;
                }
                ncols = n;
                free(fields);
                if (class_col) {
                    rc = list_fail(file, lineno, "the 'class' column is reserved: give class names as 'label'");
                    break;
                }
                if (path_col < 0) {
                    rc = list_fail(file, lineno, "the header row names no 'path' column");
                    break;
                }
                continue;
            }
            if (n != ncols) {
                free(fields);
                char msg[128];
                snprintf(msg, sizeof msg, "%zu fields where the header has %zu", n, ncols);
                rc = list_fail(file, lineno, msg);
                break;
            }
            row.path = xstrdup(fields[path_col]);
            row.extra = json_object();
            for (size_t i = 0; i < n; i++) {
                if ((int)i == path_col)
                    continue;
                if ((int)i == label_col) {
                    char *end;
                    long v = strtol(fields[i], &end, 10);
                    row.label = (*fields[i] && !*end) ? json_integer(v) : json_string(fields[i]);
                    continue;
                }
                json_object_set_new(row.extra, cols[i], json_string(fields[i]));
            }
            free(fields);
        }
        if (nrows == caprows) {
            caprows = caprows ? caprows * 2 : 1024;
            rows = xrealloc(rows, caprows * sizeof *rows);
        }
        rows[nrows++] = row;
    }
    free(line);
    fclose(f);
    for (size_t i = 0; i < ncols; i++)
        free(cols[i]);
    free(cols);
    Items *it = c->items;
    if (!rc) {
        /* String labels are class names, numbered in sorted order like ImageFolder's. */
        size_t nnames = 0;
        int ints = 0;
        it->classes = calloc(nrows ? nrows : 1, sizeof *it->classes);
        for (size_t i = 0; i < nrows; i++) {
            if (json_is_string(rows[i].label)) {
                const char *s = json_string_value(rows[i].label);
                if (class_index(it, s) < 0)
                    it->classes[it->nclasses++] = xstrdup(s);
                nnames++;
            } else if (json_is_integer(rows[i].label)) {
                if (json_integer_value(rows[i].label) < 0) {
                    rc = list_fail(file, i + 1, "negative label");
                    break;
                }
                ints++;
            } else if (rows[i].label) {
                rc = list_fail(file, i + 1, "label is neither an integer nor a class name");
                break;
            }
        }
        if (!rc && nnames && ints) {
            fprintf(stderr, "shardpack: %s: labels mix integers and class names\n", file);
            rc = -1;
        }
        qsort(it->classes, it->nclasses, sizeof *it->classes, name_cmp);
    }
    for (size_t i = 0; i < nrows; i++) {
        if (!rc) {
            const char *p = rows[i].path;
            char *full = p[0] == '/' ? xstrdup(p) : join_path(base, p);
            const char *rel = p;
            while (rel[0] == '.' && rel[1] == '/')
                rel += 2;
            while (*rel == '/')
                rel++;
            const char *ext = image_ext(rel);
            long label = -1;
            const char *cname = NULL;
            if (json_is_integer(rows[i].label))
                label = (long)json_integer_value(rows[i].label);
            else if (json_is_string(rows[i].label)) {
                label = class_index(it, json_string_value(rows[i].label));
                cname = it->classes[label];
            }
            char *extra = json_object_size(rows[i].extra)
                              ? json_dumps(rows[i].extra, JSON_COMPACT | JSON_SORT_KEYS)
                              : NULL;
            if (!ext)
                scan_bad(c, full, SKIP_NOT_IMAGE, "no image extension (jpg, jpeg, png, webp, ...)");
            else
                add_file(c, full, rel, ext, label, cname, extra);
            free(extra);
            free(full);
        }
        free(rows[i].path);
        json_decref(rows[i].label);
        json_decref(rows[i].extra);
    }
    free(rows);
    free(base);
    if (!rc && c->items->n == 0 && !c->failed) {
        fprintf(stderr, "shardpack: %s: the list names no files\n", file);
        rc = -1;
    }
    return rc || c->failed ? -1 : 0;
}

