/*
 * libshard — samples as the library hands them out: borrowed views (ShardSampleView, valid
 * until the next call on whatever produced them) and owned samples (ShardItem, valid until
 * released). A ShardItem is what travels between the library's stages (fetch, shuffle
 * buffer, decode pool): its bytes are either its own copy or a view into storage it holds
 * a reference on (a mapped local shard), released once, when its holder frees it.
 */
#ifndef SHARD_SAMPLE_H
#define SHARD_SAMPLE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One field of a sample, as read. Borrowed from whatever produced it (see there). */
typedef struct ShardFieldView {
    const char *name;          /**< field ("jpg", "seg.png"), lower-cased by default */
    const char *member;        /**< the member's full path in the tar, as stored */
    const unsigned char *data; /**< the member's bytes */
    uint64_t size;             /**< number of bytes */
    uint64_t offset;           /**< offset of the data in the uncompressed tar */
} ShardFieldView;

/** A sample as read. Borrowed from whatever produced it (see there). */
typedef struct ShardSampleView {
    const char *key;              /**< WebDataset key, without a leading "./" */
    const char *url;              /**< the shard, as opened */
    uint64_t index;               /**< position of the sample in the shard, from 0 */
    uint64_t offset;              /**< tar offset of its first member's header */
    const ShardFieldView *fields; /**< nfields fields in tar order */
    size_t nfields;
} ShardSampleView;

/** A sample that owns its bytes (or a reference on the storage they lie in): handed over
 *  by shard_file_take and shard_reader_take, released with shard_item_free. It may be
 *  passed to and freed on another thread. */
typedef struct ShardItem ShardItem;

/** @return the item's sample: key, url, fields; borrowed, valid until the item is freed */
SHARD_API const ShardSampleView *shard_item_sample(const ShardItem *it);

/** Releases an item and sets *it to NULL; accepts NULL. */
SHARD_API void shard_item_free(ShardItem **it);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_SAMPLE_H */
