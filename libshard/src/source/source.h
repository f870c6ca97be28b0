/*
 * Sources: where a shard's bytes come from. Everything that reads a shard, an index or a
 * manifest reads through this interface, so a new kind of storage (HTTP, GCS, S3) plugs in
 * here as one more implementation, without touching the tar, index or manifest code.
 *
 * A source is a byte stream with, where the storage allows it, random access and a mapping
 * of the whole object:
 *   read     the next block of the stream, as a pointer the source owns (valid until the
 *            next read or skip): what libarchive's read callback wants, and no copy where
 *            the source already holds the bytes (a mapping, a memory buffer)
 *   skip     moves the stream ahead without handing the bytes out
 *   read_at  copies bytes at an offset, for the index, the zstd seek table and its frames
 *   map      the whole object in memory, when it is (a mapped local file, a memory buffer)
 *   hold     keeps a block of bytes the source handed out valid after the source moves on
 *            (a reference), so a sample can view them instead of copying
 *   finish   the stream was read to its end: reports a failure only visible then (the exit
 *            status of a pipe's command)
 * Errors go into the source's message buffer and name the URL, with the offset where there
 * is one.
 *
 * Implementations: local files (filesource.c: mapped when they can be), "pipe:COMMAND" (pipe.c),
 * remote objects over HTTP, GCS and S3 (remotesource.c, with their local cache, cache.c) and
 * memory buffers (memory.c: for tests and fuzz targets); open.h opens the one a URL names,
 * and what sits beside a source (its index) through the same ShardRemote. A source is
 * reference-counted: samples that view its bytes keep it (and its mapping) alive after the
 * reader that opened it is done. One thread reads a source at a time; taking and dropping
 * references is thread-safe.
 */
#ifndef SHARD_SOURCE_SOURCE_H
#define SHARD_SOURCE_SOURCE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/attr.h"
#include "base/buf.h"
#include "shard/remote.h"

/* A reference-counted keeper of bytes: a sample that views bytes it does not own holds
 * one, and the bytes stay valid until the last holder lets go. */
typedef struct ShardHold {
    atomic_int refs;
    void (*release)(struct ShardHold *h); /* called once, when refs reaches 0 */
} ShardHold;

static inline ShardHold *shard_hold_ref(ShardHold *h)
{
    if (h)
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    return h;
}

static inline void shard_hold_put(ShardHold *h)
{
    if (h && atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
        h->release(h);
}

/* Whether h is held by its creator alone. */
static inline int shard_hold_alone(ShardHold *h)
{
    return atomic_load_explicit(&h->refs, memory_order_acquire) == 1;
}

typedef struct ShardSource ShardSource;

/* What an implementation does for a source it has not mapped: with s->map set, source.c
 * reads, skips, reads at offsets and holds bytes from the mapping itself, and the
 * implementation's read, skip, read_at and hold are never called. */
typedef struct ShardSourceOps {
    const char *kind; /* "file", "pipe", "memory" */
    /* The next block: *block points at n > 0 bytes owned by the source; 0 at the end;
     * a negative code on failure (message in s->err). */
    ssize_t (*read)(ShardSource *s, const void **block);
    /* Skips up to n bytes of the stream; returns the bytes skipped (0: cannot skip, read
     * instead), or a negative code. NULL: cannot skip. */
    int64_t (*skip)(ShardSource *s, int64_t n);
    /* Copies n bytes at offset off into buf (a range within size): 0, or a negative code.
     * NULL: no random access. */
    int (*read_at)(ShardSource *s, uint64_t off, void *buf, size_t n);
    /* A hold that keeps the n bytes at p (handed out by read) valid, with a reference
     * taken for the caller; NULL when it cannot (the caller copies them). NULL: never. */
    ShardHold *(*hold)(ShardSource *s, const void *p, uint64_t n);
    /* Called once the stream was read to its end; 0 or a negative code. NULL: nothing. */
    int (*finish)(ShardSource *s);
    /* Starts fetching the stream's first bytes without waiting for them. NULL: nothing to
     * gain (the bytes are local). */
    void (*prefetch)(ShardSource *s);
    /* Learns the object's size (into s->size) when it is not known yet: 0 or a negative
     * code. NULL: the size is known at open or never (a pipe). */
    int (*stat)(ShardSource *s);
    /* Frees what the implementation allocated (not the ShardSource itself). */
    void (*close)(ShardSource *s);
} ShardSourceOps;

/* What reading a source cost its reading thread, for the fetch stage's statistics: source.c
 * times its reads (a wait on the disk or network included), the decompressors reading
 * through it (tar/tar.c, tar/seek.c) their frames. */
typedef struct ShardReadCost {
    double read_seconds, unpack_seconds;
    uint64_t read_bytes, unpack_bytes; /* in from the source; out of the decompressor */
} ShardReadCost;

struct ShardSource {
    ShardHold hold;           /* the source's own reference count */
    const ShardSourceOps *ops;
    char *url;                /* as opened */
    int64_t size;             /* bytes of the object, -1 when unknown (a pipe) */
    const unsigned char *map; /* the whole object in memory, or NULL */
    int costly;               /* each random access is a request (a remote object): what
                                 only seeking needs (an index) is loaded when first needed */
    uint64_t pos;             /* bytes of the stream handed out or skipped so far */
    ShardRemote *remote;      /* the ShardRemote it was opened through (a reference), or NULL:
                                 what sits beside it (its index) opens through the same */
    ShardReadCost cost;       /* by the thread reading it */
    char version[256];        /* which version of the object this is (a local file's mtime
                                 and inode; a remote's generation, ETag or Last-Modified,
                                 known after its first response or stat), "" when unknown */
    char err[SHARD_ERROR_MAX];
    void *impl;               /* the implementation's state */
};

/* Flags for opening a source (open.h). */
enum {
    SHARD_SOURCE_SEQUENTIAL = 1, /* the object is read once from start to end (a hint) */
    SHARD_SOURCE_SHARD = 2,      /* a shard (not an index or manifest): may be cached */
    SHARD_SOURCE_MAP = 4,        /* a local file may be mapped (zero-copy views; a truncation
                                    while mapped is then a SIGBUS) */
    SHARD_SOURCE_SPARSE = 8,     /* most of the stream is skipped (a listing of headers): a
                                    local file is read in small blocks between seeks */
};

/* Allocates a source with one reference for an implementation (impl, ops); NULL when out
 * of memory. Implementations fill size, map and impl. */
SHARD_HIDDEN ShardSource *shard_source_new(const ShardSourceOps *ops, const char *url);

static inline ShardSource *shard_source_ref(ShardSource *s)
{
    shard_hold_ref(s ? &s->hold : NULL);
    return s;
}

/* Drops a reference; the last one closes the source. Accepts NULL. */
static inline void shard_source_put(ShardSource *s)
{
    if (s)
        shard_hold_put(&s->hold);
}

/* The stream's next block (see ShardSourceOps.read); advances s->pos. */
SHARD_HIDDEN ssize_t shard_source_read(ShardSource *s, const void **block);

/* Skips n bytes (see ShardSourceOps.skip); 0 when the source cannot. */
SHARD_HIDDEN int64_t shard_source_skip(ShardSource *s, int64_t n);

/* Copies n bytes at off into buf; SHARD_ERR_UNSUPPORTED without random access,
 * SHARD_ERR_FORMAT (message naming the URL and range) for a range past the end. */
SHARD_HIDDEN int shard_source_read_at(ShardSource *s, uint64_t off, void *buf, size_t n);

/* The n bytes at off: a pointer into the mapping when there is one, else read into *tmp
 * (grown as needed, owned by the caller) and a pointer to it. NULL on failure. */
SHARD_HIDDEN const unsigned char *shard_source_view(ShardSource *s, uint64_t off, size_t n,
                                                    ShardBuf *tmp);

/* A hold keeping the n bytes at p valid (see ShardSourceOps.hold), or NULL. */
SHARD_HIDDEN ShardHold *shard_source_hold(ShardSource *s, const void *p, uint64_t n);

/* The object's size, learnt with a request where it is not known yet; -1 when it cannot
 * be known (a pipe) or the request failed (message in s->err). */
SHARD_HIDDEN int64_t shard_source_size(ShardSource *s);

/* A hint that the stream will be read from its start soon (see ShardSourceOps.prefetch). */
static inline void shard_source_prefetch(ShardSource *s)
{
    if (s->ops->prefetch)
        s->ops->prefetch(s);
}

/* The stream was read to its end (see ShardSourceOps.finish). */
SHARD_HIDDEN int shard_source_finish(ShardSource *s);

/* Whether the source has random access (a mapping, or read_at). */
static inline int shard_source_seekable(const ShardSource *s)
{
    return s->map || s->ops->read_at != NULL;
}

#endif /* SHARD_SOURCE_SOURCE_H */
