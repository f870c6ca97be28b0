/*
 * What a store can do, whatever holds its bytes (store.h's shard_store_can; each store's row
 * says it: storedef.h).
 */
#ifndef SHARD_REMOTE_STORECAN_H
#define SHARD_REMOTE_STORECAN_H

/* What a store can do, whatever holds its bytes (shard_store_can). */
#define SHARD_STORE_WRITE 0x01u   /* put, remove, rename into place: a folder, gs://, s3:// */
#define SHARD_STORE_LIST 0x02u    /* the objects under a folder or a prefix listed */
#define SHARD_STORE_BESIDE 0x04u  /* objects beside one can be named and opened (an index
                                     beside its shard); each has a version: not a command */
#define SHARD_STORE_COSTLY 0x08u  /* each open waits on the network: reading ahead, or several
                                     at once, pays for itself */
#define SHARD_STORE_PREFIX 0x10u  /* the URL may name a listing rather than an object: a
                                     bucket's prefix (gs://B/P/), or a local path (a folder
                                     is told from a file when listed) */
#define SHARD_STORE_PRIVATE 0x20u /* the machine's own (its files, its commands): what a
                                     manifest from elsewhere reaches only when allowed */
/* How the bytes travel: asked by the switches alone (source/open.c, sink/sink.c). */
#define SHARD_STORE_FILES 0x100u   /* a kernel path: read and written as files */
#define SHARD_STORE_COMMAND 0x200u /* a command's standard output */

#endif /* SHARD_REMOTE_STORECAN_H */
