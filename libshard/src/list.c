/*
 * Shard lists: brace patterns as WebDataset (braceexpand) writes them, and manifests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "shard/file.h"
#include "shard/manifest.h"

typedef struct List {
    char **v;
    size_t n, cap;
} List;

static int list_push(List *l, char *s)
{
    if (!s)
        return SHARD_ERR_NOMEM;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **p = realloc(l->v, cap * sizeof *p);
        if (!p) {
            free(s);
            return SHARD_ERR_NOMEM;
        }
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

static int expand(const char *s, List *l, char *err, const char *spec);

/* Expands a's first na bytes, then b's first nb, then c, joined. */
static int expand_joined(const char *a, size_t na, const char *b, size_t nb, const char *c,
                         List *l, char *err, const char *spec)
{
    size_t nc = strlen(c);
    char *s = malloc(na + nb + nc + 1);
    if (!s)
        return SHARD_ERR_NOMEM;
    memcpy(s, a, na);
    memcpy(s + na, b, nb);
    memcpy(s + na + nb, c, nc + 1);
    int rc = expand(s, l, err, spec);
    free(s);
    return rc;
}

#define MAX_EXPANSION 100000000ull

/* Expands the first brace group of s (recursively the rest) into l. */
static int expand(const char *s, List *l, char *err, const char *spec)
{
    const char *open = strchr(s, '{');
    if (!open)
        return list_push(l, shard_strdup(s));
    int depth = 0;
    const char *close = NULL;
    for (const char *p = open; *p; p++) {
        if (*p == '{')
            depth++;
        else if (*p == '}' && --depth == 0) {
            close = p;
            break;
        }
    }
    if (!close)
        return shard_fail(err, SHARD_ERR_FORMAT, "'%s': unmatched '{' at character %zu", spec,
                          (size_t)(open - s) + 1);
    size_t pre = (size_t)(open - s);
    const char *body = open + 1;
    size_t blen = (size_t)(close - body);
    const char *rest = close + 1;
    /* {A..B}: numeric range, zero padding from the wider bound */
    const char *dots = strstr(body, "..");
    if (dots && dots < close && !memchr(body, ',', blen)) {
        char *end;
        unsigned long long a = strtoull(body, &end, 10);
        int ok = end == dots && body < dots;
        unsigned long long b = strtoull(dots + 2, &end, 10);
        ok = ok && end == close && dots + 2 < close;
        if (!ok)
            return shard_fail(err, SHARD_ERR_FORMAT, "'%s': '{%.*s}' is not a range like {000..123}",
                              spec, (int)blen, body);
        int width = (int)((size_t)(dots - body) > (size_t)(close - dots - 2) ? (size_t)(dots - body)
                                                                             : (size_t)(close - dots - 2));
        int pad = body[0] == '0' || dots[2] == '0';
        if (b < a || b - a >= MAX_EXPANSION)
            return shard_fail(err, SHARD_ERR_FORMAT, "'%s': range {%llu..%llu} is empty or too large",
                              spec, a, b);
        for (unsigned long long v = a; v <= b; v++) {
            char num[32];
            int k = pad ? snprintf(num, sizeof num, "%0*llu", width, v) : snprintf(num, sizeof num, "%llu", v);
            int rc = expand_joined(s, pre, num, (size_t)k, rest, l, err, spec);
            if (rc)
                return rc;
        }
        return 0;
    }
    /* {a,b,c}: alternatives, split on top-level commas */
    const char *start = body;
    depth = 0;
    for (const char *p = body;; p++) {
        if (p == close || (*p == ',' && depth == 0)) {
            int rc = expand_joined(s, pre, start, (size_t)(p - start), rest, l, err, spec);
            if (rc)
                return rc;
            if (p == close)
                break;
            start = p + 1;
        } else if (*p == '{') {
            depth++;
        } else if (*p == '}') {
            depth--;
        }
    }
    return 0;
}

int shard_urls_expand(const char *spec, char ***out, size_t *n, ShardError *err)
{
    *out = NULL;
    *n = 0;
    List l = {0};
    char msg[SHARD_ERROR_MAX];
    int rc = 0;
    if (shard_ends_with(spec, ".json") && strncmp(spec, "pipe:", 5)) {
        ShardManifest *m;
        ShardError e;
        rc = shard_manifest_read(&m, spec, &e);
        if (rc)
            return shard_report(err, rc, e.message);
        for (size_t i = 0; i < shard_manifest_count(m) && !rc; i++)
            rc = list_push(&l, shard_strdup(shard_manifest_shard(m, i)->url));
        shard_manifest_free(&m);
        if (rc)
            shard_fail(msg, rc, "out of memory");
    } else if (!strncmp(spec, "pipe:", 5)) {
        rc = list_push(&l, shard_strdup(spec));
        if (rc)
            shard_fail(msg, rc, "out of memory");
    } else {
        rc = expand(spec, &l, msg, spec);
        if (rc == SHARD_ERR_NOMEM)
            shard_fail(msg, rc, "out of memory");
    }
    if (rc) {
        shard_urls_free(l.v, l.n);
        return shard_report(err, rc, msg);
    }
    *out = l.v;
    *n = l.n;
    return 0;
}

void shard_urls_free(char **urls, size_t n)
{
    if (!urls)
        return;
    for (size_t i = 0; i < n; i++)
        free(urls[i]);
    free(urls);
}
