/*
 * A bucketed reading (bucketline.h): the grouper run over the consumer's pieces of the
 * epoch's line, what is pending where a reading begins replayed on identities, the
 * completed batches handed out sample by sample.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "read/bucketline.h"
#include "read/epoch.h"
#include "read/shuffle.h"
#include "read/state.h"
#include "resume/resume.h"
#include "shard/image.h"
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

/* The specs the replay opens on: the settings' own, copied. */
typedef struct Specs {
    char **urls;
    size_t nurls;
    ShardMixInput *sources;
    char ***source_urls;
    size_t nsources;
    char *index_cache;
} Specs;

struct ShardBucketLine {
    ShardBuckets b;
    ShardGrouper g;
    size_t batch;
    int drop_last;
    ShardItem **held;   /* nbuckets x batch: the grouper's pending, as samples */
    ShardItem **out;    /* the batch being handed out */
    size_t nout, next_out, out_bucket;
    uint64_t out_end;   /* the position after it */
    uint64_t next_point; /* the line's point expected next; UINT64_MAX: a reading begins */
    int at_end;         /* the line's last point was taken: the partials are this one's */
    size_t flush;       /* the next bucket whose partial goes out */
    uint64_t delivered; /* position after the last batch handed out whole; UINT64_MAX: none
                           since the reading began */
    KeptSizes kept[SIZES_KEPT];
    uint64_t tick;
    Specs specs;
    ShardReaderSettings replay_settings;
    ShardReader *replay; /* order_only, one consumer, made at the first replay */
    ShardReplayOps ops;
    uint64_t readings;   /* the reader's reading this one belongs to */
};

static void specs_free(Specs *sp)
{
    for (size_t i = 0; sp->urls && i < sp->nurls; i++)
        free(sp->urls[i]);
    free(sp->urls);
    for (size_t i = 0; sp->source_urls && i < sp->nsources; i++) {
        for (size_t k = 0; sp->source_urls[i] && k < sp->sources[i].nurls; k++)
            free(sp->source_urls[i][k]);
        free(sp->source_urls[i]);
    }
    free(sp->source_urls);
    free(sp->sources);
    free(sp->index_cache);
    memset(sp, 0, sizeof *sp);
}

static char **copy_strings(const char *const *v, size_t n)
{
    char **c = calloc(n ? n : 1, sizeof *c);
    for (size_t i = 0; c && i < n; i++)
        if (!(c[i] = strdup(v[i]))) {
            while (i--)
                free(c[i]);
            free(c);
            return NULL;
        }
    return c;
}

static int specs_copy(Specs *sp, const ShardReaderSettings *s)
{
    memset(sp, 0, sizeof *sp);
    if (!(sp->urls = copy_strings(s->urls, s->nurls)))
        return SHARD_ERR_NOMEM;
    sp->nurls = s->nurls;
    if (s->nsources) {
        sp->sources = calloc(s->nsources, sizeof *sp->sources);
        sp->source_urls = calloc(s->nsources, sizeof *sp->source_urls);
        if (!sp->sources || !sp->source_urls)
            return SHARD_ERR_NOMEM;
        sp->nsources = s->nsources;
        for (size_t i = 0; i < s->nsources; i++) {
            if (!(sp->source_urls[i] = copy_strings(s->sources[i].urls, s->sources[i].nurls)))
                return SHARD_ERR_NOMEM;
            sp->sources[i] = s->sources[i];
            sp->sources[i].urls = (const char *const *)sp->source_urls[i];
        }
    }
    if (s->index_cache && !(sp->index_cache = strdup(s->index_cache)))
        return SHARD_ERR_NOMEM;
    return 0;
}

static void drop_held(ShardBucketLine *bl)
{
    for (size_t i = 0; i < bl->b.n * bl->batch; i++) {
        shard_item_release(bl->held[i]);
        bl->held[i] = NULL;
    }
    for (size_t i = bl->next_out; i < bl->nout; i++)
        shard_item_release(bl->out[i]);
    bl->nout = bl->next_out = 0;
    shard_grouper_clear(&bl->g);
}

/* Forgets what is pending and handed out: a new reading. */
static void reset(ShardBucketLine *bl)
{
    drop_held(bl);
    bl->next_point = UINT64_MAX;
    bl->at_end = 0;
    bl->flush = 0;
    bl->delivered = UINT64_MAX;
}

static const char *refused(const ShardReaderSettings *s)
{
    if (s->mode != SHARD_MODE_EXACT)
        return "exact mode (equal and resampled modes are not bucketed yet)";
    if (s->epoch_samples)
        return "a pass over the data (epoch_samples is not bucketed yet)";
    if (s->skip_errors)
        return "skip_errors off (a bucketed reading does not skip yet)";
    if (s->order_only)
        return "a reading (order_only does not name bucketed batches yet)";
    if (s->make_indexes == SHARD_READER_INDEXES_NEVER)
        return "every shard's count and image sizes (make_indexes is 'never': make them with "
               "shardcat index --geometry)";
    return NULL;
}

/* The buckets: the spec's, "auto" fitted to the list's aspects. */
static int buckets_of(ShardBucketLine *bl, ShardReader *r, const ShardReaderSettings *s)
{
    int rc = shard_buckets_parse(&bl->b, s->aspect_buckets, s->aspect_side, r->err);
    if (rc || !bl->b.auto_k)
        return rc;
    ShardAspectBucket *v;
    size_t n;
    ShardError e;
    if ((rc = shard_aspect_buckets(r->list, s->aspect_buckets, s->aspect_side, r->s.remote, &v,
                                   &n, NULL, &e)))
        return shard_fail(r->err, rc, "reader: aspect_buckets: %s", e.message);
    for (size_t i = 0; i < n; i++)
        bl->b.v[i] = (ShardBucket){v[i].height, v[i].width};
    bl->b.n = n;
    free(v);
    return 0;
}

int shard_bucketline_new(ShardBucketLine **out, ShardReader *r, const ShardReaderSettings *s,
                         const ShardReplayOps *ops)
{
    *out = NULL;
    const char *need = refused(s);
    if (need)
        return shard_fail(r->err, SHARD_ERR_UNSUPPORTED, "reader: aspect_buckets needs %s",
                          need);
    if (r->counted != r->nurls)
        for (size_t i = 0; i < r->nurls; i++)
            if (r->counts[i] == SHARD_COUNT_UNKNOWN)
                return shard_fail(r->err, SHARD_ERR_UNSUPPORTED,
                                  "reader: aspect_buckets needs every shard's count, and %s "
                                  "has none (make it: shardcat index --geometry)",
                                  shard_list_entry(r->list, i)->url);
    for (size_t i = 0; i < r->nurls; i++)
        if (!shard_list_entry(r->list, i)->columns)
            return shard_fail(r->err, SHARD_ERR_UNSUPPORTED,
                              "reader: aspect_buckets needs each shard's image sizes, and %s "
                              "has none beside its index (make them: shardcat index "
                              "--geometry)", shard_list_entry(r->list, i)->url);
    ShardBucketLine *bl = calloc(1, sizeof *bl);
    if (!bl)
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    bl->batch = (size_t)s->batch_size;
    bl->ops = *ops;
    bl->drop_last = s->drop_last;
    int rc = buckets_of(bl, r, s);
    if (!rc && shard_grouper_init(&bl->g, bl->b.n, bl->batch))
        rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    if (!rc && (!(bl->held = calloc(bl->b.n * bl->batch, sizeof *bl->held)) ||
                !(bl->out = calloc(bl->batch, sizeof *bl->out)) || specs_copy(&bl->specs, s)))
        rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    if (rc) {
        shard_bucketline_free(&bl);
        return rc;
    }
    int sizes[2 * SHARD_BUCKETS_MAX];
    for (size_t i = 0; i < bl->b.n; i++)
        sizes[2 * i] = bl->b.v[i].height, sizes[2 * i + 1] = bl->b.v[i].width;
    if (shard_reader_fingerprint_buckets(r, sizes, bl->b.n, bl->batch)) {
        shard_bucketline_free(&bl);
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    }
    ShardReaderSettings *rs = &bl->replay_settings;
    *rs = *s;
    rs->urls = (const char *const *)bl->specs.urls;
    rs->sources = bl->specs.sources;
    rs->index_cache = bl->specs.index_cache;
    rs->rank = 0;
    rs->world_size = 1;
    rs->worker = 0;
    rs->num_workers = 1;
    rs->order_only = 1;
    rs->aspect_buckets = NULL;
    rs->remote = r->s.remote;
    rs->seed = r->s.seed;
    rs->have_seed = 1;
    reset(bl);
    bl->readings = r->readings;
    *out = bl;
    return 0;
}

void shard_bucketline_free(ShardBucketLine **pbl)
{
    ShardBucketLine *bl = *pbl;
    if (!bl)
        return;
    if (bl->held)
        drop_held(bl);
    free(bl->held);
    free(bl->out);
    shard_grouper_free(&bl->g);
    for (size_t i = 0; i < SIZES_KEPT; i++)
        if (bl->kept[i].used)
            shard_columns_clear(&bl->kept[i].c);
    if (bl->replay)
        bl->ops.free(&bl->replay);
    specs_free(&bl->specs);
    free(bl);
    *pbl = NULL;
}

void shard_bucketline_size(const ShardBucketLine *bl, size_t b, int *height, int *width)
{
    *height = bl->b.v[b].height;
    *width = bl->b.v[b].width;
}

/* Shard's sizes, kept: the least recently used ones make room. */
static int sizes_of(ShardBucketLine *bl, ShardReader *r, uint32_t shard, KeptSizes **out)
{
    KeptSizes *oldest = &bl->kept[0];
    for (size_t i = 0; i < SIZES_KEPT; i++) {
        KeptSizes *k = &bl->kept[i];
        if (k->used && k->shard == shard) {
            k->used = ++bl->tick;
            *out = k;
            return 0;
        }
        if (k->used < oldest->used)
            oldest = k;
    }
    if (oldest->used)
        shard_columns_clear(&oldest->c);
    oldest->used = 0;
    const ShardListEntry *e = shard_list_entry(r->list, shard);
    char msg[SHARD_ERROR_MAX];
    int rc = shard_columns_load(&oldest->c, e->columns, r->s.remote, msg);
    if (rc)
        return shard_fail(r->err, rc, "reader: aspect_buckets: %s", msg);
    oldest->k[0] = shard_columns_find(&oldest->c, "width");
    oldest->k[1] = shard_columns_find(&oldest->c, "height");
    if (oldest->k[0] < 0 || oldest->k[1] < 0 || oldest->c.n != e->nsamples) {
        rc = shard_fail(r->err, SHARD_ERR_FORMAT,
                        oldest->k[0] < 0 || oldest->k[1] < 0
                            ? "reader: %.300s has no width and height columns"
                            : "reader: %.300s does not list its shard's samples (make it again: "
                              "shardcat index --geometry)",
                        e->columns);
        shard_columns_clear(&oldest->c);
        return rc;
    }
    oldest->shard = shard;
    oldest->used = ++bl->tick;
    *out = oldest;
    return 0;
}

/* The bucket of sample index of shard. */
static int bucket_of(ShardBucketLine *bl, ShardReader *r, uint32_t shard, uint64_t index,
                     size_t *b)
{
    KeptSizes *k;
    int rc = sizes_of(bl, r, shard, &k);
    if (rc)
        return rc;
    uint32_t w = shard_columns_value(&k->c, index, k->k[0]);
    uint32_t h = shard_columns_value(&k->c, index, k->k[1]);
    if (w == SHARD_COLUMN_NONE || h == SHARD_COLUMN_NONE || !w || !h)
        return shard_fail(r->err, SHARD_ERR_FORMAT,
                          "reader: aspect_buckets: sample %llu of %.300s has no image size in "
                          "%.300s (no jpg, jpeg, png or webp member, or its header does not "
                          "parse)",
                          (unsigned long long)index, shard_list_entry(r->list, shard)->url,
                          shard_list_entry(r->list, shard)->columns);
    *b = shard_bucket_of(&bl->b, w, h);
    return 0;
}

/* What is pending at point q of the line: its samples before q replayed on identities
 * through the grouper, then those pending read by index. */
static int carry_in(ShardBucketLine *bl, ShardReader *r, uint64_t q)
{
    drop_held(bl);
    if (!q)
        return 0;
    ShardError e;
    if (!bl->replay && bl->ops.open(&bl->replay, &bl->replay_settings, &e))
        return shard_fail(r->err, e.code, "reader: aspect_buckets: replaying the line: %s",
                          e.message);
    ShardReader *rr = bl->replay;
    if (shard_list_count(rr->list) != r->nurls)
        return shard_fail(r->err, SHARD_ERR_STATE, "reader: aspect_buckets: the shards listed "
                          "again differ (%zu, not %zu)", shard_list_count(rr->list), r->nurls);
    int rc = shard_reader_plan(rr, r->epoch, r->order->parts, r->mixing ? r->order->total : 0);
    for (uint64_t k = 0; !rc && k < q; k++) {
        ShardItem *it;
        if ((rc = shard_reader_take_next(rr, &it))) {
            rc = shard_fail(r->err, rc == SHARD_EOS ? SHARD_ERR_STATE : rc,
                            "reader: aspect_buckets: replaying the line: %s",
                            rc == SHARD_EOS ? "it ended early" : rr->err);
            break;
        }
        size_t b;
        ShardGroupItem gi = {k, it->shard, it->v.index};
        shard_item_release(it);
        if (!(rc = bucket_of(bl, r, (uint32_t)gi.shard, gi.sample, &b)))
            shard_grouper_add(&bl->g, b, &gi);
    }
    size_t n = 0;
    for (size_t b = 0; !rc && b < bl->b.n; b++) {
        size_t np;
        const ShardGroupItem *p = shard_grouper_pending(&bl->g, b, &np);
        for (size_t j = 0; j < np && !rc; j++)
            if (!(bl->held[b * bl->batch + j] =
                      shard_item_identity((uint32_t)p[j].shard, p[j].sample)))
                rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
        n += np;
    }
    ShardItem **buf = rc ? NULL : malloc((n ? n : 1) * sizeof *buf);
    if (!rc && !buf)
        rc = shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; !rc && i < bl->b.n * bl->batch; i++)
        if (bl->held[i])
            buf[m++] = bl->held[i];
    if (!rc)
        rc = shard_items_load(buf, NULL, m, r->list, r->s.remote, r->err);
    for (size_t i = 0, j = 0; !rc && i < bl->b.n * bl->batch; i++)
        if (bl->held[i])
            bl->held[i] = buf[j++];
    free(buf);
    if (rc) {
        drop_held(bl);
        return rc;
    }
    return 0;
}

/* Hands out the next sample of the batch going out. */
static int hand(ShardBucketLine *bl, ShardItem **out)
{
    ShardItem *it = bl->out[bl->next_out];
    bl->out[bl->next_out++] = NULL;
    it->position = bl->out_end - 1;
    it->bucket = (uint32_t)bl->out_bucket + 1;
    it->batch_end = bl->next_out == bl->nout;
    if (it->batch_end) {
        bl->delivered = bl->out_end;
        bl->nout = bl->next_out = 0;
    }
    *out = it;
    return 0;
}

/* Bucket b's n held samples go out as a batch ending at position end. */
static void send(ShardBucketLine *bl, size_t b, size_t n, uint64_t end)
{
    memcpy(bl->out, bl->held + b * bl->batch, n * sizeof *bl->out);
    memset(bl->held + b * bl->batch, 0, bl->batch * sizeof *bl->held);
    bl->nout = n;
    bl->next_out = 0;
    bl->out_bucket = b;
    bl->out_end = end;
}

/* At the epoch's end: the next partial batch, where this consumer ended the line. */
static int flush_next(ShardBucketLine *bl, ShardReader *r)
{
    while (bl->at_end && !bl->drop_last && bl->flush < bl->b.n) {
        size_t b = bl->flush++, n;
        shard_grouper_pending(&bl->g, b, &n);
        if (n) {
            send(bl, b, n, r->position);
            return 1;
        }
    }
    drop_held(bl);
    bl->delivered = r->position;
    return 0;
}

int shard_bucketline_take(ShardReader *r, ShardItem **out)
{
    ShardBucketLine *bl = r->bucketed;
    *out = NULL;
    if (bl->readings != r->readings) {
        reset(bl);
        bl->readings = r->readings;
    }
    if (bl->next_out < bl->nout)
        return hand(bl, out);
    if (r->failed)
        return r->failed;
    if (bl->delivered == UINT64_MAX)
        bl->delivered = r->position;
    for (;;) {
        ShardItem *it;
        int rc = shard_reader_take_next(r, &it);
        if (rc == SHARD_EOS)
            return flush_next(bl, r) ? hand(bl, out) : SHARD_EOS;
        if (rc)
            return rc;
        uint64_t point = r->line_next - 1;
        size_t b = 0;
        if (point != bl->next_point)
            rc = carry_in(bl, r, point);
        if (!rc)
            rc = bucket_of(bl, r, it->shard, it->v.index, &b);
        if (rc) {
            shard_item_release(it);
            return r->failed = rc;
        }
        bl->next_point = point + 1;
        bl->at_end = point + 1 == r->order->length;
        size_t n;
        shard_grouper_pending(&bl->g, b, &n);
        bl->held[b * bl->batch + n] = it;
        ShardGroupItem gi = {point, it->shard, it->v.index};
        if (shard_grouper_add(&bl->g, b, &gi)) {
            send(bl, b, bl->batch, r->position);
            return hand(bl, out);
        }
    }
}

uint64_t shard_bucketline_position(const ShardReader *r)
{
    const ShardBucketLine *bl = r->bucketed;
    if (bl->readings != r->readings || bl->delivered == UINT64_MAX)
        return r->position; /* nothing taken since the reading began */
    return bl->delivered;
}
