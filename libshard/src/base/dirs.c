/*
 * Folders made when missing (dirs.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/dirs.h"
#include "base/error.h"

int shard_make_dirs(const char *dir, const char *what, char *err)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return shard_fail(err, SHARD_ERR_INVALID, "%s %s: path too long", what, dir);
    for (char *s = p + 1;; s++) {
        if (*s && *s != '/')
            continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) && errno != EEXIST)
            return shard_fail(err, shard_errno_code(errno), "%s %s: cannot make %s: %s", what,
                              dir, p, strerror(errno));
        *s = c;
        if (!c)
            return 0;
    }
}

int shard_private_dir(const char *dir, const char *what, char *err)
{
    struct stat st;
    if (lstat(dir, &st) != 0) { /* made: its parents as mkdir -p, itself for this user alone */
        char parent[PATH_MAX];
        const char *slash = strrchr(dir, '/');
        int rc = 0;
        if (slash && slash > dir && (size_t)(slash - dir) < sizeof parent) {
            memcpy(parent, dir, (size_t)(slash - dir));
            parent[slash - dir] = 0;
            rc = shard_make_dirs(parent, what, err);
        }
        if (rc)
            return rc;
        if (mkdir(dir, 0700) && errno != EEXIST)
            return shard_fail(err, shard_errno_code(errno), "%s %s: cannot make it: %s", what,
                              dir, strerror(errno));
    }
    if (lstat(dir, &st) != 0)
        return shard_fail(err, shard_errno_code(errno), "%s %s: %s", what, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0022))
        return shard_fail(err, SHARD_ERR_INVALID,
                          "%s %s: %s: a cache is kept only in a folder of this user's that no "
                          "other can write (chmod go-w it, or name another)",
                          what, dir,
                          !S_ISDIR(st.st_mode) ? "not a folder (a link to one is not taken)"
                          : st.st_uid != geteuid() ? "owned by another user"
                                                   : "others can write it");
    return 0;
}

const char *shard_file_kind(unsigned mode)
{
    return S_ISLNK(mode) ? "a symbolic link" : S_ISFIFO(mode) ? "a FIFO" : S_ISSOCK(mode) ? "a socket"
           : S_ISCHR(mode) || S_ISBLK(mode) ? "a device" : S_ISDIR(mode) ? "a folder" : "a file";
}

int shard_dir_open(const char *dir)
{
    char p[PATH_MAX];
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') /* "link/" would be followed */
        n--;
    if (n >= sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(p, dir, n);
    p[n] = 0;
    return open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}
