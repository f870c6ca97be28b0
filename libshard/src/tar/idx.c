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
#include "shard/names.h"
#include "source/open.h"
#include "tar/idx.h"
#include "tar/tar.h"

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

int shard_index_load(ShardIndex *idx, const char *url, ShardRemote *remote,
                     const ShardFileSettings *lim, char *err)
{
    memset(idx, 0, sizeof *idx);
    ShardBuf b = {0};
    int rc = shard_source_slurp(url, remote, &b, MAX_INDEX_BYTES, err);
    if (rc) {
        shard_buf_free(&b);
        return rc;
    }
    return shard_index_parse(idx, (char *)b.data, b.len, url, lim, err);
}

/* A line's limits and what the tar allows: a failure message, or NULL. prev_end: where the
 * member before e ends on a block (0 before the first). */
static const char *check_entry(const ShardIndexEntry *e, uint64_t prev_end, uint64_t max_member,
                               char *why, size_t n)
{
    if (e->size > max_member)
        snprintf(why, n, "member '%s' of %llu bytes, more than the limit of %llu "
                 "(max_member_size)", e->name ? e->name : e->ext, (unsigned long long)e->size,
                 (unsigned long long)max_member);
    else if (e->offset % 512 || e->offset < prev_end + 512)
        snprintf(why, n, "member '%s' at offset %llu: a tar member's data start on a 512-byte "
                 "block after its header, and after the member before it (which ends at %llu)",
                 e->name ? e->name : e->ext, (unsigned long long)e->offset,
                 (unsigned long long)prev_end);
    else if (e->size > UINT64_MAX - 511 - e->offset)
        snprintf(why, n, "member '%s' at offset %llu: size %llu overflows",
                 e->name ? e->name : e->ext, (unsigned long long)e->offset,
                 (unsigned long long)e->size);
    else
        return NULL;
    return why;
}

/* The key of a v1.2 line's member name, checked against its ext: 0, or -1 (*why set). */
static int entry_key(const ShardIndexEntry *e, const char **key, size_t *klen, char *why,
                     size_t n)
{
    size_t ks = 0;
    const char *field = NULL;
    if (shard_name_split(e->name, &ks, klen, &field) || strcmp(field, e->ext)) {
        snprintf(why, n, "member '%s' is not field '%s' of a sample", e->name, e->ext);
        return -1;
    }
    *key = e->name + ks;
    return 0;
}

/* What parsing an index carries from line to line. */
typedef struct Parse {
    ShardIndex *idx;
    size_t cap;   /* entries allocated */
    int per;      /* words per member: 4 in v1.2 (with the name), else 3 */
    uint64_t max_member, max_sample, max_fields;
    uint64_t prev_end;    /* where the last member's data ended, to 512 bytes */
    const char *prev_key; /* the sample before's key (v1.2), and its length */
    size_t prev_klen;
} Parse;

/* The next "ext offset size [name]" of a line, advancing *p: its words in t; how many. */
static int next_member(char **p, int per, char *t[4])
{
    int got = 0;
    for (; got < per; got++) {
        while (is_ws(**p))
            (*p)++;
        if (!**p)
            break;
        t[got] = *p;
        while (**p && !is_ws(**p))
            (*p)++;
        if (**p)
            *(*p)++ = 0;
    }
    return got;
}

/* Why member e cannot be the next of a sample whose members so far total total bytes and
 * hold the key key (NULL: none yet), or NULL; *k, *kl its own key (v1.2). */
static const char *member_problem(const Parse *ps, const ShardIndexEntry *e, uint64_t s,
                                  uint64_t total, const char *key, size_t klen,
                                  const char **k, size_t *kl, char *why, size_t n)
{
    const char *bad = check_entry(e, ps->prev_end, ps->max_member, why, n);
    if (!bad && ps->idx->nentries - ps->idx->first[s] >= ps->max_fields)
        snprintf(why, n, "a sample of more than %llu members (max_fields)",
                 (unsigned long long)ps->max_fields), bad = why;
    else if (!bad && e->size > ps->max_sample - total)
        snprintf(why, n, "member '%s' takes the sample to %llu bytes, more than the limit of "
                 "%llu (max_sample_size)", e->name ? e->name : e->ext,
                 (unsigned long long)(total + e->size), (unsigned long long)ps->max_sample),
            bad = why;
    else if (!bad && e->name && entry_key(e, k, kl, why, n))
        bad = why;
    else if (!bad && e->name && key && (*kl != klen || memcmp(*k, key, *kl)))
        snprintf(why, n, "member '%s' is not of sample '%.*s'", e->name, (int)klen, key),
            bad = why;
    return bad;
}

/* Sample s's line: its members appended to the index. 0, SHARD_ERR_NOMEM, or
 * SHARD_ERR_FORMAT with why saying what is wrong with the line. */
static int parse_sample(Parse *ps, uint64_t s, char *line, char *why, size_t n)
{
    ShardIndex *idx = ps->idx;
    idx->first[s] = idx->nentries;
    uint64_t total = 0;
    const char *key = NULL;
    size_t klen = 0;
    for (char *p = line;;) {
        char *t[4] = {0};
        int got = next_member(&p, ps->per, t);
        if (got == 0)
            break;
        ShardIndexEntry e = {t[0], ps->per == 4 ? t[3] : NULL, 0, 0};
        if (got < ps->per || parse_u64(t[1], &e.offset) || parse_u64(t[2], &e.size)) {
            snprintf(why, n, "a member needs \"ext offset size%s\" with decimal offset and size",
                     ps->per == 4 ? " name" : "");
            return SHARD_ERR_FORMAT;
        }
        const char *k = NULL;
        size_t kl = 0;
        if (member_problem(ps, &e, s, total, key, klen, &k, &kl, why, n))
            return SHARD_ERR_FORMAT;
        if (e.name && !key)
            key = k, klen = kl;
        total += e.size;
        ps->prev_end = (e.offset + e.size + 511) / 512 * 512;
        if (shard_array_grow(&idx->entries, &ps->cap, idx->nentries + 1, sizeof *idx->entries,
                             16))
            return SHARD_ERR_NOMEM;
        idx->entries[idx->nentries++] = e;
    }
    if (idx->first[s] == idx->nentries) {
        snprintf(why, n, "a sample with no members");
        return SHARD_ERR_FORMAT;
    }
    if (key && ps->prev_key && klen == ps->prev_klen && !memcmp(key, ps->prev_key, klen)) {
        snprintf(why, n, "sample '%.*s' again (the line before lists it)", (int)klen, key);
        return SHARD_ERR_FORMAT;
    }
    ps->prev_key = key, ps->prev_klen = klen;
    return 0;
}

int shard_index_parse(ShardIndex *idx, char *text, size_t len, const char *path,
                      const ShardFileSettings *lim, char *err)
{
    Parse ps = {
        .idx = idx,
        .max_member = lim && lim->max_member_size ? lim->max_member_size
                                                  : SHARD_DEFAULT_MAX_MEMBER,
        .max_sample = lim && lim->max_sample_size ? lim->max_sample_size
                                                  : SHARD_DEFAULT_MAX_SAMPLE,
        .max_fields = lim && lim->max_fields ? lim->max_fields : SHARD_DEFAULT_MAX_FIELDS,
    };
    char why[SHARD_ERROR_MAX / 2];
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
    ps.per = idx->version == 12 ? 4 : 3;
    idx->first = malloc((idx->nsamples + 1) * sizeof *idx->first);
    ps.cap = idx->nsamples * 3 + 16;
    idx->entries = malloc(ps.cap * sizeof *idx->entries);
    int rc = !idx->first || !idx->entries ? SHARD_ERR_NOMEM : 0;
    uint64_t s = 0;
    for (; s < idx->nsamples && !rc; s++) {
        line = strtok_r(NULL, "\n", &save);
        if (!line) {
            snprintf(why, sizeof why, "the header promises %llu samples, the file ends after "
                     "%llu", (unsigned long long)idx->nsamples, (unsigned long long)s);
            rc = SHARD_ERR_FORMAT;
            break;
        }
        rc = parse_sample(&ps, s, line, why, sizeof why);
    }
    if (rc) {
        uint64_t lineno = s + (rc == SHARD_ERR_FORMAT && line ? 1 : 2);
        shard_index_clear(idx);
        if (rc == SHARD_ERR_NOMEM)
            return shard_fail(err, rc, "%s: out of memory", path);
        return shard_fail(err, rc, "%s: line %llu: %s", path, (unsigned long long)lineno, why);
    }
    idx->first[idx->nsamples] = idx->nentries;
    idx->end = ps.prev_end;
    return 0;
}
