/*
 * CRC-32C (Castagnoli), the checksum Google Cloud Storage keeps for every object and checks an
 * upload against (crc32c.c).
 */
#ifndef SHARD_BASE_CRC32C_H
#define SHARD_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"

/* The CRC-32C of the bytes before (crc, 0 to begin) followed by p[0..n). */
SHARD_HIDDEN uint32_t shard_crc32c(uint32_t crc, const void *p, size_t n);

/* The base64 of crc's four bytes, big-endian, as GCS writes it ("crc32c=..."), into out
 * (9 bytes). */
SHARD_HIDDEN void shard_crc32c_base64(uint32_t crc, char out[9]);

#endif /* SHARD_BASE_CRC32C_H */
