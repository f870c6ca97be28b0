/*
 * A bucketed epoch's plan (bucketplan.h): the buckets, each sample's bucket from its
 * shard's columns, the line replayed on identities, and what the replay counts: each
 * consumer's batches, equal mode's quota, the cut after a number of batches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "read/aspects.h"
#include "read/bucketplan.h"
#include "read/epoch.h"
#include "read/specs.h"
#include "resume/resume.h"
#include "tar/columns.h"
#include "tar/item.h"

/* Shards' sizes kept at once: more than the streams and the shuffle buffer's spread span. */
enum { SIZES_KEPT = 32 };

typedef struct KeptSizes {
    uint32_t shard;
    uint64_t used; /* 0: empty */
    ShardColumns c;
    int k[2]; /* the width and height columns */
} KeptSizes;

/* The last walk of a whole line: each consumer's full batches, and who ends the line with
 * how many partials. A step plan asks it for every worker of a rank, and again at each
 * consumer's first take: one walk a reading. */
typedef struct WalkMemo {
    int valid;
    uint64_t epoch, total;
    uint32_t parts;
    ShardCut cut; /* the reading's, copied */
    uint64_t *fulls;
    long end;
    size_t partials;
} WalkMemo;

struct ShardBucketPlan {
    ShardBuckets b;
    WalkMemo memo;
    size_t batch;
    int drop_last;
    KeptSizes kept[SIZES_KEPT];
    uint64_t tick;
    ShardReaderSpecs specs;
    ShardReaderSettings replay_settings;
    ShardReader *replay; /* order_only, one consumer, made at the first replay */
    ShardReplayOps ops;
};

static const char *refused(const ShardReaderSettings *s)
{
    if (s->mode == SHARD_MODE_RESAMPLED)
        return "exact or equal mode (resampled mode draws shards without an order to plan on)";
    if (s->mode == SHARD_MODE_EQUAL && s->pad)
        return "pad off (equal mode evens the ranks by dropping batches; pad is not bucketed "
               "yet)";
    if (s->epoch_samples)
        return "a pass over the data (epoch_samples is not bucketed yet)";
    if (s->make_indexes == SHARD_READER_INDEXES_NEVER)
        return "every shard's count and image sizes (make_indexes is 'never': make them with "
               "shardcat index --geometry)";
    return NULL;
}

/* The buckets: the spec's, "auto" fitted to the list's aspects. */
static int buckets_of(ShardBucketPlan *p, ShardReader *r, const ShardReaderSettings *s)
{
    int rc = shard_buckets_parse(&p->b, s->aspect_buckets, s->aspect_side, r->err);
    char msg[SHARD_ERROR_MAX];
    if (!rc && p->b.auto_k && (rc = shard_aspect_fit(r->list, &p->b, s->aspect_side,
                                                     r->s.remote, msg)))
        shard_fail(r->err, rc, "reader: aspect_buckets: %s", msg);
    return rc;
}

int shard_bucketplan_new(ShardBucketPlan **out, ShardReader *r, const ShardReaderSettings *s,
                         const ShardReplayOps *ops)
{
    *out = NULL;
    const char *need = refused(s);
    if (need)
        return shard_fail(r->err, SHARD_ERR_UNSUPPORTED, "reader: aspect_buckets needs %s",
                          need);
    for (size_t i = 0; i < r->nurls; i++)
        if (r->counts[i] == SHARD_COUNT_UNKNOWN)
            return shard_fail(r->err, SHARD_ERR_UNSUPPORTED,
                              "reader: aspect_buckets needs every shard's count, and %s has "
                              "none (make it: shardcat index --geometry)",
                              shard_list_entry(r->list, i)->url);
    for (size_t i = 0; i < r->nurls; i++)
        if (!shard_list_entry(r->list, i)->columns)
            return shard_fail(r->err, SHARD_ERR_UNSUPPORTED,
                              "reader: aspect_buckets needs each shard's image sizes, and %s "
                              "has none beside its index (make them: shardcat index "
                              "--geometry)", shard_list_entry(r->list, i)->url);
    ShardBucketPlan *p = calloc(1, sizeof *p);
    if (!p)
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    p->batch = (size_t)s->batch_size;
    p->drop_last = s->drop_last;
    p->ops = *ops;
    int rc = buckets_of(p, r, s);
    if (!rc && shard_reader_specs_copy(&p->specs, s))
        rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    if (rc) {
        shard_bucketplan_free(&p);
        return rc;
    }
    ShardReaderSettings *rs = &p->replay_settings;
    *rs = *s;
    rs->urls = (const char *const *)p->specs.urls;
    rs->sources = p->specs.sources;
    rs->index_cache = p->specs.index_cache;
    rs->rank = 0;
    rs->world_size = 1;
    rs->worker = 0;
    rs->num_workers = 1;
    rs->order_only = 1;
    rs->aspect_buckets = NULL;
    rs->remote = r->s.remote;
    rs->seed = r->s.seed;
    rs->have_seed = 1;
    *out = p;
    return 0;
}

void shard_bucketplan_free(ShardBucketPlan **pp)
{
    ShardBucketPlan *p = *pp;
    if (!p)
        return;
    for (size_t i = 0; i < SIZES_KEPT; i++)
        if (p->kept[i].used)
            shard_columns_clear(&p->kept[i].c);
    if (p->replay)
        p->ops.free(&p->replay);
    if (p->memo.valid)
        shard_cut_free(&p->memo.cut);
    free(p->memo.fulls);
    shard_reader_specs_free(&p->specs);
    free(p);
    *pp = NULL;
}

size_t shard_bucketplan_count(const ShardBucketPlan *p) { return p->b.n; }

void shard_bucketplan_size(const ShardBucketPlan *p, size_t b, int *height, int *width)
{
    *height = p->b.v[b].height;
    *width = p->b.v[b].width;
}

size_t shard_bucketplan_batch(const ShardBucketPlan *p) { return p->batch; }

int shard_bucketplan_drops(const ShardBucketPlan *p) { return p->drop_last; }

/* Shard's sizes, kept: the least recently used ones make room. */
static int sizes_of(ShardBucketPlan *p, ShardReader *r, uint32_t shard, KeptSizes **out)
{
    KeptSizes *oldest = &p->kept[0];
    for (size_t i = 0; i < SIZES_KEPT; i++) {
        KeptSizes *k = &p->kept[i];
        if (k->used && k->shard == shard) {
            k->used = ++p->tick;
            *out = k;
            return 0;
        }
        if (k->used < oldest->used)
            oldest = k;
    }
    if (oldest->used)
        shard_columns_clear(&oldest->c);
    oldest->used = 0;
    char msg[SHARD_ERROR_MAX];
    int rc = shard_aspect_sizes(r->list, shard, r->s.remote, &oldest->c, oldest->k, msg);
    if (rc)
        return shard_fail(r->err, rc, "reader: aspect_buckets: %s", msg);
    oldest->shard = shard;
    oldest->used = ++p->tick;
    *out = oldest;
    return 0;
}

void shard_bucketplan_no_size(const ShardReader *r, uint32_t shard, uint64_t index, char *buf,
                              size_t size)
{
    const ShardListEntry *e = shard_list_entry(r->list, shard);
    snprintf(buf, size, "aspect_buckets: sample %llu of %.300s has no image size in %.300s (no "
             "jpg, jpeg, png or webp member, or its header does not parse)",
             (unsigned long long)index, e->url, e->columns);
}

int shard_bucketplan_bucket_of(ShardBucketPlan *p, ShardReader *r, uint32_t shard,
                               uint64_t index, size_t *b)
{
    KeptSizes *k = NULL;
    int rc = sizes_of(p, r, shard, &k);
    if (rc)
        return rc;
    uint32_t w = shard_columns_value(&k->c, index, k->k[0]);
    uint32_t h = shard_columns_value(&k->c, index, k->k[1]);
    if (w == SHARD_COLUMN_NONE || h == SHARD_COLUMN_NONE || !w || !h) {
        *b = SHARD_NO_BUCKET;
        if (r->s.skip_errors)
            return 0;
        char msg[SHARD_ERROR_MAX];
        shard_bucketplan_no_size(r, shard, index, msg, sizeof msg);
        return shard_fail(r->err, SHARD_ERR_FORMAT, "reader: %s", msg);
    }
    *b = shard_bucket_of(&p->b, w, h);
    return 0;
}

/* The replay's reader at the start of the reading's epoch and partitions, opened when
 * first needed. */
static int replay_start(ShardBucketPlan *p, ShardReader *r)
{
    ShardError e;
    if (!p->replay && p->ops.open(&p->replay, &p->replay_settings, &e))
        return shard_fail(r->err, e.code, "reader: aspect_buckets: replaying the line: %s",
                          e.message);
    if (shard_list_count(p->replay->list) != r->nurls)
        return shard_fail(r->err, SHARD_ERR_STATE, "reader: aspect_buckets: the shards listed "
                          "again differ (%zu, not %zu)", shard_list_count(p->replay->list),
                          r->nurls);
    int rc = shard_reader_plan(p->replay, r->epoch, r->order->parts,
                               r->mixing ? r->order->total : 0);
    return rc ? shard_fail(r->err, rc, "reader: aspect_buckets: %s", p->replay->err) : 0;
}

int shard_bucketplan_replay(ShardBucketPlan *p, ShardReader *r, ShardGrouper *g, uint64_t upto,
                            void (*done)(void *ctx, uint64_t point), void *ctx)
{
    int rc = replay_start(p, r);
    for (uint64_t k = 0; !rc && k < upto; k++) {
        ShardItem *it;
        if ((rc = shard_reader_take_next(p->replay, &it))) {
            rc = shard_fail(r->err, rc == SHARD_EOS ? SHARD_ERR_STATE : rc,
                            "reader: aspect_buckets: replaying the line: %s",
                            rc == SHARD_EOS ? "it ended early" : p->replay->err);
            break;
        }
        size_t b;
        ShardGroupItem gi = {k, it->shard, it->v.index};
        shard_item_release(it);
        if (!(rc = shard_bucketplan_bucket_of(p, r, (uint32_t)gi.shard, gi.sample, &b)) &&
            b != SHARD_NO_BUCKET && shard_grouper_add(g, b, &gi) && done)
            done(ctx, k);
    }
    return rc;
}

/* ---- what the replay counts ------------------------------------------------------------ */

/* Each consumer's batches on the reading's cut: the left spans and regions walked with the
 * completing points, which come in ascending order. */
typedef struct Tally {
    const ShardCut *cut;
    size_t span, region;
    uint64_t *counts;  /* per consumer: full batches completed at its left points */
    const uint64_t *want; /* with at: the point of each consumer's want[k]-th batch */
    uint64_t *at;
} Tally;

/* The consumer whose region holds point g when g is left, else -1. */
static long owner(Tally *t, uint64_t g)
{
    const ShardCut *c = t->cut;
    while (t->span < c->n && c->left[t->span].b <= g)
        t->span++;
    if (t->span == c->n || c->left[t->span].a > g)
        return -1;
    size_t nc = (size_t)c->world * (size_t)c->workers;
    while (t->region + 1 < nc && c->edge[t->region + 1] <= g)
        t->region++;
    return (long)t->region;
}

static void tally(void *ctx, uint64_t point)
{
    Tally *t = ctx;
    long k = owner(t, point);
    if (k < 0)
        return;
    if (++t->counts[k] == (t->want ? t->want[k] : 0) && t->at)
        t->at[k] = point;
}

/* The whole line replayed: t's counts, and the consumer that delivers the partials and how
 * many (*end -1: none left). */
static int walk(ShardBucketPlan *p, ShardReader *r, Tally *t, long *end, size_t *partials)
{
    const ShardCut *c = &r->order->cut;
    memset(t->counts, 0, (size_t)c->world * (size_t)c->workers * sizeof *t->counts);
    ShardGrouper g;
    if (shard_grouper_init(&g, p->b.n, p->batch))
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    uint64_t length = r->order->length;
    int rc = shard_bucketplan_replay(p, r, &g, length, tally, t);
    *end = length ? owner(t, length - 1) : -1;
    *partials = 0;
    for (size_t b = 0; !rc && !p->drop_last && b < p->b.n; b++) {
        size_t n;
        shard_grouper_pending(&g, b, &n);
        *partials += n > 0;
    }
    shard_grouper_free(&g);
    return rc;
}

/* Equal mode: every rank the fewest batches any has; consumer k's share of its rank's
 * (the rank's excess dropped from its last workers). */
static uint64_t even(const uint64_t *counts, int world, int workers, size_t k)
{
    uint64_t least = UINT64_MAX;
    for (int r = 0; r < world; r++) {
        uint64_t sum = 0;
        for (int w = 0; w < workers; w++)
            sum += counts[(size_t)r * (size_t)workers + (size_t)w];
        least = sum < least ? sum : least;
    }
    size_t rank = k / (size_t)workers;
    for (size_t j = rank * (size_t)workers; j < k; j++) /* its rank's earlier workers first */
        least -= counts[j] < least ? counts[j] : least;
    return counts[k] < least ? counts[k] : least;
}

/* Whether the memo is the walk of r's reading: same epoch, partitions, total and cut. */
static int memo_holds(const WalkMemo *m, const ShardReader *r)
{
    const ShardCut *a = &m->cut, *b = &r->order->cut;
    if (!m->valid || m->epoch != r->epoch || m->parts != r->order->parts ||
        m->total != r->order->total || a->length != b->length || a->n != b->n ||
        a->world != b->world || a->workers != b->workers)
        return 0;
    size_t nc = (size_t)a->world * (size_t)a->workers;
    if (a->n && memcmp(a->left, b->left, a->n * sizeof *a->left))
        return 0;
    if (!a->edge || !b->edge)
        return !a->edge && !b->edge;
    return !memcmp(a->edge, b->edge, (nc + 1) * sizeof *a->edge);
}

/* The memo made the walk of r's reading (left invalid when out of memory: walked again). */
static void memo_keep(WalkMemo *m, const ShardReader *r, const uint64_t *fulls, long end,
                      size_t partials)
{
    const ShardCut *c = &r->order->cut;
    size_t nc = (size_t)c->world * (size_t)c->workers;
    if (m->valid)
        shard_cut_free(&m->cut);
    m->valid = 0;
    uint64_t *v = realloc(m->fulls, nc * sizeof *v);
    if (!v)
        return;
    m->fulls = v;
    if (shard_cut_copy(&m->cut, c))
        return;
    memcpy(v, fulls, nc * sizeof *v);
    m->epoch = r->epoch;
    m->parts = r->order->parts;
    m->total = r->order->total;
    m->end = end;
    m->partials = partials;
    m->valid = 1;
}

/* Every consumer's batches (with the partials) into counts, fulls (NULL: not wanted) their
 * full ones; in equal mode each one's share. */
static int batches(ShardBucketPlan *p, ShardReader *r, uint64_t *counts, uint64_t *fulls)
{
    const ShardCut *c = &r->order->cut;
    size_t nc = (size_t)c->world * (size_t)c->workers, partials;
    long end;
    if (memo_holds(&p->memo, r)) {
        memcpy(counts, p->memo.fulls, nc * sizeof *counts);
        end = p->memo.end;
        partials = p->memo.partials;
    } else {
        Tally t = {c, 0, 0, counts, NULL, NULL};
        int rc = walk(p, r, &t, &end, &partials);
        if (rc)
            return rc;
        memo_keep(&p->memo, r, counts, end, partials);
    }
    if (fulls)
        memcpy(fulls, counts, nc * sizeof *counts);
    if (end >= 0)
        counts[end] += partials;
    if (r->s.mode == SHARD_MODE_EQUAL) {
        uint64_t *own = malloc(nc * sizeof *own);
        if (!own)
            return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
        for (size_t k = 0; k < nc; k++)
            own[k] = even(counts, c->world, c->workers, k);
        memcpy(counts, own, nc * sizeof *own);
        free(own);
    }
    return 0;
}

int64_t shard_bucketplan_rank_batches(ShardBucketPlan *p, ShardReader *r, int rank)
{
    const ShardCut *c = &r->order->cut;
    if (rank < 0 || rank >= c->world)
        return -1;
    uint64_t *counts = calloc((size_t)c->world * (size_t)c->workers, sizeof *counts), sum = 0;
    int rc = counts ? batches(p, r, counts, NULL) : -1;
    for (int w = 0; !rc && w < c->workers; w++)
        sum += counts[(size_t)rank * (size_t)c->workers + (size_t)w];
    free(counts);
    return rc ? -1 : (int64_t)sum;
}

int shard_bucketplan_quota(ShardBucketPlan *p, ShardReader *r, uint64_t *quota)
{
    const ShardCut *c = &r->order->cut;
    uint64_t *counts = calloc((size_t)c->world * (size_t)c->workers, sizeof *counts);
    if (!counts)
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    int rc = batches(p, r, counts, NULL);
    if (!rc)
        *quota = counts[r->order->self];
    free(counts);
    return rc;
}

int shard_bucketplan_cut_after(ShardBucketPlan *p, ShardReader *r, uint64_t n, int first,
                               ShardCut *out)
{
    const ShardCut *c = &r->order->cut;
    size_t nc = (size_t)c->world * (size_t)c->workers;
    int workers = c->workers;
    if (first < 0 || first >= workers)
        return SHARD_ERR_INVALID;
    uint64_t *v = calloc(nc * 5, sizeof *v);
    if (!v)
        return SHARD_ERR_NOMEM;
    uint64_t *counts = v, *fulls = v + nc, *got = v + 2 * nc, *at = v + 3 * nc, *took = v + 4 * nc;
    int rc = batches(p, r, counts, fulls);
    for (int k = 0; !rc && k < c->world; k++)
        shard_cut_deal(counts + (size_t)k * (size_t)workers, workers, n, first,
                       got + (size_t)k * (size_t)workers);
    /* a consumer through its full batches' last: the point of its got-th; past them (its
     * partials, equal mode's share reached): all of its region */
    Tally t = {c, 0, 0, fulls, got, at};
    long end;
    size_t partials;
    for (size_t k = 0; k < nc; k++)
        at[k] = UINT64_MAX;
    if (!rc)
        rc = walk(p, r, &t, &end, &partials);
    for (size_t k = 0; !rc && k < nc; k++) {
        if (!got[k])
            took[k] = 0;
        else if (got[k] >= counts[k] || at[k] == UINT64_MAX)
            took[k] = UINT64_MAX;
        else
            took[k] = shard_cut_left_in(c, c->edge[k], at[k] + 1);
    }
    if (!rc && (rc = shard_cut_copy(out, c)) == 0 && (rc = shard_cut_take(out, took)))
        shard_cut_free(out);
    free(v);
    return rc;
}
