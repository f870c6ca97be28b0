/*
 * libshard — remote shards: http://, https://, gs://BUCKET/OBJECT and s3://BUCKET/KEY.
 *
 * Remote shards are streamed, not downloaded first: the tar reader consumes bytes as they
 * arrive. A reader's fetch streams each run their own libcurl multi handle, in the thread
 * that parses the shard, holding the stream's current shard and the one it opened ahead;
 * other requests (indexes, manifests, listings, a shard opened with shard_file_open) share
 * one multi handle per ShardRemote on a thread of its own. Connections are reused
 * (keep-alive, HTTP/2) and several shards download at once. A cut
 * transfer resumes from the byte it reached, pinned to the object version it started on
 * (If-Range with the ETag on HTTP and S3, the generation on GCS): an object replaced
 * mid-read is an error, never spliced. Failures are retried with exponential backoff and
 * full jitter (429, 5xx, connection errors, stalls) until the retry budget is spent; then
 * the error names the URL and byte offset, and never a credential.
 *
 * Credentials:
 *   gs://  STORAGE_EMULATOR_HOST (no credentials sent), else an access token from the
 *          settings or GOOGLE_OAUTH_ACCESS_TOKEN, else the service-account key file named by
 *          GOOGLE_APPLICATION_CREDENTIALS (an RS256 JWT exchanged at its token_uri), else the
 *          metadata server (GCE_METADATA_HOST, default metadata.google.internal), else
 *          anonymous (public buckets). Tokens are refreshed before they expire.
 *   s3://  AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the profile
 *          AWS_PROFILE (default "default") of ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE),
 *          else anonymous; region AWS_REGION / AWS_DEFAULT_REGION (default us-east-1);
 *          AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL for S3-compatible stores (path-style),
 *          virtual-hosted style on AWS. Requests are signed with SigV4.
 *   TLS is verified; CURL_CA_BUNDLE or SSL_CERT_FILE name the CA bundle.
 *
 * A ShardRemote is shared by the threads of one process (the reader's fetch threads, the
 * loader, several readers); it is thread-safe. Readers and lists make their own when their
 * settings name none.
 */
#ifndef SHARD_REMOTE_H
#define SHARD_REMOTE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ShardRemote ShardRemote;

typedef struct ShardRemoteSettings {
    double connect_timeout;  /**< seconds to connect (default 10) */
    /** A transfer slower than stall_bytes per second for stall_timeout seconds is cut and
     *  resumed (defaults 30 s, 1024 bytes) */
    double stall_timeout;
    long stall_bytes;
    int retries;             /**< retries of a request that made no progress (default 10) */
    double backoff;          /**< first retry delay in seconds, doubled each time (default 0.5) */
    double backoff_max;      /**< the longest retry delay (default 20) */
    long connections;        /**< connections per host on the shared handle (default 16) */
    /** bytes buffered per transfer, read ahead (default 4 MiB); a fetch stream's transfers
     *  buffer at most 1 MiB each, the kernel's socket buffer holding the read-ahead */
    size_t buffer;
    int verify_tls;          /**< verify TLS peers (default 1) */
    const char *ca_bundle;   /**< NULL: CURL_CA_BUNDLE, SSL_CERT_FILE, the system's; copied */
    /** A folder where remote shards are kept, shared by the processes of one machine;
     *  NULL: no cache (default). Copied. */
    const char *cache_dir;
    uint64_t cache_bytes;    /**< size limit of the cache, evicting least recently used
                                  shards (default 0: 10% of the file system's free space) */
    /** A Google access token; NULL: GOOGLE_OAUTH_ACCESS_TOKEN, then the credential chain
     *  above. Copied; never shown. */
    const char *gcs_token;
    /** Objects written into gs:// or s3:// go up as they are written, in parts of this size
     *  (a GCS resumable upload, an S3 multipart upload), or in one request when they fit in
     *  one; either way an object appears only once whole. Memory: one part per object being
     *  written. Default 64 MiB; at most 5 GiB; S3 refuses parts under 5 MiB but the last
     *  and more than 10000 parts (refused here, naming the object); GCS takes multiples of
     *  256 KiB (rounded up to one). */
    uint64_t upload_part;
    /** Called before each retry's wait with one line: the URL (without credentials or
     *  query), the reason, "retry N of M" and the wait. From any thread, once per retry;
     *  NULL: retries are silent (default). on_retry_cookie is passed through (borrowed). */
    void (*on_retry)(void *cookie, const char *line);
    void *on_retry_cookie;
    /** Zero: room for settings added later without changing the struct's size. */
    unsigned char reserved[40];
} ShardRemoteSettings;

typedef struct ShardRemoteStats {
    uint64_t bytes;         /**< body bytes received from the network */
    uint64_t requests;      /**< requests sent (list pages, tokens and ranges included) */
    uint64_t retries;       /**< requests repeated after a failure */
    uint64_t resumes;       /**< cut transfers resumed with a Range from the byte reached */
    uint64_t range_ignored; /**< Range answered with the whole object: skipped to the offset */
    uint64_t replaced;      /**< objects found replaced mid-read (reported as errors) */
    double wait_seconds;    /**< time readers waited for bytes from the network */
    uint64_t cache_hits;    /**< shards read from the cache */
    uint64_t cache_misses;  /**< remote shards read from the network (and cached) */
    uint64_t cache_bytes;   /**< bytes read from the cache */
    uint64_t resolves;      /**< requests sent to the Hub's resolve URLs (hf://): one a file
                                 opened, again only when its CDN link expired or was refused */
    uint64_t direct;        /**< requests sent straight to a CDN link a resolve URL gave */
    uint64_t reserved[4];
} ShardRemoteStats;

/** Fills s with the defaults written beside each field. */
SHARD_API void shard_remote_default_settings(ShardRemoteSettings *s);

/**
 * Makes a remote reader (no thread and no connection until the first request).
 * @param out receives the handle, owned by the caller (shard_remote_free)
 * @param s settings, NULL for the defaults; borrowed (strings copied)
 */
SHARD_API int shard_remote_new(ShardRemote **out, const ShardRemoteSettings *s, ShardError *err);

/** Counters since the handle was made. */
SHARD_API void shard_remote_stats(ShardRemote *r, ShardRemoteStats *out);

/** Releases the caller's handle and sets *r to NULL; sources still open keep what they need
 *  alive until they close. Accepts NULL. */
SHARD_API void shard_remote_free(ShardRemote **r);

/** From any thread: every wait on r's requests (a transfer, a retry's backoff) ends now,
 *  failing with "stopped", and so do the requests made after; for a caller that gives up
 *  on an open, a listing or a count (Ctrl-C). For good: make a new ShardRemote to go on. */
SHARD_API void shard_remote_abort(ShardRemote *r);

/** @return whether this build reads remote URLs (built with libcurl) */
SHARD_API int shard_remote_available(void);

#ifdef __cplusplus
}
#endif

#endif /* SHARD_REMOTE_H */
