/*
 * Local files as sources (source.h), read with read() and pread(). Asked to (SHARD_SOURCE_MAP)
 * a regular file is mapped instead: the mapping is handed to libarchive as one block, so
 * member data of an uncompressed tar come back as pointers into it (no copy), and samples
 * hold the source to keep viewing them; but a file truncated while mapped then kills the
 * process with SIGBUS, where read() reports a short file as any other error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "source/filesource.h"
#include "source/source.h"

#define READ_BUFSIZE (1u << 20)
/* for a listing: a tar header and a little more, then a seek over the member's data */
#define SPARSE_BUFSIZE (16u << 10)

/* What a file needs when it could not be mapped (source.c reads a mapped one). */
typedef struct FileSource {
    int fd;
    unsigned char *buf; /* read()'s buffer */
    size_t bufsize;
} FileSource;

static ssize_t file_read(ShardSource *s, const void **block)
{
    FileSource *f = s->impl;
    if (!f->buf && !(f->buf = malloc(f->bufsize)))
        return shard_fail(s->err, SHARD_ERR_NOMEM, "%s: out of memory", s->url);
    for (;;) {
        ssize_t k = read(f->fd, f->buf, f->bufsize);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return shard_fail(s->err, SHARD_ERR_IO, "%s: offset %llu: read failed: %s", s->url,
                              (unsigned long long)s->pos, strerror(errno));
        *block = f->buf;
        return k;
    }
}

/* Skips at most to the file's end as it is now: lseek would go past it and claim the
 * bytes were there, hiding a cut (or since truncated) file from the tar reader. */
static int64_t file_skip(ShardSource *s, int64_t n)
{
    FileSource *f = s->impl;
    struct stat st;
    off_t cur = (off_t)s->pos; /* the descriptor's offset: reads and skips move both */
    if (fstat(f->fd, &st) != 0)
        return 0;
    if (n > st.st_size - cur)
        n = st.st_size > cur ? st.st_size - cur : 0;
    return lseek(f->fd, (off_t)n, SEEK_CUR) < 0 ? 0 : n;
}

static int file_read_at(ShardSource *s, uint64_t off, void *buf, size_t n)
{
    FileSource *f = s->impl;
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(f->fd, (unsigned char *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return shard_fail(s->err, k ? SHARD_ERR_IO : SHARD_ERR_FORMAT,
                              "%s: offset %llu: read failed: %s", s->url,
                              (unsigned long long)(off + got), k ? strerror(errno) : "end of file");
        got += (size_t)k;
    }
    return 0;
}

static void file_close(ShardSource *s)
{
    FileSource *f = s->impl;
    if (s->map)
        munmap((void *)s->map, (size_t)s->size);
    if (f) {
        if (f->fd >= 0)
            close(f->fd);
        free(f->buf);
        free(f);
    }
}

static const ShardSourceOps file_ops = {
    .kind = "file",
    .read = file_read,
    .skip = file_skip,
    .read_at = file_read_at,
    .close = file_close,
};

int shard_source_file(ShardSource **out, const char *path, int flags, char *err)
{
    *out = NULL;
    ShardSource *s = shard_source_new(&file_ops, path);
    FileSource *f = s ? calloc(1, sizeof *f) : NULL;
    if (!f) {
        shard_source_put(s);
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", path);
    }
    f->fd = -1;
    f->bufsize = flags & SHARD_SOURCE_SPARSE ? SPARSE_BUFSIZE : READ_BUFSIZE;
    s->impl = f;
    int rc = 0;
    /* O_NONBLOCK: opening a FIFO put in a shard's place must not wait for a writer */
    f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (f->fd < 0) {
        int e = errno;
        rc = shard_fail(err, shard_errno_code(e), "%s: cannot open: %s", path, strerror(e));
    } else if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = shard_fail(err, SHARD_ERR_IO, "%s: not a regular file", path);
    } else {
        fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) & ~O_NONBLOCK);
        s->size = (int64_t)st.st_size;
        /* what a rewrite in place changes: ctime too, which no touch can set back */
        snprintf(s->version, sizeof s->version, "%lld.%09ld-%llu-%llu-%lld.%09ld",
                 (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec,
                 (unsigned long long)st.st_ino, (unsigned long long)st.st_dev,
                 (long long)st.st_ctim.tv_sec, (long)st.st_ctim.tv_nsec);
        if (s->size && (flags & SHARD_SOURCE_MAP)) {
            void *m = mmap(NULL, (size_t)s->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
            if (m != MAP_FAILED) {
                if (flags & SHARD_SOURCE_SEQUENTIAL)
                    madvise(m, (size_t)s->size, MADV_SEQUENTIAL);
                s->map = m;
            }
        }
    }
    if (rc) {
        shard_source_put(s);
        return rc;
    }
    *out = s;
    return 0;
}
