/*
 * The output's lock (lock.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/dirs.h"
#include "base/error.h"
#include "base/text.h"
#include "sink/lock.h"

/* Whether fd is the file at path (not one its holder removed as it let go). */
static int still_at(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* The holder of a lock alone names itself in the file, for a refused run to say. */
static void name_holder(int fd, const char *note)
{
    char host[128] = "?", line[400], when[32] = "?";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n = snprintf(line, sizeof line, "pid %ld on %s since %s%s\n", (long)getpid(), host, when,
                     note ? note : "");
    if (ftruncate(fd, 0) != 0 || n <= 0 || pwrite(fd, line, (size_t)n, 0) < 0) {
        /* a courtesy: the lock holds without it */
    }
}

/* The refusal for a lock another writer holds: what its holder wrote in fd's file. */
static int refused(int fd, const char *path, const char *what, const char *hint, char *err)
{
    char who[256] = "";
    ssize_t k = pread(fd, who, sizeof who - 1, 0);
    who[k > 0 ? k : 0] = 0;
    for (char *c = who; *c; c++)
        if (*c == '\n')
            *c = *(c + 1) ? ',' : 0;
    return shard_fail(err, SHARD_ERR_STATE, "%s: another run is writing it (%s; lock %s)%s%s",
                      what, who[0] ? who : "held by several together", path, hint ? ": " : "",
                      hint ? hint : "");
}

/* Opens path and takes its lock (shared or alone) without waiting, into *fd; 0, or
 * SHARD_ERR_STATE (held) or SHARD_ERR_IO with err set. */
static int take(const char *path, int shared, const char *what, const char *note,
                const char *hint, int *fd, char *err)
{
    int got, why = 0;
    for (int tries = 0;; tries++) {
        *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
        if (*fd < 0)
            return shard_fail(err, SHARD_ERR_IO, "%s: cannot make the output's lock file: %s",
                              path, strerror(errno));
        /* the holder writes its name into the file: never into another file through a
         * hard link, nor into a FIFO or a device planted at the name */
        struct stat st;
        if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
            int links = fstat(*fd, &st) == 0 ? (int)st.st_nlink : -1;
            close(*fd);
            *fd = -1;
            return shard_fail(err, SHARD_ERR_STATE,
                              "%s: the output's lock file is %s: remove it (a lock is made "
                              "anew, never written through a link)",
                              path, links > 1 ? "a hard link to another file" : "not a plain file");
        }
        got = flock(*fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0;
        why = got ? 0 : errno;
        /* the holder removes the file as it lets go: a lock on a file no longer at the
         * name is no lock, and is taken again. A part finishing holds the set's lock
         * alone for a moment, to remove it if it was the last: a part waits that out. */
        if (!got && shared && why == EWOULDBLOCK && tries < 100) {
            close(*fd);
            nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
            continue;
        }
        if (!got || tries >= 100 || still_at(*fd, path))
            break;
        close(*fd);
    }
    if (!got && why == EWOULDBLOCK) {
        int rc = refused(*fd, path, what, hint, err);
        close(*fd);
        *fd = -1;
        return rc;
    }
    if (got && !shared) /* (not got: a file system without locks, nothing to hold) */
        name_holder(*fd, note);
    return 0;
}

int shard_sink_lock(ShardSinkLock *l, const char *path, int shared, const char *what,
                    const char *note, const char *hint, char *err)
{
    l->fd = -1;
    l->alone = !shared;
    char *dir = shard_dir_of(path);
    if (!(l->path = strdup(path)) || !dir) {
        free(dir);
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    }
    struct stat st; /* the output's folder, made as its files' would be (mkdir -p) */
    int rc = stat(dir, &st) != 0 && errno == ENOENT ? shard_make_dirs(dir, what, err) : 0;
    free(dir);
    if (!rc)
        rc = take(path, shared, what, note, hint, &l->fd, err);
    if (rc)
        shard_sink_unlock(l);
    return rc;
}

void shard_sink_unlock(ShardSinkLock *l)
{
    /* removed while held; a sharer removes it when no other holds it still */
    if (l->fd >= 0 && (l->alone || flock(l->fd, LOCK_EX | LOCK_NB) == 0))
        unlink(l->path);
    if (l->fd >= 0)
        close(l->fd);
    free(l->path);
    l->path = NULL;
    l->fd = -1;
}
