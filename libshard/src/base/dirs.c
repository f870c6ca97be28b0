/*
 * Folders made when missing (dirs.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
