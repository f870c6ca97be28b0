/*
 * An order_only reader's calls (reader.h): the epoch's samples named from the order alone,
 * and a seek that replays only the partition a position lies in. The reading and the
 * naming share every step (epoch.c, steps.c): only the pull differs, identities instead
 * of the fetch stage's samples.
 */
#include <stdint.h>

#include "base/error.h"
#include "catalog/keyview.h"
#include "catalog/samplenames.h"
#include "read/bucketline.h"
#include "read/epoch.h"
#include "read/ordernames.h"
#include "read/restore.h"
#include "read/state.h"
#include "read/readerdef.h"
#include "resume/resume.h"
#include "shard/reader.h"
#include "tar/item.h"

/* The shards' indexes kept at once: more than the streams and the buffer's spread span. */
enum { NAMES_KEPT = 64 };

static int not_order_only(ShardReader *r, const char *call)
{
    return shard_fail(r->err, SHARD_ERR_INVALID, "reader: %s needs order_only", call);
}

int shard_reader_name_next(ShardReader *r, ShardSampleName *out)
{
    if (!r->s.order_only)
        return not_order_only(r, "shard_reader_name_next");
    if (!r->names && !(r->names = shard_names_new(r->list, r->s.remote, NAMES_KEPT)))
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    ShardItem *it;
    int rc = r->bucketed ? shard_bucketline_take(r, &it) : shard_reader_take_next(r, &it);
    if (rc)
        return rc;
    out->shard = it->shard;
    out->index = r->view ? shard_keyview_sample(r->view, it->shard, it->v.index) : it->v.index;
    out->position = it->position;
    out->repeat = it->repeat;
    out->bucket = shard_reader_bucket(r, it, NULL, NULL, &out->batch_end);
    if (out->bucket < 0)
        out->batch_end = 0;
    out->url = shard_list_entry(r->list, it->shard)->url;
    shard_item_release(it);
    char msg[SHARD_ERROR_MAX];
    if ((rc = shard_names_key(r->names, out->shard, out->index, &out->key, msg)))
        return shard_fail(r->err, rc, "reader: %s", msg);
    return 0;
}

/* Samples piece i gives (npieces: the repeats). */
static uint64_t piece_length(const ShardOrder *o, int64_t i)
{
    if (i == (int64_t)o->npieces)
        return o->pad;
    const ShardPiece *pc = &o->piece[i];
    uint64_t to = pc->to == SHARD_COUNT_UNKNOWN ? o->len[pc->p] : pc->to;
    return to - pc->from;
}

int shard_reader_seek(ShardReader *r, uint64_t position)
{
    if (!r->s.order_only)
        return not_order_only(r, "shard_reader_seek");
    if (r->bucketed)
        return shard_fail(r->err, SHARD_ERR_UNSUPPORTED, "reader: shard_reader_seek: a "
                          "bucketed reading's places are its batches' ends; name its batches in "
                          "turn (shard_reader_name_next)");
    const ShardOrder *o = r->order;
    uint64_t at = o->base;
    if (position < at)
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: sample %llu of the epoch was delivered before the restored "
                          "state's reading began (at %llu)",
                          (unsigned long long)position, (unsigned long long)at);
    r->failed = 0;
    int64_t n = (int64_t)o->npieces;
    for (int64_t i = 0; i <= n; i++) {
        uint64_t len = piece_length(o, i);
        if (position < at + len) {
            r->position = at; /* where the piece is entered, for the order's record */
            int rc = shard_reader_enter(r, i, position - at);
            r->position = position;
            if (rc)
                r->failed = rc; /* half entered: nothing more is named from it */
            return rc;
        }
        at += len;
    }
    shard_reader_reset(r, r->epoch); /* past the end: the next call ends the epoch */
    r->cur = n + 1;
    r->position = at;
    return 0;
}

int shard_reader_set_consumer(ShardReader *r, int rank, int worker, uint64_t e)
{
    if (!r->s.order_only)
        return not_order_only(r, "shard_reader_set_consumer");
    if (rank < 0 || rank >= r->s.world_size)
        return shard_fail(r->err, SHARD_ERR_INVALID, "reader: rank %d of a world of %d ranks",
                          rank, r->s.world_size);
    if (worker < 0 || worker >= r->s.num_workers)
        return shard_fail(r->err, SHARD_ERR_INVALID, "reader: worker %d of %d workers", worker,
                          r->s.num_workers);
    r->s.rank = rank;
    r->s.worker = worker;
    return shard_reader_set_epoch(r, e);
}

const ShardHistory *shard_reader_readings(const ShardReader *r, uint64_t *epoch,
                                          uint32_t *parts, uint64_t *total)
{
    const ShardOrder *o = r->order;
    *epoch = o->epoch;
    *parts = o->parts;
    *total = o->total;
    return &o->history;
}

int shard_reader_name_reading(ShardReader *r, uint64_t e, uint32_t parts, uint64_t total,
                              const ShardReading *g, const ShardReading *before, int rank,
                              int worker)
{
    if (!r->s.order_only)
        return not_order_only(r, "shard_reader_name_reading");
    r->s.world_size = g->world;
    r->s.num_workers = g->workers;
    r->s.rank = rank;
    r->s.worker = worker;
    r->failed = 0;
    if (!g->cut || !before)
        return shard_reader_plan(r, e, parts, total);
    ShardStateIn in = {0};
    in.epoch = e;
    in.seed = r->s.seed;
    in.total = total;
    in.parts = parts;
    in.world = before->world;
    in.workers = before->workers;
    in.cut = g->cut;
    shard_reader_reset(r, e);
    return shard_reader_resume(r, &in);
}

void shard_reader_reading_span(const ShardReader *r, uint64_t *base, uint64_t *len)
{
    const ShardOrder *o = r->order;
    int64_t n = shard_order_consumer_length(o);
    *base = o->base;
    *len = n > (int64_t)o->base ? (uint64_t)n - o->base : 0;
}

const ShardOrder *shard_reader_order_of(const ShardReader *r) { return r->order; }

int shard_reader_note_reading(ShardReader *r, uint64_t step0, const ShardReading *v, size_t n)
{
    ShardOrder *o = r->order;
    o->step0 = step0;
    shard_history_free(&o->history);
    for (size_t i = 0; v && i < n; i++)
        if (shard_history_add(&o->history, v[i].step, v[i].world, v[i].workers, v[i].cut))
            return SHARD_ERR_NOMEM;
    return 0;
}

int shard_reader_named_batches(ShardReader *r, uint64_t *n)
{
    if (!r->bucket_plan)
        return shard_fail(r->err, SHARD_ERR_INVALID, "reader: not bucketed");
    return shard_bucketplan_quota(r->bucket_plan, r, n);
}

uint64_t shard_reader_indexes_read(const ShardReader *r)
{
    return r->names ? shard_names_reads(r->names) : 0;
}
