/*
 * The remote reader handle (shard/remote.h): settings, counters, lifetime. The network
 * itself is in net.c, the sources in source/remotesource.c, each store's conventions in gcs.c
 * and s3.c.
 */
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "base/error.h"
#include "remote/gcs.h"
#include "remote/net.h"
#include "remote/handle.h"
#include "remote/remotedef.h"
#include "remote/request.h"
#include "remote/s3.h"
#include "remote/xfer.h"

void shard_remote_default_settings(ShardRemoteSettings *s)
{
    memset(s, 0, sizeof *s);
    s->connect_timeout = 10;
    s->stall_timeout = 30;
    s->stall_bytes = 1024;
    s->retries = 10;
    s->backoff = 0.5;
    s->backoff_max = 20;
    s->connections = 16;
    s->buffer = 4u << 20;
    s->verify_tls = 1;
    s->upload_part = 64u << 20;
}

int shard_remote_available(void) { return 1; }

static char *dup_or_null(const char *s) { return s && *s ? strdup(s) : NULL; }

static void free_strings(ShardRemoteSettings *s)
{
    free((char *)s->ca_bundle);
    free((char *)s->cache_dir);
    shard_secret_free((char *)s->gcs_token);
}

int shard_remote_new(ShardRemote **out, const ShardRemoteSettings *s, ShardError *err)
{
    *out = NULL;
    ShardRemoteSettings d;
    if (!s) {
        shard_remote_default_settings(&d);
        s = &d;
    }
    if (s->connect_timeout <= 0 || s->stall_timeout <= 0 || s->retries < 0 || s->backoff < 0 ||
        s->backoff_max < 0 || s->connections < 1)
        return shard_report(err, SHARD_ERR_INVALID,
                            "remote settings: timeouts and connections must be positive, "
                            "retries and backoff not negative");
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) /* reference-counted by libcurl */
        return shard_report(err, SHARD_ERR_IO, "libcurl failed to initialise");
    ShardRemote *r = calloc(1, sizeof *r);
    if (!r) {
        curl_global_cleanup();
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    }
    r->s = *s;
    if (!r->s.upload_part)
        r->s.upload_part = 64u << 20;
    const char *ca = s->ca_bundle ? s->ca_bundle : getenv("CURL_CA_BUNDLE");
    if (!ca || !*ca)
        ca = getenv("SSL_CERT_FILE");
    r->s.ca_bundle = dup_or_null(ca);
    r->s.cache_dir = dup_or_null(s->cache_dir);
    r->s.gcs_token = dup_or_null(s->gcs_token);
    atomic_init(&r->refs, 1);
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->auth_mu, NULL);
    if (shard_xfer_buffers_init(r) || (s->ca_bundle && !r->s.ca_bundle) || (s->cache_dir && *s->cache_dir && !r->s.cache_dir) ||
        (s->gcs_token && *s->gcs_token && !r->s.gcs_token)) {
        shard_remote_put(r);
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    }
    *out = r;
    return 0;
}

/* A handle with the defaults, for an opener given none. */
static ShardRemote *shard_remote_default(char *err)
{
    ShardRemote *r;
    ShardError e;
    if (shard_remote_new(&r, NULL, &e)) {
        shard_fail(err, e.code, "%s", e.message);
        return NULL;
    }
    return r;
}

void shard_remote_put(ShardRemote *r)
{
    if (!r || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
        return;
    shard_net_stop(r);
    shard_xfer_buffers_free(r);
    shard_gcs_auth_free(r->gcs);
    shard_s3_auth_free(r->s3);
    shard_secret_free(r->hf_token);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->auth_mu);
    free_strings(&r->s);
    free(r);
    curl_global_cleanup();
}

void shard_remote_free(ShardRemote **r)
{
    if (!r || !*r)
        return;
    shard_remote_put(*r);
    *r = NULL;
}

void shard_remote_abort(ShardRemote *r)
{
    atomic_store(&r->aborted, 1);
    if (r->multi)
        curl_multi_wakeup(r->multi);
}

ShardRemote *shard_remote_ref(ShardRemote *r)
{
    atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    return r;
}

ShardRemote *shard_remote_resolve(ShardRemote *given, char *err)
{
    return given ? shard_remote_ref(given) : shard_remote_default(err);
}

const char *shard_remote_cache_dir(const ShardRemote *r)
{
    return r->s.cache_dir && *r->s.cache_dir ? r->s.cache_dir : NULL;
}

uint64_t shard_remote_cache_limit(const ShardRemote *r) { return r->s.cache_bytes; }
int shard_remote_retries(const ShardRemote *r) { return r->s.retries; }
uint64_t shard_remote_upload_part(const ShardRemote *r) { return r->s.upload_part; }

void shard_remote_count(ShardRemote *r, ShardRemoteCount which, uint64_t n)
{
    atomic_uint_least64_t *c = NULL;
    switch (which) {
    case SHARD_REMOTE_RETRIES: c = &r->st.retries; break;
    case SHARD_REMOTE_RESUMES: c = &r->st.resumes; break;
    case SHARD_REMOTE_RANGE_IGNORED: c = &r->st.range_ignored; break;
    case SHARD_REMOTE_REPLACED: c = &r->st.replaced; break;
    case SHARD_REMOTE_CACHE_HITS: c = &r->st.cache_hits; break;
    case SHARD_REMOTE_CACHE_MISSES: c = &r->st.cache_misses; break;
    case SHARD_REMOTE_CACHE_BYTES: c = &r->st.cache_bytes; break;
    case SHARD_REMOTE_RESOLVES: c = &r->st.resolves; break;
    case SHARD_REMOTE_DIRECT: c = &r->st.direct; break;
    }
    if (c)
        shard_stat_add(c, n);
}

void shard_remote_stats(ShardRemote *r, ShardRemoteStats *o)
{
    memset(o, 0, sizeof *o);
    if (!r)
        return;
#define LOAD(f) atomic_load_explicit(&r->st.f, memory_order_relaxed)
    o->bytes = LOAD(bytes);
    o->requests = LOAD(requests);
    o->retries = LOAD(retries);
    o->resumes = LOAD(resumes);
    o->range_ignored = LOAD(range_ignored);
    o->replaced = LOAD(replaced);
    o->wait_seconds = (double)LOAD(wait_ns) / 1e9;
    o->cache_hits = LOAD(cache_hits);
    o->cache_misses = LOAD(cache_misses);
    o->cache_bytes = LOAD(cache_bytes);
    o->resolves = LOAD(resolves);
    o->direct = LOAD(direct);
#undef LOAD
}
