/*
 * A local folder as a store (localstore.h): paths and file:///PATH. Links are never
 * followed where a name is removed or a folder held: a link put where a folder was expected
 * reaches nothing outside it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/dirs.h"
#include "base/error.h"
#include "base/url.h"
#include "remote/localstore.h"

/* The kernel path of url (a path, or file:///PATH's). */
static const char *local_path(const char *url)
{
    const char *p = shard_url_file_path(url);
    return p ? p : url;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int folder_list(const ShardStore *st, const char *dir, ShardListFn fn, void *cookie,
                       char *err)
{
    (void)st;
    const char *path = local_path(dir);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return 1;
    DIR *d = opendir(path);
    if (!d)
        return shard_fail(err, SHARD_ERR_IO, "%s: cannot list the folder: %s", path,
                          strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char *name = strdup(e->d_name);
        if (!name || shard_array_grow(&names, &cap, n + 1, sizeof *names, 64)) {
            free(name);
            rc = shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        names[n++] = name;
    }
    if (!rc && n)
        qsort(names, n, sizeof *names, name_cmp);
    size_t plen = strlen(path);
    int slash = plen && path[plen - 1] == '/';
    for (size_t i = 0; i < n; i++) {
        char *full = NULL; /* a path, as a file:// folder's shards are read */
        if (!rc && asprintf(&full, "%s%s%s", path, slash ? "" : "/", names[i]) < 0) {
            full = NULL;
            rc = shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", path);
        }
        if (!rc) {
            uint64_t size = fstatat(dirfd(d), names[i], &sb, 0) == 0 ? (uint64_t)sb.st_size : 0;
            rc = fn(cookie, full, size);
        }
        free(full);
        free(names[i]);
    }
    free(names);
    closedir(d);
    return rc;
}

static int folder_stat(const ShardStore *st, const char *url, uint64_t *size, char *err)
{
    (void)st;
    struct stat sb;
    if (lstat(local_path(url), &sb) != 0)
        return shard_fail(err, shard_errno_code(errno), "%s: %s", url, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return shard_fail(err, SHARD_ERR_NOT_FOUND, "%s: %s, not a file of its own (it is not "
                          "followed)", url, shard_file_kind(sb.st_mode));
    *size = (uint64_t)sb.st_size;
    return 0;
}

static int folder_remove(const ShardStore *st, const char *url, char *err)
{
    (void)st;
    const char *path = local_path(url);
    struct stat sb; /* a file or a link goes; anything else is no object of a store */
    if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
        return shard_fail(err, SHARD_ERR_INVALID, "%s: %s, not a file: not removed", url,
                          shard_file_kind(sb.st_mode));
    if (unlink(path) == 0 || errno == ENOENT)
        return 0;
    int e = errno;
    return shard_fail(err, shard_errno_code(e), "%s: cannot remove: %s", url, strerror(e));
}

/* dir's path without its trailing '/' (which would follow a link), into path. */
static int bare_path(const char *dir, char *path, size_t cap, char *err)
{
    const char *local = local_path(dir);
    size_t n = strlen(local);
    while (n > 1 && local[n - 1] == '/')
        n--;
    if (n >= cap)
        return shard_fail(err, SHARD_ERR_INVALID, "%s: path too long", dir);
    memcpy(path, local, n);
    path[n] = 0;
    return 0;
}

static int not_a_folder(const char *dir, mode_t mode, char *err)
{
    return shard_fail(err, SHARD_ERR_INVALID, "%s: holds %s, not a folder: it is neither "
                      "followed nor cleared", dir, shard_file_kind(mode));
}

static int folder_room(const ShardStore *st, const char *dir, char *err)
{
    (void)st;
    char path[4096];
    int rc = bare_path(dir, path, sizeof path, err);
    if (rc)
        return rc;
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return shard_fail(err, shard_errno_code(errno), "%s: cannot make the folder: %s", dir,
                          strerror(errno));
    struct stat sb;
    if (lstat(path, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return not_a_folder(dir, sb.st_mode, err);
    return 0;
}

static void folder_tidy(const ShardStore *st, const char *dir)
{
    (void)st;
    char path[4096], err[SHARD_ERROR_MAX];
    if (!bare_path(dir, path, sizeof path, err))
        rmdir(path);
}

static int folder_hold(const ShardStore *st, const char *dir, int *fd, char *err)
{
    (void)st;
    char path[4096];
    int rc = bare_path(dir, path, sizeof path, err);
    struct stat sb;
    if (rc || lstat(path, &sb) != 0)
        return rc ? rc
                  : errno == ENOENT ? 0
                                    : shard_fail(err, shard_errno_code(errno), "%s: %s", path,
                                                 strerror(errno));
    *fd = S_ISDIR(sb.st_mode) ? open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    return *fd < 0 ? not_a_folder(dir, sb.st_mode, err) : 0;
}

const ShardStoreRow shard_store_folder = {
    .name = "a local folder",
    .path = local_path,
    .can = SHARD_STORE_WRITE | SHARD_STORE_LIST | SHARD_STORE_BESIDE | SHARD_STORE_PRIVATE |
           SHARD_STORE_FILES,
    .list = folder_list,
    .stat = folder_stat,
    .remove = folder_remove,
    .room = folder_room,
    .tidy = folder_tidy,
    .hold = folder_hold,
};
