/*
 * A sink's insides, shared by sink.c and its implementations (filesink.c, objectsink.c): what
 * sink.c hands an implementation is whole buffers, in order, then commit or drop.
 */
#ifndef SHARD_SINK_SINKDEF_H
#define SHARD_SINK_SINKDEF_H

#include <stddef.h>
#include <stdint.h>

#include "sink/hasher.h"

typedef struct ShardSink ShardSink; /* sink.h names it too: C11 allows the repeat */

typedef struct ShardSinkOps {
    /* n bytes at p, the next of the object; 0 or an error naming the URL */
    int (*put)(ShardSink *k, const unsigned char *p, size_t n, char *err);
    /* every byte put: make the object appear */
    int (*commit)(ShardSink *k, char *err);
    /* leave nothing behind; after commit too (then it only frees) */
    void (*drop)(ShardSink *k);
} ShardSinkOps;

struct ShardSink {
    const ShardSinkOps *ops;
    void *impl;
    char *url;
    unsigned char *buf;   /* being filled */
    unsigned char *spare; /* being hashed (with digests), else NULL */
    size_t len, cap;
    uint64_t put;        /* bytes handed to the implementation */
    ShardHasher *md5;    /* NULL unless asked for */
    ShardHasher *sha256; /* NULL unless asked for */
};

#endif /* SHARD_SINK_SINKDEF_H */
