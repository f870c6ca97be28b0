/*
 * Brace patterns (braces.h), expanded as WebDataset's braceexpand does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "catalog/braces.h"

typedef struct Braces {
    const char *spec;
    ShardNameFn add;
    void *cookie;
} Braces;

static int expand(const char *s, Braces *b, char *err);

/* Expands a's first na bytes, then b's first nb, then c, joined. */
static int expand_joined(const char *a, size_t na, const char *b, size_t nb, const char *c,
                         Braces *x, char *err)
{
    size_t nc = strlen(c);
    char *s = malloc(na + nb + nc + 1);
    if (!s)
        return SHARD_ERR_NOMEM;
    memcpy(s, a, na);
    memcpy(s + na, b, nb);
    memcpy(s + na + nb, c, nc + 1);
    int rc = expand(s, x, err);
    free(s);
    return rc;
}

/* Expands the first brace group of s (recursively the rest) into l. */
static int expand(const char *s, Braces *x, char *err)
{
    const char *spec = x->spec;
    const char *open = strchr(s, '{');
    if (!open)
        return x->add(x->cookie, strdup(s), err);
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
        /* digits only: strtoull would take "-16" (as 2^64 - 16) and leading spaces */
        int ok = body[0] >= '0' && body[0] <= '9' && dots[2] >= '0' && dots[2] <= '9';
        unsigned long long a = strtoull(body, &end, 10);
        ok = ok && end == dots && body < dots;
        unsigned long long b = strtoull(dots + 2, &end, 10);
        ok = ok && end == close && dots + 2 < close;
        if (!ok)
            return shard_fail(err, SHARD_ERR_FORMAT, "'%s': '{%.*s}' is not a range like {000..123}",
                              spec, (int)blen, body);
        int width = (int)((size_t)(dots - body) > (size_t)(close - dots - 2) ? (size_t)(dots - body)
                                                                             : (size_t)(close - dots - 2));
        int pad = body[0] == '0' || dots[2] == '0';
        if (b < a || b - a >= SHARD_BRACES_MAX_RANGE)
            return shard_fail(err, SHARD_ERR_FORMAT, "'%s': range {%llu..%llu} is empty or too large",
                              spec, a, b);
        for (unsigned long long v = a;; v++) { /* to b included, which may be the largest */
            char num[32];
            int k = pad ? snprintf(num, sizeof num, "%0*llu", width, v) : snprintf(num, sizeof num, "%llu", v);
            int rc = expand_joined(s, pre, num, (size_t)k, rest, x, err);
            if (rc)
                return rc;
            if (v == b)
                break;
        }
        return 0;
    }
    /* {a,b,c}: alternatives, split on top-level commas */
    const char *start = body;
    depth = 0;
    for (const char *p = body;; p++) {
        if (p == close || (*p == ',' && depth == 0)) {
            int rc = expand_joined(s, pre, start, (size_t)(p - start), rest, x, err);
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

int shard_braces_expand(const char *pattern, const char *spec, ShardNameFn add, void *cookie,
                        char *err)
{
    Braces x = {spec, add, cookie};
    return expand(pattern, &x, err);
}
