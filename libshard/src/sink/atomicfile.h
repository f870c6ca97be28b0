/*
 * Files that appear complete or not at all (atomicfile.c): written under a hidden temporary
 * name in their final folder and renamed into place by commit, so readers never see one
 * incomplete. Writes are buffered; MD5 and SHA-256 of the bytes are computed on the way when
 * asked, each on a hasher thread of its own (sink/hasher.h) that hashes one buffer while the
 * caller fills the other.
 */
#ifndef SHARD_SINK_ATOMICFILE_H
#define SHARD_SINK_ATOMICFILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "sink/hasher.h"

typedef struct ShardAtomicFile {
    int fd;
    int sync;
    char *final_path;
    char *tmp_path;
    unsigned char *buf;   /* being filled */
    unsigned char *spare; /* being hashed (with checksums), else NULL */
    size_t len, cap;
    uint64_t written;
    uint64_t writeback;  /* bytes before this were handed to the kernel's writeback */
    ShardHasher *md5;    /* NULL unless asked for */
    ShardHasher *sha256; /* NULL unless asked for */
} ShardAtomicFile;

/* md5, sha256: compute that digest of the bytes; err: SHARD_ERROR_MAX bytes. */
SHARD_HIDDEN int shard_afile_open(ShardAtomicFile *f, const char *final_path, int sync, int md5,
                                  int sha256, char *err);
SHARD_HIDDEN int shard_afile_write(ShardAtomicFile *f, const void *p, size_t n, char *err);
/* Flushes, fsyncs (when sync), renames into place and fsyncs the folder. Hex digests
 * go to md5/sha256 (33 and 65 bytes), "" for one not asked for; either may be NULL. */
SHARD_HIDDEN int shard_afile_commit(ShardAtomicFile *f, char *md5, char *sha256, char *err);
/* Closes and removes the temporary file; safe to call on a committed or zeroed file. */
SHARD_HIDDEN void shard_afile_abort(ShardAtomicFile *f);

#endif /* SHARD_SINK_ATOMICFILE_H */
