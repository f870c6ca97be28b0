/*
 * Reading one shard (shard/file.h): a source (source.h) opened by URL, read in order by
 * the tar reader (tar.c) or, after a seek, sample by sample through the index (seek.c).
 * Samples are built in a sample buffer (samplebuf.c) and handed out as views, or as owned
 * items (item.c) that keep viewing the source's mapping through a hold.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/text.h"
#include "shard/file.h"
#include "source/memory.h"
#include "source/open.h"
#include "source/rawstream.h"
#include "tar/item.h"
#include "tar/samplebuf.h"
#include "tar/seek.h"
#include "tar/shardfile.h"
#include "tar/tar.h"

#define ADOPT_MIN 4096

struct ShardFile {
    ShardFileSettings s;
    ShardSource *src;
    char err[SHARD_ERROR_MAX];
    int failed;          /* sticky error code */
    int bad_frame;       /* opening the tar failed in a zstd frame that does not decompress */
    ShardTar *tar;       /* reading in order */
    ShardIndexed *ix;    /* reading by index, NULL without an index */
    int indexed;         /* reading by index since a seek */
    int listing;         /* headers only, listed from an index proven to be the shard's */
    int index_tried;     /* the index was looked for (at open, or at the first seek) */
    uint64_t next_index; /* the number of the next sample */
    ShardSampleBuf sb;   /* the sample handed out */
};

void shard_file_default_settings(ShardFileSettings *s)
{
    memset(s, 0, sizeof *s);
    s->lowercase = 1;
    s->load_index = 1;
    s->index = NULL;
    s->on_skip = NULL;
    s->on_skip_reason = NULL;
    s->cookie = NULL;
    s->max_member_size = SHARD_DEFAULT_MAX_MEMBER;
    s->max_fields = SHARD_DEFAULT_MAX_FIELDS;
    s->max_name = SHARD_DEFAULT_MAX_NAME;
    s->max_sample_size = SHARD_DEFAULT_MAX_SAMPLE;
}

char *shard_index_path(const char *url)
{
    static const char *const suffixes[] = {".tar.zst", ".tar.gz", ".tgz", ".tar", ".zst"};
    size_t len = strlen(url);
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        size_t k = strlen(suffixes[i]);
        if (len > k && !strcmp(url + len - k, suffixes[i])) {
            len -= k;
            break;
        }
    }
    char *p = malloc(len + 5);
    if (p) {
        memcpy(p, url, len);
        memcpy(p + len, ".idx", 5);
    }
    return p;
}

static int fail_open(ShardFile *f, ShardError *err, int rc)
{
    shard_report(err, rc, f->err);
    shard_file_free(&f);
    return rc;
}

/* The compression a shard's name promises, for a remote shard whose first bytes are not
 * read until its samples are (a seek reads by index without them). */
static const char *named_compression(const char *url)
{
    if (shard_ends_with(url, ".zst"))
        return "zstd";
    if (shard_ends_with(url, ".gz") || shard_ends_with(url, ".tgz"))
        return "gzip";
    return "none";
}

/* Opens the tar reader (at the first sample read in order, for a costly source). */
static int open_tar(ShardFile *f)
{
    if (f->tar)
        return 0;
    int rc = shard_tar_open(&f->tar, f->src, &f->s, &f->bad_frame, f->err);
    return rc ? (f->failed = rc) : 0;
}

/* Loads the index (and a .tar.zst's seek table) for reading by sample number. */
static int open_index(ShardFile *f, const char *compression)
{
    if (f->index_tried)
        return 0;
    f->index_tried = 1;
    /* an index numbers samples: members read one by one have no use for it */
    int want_index = f->s.load_index && !f->s.members && shard_source_seekable(f->src);
    if (!want_index && strcmp(compression, "zstd"))
        return 0;
    char *ipath = NULL;
    if (want_index &&
        !(ipath = f->s.index ? strdup(f->s.index) : shard_index_path(f->src->url)))
        return shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory");
    int rc = shard_indexed_open(&f->ix, f->src, ipath, f->s.index != NULL, compression, &f->s,
                                f->err);
    if (rc && f->s.index) { /* an index of the cache's: the message names the shard too */
        char msg[SHARD_ERROR_MAX];
        memcpy(msg, f->err, sizeof msg);
        shard_fail(f->err, rc, "%s: through the index libshard made of it, %.900s",
                   f->src->url, msg);
    }
    free(ipath);
    return rc;
}

int shard_file_open_deferred(ShardFile **out, ShardSource *src, const ShardFileSettings *s,
                             ShardError *err)
{
    *out = NULL;
    ShardFile *f = calloc(1, sizeof *f);
    if (!f) {
        shard_source_put(src);
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    }
    if (s)
        f->s = *s;
    else
        shard_file_default_settings(&f->s);
    f->src = src;
    *out = f;
    return 0;
}

int shard_file_start(ShardFile *f)
{
    int rc = open_tar(f);
    if (!rc)
        rc = open_index(f, shard_tar_compression(f->tar));
    return rc ? (f->failed = rc) : 0;
}

int shard_file_bad_frame(const ShardFile *f)
{
    return f->bad_frame || (f->tar && shard_tar_bad_frame(f->tar));
}

int shard_file_open_source(ShardFile **out, ShardSource *src, const ShardFileSettings *s,
                           ShardError *err)
{
    int rc = shard_file_open_deferred(out, src, s, err);
    if (rc || src->costly) /* each request counts: nothing is read before it is needed */
        return rc;
    if ((rc = shard_file_start(*out))) {
        ShardFile *f = *out;
        *out = NULL;
        return fail_open(f, err, rc);
    }
    return 0;
}

void shard_file_prefetch(ShardFile *f)
{
    if (!f->tar && !f->failed)
        shard_source_prefetch(f->src);
}

void shard_file_cost(const ShardFile *f, ShardReadCost *out) { *out = f->src->cost; }

int shard_file_open_stream(ShardFile **out, ShardStream **stream, const ShardFileSettings *s,
                           ShardError *err)
{
    *out = NULL;
    ShardSource *src;
    char msg[SHARD_ERROR_MAX];
    int rc = shard_stream_take_source(stream, &src, msg);
    if (rc)
        return shard_report(err, rc, msg);
    return shard_file_open_source(out, src, s, err);
}

int shard_file_open_on(ShardFile **out, const char *url, const ShardFileSettings *s,
                       ShardSourceThread *thread, ShardError *err)
{
    *out = NULL;
    ShardSource *src;
    char msg[SHARD_ERROR_MAX];
    int rc = shard_source_open_on(&src, url, s ? s->remote : NULL,
                                  SHARD_SOURCE_SEQUENTIAL | SHARD_SOURCE_SHARD |
                                      (s && s->map ? SHARD_SOURCE_MAP : 0) |
                                      (s && s->headers_only ? SHARD_SOURCE_SPARSE : 0),
                                  thread, msg);
    if (rc)
        return shard_report(err, rc, msg);
    return shard_file_open_source(out, src, s, err);
}

int shard_file_open(ShardFile **out, const char *url, const ShardFileSettings *s, ShardError *err)
{
    return shard_file_open_on(out, url, s, NULL, err);
}

int shard_file_open_memory(ShardFile **out, const void *data, size_t size, const char *name,
                           const ShardFileSettings *s, ShardError *err)
{
    *out = NULL;
    ShardSource *src;
    char msg[SHARD_ERROR_MAX];
    ShardFileSettings local;
    if (!s)
        shard_file_default_settings(&local);
    else
        local = *s;
    if (!local.index)
        local.load_index = 0; /* a buffer has no file beside it */
    int rc = shard_source_memory(&src, data, size, name, msg);
    if (rc)
        return shard_report(err, rc, msg);
    return shard_file_open_source(out, src, &local, err);
}

/* The next sample into f->sb: in tar order, or by index after a seek. */
static int next(ShardFile *f, uint64_t *offset)
{
    if (f->failed)
        return f->failed;
    int rc;
    /* a listing from the start: the index, when it was proven to be this shard's (its
     * first and last headers and the archive's end read where it says), lists what the
     * headers would, without reading them */
    if (f->s.headers_only && !f->indexed && f->next_index == 0 && f->ix &&
        shard_indexed_proven(f->ix) && shard_indexed_index(f->ix)->version == 12)
        f->listing = 1;
    if (f->listing) {
        if (f->next_index >= shard_indexed_count(f->ix))
            return SHARD_EOS;
        rc = shard_indexed_list(f->ix, f->next_index, &f->s, &f->sb, offset, f->err);
    } else if (f->indexed) {
        if (f->next_index >= shard_indexed_count(f->ix))
            return SHARD_EOS;
        rc = shard_indexed_read(f->ix, f->next_index, &f->s, &f->sb, offset, f->err);
    } else if (!(rc = open_tar(f))) {
        rc = shard_tar_next(f->tar, &f->sb, offset, f->err);
    }
    if (rc && rc != SHARD_EOS)
        f->failed = rc;
    return rc;
}

int shard_file_next(ShardFile *f, const ShardSampleView **out)
{
    *out = NULL;
    uint64_t offset;
    int rc = next(f, &offset);
    if (rc)
        return rc;
    *out = shard_sb_publish(&f->sb, f->src->url, f->next_index++, offset);
    return 0;
}

int shard_file_take(ShardFile *f, ShardItem **out) { return shard_file_take_pooled(f, NULL, out); }

int shard_file_take_pooled(ShardFile *f, ShardBlockPool *pool, ShardItem **out)
{
    *out = NULL;
    f->sb.pool = pool;
    const ShardSampleView *v;
    int rc = shard_file_next(f, &v);
    if (rc)
        return rc;
    ShardHold *small[16];
    ShardHold **holds = f->sb.n <= 16 ? small : malloc(f->sb.n * sizeof *holds);
    if (holds)
        for (size_t i = 0; i < f->sb.n; i++)
            holds[i] = f->sb.recs[i].hold;
    /* With a pool to refill the arena from, the sample takes the arena's copies over
     * rather than copying them again; a sample of views only has names there. */
    if (!holds)
        *out = NULL;
    else if (pool && f->sb.arena.len >= ADOPT_MIN)
        *out = shard_item_adopt(v, holds, 0, pool, &f->sb.arena);
    else
        *out = shard_item_new(v, holds, 0, pool);
    if (holds != small)
        free(holds);
    if (!*out)
        return f->failed = shard_fail(f->err, SHARD_ERR_NOMEM, "%s: out of memory", f->src->url);
    return 0;
}

/* shard_file_seek; in_order: what follows is read in order from i on. */
static int seek(ShardFile *f, uint64_t i, int in_order)
{
    if (f->failed)
        return f->failed;
    int rc = open_index(f, f->tar ? shard_tar_compression(f->tar)
                                  : named_compression(f->src->url));
    if (rc)
        return rc; /* not sticky: the shard can still be read in order */
    if (!f->ix)
        return shard_fail(f->err, SHARD_ERR_UNSUPPORTED,
                          "%s: no index (write one with 'shardcat index')", f->src->url);
    if (!shard_indexed_can_seek(f->ix))
        return shard_fail(f->err, SHARD_ERR_UNSUPPORTED,
                          "%s: seeking needs a local .tar, or a .tar.zst with a seek table",
                          f->src->url);
    if (i >= shard_indexed_count(f->ix))
        return shard_fail(f->err, SHARD_ERR_NOT_FOUND, "%s: sample %llu of %llu", f->src->url,
                          (unsigned long long)i, (unsigned long long)shard_indexed_count(f->ix));
    /* A remote shard not read yet, to be read on from sample i: one Range request from
     * there, where reading by index asks for each member. */
    uint64_t off;
    if (in_order && f->src->costly && !f->tar && f->src->pos == 0 && !f->indexed &&
        shard_indexed_stream_from(f->ix, i, &off) &&
        shard_source_skip(f->src, (int64_t)off) == (int64_t)off) {
        f->next_index = i;
        return 0;
    }
    f->indexed = 1;
    f->next_index = i;
    return 0;
}

int shard_file_seek(ShardFile *f, uint64_t i) { return seek(f, i, 0); }

int shard_file_seek_in_order(ShardFile *f, uint64_t i) { return seek(f, i, 1); }

void shard_file_run_to(ShardFile *f, uint64_t last)
{
    if (f->ix)
        shard_indexed_run_to(f->ix, last);
}

int64_t shard_file_count(const ShardFile *f)
{
    if (!f->index_tried && !f->failed) { /* a remote shard's index, loaded when first asked */
        ShardFile *m = (ShardFile *)f;
        if (open_index(m, shard_file_compression(f)))
            return -1;
    }
    return f->ix ? (int64_t)shard_indexed_count(f->ix) : -1;
}

const char *shard_file_compression(const ShardFile *f)
{
    return f->tar ? shard_tar_compression(f->tar) : named_compression(f->src->url);
}

int64_t shard_file_size(const ShardFile *f) { return f->src->size; }

const char *shard_file_error(const ShardFile *f) { return f->err; }

void shard_file_free(ShardFile **pf)
{
    if (!pf || !*pf)
        return;
    ShardFile *f = *pf;
    shard_sb_free(&f->sb);
    shard_indexed_free(&f->ix);
    shard_tar_free(&f->tar);
    shard_source_put(f->src);
    free(f);
    *pf = NULL;
}
