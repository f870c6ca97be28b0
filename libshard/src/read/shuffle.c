/*
 * The shuffle buffer (shuffle.h). Runs on the reader's consumer thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "base/cpus.h"
#include "base/error.h"
#include "catalog/keyview.h"
#include "read/shuffle.h"
#include "remote/store.h"
#include "shard/file.h"
#include "tar/shardfile.h"

int shard_shuffle_init(ShardShuffle *sh, size_t size, size_t initial, size_t keep,
                       uint64_t limit)
{
    memset(sh, 0, sizeof *sh);
    sh->size = size;
    sh->initial = initial && initial < size ? initial : size;
    sh->keep = keep;
    sh->limit = limit;
    sh->buf = calloc(size ? size : 1, sizeof *sh->buf);
    sh->sizes = calloc(size ? size : 1, sizeof *sh->sizes);
    sh->fin = calloc(keep + 2, sizeof *sh->fin); /* keep waiting, plus one arriving */
    return sh->buf && sh->sizes && sh->fin ? 0 : SHARD_ERR_NOMEM;
}

/* Slot k now holds it: its bytes counted; SHARD_ERR_INVALID (over set) past the limit. */
static int hold(ShardShuffle *sh, size_t k, ShardItem *it)
{
    sh->buf[k] = it;
    sh->held += sh->sizes[k] = shard_item_bytes(it);
    if (sh->limit && sh->held > sh->limit) {
        sh->over = 1;
        return SHARD_ERR_INVALID;
    }
    return 0;
}

void shard_shuffle_clear(ShardShuffle *sh)
{
    for (size_t i = 0; i < sh->n; i++)
        shard_item_release(sh->buf[i]);
    sh->n = 0;
    sh->held = 0;
    sh->over = 0;
    for (size_t i = 0; i < sh->nfin; i++)
        shard_hold_put(sh->fin[i]);
    sh->nfin = 0;
}

void shard_shuffle_reset(ShardShuffle *sh, const ShardRng *rng)
{
    shard_shuffle_clear(sh);
    sh->rng = *rng;
    sh->src_done = 0;
}

/* Pulls one item into the buffer, or notes the source's end. Returns an error code. */
static int fill(ShardShuffle *sh, ShardPullFn pull, void *cookie)
{
    int rc;
    ShardItem *it = pull(cookie, &rc);
    if (rc)
        return rc;
    if (!it) {
        sh->src_done = 1;
        return 0;
    }
    sh->n++;
    return hold(sh, sh->n - 1, it);
}

ShardItem *shard_shuffle_step(ShardShuffle *sh, ShardPullFn pull, void *cookie, int *rc)
{
    *rc = 0;
    if (!sh->size) {
        if (sh->src_done)
            return NULL;
        ShardItem *it = pull(cookie, rc);
        if (!it && *rc != SHARD_AGAIN)
            sh->src_done = 1;
        return it;
    }
    while (!sh->src_done && sh->n < sh->initial)
        if ((*rc = fill(sh, pull, cookie)))
            return NULL;
    /* keep topping the buffer up by one per step until it is full */
    if (!sh->src_done && sh->n < sh->size && (*rc = fill(sh, pull, cookie)))
        return NULL;
    if (!sh->n)
        return NULL;
    /* the pull comes before the draw, which it does not touch: a pull that must wait
     * (SHARD_AGAIN) leaves the step undone, to be taken again */
    ShardItem *next = NULL;
    int pulled = !sh->src_done;
    if (pulled && !(next = pull(cookie, rc)) && *rc == SHARD_AGAIN)
        return NULL;
    size_t k = (size_t)shard_rng_below(&sh->rng, sh->n);
    ShardItem *out = sh->buf[k];
    sh->held -= sh->sizes[k];
    if (pulled) {
        if (*rc) {
            shard_item_release(out);
            sh->n--;
            sh->buf[k] = sh->buf[sh->n], sh->sizes[k] = sh->sizes[sh->n];
            return NULL;
        }
        if (!next)
            sh->src_done = 1;
    }
    if (next && (*rc = hold(sh, k, next))) {
        shard_item_release(out);
        return NULL;
    }
    if (!next) {
        sh->n--;
        sh->buf[k] = sh->buf[sh->n], sh->sizes[k] = sh->sizes[sh->n];
    }
    return out;
}

/* Lets go of the FIFO's shards no sample holds any more, then of the oldest ones past
 * keep, after their stragglers in the buffer get copies of their bytes. By then few of a
 * shard's samples are left in the buffer, so little is copied (the rest stay views). */
static void trim(ShardShuffle *sh)
{
    size_t o = 0;
    for (size_t i = 0; i < sh->nfin; i++) {
        ShardHold *h = sh->fin[i];
        if (shard_hold_alone(h))
            shard_hold_put(h);
        else
            sh->fin[o++] = h;
    }
    sh->nfin = o;
    while (sh->nfin > sh->keep) {
        ShardHold *h = sh->fin[0];
        for (size_t i = 0; i < sh->n; i++)
            if (sh->buf[i]->hold == h)
                shard_item_detach(sh->buf[i]); /* out of memory: it keeps its view */
        shard_hold_put(h);
        memmove(sh->fin, sh->fin + 1, --sh->nfin * sizeof *sh->fin);
    }
}

void shard_shuffle_moved_on(ShardShuffle *sh, ShardHold **last, ShardHold *next)
{
    ShardHold *old = *last;
    if (old == next)
        return;
    *last = shard_hold_ref(next);
    if (old)
        sh->fin[sh->nfin++] = old; /* the reference moves to the FIFO */
    trim(sh);
}

/* Samples between two wanted ones of a remote shard read through rather than sought over:
 * a seek costs a request, a few small samples less. */
#define LOAD_READ_THROUGH 32

typedef struct Wanted {
    uint64_t index; /* in the shard */
    size_t slot;    /* in the buffer */
} Wanted;

static int by_index(const void *a, const void *b)
{
    const Wanted *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

/* Reads the samples want[0..n) of the buffer (in index order) from shard's file, each by
 * index; a remote shard's in runs, each from the file opened anew and sought to the run's
 * first, so that it streams the run in one request, short gaps read through. Without an
 * index: one pass from the start. */
static int load_shard(ShardItem **buf, uint64_t *sizes, const Wanted *want, size_t n,
                      uint32_t shard, const char *url, const ShardFileSettings *fs, char *err)
{
    ShardFile *f;
    ShardError e;
    if (shard_file_open(&f, url, fs, &e))
        return shard_fail(err, e.code, "reader: restoring the shuffle buffer: %s", e.message);
    const ShardSampleView *v = NULL;
    uint64_t next = 0; /* the index shard_file_next gives next */
    int seekable = 1, rc = 0, costly = (shard_store_can(url) & SHARD_STORE_COSTLY) != 0;
    uint64_t gap = costly ? LOAD_READ_THROUGH : 0;
    for (size_t k = 0; k < n && !rc; k++) {
        ShardItem *x = buf[want[k].slot];
        uint64_t i = want[k].index;
        if (!(v && i + 1 == next)) { /* not the sample just read (a repeat): get to it */
            if (i < next || (i - next > gap && seekable)) {
                if (v && costly) { /* a new run: a file of its own, read in order from it */
                    v = NULL;
                    shard_file_free(&f);
                    if (shard_file_open(&f, url, fs, &e))
                        return shard_fail(err, e.code, "reader: restoring the shuffle buffer: %s",
                                          e.message);
                }
                rc = shard_file_seek_in_order(f, i); /* by index where local */
                if (rc == 0) {
                    next = i;
                } else if (i >= next) { /* no index: read up to it */
                    seekable = 0;
                    rc = 0;
                }
            }
            while (rc == 0 && next <= i) {
                rc = shard_file_next(f, &v);
                next++;
            }
        }
        if (rc) {
            int code = shard_fail(err, rc == SHARD_EOS ? SHARD_ERR_FORMAT : rc,
                                  "reader: restoring sample %llu of %s: %s",
                                  (unsigned long long)i, url,
                                  rc == SHARD_EOS ? "the shard is shorter" : shard_file_error(f));
            shard_file_free(&f);
            return code;
        }
        ShardItem *full = shard_item_new(v, NULL, shard, NULL);
        if (!full) {
            shard_file_free(&f);
            return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
        }
        full->repeat = x->repeat;
        full->round = x->round;
        shard_item_release(x);
        buf[want[k].slot] = full;
        if (sizes)
            sizes[want[k].slot] = shard_item_bytes(full); /* identities weighed 0 */
    }
    shard_file_free(&f);
    return 0;
}

int shard_items_load(ShardItem **buf, uint64_t *sizes, size_t n, const ShardList *list,
                     const ShardKeyView *view, ShardRemote *remote, char *err)
{
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    fs.remote = remote;
    Wanted *want = malloc((n ? n : 1) * sizeof *want);
    if (!want)
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (buf[i]->block)
            continue;
        uint32_t shard = buf[i]->shard;
        size_t k = 0;
        for (size_t j = i; j < n; j++) /* this shard's identities, in index order */
            if (!buf[j]->block && buf[j]->shard == shard)
                want[k++] = (Wanted){view ? shard_keyview_sample(view, shard, buf[j]->v.index)
                                          : buf[j]->v.index, j};
        qsort(want, k, sizeof *want, by_index);
        rc = load_shard(buf, sizes, want, k, shard, shard_list_entry(list, shard)->url, &fs, err);
    }
    free(want);
    return rc;
}

int shard_shuffle_load(ShardShuffle *sh, const ShardList *list, const ShardKeyView *view,
                       ShardRemote *remote, char *err)
{
    uint64_t before = 0, after = 0;
    for (size_t i = 0; i < sh->n; i++)
        before += sh->sizes[i];
    int rc = shard_items_load(sh->buf, sh->sizes, sh->n, list, view, remote, err);
    for (size_t i = 0; i < sh->n; i++)
        after += sh->sizes[i];
    sh->held += after - before;
    return rc;
}

void shard_shuffle_free(ShardShuffle *sh)
{
    free(sh->sizes);
    sh->sizes = NULL;
    shard_shuffle_clear(sh);
    free(sh->buf);
    free(sh->fin);
    memset(sh, 0, sizeof *sh);
}

uint64_t shard_shuffle_limit(const ShardReaderSettings *s)
{
    if (!s->memory_budget)
        return 0; /* unbounded, as the streams are */
    /* the shuffle asked for, at up to 4 MiB a sample, within an eighth of the machine's
     * memory; memory_budget at least: 5000 ImageNet-sized JPEGs fit on any machine */
    uint64_t want = (uint64_t)s->shuffle_buffer << 22, machine = shard_memory_total() / 8;
    uint64_t limit = want < machine ? want : machine;
    return limit > s->memory_budget ? limit : s->memory_budget;
}
