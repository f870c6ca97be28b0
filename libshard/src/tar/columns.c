/*
 * Columns beside the index (columns.h): the text of formats/columns.md, parsed with every
 * count checked against the text's size before anything is allocated from it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/error.h"
#include "shard/image.h"
#include "source/open.h"
#include "tar/columns.h"

#define VALUE_MAX 2147483647u
/* As an index's limit: 22 bytes a sample at most, millions of samples a shard. */
#define MAX_COLUMNS_BYTES ((size_t)256 << 20)

const char *const shard_geometry_names[SHARD_GEOMETRY_NCOLS] = {"width", "height"};

int shard_columns_better_image(const char *field, int *rank)
{
    static const char *const fields[] = {"jpg", "jpeg", "png", "webp"};
    for (int i = 0; i < (int)(sizeof fields / sizeof *fields); i++)
        if (!strcasecmp(field, fields[i])) { /* as the loader reads fields: lower-cased */
            if (*rank >= 0 && *rank <= i)
                return 0;
            *rank = i;
            return 1;
        }
    return 0;
}

const ShardFieldView *shard_columns_image_of(const ShardSampleView *v)
{
    const ShardFieldView *image = NULL;
    int rank = -1;
    for (size_t k = 0; k < v->nfields; k++)
        if (shard_columns_better_image(v->fields[k].name, &rank))
            image = &v->fields[k];
    return image;
}

int shard_columns_geometry(const void *data, size_t size, uint32_t out[2], char *why,
                           size_t why_size)
{
    int w, h;
    char scratch[8];
    int rc = shard_image_geometry(data, size, &w, &h, NULL, why ? why : scratch,
                                  why ? why_size : sizeof scratch);
    if (rc == SHARD_AGAIN && why)
        snprintf(why, why_size, "the image ends inside its header");
    out[0] = rc ? SHARD_COLUMN_NONE : (uint32_t)w;
    out[1] = rc ? SHARD_COLUMN_NONE : (uint32_t)h;
    return rc;
}

void shard_columns_clear(ShardColumns *c)
{
    free(c->text);
    free(c->v);
    memset(c, 0, sizeof *c);
}

int shard_columns_find(const ShardColumns *c, const char *name)
{
    for (size_t k = 0; k < c->ncols; k++)
        if (!strcmp(c->names[k], name))
            return (int)k;
    return -1;
}

uint32_t shard_columns_value(const ShardColumns *c, uint64_t i, int k)
{
    return c->v[i * c->ncols + (size_t)k];
}

static int fail(ShardColumns *c, char *err, const char *name, uint64_t line, const char *what)
{
    snprintf(err, SHARD_ERROR_MAX, "%.300s: line %llu: %s", name, (unsigned long long)line, what);
    shard_columns_clear(c);
    return SHARD_ERR_FORMAT;
}

/* A decimal value (no sign, no leading zero) or "-", ending at a space or the line's end. */
static int value(const char **p, const char *end, uint32_t *out)
{
    const char *s = *p;
    if (s < end && *s == '-') {
        *out = SHARD_COLUMN_NONE;
        *p = s + 1;
        return 0;
    }
    if (s >= end || *s < '0' || *s > '9' || (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9'))
        return -1;
    unsigned long long v = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        v = v * 10 + (unsigned)(*s - '0');
        if (v > VALUE_MAX)
            return -1;
        s++;
    }
    *out = (uint32_t)v;
    *p = s;
    return 0;
}

static int name_ok(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.'))
            return 0;
    return 1;
}

int shard_columns_parse(ShardColumns *c, char *text, size_t len, const char *name, char *err)
{
    memset(c, 0, sizeof *c);
    c->text = text;
    char *nl = memchr(text, '\n', len);
    if (!nl)
        return fail(c, err, name, 1, "no header line ending in LF");
    *nl = 0;
    unsigned version;
    unsigned long long n;
    int at = 0;
    if (sscanf(text, "libshard-cols %u %llu %n", &version, &n, &at) != 2 || !at)
        return fail(c, err, name, 1, "not a columns file (libshard-cols VERSION COUNT COLUMNS)");
    if (version != 1)
        return fail(c, err, name, 1, "a version this libshard does not read (it reads 1)");
    char *save = NULL;
    for (char *tok = strtok_r(text + at, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon || strcmp(colon + 1, "u32"))
            return fail(c, err, name, 1, "a column that is not NAME:u32");
        *colon = 0;
        if (!name_ok(tok) || c->ncols == SHARD_COLUMNS_MAX)
            return fail(c, err, name, 1, "a column name of other characters, or too many");
        c->names[c->ncols++] = tok;
    }
    if (!c->ncols)
        return fail(c, err, name, 1, "no columns");
    /* each line holds a value per column, at least two bytes each */
    size_t rest = len - (size_t)(nl + 1 - text);
    if (n > rest / (2 * c->ncols))
        return fail(c, err, name, 1, "a count larger than the file could hold");
    c->n = n;
    if (n && !(c->v = malloc((size_t)n * c->ncols * sizeof *c->v))) {
        shard_columns_clear(c);
        snprintf(err, SHARD_ERROR_MAX, "%.300s: out of memory for %llu samples", name,
                 (unsigned long long)n);
        return SHARD_ERR_NOMEM;
    }
    const char *p = nl + 1, *end = text + len;
    for (uint64_t i = 0; i < n; i++) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            return fail(c, err, name, i + 2, "fewer lines than the count, or no LF at the end");
        for (size_t k = 0; k < c->ncols; k++) {
            if (k && (p >= eol || *p++ != ' '))
                return fail(c, err, name, i + 2, "fewer values than columns");
            if (value(&p, eol, &c->v[i * c->ncols + k]))
                return fail(c, err, name, i + 2, "a value that is not a whole number up to "
                                                 "2147483647 or '-'");
        }
        if (p != eol)
            return fail(c, err, name, i + 2, "more values than columns");
        p = eol + 1;
    }
    if (p != end)
        return fail(c, err, name, n + 2, "more lines than the count");
    return 0;
}

int shard_columns_load(ShardColumns *c, const char *url, ShardRemote *remote, char *err)
{
    memset(c, 0, sizeof *c);
    ShardBuf b = {0};
    int rc = shard_source_slurp(url, remote, &b, MAX_COLUMNS_BYTES, err);
    if (rc) {
        shard_buf_free(&b);
        return rc;
    }
    return shard_columns_parse(c, (char *)b.data, b.len, url, err);
}

char *shard_columns_format(const char *const *names, size_t ncols, const uint32_t *v, uint64_t n,
                           size_t *len)
{
    size_t cap = 64, at = 0;
    for (size_t k = 0; k < ncols; k++)
        cap += strlen(names[k]) + 6;
    cap += (size_t)n * ncols * 11;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    at += (size_t)snprintf(out, cap, "libshard-cols 1 %llu", (unsigned long long)n);
    for (size_t k = 0; k < ncols; k++)
        at += (size_t)snprintf(out + at, cap - at, " %s:u32", names[k]);
    out[at++] = '\n';
    for (uint64_t i = 0; i < n; i++) {
        for (size_t k = 0; k < ncols; k++) {
            uint32_t x = v[i * ncols + k];
            if (k)
                out[at++] = ' ';
            if (x == SHARD_COLUMN_NONE)
                out[at++] = '-';
            else
                at += (size_t)snprintf(out + at, cap - at, "%u", x);
        }
        out[at++] = '\n';
    }
    out[at] = 0;
    *len = at;
    return out;
}
