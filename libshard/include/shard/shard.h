/*
 * libshard — WebDataset-style sharded datasets: pack, inspect and stream.
 *
 * Include this header for the whole public API. Tiers:
 *   common.h    error codes, error reports, the allocator hook, version
 *   names.h     keys and fields of WebDataset members
 *   writer.h    the shard writer (tar and tar.zst, index, rotation)
 *   pack.h      the pack plan: files to samples to numbered shards, reproducibly
 *   manifest.h  dataset manifests (wids shard-index form)
 *   image.h     image identification and checks
 *   decode.h    decoding images into training tensors (crop, resize, flip, normalize)
 *   sample.h    samples handed out: borrowed views and owned items
 *   file.h      reading one shard: samples in order or by index
 *   list.h      shard lists: brace patterns, manifests, urls, with what is known of each
 *   verify.h    checking shards; indexing shards made elsewhere
 *   plan.h      epoch plans: shard shuffle and the split between ranks and workers
 *   reader.h    the streaming reader: epoch plans, shuffling, rank/worker split, resume
 *   loader.h    batches: the reader, a decode pool and a ring of batch buffers
 */
#ifndef SHARD_SHARD_H
#define SHARD_SHARD_H

#include "common.h"
#include "decode.h"
#include "file.h"
#include "gpu.h"
#include "image.h"
#include "list.h"
#include "loader.h"
#include "manifest.h"
#include "names.h"
#include "pack.h"
#include "plan.h"
#include "reader.h"
#include "remote.h"
#include "sample.h"
#include "shard/version.h"
#include "verify.h"
#include "writer.h"

#endif /* SHARD_SHARD_H */
