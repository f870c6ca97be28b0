/*
 * The reader's state as text (state.h).
 *
 * "v4:EPOCH:SEED:" then key=value pairs, comma-separated, of every setting that fixes the
 * epoch's order, ';' and the cut: what is left of the epoch and the regions it is read in
 * (cut.h), or without counts how far each canonical partition was delivered, in runs
 * (formats/order.md). A restore compares each recorded setting with the reader's own and
 * refuses the state naming every one that differs: resuming in a reader that shuffles,
 * cuts or lists differently would repeat some samples and lose others without a sound.
 * The topology it was taken on (world_size, num_workers) is recorded, not compared: the
 * partitions are the same on any. libshard 0.4's v3 states are read; those of the orders
 * before partitions (0.2's v1, v2) are refused, saying how to go on.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/digest.h"
#include "base/error.h"
#include "read/cut.h"
#include "read/order.h"
#include "read/partition.h"
#include "read/readerdef.h"
#include "read/state.h"
#include "tar/item.h"

#define MAX_PAIRS 32
/* The most ranks, workers a rank, and consumers a state may say (a restore's work and
 * memory go with them). */
#define STATE_WORLD_MAX (1ull << 20)
#define STATE_WORKERS_MAX (1ull << 16)
#define STATE_CONSUMERS_MAX (1ull << 24)

static const char *const MODE_NAMES[] = {"exact", "equal", "resampled"};

/* The recorded settings: key, how a refusal names it, and whether it is compared. */
static const struct {
    const char *key, *label;
    int compared;
} KEYS[] = {
    {"mode", "mode", 1},
    {"pad", "pad", 1},
    {"epoch_samples", "epoch_samples", 1},
    {"shuffle_shards", "shuffle_shards", 1},
    {"shuffle_buffer", "shuffle_buffer (shuffle=)", 1},
    {"shuffle_initial", "shuffle_initial", 1},
    {"streams", "streams", 1},
    {"sources", "the number of sources", 1},
    {"weights", "the sources' weights (fingerprint)", 1},
    {"shards", "the number of shards listed", 1},
    {"counted", "the number of shards with a known sample count", 1},
    {"list", "the shard list (fingerprint of its shards' names and counts)", 1},
    {"partitions", "partitions", 0}, /* compared where this reader sets its own */
    {"total", "total", 0},
    {"world_size", "world_size", 0},
    {"num_workers", "num_workers", 0},
    {"rank", "rank", 0},
    {"worker", "worker", 0},
    {"delivered", "delivered", 0},
    {"draws", "draws", 0},
    {"since", "since", 0},
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


/* The compared settings of r as pairs. */
static int settings_pairs(const ShardReader *r, char *buf, size_t size)
{
    const ShardReaderSettings *s = &r->s;
    int n = snprintf(buf, size,
                     "mode=%s,pad=%d,epoch_samples=%llu,shuffle_shards=%d,shuffle_buffer=%zu,"
                     "shuffle_initial=%zu,streams=%zu,sources=%zu,weights=%s,shards=%zu,"
                     "counted=%zu,list=%s",
                     MODE_NAMES[s->mode], s->pad, (unsigned long long)s->epoch_samples,
                     s->shuffle_shards, s->shuffle_buffer, s->shuffle_initial, s->streams,
                     r->mixing ? r->mix.n : (size_t)1, r->weights_fp, r->nurls, r->counted,
                     r->list_fp);
    return n < 0 || (size_t)n >= size ? SHARD_ERR_INVALID : n;
}

/* A state ends in ";sum=" and 16 hex digits of SHA-256 over what comes before: a state cut
 * short or edited is refused rather than continued wrong. */
#define SUM_TAG ";sum="

static void sum_of(const char *text, size_t n, char out[17])
{
    ShardDigests d;
    if (shard_digests_init(&d, 0, 1)) {
        memset(out, '0', 16);
        out[16] = 0;
        return;
    }
    shard_digests_update(&d, text, n);
    fingerprint(&d, out);
}

/* Appends the sum to the state in buf. 0, or SHARD_ERR_INVALID when it does not fit. */
static int seal(char *buf, size_t size)
{
    size_t n = strlen(buf);
    char sum[17];
    sum_of(buf, n, sum);
    int k = snprintf(buf + n, size - n, SUM_TAG "%s", sum);
    return k < 0 || (size_t)k >= size - n ? SHARD_ERR_INVALID : 0;
}

/* The state without its sum, malloc'd, once the sum checks (a v3 state, before sums, as it
 * is); NULL with msg saying why. */
static char *unsealed(const char *state, char *msg)
{
    const char *tag = strstr(state, SUM_TAG);
    for (const char *t = tag; t; t = strstr(t + 1, SUM_TAG))
        tag = t;
    if (!tag && !strncmp(state, "v3:", 3))
        return strdup(state);
    char sum[17];
    if (!tag || strlen(tag + strlen(SUM_TAG)) != 16 ||
        (sum_of(state, (size_t)(tag - state), sum), strcmp(sum, tag + strlen(SUM_TAG)))) {
        shard_fail(msg, SHARD_ERR_INVALID,
                   "reader: the state '%.120s...' %s: it was cut short or edited (restore the "
                   "state as state_dict gave it, or go on from the next epoch's start)",
                   state, tag ? "does not match its checksum" : "has no checksum (;sum=)");
        return NULL;
    }
    return strndup(state, (size_t)(tag - state));
}

/* The state of order o into buf: its cut (with counts) or runs pos. */
static int format_state(const ShardReader *r, const ShardOrder *o, uint64_t delivered,
                        const ShardCut *cut, const uint64_t *pos, char *buf, size_t size)
{
    int n = snprintf(buf, size, "v4:%llu:%llu:", (unsigned long long)o->epoch,
                     (unsigned long long)r->s.seed);
    if (n < 0 || (size_t)n >= size)
        return SHARD_ERR_INVALID;
    size_t at = (size_t)n;
    if ((n = settings_pairs(r, buf + at, size - at)) < 0)
        return SHARD_ERR_INVALID;
    at += (size_t)n;
    n = snprintf(buf + at, size - at,
                 ",partitions=%" PRIu32 ",total=%llu,world_size=%d,num_workers=%d,rank=%d,"
                 "worker=%d,delivered=%llu",
                 o->parts, (unsigned long long)o->total, o->world, o->workers, o->rank,
                 o->worker, (unsigned long long)delivered);
    if (n >= 0 && (size_t)n < size - at && o->mode == SHARD_MODE_RESAMPLED)
        n += snprintf(buf + at + n, size - at - (size_t)n, ",draws=%llu,since=%llu",
                      (unsigned long long)atomic_load(&((ShardOrder *)o)->taken),
                      (unsigned long long)(delivered - o->base));
    if (n >= 0 && (size_t)n < size - at)
        n += snprintf(buf + at + n, size - at - (size_t)n, cut ? ";" : ";parts=");
    if (n < 0 || (size_t)n >= size - at)
        return SHARD_ERR_INVALID;
    at += (size_t)n;
    int rc = cut ? shard_cut_format(cut, buf + at, size - at)
                 : shard_runs_format(pos, o->mode == SHARD_MODE_RESAMPLED ? NULL : o->len,
                                     o->parts, buf + at, size - at);
    return rc ? rc : seal(buf, size);
}

int shard_reader_state_at(const ShardReader *r, const ShardOrder *o, uint64_t position,
                          uint64_t unit, char *buf, size_t size)
{
    if (o->counted) {
        ShardCut cut;
        if (shard_order_cut_at(o, position, unit, &cut))
            return SHARD_ERR_NOMEM;
        int rc = format_state(r, o, position, &cut, NULL, buf, size);
        shard_cut_free(&cut);
        return rc;
    }
    uint64_t *pos = malloc(o->parts * sizeof *pos);
    if (!pos)
        return SHARD_ERR_NOMEM;
    shard_order_runs_at(o, position, pos);
    int rc = format_state(r, o, position, NULL, pos, buf, size);
    free(pos);
    return rc;
}

int shard_reader_state_after(const ShardReader *r, uint64_t batches, uint64_t batch_size,
                             int drop_last, int first, char *buf, size_t size)
{
    const ShardOrder *o = r->order;
    if (!o->counted || !batch_size)
        return SHARD_ERR_UNSUPPORTED;
    if (first < 0 || first >= o->workers)
        return SHARD_ERR_INVALID;
    ShardCut cut;
    uint64_t *pads = shard_order_pads(o, batch_size, drop_last);
    if (!pads || shard_cut_copy(&cut, &o->cut)) {
        free(pads);
        return SHARD_ERR_NOMEM;
    }
    int rc = shard_cut_advance(&cut, batch_size, drop_last, batches, first, pads);
    if (!rc)
        rc = format_state(r, o, batches * batch_size, &cut, NULL, buf, size);
    shard_cut_free(&cut);
    free(pads);
    return rc;
}

typedef struct Pair {
    char key[32], value[40];
} Pair;

/* Splits "k=v,k=v" (up to end) into pairs; the count, or -1 for text that is not such a
 * list. */
static int parse_pairs(const char *p, const char *stop, Pair *out, int max)
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

/* A number from the pairs; def when absent, -1 when not a number. */
static int number_of(const Pair *pairs, int n, const char *key, unsigned long long def,
                     unsigned long long *out)
{
    const char *v = value_of(pairs, n, key);
    *out = def;
    if (!v)
        return 0;
    char *end;
    *out = strtoull(v, &end, 10);
    return *v && !*end ? 0 : -1;
}

/* A state's settings against this reader's: every difference, and every compared setting
 * the state does not say, into diffs. */
static void compare(const ShardReader *r, const Pair *theirs, int nt, const Pair *ours, int no,
                    unsigned long long sd, char *diffs)
{
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
        add(diffs, "; %s is %s in the state and %s here", KEYS[k].label, theirs[i].value, v);
    }
    for (size_t k = 0; k < NKEYS; k++) /* one left out would go uncompared */
        if (KEYS[k].compared && !value_of(theirs, nt, KEYS[k].key))
            add(diffs, "; the state does not say its %s%s%s", KEYS[k].label, "", "");
}

/* The numbers a state gives, each bounded by what the data and the settings allow: 0, or
 * -1 with what is wrong in why. */
static int numbers(const Pair *theirs, int nt, ShardStateIn *in, const char **why)
{
    unsigned long long parts, total, delivered, taken, since, world, workers;
    *why = "its partitions, total, topology and delivered samples are not numbers";
    if (number_of(theirs, nt, "partitions", 0, &parts) ||
        number_of(theirs, nt, "total", 0, &total) ||
        number_of(theirs, nt, "delivered", 0, &delivered) ||
        number_of(theirs, nt, "draws", 0, &taken) || number_of(theirs, nt, "since", 0, &since) ||
        number_of(theirs, nt, "world_size", 1, &world) ||
        number_of(theirs, nt, "num_workers", 1, &workers))
        return -1;
    *why = "its numbers are past what any job has (partitions, ranks, workers, samples)";
    if (!parts || parts > SHARD_PARTITIONS_MAX || since > delivered || !world || !workers ||
        world > STATE_WORLD_MAX || workers > STATE_WORKERS_MAX ||
        world * workers > STATE_CONSUMERS_MAX)
        return -1;
    in->parts = (uint32_t)parts;
    in->total = total;
    in->delivered = delivered;
    in->taken = taken;
    in->since = since;
    in->world = (int)world;
    in->workers = (int)workers;
    return 0;
}

int shard_reader_state_check(ShardReader *r, const char *state, ShardStateIn *in)
{
    unsigned long long e, p, sd;
    int at = 0;
    in->text = NULL;
    if (sscanf(state, "v1:%llu:%llu:%llu", &e, &p, &sd) == 3 ||
        sscanf(state, "v2:%llu:%llu:%llu:", &e, &p, &sd) == 3)
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: the state '%.60s...' is of the order before canonical "
                          "partitions (libshard 0.2 and 0.3), which this libshard no longer "
                          "reads: go on from the next epoch's start, set_epoch(%llu) with no "
                          "state (formats/order.md)",
                          state, e + 1);
    char *text = unsealed(state, r->err);
    if (!text)
        return SHARD_ERR_INVALID;
    int version = !strncmp(text, "v3:", 3) ? 3 : 4;
    if (text[0] != 'v' || sscanf(text + 1, "%*1[34]:%llu:%llu:%n", &e, &sd, &at) != 2 || !at) {
        free(text);
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: '%.200s' is not a reader state (v4:EPOCH:SEED:SETTINGS;CUT)",
                          state);
    }
    at++;
    const char *cut = strchr(text + at, ';'), *why;
    Pair theirs[MAX_PAIRS], ours[MAX_PAIRS];
    char here[1024], diffs[SHARD_ERROR_MAX] = "";
    int nt = cut ? parse_pairs(text + at, cut, theirs, MAX_PAIRS) : -1, no = -1;
    int len = nt < 0 ? -1 : settings_pairs(r, here, sizeof here);
    if (len >= 0)
        no = parse_pairs(here, here + len, ours, MAX_PAIRS);
    int rc = nt < 0 ? shard_fail(r->err, SHARD_ERR_INVALID,
                                 "reader: the settings of state '%.200s' are not KEY=VALUE "
                                 "pairs followed by ';' and the cut", state)
             : no < 0 ? shard_fail(r->err, SHARD_ERR_INVALID,
                                   "reader: cannot describe its settings")
             : numbers(theirs, nt, in, &why)
                 ? shard_fail(r->err, SHARD_ERR_INVALID, "reader: the state '%.160s' is refused: "
                              "%s", state, why)
                 : 0;
    if (!rc) {
        compare(r, theirs, nt, ours, no, sd, diffs);
        if (r->s.partitions && in->parts != r->s.partitions) {
            char a[24], b[24];
            snprintf(a, sizeof a, "%u", in->parts);
            snprintf(b, sizeof b, "%u", r->s.partitions);
            add(diffs, "; %s is %s in the state and %s here (leave it 0 to take the state's)",
                "partitions", a, b);
        }
        if (diffs[0])
            rc = shard_fail(r->err, SHARD_ERR_INVALID,
                            "reader: the state was taken with other settings, and would repeat "
                            "some samples and skip others here: %s (restore it where they are "
                            "the same, or go on from the next epoch's start with these: "
                            "set_epoch(%llu), no state)",
                            diffs + 2, e + 1);
    }
    if (rc) {
        free(text);
        return rc;
    }
    if (sd != r->s.seed)
        r->s.seed = sd; /* this reader drew its seed: the state's continues the run */
    in->epoch = e;
    in->seed = sd;
    in->cut = cut + 1;
    in->version = version;
    in->text = text;
    return 0;
}

/* ---- merging the states of a job's consumers ------------------------------------------ */

/* The pairs of a state (between "vN:EPOCH:SEED:" and ';'); the count, or -1. */
static int state_pairs(const char *state, Pair *out)
{
    int at = 0;
    const char *cut = strchr(state, ';');
    if (state[0] != 'v' || sscanf(state + 1, "%*1[34]:%*u:%*u:%n", &at) != 0 || !at || !cut ||
        state + 1 + at > cut)
        return -1;
    return parse_pairs(state + 1 + at, cut, out, MAX_PAIRS);
}

/* The part of a state's settings every consumer's shares: up to ';' without the pairs of
 * the consumer that took it. */
static int common_part(const char *state, char *out, size_t cap)
{
    const char *cut = strchr(state, ';');
    if ((strncmp(state, "v3:", 3) && strncmp(state, "v4:", 3)) || !cut)
        return -1;
    size_t at = 0;
    for (const char *p = state; p < cut;) {
        const char *end = memchr(p, ',', (size_t)(cut - p));
        if (!end)
            end = cut;
        int mine = !strncmp(p, "rank=", 5) || !strncmp(p, "worker=", 7) ||
                   !strncmp(p, "delivered=", 10);
        size_t n = (size_t)(end - p);
        if (!mine) {
            if (at + n + 2 > cap)
                return -1;
            memcpy(out + at, p, n);
            at += n;
            out[at++] = ',';
        }
        p = end < cut ? end + 1 : end;
    }
    out[at] = 0;
    return 0;
}

/* What merging needs of a state: its topology, partitions, the line's length, and the
 * consumer that took it (-1 where it does not say). */
typedef struct Merging {
    unsigned long long parts, world, workers;
    uint64_t length;
    long long consumer;
} Merging;

static int merging_of(const char *state, Merging *m)
{
    Pair pairs[MAX_PAIRS];
    int np = state_pairs(state, pairs);
    unsigned long long total, rank, worker, pad;
    const char *mode = np >= 0 ? value_of(pairs, np, "mode") : NULL;
    if (np < 0 || number_of(pairs, np, "partitions", 0, &m->parts) || !m->parts ||
        m->parts > SHARD_PARTITIONS_MAX || number_of(pairs, np, "world_size", 1, &m->world) ||
        number_of(pairs, np, "num_workers", 1, &m->workers) || !m->world || !m->workers ||
        m->world > (1u << 30) || m->workers > (1u << 30) ||
        number_of(pairs, np, "total", 0, &total) || number_of(pairs, np, "pad", 0, &pad))
        return -1;
    m->length = shard_partition_total(total, (uint32_t)m->parts,
                                      mode && !strcmp(mode, "equal") ? SHARD_MODE_EQUAL
                                                                     : SHARD_MODE_EXACT,
                                      pad != 0);
    m->consumer = -1;
    if (!number_of(pairs, np, "rank", m->world, &rank) &&
        !number_of(pairs, np, "worker", m->workers, &worker) && rank < m->world &&
        worker < m->workers)
        m->consumer = (long long)(rank * m->workers + worker);
    return 0;
}

/* Runs (without counts): each partition as the consumer whose block holds it says, else as
 * any state says; out: the merged runs. */
static int merge_runs(const char *const *states, size_t n, const Merging *m0, int v4,
                      char *out, size_t cap, char *msg)
{
    uint64_t parts = m0->parts;
    uint64_t *len = malloc(parts * sizeof *len), *merged = malloc(parts * sizeof *merged),
             *vals = malloc(parts * sizeof *vals);
    unsigned char *owned = calloc(parts, 1);
    int rc = len && merged && vals && owned ? 0 : SHARD_ERR_NOMEM;
    for (uint64_t p = 0; !rc && p < parts; p++) {
        len[p] = SHARD_COUNT_UNKNOWN;
        merged[p] = SHARD_CUT_UNKNOWN;
    }
    for (size_t k = 0; !rc && k < n; k++) {
        const char *runs = strchr(states[k], ';') + 1;
        if (v4 && strncmp(runs, "parts=", 6)) {
            rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: state %zu is not one "
                            "without counts, as state 0 is", k);
            break;
        }
        if (shard_runs_parse(runs + (v4 ? 6 : 0), len, (uint32_t)parts, vals, msg)) {
            rc = SHARD_ERR_INVALID;
            break;
        }
        Merging m;
        uint32_t lo = 0, hi = 0;
        if (!merging_of(states[k], &m) && m.consumer >= 0)
            shard_partition_block((uint32_t)parts, (int)m.world, (int)m.workers,
                                  (int)(m.consumer / (long long)m.workers),
                                  (int)(m.consumer % (long long)m.workers), &lo, &hi);
        /* a consumer's own partitions are exact; others' only fill what none says */
        for (uint64_t p = 0; p < parts && !rc; p++) {
            if (vals[p] == SHARD_CUT_UNKNOWN)
                continue;
            if (p >= lo && p < hi) {
                if (owned[p] && merged[p] != vals[p])
                    rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: two states of "
                                    "the consumer that reads partition %" PRIu64 " disagree "
                                    "on it (states of one point of the run, one per "
                                    "consumer)", p);
                merged[p] = vals[p];
                owned[p] = 1;
            } else if (!owned[p] && merged[p] == SHARD_CUT_UNKNOWN) {
                merged[p] = vals[p];
            }
        }
    }
    if (!rc && (cap < 7 || shard_runs_format(merged, len, (uint32_t)parts, out + (v4 ? 6 : 0),
                                            cap - 6)))
        rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: the merged state does not "
                        "fit in the room given");
    if (!rc && v4)
        memcpy(out, "parts=", 6);
    free(len);
    free(merged);
    free(vals);
    free(owned);
    return rc;
}

/* Cuts (with counts): each consumer's region as its own state says, else as state 0 does. */
static int merge_cuts(const char *const *states, size_t n, const Merging *m0, char *out,
                      size_t cap, char *msg)
{
    size_t nc = (size_t)(m0->world * m0->workers);
    ShardCut *cuts = calloc(n, sizeof *cuts);
    const ShardCut **from = calloc(nc, sizeof *from);
    int rc = cuts && from ? 0 : SHARD_ERR_NOMEM;
    for (size_t k = 0; !rc && k < n; k++) {
        Merging m;
        if ((rc = shard_cut_parse(&cuts[k], strchr(states[k], ';') + 1, m0->length,
                                  (int)m0->world, (int)m0->workers, msg)))
            break;
        if (memcmp(cuts[k].edge, cuts[0].edge, (nc + 1) * sizeof *cuts[k].edge)) {
            rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: state %zu reads the epoch "
                            "in other regions than state 0 (states of one run, one per "
                            "consumer)", k);
            break;
        }
        if (!merging_of(states[k], &m) && m.consumer >= 0) {
            if (from[m.consumer] && shard_cut_rest(from[m.consumer], (size_t)m.consumer) !=
                                        shard_cut_rest(&cuts[k], (size_t)m.consumer)) {
                rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: two states of "
                                "consumer %lld disagree on how far it is (states of one point "
                                "of the run, one per consumer)", m.consumer);
                break;
            }
            from[m.consumer] = &cuts[k];
        }
    }
    for (size_t c = 0; !rc && c < nc; c++)
        if (!from[c])
            from[c] = &cuts[0];
    ShardCut joined;
    if (!rc && !(rc = shard_cut_copy(&joined, &cuts[0]))) {
        rc = shard_cut_join(&joined, from);
        if (!rc && shard_cut_format(&joined, out, cap))
            rc = shard_fail(msg, SHARD_ERR_INVALID, "merging states: the merged state does not "
                            "fit in the room given");
        shard_cut_free(&joined);
    }
    for (size_t k = 0; cuts && k < n; k++)
        shard_cut_free(&cuts[k]);
    free(cuts);
    free(from);
    return rc;
}

static int merge_unsealed(const char *const *states, size_t n, char *buf, size_t size,
                          ShardError *err)
{
    char msg[SHARD_ERROR_MAX] = "";
    char first[1024], other[1024];
    Merging m0;
    if (common_part(states[0], first, sizeof first) || merging_of(states[0], &m0)) {
        shard_fail(msg, SHARD_ERR_INVALID,
                   "merging states: '%.200s' is not a reader state saying its partitions and "
                   "topology", states[0]);
        return shard_report(err, SHARD_ERR_INVALID, msg);
    }
    for (size_t k = 1; k < n; k++)
        if (common_part(states[k], other, sizeof other) || strcmp(first, other)) {
            shard_fail(msg, SHARD_ERR_INVALID,
                       "merging states: state %zu is of another epoch, seed or settings than "
                       "state 0 ('%.200s')",
                       k, states[k]);
            return shard_report(err, SHARD_ERR_INVALID, msg);
        }
    size_t head = (size_t)(strchr(states[0], ';') - states[0]) + 1;
    if (head >= size)
        return shard_report(err, SHARD_ERR_INVALID, "merging states: the merged state does "
                                                    "not fit in the room given");
    memcpy(buf, states[0], head);
    int v4 = states[0][1] == '4';
    int rc = v4 && !strncmp(states[0] + head, "left=", 5)
                 ? merge_cuts(states, n, &m0, buf + head, size - head, msg)
                 : merge_runs(states, n, &m0, v4, buf + head, size - head, msg);
    if (rc == SHARD_ERR_NOMEM)
        return shard_report(err, rc, "out of memory");
    return rc ? shard_report(err, rc, msg) : 0;
}

int shard_reader_state_merge(const char *const *states, size_t n, char *buf, size_t size,
                             ShardError *err)
{
    if (!n)
        return shard_report(err, SHARD_ERR_INVALID, "merging states: none given");
    char **texts = calloc(n, sizeof *texts), msg[SHARD_ERROR_MAX];
    if (!texts)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++)
        if (!(texts[k] = unsealed(states[k], msg)))
            rc = shard_report(err, SHARD_ERR_INVALID, msg);
    if (!rc)
        rc = merge_unsealed((const char *const *)texts, n, buf, size, err);
    if (!rc && seal(buf, size))
        rc = shard_report(err, SHARD_ERR_INVALID, "merging states: the merged state does not "
                                                  "fit in the room given");
    for (size_t k = 0; k < n; k++)
        free(texts[k]);
    free(texts);
    return rc;
}
