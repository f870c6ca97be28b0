/*
 * A digest on a thread of its own (sink/hasher.h).
 */
#include <pthread.h>
#include <stdlib.h>

#include <openssl/evp.h>

#include "base/digest.h"
#include "base/thread.h"
#include "sink/hasher.h"

struct ShardHasher {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    const unsigned char *job; /* NULL when idle */
    size_t job_len;
    int quit;
    void *ctx; /* EVP_MD_CTX */
};

static void *hasher_main(void *arg)
{
    ShardHasher *h = arg;
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (!h->job && !h->quit)
            pthread_cond_wait(&h->cond, &h->lock);
        if (!h->job)
            break;
        const unsigned char *p = h->job;
        size_t n = h->job_len;
        pthread_mutex_unlock(&h->lock);
        EVP_DigestUpdate(h->ctx, p, n);
        pthread_mutex_lock(&h->lock);
        h->job = NULL;
        pthread_cond_broadcast(&h->cond);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

void shard_hasher_wait(ShardHasher *h)
{
    pthread_mutex_lock(&h->lock);
    while (h->job)
        pthread_cond_wait(&h->cond, &h->lock);
    pthread_mutex_unlock(&h->lock);
}

void shard_hasher_give(ShardHasher *h, const unsigned char *p, size_t n)
{
    pthread_mutex_lock(&h->lock);
    h->job = p;
    h->job_len = n;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
}

void shard_hasher_free(ShardHasher *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->lock);
    h->quit = 1;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->cond);
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

ShardHasher *shard_hasher_new(int sha256)
{
    const EVP_MD *md = sha256 ? EVP_sha256() : EVP_md5();
    ShardHasher *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx || !EVP_DigestInit_ex(h->ctx, md, NULL)) {
        EVP_MD_CTX_free(h->ctx);
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->cond, NULL);
    int rc = shard_thread_start(&h->thread, hasher_main, h);
    if (rc) {
        pthread_mutex_destroy(&h->lock);
        pthread_cond_destroy(&h->cond);
        EVP_MD_CTX_free(h->ctx);
        free(h);
        return NULL;
    }
    return h;
}

int shard_hasher_hex(ShardHasher *h, char *out)
{
    return shard_digest_hex(h->ctx, out);
}
