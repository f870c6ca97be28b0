/*
 * An epoch of the streaming reader (epoch.h): its order (canonical partitions and this
 * consumer's block of them), entering each partition (its segments dealt to the streams,
 * or resampled mode's draws), the round-robin over the streams (over a mix's sources
 * first), and the shuffle buffer's steps, on the consumer's thread.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "read/epoch.h"
#include "read/fetch.h"
#include "read/mix.h"
#include "resume/resume.h"
#include "read/readerdef.h"
#include "read/steps.h"
#include "read/shuffle.h"
#include "tar/item.h"

int shard_reader_start(ShardReader *r)
{
    for (size_t k = 0; k < r->nstreams; k++) {
        ReaderStream *st = &r->streams[k];
        if (st->active && shard_fetch_start(r->fetch, k, st->start_seg, st->start_off))
            return shard_fail(r->err, SHARD_ERR_NOMEM, "reader: cannot start a fetch thread");
    }
    return 0;
}

void shard_reader_clear(ShardReader *r)
{
    shard_shuffle_clear(&r->shuffle);
    for (size_t k = 0; r->streams && k < r->nstreams; k++) {
        shard_hold_put(r->streams[k].last);
        r->streams[k].last = NULL;
    }
    shard_item_release(r->last);
    r->last = NULL;
}

/* Stops the fetch threads and forgets the streams' segments and the round-robin (the
 * buffer keeps what it holds). */
static void stop_streams(ShardReader *r)
{
    shard_fetch_stop(r->fetch);
    free(r->segs);
    r->segs = NULL;
    r->nsegs = 0;
    r->pending_src = -1;
    memset(r->rr, 0, (r->mixing ? r->mix.n : 1) * sizeof *r->rr);
}

/* stop_streams, and the buffer's and the streams' holds forgotten too (threads not started
 * again). */
static void stop_reading(ShardReader *r)
{
    stop_streams(r);
    shard_reader_clear(r);
    r->drop_left = 0;
    r->prefetched = -1;
}

void shard_reader_reset(ShardReader *r, uint64_t e)
{
    stop_reading(r);
    r->start_due = 0; /* the caller says when the new plan may start */
    r->epoch = e;
    r->position = 0;
    r->cur = -1;
    r->cur_open = 0;
    r->resume_skip = 0;
    r->readings++;
}

/* The epoch's sequence of samples, all consumers together; 0 without every count. */
static uint64_t sequence_length(const ShardReader *r)
{
    if (r->mixing)
        return r->mix.total;
    uint64_t t = 0;
    for (size_t i = 0; i < r->nurls; i++) {
        if (r->counts[i] == SHARD_COUNT_UNKNOWN)
            return 0;
        t += r->counts[i];
    }
    return t;
}

int shard_reader_plan(ShardReader *r, uint64_t e, uint32_t parts, uint64_t total)
{
    shard_reader_reset(r, e);
    int rc = shard_reader_plan_order(r, parts, total);
    if (!rc && shard_order_begin(r->order, NULL, NULL, r->s.batch_size, r->s.drop_last))
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    if (!rc)
        shard_reader_set_length(r);
    return rc;
}

int shard_reader_plan_order(ShardReader *r, uint32_t parts, uint64_t total)
{
    uint64_t e = r->epoch;
    const ShardReaderSettings *s = &r->s;
    if (r->mixing) { /* a state's length of the epoch (epoch_samples on another topology) */
        uint64_t want = total ? total : r->mix_own_total;
        if (r->mix.total != want) {
            int rc = shard_mix_size(&r->mix, r->counts, want, r->err);
            if (rc)
                return rc;
        }
    }
    int counted = r->counted == r->nurls;
    if (!counted && s->mode == SHARD_MODE_EQUAL) {
        size_t i = 0;
        while (i + 1 < r->nurls && r->counts[i] != SHARD_COUNT_UNKNOWN)
            i++;
        return shard_fail(r->err, SHARD_ERR_UNSUPPORTED,
                          "reader: equal mode needs the sample count of every shard, and %s has "
                          "none (a manifest, a .idx beside each shard, or make_indexes not "
                          "'never')",
                          shard_list_entry(r->list, i)->url);
    }
    uint64_t t = sequence_length(r);
    if (!parts)
        parts = s->partitions ? s->partitions
                              : shard_partition_auto(t, counted, r->nurls, s->shuffle_buffer,
                                                     s->streams, s->world_size, s->num_workers,
                                                     s->mode);
    if (parts > SHARD_PARTITIONS_MAX)
        return shard_fail(r->err, SHARD_ERR_INVALID, "reader: partitions=%u: at most %u", parts,
                          SHARD_PARTITIONS_MAX);
    char msg[SHARD_ERROR_MAX];
    /* resampled mode draws by whole partitions; the other modes spread what does not fit */
    if (s->mode == SHARD_MODE_RESAMPLED &&
        shard_partition_check(parts, s->world_size, s->num_workers, s->mode, msg))
        return shard_fail(r->err, SHARD_ERR_INVALID, "reader: %s", msg);
    if (counted && s->mode == SHARD_MODE_EQUAL && t && t < parts)
        return shard_fail(r->err, SHARD_ERR_INVALID,
                          "reader: equal mode gives every partition the same number of samples, "
                          "and %llu samples in partitions=%u leave none (with pad: only "
                          "repeats): set partitions to at most %llu",
                          (unsigned long long)t, parts, (unsigned long long)t);
    uint64_t *len = NULL, length = 0;
    if (counted && s->mode != SHARD_MODE_RESAMPLED) {
        length = shard_partition_total(t, parts, s->mode, s->pad);
        if (!(len = malloc(parts * sizeof *len)))
            return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
        for (uint32_t p = 0; p < parts; p++) {
            uint64_t a, b;
            shard_partition_range(length, parts, p, &a, &b);
            len[p] = b - a;
        }
    }
    ShardOrder *o = shard_order_new(e, s->mode, s->world_size, s->num_workers, s->rank,
                                    s->worker, parts, t, length, len);
    free(len);
    if (!o)
        return shard_fail(r->err, SHARD_ERR_NOMEM, "out of memory");
    shard_order_put(r->order);
    r->order = o;
    return 0;
}

void shard_reader_set_length(ShardReader *r)
{
    if (r->s.mode == SHARD_MODE_RESAMPLED)
        r->epoch_length = r->s.epoch_samples ? (int64_t)r->s.epoch_samples : -1;
    else
        r->epoch_length = shard_order_consumer_length(r->order);
}

/* Seeds the buffer for piece i (n: the repeats): a piece's by its partition, the repeats'
 * (and resampled mode's one stream) by their consumer. */
static void seed_buffer(ShardReader *r, int64_t i)
{
    const ShardOrder *o = r->order;
    uint64_t seeded = r->s.mode == SHARD_MODE_RESAMPLED || i == (int64_t)o->npieces
                          ? (uint64_t)o->parts + shard_reader_consumer(r)
                          : (uint64_t)o->piece[i].p;
    ShardRng rng;
    shard_rng_init(&rng, r->s.seed, SHARD_RNG_BUFFER, r->epoch, seeded, 0);
    shard_shuffle_reset(&r->shuffle, &rng);
}

/* Whether piece i is read to its partition's end (its input ends before it does). */
static int to_the_end(const ShardOrder *o, int64_t i)
{
    const ShardPiece *pc = &o->piece[i];
    return i >= (int64_t)o->npieces || pc->to == SHARD_COUNT_UNKNOWN || pc->to == o->len[pc->p];
}

/* Makes piece i the one being read: its buffer seeded, nothing to drop, its samples to
 * give counted, the position it begins at noted (for a state without counts). */
static void open_piece(ShardReader *r, int64_t i)
{
    const ShardOrder *o = r->order;
    r->cur = i;
    r->cur_open = 1;
    r->drop_left = 0;
    r->piece_left = UINT64_MAX; /* to the partition's end: its stream ends it, having
                                   checked that its shards end where their counts say */
    if (!to_the_end(o, i))
        r->piece_left = o->piece[i].to - o->piece[i].from;
    seed_buffer(r, i);
    atomic_store(&r->order->entered[i], r->position);
    r->line_next = UINT64_MAX; /* the repeats are on no line */
    if (i < (int64_t)o->npieces && o->len) {
        r->line_next = o->piece[i].from;
        for (uint32_t p = 0; p < o->piece[i].p; p++)
            r->line_next += o->len[p];
    }
}

/* Plans piece i's partition (n: the repeats) and deals its segments to the streams, each
 * at its start (threads stopped). */
static int plan_streams(ShardReader *r, int64_t i)
{
    ShardOrder *o = r->order;
    int64_t n = (int64_t)o->npieces;
    int resampled = r->s.mode == SHARD_MODE_RESAMPLED;
    int rc = 0;
    if (!resampled) {
        ShardPlanSettings p;
        shard_plan_default_settings(&p);
        p.seed = r->s.seed;
        p.epoch = r->epoch;
        p.mode = r->s.mode;
        p.pad = r->s.pad;
        p.shuffle_shards = r->s.shuffle_shards;
        if (o->counted) {
            uint64_t a, z;
            if (i < n) {
                shard_partition_range(o->length, o->parts, o->piece[i].p, &a, &z);
            } else { /* repeats of its first samples, past the sequence's end */
                size_t c = shard_reader_consumer(r);
                a = o->cut.edge[c];
                a = o->total + (o->total ? a % o->total : 0);
                z = a + o->pad;
            }
            rc = r->mixing ? shard_mix_plan_range(&r->mix, r->counts, &p, a, z)
                           : shard_epoch_plan_range(r->counts, r->nurls, &p, a, z, &r->segs,
                                                    &r->nsegs);
        } else { /* every P-th shard of the shuffled order */
            p.rank = (int)o->piece[i].p;
            p.world_size = (int)o->parts;
            rc = shard_epoch_plan(r->counts, r->nurls, &p, &r->segs, &r->nsegs);
        }
        if (rc)
            return shard_fail(r->err, rc, "reader: cannot plan partition %lld of the epoch",
                              i < n ? (long long)o->piece[i].p : -1LL);
    }
    r->counts_known = 1;
    for (size_t k = 0; k < r->nsegs; k++)
        if (r->segs[k].count == SHARD_COUNT_UNKNOWN)
            r->counts_known = 0;
    for (size_t k = 0; resampled && k < r->nurls; k++)
        if (r->counts[k] == SHARD_COUNT_UNKNOWN)
            r->counts_known = 0;
    for (size_t k = 0; k < r->nstreams; k++) {
        ReaderStream *st = &r->streams[k];
        ShardSegment seg;
        st->start_seg = 0;
        st->start_off = 0;
        st->sim_seg = 0;
        st->sim_off = 0;
        st->active = shard_reader_segment(r, k, 0, &seg);
    }
    return 0;
}

/* Enters piece i (n: the repeats) `skip` samples past its start: its partition's segments
 * dealt to the streams, its buffer seeded, and, where it begins inside the partition, the
 * samples before it passed over. The fetch threads start at the next pull. */
int shard_reader_enter(ShardReader *r, int64_t i, uint64_t skip)
{
    ShardOrder *o = r->order;
    int resampled = r->s.mode == SHARD_MODE_RESAMPLED;
    stop_reading(r);
    open_piece(r, i);
    int rc = plan_streams(r, i);
    if (rc)
        return rc;
    if (r->s.order_only && !r->counts_known)
        return shard_fail(r->err, SHARD_ERR_UNSUPPORTED,
                          "reader: order_only names samples from every shard's count, and "
                          "partition %lld has a shard without one",
                          i < (int64_t)o->npieces ? (long long)o->piece[i].p : -1LL);
    uint64_t n = resampled ? r->resume_skip : i < (int64_t)o->npieces ? o->piece[i].from : 0;
    n += skip;
    if (r->piece_left != UINT64_MAX)
        r->piece_left -= skip;
    r->resume_skip = 0;
    /* naming the order replays it even where errors may change what is read: the plan */
    if (n && r->counts_known && (!r->s.skip_errors || r->s.order_only))
        rc = shard_reader_replay(r, n);
    else if (n) /* no counts to replay on, or errors may have changed them: read and drop */
        r->drop_left = n;
    if (!rc)
        r->start_due = !r->s.order_only;
    return rc;
}

/* The piece after cur, n for the repeats, n + 1 past them. */
static int64_t following(const ShardReader *r)
{
    const ShardOrder *o = r->order;
    int64_t n = (int64_t)o->npieces, i = r->cur + 1;
    return i == n && !o->pad ? n + 1 : i;
}

/* The piece being read has given all its partition's samples to its buffer, whose draining
 * needs no fetch thread: the next piece's streams start reading now, so that its first
 * samples are ready when the buffer is empty. Not where the next begins inside its
 * partition (its replay comes first), nor without a next; a failure is met again by
 * enter. */
static void prefetch(ShardReader *r)
{
    const ShardOrder *o = r->order;
    int64_t i = following(r), n = (int64_t)o->npieces;
    if (r->s.mode == SHARD_MODE_RESAMPLED || r->s.order_only || i > n || r->prefetched >= 0 ||
        (i < n && o->piece[i].from) || !to_the_end(o, r->cur))
        return;
    stop_streams(r); /* every stream has ended: the threads are done */
    if (plan_streams(r, i) || shard_reader_start(r))
        return; /* enter plans it again and says what fails */
    r->prefetched = i;
}

/* Enters the next piece (then the repeats, if any); SHARD_EOS past the last. */
static int next_piece(ShardReader *r)
{
    const ShardOrder *o = r->order;
    int64_t n = (int64_t)o->npieces;
    if (r->s.mode == SHARD_MODE_RESAMPLED) {
        if (r->cur < 0 && n > 0)
            return shard_reader_enter(r, 0, 0);
        r->cur = n + 1;
        return SHARD_EOS;
    }
    int64_t i = following(r);
    if (i > n) {
        stop_reading(r); /* a piece that ends inside its partition leaves its streams on */
        r->cur = n + 1;
        return SHARD_EOS;
    }
    if (i != r->prefetched)
        return shard_reader_enter(r, i, 0);
    /* its streams read since its predecessor's input ended: the buffer's turn */
    r->prefetched = -1;
    open_piece(r, i);
    return 0;
}

/* The next item of source src in round-robin order over its streams; NULL when they
 * have all ended. */
static ShardItem *pull_from(ShardReader *r, size_t src, int *rc)
{
    ReaderStream *st;
    while ((st = shard_reader_turn(r, src))) {
        ShardItem *it;
        int got = shard_fetch_take_for(r->fetch, (size_t)(st - r->streams), r->wait, &it);
        if (got == SHARD_AGAIN) { /* nothing changed: the caller takes the step again */
            *rc = SHARD_AGAIN;
            return NULL;
        }
        if (got) { /* only while stopping, which this thread does: never here */
            *rc = shard_fail(r->err, SHARD_ERR_STATE, "reader: the fetch stage stopped");
            return NULL;
        }
        if (it->kind == SHARD_ITEM_END) {
            shard_item_release(it);
            shard_shuffle_moved_on(&r->shuffle, &st->last, NULL);
            st->active = 0;
            r->rr[src] = (r->rr[src] + 1) % r->per;
            continue;
        }
        if (it->kind == SHARD_ITEM_ERROR) {
            *rc = shard_fail(r->err, it->code ? it->code : SHARD_ERR_FORMAT, "%s",
                             it->error ? it->error : "read error");
            shard_item_release(it);
            return NULL;
        }
        if (r->s.shuffle_buffer)
            shard_shuffle_moved_on(&r->shuffle, &st->last, it->hold);
        r->rr[src] = (r->rr[src] + 1) % r->per;
        return it;
    }
    return NULL;
}

/* The next item of the partition before its shuffle buffer; NULL at its end. */
static ShardItem *pull_next(ShardReader *r, int *rc)
{
    *rc = 0;
    if (r->start_due) {
        r->start_due = 0;
        if ((*rc = shard_reader_start(r)))
            return NULL;
    }
    int src;
    /* a source drawn for a pull that had to wait is the next pull's */
    while ((src = r->pending_src >= 0 ? r->pending_src : shard_reader_source(r)) >= 0) {
        r->pending_src = -1;
        ShardItem *it = pull_from(r, (size_t)src, rc);
        if (*rc == SHARD_AGAIN)
            r->pending_src = src;
        /* A mixed source that ended early (skipped after an error) gives up its place. */
        if (it || *rc || !r->mixing)
            return it;
    }
    return NULL;
}

/* pull_next, the next partition's reading begun once this one's input has ended. */
static ShardItem *pull(void *cookie, int *rc)
{
    ShardReader *r = cookie;
    if (r->s.order_only)
        return shard_reader_pull_ids(r, rc);
    ShardItem *it = pull_next(r, rc);
    if (!it && !*rc)
        prefetch(r);
    return it;
}

/* Resampled mode: notes the draw a sample came from, for the state. */
static void note_draw(ShardReader *r, const ShardItem *it)
{
    ShardOrder *o = r->order;
    uint64_t j = (uint64_t)it->stream + it->segno * r->per + 1;
    if (atomic_load(&o->taken) < j)
        atomic_store(&o->taken, j);
}

int shard_reader_take_next(ShardReader *r, ShardItem **out)
{
    *out = NULL;
    shard_item_release(r->last);
    r->last = NULL;
    if (r->failed)
        return r->failed;
    for (;;) {
        int rc;
        if (!r->cur_open) {
            if (r->cur > (int64_t)r->order->npieces)
                return SHARD_EOS;
            if ((rc = next_piece(r)) == SHARD_EOS)
                return rc;
            if (rc) {
                r->failed = rc;
                return rc;
            }
        }
        ShardItem *it = shard_reader_step(r, pull, &rc);
        if (rc == SHARD_AGAIN)
            return rc; /* shard_reader_set_wait's wait passed: nothing taken */
        if (rc && r->shuffle.over) { /* the sizes that would fit, at these samples' mean */
            uint64_t limit = shard_shuffle_limit(&r->s), held = r->shuffle.held;
            uint64_t mean = r->shuffle.n ? held / r->shuffle.n : held, fit = mean ? limit / mean : 0;
            uint64_t need = mean * r->s.shuffle_buffer + mean;
            shard_fail(r->err, rc, "reader: the shuffle buffer holds %llu bytes in %zu samples "
                       "(%llu bytes each, on average), more than its limit of %llu (the "
                       "shuffle asked for at 4 MiB a sample, within an eighth of this "
                       "machine's memory, memory_budget at least): set shuffle_buffer=%llu or "
                       "less, or memory_budget=%llu or more", (unsigned long long)held,
                       r->shuffle.n, (unsigned long long)mean, (unsigned long long)limit,
                       (unsigned long long)(fit > 1 ? fit - 1 : 1), (unsigned long long)need);
        }
        if (rc) {
            r->failed = rc;
            return rc;
        }
        if (!it) { /* the piece's partition is drained */
            r->cur_open = 0;
            continue;
        }
        if (r->drop_left) { /* delivered before the reading began */
            r->drop_left--;
            shard_item_release(it);
            continue;
        }
        if (r->s.mode == SHARD_MODE_RESAMPLED)
            note_draw(r, it);
        if (r->piece_left != UINT64_MAX && !--r->piece_left)
            r->cur_open = 0; /* the piece ends here, inside its partition or at its end */
        it->position = r->position++;
        r->line_next += r->line_next != UINT64_MAX;
        atomic_fetch_add_explicit(&r->samples, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&r->bytes, shard_item_bytes(it), memory_order_relaxed);
        *out = it;
        return 0;
    }
}
