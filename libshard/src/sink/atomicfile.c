/*
 * Files that appear complete or not at all: written under a hidden temporary name in the
 * destination folder (so the rename stays on one filesystem), fsynced, renamed, and the
 * folder fsynced so the rename itself survives a crash.
 *
 * DESIGN: checksums. A digest can cost more CPU than reading and writing the bytes (MD5
 * without SHA extensions runs at ~750 MB/s), so each digest asked for runs on a hasher
 * thread of its own per open file. The file has two
 * buffers: when the one being filled is full, the caller waits until both hashers are done
 * with the other, hands the full one to both, writes it to the file itself, and fills the
 * other. A hasher only reads a buffer the caller no longer touches until the next
 * hand-over, so the only shared state is each hasher's hand-over slot under its mutex.
 * Order of hashing is the order of writing, so the digests are those of the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/error.h"
#include "base/text.h"
#include "shard/common.h"
#include "sink/atomicfile.h"
#include "sink/hasher.h"

#define AFILE_BUFSIZE (1u << 20)

int shard_afile_open(ShardAtomicFile *f, const char *final_path, int sync, int md5, int sha256,
                     char *err)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->sync = sync;
    f->final_path = strdup(final_path);
    char *base_copy = strdup(final_path);
    char *dir = shard_dir_of(final_path);
    f->buf = malloc(AFILE_BUFSIZE);
    f->cap = AFILE_BUFSIZE;
    int rc = SHARD_ERR_NOMEM;
    if (!f->final_path || !base_copy || !dir || !f->buf)
        goto fail;
    if ((md5 || sha256) && !(f->spare = malloc(AFILE_BUFSIZE)))
        goto fail;
    if (md5 && !(f->md5 = shard_hasher_new(0)))
        goto fail;
    if (sha256 && !(f->sha256 = shard_hasher_new(1)))
        goto fail;
    const char *base = basename(base_copy);
    size_t n = strlen(dir) + strlen(base) + 40;
    f->tmp_path = malloc(n);
    if (!f->tmp_path)
        goto fail;
    for (int attempt = 0; attempt < 100; attempt++) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, 0) != sizeof r)
            r = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull + (uint64_t)attempt;
        snprintf(f->tmp_path, n, "%s/.%s.tmp-%016llx", dir, base, (unsigned long long)r);
        f->fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd >= 0 || errno != EEXIST)
            break;
    }
    if (f->fd < 0) {
        int e = errno;
        rc = shard_fail(err, shard_errno_code(e), "%s: cannot create (in folder %s): %s",
                        final_path, dir, strerror(e));
        goto fail;
    }
    free(base_copy);
    free(dir);
    return 0;
fail:
    if (rc == SHARD_ERR_NOMEM)
        shard_fail(err, rc, "%s: out of memory", final_path);
    free(base_copy);
    free(dir);
    shard_afile_abort(f);
    return rc;
}

static void hashers_wait(ShardAtomicFile *f)
{
    if (f->md5)
        shard_hasher_wait(f->md5);
    if (f->sha256)
        shard_hasher_wait(f->sha256);
}

/* With sync, the kernel is asked to start writing back each few MiB as they are written,
 * so that the fsync before the rename finds little left to do: the disk works while the
 * next bytes are read and hashed, instead of after. */
#define AFILE_WRITEBACK (8u << 20)

static void start_writeback(ShardAtomicFile *f)
{
    if (!f->sync || f->written - f->writeback < AFILE_WRITEBACK)
        return;
#ifdef SYNC_FILE_RANGE_WRITE
    (void)sync_file_range(f->fd, (off_t)f->writeback, (off_t)(f->written - f->writeback),
                          SYNC_FILE_RANGE_WRITE); /* a hint: fsync still decides */
#endif
    f->writeback = f->written;
}

static int flush_buf(ShardAtomicFile *f, const unsigned char *p, size_t n, char *err)
{
    while (n) {
        ssize_t k = write(f->fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            return shard_fail(err, shard_errno_code(e), "%s: write failed at byte %llu: %s",
                              f->final_path, (unsigned long long)f->written, strerror(e));
        }
        p += k;
        n -= (size_t)k;
        f->written += (uint64_t)k;
    }
    start_writeback(f);
    return 0;
}

/* Writes out the filled buffer; with checksums, hashes it meanwhile on the hasher. */
static int flush_filled(ShardAtomicFile *f, char *err)
{
    if (!f->len)
        return 0;
    if (f->spare) {
        hashers_wait(f);
        if (f->md5)
            shard_hasher_give(f->md5, f->buf, f->len);
        if (f->sha256)
            shard_hasher_give(f->sha256, f->buf, f->len);
        unsigned char *t = f->buf;
        f->buf = f->spare;
        f->spare = t;
        size_t n = f->len;
        f->len = 0;
        return flush_buf(f, f->spare, n, err);
    }
    int rc = flush_buf(f, f->buf, f->len, err);
    f->len = 0;
    return rc;
}

int shard_afile_write(ShardAtomicFile *f, const void *p, size_t n, char *err)
{
    const unsigned char *src = p;
    while (n) {
        if (f->len == f->cap) {
            int rc = flush_filled(f, err);
            if (rc)
                return rc;
        }
        size_t k = f->cap - f->len < n ? f->cap - f->len : n;
        memcpy(f->buf + f->len, src, k);
        f->len += k;
        src += k;
        n -= k;
    }
    return 0;
}

int shard_afile_commit(ShardAtomicFile *f, char *md5, char *sha256, char *err)
{
    int rc = flush_filled(f, err);
    hashers_wait(f);
    if (rc)
        goto fail;
    if (f->sync && fsync(f->fd) != 0) {
        int e = errno;
        rc = shard_fail(err, shard_errno_code(e), "%s: fsync failed: %s", f->final_path,
                        strerror(e));
        goto fail;
    }
    if (close(f->fd) != 0) {
        int e = errno;
        f->fd = -1;
        rc = shard_fail(err, shard_errno_code(e), "%s: close failed: %s", f->final_path,
                        strerror(e));
        goto fail;
    }
    f->fd = -1;
    if (rename(f->tmp_path, f->final_path) != 0) {
        int e = errno;
        rc = shard_fail(err, shard_errno_code(e), "%s: rename from %s failed: %s",
                        f->final_path, f->tmp_path, strerror(e));
        goto fail;
    }
    free(f->tmp_path);
    f->tmp_path = NULL;
    if (f->sync) {
        char *dir = shard_dir_of(f->final_path);
        int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (dfd >= 0) {
            fsync(dfd); /* best effort: some filesystems refuse fsync on folders */
            close(dfd);
        }
        free(dir);
    }
    if (md5)
        md5[0] = 0;
    if (sha256)
        sha256[0] = 0;
    if (f->md5)
        shard_hasher_hex(f->md5, md5);
    if (f->sha256)
        shard_hasher_hex(f->sha256, sha256);
    shard_afile_abort(f);
    return 0;
fail:
    shard_afile_abort(f);
    return rc;
}

void shard_afile_abort(ShardAtomicFile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (f->tmp_path)
        unlink(f->tmp_path);
    free(f->tmp_path);
    free(f->final_path);
    shard_hasher_free(f->md5); /* joins them, so neither buffer is in use after this */
    shard_hasher_free(f->sha256);
    free(f->buf);
    free(f->spare);
    f->tmp_path = f->final_path = NULL;
    f->buf = f->spare = NULL;
    f->md5 = f->sha256 = NULL;
}

