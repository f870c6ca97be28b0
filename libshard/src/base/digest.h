/*
 * Digests of bytes given block by block (OpenSSL's EVP), as hex text: MD5 and SHA-256.
 */
#ifndef SHARD_BASE_DIGEST_H
#define SHARD_BASE_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"

/* MD5 and/or SHA-256 of a whole object, updated block by block. */
typedef struct ShardDigests {
    void *md5, *sha256; /* EVP_MD_CTX, NULL when not asked for */
    uint64_t total;
} ShardDigests;

/* Starts the digests asked for. 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_digests_init(ShardDigests *d, int md5, int sha256);
SHARD_HIDDEN void shard_digests_update(ShardDigests *d, const void *p, size_t n);
/* Hex digests into md5 (33 bytes) and sha256 (65 bytes), "" for one not asked for; frees
 * d's state. */
SHARD_HIDDEN void shard_digests_final(ShardDigests *d, char *md5, char *sha256);

/* Ends the digest ctx (an EVP_MD_CTX) into out as hex (NULL: dropped); 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_digest_hex(void *ctx, char *out);

/* The base64 of the MD5 of p[0..n), as Content-MD5 and GCS's md5= give it, into out (25
 * bytes). 0 or SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_md5_base64(const void *p, size_t n, char out[25]);

#endif /* SHARD_BASE_DIGEST_H */
