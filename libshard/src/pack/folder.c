/*
 * An ImageFolder tree as a pack scan reads it (folder.h): class = first-level folder,
 * classes numbered in sorted order, deeper nesting allowed, links followed (as ImageFolder
 * does) to a bounded depth, hidden entries ignored, other files counted and ignored.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/error.h"
#include "pack/folder.h"
#include "pack/inputs.h"
#include "shard/names.h"

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
        if (!(v[n] = strdup(e->d_name)))
            goto oom;
        n++;
    }
    closedir(d);
    if (!v) {
        c->nomem = 1;
        return NULL;
    }
    qsort(v, n, sizeof *v, shard_scan_name_cmp);
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

/* Walks a class folder depth-first in sorted order, following links as ImageFolder does;
 * depth is bounded so that a link loop ends. */
static void walk(Scan *c, const char *root, const char *rel, long label, int depth)
{
    char *dir = shard_scan_join(c, root, rel);
    if (!dir)
        return;
    size_t n;
    int err;
    char **names = list_dir(c, dir, &n, &err);
    if (!names) {
        if (err) {
            char msg[256];
            snprintf(msg, sizeof msg, "cannot read folder: %s", strerror(err));
            shard_scan_bad(c, dir, SHARD_PACK_UNREADABLE, msg);
        }
        free(dir);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char *r = c->nomem ? NULL : shard_scan_join(c, rel, names[i]);
        char *full = r ? shard_scan_join(c, root, r) : NULL;
        struct stat st;
        if (!full) {
            /* out of memory: flagged, the rest is only freed */
        } else if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (depth < 64)
                walk(c, root, r, label, depth + 1);
        } else {
            const char *ext = shard_scan_image_ext(names[i]);
            if (ext) {
                shard_scan_add(c, full, r, ext, label, label, NULL);
            } else {
                c->ignored++;
                shard_scan_note(c, full, SHARD_PACK_IGNORED, "no image extension");
            }
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

int shard_scan_folder(Scan *c, const char *root, ShardError *err)
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
        char *full = c->nomem ? NULL : shard_scan_join(c, root, names[i]);
        struct stat st;
        if (full && stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (!shard_utf8_valid(names[i], strlen(names[i]))) {
                shard_scan_bad(c, full, SHARD_PACK_BAD_NAME, "class folder name is not valid UTF-8");
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
        shard_fail(msg, SHARD_ERR_INVALID,
                   "%s: no class folders (ImageFolder layout: SRC/CLASS/IMAGE); a flat folder, "
                   "or any other layout, packs from a list of its images and labels "
                   "(shardpack --list, list=True in Python)",
                   root);
        return shard_report(err, SHARD_ERR_INVALID, msg);
    }
    for (size_t k = 0; k < c->nclasses && !c->nomem; k++) {
        size_t before = c->n;
        walk(c, root, c->classes[k], (long)k, 0);
        char *dir = c->n == before && !c->nomem ? shard_scan_join(c, root, c->classes[k]) : NULL;
        if (dir) { /* a class no sample has: a model's output for it never trains */
            char what[96];
            snprintf(what, sizeof what, "class folder with no images (class %zu); torchvision's "
                                        "ImageFolder refuses it", k);
            shard_scan_bad(c, dir, SHARD_PACK_EMPTY_CLASS, what);
            free(dir);
        }
    }
    if (c->nomem)
        return SHARD_ERR_NOMEM;
    /* formats/shard.md 1.6: samples in byte-wise order of their relative paths. */
    qsort(c->v, c->n, sizeof *c->v, item_cmp);
    return 0;
}
