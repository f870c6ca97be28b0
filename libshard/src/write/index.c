/*
 * Index building (shard/verify.h: shard_index_build): the .idx of a shard made elsewhere
 * (formats/index.md), from one pass over its members' headers, written beside it.
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "shard/file.h"
#include "shard/verify.h"
#include "tar/idxbuild.h"

int shard_index_build(const char *url, const char *idx_path, uint64_t *nsamples, ShardError *err)
{
    ShardFileSettings fs;
    shard_index_scan_settings(&fs);
    ShardFile *f;
    int rc = shard_file_open(&f, url, &fs, err);
    if (rc)
        return rc;
    ShardBuf lines = {0};
    uint64_t n = 0;
    char msg[SHARD_ERROR_MAX];
    rc = shard_index_scan(f, url, &lines, &n, msg);
    shard_file_free(&f);
    char *path = NULL;
    if (!rc) {
        path = idx_path ? strdup(idx_path) : shard_index_path(url);
        rc = path ? shard_index_put(path, n, &lines, NULL, msg) /* into a bucket too */
                  : shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    }
    free(path);
    shard_buf_free(&lines);
    if (rc)
        return shard_report(err, rc, msg);
    if (nsamples)
        *nsamples = n;
    return 0;
}
