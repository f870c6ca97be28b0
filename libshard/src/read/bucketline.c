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
#include "read/fetch.h"
#include "read/shuffle.h"
#include "resume/resume.h"
#include "tar/item.h"

/* How shard_bucketplan_no_size's messages begin. */
#define UNSIZED "aspect_buckets: sample "

struct ShardBucketLine {
    ShardBucketPlan *plan; /* borrowed: the reader's */
    size_t nbuckets, batch;
    int drop_last;
    ShardGrouper g;
    ShardItem **held;   /* nbuckets x batch: the grouper's pending, as samples */
    ShardItem **out;    /* the batch being handed out */
    size_t nout, next_out, out_bucket;
    uint64_t out_end;   /* the position after it */
    uint64_t next_point; /* the line's point expected next; UINT64_MAX: a reading begins */
    int at_end;         /* the line's last point was taken: the partials are this one's */
    size_t flush;       /* the next bucket whose partial goes out */
    uint64_t delivered; /* position after the last batch handed out whole; UINT64_MAX: none
                           since the reading began */
    uint64_t quota;     /* equal mode: the batches this reading may still hand out */
    uint64_t readings;   /* the reader's reading this one belongs to */
};

static void drop_held(ShardBucketLine *bl)
{
    for (size_t i = 0; i < bl->nbuckets * bl->batch; i++) {
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
    bl->quota = UINT64_MAX; /* equal mode counts it at the reading's first take */
    drop_held(bl);
    bl->next_point = UINT64_MAX;
    bl->at_end = 0;
    bl->flush = 0;
    bl->delivered = UINT64_MAX;
}

int shard_bucketline_new(ShardBucketLine **out, ShardReader *r, ShardBucketPlan *plan)
{
    *out = NULL;
    ShardBucketLine *bl = calloc(1, sizeof *bl);
    if (!bl)
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    bl->plan = plan;
    bl->nbuckets = shard_bucketplan_count(plan);
    bl->batch = shard_bucketplan_batch(plan);
    bl->drop_last = shard_bucketplan_drops(plan);
    if (shard_grouper_init(&bl->g, bl->nbuckets, bl->batch) ||
        !(bl->held = calloc(bl->nbuckets * bl->batch, sizeof *bl->held)) ||
        !(bl->out = calloc(bl->batch, sizeof *bl->out))) {
        shard_bucketline_free(&bl);
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    }
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
    free(bl);
    *pbl = NULL;
}

/* What is pending at point q of the line: its samples before q replayed on identities
 * through the grouper, then those pending read by index. */
static int carry_in(ShardBucketLine *bl, ShardReader *r, uint64_t q)
{
    drop_held(bl);
    if (!q)
        return 0;
    int rc = shard_bucketplan_replay(bl->plan, r, &bl->g, q, NULL, NULL);
    size_t n = 0;
    for (size_t b = 0; !rc && b < bl->nbuckets; b++) {
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
    for (size_t i = 0; !rc && i < bl->nbuckets * bl->batch; i++)
        if (bl->held[i])
            buf[m++] = bl->held[i];
    if (!rc && !r->s.order_only) /* naming: identities are what it hands out */
        rc = shard_items_load(buf, NULL, m, r->list, r->view, r->s.remote, r->err);
    for (size_t i = 0, j = 0; !rc && i < bl->nbuckets * bl->batch; i++)
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
    while (bl->at_end && !bl->drop_last && bl->flush < bl->nbuckets) {
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

/* The batch going out, first sample, within the quota; past it the batch is dropped
 * (SHARD_AGAIN: take on). */
static int send_or_drop(ShardBucketLine *bl, ShardReader *r, ShardItem **out)
{
    if (bl->quota) {
        bl->quota -= bl->quota != UINT64_MAX;
        return hand(bl, out);
    }
    for (size_t i = 0; i < bl->nout; i++)
        shard_item_release(bl->out[i]);
    bl->nout = bl->next_out = 0;
    bl->delivered = r->position;
    return SHARD_AGAIN;
}

/* A shard's rest skipped (skip_errors) moves every later sample's place on the line: the
 * epoch stops, naming the shard's error. */
static int lost_shard(ShardReader *r)
{
    const char *why = "a shard's rest was skipped after an error", *e;
    for (size_t i = 0; (e = shard_fetch_kept_error(r->fetch, i)); i++)
        if (strncmp(e, UNSIZED, strlen(UNSIZED))) { /* the fetch's, not ours */
            why = e;
            break;
        }
    return shard_fail(r->err, SHARD_ERR_IO, "reader: aspect_buckets: %s (a bucketed reading "
                      "plans each batch on every sample's place in the epoch, and skip_errors "
                      "skips samples, not a shard's rest: repair the shard, or leave it out)",
                      why);
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
    if (bl->delivered == UINT64_MAX) {
        bl->delivered = r->position;
        int rc = 0;
        if (r->s.mode == SHARD_MODE_EQUAL) /* its share of the rank's batches */
            rc = shard_bucketplan_quota(bl->plan, r, &bl->quota);
        if (rc)
            return r->failed = rc;
    }
    for (;;) {
        ShardItem *it;
        int rc = shard_reader_take_next(r, &it);
        if (rc == SHARD_EOS) {
            while (flush_next(bl, r))
                if ((rc = send_or_drop(bl, r, out)) != SHARD_AGAIN)
                    return rc;
            return SHARD_EOS;
        }
        if (rc)
            return rc;
        if (!r->s.order_only && shard_fetch_skipped_shards(r->fetch)) { /* skip_errors lost a shard's rest */
            shard_item_release(it);
            return r->failed = lost_shard(r);
        }
        if (r->line_next == UINT64_MAX) { /* equal mode's repeats: batches even ranks here */
            shard_item_release(it);
            continue;
        }
        uint64_t point = r->line_next - 1;
        size_t b = 0;
        if (point != bl->next_point)
            rc = carry_in(bl, r, point);
        if (!rc)
            rc = shard_bucketplan_bucket_of(bl->plan, r, it->shard, it->v.index, &b);
        if (rc) {
            shard_item_release(it);
            return r->failed = rc;
        }
        bl->next_point = point + 1;
        bl->at_end = point + 1 == r->order->length;
        if (b == SHARD_NO_BUCKET) { /* skip_errors: in no batch, on any consumer */
            char msg[SHARD_ERROR_MAX];
            shard_bucketplan_no_size(r, it->shard, it->v.index, msg, sizeof msg);
            /* its kept message starts with UNSIZED */
            shard_fetch_keep_error(r->fetch, msg);
            atomic_fetch_add(&r->unsized, 1);
            shard_item_release(it);
            continue;
        }
        size_t n;
        shard_grouper_pending(&bl->g, b, &n);
        bl->held[b * bl->batch + n] = it;
        ShardGroupItem gi = {point, it->shard, it->v.index};
        if (shard_grouper_add(&bl->g, b, &gi)) {
            send(bl, b, bl->batch, r->position);
            if ((rc = send_or_drop(bl, r, out)) != SHARD_AGAIN)
                return rc;
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
