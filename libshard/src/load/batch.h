/*
 * Batch assembly: a batch slot (one of the ring's batch buffers) and what goes into it per
 * sample: the image's bytes to decode (which field), the label (the decimal .cls), the key,
 * the url, and the raw fields carried as they are (back to back, with offsets). Decoders
 * write each image straight into its place in the slot's image buffer; nothing here is
 * copied per sample but keys and raw fields. Every buffer a batch hands out comes from the
 * loader's allocator.
 */
#ifndef SHARD_LOAD_BATCH_H
#define SHARD_LOAD_BATCH_H

#include <stdatomic.h>

#include "base/attr.h"
#include "shard/loader.h"
#include "tar/item.h"

/* What every slot is made for: the loader's settings, resolved once. */
typedef struct ShardBatchSpec {
    size_t batch_size;
    size_t image_bytes;
    const char *image_fields; /* ';'-separated, tried in order */
    const char *label_field;  /* NULL: no labels */
    const char *raw_fields;   /* ';'-separated; NULL: none */
    int raw_all;              /* raw_fields is "*": every field but the image and label */
    int missing_label;        /* SHARD_LABEL_*: a sample without a label fails, or gets -1 */
    const uint64_t *offsets;  /* per shard of the list: samples in the shards before it;
                                 NULL when counts are unknown */
    const uint32_t *sources;  /* per shard of the list: its source in a mix; NULL: all 0 */
    const ShardAllocator *alloc;
} ShardBatchSpec;

/* A raw field's bytes for one batch; its buffers are kept from batch to batch. */
typedef struct ShardRawField {
    char *name;
    unsigned char *data;
    size_t size, cap;
    uint64_t *offsets;      /* batch_size + 1 */
    unsigned char *present; /* batch_size */
    size_t filled;          /* samples accounted for */
} ShardRawField;

typedef struct ShardSlot {
    ShardBatch batch;      /* first: the caller gets &slot->batch */
    uint64_t seq;          /* fill order */
    uint64_t index;        /* batch number in its epoch */
    uint64_t epoch;
    int end;               /* the epoch ended here: no samples */
    int code;              /* with end: the error that ended it, 0 for none */
    int discarded;         /* dealt while the producer was stopping: dropped */
    size_t n;              /* samples */
    int height, width;     /* its images' size (an aspect bucket's, or the transform's) */
    int bucket;            /* its aspect bucket, -1: none */
    size_t sample_bytes;   /* bytes of each of its images */
    atomic_size_t pending; /* samples not decoded yet */
    void *images;
    int64_t *labels;
    uint64_t *indices;
    uint64_t *seeds;       /* each sample's seed for its random choices (crop, flip) */
    unsigned char *repeats;
    const char **keys;
    const char **urls;
    uint32_t *sources;
    ShardItem **items;          /* the reader's samples, released once decoded */
    const unsigned char **img;  /* each sample's image bytes, in its item */
    size_t *img_size;
    unsigned char *failed;
    unsigned char *gpu;          /* 1: left for the GPU to decode (load/defer.h) */
    unsigned char *gpubuf;       /* their JPEG bytes, copied back to back (grow-only) */
    size_t gpulen, gpucap;
    size_t *gpuoff, *gpusize;    /* each sample's, in gpubuf */
    uint32_t *gpu_index;         /* published: the GPU's samples, in order */
    const unsigned char **gpu_data;
    size_t *gpu_sizes;
    unsigned char *why;          /* the taker's word per sample (load/defer.h) */
    int has_why;                 /* a taker was asked for this batch */
    char **errors;               /* each failed sample's message, NULL for none: written
                                    by its decode thread only */
    uint64_t end_position;       /* the reader's position after this batch */
    struct ShardOrder *order;    /* the epoch's order it was read in (a reference), for states */
    char *keybuf;                /* the keys, NUL-terminated, back to back (grow-only) */
    size_t keylen, keycap;
    size_t *keyoff;
    ShardRawField *raw;          /* raw fields: nraw in use, rawcap kept for reuse */
    size_t nraw, rawcap;
    ShardBatchField *views;
    char message[SHARD_ERROR_MAX]; /* with code: what ended the epoch */
} ShardSlot;

/* Leaves sample i for the GPU: its image bytes copied into the slot (the reader's go
 * before the batch is out). @return 0 or SHARD_ERR_NOMEM */
SHARD_HIDDEN int shard_slot_defer(ShardSlot *sl, size_t i);

/* Allocates a slot's buffers; the fields named in raw_fields are in every batch. */
SHARD_HIDDEN int shard_slot_init(ShardSlot *sl, const ShardBatchSpec *spec);
/* A new batch: no samples, no keys, the named raw fields empty. */
SHARD_HIDDEN void shard_slot_begin(ShardSlot *sl, const ShardBatchSpec *spec, uint64_t seq,
                                  uint64_t index, uint64_t epoch);
/* Adds the reader's sample it (the slot owns it from here, also on failure) as sample n:
 * its image bytes, label, key, url and raw fields. SHARD_ERR_NOMEM for keys or raw fields. */
SHARD_HIDDEN int shard_slot_add(ShardSlot *sl, const ShardBatchSpec *spec, ShardItem *it,
                                const char *url);
/* The batch's samples are in: key pointers final, raw fields padded. */
SHARD_HIDDEN void shard_slot_seal(ShardSlot *sl);
/* Why sample i of a sealed slot has no label (its field missing or not a class index),
 * written to why; 0 when it has one or the spec asks for none. */
SHARD_HIDDEN int shard_slot_no_label(const ShardSlot *sl, const ShardBatchSpec *spec, size_t i,
                                     char *why, size_t n);
/* Records that sample i failed (why: a ShardBadSample), with msg naming it (called by the
 * thread that decodes sample i). */
SHARD_HIDDEN void shard_slot_fail(ShardSlot *sl, size_t i, int why, const char *msg);
/* The message of the failed sample first in the batch (whichever thread failed first), or
 * NULL; once every sample is decoded. */
SHARD_HIDDEN const char *shard_slot_error(const ShardSlot *sl);
/* Frees the failed samples' messages. */
SHARD_HIDDEN void shard_slot_forget_errors(ShardSlot *sl);
/* Releases the reader's samples (their bytes were decoded or copied). */
SHARD_HIDDEN void shard_slot_release_items(ShardSlot *sl);
/* Fills each failed sample's place with a repeat of one that decoded (the batch's good
 * samples in turn: its image, label, key, index, raw fields), marked in repeats, so the
 * batch keeps its size and order; with none that decoded, the batch is emptied (n 0).
 * *failed receives how many failed, added by reason to by[why]. 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_slot_fill(ShardSlot *sl, size_t image_bytes, uint64_t *by,
                                 size_t *failed);
/* Fills sl->batch for the caller. */
SHARD_HIDDEN void shard_slot_publish(ShardSlot *sl, size_t image_bytes);
/* Forgets the batch's samples (items released, message cleared): the slot is free. */
SHARD_HIDDEN void shard_slot_clear(ShardSlot *sl);
SHARD_HIDDEN void shard_slot_free(ShardSlot *sl, const ShardBatchSpec *spec);

#endif /* SHARD_LOAD_BATCH_H */
