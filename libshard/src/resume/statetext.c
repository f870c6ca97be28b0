/*
 * The text a state is written in (statetext.h): its key=value pairs and its seal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/digest.h"
#include "base/error.h"
#include "resume/history.h"
#include "resume/statetext.h"

static void sum_of(const char *text, size_t n, char out[17])
{
    ShardDigests d;
    if (shard_digests_init(&d, 0, 1)) {
        memset(out, '0', 16);
        out[16] = 0;
        return;
    }
    shard_digests_update(&d, text, n);
    char md5[33], sha[65];
    shard_digests_final(&d, md5, sha);
    memcpy(out, sha, 16);
    out[16] = 0;
}

/* Appends the sum to the state in buf. 0, or SHARD_ERR_INVALID when it does not fit. */
int shard_state_seal(char *buf, size_t size)
{
    size_t n = strlen(buf);
    char sum[17];
    sum_of(buf, n, sum);
    int k = snprintf(buf + n, size - n, SHARD_STATE_SUM_TAG "%s", sum);
    return k < 0 || (size_t)k >= size - n ? SHARD_ERR_INVALID : 0;
}

/* The state without its sum, malloc'd, once the sum checks (a v3 state, before sums, as it
 * is); NULL with msg saying why. */
static char *unsealed(const char *state, char *msg)
{
    const char *tag = strstr(state, SHARD_STATE_SUM_TAG);
    for (const char *t = tag; t; t = strstr(t + 1, SHARD_STATE_SUM_TAG))
        tag = t;
    if (!tag && !strncmp(state, "v3:", 3))
        return strdup(state);
    char sum[17];
    if (!tag || strlen(tag + strlen(SHARD_STATE_SUM_TAG)) != 16 ||
        (sum_of(state, (size_t)(tag - state), sum), strcmp(sum, tag + strlen(SHARD_STATE_SUM_TAG)))) {
        shard_fail(msg, SHARD_ERR_INVALID,
                   "reader: the state '%.120s...' %s: it was cut short or edited (restore the "
                   "state as state_dict gave it, or go on from the next epoch's start)",
                   state, tag ? "does not match its checksum" : "has no checksum (;sum=)");
        return NULL;
    }
    return strndup(state, (size_t)(tag - state));
}

char *shard_state_open(const char *state, ShardStateForm *f, char *msg)
{
    unsigned long long e, p, sd;
    int at = 0;
    memset(f, 0, sizeof *f);
    if (sscanf(state, "v1:%llu:%llu:%llu", &e, &p, &sd) == 3 ||
        sscanf(state, "v2:%llu:%llu:%llu:", &e, &p, &sd) == 3) {
        shard_fail(msg, SHARD_ERR_INVALID,
                   "reader: the state '%.60s...' is of the order before canonical partitions "
                   "(libshard 0.2 and 0.3), which this libshard no longer reads: go on from the "
                   "next epoch's start, set_epoch(%llu) with no state (formats/order.md)",
                   state, e + 1);
        return NULL;
    }
    char *text = unsealed(state, msg);
    if (!text)
        return NULL;
    if (text[0] != 'v' || sscanf(text + 1, "%*1[34]:%llu:%llu:%n", &e, &sd, &at) != 2 || !at) {
        shard_fail(msg, SHARD_ERR_INVALID,
                   "reader: '%.200s' is not a reader state (v4:EPOCH:SEED:SETTINGS;CUT)", state);
        free(text);
        return NULL;
    }
    f->version = text[1] - '0';
    f->epoch = e;
    f->seed = sd;
    f->pairs = text + 1 + at;
    f->pairs_end = strchr(f->pairs, ';');
    f->runs_tag = f->version == 4 ? "parts=" : ""; /* v3's cut is runs alone */
    char *resumes = f->pairs_end && f->version == 4 ? strstr(f->pairs_end, SHARD_STATE_RESUMES_TAG)
                                                    : NULL;
    if (resumes) { /* the last section: the cut ends before it */
        *resumes = 0;
        f->resumes = resumes + strlen(SHARD_STATE_RESUMES_TAG);
    }
    if (f->pairs_end) {
        const char *c = f->pairs_end + 1;
        if (f->version == 3)
            f->runs = c;
        else if (!strncmp(c, "parts=", 6))
            f->runs = c + 6;
        else
            f->cut = c;
    }
    return text;
}

/* Splits "k=v,k=v" (up to end) into pairs; the count, or -1 for text that is not such a
 * list. */
int shard_state_pairs_parse(const char *p, const char *stop, ShardStatePair *out, int max)
{
    int n = 0;
    while (p < stop) {
        const char *eq = memchr(p, '=', (size_t)(stop - p)), *end = memchr(p, ',', (size_t)(stop - p));
        if (!end)
            end = stop;
        if (!eq || eq > end || n == max || eq - p == 0 || (size_t)(eq - p) >= sizeof out->key ||
            (size_t)(end - eq - 1) >= sizeof out->value)
            return -1;
        memcpy(out[n].key, p, (size_t)(eq - p));
        out[n].key[eq - p] = 0;
        memcpy(out[n].value, eq + 1, (size_t)(end - eq - 1));
        out[n].value[end - eq - 1] = 0;
        n++;
        p = end < stop ? end + 1 : end;
    }
    return n;
}

const char *shard_state_value(const ShardStatePair *pairs, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(pairs[i].key, key))
            return pairs[i].value;
    return NULL;
}

/* A number from the pairs; def when absent, -1 when not a number. */
int shard_state_number(const ShardStatePair *pairs, int n, const char *key, unsigned long long def,
                     unsigned long long *out)
{
    const char *v = shard_state_value(pairs, n, key);
    *out = def;
    if (!v)
        return 0;
    char *end;
    *out = strtoull(v, &end, 10);
    return *v && !*end ? 0 : -1;
}

