/*
 * Files that appear complete or not at all: written under a hidden temporary name in the
 * destination folder (so the rename stays on one filesystem), fsynced, renamed, and the
 * folder fsynced so the rename itself survives a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "internal.h"

#define AFILE_BUFSIZE (1u << 20)

static void hex(const unsigned char *d, unsigned n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[2 * n] = 0;
}

static int digest_final(void *ctx, char *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (!EVP_DigestFinal_ex(ctx, md, &n))
        return SHARD_ERR_NOMEM;
    if (out)
        hex(md, n, out);
    return 0;
}

static int digests_new(void **md5, void **sha256)
{
    *md5 = EVP_MD_CTX_new();
    *sha256 = EVP_MD_CTX_new();
    if (!*md5 || !*sha256 || !EVP_DigestInit_ex(*md5, EVP_md5(), NULL) ||
        !EVP_DigestInit_ex(*sha256, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(*md5);
        EVP_MD_CTX_free(*sha256);
        *md5 = *sha256 = NULL;
        return SHARD_ERR_NOMEM;
    }
    return 0;
}

static char *dir_of(const char *path)
{
    char *tmp = shard_strdup(path);
    if (!tmp)
        return NULL;
    char *d = shard_strdup(dirname(tmp));
    free(tmp);
    return d;
}

int shard_afile_open(ShardAtomicFile *f, const char *final_path, int sync, int checksums,
                     char *err)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->sync = sync;
    f->final_path = shard_strdup(final_path);
    char *base_copy = shard_strdup(final_path);
    char *dir = dir_of(final_path);
    f->buf = malloc(AFILE_BUFSIZE);
    f->cap = AFILE_BUFSIZE;
    int rc = SHARD_ERR_NOMEM;
    if (!f->final_path || !base_copy || !dir || !f->buf)
        goto fail;
    if (checksums && digests_new(&f->md5, &f->sha256))
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
    return 0;
}

int shard_afile_write(ShardAtomicFile *f, const void *p, size_t n, char *err)
{
    if (f->md5) {
        EVP_DigestUpdate(f->md5, p, n);
        EVP_DigestUpdate(f->sha256, p, n);
    }
    if (f->len + n > f->cap) {
        int rc = flush_buf(f, f->buf, f->len, err);
        f->len = 0;
        if (rc)
            return rc;
        if (n >= f->cap)
            return flush_buf(f, p, n, err);
    }
    memcpy(f->buf + f->len, p, n);
    f->len += n;
    return 0;
}

int shard_afile_commit(ShardAtomicFile *f, char *md5, char *sha256, char *err)
{
    int rc = flush_buf(f, f->buf, f->len, err);
    f->len = 0;
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
        char *dir = dir_of(f->final_path);
        int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (dfd >= 0) {
            fsync(dfd); /* best effort: some filesystems refuse fsync on folders */
            close(dfd);
        }
        free(dir);
    }
    if (f->md5) {
        digest_final(f->md5, md5);
        digest_final(f->sha256, sha256);
    } else {
        if (md5)
            md5[0] = 0;
        if (sha256)
            sha256[0] = 0;
    }
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
    free(f->buf);
    EVP_MD_CTX_free(f->md5);
    EVP_MD_CTX_free(f->sha256);
    f->tmp_path = f->final_path = NULL;
    f->buf = NULL;
    f->md5 = f->sha256 = NULL;
}

int shard_file_digests(const char *path, char *md5, char *sha256, uint64_t *size, char *err)
{
    void *c5, *c256;
    if (digests_new(&c5, &c256))
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = 0;
    uint64_t total = 0;
    unsigned char *buf = malloc(AFILE_BUFSIZE);
    if (fd < 0) {
        int e = errno;
        rc = shard_fail(err, shard_errno_code(e), "%s: cannot open: %s", path, strerror(e));
        goto out;
    }
    if (!buf) {
        rc = shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    for (;;) {
        ssize_t k = read(fd, buf, AFILE_BUFSIZE);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            rc = shard_fail(err, SHARD_ERR_IO, "%s: read failed at byte %llu: %s", path,
                            (unsigned long long)total, strerror(e));
            goto out;
        }
        if (k == 0)
            break;
        EVP_DigestUpdate(c5, buf, (size_t)k);
        EVP_DigestUpdate(c256, buf, (size_t)k);
        total += (uint64_t)k;
    }
    digest_final(c5, md5);
    digest_final(c256, sha256);
    if (size)
        *size = total;
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    EVP_MD_CTX_free(c5);
    EVP_MD_CTX_free(c256);
    return rc;
}
