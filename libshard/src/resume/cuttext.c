/*
 * The cut as text (cuttext.h; formats/order.md, section 4): a line's cut, "left=...;edges=...",
 * and without counts the runs of partitions delivered.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/text.h"
#include "resume/cut.h"
#include "resume/cuttext.h"
#include "shard/common.h"

/* ---- as text ----------------------------------------------------------------------------- */

/* Appends printf output at *at; -1 when it does not fit. */
static int put(char *out, size_t cap, size_t *at, const char *fmt, uint64_t a, uint64_t b)
{
    int n = snprintf(out + *at, cap - *at, fmt, a, b);
    if (n < 0 || (size_t)n >= cap - *at)
        return -1;
    *at += (size_t)n;
    return 0;
}

int shard_cut_format(const ShardCut *c, char *out, size_t cap)
{
    size_t at = 0;
    if (!cap)
        return SHARD_ERR_INVALID;
    out[0] = 0;
    if (put(out, cap, &at, "left=", 0, 0) < 0)
        return SHARD_ERR_INVALID;
    for (size_t i = 0; i < c->n; i++)
        if (put(out, cap, &at, i ? ",%" PRIu64 "-%" PRIu64 : "%" PRIu64 "-%" PRIu64,
                c->left[i].a, c->left[i].b) < 0)
            return SHARD_ERR_INVALID;
    if (put(out, cap, &at, ";edges=", 0, 0) < 0)
        return SHARD_ERR_INVALID;
    for (size_t k = 1; k < (size_t)c->world * (size_t)c->workers; k++)
        if (put(out, cap, &at, k > 1 ? ",%" PRIu64 : "%" PRIu64, c->edge[k], 0) < 0)
            return SHARD_ERR_INVALID;
    return 0;
}

int shard_cut_parse(ShardCut *c, const char *text, uint64_t length, int world, int workers,
                    char *msg)
{
    memset(c, 0, sizeof *c);
    c->length = length;
    /* the edges the text gives, counted before the regions are made: a topology the text
     * does not back is refused before its memory is taken */
    const char *edges = strstr(text, ";edges=");
    size_t given = 0;
    for (const char *e = edges ? edges + 7 : ""; *e; e++)
        given += *e == ',';
    given += edges && edges[7];
    size_t want = (size_t)world * (size_t)workers - 1;
    if (edges && given != want)
        return shard_fail(msg, SHARD_ERR_INVALID,
                          "the cut gives %zu edges where %d ranks of %d workers have %zu", given,
                          world, workers, want);
    if (shard_cut_regions(c, world, workers))
        return SHARD_ERR_NOMEM;
    const char *s = text;
    if (strncmp(s, "left=", 5))
        goto bad;
    s += 5;
    uint64_t last = 0;
    while (*s && *s != ';') {
        uint64_t a, b;
        if (shard_text_u64(&s, &a) || *s++ != '-' || shard_text_u64(&s, &b))
            goto bad;
        if (a >= b || b > length || (c->n && a <= last)) {
            shard_cut_free(c);
            return shard_fail(msg, SHARD_ERR_INVALID,
                              "the cut's span %" PRIu64 "-%" PRIu64 " is empty, out of order "
                              "or past the epoch's %" PRIu64 " samples",
                              a, b, length);
        }
        if (shard_cut_push(c, a, b)) {
            shard_cut_free(c);
            return SHARD_ERR_NOMEM;
        }
        last = b;
        if (*s == ',')
            s++;
    }
    if (strncmp(s, ";edges=", 7))
        goto bad;
    s += 7;
    size_t nc = (size_t)c->world * (size_t)c->workers, k = 1;
    for (; *s && k < nc; k++) {
        if ((k > 1 && *s++ != ',') || shard_text_u64(&s, &c->edge[k]))
            goto bad;
        if (c->edge[k] < c->edge[k - 1] || c->edge[k] > length) {
            uint64_t e = c->edge[k];
            shard_cut_free(c);
            return shard_fail(msg, SHARD_ERR_INVALID,
                              "the cut's edge %zu (%" PRIu64 ") is before the one before it or "
                              "past the epoch's %" PRIu64 " samples",
                              k, e, length);
        }
    }
    if (*s || k != nc) {
        shard_cut_free(c);
        return shard_fail(msg, SHARD_ERR_INVALID,
                          "the cut gives %zu edges where %d ranks of %d workers have %zu", k - 1,
                          world, workers, nc - 1);
    }
    return 0;
bad:
    shard_cut_free(c);
    return shard_fail(msg, SHARD_ERR_INVALID,
                      "the cut '%.80s' is not left=A-B,...;edges=E,... (formats/order.md)", text);
}

/* ---- the runs --------------------------------------------------------------------------- */

/* 'd' done, '0' untouched, 'n' in part (an empty partition is done), '?' not said; with
 * len NULL every value is a number. */
static char kind(uint64_t pos, const uint64_t *len, uint32_t i)
{
    if (pos == SHARD_CUT_UNKNOWN)
        return '?';
    if (!len)
        return pos ? 'n' : '0';
    if (pos == SHARD_CUT_DONE || (len[i] != SHARD_COUNT_UNKNOWN && pos >= len[i]))
        return 'd';
    return pos == 0 ? '0' : 'n';
}

int shard_runs_format(const uint64_t *pos, const uint64_t *len, uint32_t p, char *out,
                     size_t cap)
{
    size_t at = 0;
    if (cap)
        out[0] = 0;
    for (uint32_t i = 0; i < p;) {
        char k = kind(pos[i], len, i);
        uint32_t j = i + 1;
        while (j < p && kind(pos[j], len, j) == k && (k != 'n' || pos[j] == pos[i]))
            j++;
        char value[24];
        if (k == 'n')
            snprintf(value, sizeof value, "%" PRIu64, pos[i]);
        else
            snprintf(value, sizeof value, "%c", k);
        int n;
        const char *sep = at ? "," : "";
        if (j - i == 1)
            n = snprintf(out + at, cap - at, "%s%" PRIu32 ":%s", sep, i, value);
        else
            n = snprintf(out + at, cap - at, "%s%" PRIu32 "-%" PRIu32 ":%s", sep, i, j - 1, value);
        if (n < 0 || (size_t)n >= cap - at)
            return SHARD_ERR_INVALID;
        at += (size_t)n;
        i = j;
    }
    return 0;
}

int shard_runs_parse(const char *text, const uint64_t *len, uint32_t p, uint64_t *pos, char *msg)
{
    const char *s = text;
    uint64_t next = 0;
    while (*s) {
        const char *run = s;
        uint64_t a, b, n = 0;
        if (shard_text_u64(&s, &a))
            goto bad;
        b = a;
        if (*s == '-') {
            s++;
            if (shard_text_u64(&s, &b))
                goto bad;
        }
        if (*s++ != ':')
            goto bad;
        char k = *s;
        if ((k == 'd' && len) || k == '?' || (k == '0' && (s[1] == ',' || !s[1])))
            s++;
        else if (shard_text_u64(&s, &n))
            goto bad;
        else
            k = 'n';
        if (*s == ',' && s[1])
            s++;
        else if (*s)
            goto bad;
        if (a != next || b < a || b >= p)
            return shard_fail(msg, SHARD_ERR_INVALID,
                              "the cut's run '%.*s' is not partition %" PRIu64 " onwards of %" PRIu32,
                              (int)strcspn(run, ","), run, next, p);
        for (uint64_t i = a; i <= b; i++) {
            if (k == 'n' && len && len[i] != SHARD_COUNT_UNKNOWN && n > len[i])
                return shard_fail(msg, SHARD_ERR_INVALID,
                                  "the cut delivers %" PRIu64 " samples of partition %" PRIu64
                                  ", which has %" PRIu64,
                                  n, i, len[i]);
            if (k == 'd')
                pos[i] = len[i] == SHARD_COUNT_UNKNOWN ? SHARD_CUT_DONE : len[i];
            else
                pos[i] = k == '?' ? SHARD_CUT_UNKNOWN : k == '0' ? 0 : n;
        }
        next = b + 1;
    }
    if (next != p)
        return shard_fail(msg, SHARD_ERR_INVALID,
                          "the cut covers %" PRIu64 " partitions of %" PRIu32, next, p);
    return 0;
bad:
    return shard_fail(msg, SHARD_ERR_INVALID,
                      "the cut '%.80s' is not runs of partitions (A-B:d, A-B:0, A-B:N, A-B:?)",
                      text);
}

/* A cut of runs of partitions delivered from their start (a v3 state's with counts), as a
 * line's cut in the blocks of the topology it was taken on. */
int shard_cut_of_runs(ShardCut *cut, const char *runs, const uint64_t *len, uint32_t parts,
                      uint64_t length, int world, int workers, char *msg)
{
    uint64_t *pos = malloc(parts * sizeof *pos);
    if (!pos)
        return SHARD_ERR_NOMEM;
    int rc = shard_runs_parse(runs, len, parts, pos, msg);
    for (uint32_t p = 0; !rc && p < parts; p++)
        if (pos[p] == SHARD_CUT_UNKNOWN)
            rc = shard_fail(msg, SHARD_ERR_INVALID, "the state does not say how far partition "
                            "%u was delivered", p);
    if (!rc) {
        ShardCut all;
        rc = shard_cut_init(&all, length);
        if (!rc) {
            /* all left but what each partition delivered from its start */
            uint64_t *took = calloc(parts, sizeof *took);
            all.world = 1;
            all.workers = (int)parts;
            all.edge = malloc(((size_t)parts + 1) * sizeof *all.edge);
            rc = took && all.edge ? 0 : SHARD_ERR_NOMEM;
            for (uint32_t p = 0; !rc && p < parts; p++) {
                uint64_t b;
                shard_partition_range(length, parts, p, &all.edge[p], &b);
                took[p] = pos[p];
            }
            if (!rc) {
                all.edge[parts] = length;
                rc = shard_cut_take(&all, took);
            }
            free(took);
        }
        if (!rc)
            rc = shard_cut_blocks(&all, parts, world, workers);
        if (!rc)
            *cut = all;
        else
            shard_cut_free(&all);
    }
    free(pos);
    return rc;
}
