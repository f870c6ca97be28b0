/*
 * Reading DALI's webdataset index, v1.1 ("ext offset size" per member) and v1.2
 * ("ext offset size name"), one line per sample, after a "vX.Y N" header.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "source/open.h"
#include "tar/idx.h"

/* Indexes are text with a line per sample: 256 MiB lists millions of samples. */
#define MAX_INDEX_BYTES ((size_t)256 << 20)

static int parse_u64(const char *s, uint64_t *v)
{
    if (!*s)
        return -1;
    uint64_t x = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10)
            return -1;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    return 0;
}

void shard_index_clear(ShardIndex *idx)
{
    free(idx->text);
    free(idx->entries);
    free(idx->first);
    memset(idx, 0, sizeof *idx);
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* The first line's version and sample count; -1 when it is not a valid header. */
static int parse_header(char *line, int *version, uint64_t *n)
{
    char *ts = NULL;
    char *v = strtok_r(line, " \t\r", &ts);
    char *count = strtok_r(NULL, " \t\r", &ts);
    if (!v || !count || (strcmp(v, "v1.1") && strcmp(v, "v1.2")) || parse_u64(count, n))
        return -1;
    *version = v[3] == '2' ? 12 : 11;
    return 0;
}

int64_t shard_index_header_count(const char *text, size_t len)
{
    char line[64];
    size_t k = 0;
    while (k < len && k < sizeof line - 1 && text[k] != '\n')
        line[k] = text[k], k++;
    line[k] = 0;
    int version;
    uint64_t n;
    if ((k == sizeof line - 1 && k < len && text[k] != '\n') || parse_header(line, &version, &n) ||
        n > INT64_MAX)
        return -1;
    return (int64_t)n;
}

int shard_index_load(ShardIndex *idx, const char *url, ShardRemote *remote, char *err)
{
    memset(idx, 0, sizeof *idx);
    ShardBuf b = {0};
    int rc = shard_source_slurp(url, remote, &b, MAX_INDEX_BYTES, err);
    if (rc) {
        shard_buf_free(&b);
        return rc;
    }
    return shard_index_parse(idx, (char *)b.data, b.len, url, err);
}

int shard_index_parse(ShardIndex *idx, char *text, size_t len, const char *path, char *err)
{
    memset(idx, 0, sizeof *idx);
    idx->text = text;
    char *save = NULL;
    char *line = strtok_r(idx->text, "\n", &save);
    if (!line || parse_header(line, &idx->version, &idx->nsamples)) {
        shard_index_clear(idx);
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: line 1: not a DALI webdataset index (expected \"v1.2 N\")", path);
    }
    /* Every sample takes a line of at least "e 0 0\n": a count the text cannot hold is a
     * lie, refused before it sizes an allocation. */
    if (idx->nsamples > len / 6) {
        uint64_t n = idx->nsamples;
        shard_index_clear(idx);
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: line 1: the header promises %llu samples, more than its %zu bytes "
                          "can list",
                          path, (unsigned long long)n, len);
    }
    int per = idx->version == 12 ? 4 : 3;
    idx->first = malloc((idx->nsamples + 1) * sizeof *idx->first);
    size_t cap = idx->nsamples * 3 + 16;
    idx->entries = malloc(cap * sizeof *idx->entries);
    if (!idx->first || !idx->entries) {
        shard_index_clear(idx);
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", path);
    }
    for (uint64_t s = 0; s < idx->nsamples; s++) {
        line = strtok_r(NULL, "\n", &save);
        uint64_t lineno = s + 2;
        if (!line) {
            uint64_t n = idx->nsamples;
            shard_index_clear(idx);
            return shard_fail(err, SHARD_ERR_FORMAT,
                              "%s: line %llu: the header promises %llu samples, the file ends "
                              "after %llu",
                              path, (unsigned long long)lineno, (unsigned long long)n,
                              (unsigned long long)s);
        }
        idx->first[s] = idx->nentries;
        char *p = line;
        for (;;) {
            char *t[4] = {0};
            int got = 0;
            for (; got < per; got++) {
                while (is_ws(*p))
                    p++;
                if (!*p)
                    break;
                t[got] = p;
                while (*p && !is_ws(*p))
                    p++;
                if (*p)
                    *p++ = 0;
            }
            if (got == 0)
                break;
            ShardIndexEntry e = {t[0], per == 4 ? t[3] : NULL, 0, 0};
            if (got < per || parse_u64(t[1], &e.offset) || parse_u64(t[2], &e.size)) {
                shard_index_clear(idx);
                return shard_fail(err, SHARD_ERR_FORMAT,
                                  "%s: line %llu: a member needs \"ext offset size%s\" with "
                                  "decimal offset and size",
                                  path, (unsigned long long)lineno, per == 4 ? " name" : "");
            }
            if (shard_array_grow(&idx->entries, &cap, idx->nentries + 1, sizeof *idx->entries, 16)) {
                shard_index_clear(idx);
                return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", path);
            }
            idx->entries[idx->nentries++] = e;
        }
        if (idx->first[s] == idx->nentries) {
            shard_index_clear(idx);
            return shard_fail(err, SHARD_ERR_FORMAT, "%s: line %llu: a sample with no members",
                              path, (unsigned long long)lineno);
        }
    }
    idx->first[idx->nsamples] = idx->nentries;
    return 0;
}
