/*
 * Index files (index.h), and index building (shard/verify.h: shard_index_build): the .idx
 * of a shard made elsewhere (formats/index.md), from one pass over its samples.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "shard/file.h"
#include "shard/verify.h"
#include "sink/sink.h"
#include "write/index.h"

int shard_index_put(const char *path, uint64_t n, const ShardBuf *lines,
                    const ShardSinkSettings *ks, char *err)
{
    ShardSink *k;
    int rc = shard_sink_open(&k, path, ks, err);
    if (rc)
        return rc;
    char head[64];
    int hn = snprintf(head, sizeof head, "v1.2 %llu\n", (unsigned long long)n);
    rc = shard_sink_write(k, head, (size_t)hn, err);
    if (!rc)
        rc = shard_sink_write(k, lines->data, lines->len, err);
    if (rc) {
        shard_sink_abort(&k);
        return rc;
    }
    return shard_sink_commit(&k, NULL, NULL, err);
}

int shard_index_build(const char *url, const char *idx_path, uint64_t *nsamples, ShardError *err)
{
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    fs.load_index = 0; /* fields as the reader sees them: a.JPG and a.jpg clash, as in DALI */
    ShardFile *f;
    int rc = shard_file_open(&f, url, &fs, err);
    if (rc)
        return rc;
    ShardBuf lines = {0};
    const ShardSampleView *v;
    uint64_t n = 0;
    char msg[SHARD_ERROR_MAX];
    while ((rc = shard_file_next(f, &v)) == 0) {
        for (size_t k = 0; k < v->nfields && !rc; k++) {
            const ShardFieldView *fv = &v->fields[k];
            for (const char *p = fv->member; *p; p++)
                if (*p == ' ' || (*p >= '\t' && *p <= '\r')) {
                    shard_fail(msg, SHARD_ERR_UNSUPPORTED,
                               "%s: offset %llu: member '%s' has whitespace in its name, which "
                               "the index format cannot hold",
                               url, (unsigned long long)fv->offset, fv->member);
                    rc = SHARD_ERR_UNSUPPORTED;
                    break;
                }
            /* The ext as the tar stores it: DALI lower-cases it when it loads the index. */
            const char *slash = strrchr(fv->member, '/');
            const char *ext = strchr(slash ? slash + 1 : fv->member, '.');
            ext = ext ? ext + 1 : fv->name;
            if (!rc && !*ext) {
                shard_fail(msg, SHARD_ERR_UNSUPPORTED,
                           "%s: offset %llu: member '%s' has an empty field name, which the "
                           "index format cannot hold",
                           url, (unsigned long long)fv->offset, fv->member);
                rc = SHARD_ERR_UNSUPPORTED;
            }
            if (!rc)
                rc = shard_buf_printf(&lines, "%s%s %llu %llu %s", k ? " " : "", ext,
                                      (unsigned long long)fv->offset,
                                      (unsigned long long)fv->size, fv->member);
        }
        if (rc || (rc = shard_buf_append(&lines, "\n", 1)))
            break;
        n++;
    }
    if (rc == SHARD_EOS && n == 0) {
        shard_fail(msg, SHARD_ERR_FORMAT, "%s: no samples (DALI's index needs at least one)", url);
        rc = SHARD_ERR_FORMAT;
    } else if (rc == SHARD_EOS) {
        rc = 0;
    } else if (rc == SHARD_ERR_NOMEM) {
        shard_fail(msg, rc, "out of memory");
    } else if (rc != SHARD_ERR_UNSUPPORTED) {
        snprintf(msg, sizeof msg, "%s", shard_file_error(f));
    }
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
