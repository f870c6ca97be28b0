/*
 * Digests (base/digest.h).
 */
#include <openssl/evp.h>

#include "base/digest.h"
#include "shard/common.h"

static void hex(const unsigned char *d, unsigned n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[2 * n] = 0;
}

int shard_digest_hex(void *ctx, char *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (!EVP_DigestFinal_ex(ctx, md, &n))
        return SHARD_ERR_NOMEM;
    if (out)
        hex(md, n, out);
    return 0;
}

int shard_digests_init(ShardDigests *d, int md5, int sha256)
{
    d->total = 0;
    d->md5 = d->sha256 = NULL;
    if (md5 &&
        (!(d->md5 = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(d->md5, EVP_md5(), NULL)))
        goto fail;
    if (sha256 &&
        (!(d->sha256 = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(d->sha256, EVP_sha256(), NULL)))
        goto fail;
    return 0;
fail:
    EVP_MD_CTX_free(d->md5);
    EVP_MD_CTX_free(d->sha256);
    d->md5 = d->sha256 = NULL;
    return SHARD_ERR_NOMEM;
}

void shard_digests_update(ShardDigests *d, const void *p, size_t n)
{
    if (d->md5)
        EVP_DigestUpdate(d->md5, p, n);
    if (d->sha256)
        EVP_DigestUpdate(d->sha256, p, n);
    d->total += n;
}

void shard_digests_final(ShardDigests *d, char *md5, char *sha256)
{
    md5[0] = sha256[0] = 0;
    if (d->md5)
        shard_digest_hex(d->md5, md5);
    if (d->sha256)
        shard_digest_hex(d->sha256, sha256);
    EVP_MD_CTX_free(d->md5);
    EVP_MD_CTX_free(d->sha256);
    d->md5 = d->sha256 = NULL;
}

int shard_md5_base64(const void *p, size_t n, char out[25])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned k = 0;
    if (!EVP_Digest(p, n, md, &k, EVP_md5(), NULL))
        return SHARD_ERR_NOMEM;
    EVP_EncodeBlock((unsigned char *)out, md, (int)k);
    return 0;
}
