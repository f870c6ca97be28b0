/*
 * Batch assembly (batch.h). Runs on the loader's producer thread (filling a slot) and on
 * the caller's thread (compacting and publishing a slot no other thread touches any more);
 * decode threads only write their sample's image and call shard_slot_fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "load/batch.h"
#include "resume/resume.h"
#include "shard/common.h"

/* ---- field selection ------------------------------------------------------------------ */

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

static int names_have(const char *names, const char *name)
{
    const char *one;
    size_t len;
    for (const char *p = names; next_name(&p, &one, &len);)
        if (same_name(name, one, len))
            return 1;
    return 0;
}

/* A decimal class index, surrounded by blanks at most; -1 when it is not one. */
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

/* ---- raw fields ----------------------------------------------------------------------- */

static void field_reset(ShardRawField *f)
{
    f->size = f->filled = 0;
    f->offsets[0] = 0;
}

/* The slot's raw field of that name (len bytes), added (reusing a kept one) if the batch
 * has none. */
static ShardRawField *slot_field(ShardSlot *sl, const ShardBatchSpec *spec, const char *name,
                                 size_t len)
{
    for (size_t k = 0; k < sl->nraw; k++)
        if (same_name(sl->raw[k].name, name, len))
            return &sl->raw[k];
    if (sl->nraw == sl->rawcap) {
        size_t cap = sl->rawcap, vcap = sl->rawcap; /* the two grow alike */
        if (shard_array_grow(&sl->raw, &cap, sl->nraw + 1, sizeof *sl->raw, 4) ||
            shard_array_grow(&sl->views, &vcap, sl->nraw + 1, sizeof *sl->views, 4))
            return NULL;
        memset(sl->raw + sl->rawcap, 0, (cap - sl->rawcap) * sizeof *sl->raw);
        sl->rawcap = cap;
    }
    ShardRawField *f = &sl->raw[sl->nraw];
    const ShardAllocator *a = shard_default_allocator(); /* host-only: see shard_slot_init */
    size_t bs = spec->batch_size;
    if (!f->offsets)
        f->offsets = a->alloc(a->cookie, (bs + 1) * sizeof *f->offsets, 64);
    if (!f->present)
        f->present = a->alloc(a->cookie, bs, 64);
    if (!f->offsets || !f->present)
        return NULL;
    if (!f->name || !same_name(f->name, name, len)) {
        char *copy = malloc(len + 1);
        if (!copy)
            return NULL;
        memcpy(copy, name, len);
        copy[len] = 0;
        free(f->name);
        f->name = copy;
    }
    field_reset(f);
    sl->nraw++;
    return f;
}

/* Samples up to n without the field: empty and marked absent. */
static void field_pad(ShardRawField *f, size_t n)
{
    for (; f->filled < n; f->filled++) {
        f->offsets[f->filled + 1] = f->offsets[f->filled];
        f->present[f->filled] = 0;
    }
}

static int field_append(ShardRawField *f, const ShardAllocator *a, size_t i, const void *data,
                        size_t size)
{
    field_pad(f, i);
    if (shard_alloc_grow(a, &f->data, &f->cap, f->size + size, f->size))
        return SHARD_ERR_NOMEM;
    if (size)
        memcpy(f->data + f->size, data, size);
    f->size += size;
    f->offsets[i + 1] = f->size;
    f->present[i] = 1;
    f->filled = i + 1;
    return 0;
}

/* Copies sample i's raw fields (all but its image and label, or the ones named, the image
 * and label too when named). */
static int take_raw(ShardSlot *sl, const ShardBatchSpec *spec, size_t i, const ShardFieldView *f,
                    size_t nf, const ShardFieldView *image, const ShardFieldView *label)
{
    for (size_t k = 0; k < nf; k++) {
        if (spec->raw_all && (&f[k] == image || &f[k] == label))
            continue;
        if (!spec->raw_all && !names_have(spec->raw_fields, f[k].name))
            continue;
        ShardRawField *r = slot_field(sl, spec, f[k].name, strlen(f[k].name));
        if (!r || field_append(r, shard_default_allocator(), i, f[k].data, (size_t)f[k].size))
            return SHARD_ERR_NOMEM;
    }
    return 0;
}

static int take_key(ShardSlot *sl, const ShardAllocator *a, size_t i, const char *key)
{
    size_t len = strlen(key) + 1;
    if (shard_alloc_grow(a, &sl->keybuf, &sl->keycap, sl->keylen + len, sl->keylen))
        return SHARD_ERR_NOMEM;
    memcpy(sl->keybuf + sl->keylen, key, len);
    sl->keyoff[i] = sl->keylen;
    sl->keylen += len;
    return 0;
}

/* ---- slots ----------------------------------------------------------------------------- */

int shard_slot_init(ShardSlot *sl, const ShardBatchSpec *spec)
{
    memset(sl, 0, sizeof *sl);
    /* The settings' allocator (pinned memory, for one) gives what a device copy reads, the
     * images and labels, once per buffer; keys, indices and raw fields stay on the host and
     * grow with the samples, so they take ordinary memory and never a driver call. */
    const ShardAllocator *a = spec->alloc, *h = shard_default_allocator();
    size_t bs = spec->batch_size;
    sl->images = a->alloc(a->cookie, bs * spec->image_bytes, 64);
    sl->labels = a->alloc(a->cookie, bs * sizeof *sl->labels, 64);
    sl->indices = h->alloc(h->cookie, bs * sizeof *sl->indices, 64);
    sl->seeds = h->alloc(h->cookie, bs * sizeof *sl->seeds, 64);
    sl->repeats = h->alloc(h->cookie, bs, 64);
    sl->keys = h->alloc(h->cookie, bs * sizeof *sl->keys, 64);
    sl->urls = calloc(bs, sizeof *sl->urls);
    sl->sources = calloc(bs, sizeof *sl->sources);
    sl->items = calloc(bs, sizeof *sl->items);
    sl->img = calloc(bs, sizeof *sl->img);
    sl->img_size = calloc(bs, sizeof *sl->img_size);
    sl->failed = calloc(bs, 1);
    sl->errors = calloc(bs, sizeof *sl->errors);
    sl->keyoff = calloc(bs, sizeof *sl->keyoff);
    sl->gpu = calloc(bs, 1);
    sl->gpuoff = calloc(bs, sizeof *sl->gpuoff);
    sl->gpusize = calloc(bs, sizeof *sl->gpusize);
    sl->gpu_index = calloc(bs, sizeof *sl->gpu_index);
    sl->gpu_data = calloc(bs, sizeof *sl->gpu_data);
    sl->gpu_sizes = calloc(bs, sizeof *sl->gpu_sizes);
    sl->why = calloc(bs, 1);
    if (!sl->why || !sl->gpu_sizes || !sl->gpu || !sl->gpuoff || !sl->gpusize || !sl->gpu_index || !sl->gpu_data)
        return SHARD_ERR_NOMEM;
    if (!sl->images || !sl->labels || !sl->indices || !sl->seeds || !sl->repeats || !sl->keys || !sl->urls || !sl->sources || !sl->items || !sl->img ||
        !sl->img_size || !sl->failed || !sl->errors || !sl->keyoff)
        return SHARD_ERR_NOMEM;
    memset(sl->keys, 0, bs * sizeof *sl->keys);
    /* the fields named in raw_fields are in every batch, present or not */
    const char *one;
    size_t len;
    for (const char *p = spec->raw_all ? NULL : spec->raw_fields; next_name(&p, &one, &len);)
        if (!slot_field(sl, spec, one, len))
            return SHARD_ERR_NOMEM;
    return 0;
}

void shard_slot_begin(ShardSlot *sl, const ShardBatchSpec *spec, uint64_t seq, uint64_t index,
                      uint64_t epoch)
{
    sl->seq = seq;
    sl->index = index;
    sl->epoch = epoch;
    sl->n = 0;
    sl->end = sl->code = sl->discarded = 0;
    sl->keylen = 0;
    sl->gpulen = 0;
    sl->has_why = 0;
    if (spec->raw_all)
        sl->nraw = 0;
    for (size_t k = 0; k < sl->nraw; k++)
        field_reset(&sl->raw[k]);
}

int shard_slot_add(ShardSlot *sl, const ShardBatchSpec *spec, ShardItem *it, const char *url)
{
    size_t n = sl->n;
    const ShardFieldView *f = it->v.fields;
    size_t nf = it->v.nfields;
    const ShardFieldView *im = find_field(spec->image_fields, f, nf);
    const ShardFieldView *lab = spec->label_field ? find_field(spec->label_field, f, nf) : NULL;
    sl->items[n] = it;
    sl->img[n] = im ? im->data : NULL;
    sl->img_size[n] = im ? (size_t)im->size : 0;
    sl->urls[n] = url;
    sl->sources[n] = spec->sources ? spec->sources[it->shard] : 0;
    sl->labels[n] = spec->label_field ? parse_label(lab) : -1;
    sl->indices[n] = spec->offsets ? spec->offsets[it->shard] + it->v.index : UINT64_MAX;
    sl->repeats[n] = (unsigned char)it->repeat;
    sl->failed[n] = 0;
    sl->gpu[n] = 0;
    if (take_key(sl, shard_default_allocator(), n, it->v.key) ||
        (spec->raw_fields && take_raw(sl, spec, n, f, nf, im, lab))) {
        sl->items[n] = NULL;
        shard_item_release(it);
        return SHARD_ERR_NOMEM;
    }
    sl->n = n + 1;
    sl->end_position = it->position + 1;
    return 0;
}

int shard_slot_defer(ShardSlot *sl, size_t i)
{
    size_t size = sl->img_size[i];
    if (shard_alloc_grow(shard_default_allocator(), &sl->gpubuf, &sl->gpucap,
                         sl->gpulen + size, sl->gpulen))
        return SHARD_ERR_NOMEM;
    memcpy(sl->gpubuf + sl->gpulen, sl->img[i], size);
    sl->gpuoff[i] = sl->gpulen;
    sl->gpusize[i] = size;
    sl->gpulen += size;
    sl->gpu[i] = 1;
    return 0;
}

void shard_slot_seal(ShardSlot *sl)
{
    for (size_t i = 0; i < sl->n; i++)
        sl->keys[i] = sl->keybuf + sl->keyoff[i];
    for (size_t k = 0; k < sl->nraw; k++)
        field_pad(&sl->raw[k], sl->n);
}

int shard_slot_no_label(const ShardSlot *sl, const ShardBatchSpec *spec, size_t i, char *why,
                        size_t n)
{
    if (!spec->label_field || sl->labels[i] >= 0)
        return 0;
    const ShardItem *it = sl->items[i];
    const ShardFieldView *lab = it ? find_field(spec->label_field, it->v.fields, it->v.nfields)
                                   : NULL;
    if (!lab) {
        snprintf(why, n, "no label: no field '%s' (label_field; missing_label=-1 gives -1)",
                 spec->label_field);
    } else {
        char shown[24];
        size_t k = 0;
        for (; k < lab->size && k < sizeof shown - 1; k++) /* printable bytes only */
            shown[k] = lab->data[k] >= 0x20 && lab->data[k] < 0x7f ? (char)lab->data[k] : '?';
        shown[k] = 0;
        snprintf(why, n, "label field '%s' is not a decimal class index: '%s'%s", lab->name,
                 shown, lab->size > k ? "..." : "");
    }
    return 1;
}

void shard_slot_fail(ShardSlot *sl, size_t i, int why, const char *msg)
{
    sl->failed[i] = (unsigned char)why;
    char full[SHARD_ERROR_MAX];
    snprintf(full, sizeof full, "%s: sample '%s': %s", sl->urls[i], sl->keys[i], msg);
    free(sl->errors[i]);
    sl->errors[i] = strdup(full); /* out of memory: "decode failed" */
}

const char *shard_slot_error(const ShardSlot *sl)
{
    for (size_t i = 0; i < sl->n; i++)
        if (sl->failed[i])
            return sl->errors[i];
    return NULL;
}

void shard_slot_forget_errors(ShardSlot *sl)
{
    for (size_t i = 0; sl->errors && i < sl->n; i++) {
        free(sl->errors[i]);
        sl->errors[i] = NULL;
    }
}

void shard_slot_release_items(ShardSlot *sl)
{
    for (size_t i = 0; i < sl->n; i++) {
        shard_item_release(sl->items[i]);
        sl->items[i] = NULL;
    }
}

/* Sample i's bytes of raw field f become sample d's: the field's data laid out again, the
 * samples after i moved. SHARD_ERR_NOMEM leaves the field as it was. */
static int field_take(ShardRawField *f, size_t n, size_t i, size_t d)
{
    uint64_t from = f->offsets[i], to = f->offsets[i + 1];
    uint64_t size = f->offsets[d + 1] - f->offsets[d];
    size_t need = (size_t)(f->size - (to - from) + size);
    if (need > f->size && shard_alloc_grow(shard_default_allocator(), &f->data, &f->cap, need,
                                           f->size))
        return SHARD_ERR_NOMEM;
    /* the tail after sample i to its new place, then d's bytes into i's; d's own bytes are
     * read from where they lie after the move */
    size_t tail = (size_t)(f->size - to);
    uint64_t dfrom = f->offsets[d] + (d > i ? (size - (to - from)) : 0);
    if (tail)
        memmove(f->data + from + size, f->data + to, tail);
    if (size)
        memmove(f->data + from, f->data + dfrom, (size_t)size);
    for (size_t k = i + 1; k <= n; k++)
        f->offsets[k] = f->offsets[k] - to + from + size;
    f->present[i] = f->present[d];
    f->size = need;
    return 0;
}

int shard_slot_fill(ShardSlot *sl, size_t image_bytes, uint64_t *by, size_t *failed)
{
    size_t *good = malloc((sl->n ? sl->n : 1) * sizeof *good), ngood = 0, k = 0;
    if (!good)
        return SHARD_ERR_NOMEM;
    for (size_t i = 0; i < sl->n; i++)
        if (!sl->failed[i])
            good[ngood++] = i;
    *failed = sl->n - ngood;
    int rc = 0;
    for (size_t i = 0; i < sl->n && !rc; i++) {
        if (!sl->failed[i])
            continue;
        by[sl->failed[i]]++;
        sl->failed[i] = 0;
        if (!ngood)
            continue;
        size_t d = good[k++ % ngood]; /* the batch's good samples in turn */
        memcpy((unsigned char *)sl->images + i * image_bytes,
               (unsigned char *)sl->images + d * image_bytes, image_bytes);
        sl->labels[i] = sl->labels[d];
        sl->indices[i] = sl->indices[d];
        sl->seeds[i] = sl->seeds[d];
        sl->repeats[i] = 1;
        sl->gpu[i] = sl->gpu[d];
        sl->why[i] = sl->why[d];
        sl->gpuoff[i] = sl->gpuoff[d];
        sl->gpusize[i] = sl->gpusize[d];
        sl->keys[i] = sl->keys[d];
        sl->urls[i] = sl->urls[d];
        sl->sources[i] = sl->sources[d];
        for (size_t f = 0; f < sl->nraw && !rc; f++)
            rc = field_take(&sl->raw[f], sl->n, i, d);
    }
    if (!ngood)
        sl->n = 0; /* nothing to repeat: the batch goes */
    free(good);
    return rc;
}

void shard_slot_publish(ShardSlot *sl, size_t image_bytes)
{
    ShardBatch *b = &sl->batch;
    b->size = sl->n;
    b->images = sl->images;
    b->image_bytes = image_bytes;
    b->height = sl->height;
    b->width = sl->width;
    b->bucket = sl->bucket;
    b->labels = sl->labels;
    b->indices = sl->indices;
    b->seeds = sl->seeds;
    b->repeats = sl->repeats;
    b->keys = sl->keys;
    b->urls = sl->urls;
    b->sources = sl->sources;
    for (size_t k = 0; k < sl->nraw; k++) {
        ShardRawField *f = &sl->raw[k];
        sl->views[k] = (ShardBatchField){f->name, f->data, f->offsets, f->present};
    }
    b->nfields = sl->nraw;
    b->fields = sl->views;
    b->epoch = sl->epoch;
    b->index = sl->index;
    size_t g = 0;
    for (size_t i = 0; i < sl->n; i++)
        if (sl->gpu[i]) {
            sl->gpu_index[g] = (uint32_t)i;
            sl->gpu_data[g++] = sl->gpubuf + sl->gpuoff[i];
        }
    b->gpu_count = g;
    b->gpu_index = g ? sl->gpu_index : NULL;
    b->gpu_data = g ? sl->gpu_data : NULL;
    for (size_t m = 0; m < g; m++)
        sl->gpu_sizes[m] = sl->gpusize[sl->gpu_index[m]];
    b->gpu_size = g ? sl->gpu_sizes : NULL;
    b->gpu_why = sl->has_why ? sl->why : NULL;
}

void shard_slot_clear(ShardSlot *sl)
{
    shard_slot_release_items(sl);
    for (size_t i = 0; i < sl->n; i++)
        sl->keys[i] = NULL;
    shard_slot_forget_errors(sl);
    sl->n = 0;
    sl->message[0] = 0;
    shard_order_put(sl->order);
    sl->order = NULL;
}

void shard_slot_free(ShardSlot *sl, const ShardBatchSpec *spec)
{
    const ShardAllocator *a = spec->alloc, *h = shard_default_allocator();
    size_t bs = spec->batch_size;
    if (sl->items)
        shard_slot_clear(sl);
    shard_order_put(sl->order);
    sl->order = NULL;
    a->free(a->cookie, sl->images, bs * spec->image_bytes);
    a->free(a->cookie, sl->labels, bs * sizeof *sl->labels);
    h->free(h->cookie, sl->indices, bs * sizeof *sl->indices);
    h->free(h->cookie, sl->seeds, bs * sizeof *sl->seeds);
    h->free(h->cookie, sl->repeats, bs);
    h->free(h->cookie, sl->keys, bs * sizeof *sl->keys);
    h->free(h->cookie, sl->keybuf, sl->keycap);
    free(sl->urls);
    free(sl->sources);
    free(sl->items);
    free(sl->img);
    free(sl->img_size);
    free(sl->failed);
    free(sl->errors);
    free(sl->keyoff);
    free(sl->gpu);
    free(sl->gpuoff);
    free(sl->gpusize);
    free(sl->gpu_index);
    free(sl->gpu_data);
    free(sl->gpu_sizes);
    free(sl->why);
    h->free(h->cookie, sl->gpubuf, sl->gpucap);
    for (size_t k = 0; k < sl->rawcap; k++) {
        free(sl->raw[k].name);
        h->free(h->cookie, sl->raw[k].data, sl->raw[k].cap);
        h->free(h->cookie, sl->raw[k].offsets, (bs + 1) * sizeof *sl->raw[k].offsets);
        h->free(h->cookie, sl->raw[k].present, bs);
    }
    free(sl->raw);
    free(sl->views);
    memset(sl, 0, sizeof *sl);
}
