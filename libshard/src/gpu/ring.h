/*
 * The uploader's ring of device buffers (ring.c): each buffer's memory and events, an upload
 * queued on the copy stream (the waits for the consumer's releases, the copies, the finish
 * kernel, the ready event), the buffers' states, and host batches given back to the loader.
 */
#ifndef SHARD_GPU_RING_H
#define SHARD_GPU_RING_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "gpu/uploaderdef.h"
#include "shard/loader.h"

/* Frees the ring and the uploader (the last reference gone, or a failed open). */
SHARD_HIDDEN void shard_ring_destroy(ShardUploader *u);
/* Drops a reference on u (the owner's, or a held buffer's); the last destroys it. */
SHARD_HIDDEN void shard_ring_unref(ShardUploader *u);
/* Drops a reference on sl's host batch (the copy's, or the consumer's); the last gives it
 * back to the loader. */
SHARD_HIDDEN void shard_ring_host_unref(Slot *sl);
/* The consumer is done with sl's host batch (its keys and fields). */
SHARD_HIDDEN void shard_ring_host_done(Slot *sl);
/* Slot sl's device memory and events; the context is current. 0 or an error with msg. */
SHARD_HIDDEN int shard_ring_slot_init(ShardUploader *u, Slot *sl, char *msg);
/* 0 when a host batch of n images of image_bytes each fits a ring of settings s (uint8
 * NHWC, 1 to batch_size images); else SHARD_ERR_INVALID with msg naming both. */
SHARD_HIDDEN int shard_ring_fits(const ShardUploadSettings *s, size_t n, size_t image_bytes,
                                 char *msg);
/* The state the consumer gets with the slot's batch (copied; out of memory: none). */
SHARD_HIDDEN void shard_ring_set_state(Slot *sl, const char *state);
/* The finish kernel for the settings' dtype (built in with the toolkit). */
SHARD_HIDDEN int shard_ring_load_finish(ShardUploader *u, char *msg);
/* Adds a finished upload's GPU times to the counters, if its events have completed; under
 * the mutex, the context current. Slots being filled are left to their filler. */
SHARD_HIDDEN void shard_ring_account(ShardUploader *u, Slot *sl);
/* Queues slot sl's upload of n images (and labels; NULL: -1 each) on the copy stream, host
 * (NULL: none) going back to the loader once copied, or at once if the upload fails; the
 * context is current. */
SHARD_HIDDEN int shard_ring_upload(ShardUploader *u, Slot *sl, const void *images,
                                   const int64_t *labels, size_t n, const ShardBatch *host,
                                   char *msg);
/* A free buffer, round robin, or NULL; under the mutex. */
SHARD_HIDDEN Slot *shard_ring_take(ShardUploader *u);
/* A buffer free again; under the mutex. */
SHARD_HIDDEN void shard_ring_give_back(ShardUploader *u, Slot *sl);
/* A buffer uploaded: into the ready queue, for the consumer. */
SHARD_HIDDEN void shard_ring_push_ready(ShardUploader *u, Slot *sl);
/* Every buffer uploaded and not taken, free again, its host batch given back; under the
 * mutex, with no filler running. */
SHARD_HIDDEN void shard_ring_drop_ready(ShardUploader *u);

#endif /* SHARD_GPU_RING_H */
