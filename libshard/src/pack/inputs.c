/*
 * What a pack scan finds (inputs.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/error.h"
#include "pack/inputs.h"
#include "remote/store.h"
#include "shard/names.h"

static const char *const image_exts[] = {"jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif", "tiff", "webp"};

const char *shard_scan_image_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name)
        return NULL;
    for (size_t i = 0; i < sizeof image_exts / sizeof *image_exts; i++)
        if (!strcasecmp(dot + 1, image_exts[i]))
            return dot + 1;
    return NULL;
}

char *shard_scan_dup(Scan *c, const char *s)
{
    char *p = strdup(s);
    if (!p)
        c->nomem = 1;
    return p;
}

char *shard_scan_join(Scan *c, const char *a, const char *b)
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

void shard_scan_free(Scan *c)
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

/* A bad input: left out when the callback says so, else remembered as the scan's error. */
void shard_scan_bad(Scan *c, const char *path, ShardPackBad reason, const char *what)
{
    if (c->cb && c->cb->on_bad && c->cb->on_bad(c->cb->cookie, path, reason, what))
        return;
    if (!c->failed) {
        c->first_code = reason == SHARD_PACK_UNREADABLE ? SHARD_ERR_IO : SHARD_ERR_FORMAT;
        shard_fail(c->first, c->first_code, "%s: %s", path, what);
    }
    c->failed = 1;
}

void shard_scan_note(Scan *c, const char *path, ShardPackBad reason, const char *what)
{
    if (c->cb && c->cb->on_bad)
        c->cb->on_bad(c->cb->cookie, path, reason, what);
}

void shard_scan_add(Scan *c, const char *path, const char *rel, const char *ext, long label,
                     long class_index, const char *extra)
{
    if (!shard_utf8_valid(path, strlen(path))) {
        shard_scan_bad(c, path, SHARD_PACK_BAD_NAME, "file name is not valid UTF-8");
        return;
    }
    int remote = (shard_store_can(path) & SHARD_STORE_COSTLY) != 0;
    struct stat st;
    memset(&st, 0, sizeof st);
    if (remote) {
        st.st_mode = S_IFREG;
        st.st_size = 1; /* asked for later */
    } else if (stat(path, &st) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot stat: %s", strerror(errno));
        shard_scan_bad(c, path, SHARD_PACK_UNREADABLE, msg);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        shard_scan_bad(c, path, SHARD_PACK_UNREADABLE, "not a regular file");
        return;
    }
    if (st.st_size == 0) {
        shard_scan_bad(c, path, SHARD_PACK_EMPTY, "zero-byte file");
        return;
    }
    if (shard_array_grow(&c->v, &c->cap, c->n + 1, sizeof *c->v, 1024)) {
        c->nomem = 1;
        return;
    }
    Item *x = &c->v[c->n];
    memset(x, 0, sizeof *x);
    x->path = shard_scan_dup(c, path);
    x->rel = shard_scan_dup(c, rel);
    x->field = shard_scan_dup(c, ext);
    x->extra = extra ? shard_scan_dup(c, extra) : NULL;
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

int shard_scan_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}
