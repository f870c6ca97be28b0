/*
 * The batch loader (shard/loader.h).
 *
 * DESIGN
 * - Slots: `batches` batch buffers, each FREE, FILLING (producer dealt samples to it, the
 *   decoders work on them), READY (every sample done), HELD (returned to the caller).
 *   Batches are numbered in the order the producer fills them; the caller gets them in
 *   that order, so the order is the reader's, whatever order the decoders finish in.
 * - The producer thread takes batch_size samples from the reader (owning them), picks the
 *   image and label fields, and queues one decode job per sample naming its slot and
 *   place. At the epoch's end it marks an END slot. A decode job writes only its own
 *   image, label and flags in the slot, then counts the slot's done samples under the
 *   loader's lock; the last one marks the slot READY.
 * - One mutex guards slots, the job queue and counters; condition variables wake the
 *   producer (a slot is free), the decoders (a job is queued) and the caller (a slot is
 *   ready). Each sample's random choices come from (seed, epoch, consumer, its position
 *   in the epoch), so augmentation is reproducible and survives a resume.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "item.h"
#include "rng.h"
#include "shard/loader.h"

enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD };

#define SCRATCH_KEEP ((size_t)64 << 20) /* bytes of one decode buffer kept between samples */

typedef struct Slot {
    ShardBatch batch; /* first: the caller gets &slot->batch */
    int state;
    int end;        /* the epoch ended here: no samples */
    uint64_t seq;   /* fill order */
    uint64_t epoch;
    size_t n, done, queued;
    void *images;
    int64_t *labels;
    const char **keys;
    const char **urls;
    ShardItem **items; /* the reader's samples, freed once decoded */
    const unsigned char **img; /* each sample's image bytes, in its item */
    size_t *img_size;
    int *failed;
    char *first_error;
    uint64_t end_position; /* the reader's position after this batch */
    char *keybuf;          /* the keys, NUL-terminated, back to back (grow-only) */
    size_t keylen, keycap;
    size_t *keyoff;
    struct RawField *raw;  /* raw fields: nraw in use, rawcap kept for reuse */
    size_t nraw, rawcap;
    ShardBatchField *views;
} Slot;

/* A raw field's bytes for one batch; its buffers are kept from batch to batch. */
typedef struct RawField {
    char *name;
    unsigned char *data;
    size_t size, cap;
    uint64_t *offsets;      /* batch_size + 1 */
    unsigned char *present; /* batch_size */
    size_t filled;          /* samples accounted for */
} RawField;

typedef struct Job {
    Slot *slot;
    size_t i;
    const unsigned char *data;
    size_t size;
    uint64_t seed;
} Job;

struct ShardLoader {
    ShardLoaderSettings s;
    char *image_fields;
    char *label_field;
    char *raw_fields; /* NULL: none; "*": all but image and label */
    int raw_all;      /* raw_fields is "*" */
    ShardReader *reader;
    char err[SHARD_ERROR_MAX];
    size_t image_bytes;
    uint64_t consumer;

    pthread_mutex_t lock;
    pthread_cond_t slot_free, job_ready, slot_ready;
    Slot *slots;
    size_t nslots;
    uint64_t next_fill, next_give;
    int stop, producer_done;
    int quit; /* the decoders' own stop: only shard_loader_free sets it */
    int job_room_wanted; /* the producer waits for room in the job queue */
    int draining;        /* stop_producer waits for the queued jobs */
    int producer_running;
    pthread_t producer;
    pthread_t *decoders;
    int ndecoders;
    Job *jobs;
    size_t jcap, jhead, jn;
    int failed;
    uint64_t skipped;
    uint64_t epoch;
    uint64_t delivered_position;
    int ended; /* the caller has seen this epoch's END */
};

void shard_loader_default_settings(ShardLoaderSettings *s)
{
    memset(s, 0, sizeof *s);
    shard_reader_default_settings(&s->reader);
    shard_transform_default(&s->transform);
    s->batch_size = 256;
    s->drop_last = 0;
    s->threads = 0;
    s->batches = 4;
    s->image_fields = "jpg;jpeg;png";
    s->label_field = "cls";
    s->raw_fields = "*";
    s->allocator = NULL;
}

#define HUGE_PAGE ((size_t)2 << 20)

static void *buf_alloc(const ShardLoader *l, size_t n)
{
    if (l->s.allocator)
        return l->s.allocator->alloc(l->s.allocator->cookie, n, 64);
    if (n < HUGE_PAGE)
        return aligned_alloc(64, (n + 63) & ~(size_t)63);
    /* Batch buffers are tens of MB, first written by the decoders: in 2 MB pages (where
     * transparent huge pages are on "madvise", Debian's default) that is a few dozen page
     * faults per buffer instead of ten thousand, and fewer TLB misses after. */
    size_t size = (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    void *p = aligned_alloc(HUGE_PAGE, size);
#ifdef MADV_HUGEPAGE
    if (p)
        madvise(p, size, MADV_HUGEPAGE); /* a hint: failure is fine */
#endif
    return p;
}

static void buf_free(const ShardLoader *l, void *p, size_t n)
{
    if (l->s.allocator)
        l->s.allocator->free(l->s.allocator->cookie, p, n);
    else
        free(p);
}

/* ---- decoders -------------------------------------------------------------------------- */

static void *decoder_main(void *arg)
{
    ShardLoader *l = arg;
    ShardScratch sc = {0}; /* this thread's decode buffers, reused sample after sample */
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (!l->jn && !l->quit)
            pthread_cond_wait(&l->job_ready, &l->lock);
        if (l->quit && !l->jn)
            break;
        Job j = l->jobs[l->jhead];
        l->jhead = (l->jhead + 1) % l->jcap;
        l->jn--;
        /* wake the producer only when it waits, and only once the queue is half empty: it
         * then queues half a queue at once, not one job per wake-up */
        if (l->job_room_wanted && l->jn <= l->jcap / 2)
            pthread_cond_broadcast(&l->slot_free);
        pthread_mutex_unlock(&l->lock);

        Slot *sl = j.slot;
        char msg[256] = "";
        int rc = j.data ? shard_decode_transform_with(&sc, j.data, j.size, &l->s.transform, j.seed,
                                                      (unsigned char *)sl->images + j.i * l->image_bytes,
                                                      msg, sizeof msg)
                        : SHARD_ERR_NOT_FOUND;
        if (!j.data)
            snprintf(msg, sizeof msg, "no image field (looked for %s)", l->image_fields);

        /* a huge image leaves huge buffers: not kept for the thread's life */
        shard_scratch_trim(&sc, SCRATCH_KEEP);
        pthread_mutex_lock(&l->lock);
        if (rc) {
            sl->failed[j.i] = 1;
            if (!sl->first_error) {
                char full[SHARD_ERROR_MAX];
                snprintf(full, sizeof full, "%s: sample '%s': %s", sl->urls[j.i], sl->keys[j.i], msg);
                sl->first_error = shard_strdup(full);
            }
        }
        if (++sl->done == sl->n) {
            sl->state = SLOT_READY;
            pthread_cond_broadcast(&l->slot_ready);
        } else if (l->draining) {
            /* stop_producer waits for the jobs of a slot left half dealt */
            pthread_cond_broadcast(&l->slot_ready);
        }
    }
    pthread_mutex_unlock(&l->lock);
    shard_scratch_release(&sc);
    return NULL;
}

/* ---- producer -------------------------------------------------------------------------- */

/* Walks a ';'-separated list of names: each call gives the next one (not NUL-terminated)
 * and its length; 0 at the end. */
static int next_name(const char **p, const char **name, size_t *len)
{
    while (*p && **p == ';')
        (*p)++;
    if (!*p || !**p)
        return 0;
    const char *e = strchr(*p, ';');
    *name = *p;
    *len = e ? (size_t)(e - *p) : strlen(*p);
    *p = e ? e + 1 : NULL;
    return 1;
}

static int same_name(const char *a, const char *b, size_t blen)
{
    return strlen(a) == blen && !strncmp(a, b, blen);
}

/* The first of names (';'-separated, in order) that the sample has. */
static const ShardFieldView *find_field(const char *names, const ShardFieldView *f, size_t n)
{
    const char *name;
    size_t len;
    for (const char *p = names; next_name(&p, &name, &len);)
        for (size_t i = 0; i < n; i++)
            if (same_name(f[i].name, name, len))
                return &f[i];
    return NULL;
}

static int64_t parse_label(const ShardFieldView *f)
{
    if (!f || !f->size || f->size > 20)
        return -1;
    int64_t v = 0;
    size_t i = 0;
    while (i < f->size && (f->data[i] == ' ' || f->data[i] == '\n'))
        i++;
    size_t start = i;
    for (; i < f->size && f->data[i] >= '0' && f->data[i] <= '9'; i++)
        v = v * 10 + (f->data[i] - '0');
    while (i < f->size && (f->data[i] == ' ' || f->data[i] == '\n' || f->data[i] == '\r'))
        i++;
    return i == f->size && i > start ? v : -1;
}

/* Grows *buf (capacity *cap) to hold need bytes: doubling, so a batch's buffers reach
 * their size in a few steps and are then reused. */
static int grow(void *buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    void *p = realloc(*(void **)buf, c);
    if (!p)
        return SHARD_ERR_NOMEM;
    *(void **)buf = p;
    *cap = c;
    return 0;
}

static int names_have(const char *names, const char *name)
{
    const char *one;
    size_t len;
    for (const char *p = names; next_name(&p, &one, &len);)
        if (same_name(name, one, len))
            return 1;
    return 0;
}

static void field_reset(RawField *f)
{
    f->size = f->filled = 0;
    f->offsets[0] = 0;
}

/* The slot's raw field of that name, added (reusing a kept one) if the batch has none. */
static RawField *slot_field(Slot *sl, const char *name, size_t bs)
{
    for (size_t k = 0; k < sl->nraw; k++)
        if (!strcmp(sl->raw[k].name, name))
            return &sl->raw[k];
    if (sl->nraw == sl->rawcap) {
        size_t cap = sl->rawcap ? sl->rawcap * 2 : 4;
        RawField *r = realloc(sl->raw, cap * sizeof *r);
        if (!r)
            return NULL;
        sl->raw = r;
        ShardBatchField *v = realloc(sl->views, cap * sizeof *v);
        if (!v)
            return NULL;
        sl->views = v;
        memset(sl->raw + sl->rawcap, 0, (cap - sl->rawcap) * sizeof *r);
        sl->rawcap = cap;
    }
    RawField *f = &sl->raw[sl->nraw];
    if (!f->offsets)
        f->offsets = malloc((bs + 1) * sizeof *f->offsets);
    if (!f->present)
        f->present = malloc(bs);
    if (!f->offsets || !f->present)
        return NULL;
    if (!f->name || strcmp(f->name, name)) {
        char *copy = shard_strdup(name);
        if (!copy)
            return NULL;
        free(f->name);
        f->name = copy;
    }
    field_reset(f);
    sl->nraw++;
    return f;
}

/* Samples up to n without the field: empty and marked absent. */
static void field_pad(RawField *f, size_t n)
{
    for (; f->filled < n; f->filled++) {
        f->offsets[f->filled + 1] = f->offsets[f->filled];
        f->present[f->filled] = 0;
    }
}

static int field_append(RawField *f, size_t i, const void *data, size_t size)
{
    field_pad(f, i);
    if (grow(&f->data, &f->cap, f->size + size))
        return SHARD_ERR_NOMEM;
    if (size)
        memcpy(f->data + f->size, data, size);
    f->size += size;
    f->offsets[i + 1] = f->size;
    f->present[i] = 1;
    f->filled = i + 1;
    return 0;
}

/* Copies sample i's raw fields (all but its image and label, or the ones named). */
static int take_raw(ShardLoader *l, Slot *sl, size_t i, const ShardFieldView *f, size_t nf,
                    const ShardFieldView *image, const ShardFieldView *label)
{
    for (size_t k = 0; k < nf; k++) {
        if (&f[k] == image || &f[k] == label)
            continue;
        if (!l->raw_all && !names_have(l->raw_fields, f[k].name))
            continue;
        RawField *r = slot_field(sl, f[k].name, l->s.batch_size);
        if (!r || field_append(r, i, f[k].data, (size_t)f[k].size))
            return SHARD_ERR_NOMEM;
    }
    return 0;
}

static int take_key(Slot *sl, size_t i, const char *key)
{
    size_t len = strlen(key) + 1;
    if (grow(&sl->keybuf, &sl->keycap, sl->keylen + len))
        return SHARD_ERR_NOMEM;
    memcpy(sl->keybuf + sl->keylen, key, len);
    sl->keyoff[i] = sl->keylen;
    sl->keylen += len;
    return 0;
}

/* A new batch in the slot: no keys; the named raw fields, empty (with "*", none yet). */
static void slot_begin(ShardLoader *l, Slot *sl)
{
    sl->keylen = 0;
    if (l->raw_all)
        sl->nraw = 0;
    for (size_t k = 0; k < sl->nraw; k++)
        field_reset(&sl->raw[k]);
}

/* The batch's samples are in: key pointers into the (now final) key buffer, fields padded. */
static void slot_seal(Slot *sl, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sl->keys[i] = sl->keybuf + sl->keyoff[i];
    for (size_t k = 0; k < sl->nraw; k++)
        field_pad(&sl->raw[k], n);
}

static void slot_clear_items(Slot *sl)
{
    for (size_t i = 0; i < sl->n; i++) {
        shard_item_release(sl->items[i]);
        sl->items[i] = NULL;
        sl->keys[i] = NULL;
    }
    free(sl->first_error);
    sl->first_error = NULL;
}

static void *producer_main(void *arg)
{
    ShardLoader *l = arg;
    size_t bs = l->s.batch_size;
    for (;;) {
        pthread_mutex_lock(&l->lock);
        Slot *sl = NULL;
        while (!l->stop) {
            for (size_t k = 0; k < l->nslots && !sl; k++)
                if (l->slots[k].state == SLOT_FREE)
                    sl = &l->slots[k];
            if (sl)
                break;
            pthread_cond_wait(&l->slot_free, &l->lock);
        }
        if (l->stop) {
            pthread_mutex_unlock(&l->lock);
            break;
        }
        sl->state = SLOT_FILLING;
        sl->seq = l->next_fill++;
        sl->epoch = l->epoch;
        sl->n = sl->done = sl->queued = 0;
        sl->end = 0;
        pthread_mutex_unlock(&l->lock);
        slot_begin(l, sl);

        /* Take the batch's samples (the reader runs on this thread). */
        int rc = 0;
        size_t n = 0;
        uint64_t end_pos = 0;
        while (n < bs) {
            ShardItem *item;
            rc = shard_reader_take(l->reader, &item);
            if (rc)
                break;
            const char *key = item->v.key;
            const char *url = shard_list_entry(shard_reader_list(l->reader), item->shard)->url;
            const ShardFieldView *f = item->v.fields;
            size_t nf = item->v.nfields;
            end_pos = item->position + 1;
            sl->items[n] = item;
            const ShardFieldView *im = find_field(l->image_fields, f, nf);
            const ShardFieldView *lab = l->label_field ? find_field(l->label_field, f, nf) : NULL;
            sl->img[n] = im ? im->data : NULL;
            sl->img_size[n] = im ? (size_t)im->size : 0;
            sl->urls[n] = url;
            sl->labels[n] = l->label_field ? parse_label(lab) : -1;
            sl->failed[n] = 0;
            if (take_key(sl, n, key) || (l->raw_fields && take_raw(l, sl, n, f, nf, im, lab))) {
                rc = SHARD_ERR_NOMEM;
                sl->items[n] = NULL;
                shard_item_release(item);
                break;
            }
            n++; /* the item is the slot's now, to be freed with it */
        }
        slot_seal(sl, n);
        if (rc && rc != SHARD_EOS) {
            pthread_mutex_lock(&l->lock);
            if (rc == SHARD_ERR_NOMEM)
                shard_fail(l->err, rc, "loader: out of memory for a batch's keys or raw fields");
            else
                shard_fail(l->err, rc, "%s", shard_reader_error(l->reader));
            sl->n = n;
            slot_clear_items(sl);
            sl->n = 0;
            sl->end = 1;
            l->failed = rc;
            sl->state = SLOT_READY;
            l->producer_done = 1;
            pthread_cond_broadcast(&l->slot_ready);
            pthread_mutex_unlock(&l->lock);
            break;
        }
        if (n < bs && (n == 0 || l->s.drop_last)) {
            pthread_mutex_lock(&l->lock);
            sl->n = n;
            slot_clear_items(sl);
            sl->n = 0;
            sl->end = 1;
            sl->state = SLOT_READY;
            l->producer_done = 1;
            pthread_cond_broadcast(&l->slot_ready);
            pthread_mutex_unlock(&l->lock);
            break;
        }
        pthread_mutex_lock(&l->lock);
        sl->n = n;
        sl->end_position = end_pos;
        for (size_t i = 0; i < n; i++) {
            while (l->jn == l->jcap && !l->stop) {
                l->job_room_wanted = 1;
                pthread_cond_wait(&l->slot_free, &l->lock);
            }
            l->job_room_wanted = 0;
            if (l->stop)
                break;
            ShardRng r;
            shard_rng_init(&r, shard_reader_seed(l->reader), 0xa116e, sl->epoch, l->consumer,
                           end_pos - n + i);
            Job j = {sl, i, sl->img[i], sl->img_size[i], shard_rng_next(&r)};
            l->jobs[(l->jhead + l->jn) % l->jcap] = j;
            l->jn++;
            sl->queued++;
            pthread_cond_signal(&l->job_ready);
        }
        pthread_mutex_unlock(&l->lock);
        if (n < bs) {
            /* the partial last batch is out; the END follows */
            pthread_mutex_lock(&l->lock);
            Slot *end = NULL;
            while (!l->stop) {
                for (size_t k = 0; k < l->nslots && !end; k++)
                    if (l->slots[k].state == SLOT_FREE)
                        end = &l->slots[k];
                if (end)
                    break;
                pthread_cond_wait(&l->slot_free, &l->lock);
            }
            if (end) {
                end->seq = l->next_fill++;
                end->epoch = l->epoch;
                end->n = end->done = 0;
                end->end = 1;
                end->state = SLOT_READY;
                pthread_cond_broadcast(&l->slot_ready);
            }
            l->producer_done = 1;
            pthread_mutex_unlock(&l->lock);
            break;
        }
    }
    return NULL;
}

/* ---- threads --------------------------------------------------------------------------- */

static void stop_producer(ShardLoader *l)
{
    if (!l->producer_running)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = 1;
    pthread_cond_broadcast(&l->slot_free);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->producer, NULL);
    l->producer_running = 0;
    /* let the decoders finish the jobs queued, then drop every slot not held */
    pthread_mutex_lock(&l->lock);
    l->stop = 0;
    l->draining = 1;
    for (;;) {
        int busy = l->jn > 0;
        for (size_t k = 0; k < l->nslots; k++)
            if (l->slots[k].state == SLOT_FILLING && l->slots[k].done < l->slots[k].queued)
                busy = 1;
        if (!busy)
            break;
        pthread_cond_wait(&l->slot_ready, &l->lock);
    }
    l->draining = 0;
    for (size_t k = 0; k < l->nslots; k++) {
        Slot *sl = &l->slots[k];
        if (sl->state == SLOT_HELD)
            continue;
        slot_clear_items(sl);
        sl->n = sl->done = sl->queued = 0;
        sl->state = SLOT_FREE;
    }
    pthread_mutex_unlock(&l->lock);
}

static int start_producer(ShardLoader *l)
{
    l->producer_done = 0;
    l->ended = 0;
    l->next_give = l->next_fill;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&l->producer, NULL, producer_main, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        return shard_fail(l->err, SHARD_ERR_NOMEM, "loader: cannot start the producer thread");
    l->producer_running = 1;
    return 0;
}

/* ---- open and use ---------------------------------------------------------------------- */

static int fail_open(ShardLoader *l, ShardError *err, int rc)
{
    shard_report(err, rc, l->err);
    shard_loader_free(&l);
    return rc;
}

int shard_loader_open(ShardLoader **out, const ShardLoaderSettings *s, ShardError *err)
{
    *out = NULL;
    ShardLoader *l = calloc(1, sizeof *l);
    if (!l)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    l->s = *s;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->slot_free, NULL);
    pthread_cond_init(&l->job_ready, NULL);
    pthread_cond_init(&l->slot_ready, NULL);
    l->image_fields = shard_strdup(s->image_fields ? s->image_fields : "jpg;jpeg;png");
    l->label_field = s->label_field ? shard_strdup(s->label_field) : NULL;
    l->raw_fields = s->raw_fields && *s->raw_fields ? shard_strdup(s->raw_fields) : NULL;
    l->s.image_fields = l->image_fields;
    l->s.label_field = l->label_field;
    l->s.raw_fields = l->raw_fields;
    l->raw_all = l->raw_fields && !strcmp(l->raw_fields, "*");
    if (!l->image_fields || (s->label_field && !l->label_field) ||
        (s->raw_fields && *s->raw_fields && !l->raw_fields))
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "out of memory"));
    const ShardTransform *t = &s->transform;
    if (!s->batch_size || t->width <= 0 || t->height <= 0 || t->width > 16384 || t->height > 16384)
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_INVALID,
                                            "loader: batch size and image size must be positive"));
    l->image_bytes = shard_transform_output_size(t);
    ShardError e;
    ShardReaderSettings rs = s->reader;
    rs.worker_align = s->batch_size; /* batch counts per rank independent of workers */
    if (shard_reader_open(&l->reader, &rs, &e))
        return fail_open(l, err, shard_fail(l->err, e.code, "%s", e.message));
    l->epoch = s->reader.epoch;
    int rank = s->reader.rank < 0 ? 0 : s->reader.rank;
    l->consumer = (uint64_t)rank * (uint64_t)(s->reader.num_workers ? s->reader.num_workers : 1) +
                  (uint64_t)s->reader.worker;
    l->nslots = s->batches < 2 ? 2 : s->batches;
    l->slots = calloc(l->nslots, sizeof *l->slots);
    size_t bs = s->batch_size;
    l->jcap = bs * 2;
    l->jobs = calloc(l->jcap, sizeof *l->jobs);
    if (!l->slots || !l->jobs)
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "out of memory"));
    for (size_t k = 0; k < l->nslots; k++) {
        Slot *sl = &l->slots[k];
        sl->images = buf_alloc(l, bs * l->image_bytes);
        sl->labels = calloc(bs, sizeof *sl->labels);
        sl->keys = calloc(bs, sizeof *sl->keys);
        sl->urls = calloc(bs, sizeof *sl->urls);
        sl->items = calloc(bs, sizeof *sl->items);
        sl->img = calloc(bs, sizeof *sl->img);
        sl->img_size = calloc(bs, sizeof *sl->img_size);
        sl->failed = calloc(bs, sizeof *sl->failed);
        sl->keyoff = calloc(bs, sizeof *sl->keyoff);
        int named = 1; /* the fields named in raw_fields are in every batch, present or not */
        const char *one;
        size_t len;
        for (const char *p = l->raw_all ? NULL : l->raw_fields;
             named && next_name(&p, &one, &len);) {
            char *name = malloc(len + 1);
            if (name) {
                memcpy(name, one, len);
                name[len] = 0;
            }
            named = name && slot_field(sl, name, bs) != NULL;
            free(name);
        }
        if (!sl->images || !sl->labels || !sl->keys || !sl->urls || !sl->items || !sl->img ||
            !sl->img_size || !sl->failed || !sl->keyoff || !named)
            return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM,
                                                "loader: cannot allocate %zu batch buffers of %zu "
                                                "bytes", l->nslots, bs * l->image_bytes));
    }
    int threads = s->threads > 0 ? s->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1)
        threads = 1;
    l->decoders = calloc((size_t)threads, sizeof *l->decoders);
    if (!l->decoders)
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "out of memory"));
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&l->decoders[i], NULL, decoder_main, l))
            break;
        l->ndecoders++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!l->ndecoders)
        return fail_open(l, err, shard_fail(l->err, SHARD_ERR_NOMEM, "loader: no decode thread"));
    int rc = start_producer(l);
    if (rc)
        return fail_open(l, err, rc);
    *out = l;
    return 0;
}

/* Moves the samples that decoded down over the ones that failed. */
static void compact(ShardLoader *l, Slot *sl)
{
    size_t o = 0;
    for (size_t i = 0; i < sl->n; i++) {
        if (sl->failed[i]) {
            l->skipped++;
            sl->keys[i] = NULL;
            continue;
        }
        if (o != i) {
            memmove((unsigned char *)sl->images + o * l->image_bytes,
                    (unsigned char *)sl->images + i * l->image_bytes, l->image_bytes);
            sl->labels[o] = sl->labels[i];
            sl->keys[o] = sl->keys[i];
            sl->urls[o] = sl->urls[i];
            sl->keys[i] = NULL;
        }
        o++;
    }
    for (size_t k = 0; k < sl->nraw; k++) {
        RawField *f = &sl->raw[k];
        size_t m = 0;
        uint64_t at = 0;
        for (size_t i = 0; i < sl->n; i++) {
            uint64_t from = f->offsets[i], to = f->offsets[i + 1];
            if (sl->failed[i])
                continue;
            memmove(f->data + at, f->data + from, (size_t)(to - from));
            f->present[m] = f->present[i];
            f->offsets[m] = at;
            at += to - from;
            f->offsets[++m] = at;
        }
        f->size = (size_t)at;
    }
    sl->n = o;
}

int shard_loader_next(ShardLoader *l, const ShardBatch **out)
{
    *out = NULL;
    pthread_mutex_lock(&l->lock);
    for (;;) {
        if (l->ended) {
            pthread_mutex_unlock(&l->lock);
            return SHARD_EOS;
        }
        Slot *sl = NULL;
        int held = 0;
        for (size_t k = 0; k < l->nslots; k++) {
            if (l->slots[k].state != SLOT_FREE && l->slots[k].seq == l->next_give &&
                l->slots[k].state != SLOT_HELD)
                sl = &l->slots[k];
            held += l->slots[k].state == SLOT_HELD;
        }
        if ((size_t)held == l->nslots) {
            pthread_mutex_unlock(&l->lock);
            return shard_fail(l->err, SHARD_ERR_STATE,
                              "loader: all %zu batch buffers are held: release batches, or "
                              "open with more",
                              l->nslots);
        }
        if (!sl || sl->state != SLOT_READY) {
            pthread_cond_wait(&l->slot_ready, &l->lock);
            continue;
        }
        l->next_give++;
        if (sl->end) {
            l->ended = 1;
            sl->state = SLOT_FREE;
            pthread_cond_broadcast(&l->slot_free);
            int failed = l->failed;
            pthread_mutex_unlock(&l->lock);
            return failed ? failed : SHARD_EOS;
        }
        /* the samples are decoded: give the reader's memory back now */
        for (size_t i = 0; i < sl->n; i++) {
            shard_item_release(sl->items[i]);
            sl->items[i] = NULL;
        }
        int bad = 0;
        for (size_t i = 0; i < sl->n; i++)
            bad |= sl->failed[i];
        if (bad && !l->s.reader.skip_errors) {
            shard_fail(l->err, SHARD_ERR_DECODE, "%s", sl->first_error ? sl->first_error : "decode failed");
            l->failed = SHARD_ERR_DECODE;
            l->ended = 1;
            slot_clear_items(sl);
            sl->state = SLOT_FREE;
            pthread_cond_broadcast(&l->slot_free);
            pthread_mutex_unlock(&l->lock);
            return SHARD_ERR_DECODE;
        }
        if (bad)
            compact(l, sl);
        free(sl->first_error);
        sl->first_error = NULL;
        l->delivered_position = sl->end_position;
        if (!sl->n) { /* every sample failed: on to the next batch */
            sl->state = SLOT_FREE;
            pthread_cond_broadcast(&l->slot_free);
            continue;
        }
        sl->state = SLOT_HELD;
        ShardBatch *b = &sl->batch;
        b->size = sl->n;
        b->images = sl->images;
        b->image_bytes = l->image_bytes;
        b->labels = sl->labels;
        b->keys = sl->keys;
        b->urls = sl->urls;
        for (size_t k = 0; k < sl->nraw; k++) {
            RawField *f = &sl->raw[k];
            sl->views[k] = (ShardBatchField){f->name, f->data, f->offsets, f->present};
        }
        b->nfields = sl->nraw;
        b->fields = sl->views;
        b->epoch = sl->epoch;
        b->index = sl->seq;
        pthread_mutex_unlock(&l->lock);
        *out = b;
        return 0;
    }
}

void shard_batch_release(ShardLoader *l, const ShardBatch *b)
{
    if (!l || !b)
        return;
    Slot *sl = (Slot *)b; /* the batch is the slot's first member */
    pthread_mutex_lock(&l->lock);
    for (size_t i = 0; i < sl->n; i++)
        sl->keys[i] = NULL;
    sl->n = 0;
    sl->state = SLOT_FREE;
    pthread_cond_broadcast(&l->slot_free);
    pthread_mutex_unlock(&l->lock);
}

int shard_loader_set_epoch(ShardLoader *l, uint64_t e)
{
    stop_producer(l);
    l->failed = 0;
    l->epoch = e;
    l->delivered_position = 0;
    int rc = shard_reader_set_epoch(l->reader, e);
    if (rc)
        return shard_fail(l->err, rc, "%s", shard_reader_error(l->reader));
    return start_producer(l);
}

int shard_loader_state(const ShardLoader *l, char *buf, size_t size)
{
    int n = snprintf(buf, size, "v1:%llu:%llu:%llu", (unsigned long long)l->epoch,
                     (unsigned long long)l->delivered_position,
                     (unsigned long long)shard_reader_seed(l->reader));
    return n < 0 || (size_t)n >= size ? SHARD_ERR_INVALID : 0;
}

int shard_loader_restore(ShardLoader *l, const char *state)
{
    unsigned long long e, p, seed;
    char tail;
    if (sscanf(state, "v1:%llu:%llu:%llu%c", &e, &p, &seed, &tail) != 3)
        return shard_fail(l->err, SHARD_ERR_INVALID, "loader: '%s' is not a state", state);
    stop_producer(l);
    l->failed = 0;
    int rc = shard_reader_restore(l->reader, state);
    if (rc)
        return shard_fail(l->err, rc, "%s", shard_reader_error(l->reader));
    l->epoch = e;
    l->delivered_position = p;
    return start_producer(l);
}

int64_t shard_loader_epoch_batches(const ShardLoader *l)
{
    int64_t n = shard_reader_epoch_length(l->reader);
    if (n < 0)
        return -1;
    int64_t bs = (int64_t)l->s.batch_size;
    return l->s.drop_last ? n / bs : (n + bs - 1) / bs;
}

uint64_t shard_loader_seed(const ShardLoader *l) { return shard_reader_seed(l->reader); }

uint64_t shard_loader_skipped(const ShardLoader *l) { return l->skipped; }

const char *shard_loader_error(const ShardLoader *l) { return l->err; }

void shard_loader_free(ShardLoader **pl)
{
    if (!pl || !*pl)
        return;
    ShardLoader *l = *pl;
    if (l->producer_running)
        stop_producer(l);
    if (l->decoders) {
        pthread_mutex_lock(&l->lock);
        l->quit = 1;
        pthread_cond_broadcast(&l->job_ready);
        pthread_mutex_unlock(&l->lock);
        for (int i = 0; i < l->ndecoders; i++)
            pthread_join(l->decoders[i], NULL);
        free(l->decoders);
    }
    if (l->slots) {
        for (size_t k = 0; k < l->nslots; k++) {
            Slot *sl = &l->slots[k];
            if (sl->items && sl->keys)
                slot_clear_items(sl);
            if (sl->images)
                buf_free(l, sl->images, l->s.batch_size * l->image_bytes);
            free(sl->labels);
            free(sl->keys);
            free(sl->urls);
            free(sl->items);
            free(sl->img);
            free(sl->img_size);
            free(sl->failed);
            free(sl->keyoff);
            free(sl->keybuf);
            for (size_t k = 0; k < sl->rawcap; k++) {
                free(sl->raw[k].name);
                free(sl->raw[k].data);
                free(sl->raw[k].offsets);
                free(sl->raw[k].present);
            }
            free(sl->raw);
            free(sl->views);
        }
        free(l->slots);
    }
    free(l->jobs);
    shard_reader_free(&l->reader);
    free(l->image_fields);
    free(l->label_field);
    free(l->raw_fields);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->slot_free);
    pthread_cond_destroy(&l->job_ready);
    pthread_cond_destroy(&l->slot_ready);
    free(l);
    *pl = NULL;
}
