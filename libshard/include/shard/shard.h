/*
 * libshard — WebDataset-style sharded datasets: pack, inspect and stream.
 *
 * Include this header for the whole public API, or the headers of the parts you use: each
 * is self-contained and includes only what it uses.
 *
 * Stable: what a C program reads shards and batches with.
 *   common.h    error codes and reports, the allocator hook, the unknown count
 *   remote.h    remote shards: HTTP(S), GCS, S3, retries, the local cache
 *   sample.h    samples handed out: borrowed views and owned items
 *   file.h      reading one shard: samples in order or by index
 *   list.h      shard lists: brace patterns, folders, prefixes, manifests, with counts
 *   reader.h    the streaming reader: epochs, shuffling, rank/worker split, resume, mixing
 *   decode.h    decoding images into training tensors (crop, resize, flip, normalize)
 *   loader.h    batches: the reader, a decode pool and a ring of batch buffers
 *   stream.h    the raw bytes of any URL libshard reads, in order
 *
 * Advanced: writing, planning, checking, the GPU.
 *   names.h     keys and fields of WebDataset members
 *   image.h     image identification and the pack-time check
 *   writer.h    the shard writer (tar and tar.zst, index, rotation) and what it wrote
 *   manifest.h  dataset manifests (wids shard-index form)
 *   pack.h      the pack plan: files to samples to numbered shards, reproducibly
 *   verify.h    checking shards; indexing shards made elsewhere
 *   plan.h      epoch plans: shard shuffle and the split between ranks and workers
 *   gpu.h       batches on the GPU: pinned buffers, the upload, DLPack
 *   version.h   the version this header set belongs to
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
#include "stream.h"
#include "verify.h"
#include "writer.h"

#endif /* SHARD_SHARD_H */
