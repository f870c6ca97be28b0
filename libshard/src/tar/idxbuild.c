/*
 * Index files made (idxbuild.h): one pass over a shard's headers gives each sample's line
 * (ext, data offset, size, member), as DALI's wds2idx writes them.
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "shard/file.h"
#include "tar/idxbuild.h"

void shard_index_scan_settings(ShardFileSettings *fs)
{
    shard_file_default_settings(fs);
    fs->load_index = 0; /* fields as the reader sees them: a.JPG and a.jpg clash, as in DALI */
    fs->headers_only = 1;
}

/* A field's line: ext as the tar stores it (DALI lower-cases it when it loads the index). */
static int field_line(const char *url, const ShardFieldView *fv, int first, ShardBuf *lines,
                      char *err)
{
    for (const char *p = fv->member; *p; p++)
        if (*p == ' ' || (*p >= '\t' && *p <= '\r'))
            return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                              "%s: offset %llu: member '%s' has whitespace in its name, which "
                              "the index format cannot hold",
                              url, (unsigned long long)fv->offset, fv->member);
    const char *slash = strrchr(fv->member, '/');
    const char *ext = strchr(slash ? slash + 1 : fv->member, '.');
    ext = ext ? ext + 1 : fv->name;
    if (!*ext)
        return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                          "%s: offset %llu: member '%s' has an empty field name, which the "
                          "index format cannot hold",
                          url, (unsigned long long)fv->offset, fv->member);
    if (shard_buf_printf(lines, "%s%s %llu %llu %s", first ? "" : " ", ext,
                         (unsigned long long)fv->offset, (unsigned long long)fv->size,
                         fv->member))
        return shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
    return 0;
}

/* A member whose declared size runs past the next member's header, or the tar's end: a
 * sparse member (GNU tar -S) holds fewer bytes than it declares, with holes between its
 * runs, which no offset and size can point at. */
static int sparse(const char *url, const ShardFieldView *fv, uint64_t next, char *err)
{
    if (fv->offset + fv->size <= next)
        return 0;
    return shard_fail(err, SHARD_ERR_UNSUPPORTED,
                      "%s: offset %llu: member '%s' declares %llu bytes, more than the tar holds "
                      "before %s (a sparse member, as GNU tar -S writes): an index cannot point "
                      "at its data (the shard reads in order)",
                      url, (unsigned long long)fv->offset, fv->member,
                      (unsigned long long)fv->size, next == UINT64_MAX ? "its end" : "the next member");
}

int shard_index_scan(ShardFile *f, const char *url, ShardBuf *lines, uint64_t *n, char *err)
{
    const ShardSampleView *v;
    const ShardFieldView *last = NULL;
    ShardFieldView held;
    char member[4096];
    int rc;
    *n = 0;
    int plain = !strcmp(shard_file_compression(f), "none");
    while ((rc = shard_file_next(f, &v)) == 0) {
        for (size_t k = 0; k < v->nfields && !rc; k++) {
            /* the member before, against this one's header (512 bytes before its data) */
            if (last && (rc = sparse(url, last, v->fields[k].offset - 512, err)))
                return rc;
            rc = field_line(url, &v->fields[k], k == 0, lines, err);
            held = v->fields[k];
            snprintf(member, sizeof member, "%s", held.member);
            held.member = member;
            last = &held;
        }
        if (!rc && shard_buf_append(lines, "\n", 1))
            rc = shard_fail(err, SHARD_ERR_NOMEM, "out of memory");
        if (rc)
            return rc;
        (*n)++;
    }
    if (rc != SHARD_EOS)
        return shard_fail(err, rc, "%s", shard_file_error(f));
    int64_t size = shard_file_size(f);
    if (last && plain && size > 0 && (rc = sparse(url, last, (uint64_t)size, err)))
        return rc;
    if (*n == 0)
        return shard_fail(err, SHARD_ERR_FORMAT, "%s: no samples (DALI's index needs at least one)",
                          url);
    return 0;
}

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
