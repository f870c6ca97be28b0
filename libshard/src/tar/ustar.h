/*
 * One 512-byte tar header block, read by hand where libarchive's stream reader does not
 * apply: an index's offsets are checked against the headers they point after.
 */
#ifndef SHARD_TAR_USTAR_H
#define SHARD_TAR_USTAR_H

#include <stdint.h>

#include "base/attr.h"

typedef struct ShardUstar {
    char name[257]; /* prefix "/" name, as stored */
    uint64_t size;  /* UINT64_MAX when the field does not parse */
    char type;      /* the typeflag ('0' for a NUL one) */
} ShardUstar;

/* 0: h is a header (its checksum holds), parsed into *out; 1: a block of zeros (the end of
 * the archive); -1: neither. */
SHARD_HIDDEN int shard_ustar_parse(const unsigned char h[512], ShardUstar *out);

/* Whether a header as parsed can be the one for member name of size bytes: a regular file
 * of that size, named so (a name ustar's fields cannot hold came in an extended header,
 * and is not compared). */
SHARD_HIDDEN int shard_ustar_is(const ShardUstar *u, const char *name, uint64_t size);

#endif /* SHARD_TAR_USTAR_H */
