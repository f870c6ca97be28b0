/*
 * Which samples were in step N (loader.h): a job's batches named from the order alone, with
 * one order_only reader that names every consumer's epoch in turn. A rank's steps are its
 * workers' batches as a DataLoader hands them out: one from each worker in turn, worker 0
 * first, a worker whose batches have ended passed over; a worker's batch k is the samples
 * at positions [kB, kB + B) of its epoch, or with aspect_buckets its k-th batch named in
 * turn (a bucketed reading hands out whole batches; its counts come from the line's walk,
 * read/bucketplan.h). A job resumed on other topologies within the
 * epoch (a state's readings, resume/history.h) numbers its steps from the epoch's start
 * across them: step N is named on the topology that delivered it, from the cut its reading
 * began at.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "read/aspects.h"
#include "read/ordernames.h"
#include "read/state.h"
#include "resume/resume.h"
#include "shard/loader.h"

struct ShardStepPlan {
    ShardReader *r;
    uint64_t bs;
    int drop_last;
    int bucketed;       /* aspect_buckets: batches named in turn */
    int world, workers; /* the job's topology now */
    ShardReading fresh; /* an epoch read from its start on it */
    int restored;       /* a state was given: its epoch's readings below */
    uint64_t epoch;
    uint32_t parts;
    uint64_t total;
    ShardHistory readings;
    char err[SHARD_ERROR_MAX];
    ShardStepSample *v; /* the last answer */
    size_t *at;         /* where each one's key is in keys */
    size_t n, cap;
    char *keys;         /* its keys, back to back */
    size_t keys_len, keys_cap;
};

void shard_step_plan_free(ShardStepPlan **pp)
{
    ShardStepPlan *p = *pp;
    if (!p)
        return;
    shard_reader_free(&p->r);
    shard_history_free(&p->readings);
    free(p->v);
    free(p->at);
    free(p->keys);
    free(p);
    *pp = NULL;
}

int shard_step_plan_open(ShardStepPlan **out, const ShardLoaderSettings *s, const char *state,
                         ShardError *err)
{
    *out = NULL;
    if (!s->batch_size)
        return shard_report(err, SHARD_ERR_INVALID, "step plan: batch_size 0");
    ShardStepPlan *p = calloc(1, sizeof *p);
    if (!p)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    ShardReaderSettings rs = s->reader;
    rs.order_only = 1;
    rs.batch_size = s->batch_size; /* equal mode's repeats count in batches, as the loader's */
    rs.drop_last = s->drop_last;
    if (rs.aspect_buckets) /* as the loader scales the named sets */
        rs.aspect_side = shard_aspect_side(s->transform.width, s->transform.height);
    rs.rank = 0;
    rs.worker = 0;
    int rc = shard_reader_open(&p->r, &rs, err); /* world_size -1: $WORLD_SIZE, checked */
    if (rc) {
        free(p);
        return rc;
    }
    p->bs = s->batch_size;
    p->drop_last = s->drop_last;
    p->bucketed = rs.aspect_buckets != NULL;
    const ShardOrder *o = shard_reader_order_of(p->r); /* the topology the reader took */
    p->world = o->world;
    p->workers = o->workers;
    p->fresh = (ShardReading){0, p->world, p->workers, NULL};
    if (state) { /* checked as a restore checks it; its readings, this one's added */
        if ((rc = shard_reader_restore(p->r, state))) {
            shard_report(err, rc, shard_reader_error(p->r));
            shard_step_plan_free(&p);
            return rc;
        }
        p->restored = 1;
        const ShardHistory *h = shard_reader_readings(p->r, &p->epoch, &p->parts, &p->total);
        if (shard_history_copy(&p->readings, h)) {
            shard_step_plan_free(&p);
            return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
        }
    }
    *out = p;
    return 0;
}

const char *shard_step_plan_error(const ShardStepPlan *p) { return p->err; }

int shard_step_plan_world(const ShardStepPlan *p) { return p->world; }

ShardReader *shard_step_plan_reader(ShardStepPlan *p) { return p->r; }

static int fail_reader(ShardStepPlan *p, int rc)
{
    snprintf(p->err, sizeof p->err, "%s", shard_reader_error(p->r));
    return rc;
}

/* An epoch's readings: a state's for its epoch, else one from the start on this topology. */
typedef struct Readings {
    const ShardReading *v;
    size_t n;
    uint32_t parts;
    uint64_t total;
    uint64_t epoch;
} Readings;

static Readings readings_of(const ShardStepPlan *p, uint64_t e)
{
    Readings g = {&p->fresh, 1, 0, 0, e};
    if (p->restored && e == p->epoch) {
        g.parts = p->parts;
        g.total = p->total;
        if (p->readings.n) {
            g.v = p->readings.v;
            g.n = p->readings.n;
        }
    }
    return g;
}

/* Whether reading i can be named: it began at the epoch's start, or from a cut whose
 * topology the reading before it says (the first kept after older ones were let go has
 * none). */
static int nameable(const Readings *g, size_t i) { return !g->v[i].cut || i > 0; }

/* Names consumer (rank, w) of reading i; its batches in the reading and where its
 * positions begin. */
static int enter(ShardStepPlan *p, const Readings *g, size_t i, int rank, int w, uint64_t *b,
                 uint64_t *base)
{
    if (!nameable(g, i))
        return shard_fail(p->err, SHARD_ERR_INVALID, "step plan: the state keeps the epoch's "
                          "last %d readings, and the steps before step %llu came before them",
                          SHARD_HISTORY_MAX,
                          (unsigned long long)(g->n > 1 ? g->v[1].step : g->v[0].step));
    int rc = shard_reader_name_reading(p->r, g->epoch, g->parts, g->total, &g->v[i],
                                       i ? &g->v[i - 1] : NULL, rank, w);
    if (rc)
        return fail_reader(p, rc);
    uint64_t len;
    shard_reader_reading_span(p->r, base, &len);
    if (p->bucketed)
        return shard_reader_named_batches(p->r, b) ? fail_reader(p, SHARD_ERR_STATE) : 0;
    *b = p->drop_last ? len / p->bs : (len + p->bs - 1) / p->bs;
    return 0;
}

/* The batches of each worker of rank in reading i, into b (room for its workers), and the
 * rank's steps in it (cut where the next reading began). */
static int rank_batches(ShardStepPlan *p, const Readings *g, size_t i, int rank, uint64_t *b,
                        uint64_t *steps)
{
    uint64_t total = 0, base;
    for (int w = 0; w < g->v[i].workers; w++) {
        int rc = enter(p, g, i, rank, w, &b[w], &base);
        if (rc)
            return rc;
        total += b[w];
    }
    if (i + 1 < g->n && g->v[i + 1].step - g->v[i].step < total)
        total = g->v[i + 1].step - g->v[i].step;
    *steps = total;
    return 0;
}

/* The worker and its batch that make `step` of a rank whose workers give b[w] batches. */
static int locate(const uint64_t *b, int workers, uint64_t step, int *w, uint64_t *k)
{
    uint64_t done = 0, round = 0;
    for (;;) {
        /* whole rounds in which the same workers still have batches */
        int active = 0;
        uint64_t least = UINT64_MAX;
        for (int i = 0; i < workers; i++)
            if (b[i] > round) {
                active++;
                least = b[i] < least ? b[i] : least;
            }
        if (!active)
            return -1;
        uint64_t span = (least - round) * (uint64_t)active;
        if (step < done + span) {
            uint64_t in = step - done;
            round += in / (uint64_t)active;
            int nth = (int)(in % (uint64_t)active);
            for (int i = 0; i < workers; i++)
                if (b[i] > round && nth-- == 0) {
                    *w = i;
                    *k = round;
                    return 0;
                }
            return -1;
        }
        done += span;
        round = least;
    }
}

/* The step of a rank whose workers give b[w] batches at which worker w gives its batch k. */
static uint64_t step_of(const uint64_t *b, int workers, int w, uint64_t k)
{
    uint64_t step = 0;
    for (int i = 0; i < workers; i++) /* the batches of every worker's earlier rounds */
        step += b[i] < k ? b[i] : k;
    for (int i = 0; i < w; i++) /* this round's before it */
        step += b[i] > k;
    return step;
}

/* Worker w's batches among a rank's first m steps. */
static uint64_t batches_within(const uint64_t *b, int workers, int w, uint64_t m)
{
    int last;
    uint64_t k;
    if (!m || locate(b, workers, m - 1, &last, &k))
        return 0;
    uint64_t n = w <= last ? k + 1 : k;
    return n < b[w] ? n : b[w];
}

static int check_rank(ShardStepPlan *p, int rank, int world, uint64_t step)
{
    if (rank >= 0 && rank < world)
        return 0;
    if (world == p->world)
        return shard_fail(p->err, SHARD_ERR_INVALID,
                          "step plan: rank %d, and the job's world size is %d", rank, world);
    return shard_fail(p->err, SHARD_ERR_INVALID,
                      "step plan: rank %d at step %llu, which the job took on %d ranks", rank,
                      (unsigned long long)step, world);
}

/* The reading step N of epoch e lies in; -1 after saying why (before the readings kept). */
static int64_t reading_at(ShardStepPlan *p, const Readings *g, uint64_t step)
{
    size_t first = nameable(g, 0) ? 0 : 1;
    if (first >= g->n || step < g->v[first].step) {
        shard_fail(p->err, SHARD_ERR_INVALID,
                   "step plan: the state keeps the epoch's last %d readings, from step %llu: "
                   "step %llu came before them", SHARD_HISTORY_MAX,
                   (unsigned long long)(first < g->n ? g->v[first].step : g->v[0].step),
                   (unsigned long long)step);
        return -1;
    }
    size_t i = g->n - 1;
    while (i > 0 && step < g->v[i].step)
        i--;
    return (int64_t)i;
}

int64_t shard_step_plan_steps(ShardStepPlan *p, uint64_t epoch, int rank)
{
    Readings g = readings_of(p, epoch);
    const ShardReading *last = &g.v[g.n - 1];
    int rc = check_rank(p, rank, last->world, last->step);
    uint64_t *b = rc ? NULL : malloc((size_t)last->workers * sizeof *b), steps = 0;
    if (!rc && !b)
        rc = shard_fail(p->err, SHARD_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = rank_batches(p, &g, g.n - 1, rank, b, &steps);
    free(b);
    return rc ? rc : (int64_t)(last->step + steps);
}

static void forget_answer(ShardStepPlan *p)
{
    p->err[0] = 0;
    p->n = 0;
    p->keys_len = 0;
}

/* Appends a sample (its key copied), with its step and slot. */
static int keep(ShardStepPlan *p, const ShardSampleName *nm, int rank, int w, uint64_t step,
                uint64_t slot)
{
    size_t klen = strlen(nm->key) + 1;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        ShardStepSample *v = realloc(p->v, cap * sizeof *v);
        if (v)
            p->v = v;
        size_t *at = v ? realloc(p->at, cap * sizeof *at) : NULL;
        if (!at)
            return shard_fail(p->err, SHARD_ERR_NOMEM, "out of memory");
        p->at = at;
        p->cap = cap;
    }
    if (p->keys_len + klen > p->keys_cap) {
        size_t cap = 2 * (p->keys_len + klen) + 256;
        char *k = realloc(p->keys, cap);
        if (!k)
            return shard_fail(p->err, SHARD_ERR_NOMEM, "out of memory");
        p->keys = k;
        p->keys_cap = cap;
    }
    memcpy(p->keys + p->keys_len, nm->key, klen);
    ShardStepSample *x = &p->v[p->n++];
    x->key = NULL;
    p->at[p->n - 1] = p->keys_len;
    p->keys_len += klen;
    x->url = nm->url;
    x->shard = nm->shard;
    x->index = nm->index;
    x->position = nm->position;
    x->repeat = nm->repeat;
    x->rank = rank;
    x->worker = w;
    x->step = step;
    x->slot = slot;
    return 0;
}

/* Points the answer's keys into the keys kept (which may have moved while growing). */
static void settle(ShardStepPlan *p, const ShardStepSample **out, size_t *n)
{
    for (size_t i = 0; i < p->n; i++)
        p->v[i].key = p->keys + p->at[i];
    *out = p->v;
    *n = p->n;
}

/* Appends a bucketed consumer's batch k, its batches named in turn from the reading's
 * start, as step `step`. */
static int name_batch(ShardStepPlan *p, uint64_t k, int rank, int w, uint64_t step)
{
    uint64_t batch = 0, slot = 0;
    ShardSampleName nm;
    int rc;
    while (!(rc = shard_reader_name_next(p->r, &nm))) {
        if (batch == k && (rc = keep(p, &nm, rank, w, step, slot++)))
            return rc;
        if (nm.batch_end && batch++ == k)
            return 0;
    }
    return rc == SHARD_EOS ? 0 : p->err[0] ? rc : fail_reader(p, rc);
}

/* Appends rank's step `step` of reading i (0: a rank whose steps there ended before it:
 * *found 0). */
static int rank_step(ShardStepPlan *p, const Readings *g, size_t i, uint64_t step, int rank,
                     int *found)
{
    const ShardReading *at = &g->v[i];
    uint64_t *b = malloc((size_t)at->workers * sizeof *b), steps = 0, base;
    if (!b)
        return shard_fail(p->err, SHARD_ERR_NOMEM, "out of memory");
    int rc = rank_batches(p, g, i, rank, b, &steps), w = 0;
    uint64_t k = 0, local = step - at->step;
    *found = !rc && local < steps && !locate(b, at->workers, local, &w, &k);
    free(b);
    if (rc || !*found)
        return rc;
    if (!(rc = enter(p, g, i, rank, w, &steps, &base)) && p->bucketed)
        return name_batch(p, k, rank, w, step);
    if (rc || (rc = shard_reader_seek(p->r, base + k * p->bs)))
        return rc == SHARD_ERR_NOMEM || p->err[0] ? rc : fail_reader(p, rc);
    for (uint64_t j = 0; j < p->bs; j++) {
        ShardSampleName nm;
        rc = shard_reader_name_next(p->r, &nm);
        if (rc == SHARD_EOS)
            break;
        if (rc)
            return fail_reader(p, rc);
        if ((rc = keep(p, &nm, rank, w, step, j)))
            return rc;
    }
    return 0;
}

int shard_step_state(ShardStepPlan *p, uint64_t epoch, uint64_t step, int rank,
                     ShardStepConsumer *who, char *buf, size_t size)
{
    forget_answer(p);
    Readings g = readings_of(p, epoch);
    int64_t i = reading_at(p, &g, step);
    if (i < 0)
        return SHARD_ERR_INVALID;
    const ShardReading *at = &g.v[i];
    int rc = check_rank(p, rank, at->world, step);
    uint64_t *b = rc ? NULL : malloc((size_t)at->workers * sizeof *b), steps = 0, k = 0, base;
    if (!rc && !b)
        rc = shard_fail(p->err, SHARD_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = rank_batches(p, &g, (size_t)i, rank, b, &steps);
    int w = 0;
    if (!rc && (step - at->step >= steps || locate(b, at->workers, step - at->step, &w, &k)))
        rc = shard_fail(p->err, SHARD_ERR_INVALID,
                        "step plan: step %llu of epoch %llu on rank %d: past the epoch's end "
                        "there", (unsigned long long)step, (unsigned long long)epoch, rank);
    /* the state says every consumer of the rank delivered k batches: the rank's steps then
     * (before worker 0's batch k), and the readings up to this one */
    uint64_t then = rc ? 0 : at->step + step_of(b, at->workers, 0, k);
    free(b);
    if (!rc)
        rc = enter(p, &g, (size_t)i, rank, w, &steps, &base);
    if (rc)
        return rc;
    *who = (ShardStepConsumer){at->world, at->workers, rank, w};
    if (shard_reader_note_reading(p->r, p->bucketed ? at->step : then - k,
                                  g.n > 1 || at->cut ? g.v : NULL, (size_t)i + 1))
        return shard_fail(p->err, SHARD_ERR_NOMEM, "out of memory");
    if (p->bucketed) /* the job's state after every rank's steps then, its batches counted
                        on the line */
        rc = shard_reader_state_after(p->r, then - at->step, p->bs, p->drop_last, 0, buf, size);
    else
        rc = shard_reader_state_at(p->r, shard_reader_order_of(p->r), base + k * p->bs, p->bs,
                                   buf, size);
    if (rc && rc != SHARD_ERR_INVALID && rc != SHARD_ERR_NOMEM) /* the walk's, said */
        return shard_fail(p->err, rc, "step plan: the state at step %llu: %s",
                          (unsigned long long)step, shard_reader_error(p->r));
    if (rc)
        return shard_fail(p->err, rc, "step plan: the consumer's state does not fit in %zu "
                          "bytes", size);
    return 0;
}

int shard_step_keys(ShardStepPlan *p, uint64_t epoch, uint64_t step, int rank,
                    const ShardStepSample **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    forget_answer(p);
    Readings g = readings_of(p, epoch);
    int64_t i = reading_at(p, &g, step);
    if (i < 0)
        return SHARD_ERR_INVALID;
    int world = g.v[i].world, rc = 0, found = 0, any = 0;
    if (rank != SHARD_STEP_ALL_RANKS && (rc = check_rank(p, rank, world, step)))
        return rc;
    for (int r = rank == SHARD_STEP_ALL_RANKS ? 0 : rank; !rc && r < world; r++) {
        rc = rank_step(p, &g, (size_t)i, step, r, &found); /* exact mode's ranks may end a
                                                              step apart */
        any |= found;
        if (rank != SHARD_STEP_ALL_RANKS)
            break;
    }
    if (!rc && !any) {
        int64_t last = 0;
        const ShardReading *end = &g.v[g.n - 1];
        for (int r = rank == SHARD_STEP_ALL_RANKS ? 0 : rank; r < end->world; r++) {
            int64_t n = shard_step_plan_steps(p, epoch, r); /* exact mode: they may differ */
            if (n < 0)
                return (int)n;
            last = n > last ? n : last;
            if (rank != SHARD_STEP_ALL_RANKS)
                break;
        }
        char who[32] = "every rank";
        if (rank != SHARD_STEP_ALL_RANKS)
            snprintf(who, sizeof who, "rank %d", rank);
        rc = shard_fail(p->err, SHARD_ERR_INVALID,
                        "step plan: step %llu of epoch %llu on %s: the epoch has %lld steps "
                        "there (the last is %lld)", (unsigned long long)step,
                        (unsigned long long)epoch, who, (long long)last, (long long)last - 1);
    }
    if (!rc)
        settle(p, out, n);
    return rc;
}

/* Appends every place of key among consumer (rank, w)'s first `count` batches of reading i,
 * whose rank's workers give b[] batches there. */
static int where_in(ShardStepPlan *p, const Readings *g, size_t i, const char *key, int rank,
                    int w, const uint64_t *b, uint64_t count)
{
    uint64_t mine, base;
    int rc = enter(p, g, i, rank, w, &mine, &base);
    if (rc || !count)
        return rc;
    ShardSampleName nm;
    if (p->bucketed) { /* its first `count` batches, named in turn */
        uint64_t k = 0, slot = 0;
        while (k < count && !(rc = shard_reader_name_next(p->r, &nm))) {
            if (!strcmp(nm.key, key) &&
                (rc = keep(p, &nm, rank, w,
                           g->v[i].step + step_of(b, g->v[i].workers, w, k), slot)))
                return rc;
            slot = nm.batch_end ? 0 : slot + 1;
            k += nm.batch_end;
        }
        return rc == SHARD_EOS || !rc ? 0 : p->err[0] ? rc : fail_reader(p, rc);
    }
    uint64_t end = base + count * p->bs;
    while (!(rc = shard_reader_name_next(p->r, &nm)) && nm.position < end) {
        uint64_t local = nm.position - base;
        if (!strcmp(nm.key, key) &&
            (rc = keep(p, &nm, rank, w,
                       g->v[i].step + step_of(b, g->v[i].workers, w, local / p->bs),
                       local % p->bs)))
            return rc;
    }
    return rc == SHARD_EOS || !rc ? 0 : p->err[0] ? rc : fail_reader(p, rc);
}

int shard_step_where(ShardStepPlan *p, const char *key, uint64_t epoch,
                     const ShardStepSample **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    forget_answer(p);
    Readings g = readings_of(p, epoch);
    int rc = 0;
    for (size_t i = nameable(&g, 0) ? 0 : 1; !rc && i < g.n; i++) {
        const ShardReading *at = &g.v[i];
        uint64_t *b = malloc((size_t)at->workers * sizeof *b), steps;
        if (!b)
            return shard_fail(p->err, SHARD_ERR_NOMEM, "out of memory");
        for (int rank = 0; !rc && rank < at->world; rank++) {
            rc = rank_batches(p, &g, i, rank, b, &steps);
            for (int w = 0; !rc && w < at->workers; w++)
                rc = where_in(p, &g, i, key, rank, w, b,
                              batches_within(b, at->workers, w, steps));
        }
        free(b);
    }
    if (!rc && !p->n)
        rc = shard_fail(p->err, SHARD_ERR_NOT_FOUND, "step plan: key '%s' is not in epoch %llu",
                        key, (unsigned long long)epoch);
    if (!rc)
        settle(p, out, n);
    return rc;
}
