/*
 * The sample convention (convention.c): what an input becomes in a shard, the image byte for
 * byte (or re-encoded), KEY.cls and KEY.json (formats/shard.md 1.5).
 */
#ifndef SHARD_PACK_CONVENTION_H
#define SHARD_PACK_CONVENTION_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "pack/packplandef.h"
#include "pack/shrink.h"
#include "shard/writer.h"

/* The sample's .json: its extra fields, path, label and class (and, resized, the
 * original's size); malloc'd, NULL when out of memory. */
SHARD_HIDDEN char *shard_pack_sample_json(const Input *x, const ShardShrunk *shrunk);
/* The fields of input x into f (three at most): image, cls (when labelled, its text in cls,
 * 24 bytes) and json; returns how many. */
SHARD_HIDDEN size_t shard_pack_sample_fields(const Input *x, ShardField *f, const void *image,
                                             size_t image_size, char *cls, const char *json);
/* The bytes input x takes in a shard, as the writer's rule counts them. */
SHARD_HIDDEN uint64_t shard_pack_sample_size(const Input *x);

#endif /* SHARD_PACK_CONVENTION_H */
