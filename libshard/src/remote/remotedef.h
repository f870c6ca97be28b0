/*
 * The remote handle's insides (shard/remote.h's ShardRemote): its settings, its network
 * thread's state (net.c), its transfer buffers kept for reuse, its counters and the stores'
 * credentials. Private to remote/: the rest of the library holds the handle through
 * handle.h.
 */
#ifndef SHARD_REMOTE_REMOTEDEF_H
#define SHARD_REMOTE_REMOTEDEF_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <curl/curl.h>

#include "base/attr.h"
#include "shard/remote.h"

typedef struct ShardXfer ShardXfer;
typedef struct ShardGcsAuth ShardGcsAuth;
typedef struct ShardS3Auth ShardS3Auth;
struct ShardBlockPool;

struct ShardRemote {
    atomic_int refs;
    ShardRemoteSettings s;      /* strings below are owned copies */
    pthread_mutex_t mu;         /* the transfer lists and their buffers' state */
    pthread_t thread;
    int running, stopping;
    CURLM *multi;
    ShardXfer *incoming;        /* transfers to add (under mu) */
    ShardXfer *active;          /* transfers on the multi handle (the network thread's) */
    struct ShardBlockPool *spare; /* buffers of finished transfers, for the next: no page
                                     faults for each new shard */
    struct {
        atomic_uint_least64_t bytes, requests, retries, resumes, range_ignored, replaced,
            wait_ns, cache_hits, cache_misses, cache_bytes, resolves, direct;
    } st;
    atomic_uint_least64_t seq;  /* jitter */
    atomic_int aborted;         /* shard_remote_abort: every wait ends, failing */
    pthread_mutex_t auth_mu;    /* credentials, made when first needed */
    ShardGcsAuth *gcs;
    ShardS3Auth *s3;
    char *hf_token;             /* the Hub's token (hf.c), read once: a secret */
    int hf_token_read;
};

/* Whether shard_remote_abort was called on r (NULL: no): read where the transfers wait,
 * inline so that they need nothing of the handle's file. */
static inline int shard_remote_aborted(const ShardRemote *r)
{
    return r && atomic_load(&((ShardRemote *)r)->aborted);
}

static inline void shard_stat_add(atomic_uint_least64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

#endif /* SHARD_REMOTE_REMOTEDEF_H */
