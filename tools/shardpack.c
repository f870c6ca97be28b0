/*
 * shardpack — turn an image folder (or a list file) into WebDataset shards with an index
 * per shard and a manifest.
 *
 * DESIGN: the main thread scans the input, derives keys, shuffles if asked, and plans the
 * shards (which samples go into which numbered shard) from file sizes alone, with the
 * library's own size rule. The plan is a pure function of the input and options, so the
 * output does not depend on --jobs, and --part I/N packs a disjoint slice of the very
 * same plan. Worker threads take whole shards from a shared counter, each with its own
 * ShardWriter; the main thread only shows progress and, at the end, writes the manifest
 * from the shards' infos in shard order.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <shard/shard.h>

#include "cli.h"

enum { ON_ERROR_FAIL, ON_ERROR_SKIP };

typedef struct Options {
    const char *src;
    const char *pattern;
    const char *manifest;
    uint64_t maxcount, maxsize, frame_size;
    int level;
    int compress; /* -1: from the pattern */
    int have_shuffle;
    uint64_t seed;
    int jobs;
    int verify;
    int on_error;
    int list;
    uint64_t part, nparts;
    int have_part;
    int fsync;
    int checksums;
    int quiet;
    int tty; /* stderr is a terminal: progress bar, and lines start with \r over it */
    int64_t mtime;
} Options;

typedef struct Item {
    char *path;  /* to open */
    char *rel;   /* as the dataset names it: kept in the sample's .json */
    char *key;
    char *field; /* lower-cased extension: the image's field name */
    char *extra; /* JSON object text of extra list fields, or NULL */
    const char *class_name;
    long label; /* -1: none */
    uint64_t size;
} Item;

typedef struct Items {
    Item *v;
    size_t n, cap;
    char **classes;
    size_t nclasses;
    uint64_t ignored; /* files without an image extension */
} Items;

/* Why samples were skipped, counted for the summary. */
enum { SKIP_NAME, SKIP_EMPTY, SKIP_UNREADABLE, SKIP_NOT_IMAGE, SKIP_CORRUPT, SKIP_CHANGED, NSKIP };
static const char *const skip_names[NSKIP] = {
    "invalid name", "zero-byte", "unreadable", "not an image", "corrupt image", "changed while packing",
};

typedef struct Shard {
    size_t first, end; /* items [first, end) */
    int done;
    int written; /* 0 when every sample was skipped */
    ShardFileInfo info;
    char *url;
} Shard;

typedef struct Run {
    const Options *o;
    Items *items;
    Shard *shards;
    size_t nshards;
    size_t shard_lo, shard_hi; /* this part's shards */
    atomic_size_t next;
    atomic_int failed;
    atomic_ullong samples_done, bytes_done;
    atomic_ullong skipped[NSKIP];
    pthread_mutex_t lock; /* error message, stderr */
    char error[2048];
    pthread_cond_t cond;
    int workers_left;
} Run;

static void usage(FILE *f)
{
    fputs("usage: shardpack SRC -o PATTERN [options]\n"
          "       shardpack --join -o MANIFEST PART.json...\n"
          "\n"
          "Packs an image folder in ImageFolder layout (class = first-level folder) or, with\n"
          "--list, a TSV/JSONL list file into WebDataset shards (.tar or .tar.zst, by the\n"
          "pattern's extension), with a DALI-compatible .idx per shard and a manifest.\n"
          "\n"
          "  -o, --output PATTERN   shard names, e.g. out/train-%06d.tar or .tar.zst\n"
          "  -c, --maxcount N       samples per shard (default 100000)\n"
          "  -s, --maxsize SIZE     bytes per shard, e.g. 1G, 500MB (default 3e9)\n"
          "      --compress KIND    none or zstd (default: from PATTERN)\n"
          "  -l, --level N          zstd level 1..22 (default 3)\n"
          "      --frame-size SIZE  uncompressed bytes per zstd frame (default 4MiB)\n"
          "      --shuffle SEED     shuffle samples across the whole set before sharding\n"
          "  -j, --jobs N           shards packed in parallel (default 1; output identical)\n"
          "      --verify           decode every JPEG with libjpeg-turbo; corrupt ones are bad input\n"
          "      --on-error MODE    fail (default) or skip: skip bad inputs and count them\n"
          "      --list             SRC is a list file: TSV with a header row naming a 'path'\n"
          "                         column (and 'label', and any others), or JSONL objects\n"
          "      --part I/N         pack only part I (0-based) of N: a disjoint share of the shards\n"
          "      --manifest PATH    manifest path (default: the pattern's stem + .json)\n"
          "      --no-fsync         do not fsync shards before renaming them into place\n"
          "      --no-checksum      leave MD5 and SHA-256 out of the manifest (faster)\n"
          "  -q, --quiet            no progress bar and no summary\n"
          "      --join             join part manifests into -o MANIFEST\n"
          "  -h, --help             this help\n",
          f);
}

static void die_usage(const char *msg)
{
    exit(cli_usage_error("shardpack", msg));
}

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

typedef struct ScanCtx {
    const Options *o;
    Items *items;
    int failed;
} ScanCtx;

/* A bad input found while scanning: fatal or skipped, by --on-error. */
static void scan_bad(ScanCtx *c, const char *path, int reason, const char *what, Run *counts)
{
    char buf[4096];
    cli_escape_path(path, buf, sizeof buf);
    if (c->o->on_error == ON_ERROR_FAIL) {
        fprintf(stderr, "shardpack: %s: %s\n", buf, what);
        c->failed = 1;
    } else {
        if (!c->o->quiet)
            fprintf(stderr, "shardpack: skipping %s: %s\n", buf, what);
        atomic_fetch_add(&counts->skipped[reason], 1);
    }
}

static void add_file(ScanCtx *c, Run *run, const char *path, const char *rel, const char *ext,
                     long label, const char *class_name, const char *extra)
{
    if (!shard_utf8_valid(path, strlen(path))) {
        scan_bad(c, path, SKIP_NAME, "file name is not valid UTF-8", run);
        return;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot stat: %s", strerror(errno));
        scan_bad(c, path, SKIP_UNREADABLE, msg, run);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        scan_bad(c, path, SKIP_UNREADABLE, "not a regular file", run);
        return;
    }
    if (st.st_size == 0) {
        scan_bad(c, path, SKIP_EMPTY, "zero-byte file", run);
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
static void walk(ScanCtx *c, Run *run, const char *root, const char *rel, long label,
                 const char *class_name, int depth)
{
    char *dir = join_path(root, rel);
    size_t n;
    int err;
    char **names = list_dir(dir, &n, &err);
    if (!names) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot read folder: %s", strerror(err));
        scan_bad(c, dir, SKIP_UNREADABLE, msg, run);
        free(dir);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char *r = join_path(rel, names[i]);
        char *full = join_path(root, r);
        struct stat st;
        if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (depth < 64)
                walk(c, run, root, r, label, class_name, depth + 1);
        } else {
            const char *ext = image_ext(names[i]);
            if (ext)
                add_file(c, run, full, r, ext, label, class_name, NULL);
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

static int scan_folder(ScanCtx *c, Run *run, const char *root)
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
                scan_bad(c, full, SKIP_NAME, "class folder name is not valid UTF-8", run);
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
        walk(c, run, root, it->classes[k], (long)k, it->classes[k], 0);
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

static int read_list(ScanCtx *c, Run *run, const char *file)
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
                scan_bad(c, full, SKIP_NOT_IMAGE, "no image extension (jpg, jpeg, png, webp, ...)", run);
            else
                add_file(c, run, full, rel, ext, label, cname, extra);
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

/* ---- keys ---------------------------------------------------------------------------- */

typedef struct KeySet {
    char **slots;
    size_t cap, n;
} KeySet;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Inserts key unless present; returns 1 if inserted. */
static int keyset_insert(KeySet *k, char *key)
{
    if ((k->n + 1) * 2 > k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 4096;
        char **slots = calloc(cap, sizeof *slots);
        if (!slots) {
            fprintf(stderr, "shardpack: out of memory\n");
            exit(1);
        }
        for (size_t i = 0; i < k->cap; i++) {
            if (!k->slots[i])
                continue;
            size_t j = hash_str(k->slots[i]) & (cap - 1);
            while (slots[j])
                j = (j + 1) & (cap - 1);
            slots[j] = k->slots[i];
        }
        free(k->slots);
        k->slots = slots;
        k->cap = cap;
    }
    size_t j = hash_str(key) & (k->cap - 1);
    while (k->slots[j]) {
        if (!strcmp(k->slots[j], key))
            return 0;
        j = (j + 1) & (k->cap - 1);
    }
    k->slots[j] = key;
    k->n++;
    return 1;
}

/* Keys from relative paths, in input order; a clash gets the smallest free "_N". */
static int assign_keys(Items *it)
{
    KeySet set = {0};
    for (size_t i = 0; i < it->n; i++) {
        Item *x = &it->v[i];
        size_t cap = strlen(x->rel) + 32;
        char *key = malloc(cap);
        int n = key ? shard_key_from_path(x->rel, key, cap) : -1;
        if (n < 0) {
            fprintf(stderr, "shardpack: %s: cannot derive a sample key from this path\n", x->path);
            free(key);
            return -1;
        }
        if (!keyset_insert(&set, key)) {
            char *alt = malloc((size_t)n + 24);
            for (unsigned long s = 1;; s++) {
                snprintf(alt, (size_t)n + 24, "%s_%lu", key, s);
                if (keyset_insert(&set, alt))
                    break;
            }
            free(key);
            key = alt;
        }
        x->key = key;
    }
    free(set.slots); /* the keys themselves belong to the items */
    return 0;
}

/* ---- shuffle ------------------------------------------------------------------------- */

/* splitmix64 seeds xoshiro256**; both are fixed so a seed means the same order forever. */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, n) without modulo bias (Lemire's method). */
static uint64_t below(uint64_t s[4], uint64_t n)
{
    __uint128_t m = (__uint128_t)xoshiro(s) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t t = -n % n;
        while (lo < t) {
            m = (__uint128_t)xoshiro(s) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

static void shuffle_items(Items *it, uint64_t seed)
{
    uint64_t s[4], x = seed;
    for (int i = 0; i < 4; i++)
        s[i] = splitmix64(&x);
    for (size_t i = it->n; i > 1; i--) {
        size_t j = (size_t)below(s, i);
        Item t = it->v[i - 1];
        it->v[i - 1] = it->v[j];
        it->v[j] = t;
    }
}

/* ---- packing ------------------------------------------------------------------------- */

static char *sample_json(const Item *x)
{
    json_t *o = x->extra ? json_loads(x->extra, 0, NULL) : json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "path", json_string(x->rel));
    if (x->label >= 0)
        json_object_set_new(o, "label", json_integer(x->label));
    if (x->class_name)
        json_object_set_new(o, "class", json_string(x->class_name));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

/* The fields of item x: image, cls (when labelled) and json. */
static size_t item_fields(const Item *x, ShardField *f, const void *image, char *cls, const char *json)
{
    size_t n = 0;
    f[n++] = (ShardField){x->field, image, x->size};
    if (x->label >= 0) {
        int k = snprintf(cls, 24, "%ld", x->label);
        f[n++] = (ShardField){"cls", cls, (size_t)k};
    }
    f[n++] = (ShardField){"json", json, strlen(json)};
    return n;
}

static uint64_t item_size(const Item *x)
{
    char *json = sample_json(x);
    char cls[24];
    ShardField f[3];
    ShardSample s = {x->key, f, item_fields(x, f, NULL, cls, json ? json : "")};
    uint64_t size = shard_writer_sample_size(&s);
    free(json);
    return size;
}

static void plan_shards(Run *run)
{
    const Options *o = run->o;
    Items *it = run->items;
    size_t cap = 64, n = 0;
    Shard *v = xrealloc(NULL, cap * sizeof *v);
    uint64_t count = 0, size = 0;
    for (size_t i = 0; i < it->n; i++) {
        uint64_t s = item_size(&it->v[i]);
        if (n == 0 || (o->maxcount && count >= o->maxcount) ||
            (o->maxsize && count && size + s > o->maxsize)) {
            if (n == cap) {
                cap *= 2;
                v = xrealloc(v, cap * sizeof *v);
            }
            v[n] = (Shard){.first = i};
            if (n)
                v[n - 1].end = i;
            n++;
            count = size = 0;
        }
        count++;
        size += s;
    }
    if (n)
        v[n - 1].end = it->n;
    run->shards = v;
    run->nshards = n;
}

static void record_error(Run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void record_error(Run *run, const char *fmt, ...)
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

/* A bad input found while packing: returns 1 to skip the sample, 0 after failing the run. */
static int bad_input(Run *run, const Item *x, int reason, const char *what)
{
    char path[4096];
    cli_escape_path(x->path, path, sizeof path);
    if (run->o->on_error == ON_ERROR_FAIL) {
        record_error(run, "%s: %s", path, what);
        return 0;
    }
    atomic_fetch_add(&run->skipped[reason], 1);
    if (!run->o->quiet) {
        pthread_mutex_lock(&run->lock);
        fprintf(stderr, "%sshardpack: skipping %s: %s\n", run->o->tty ? "\r" : "", path, what);
        pthread_mutex_unlock(&run->lock);
    }
    return 1;
}

/* Reads a whole file into *buf; returns 0, or an errno value, or -1 for a size change. */
static int read_file(const Item *x, unsigned char **buf, size_t *cap)
{
    int fd = open(x->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    if (*cap < x->size + 1) {
        free(*buf);
        *cap = x->size + 1;
        *buf = malloc(*cap);
        if (!*buf) {
            *cap = 0;
            close(fd);
            return ENOMEM;
        }
    }
    size_t got = 0;
    for (;;) {
        /* One byte more than expected, to notice a file that grew. */
        ssize_t k = read(fd, *buf + got, x->size + 1 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            return e;
        }
        if (k == 0)
            break;
        got += (size_t)k;
        if (got > x->size)
            break;
    }
    close(fd);
    return got == x->size ? 0 : -1;
}

static int pack_shard(Run *run, size_t j, unsigned char **buf, size_t *cap)
{
    const Options *o = run->o;
    Shard *sh = &run->shards[j];
    ShardWriterSettings s;
    shard_writer_default_settings(&s);
    s.pattern = o->pattern;
    s.first_shard = j;
    s.maxcount = 0;
    s.maxsize = 0;
    s.compression = o->compress < 0 ? SHARD_COMPRESSION_AUTO : o->compress;
    s.level = o->level;
    s.frame_size = o->frame_size;
    s.mtime = o->mtime;
    s.sync = o->fsync;
    s.checksums = o->checksums;
    ShardWriter *w;
    ShardError err;
    if (shard_writer_open(&w, &s, &err)) {
        record_error(run, "%s", err.message);
        return -1;
    }
    int rc = 0;
    for (size_t i = sh->first; i < sh->end && !atomic_load(&run->failed); i++) {
        const Item *x = &run->items->v[i];
        int e = read_file(x, buf, cap);
        char msg[1024];
        if (e) {
            if (e > 0)
                snprintf(msg, sizeof msg, "cannot read: %s", strerror(e));
            if (bad_input(run, x, e > 0 ? SKIP_UNREADABLE : SKIP_CHANGED,
                          e > 0 ? msg : "file changed size while packing"))
                continue;
            rc = -1;
            break;
        }
        int vr = o->verify ? shard_image_verify(*buf, x->size, msg, sizeof msg)
                           : (shard_image_format(*buf, x->size) ? 0 : SHARD_ERR_FORMAT);
        if (vr == SHARD_ERR_FORMAT && !o->verify)
            snprintf(msg, sizeof msg, "not an image (no JPEG, PNG, GIF, WebP, BMP, TIFF or PNM signature)");
        if (vr) {
            if (bad_input(run, x, vr == SHARD_ERR_FORMAT ? SKIP_NOT_IMAGE : SKIP_CORRUPT, msg))
                continue;
            rc = -1;
            break;
        }
        char *json = sample_json(x);
        char cls[24];
        ShardField f[3];
        ShardSample sample = {x->key, f, item_fields(x, f, *buf, cls, json ? json : "{}")};
        int wr = json ? shard_writer_add(w, &sample) : SHARD_ERR_NOMEM;
        free(json);
        if (wr) {
            record_error(run, "%s", json ? shard_writer_error(w) : "out of memory");
            rc = -1;
            break;
        }
        atomic_fetch_add(&run->samples_done, 1);
        atomic_fetch_add(&run->bytes_done, x->size);
    }
    if (!rc && !atomic_load(&run->failed)) {
        if (shard_writer_finish(w)) {
            record_error(run, "%s", shard_writer_error(w));
            rc = -1;
        } else if (shard_writer_count(w) == 1) {
            sh->info = *shard_writer_shard(w, 0);
            sh->url = xstrdup(sh->info.url);
            sh->info.url = sh->url;
            sh->written = 1;
        }
        sh->done = 1;
    }
    shard_writer_free(&w);
    return rc;
}

static void *worker(void *arg)
{
    Run *run = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    unsigned char *buf = NULL;
    size_t cap = 0;
    while (!atomic_load(&run->failed)) {
        size_t j = atomic_fetch_add(&run->next, 1);
        if (j >= run->shard_hi)
            break;
        if (pack_shard(run, j, &buf, &cap))
            break;
    }
    free(buf);
    pthread_mutex_lock(&run->lock);
    run->workers_left--;
    pthread_cond_signal(&run->cond);
    pthread_mutex_unlock(&run->lock);
    return NULL;
}

static uint64_t total_skipped(Run *run)
{
    uint64_t t = 0;
    for (int i = 0; i < NSKIP; i++)
        t += atomic_load(&run->skipped[i]);
    return t;
}

static void progress(Run *run, uint64_t total_samples, uint64_t total_bytes, double t0, int final)
{
    uint64_t n = atomic_load(&run->samples_done), b = atomic_load(&run->bytes_done);
    double dt = cli_now() - t0;
    double rate = dt > 0 ? (double)b / dt : 0;
    double eta = rate > 0 ? (double)(total_bytes - (b < total_bytes ? b : total_bytes)) / rate : 0;
    int width = 30;
    int fill = total_samples ? (int)((double)n * width / (double)total_samples) : width;
    char bar[64], hb[32], hr[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %llu/%llu samples  %s  %s/s  ETA %.0fs  %s", bar,
            (unsigned long long)n, (unsigned long long)total_samples, cli_human_bytes((double)b, hb, sizeof hb),
            cli_human_bytes(rate, hr, sizeof hr), eta, final ? "\n" : "");
    fflush(stderr);
}

/* ---- main ---------------------------------------------------------------------------- */

static char *default_manifest(const Options *o)
{
    /* out/train-%06d.tar.zst -> out/train.json: cut the name at the conversion, then drop
     * the separator before it. */
    char *p = xstrdup(o->pattern);
    char *slash = strrchr(p, '/');
    char *name = slash ? slash + 1 : p;
    char *pct = strchr(name, '%');
    if (pct)
        *pct = 0;
    size_t n = strlen(name);
    while (n && (name[n - 1] == '-' || name[n - 1] == '_' || name[n - 1] == '.'))
        name[--n] = 0;
    if (!n) {
        char *dot = strchr(pct ? pct + 1 : name, '.');
        (void)dot;
        strcpy(name, "dataset");
    }
    char suffix[64] = ".json";
    if (o->have_part)
        snprintf(suffix, sizeof suffix, ".part-%llu-of-%llu.json", (unsigned long long)o->part,
                 (unsigned long long)o->nparts);
    size_t len = strlen(p) + strlen(suffix) + 16;
    char *out = malloc(len);
    snprintf(out, len, "%s%s", p, suffix);
    free(p);
    return out;
}

static int check_output_dir(const char *pattern)
{
    char *d = dir_of(pattern);
    struct stat st;
    int rc = 0;
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
    free(d);
    return rc;
}

static int do_join(const char *out, char **parts, int n)
{
    if (!out)
        die_usage("--join needs -o MANIFEST");
    if (n == 0)
        die_usage("--join needs the part manifests");
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
    if (!rc) {
        char *stem = xstrdup(out);
        char *b = basename(stem);
        char *dot = strrchr(b, '.');
        if (dot && dot != b)
            *dot = 0;
        shard_manifest_set_name(joined, b);
        free(stem);
    }
    if (!rc && shard_manifest_write(joined, out, &err)) {
        fprintf(stderr, "shardpack: %s\n", err.message);
        rc = 1;
    }
    if (!rc)
        fprintf(stderr, "shardpack: joined %d manifests: %zu shards, %llu samples -> %s\n", n,
                shard_manifest_count(joined), (unsigned long long)shard_manifest_samples(joined), out);
    for (int i = 0; i < n; i++)
        shard_manifest_free(&m[i]);
    free(m);
    shard_manifest_free(&joined);
    return rc;
}

static char *options_json(const Options *o, int zstd)
{
    json_t *j = json_object();
    json_object_set_new(j, "maxcount", json_integer((json_int_t)o->maxcount));
    json_object_set_new(j, "maxsize", json_integer((json_int_t)o->maxsize));
    json_object_set_new(j, "compression", json_string(zstd ? "zstd" : "none"));
    json_object_set_new(j, "level", json_integer(o->level));
    json_object_set_new(j, "frame_size", json_integer((json_int_t)o->frame_size));
    json_object_set_new(j, "shuffle_seed", o->have_shuffle ? json_integer((json_int_t)o->seed) : json_null());
    json_object_set_new(j, "verify", json_boolean(o->verify));
    json_object_set_new(j, "mtime", json_integer(o->mtime));
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

int main(int argc, char **argv)
{
    Options o = {0};
    o.maxcount = 100000;
    o.maxsize = 3000000000ull;
    o.frame_size = 4u << 20;
    o.level = 3;
    o.compress = -1;
    o.jobs = 1;
    o.fsync = 1;
    o.checksums = 1;
    int join = 0;
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    if (sde && *sde)
        o.mtime = strtoll(sde, NULL, 10);

    enum { OPT_COMPRESS = 256, OPT_FRAME, OPT_SHUFFLE, OPT_VERIFY, OPT_ON_ERROR, OPT_LIST,
           OPT_PART, OPT_MANIFEST, OPT_NO_FSYNC, OPT_NO_CHECKSUM, OPT_JOIN };
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},   {"maxcount", required_argument, NULL, 'c'},
        {"maxsize", required_argument, NULL, 's'},  {"compress", required_argument, NULL, OPT_COMPRESS},
        {"level", required_argument, NULL, 'l'},    {"frame-size", required_argument, NULL, OPT_FRAME},
        {"shuffle", required_argument, NULL, OPT_SHUFFLE}, {"jobs", required_argument, NULL, 'j'},
        {"verify", no_argument, NULL, OPT_VERIFY},  {"on-error", required_argument, NULL, OPT_ON_ERROR},
        {"list", no_argument, NULL, OPT_LIST},      {"part", required_argument, NULL, OPT_PART},
        {"manifest", required_argument, NULL, OPT_MANIFEST},
        {"no-fsync", no_argument, NULL, OPT_NO_FSYNC}, {"no-checksum", no_argument, NULL, OPT_NO_CHECKSUM}, {"quiet", no_argument, NULL, 'q'},
        {"join", no_argument, NULL, OPT_JOIN},      {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, "o:c:s:l:j:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': o.pattern = optarg; break;
        case 'c':
            if (cli_parse_u64(optarg, &o.maxcount))
                die_usage("--maxcount wants a whole number");
            break;
        case 's':
            if (cli_parse_size(optarg, &o.maxsize))
                die_usage("--maxsize wants a size such as 1G, 500MB or 3e9");
            break;
        case OPT_COMPRESS:
            if (!strcmp(optarg, "none"))
                o.compress = SHARD_COMPRESSION_NONE;
            else if (!strcmp(optarg, "zstd"))
                o.compress = SHARD_COMPRESSION_ZSTD;
            else
                die_usage("--compress wants none or zstd");
            break;
        case 'l':
            if (cli_parse_u64(optarg, &v) || v < 1 || v > 22)
                die_usage("--level wants 1..22");
            o.level = (int)v;
            break;
        case OPT_FRAME:
            if (cli_parse_size(optarg, &o.frame_size) || o.frame_size == 0 || o.frame_size > (1u << 30))
                die_usage("--frame-size wants a size between 1 and 1GiB");
            break;
        case OPT_SHUFFLE:
            if (cli_parse_u64(optarg, &o.seed))
                die_usage("--shuffle wants a seed (a whole number)");
            o.have_shuffle = 1;
            break;
        case 'j':
            if (cli_parse_u64(optarg, &v) || v < 1 || v > 1024)
                die_usage("--jobs wants 1..1024");
            o.jobs = (int)v;
            break;
        case OPT_VERIFY: o.verify = 1; break;
        case OPT_ON_ERROR:
            if (!strcmp(optarg, "fail"))
                o.on_error = ON_ERROR_FAIL;
            else if (!strcmp(optarg, "skip"))
                o.on_error = ON_ERROR_SKIP;
            else
                die_usage("--on-error wants fail or skip");
            break;
        case OPT_LIST: o.list = 1; break;
        case OPT_PART: {
            char *slash = strchr(optarg, '/');
            char a[32] = {0};
            if (!slash || (size_t)(slash - optarg) >= sizeof a)
                die_usage("--part wants I/N, e.g. 0/4");
            memcpy(a, optarg, (size_t)(slash - optarg));
            if (cli_parse_u64(a, &o.part) || cli_parse_u64(slash + 1, &o.nparts) || o.nparts == 0 ||
                o.part >= o.nparts)
                die_usage("--part wants I/N with 0 <= I < N");
            o.have_part = 1;
            break;
        }
        case OPT_MANIFEST: o.manifest = optarg; break;
        case OPT_NO_FSYNC: o.fsync = 0; break;
        case OPT_NO_CHECKSUM: o.checksums = 0; break;
        case 'q': o.quiet = 1; break;
        case OPT_JOIN: join = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (join)
        return do_join(o.pattern, argv + optind, argc - optind);
    if (optind + 1 != argc)
        die_usage(optind >= argc ? "no SRC given" : "more than one SRC given");
    o.src = argv[optind];
    if (!o.pattern)
        die_usage("no output pattern: -o out/train-%06d.tar");
    if (!cli_ends_with(o.pattern, ".tar") && !cli_ends_with(o.pattern, ".tar.zst"))
        die_usage("the output pattern must end in .tar or .tar.zst");
    int zstd = cli_ends_with(o.pattern, ".tar.zst");
    if (o.compress == SHARD_COMPRESSION_ZSTD && !zstd)
        die_usage("--compress zstd wants a pattern ending in .tar.zst");
    if (o.compress == SHARD_COMPRESSION_NONE && zstd)
        die_usage("--compress none wants a pattern ending in .tar");
    {
        /* Let the library judge the pattern now rather than after the scan. */
        ShardWriterSettings s;
        shard_writer_default_settings(&s);
        s.pattern = o.pattern;
        s.level = o.level;
        s.frame_size = o.frame_size;
        ShardWriter *w;
        ShardError err;
        if (shard_writer_open(&w, &s, &err)) {
            fprintf(stderr, "shardpack: %s\n", err.message);
            return 2;
        }
        shard_writer_free(&w);
    }
    if (check_output_dir(o.pattern))
        return 1;
    struct stat st;
    if (stat(o.src, &st) != 0) {
        fprintf(stderr, "shardpack: %s: %s\n", o.src, strerror(errno));
        return 1;
    }
    if (!o.list && !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "shardpack: %s: not a folder (use --list for a list file)\n", o.src);
        return 1;
    }
    char *manifest = o.manifest ? xstrdup(o.manifest) : default_manifest(&o);
    if (o.mtime < 0)
        o.mtime = 0;

    double t0 = cli_now();
    Items items = {0};
    Run run;
    memset(&run, 0, sizeof run);
    run.o = &o;
    run.items = &items;
    pthread_mutex_init(&run.lock, NULL);
    pthread_cond_init(&run.cond, NULL);
    ScanCtx scan = {&o, &items, 0};
    int rc = o.list ? read_list(&scan, &run, o.src) : scan_folder(&scan, &run, o.src);
    if (!rc && items.n == 0) {
        fprintf(stderr, "shardpack: %s: no images found\n", o.src);
        rc = -1;
    }
    if (!rc)
        rc = assign_keys(&items);
    if (rc) {
        free(manifest);
        return 1;
    }
    if (o.have_shuffle)
        shuffle_items(&items, o.seed);
    plan_shards(&run);
    run.shard_lo = o.have_part ? (size_t)(o.part * run.nshards / o.nparts) : 0;
    run.shard_hi = o.have_part ? (size_t)((o.part + 1) * run.nshards / o.nparts) : run.nshards;
    atomic_store(&run.next, run.shard_lo);
    uint64_t total_samples = 0, total_bytes = 0;
    for (size_t j = run.shard_lo; j < run.shard_hi; j++)
        for (size_t i = run.shards[j].first; i < run.shards[j].end; i++) {
            total_samples++;
            total_bytes += items.v[i].size;
        }

    int tty = o.tty = !o.quiet && isatty(2);
    int nthreads = o.jobs;
    if ((size_t)nthreads > run.shard_hi - run.shard_lo)
        nthreads = (int)(run.shard_hi - run.shard_lo);
    pthread_t *threads = calloc((size_t)(nthreads ? nthreads : 1), sizeof *threads);
    run.workers_left = nthreads;
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&threads[i], NULL, worker, &run)) {
            fprintf(stderr, "shardpack: cannot start a thread\n");
            return 1;
        }
    }
    pthread_mutex_lock(&run.lock);
    while (run.workers_left > 0) {
        if (tty) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&run.cond, &run.lock, &ts);
            progress(&run, total_samples, total_bytes, t0, 0);
        } else {
            pthread_cond_wait(&run.cond, &run.lock);
        }
    }
    pthread_mutex_unlock(&run.lock);
    for (int i = 0; i < nthreads; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    if (tty)
        progress(&run, total_samples, total_bytes, t0, 1);

    int status = 0;
    size_t nwritten = 0;
    uint64_t stored = 0;
    if (atomic_load(&run.failed)) {
        fprintf(stderr, "shardpack: %s\n", run.error);
        fprintf(stderr, "shardpack: failed; no manifest written (complete shards already renamed "
                        "into place stay, the incomplete one was removed)\n");
        status = 1;
    } else {
        ShardManifest *m;
        ShardError err;
        char *opts = options_json(&o, zstd);
        char *stem = xstrdup(manifest);
        char *b = basename(stem);
        char *dot = strrchr(b, '.');
        if (dot)
            *dot = 0;
        char *pp = strstr(b, ".part-");
        if (pp)
            *pp = 0;
        if (shard_manifest_new(&m, b) || shard_manifest_set_options(m, opts ? opts : "{}") ||
            shard_manifest_set_classes(m, (const char *const *)items.classes, items.nclasses)) {
            fprintf(stderr, "shardpack: out of memory\n");
            return 1;
        }
        for (size_t j = run.shard_lo; j < run.shard_hi; j++) {
            if (!run.shards[j].written)
                continue;
            shard_manifest_add(m, &run.shards[j].info);
            nwritten++;
            stored += run.shards[j].info.filesize;
        }
        if (shard_manifest_write(m, manifest, &err)) {
            fprintf(stderr, "shardpack: %s\n", err.message);
            status = 1;
        }
        shard_manifest_free(&m);
        free(opts);
        free(stem);
    }
    if (!o.quiet && !status) {
        double dt = cli_now() - t0;
        char hb[32], hr[32];
        fprintf(stderr, "shardpack: %llu samples in %zu shards, %s in %.2f s (%s/s)",
                (unsigned long long)atomic_load(&run.samples_done), nwritten,
                cli_human_bytes((double)stored, hb, sizeof hb), dt,
                cli_human_bytes(dt > 0 ? (double)atomic_load(&run.bytes_done) / dt : 0, hr, sizeof hr));
        uint64_t sk = total_skipped(&run);
        if (sk) {
            fprintf(stderr, "; skipped %llu (", (unsigned long long)sk);
            const char *sep = "";
            for (int i = 0; i < NSKIP; i++) {
                uint64_t k = atomic_load(&run.skipped[i]);
                if (k) {
                    fprintf(stderr, "%s%llu %s", sep, (unsigned long long)k, skip_names[i]);
                    sep = ", ";
                }
            }
            fputc(')', stderr);
        }
        if (items.ignored)
            fprintf(stderr, "; ignored %llu files without an image extension", (unsigned long long)items.ignored);
        fprintf(stderr, "; manifest %s\n", manifest);
    }
    for (size_t i = 0; i < items.n; i++) {
        free(items.v[i].path);
        free(items.v[i].rel);
        free(items.v[i].key);
        free(items.v[i].field);
        free(items.v[i].extra);
    }
    free(items.v);
    for (size_t i = 0; i < items.nclasses; i++)
        free(items.classes[i]);
    free(items.classes);
    for (size_t j = 0; j < run.nshards; j++)
        free(run.shards[j].url);
    free(run.shards);
    free(manifest);
    return status;
}
