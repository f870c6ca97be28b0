/*
 * The reader's state as text (state.h).
 *
 * "v2:EPOCH:POSITION:SEED:" then key=value pairs, comma-separated, of every setting that
 * fixes the order of the rest of the epoch. A restore compares each recorded pair with the
 * reader's own and refuses the state naming every one that differs: resuming in a reader
 * that splits, shuffles or lists differently would repeat some samples and lose others
 * without a sound. The rank and the worker are recorded but not compared: rank 0's state
 * restores the other ranks, whose positions agree with it (same batches, same sizes).
 * 0.2's "v1:EPOCH:POSITION:SEED" records only the seed, and is still read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/digest.h"
#include "base/error.h"
#include "read/readerdef.h"
#include "read/state.h"
#include "tar/item.h"

#define MAX_PAIRS 32

static const char *const MODE_NAMES[] = {"exact", "equal", "resampled"};

/* The recorded settings: key, how a refusal names it, and whether it is compared. */
static const struct {
    const char *key, *label;
    int compared;
} KEYS[] = {
    {"world_size", "world_size", 1},
    {"rank", "rank", 0},
    {"num_workers", "num_workers (DataLoader workers per rank)", 1},
    {"worker", "worker", 0},
    {"mode", "mode", 1},
    {"pad", "pad", 1},
    {"epoch_samples", "epoch_samples", 1},
    {"shuffle_shards", "shuffle_shards", 1},
    {"shuffle_buffer", "shuffle_buffer (shuffle=)", 1},
    {"shuffle_initial", "shuffle_initial", 1},
    {"streams", "streams", 1},
    {"worker_align", "worker_align (the batch size, with several workers)", 1},
    {"sources", "the number of sources", 1},
    {"weights", "the sources' weights (fingerprint)", 1},
    {"shards", "the number of shards listed", 1},
    {"counted", "the number of shards with a known sample count", 1},
    {"list", "the shard list (fingerprint of its shards' names and counts)", 1},
};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])

/* The first 16 hex digits of SHA-256 over d's bytes. */
static int fingerprint(ShardDigests *d, char out[17])
{
    char md5[33], sha[65];
    shard_digests_final(d, md5, sha);
    memcpy(out, sha, 16);
    out[16] = 0;
    return 0;
}

/* A shard's name: its URL's last part, without a query (a signed URL's changes): the same
 * shards on disk, over HTTP or in a bucket fingerprint alike. */
static void shard_name(const char *url, const char **name, size_t *len)
{
    size_t n = strcspn(url, "?#");
    const char *s = url;
    for (size_t i = 0; i < n; i++)
        if (url[i] == '/')
            s = url + i + 1;
    *name = s;
    *len = (size_t)(url + n - s);
}

int shard_reader_fingerprint(ShardReader *r)
{
    ShardDigests d;
    if (shard_digests_init(&d, 0, 1))
        return SHARD_ERR_NOMEM;
    r->counted = 0;
    for (size_t i = 0; i < r->nurls; i++) {
        const char *name;
        size_t len;
        shard_name(shard_list_entry(r->list, i)->url, &name, &len);
        char count[24];
        snprintf(count, sizeof count, "\t%llu\n", (unsigned long long)r->counts[i]);
        shard_digests_update(&d, name, len);
        shard_digests_update(&d, count, strlen(count));
        r->counted += r->counts[i] != SHARD_COUNT_UNKNOWN;
    }
    for (size_t i = 0; r->mixing && i < r->mix.n; i++) {
        char bound[40];
        snprintf(bound, sizeof bound, "source %u %u\n", r->mix.src[i].lo, r->mix.src[i].n);
        shard_digests_update(&d, bound, strlen(bound));
    }
    fingerprint(&d, r->list_fp);
    strcpy(r->weights_fp, "-");
    if (r->mixing && r->mix.n > 1) {
        if (shard_digests_init(&d, 0, 1))
            return SHARD_ERR_NOMEM;
        for (size_t i = 0; i < r->mix.n; i++) {
            char w[40];
            snprintf(w, sizeof w, "%.17g\n", r->mix.src[i].weight);
            shard_digests_update(&d, w, strlen(w));
        }
        fingerprint(&d, r->weights_fp);
    }
    return 0;
}

int shard_reader_state_at(const ShardReader *r, uint64_t epoch, uint64_t position, char *buf,
                          size_t size)
{
    const ShardReaderSettings *s = &r->s;
    int n = snprintf(buf, size,
                     "v2:%llu:%llu:%llu:world_size=%d,rank=%d,num_workers=%d,worker=%d,mode=%s,"
                     "pad=%d,epoch_samples=%llu,shuffle_shards=%d,shuffle_buffer=%zu,"
                     "shuffle_initial=%zu,streams=%zu,worker_align=%llu,sources=%zu,weights=%s,"
                     "shards=%zu,counted=%zu,list=%s",
                     (unsigned long long)epoch, (unsigned long long)position,
                     (unsigned long long)s->seed, s->world_size, s->rank, s->num_workers,
                     s->worker, MODE_NAMES[s->mode], s->pad,
                     (unsigned long long)s->epoch_samples, s->shuffle_shards, s->shuffle_buffer,
                     s->shuffle_initial, s->streams, (unsigned long long)s->worker_align,
                     r->mixing ? r->mix.n : (size_t)1, r->weights_fp, r->nurls, r->counted,
                     r->list_fp);
    return n < 0 || (size_t)n >= size ? SHARD_ERR_INVALID : 0;
}

typedef struct Pair {
    char key[32], value[40];
} Pair;

/* Splits "k=v,k=v" into pairs; the count, or -1 for text that is not such a list. */
static int parse_pairs(const char *p, Pair *out, int max)
{
    int n = 0;
    while (*p) {
        const char *eq = strchr(p, '='), *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        if (!eq || eq > end || n == max || eq - p == 0 || (size_t)(eq - p) >= sizeof out->key ||
            (size_t)(end - eq - 1) >= sizeof out->value)
            return -1;
        memcpy(out[n].key, p, (size_t)(eq - p));
        out[n].key[eq - p] = 0;
        memcpy(out[n].value, eq + 1, (size_t)(end - eq - 1));
        out[n].value[end - eq - 1] = 0;
        n++;
        p = *end ? end + 1 : end;
    }
    return n;
}

static const char *value_of(const Pair *pairs, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(pairs[i].key, key))
            return pairs[i].value;
    return NULL;
}

/* Appends "; " and the formatted text to msg (SHARD_ERROR_MAX bytes), truncating. */
static void add(char *msg, const char *fmt, const char *a, const char *b, const char *c)
{
    size_t len = strlen(msg);
    if (len + 2 < SHARD_ERROR_MAX)
        snprintf(msg + len, SHARD_ERROR_MAX - len, fmt, a, b, c);
}

int shard_reader_state_check(ShardReader *r, const char *state, uint64_t *epoch,
                             uint64_t *position, uint64_t *seed)
{
    unsigned long long e, p, sd;
    int at = 0;
    char tail;
    if (sscanf(state, "v1:%llu:%llu:%llu%c", &e, &p, &sd, &tail) == 3) {
        at = -1; /* 0.2's state: the seed is all it records */
    } else if (sscanf(state, "v2:%llu:%llu:%llu:%n", &e, &p, &sd, &at) != 3 || !at) {
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: '%.200s' is not a reader state (v2:EPOCH:POSITION:SEED:"
                          "SETTINGS, or 0.2's v1:EPOCH:POSITION:SEED)",
                          state);
    }
    Pair theirs[MAX_PAIRS], ours[MAX_PAIRS];
    int nt = 0, no;
    if (at > 0 && (nt = parse_pairs(state + at, theirs, MAX_PAIRS)) < 0)
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: the settings of state '%.200s' are not KEY=VALUE pairs",
                          state);
    char here[SHARD_READER_STATE_MAX];
    int rc = shard_reader_state_at(r, e, p, here, sizeof here);
    const char *mine = strchr(strchr(strchr(strchr(here, ':') + 1, ':') + 1, ':') + 1, ':') + 1;
    if (rc || (no = parse_pairs(mine, ours, MAX_PAIRS)) < 0)
        return shard_fail(r->err, SHARD_ERR_INVALID, "reader: cannot describe its settings");

    char diffs[SHARD_ERROR_MAX] = "";
    if (sd != r->s.seed && !r->seed_drawn) {
        char a[24], b[24];
        snprintf(a, sizeof a, "%llu", sd);
        snprintf(b, sizeof b, "%llu", (unsigned long long)r->s.seed);
        add(diffs, "; %s is %s in the state and %s here", "seed", a, b);
    }
    for (int i = 0; i < nt; i++) {
        size_t k = 0;
        while (k < NKEYS && strcmp(KEYS[k].key, theirs[i].key))
            k++;
        if (k == NKEYS) {
            add(diffs, "; the state records '%s' (%s), which this libshard does not know%s",
                theirs[i].key, theirs[i].value, "");
            continue;
        }
        const char *v = value_of(ours, no, theirs[i].key);
        if (!KEYS[k].compared || !v || !strcmp(v, theirs[i].value))
            continue;
        if (!strcmp(KEYS[k].key, "worker_align") && r->s.num_workers < 2)
            continue; /* with one worker the batch size does not move a sample */
        add(diffs, "; %s is %s in the state and %s here", KEYS[k].label, theirs[i].value, v);
    }
    if (diffs[0])
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: the state was taken with other settings, and would repeat "
                          "some samples and skip others here: %s (restore it where they are "
                          "the same, or go on from the next epoch's start with these: "
                          "set_epoch(%llu), no state)",
                          diffs + 2, e + 1);
    if (sd != r->s.seed)
        r->s.seed = sd; /* this reader drew its seed: the state's continues the run */
    *epoch = e;
    *position = p;
    *seed = sd;
    return 0;
}
