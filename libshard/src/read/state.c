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
#include "catalog/keyview.h"
#include "resume/resume.h"
#include "read/bucketplan.h"
#include "read/readerdef.h"
#include "read/state.h"
#include "tar/item.h"

/* The most ranks, workers a rank, and consumers a state may say (a restore's work and
 * memory go with them). */
#define STATE_WORLD_MAX (1ull << 20)
#define STATE_WORKERS_MAX (1ull << 16)
#define STATE_CONSUMERS_MAX (1ull << 24)

static const char *const MODE_NAMES[] = {"exact", "equal", "resampled"};

/* The recorded settings: key, how a refusal names it, whether it is compared, and for a key
 * added after the v4 state's first form (libshard 0.5) the value a state without it reads
 * as, the one that orders as before the key was added (formats/order.md, section 4: how the
 * state grows); NULL where every v4 state says it. */
static const struct {
    const char *key, *label;
    int compared;
    const char *absent;
} KEYS[] = {
    {"mode", "mode", 1, NULL},
    {"pad", "pad", 1, NULL},
    {"epoch_samples", "epoch_samples", 1, NULL},
    {"shuffle_shards", "shuffle_shards", 1, NULL},
    {"shuffle_buffer", "shuffle_buffer (shuffle=)", 1, NULL},
    {"shuffle_initial", "shuffle_initial", 1, NULL},
    {"streams", "streams", 1, NULL},
    {"sources", "the number of sources", 1, NULL},
    {"weights", "the sources' weights (fingerprint)", 1, NULL},
    {"shards", "the number of shards listed", 1, NULL},
    {"counted", "the number of shards with a known sample count", 1, NULL},
    {"list", "the shard list (fingerprint of its shards' names and counts)", 1, NULL},
    {"partitions", "partitions", 0, NULL}, /* compared where this reader sets its own */
    {"total", "total", 0, NULL},
    {"world_size", "world_size", 0, NULL},
    {"num_workers", "num_workers", 0, NULL},
    {"rank", "rank", 0, NULL},
    {"worker", "worker", 0, NULL},
    {"delivered", "delivered", 0, NULL},
    {"draws", "draws", 0, NULL},
    {"since", "since", 0, NULL},
    {"step", "step", 0, "0"}, /* recorded: the rank's steps of the epoch (batch_keys) */
    {"buckets", "aspect_buckets and batch_size (fingerprint)", 1, "-"},
    {"view", "the samples keys= chose (their count and fingerprint)", 1, "-"},
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
        /* the shards' own counts: a view's are its own key's (a view refused by name) */
        uint64_t have = shard_list_entry(r->list, i)->nsamples;
        snprintf(count, sizeof count, "\t%llu\n", (unsigned long long)have);
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
    strcpy(r->buckets_fp, "-");
    return 0;
}

int shard_reader_fingerprint_buckets(ShardReader *r)
{
    ShardDigests d;
    if (shard_digests_init(&d, 0, 1))
        return SHARD_ERR_NOMEM;
    for (size_t i = 0; i < shard_bucketplan_count(r->bucket_plan); i++) {
        char b[40];
        int h, w;
        shard_bucketplan_size(r->bucket_plan, i, &h, &w);
        snprintf(b, sizeof b, "%dx%d\n", h, w);
        shard_digests_update(&d, b, strlen(b));
    }
    char b[40];
    snprintf(b, sizeof b, "batch %llu\n",
             (unsigned long long)shard_bucketplan_batch(r->bucket_plan));
    shard_digests_update(&d, b, strlen(b));
    return fingerprint(&d, r->buckets_fp);
}


/* The compared settings of r as pairs. */
static int settings_pairs(const ShardReader *r, char *buf, size_t size)
{
    const ShardReaderSettings *s = &r->s;
    int n = snprintf(buf, size,
                     "mode=%s,pad=%d,epoch_samples=%llu,shuffle_shards=%d,shuffle_buffer=%zu,"
                     "shuffle_initial=%zu,streams=%zu,sources=%zu,weights=%s,shards=%zu,"
                     "counted=%zu,list=%s,buckets=%s,view=%s",
                     MODE_NAMES[s->mode], s->pad, (unsigned long long)s->epoch_samples,
                     s->shuffle_shards, s->shuffle_buffer, s->shuffle_initial, s->streams,
                     r->mixing ? r->mix.n : (size_t)1, r->weights_fp, r->nurls, r->counted,
                     r->list_fp, r->buckets_fp, r->view ? shard_keyview_id(r->view) : "-");
    return n < 0 || (size_t)n >= size ? SHARD_ERR_INVALID : n;
}

/* The state of order o into buf: its cut (with counts) or runs pos. */
static int format_state(const ShardReader *r, const ShardOrder *o, uint64_t delivered,
                        uint64_t step, const ShardCut *cut, const uint64_t *pos, char *buf,
                        size_t size)
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
                 "worker=%d,delivered=%llu,step=%llu",
                 o->parts, (unsigned long long)o->total, o->world, o->workers, o->rank,
                 o->worker, (unsigned long long)delivered, (unsigned long long)step);
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
    if (!rc && o->history.n) {
        at = strlen(buf);
        if (snprintf(buf + at, size - at, SHARD_STATE_RESUMES_TAG) >= (int)(size - at))
            return SHARD_ERR_INVALID;
        rc = shard_history_format(&o->history, buf, size);
    }
    return rc ? rc : shard_state_seal(buf, size);
}

/* The rank's steps of the epoch at position: a step a unit of samples (a sample for a
 * reader's own state), counted from the reading's start on. */
static uint64_t steps(const ShardOrder *o, uint64_t position, uint64_t unit)
{
    uint64_t since = position > o->base ? position - o->base : 0;
    return o->step0 + (since + unit - 1) / (unit ? unit : 1);
}

int shard_reader_state_at(const ShardReader *r, const ShardOrder *o, uint64_t position,
                          uint64_t unit, char *buf, size_t size)
{
    if (o->counted) {
        ShardCut cut;
        if (shard_order_cut_at(o, position, unit, &cut))
            return SHARD_ERR_NOMEM;
        int rc = format_state(r, o, position, steps(o, position, unit), &cut, NULL, buf, size);
        shard_cut_free(&cut);
        return rc;
    }
    uint64_t *pos = malloc(o->parts * sizeof *pos);
    if (!pos)
        return SHARD_ERR_NOMEM;
    shard_order_runs_at(o, position, pos);
    int rc = format_state(r, o, position, steps(o, position, unit), NULL, pos, buf, size);
    free(pos);
    return rc;
}

int shard_reader_state_after(const ShardReader *r, uint64_t batches, uint64_t batch_size,
                             int drop_last, int first, char *buf, size_t size)
{
    const ShardOrder *o = r->order;
    if (r->bucket_plan) { /* batches planned on the line: counted there */
        ShardCut cut;
        int rc = shard_bucketplan_cut_after(r->bucket_plan, (ShardReader *)r, batches, first,
                                            &cut);
        if (rc)
            return rc;
        rc = format_state(r, o, batches * batch_size, o->step0 + batches, &cut, NULL, buf, size);
        shard_cut_free(&cut);
        return rc;
    }
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
        rc = format_state(r, o, batches * batch_size, o->step0 + batches, &cut, NULL, buf,
                          size);
    shard_cut_free(&cut);
    free(pads);
    return rc;
}

/* Appends "; " and the formatted text to msg (SHARD_ERROR_MAX bytes), truncating. */
static void add(char *msg, const char *fmt, const char *a, const char *b, const char *c)
{
    size_t len = strlen(msg);
    if (len + 2 < SHARD_ERROR_MAX)
        snprintf(msg + len, SHARD_ERROR_MAX - len, fmt, a, b, c);
}

/* A state's settings against this reader's: every difference, and every compared setting
 * the state does not say, into diffs. */
static void compare(const ShardReader *r, const ShardStatePair *theirs, int nt, const ShardStatePair *ours, int no,
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
        const char *v = shard_state_value(ours, no, theirs[i].key);
        if (!KEYS[k].compared || !v || !strcmp(v, theirs[i].value))
            continue;
        if (!strcmp(KEYS[k].key, "mode")) /* the one a resume on another world size meets */
            add(diffs, "; mode is %s in the state and %s here (mode=\"%s\" restores it)",
                theirs[i].value, v, theirs[i].value);
        else if (!strcmp(KEYS[k].key, "counted")) /* a state taken with other index making */
            add(diffs,
                strtoull(theirs[i].value, NULL, 10) < strtoull(v, NULL, 10)
                    ? "; %s is %s in the state and %s here (make_indexes=\"never\" restores it)"
                    : "; %s is %s in the state and %s here (make_indexes=\"always\" restores it)",
                KEYS[k].label, theirs[i].value, v);
        else
            add(diffs, "; %s is %s in the state and %s here", KEYS[k].label, theirs[i].value, v);
    }
    for (size_t k = 0; k < NKEYS; k++) { /* one left out would go uncompared */
        if (!KEYS[k].compared || shard_state_value(theirs, nt, KEYS[k].key))
            continue;
        const char *v = shard_state_value(ours, no, KEYS[k].key);
        if (!KEYS[k].absent)
            add(diffs, "; the state does not say its %s%s%s", KEYS[k].label, "", "");
        else if (v && strcmp(v, KEYS[k].absent))
            add(diffs, "; %s is %s here, and the state, taken before libshard had it, reads as %s",
                KEYS[k].label, v, KEYS[k].absent);
    }
}

/* The numbers a state gives, each bounded by what the data and the settings allow: 0, or
 * -1 with what is wrong in why. */
static int numbers(const ShardStatePair *theirs, int nt, ShardStateIn *in, const char **why)
{
    unsigned long long parts, total, delivered, taken, since, world, workers, step;
    *why = "its partitions, total, topology and delivered samples are not numbers";
    if (shard_state_number(theirs, nt, "partitions", 0, &parts) ||
        shard_state_number(theirs, nt, "total", 0, &total) ||
        shard_state_number(theirs, nt, "delivered", 0, &delivered) ||
        shard_state_number(theirs, nt, "draws", 0, &taken) || shard_state_number(theirs, nt, "since", 0, &since) ||
        shard_state_number(theirs, nt, "world_size", 1, &world) ||
        shard_state_number(theirs, nt, "num_workers", 1, &workers) ||
        shard_state_number(theirs, nt, "step", 0, &step))
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
    in->step = step;
    in->world = (int)world;
    in->workers = (int)workers;
    return 0;
}

/* A partition of a mix is planned shard reading by shard reading: the most a state may ask
 * for (its total is trusted for nothing more). */
#define MIX_READINGS_MAX (1u << 22)

/* Whether a state's total fits this mix: its sources' sizes without epoch_samples; with it,
 * a multiple of epoch_samples (times the consumers the epoch began on) whose partitions
 * each take at most MIX_READINGS_MAX readings of a shard of the mean size. */
static int mix_total_plausible(const ShardReader *r, const ShardStateIn *in)
{
    if (!r->s.epoch_samples)
        return in->total == r->mix_own_total;
    uint64_t samples = 0;
    for (size_t i = 0; i < r->nurls; i++)
        samples += r->counts[i];
    uint64_t mean = samples / (r->nurls ? r->nurls : 1);
    mean = mean ? mean : 1;
    return in->total && in->total % r->s.epoch_samples == 0 &&
           in->total / in->parts / mean <= MIX_READINGS_MAX;
}

int shard_reader_state_check(ShardReader *r, const char *state, ShardStateIn *in)
{
    ShardStateForm f;
    in->text = NULL;
    char *text = shard_state_open(state, &f, r->err);
    if (!text)
        return SHARD_ERR_INVALID;
    unsigned long long e = f.epoch, sd = f.seed;
    const char *cut = f.pairs_end, *why;
    ShardStatePair theirs[SHARD_STATE_PAIRS_MAX], ours[SHARD_STATE_PAIRS_MAX];
    char here[1024], diffs[SHARD_ERROR_MAX] = "";
    int nt = cut ? shard_state_pairs_parse(f.pairs, cut, theirs, SHARD_STATE_PAIRS_MAX) : -1, no = -1;
    int len = nt < 0 ? -1 : settings_pairs(r, here, sizeof here);
    if (len >= 0)
        no = shard_state_pairs_parse(here, here + len, ours, SHARD_STATE_PAIRS_MAX);
    int rc = nt < 0 ? shard_fail(r->err, SHARD_ERR_INVALID,
                                 "reader: the settings of state '%.200s' are not KEY=VALUE "
                                 "pairs followed by ';' and the cut", state)
             : no < 0 ? shard_fail(r->err, SHARD_ERR_INVALID,
                                   "reader: cannot describe its settings")
             : numbers(theirs, nt, in, &why)
                 ? shard_fail(r->err, SHARD_ERR_INVALID, "reader: the state '%.160s' is refused: "
                              "%s", state, why)
                 : 0;
    if (!rc && r->mixing && !mix_total_plausible(r, in))
        rc = shard_fail(r->err, SHARD_ERR_INVALID,
                        "reader: the state's epoch of %llu samples in %u partitions is not "
                        "this mix's (its sources' sizes without epoch_samples; with it, a "
                        "multiple of epoch_samples that plans at most %u shard readings a "
                        "partition)",
                        (unsigned long long)in->total, in->parts, MIX_READINGS_MAX);
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
    in->cut = f.cut;
    in->runs = f.runs;
    in->resumes = f.resumes;
    in->text = text;
    return 0;
}

