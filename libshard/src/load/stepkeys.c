/*
 * Which samples were in step N (loader.h): a job's batches named from the order alone, with
 * one order_only reader that names every consumer's epoch in turn. A rank's steps are its
 * workers' batches as a DataLoader hands them out: one from each worker in turn, worker 0
 * first, a worker whose batches have ended passed over; a worker's batch k is the samples
 * at positions [kB, kB + B) of its epoch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "shard/loader.h"

struct ShardStepPlan {
    ShardReader *r;
    uint64_t bs;
    int drop_last;
    int world, workers;
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
    free(p->v);
    free(p->at);
    free(p->keys);
    free(p);
    *pp = NULL;
}

int shard_step_plan_open(ShardStepPlan **out, const ShardLoaderSettings *s, ShardError *err)
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
    rs.rank = 0;
    rs.worker = 0;
    if (rs.world_size < 0) { /* the job's, as the loader would take it */
        const char *w = getenv("WORLD_SIZE");
        rs.world_size = w && *w ? atoi(w) : 1;
    }
    int rc = shard_reader_open(&p->r, &rs, err);
    if (rc) {
        free(p);
        return rc;
    }
    p->bs = s->batch_size;
    p->drop_last = s->drop_last;
    p->world = rs.world_size;
    p->workers = rs.num_workers;
    *out = p;
    return 0;
}

const char *shard_step_plan_error(const ShardStepPlan *p) { return p->err; }

ShardReader *shard_step_plan_reader(ShardStepPlan *p) { return p->r; }

static int fail_reader(ShardStepPlan *p, int rc)
{
    snprintf(p->err, sizeof p->err, "%s", shard_reader_error(p->r));
    return rc;
}

/* Batches of consumer (rank, w) in epoch e, into *b. */
static int worker_batches(ShardStepPlan *p, uint64_t e, int rank, int w, uint64_t *b)
{
    int rc = shard_reader_set_consumer(p->r, rank, w, e);
    if (rc)
        return fail_reader(p, rc);
    int64_t len = shard_reader_epoch_length(p->r);
    if (len < 0)
        return shard_fail(p->err, SHARD_ERR_UNSUPPORTED, "step plan: the epoch's length is not "
                          "known");
    uint64_t n = (uint64_t)len;
    *b = p->drop_last ? n / p->bs : (n + p->bs - 1) / p->bs;
    return 0;
}

static int check_rank(ShardStepPlan *p, int rank)
{
    if (rank < 0 || rank >= p->world)
        return shard_fail(p->err, SHARD_ERR_INVALID,
                          "step plan: rank %d, and the job's world size is %d", rank, p->world);
    return 0;
}

int64_t shard_step_plan_steps(ShardStepPlan *p, uint64_t epoch, int rank)
{
    int rc = check_rank(p, rank);
    if (rc)
        return rc;
    uint64_t total = 0;
    for (int w = 0; w < p->workers; w++) {
        uint64_t b = 0;
        if ((rc = worker_batches(p, epoch, rank, w, &b)))
            return rc;
        total += b;
    }
    return (int64_t)total;
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

/* Appends rank's step `step` of epoch e. */
static int rank_step(ShardStepPlan *p, uint64_t e, uint64_t step, int rank)
{
    uint64_t *b = malloc((size_t)p->workers * sizeof *b);
    if (!b)
        return shard_fail(p->err, SHARD_ERR_NOMEM, "out of memory");
    int rc = 0;
    uint64_t steps = 0;
    for (int w = 0; !rc && w < p->workers; w++) {
        rc = worker_batches(p, e, rank, w, &b[w]);
        steps += b[w];
    }
    int w = 0;
    uint64_t k = 0;
    if (!rc && locate(b, p->workers, step, &w, &k))
        rc = shard_fail(p->err, SHARD_ERR_INVALID,
                        "step plan: step %llu of epoch %llu on rank %d: the epoch has %llu "
                        "steps there%s%llu)", (unsigned long long)step, (unsigned long long)e,
                        rank, (unsigned long long)steps, steps ? " (the last is " : " (",
                        (unsigned long long)(steps ? steps - 1 : 0));
    free(b);
    if (rc)
        return rc;
    if ((rc = shard_reader_set_consumer(p->r, rank, w, e)) ||
        (rc = shard_reader_seek(p->r, k * p->bs)))
        return fail_reader(p, rc);
    for (uint64_t i = 0; i < p->bs; i++) {
        ShardSampleName nm;
        rc = shard_reader_name_next(p->r, &nm);
        if (rc == SHARD_EOS)
            break;
        if (rc)
            return fail_reader(p, rc);
        if ((rc = keep(p, &nm, rank, w, step, i)))
            return rc;
    }
    return 0;
}

int shard_step_keys(ShardStepPlan *p, uint64_t epoch, uint64_t step, int rank,
                    const ShardStepSample **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    forget_answer(p);
    int rc = 0;
    if (rank == SHARD_STEP_ALL_RANKS) { /* exact mode's ranks may end a step apart */
        int64_t most = 0, steps;
        for (int r = 0; !rc && r < p->world; r++) {
            if ((steps = shard_step_plan_steps(p, epoch, r)) < 0)
                return (int)steps;
            most = steps > most ? steps : most;
            if ((uint64_t)steps > step)
                rc = rank_step(p, epoch, step, r);
        }
        if (!rc && (uint64_t)most <= step)
            rc = shard_fail(p->err, SHARD_ERR_INVALID,
                            "step plan: step %llu of epoch %llu: its ranks have at most %llu "
                            "steps (the last is %lld)", (unsigned long long)step,
                            (unsigned long long)epoch, (unsigned long long)most,
                            (long long)most - 1);
    } else if (!(rc = check_rank(p, rank))) {
        rc = rank_step(p, epoch, step, rank);
    }
    if (!rc)
        settle(p, out, n);
    return rc;
}

int shard_step_where(ShardStepPlan *p, const char *key, uint64_t epoch,
                     const ShardStepSample **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    forget_answer(p);
    uint64_t *b = malloc((size_t)p->workers * sizeof *b);
    if (!b)
        return shard_fail(p->err, SHARD_ERR_NOMEM, "out of memory");
    int rc = 0;
    for (int rank = 0; !rc && rank < p->world; rank++) {
        for (int w = 0; !rc && w < p->workers; w++)
            rc = worker_batches(p, epoch, rank, w, &b[w]);
        for (int w = 0; !rc && w < p->workers; w++) {
            if ((rc = shard_reader_set_consumer(p->r, rank, w, epoch))) {
                fail_reader(p, rc);
                break;
            }
            uint64_t end = p->drop_last ? b[w] * p->bs : UINT64_MAX;
            ShardSampleName nm;
            while (!(rc = shard_reader_name_next(p->r, &nm)) && nm.position < end)
                if (!strcmp(nm.key, key) &&
                    (rc = keep(p, &nm, rank, w, step_of(b, p->workers, w, nm.position / p->bs),
                               nm.position % p->bs)))
                    break;
            if (rc == SHARD_EOS || (!rc && nm.position >= end))
                rc = 0;
            else if (rc && !p->err[0])
                fail_reader(p, rc);
        }
    }
    free(b);
    if (!rc && !p->n)
        rc = shard_fail(p->err, SHARD_ERR_NOT_FOUND, "step plan: key '%s' is not in epoch %llu",
                        key, (unsigned long long)epoch);
    if (!rc)
        settle(p, out, n);
    return rc;
}
