/*
 * Reading DALI's webdataset index, v1.1 ("ext offset size" per member) and v1.2
 * ("ext offset size name"), one line per sample, after a "vX.Y N" header.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"

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

int shard_index_load(ShardIndex *idx, const char *path, char *err)
{
    memset(idx, 0, sizeof *idx);
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return shard_fail(err, shard_errno_code(e), "%s: cannot open the index: %s", path,
                          strerror(e));
    }
    ShardBuf b = {0};
    char chunk[65536];
    size_t k;
    int rc = 0;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        if ((rc = shard_buf_append(&b, chunk, k)))
            break;
    fclose(f);
    if (rc || shard_buf_append(&b, "", 1)) {
        shard_buf_free(&b);
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", path);
    }
    idx->text = (char *)b.data;
    char *save = NULL;
    char *line = strtok_r(idx->text, "\n", &save);
    char *tok[2] = {0};
    char *ts = NULL;
    if (line) {
        tok[0] = strtok_r(line, " \t\r", &ts);
        tok[1] = strtok_r(NULL, " \t\r", &ts);
    }
    if (!tok[0] || !tok[1] || (strcmp(tok[0], "v1.1") && strcmp(tok[0], "v1.2")) ||
        parse_u64(tok[1], &idx->nsamples)) {
        shard_index_clear(idx);
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: line 1: not a DALI webdataset index (expected \"v1.2 N\")", path);
    }
    idx->version = tok[0][3] == '2' ? 12 : 11;
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
            if (idx->nentries == cap) {
                cap *= 2;
                ShardIndexEntry *q = realloc(idx->entries, cap * sizeof *q);
                if (!q) {
                    shard_index_clear(idx);
                    return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", path);
                }
                idx->entries = q;
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
