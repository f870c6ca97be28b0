/*
 * Local files that appear complete or not at all (filesink.h): written under a hidden temporary
 * name in the destination folder (".NAME.tmp-RANDOM", so the rename stays on one filesystem),
 * fsynced, renamed, and the folder fsynced so the rename itself survives a crash.
 *
 * A writer holds an flock on its temporary for as long as it writes it, so a sweep tells a
 * killed writer's temporary (no lock: the kernel dropped it with the process) from a live
 * one's, and removes only the former.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/dirs.h"
#include "base/error.h"
#include "base/text.h"
#include "shard/common.h"
#include "sink/filesink.h"

typedef struct LocalFile {
    int fd;
    int sync;
    char *final_path;
    char *tmp_path;
    uint64_t written;
    uint64_t writeback; /* bytes before this were handed to the kernel's writeback */
} LocalFile;

/* With sync, the kernel is asked to start writing back each few MiB as they are written,
 * so that the fsync before the rename finds little left to do: the disk works while the
 * next bytes are made, instead of after. */
#define WRITEBACK_STEP (8u << 20)

static void start_writeback(LocalFile *f)
{
    if (!f->sync || f->written - f->writeback < WRITEBACK_STEP)
        return;
#ifdef SYNC_FILE_RANGE_WRITE
    (void)sync_file_range(f->fd, (off_t)f->writeback, (off_t)(f->written - f->writeback),
                          SYNC_FILE_RANGE_WRITE); /* a hint: fsync still decides */
#endif
    f->writeback = f->written;
}

static int file_put(ShardSink *k, const unsigned char *p, size_t n, char *err)
{
    LocalFile *f = k->impl;
    while (n) {
        ssize_t w = write(f->fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            return shard_fail(err, shard_errno_code(e), "%s: write failed at byte %llu: %s",
                              f->final_path, (unsigned long long)f->written, strerror(e));
        }
        p += w;
        n -= (size_t)w;
        f->written += (uint64_t)w;
    }
    start_writeback(f);
    return 0;
}

static int file_commit(ShardSink *k, char *err)
{
    LocalFile *f = k->impl;
    if (f->sync && fsync(f->fd) != 0) {
        int e = errno;
        return shard_fail(err, shard_errno_code(e), "%s: fsync failed: %s", f->final_path,
                          strerror(e));
    }
    /* Closed before the rename, so an error only a close reports (NFS flushes there) stops
     * it; a duplicate keeps the lock held until the name is final, so no sweep takes it. */
    int keep = dup(f->fd);
    if (keep < 0) {
        int e = errno;
        return shard_fail(err, shard_errno_code(e), "%s: dup failed: %s", f->final_path, strerror(e));
    }
    int fd = f->fd;
    f->fd = keep;
    if (close(fd) != 0) {
        int e = errno;
        return shard_fail(err, shard_errno_code(e), "%s: writing %s failed at close: %s",
                          f->final_path, f->tmp_path, strerror(e));
    }
    if (rename(f->tmp_path, f->final_path) != 0) {
        int e = errno;
        return shard_fail(err, shard_errno_code(e), "%s: rename from %s failed: %s",
                          f->final_path, f->tmp_path, strerror(e));
    }
    free(f->tmp_path);
    f->tmp_path = NULL;
    close(f->fd); /* a duplicate: what was written is judged already */
    f->fd = -1;
    if (f->sync) {
        char *dir = shard_dir_of(f->final_path);
        int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (dfd >= 0) {
            fsync(dfd); /* best effort: some filesystems refuse fsync on folders */
            close(dfd);
        }
        free(dir);
    }
    return 0;
}

static void file_drop(ShardSink *k)
{
    LocalFile *f = k->impl;
    if (!f)
        return;
    if (f->tmp_path)
        unlink(f->tmp_path); /* before the close: the lock keeps sweeps off it until gone */
    if (f->fd >= 0)
        close(f->fd);
    free(f->tmp_path);
    free(f->final_path);
    free(f);
    k->impl = NULL;
}

static const ShardSinkOps file_ops = {file_put, file_commit, file_drop};

/* Locks the new temporary. A sweep may have locked and removed it between its creation and
 * this lock (it looked like a killed writer's): then it is no longer the file at its name,
 * and the caller makes another. 1 when the lock holds the temporary, else 0. */
static int lock_new(LocalFile *f)
{
    struct stat a, b;
    if (flock(f->fd, LOCK_EX) != 0 || fstat(f->fd, &a) != 0)
        return 1; /* no locks here (some filesystems): nothing sweeps by them either */
    return stat(f->tmp_path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev && a.st_nlink;
}

int shard_sink_file_open(ShardSink *k, const char *path, int sync, char *err)
{
    LocalFile *f = calloc(1, sizeof *f);
    if (!f)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", path);
    f->fd = -1;
    f->sync = sync;
    k->impl = f;
    k->ops = &file_ops;
    f->final_path = strdup(path);
    char *base_copy = strdup(path);
    char *dir = shard_dir_of(path);
    int rc = SHARD_ERR_NOMEM;
    size_t n = dir && base_copy ? strlen(dir) + strlen(base_copy) + 40 : 0;
    if (!f->final_path || !n || !(f->tmp_path = malloc(n))) {
        shard_fail(err, rc, "%s: out of memory", path);
        goto done;
    }
    const char *base = basename(base_copy);
    struct stat st;
    if (stat(dir, &st) != 0 && errno == ENOENT && (rc = shard_make_dirs(dir, path, err)))
        goto done; /* a missing output folder is made, as mkdir -p */
    for (int attempt = 0; attempt < 100; attempt++) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, 0) != sizeof r)
            r = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull + (uint64_t)attempt;
        snprintf(f->tmp_path, n, "%s/.%s.tmp-%016llx", dir, base, (unsigned long long)r);
        f->fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd >= 0 && !lock_new(f)) { /* swept before it was locked: another name */
            close(f->fd);
            f->fd = -1;
            errno = EEXIST;
        }
        if (f->fd >= 0 || errno != EEXIST)
            break;
    }
    if (f->fd < 0) {
        int e = errno;
        free(f->tmp_path);
        f->tmp_path = NULL;
        rc = shard_fail(err, shard_errno_code(e), "%s: cannot create (in folder %s): %s", path,
                        dir, strerror(e));
        goto done;
    }
    rc = 0;
done:
    free(base_copy);
    free(dir);
    return rc;
}

void shard_sink_file_sweep(const char *dir, const ShardKeySet *names)
{
    int fd = shard_dir_open(dir); /* a link at dir is not followed: nothing there is ours */
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (fd >= 0 && !d)
        close(fd);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *tmp = NULL; /* the last ".tmp-": a name may hold one itself */
        for (const char *p = e->d_name; (p = strstr(p, ".tmp-")); p++)
            tmp = p;
        if (e->d_name[0] != '.' || !tmp)
            continue;
        char *base = strndup(e->d_name + 1, (size_t)(tmp - e->d_name - 1));
        if (base && (!names || shard_keyset_has(names, base))) {
            int t = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            if (t >= 0 && flock(t, LOCK_EX | LOCK_NB) == 0)
                unlinkat(dirfd(d), e->d_name, 0); /* nobody writes it: a killed writer's */
            if (t >= 0)
                close(t);
        }
        free(base);
    }
    if (d)
        closedir(d);
}
