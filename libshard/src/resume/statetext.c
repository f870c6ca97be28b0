/*
 * The text a state is written in (statetext.h): its key=value pairs and its seal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/digest.h"
#include "base/error.h"
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
char *shard_state_unsealed(const char *state, char *msg)
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

