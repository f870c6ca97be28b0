/*
 * What every sink shares (sink.h): the URL switch, buffering, digests and the count.
 *
 * DESIGN: checksums. A digest can cost more CPU than writing the bytes (MD5 without SHA
 * extensions runs at ~750 MB/s), so each digest asked for runs on a hasher thread of its
 * own per open sink. The sink has two buffers: when the one being filled is full, the
 * caller waits until both hashers are done with the other, hands the full one to both,
 * puts it to the implementation itself, and fills the other. A hasher only reads a buffer
 * the caller no longer touches until the next hand-over. Order of hashing is the order of
 * writing, so the digests are those of the object.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "base/dirs.h"
#include "base/error.h"
#include "remote/store.h"
#include "remote/upload.h"
#include "shard/common.h"
#include "sink/filesink.h"
#include "sink/lock.h"
#include "sink/objectsink.h"
#include "sink/sink.h"
#include "sink/sinkdef.h"

#define SINK_BUFSIZE (1u << 20)

/* A local output's name: refused when it is no file a rename may replace (a device, a
 * FIFO, a socket, a folder; a link is replaced, its target untouched) or "-". */
static int local_output(const char *path, char *err)
{
    struct stat st;
    if (!strcmp(path, "-"))
        return shard_fail(err, SHARD_ERR_INVALID, "-: standard output cannot take this output "
                          "(it is written whole, then renamed into place): name a file");
    if (lstat(path, &st) != 0 || S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))
        return 0;
    return shard_fail(err, SHARD_ERR_INVALID, "%s: %s, not a file: an output is written as a "
                      "new file and renamed over its name, which would replace it; name a file",
                      path, shard_file_kind(st.st_mode));
}

int shard_sink_check(const char *url, char *err)
{
    const char *path;
    unsigned can = shard_store_bytes(url, &path);
    if (can & SHARD_STORE_WRITE)
        return path ? local_output(path, err) : shard_object_writable(url, err);
    if (can & SHARD_STORE_COSTLY)
        return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                          "%s: can be written to a folder, gs:// or s3://, not %s: it has no "
                          "upload", url, shard_store_name(url));
    return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                      "%s: can be written to a folder, file://, gs:// or s3://, not %s", url,
                      can & SHARD_STORE_COMMAND ? "a command's output (it is read, never written)"
                      : can                     ? "this store (it is read, never written)"
                                                : "this scheme");
}

static void sink_free(ShardSink *k)
{
    if (k->ops)
        k->ops->drop(k);
    shard_hasher_free(k->md5); /* joins them, so neither buffer is in use after this */
    shard_hasher_free(k->sha256);
    free(k->buf);
    free(k->spare);
    free(k->url);
    free(k);
}

int shard_sink_open(ShardSink **out, const char *url, const ShardSinkSettings *s, char *err)
{
    *out = NULL;
    ShardSinkSettings def = {.sync = 1};
    if (!s)
        s = &def;
    int rc = shard_sink_check(url, err);
    if (rc)
        return rc;
    ShardSink *k = calloc(1, sizeof *k);
    if (!k)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
    rc = SHARD_ERR_NOMEM;
    int md5 = s->md5, sha = s->sha256;
    if (!(k->url = strdup(url)) || !(k->buf = malloc(SINK_BUFSIZE)) ||
        ((md5 || sha) && !(k->spare = malloc(SINK_BUFSIZE))) ||
        (md5 && !(k->md5 = shard_hasher_new(0))) || (sha && !(k->sha256 = shard_hasher_new(1)))) {
        shard_fail(err, rc, "%s: out of memory", url);
        goto fail;
    }
    k->cap = SINK_BUFSIZE;
    const char *path;
    shard_store_bytes(url, &path);
    rc = path ? shard_sink_file_open(k, path, s->sync, err)
              : shard_sink_object_open(k, url, s->remote, err);
    if (rc)
        goto fail;
    *out = k;
    return 0;
fail:
    sink_free(k);
    return rc;
}

static void hashers_wait(ShardSink *k)
{
    if (k->md5)
        shard_hasher_wait(k->md5);
    if (k->sha256)
        shard_hasher_wait(k->sha256);
}

/* Puts the filled buffer; with digests, hashes it meanwhile on the hashers. */
static int flush_filled(ShardSink *k, char *err)
{
    if (!k->len)
        return 0;
    size_t n = k->len;
    k->len = 0;
    k->put += n;
    if (!k->spare)
        return k->ops->put(k, k->buf, n, err);
    hashers_wait(k);
    if (k->md5)
        shard_hasher_give(k->md5, k->buf, n);
    if (k->sha256)
        shard_hasher_give(k->sha256, k->buf, n);
    unsigned char *t = k->buf;
    k->buf = k->spare;
    k->spare = t;
    return k->ops->put(k, k->spare, n, err);
}

int shard_sink_write(ShardSink *k, const void *p, size_t n, char *err)
{
    const unsigned char *src = p;
    while (n) {
        if (k->len == k->cap) {
            int rc = flush_filled(k, err);
            if (rc)
                return rc;
        }
        size_t m = k->cap - k->len < n ? k->cap - k->len : n;
        memcpy(k->buf + k->len, src, m);
        k->len += m;
        src += m;
        n -= m;
    }
    return 0;
}

uint64_t shard_sink_size(const ShardSink *k)
{
    return k->put + k->len;
}

int shard_sink_commit(ShardSink **pk, char *md5, char *sha256, char *err)
{
    ShardSink *k = *pk;
    *pk = NULL;
    int rc = flush_filled(k, err);
    hashers_wait(k);
    if (md5)
        md5[0] = 0;
    if (sha256)
        sha256[0] = 0;
    /* the digests before the object appears: a failure then leaves nothing behind */
    if (!rc && ((k->md5 && md5 && shard_hasher_hex(k->md5, md5)) ||
                (k->sha256 && sha256 && shard_hasher_hex(k->sha256, sha256))))
        rc = shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", k->url);
    if (!rc)
        rc = k->ops->commit(k, err);
    sink_free(k);
    return rc;
}

void shard_sink_abort(ShardSink **pk)
{
    if (!pk || !*pk)
        return;
    sink_free(*pk);
    *pk = NULL;
}

int shard_sink_put(const char *url, const void *p, size_t n, const ShardSinkSettings *s, char *err)
{
    ShardSink *k;
    int rc = shard_sink_open(&k, url, s, err);
    if (rc)
        return rc;
    if ((rc = shard_sink_write(k, p, n, err))) {
        shard_sink_abort(&k);
        return rc;
    }
    return shard_sink_commit(&k, NULL, NULL, err);
}

int shard_sink_remove(const char *url, ShardRemote *remote, char *err)
{
    ShardStore *st = NULL;
    int rc = shard_sink_check(url, err);
    if (!rc)
        rc = shard_store_open(&st, url, remote, err);
    if (!rc)
        rc = shard_store_remove(st, url, err);
    shard_store_free(&st);
    return rc;
}

int shard_sink_lock_output(ShardSinkLock *l, const char *url, int shared, const char *what,
                           const char *note, const char *hint, char *err)
{
    const char *path;
    shard_store_bytes(url, &path);
    return path ? shard_sink_lock(l, path, shared, what, note, hint, err) : 0;
}

void shard_sink_sweep(const char *dir, const ShardKeySet *names)
{
    const char *path;
    shard_store_bytes(dir, &path);
    if (path)
        shard_sink_file_sweep(path, names);
}
