/*
 * The shard writer (shard/writer.h): settings and patterns, samples checked and written as
 * tar members, rotation. One output shard's file (its tar stream, zstd frames and seek
 * table, its index) is outshard.c's; the DESIGN comment is in writerdef.h.
 */
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>
#include <zstd.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/text.h"
#include "remote/store.h"
#include "shard/file.h"
#include "shard/names.h"
#include "shard/writer.h"
#include "sink/sink.h"
#include "tar/columns.h"
#include "tar/seektable.h"
#include "write/outshard.h"
#include "write/shardwriter.h"
#include "write/writerdef.h"

int shard_digests_parse(const char *names, int *bits)
{
    if (!names)
        return SHARD_ERR_INVALID;
    if (!strcmp(names, "none")) {
        *bits = 0;
        return 0;
    }
    int b = 0;
    for (const char *t = names;;) {
        size_t n = strcspn(t, ",");
        if (n == 6 && !strncmp(t, "sha256", 6))
            b |= SHARD_DIGEST_SHA256;
        else if (n == 3 && !strncmp(t, "md5", 3))
            b |= SHARD_DIGEST_MD5;
        else
            return SHARD_ERR_INVALID;
        if (!t[n])
            break;
        t += n + 1;
    }
    *bits = b;
    return 0;
}

void shard_writer_default_settings(ShardWriterSettings *s)
{
    memset(s, 0, sizeof *s);
    s->pattern = NULL;
    s->first_shard = 0;
    s->maxcount = 100000;
    s->maxsize = 3000000000ull;
    s->compression = SHARD_COMPRESSION_AUTO;
    s->level = 3;
    s->frame_size = 4u << 20;
    s->mtime = 0;
    s->write_index = 1;
    s->checksums = SHARD_DIGEST_SHA256;
    s->sync = 1;
}

int shard_writes_zstd(int compression, const char *pattern)
{
    return compression == SHARD_COMPRESSION_ZSTD ||
           (compression == SHARD_COMPRESSION_AUTO && shard_ends_with(pattern, ".zst"));
}

/* The number of conversions, %[0][width]{d,i,u} (%% anywhere), or -1 for another. */
static int pattern_check(const char *p)
{
    int convs = 0;
    for (; *p; p++) {
        if (*p != '%')
            continue;
        p++;
        if (*p == '%')
            continue;
        while (*p == '0')
            p++;
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p != 'd' && *p != 'i' && *p != 'u')
            return -1;
        convs++;
    }
    return convs;
}

/* Rewrites the single conversion to use unsigned long long, so any width works. */
static char *pattern_normalize(const char *p)
{
    size_t n = strlen(p);
    char *out = malloc(n + 3);
    if (!out)
        return NULL;
    char *o = out;
    while (*p) {
        if (*p != '%') {
            *o++ = *p++;
            continue;
        }
        *o++ = *p++;
        if (*p == '%') {
            *o++ = *p++;
            continue;
        }
        while ((*p >= '0' && *p <= '9'))
            *o++ = *p++;
        *o++ = 'l';
        *o++ = 'l';
        *o++ = 'u';
        p++;
    }
    *o = 0;
    return out;
}

int shard_writer_open(ShardWriter **out, const ShardWriterSettings *s, ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    *out = NULL;
    if (!s || !s->pattern || !*s->pattern)
        return shard_report(err, SHARD_ERR_INVALID, "writer: no output pattern set");
    int convs = pattern_check(s->pattern);
    if (convs != 1 && (convs != 0 || s->maxcount || s->maxsize)) {
        shard_fail(msg, SHARD_ERR_INVALID,
                   convs == 0 ? "writer: pattern '%s' needs an integer conversion such as %%06d "
                                "(without one it names a single file, with maxcount and maxsize 0)"
                              : "writer: pattern '%s' needs exactly one integer conversion such as %%06d",
                   s->pattern);
        return shard_report(err, SHARD_ERR_INVALID, msg);
    }
    int bad = shard_sink_check(s->pattern, msg);
    if (bad)
        return shard_report(err, bad, msg);
    int zstd = shard_writes_zstd(s->compression, s->pattern);
    if (s->compression < SHARD_COMPRESSION_AUTO || s->compression > SHARD_COMPRESSION_ZSTD)
        return shard_report(err, SHARD_ERR_INVALID, "writer: unknown compression");
    if (zstd && (s->level < ZSTD_minCLevel() || s->level > ZSTD_maxCLevel() || s->level == 0)) {
        shard_fail(msg, SHARD_ERR_INVALID, "writer: zstd level %d is outside 1..%d", s->level,
                   ZSTD_maxCLevel());
        return shard_report(err, SHARD_ERR_INVALID, msg);
    }
    if (zstd && (s->frame_size == 0 || s->frame_size > MAX_FRAME_SIZE))
        return shard_report(err, SHARD_ERR_INVALID,
                            "writer: frame size must be between 1 byte and 1 GiB");

    ShardWriter *w = calloc(1, sizeof *w);
    if (!w)
        return shard_report(err, SHARD_ERR_NOMEM, "writer: out of memory");
    w->s = *s;
    w->zstd = zstd;
    w->pattern = pattern_normalize(s->pattern);
    w->s.pattern = w->pattern;
    w->next_number = s->first_shard;
    w->single = convs == 0;
    /* the pattern's store, resolved once for every shard (its remote, for a bucket) */
    int src = shard_store_open(&w->store, s->pattern, s->remote, msg);
    if (src) {
        shard_writer_free(&w);
        return shard_report(err, src, msg);
    }
    w->remote = shard_store_remote(w->store);
    if (zstd) {
        w->cctx = ZSTD_createCCtx();
        if (w->cctx) {
            ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, s->level);
            ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
            ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1);
        }
    }
    w->entry = archive_entry_new();
    w->utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (!w->utf8)
        w->utf8 = newlocale(LC_CTYPE_MASK, "en_US.UTF-8", (locale_t)0);
    if (!w->pattern || !w->entry || (zstd && !w->cctx)) {
        shard_writer_free(&w);
        return shard_report(err, SHARD_ERR_NOMEM, "writer: out of memory");
    }
    *out = w;
    return 0;
}

int shard_writer_rotates(uint64_t count, uint64_t size, uint64_t sample_size, uint64_t maxcount,
                         uint64_t maxsize)
{
    return count && ((maxcount && count >= maxcount) || (maxsize && size + sample_size > maxsize));
}

uint64_t shard_writer_sample_size(const ShardSample *sample)
{
    uint64_t total = 0;
    for (size_t i = 0; i < sample->nfields; i++)
        total += 512 + ((sample->fields[i].size + 511) & ~(uint64_t)511);
    return total;
}

static int field_cmp(const void *a, const void *b)
{
    const ShardField *x = *(const ShardField *const *)a, *y = *(const ShardField *const *)b;
    return strcmp(x->name, y->name);
}

static int field_name_ok(const char *f)
{
    if (!*f || *f == '.' || !shard_utf8_valid(f, strlen(f)))
        return 0;
    for (const unsigned char *p = (const unsigned char *)f; *p; p++)
        if (*p == '/' || *p <= ' ' || *p == 0x7f)
            return 0;
    return 1;
}

static int check_sample(ShardWriter *w, const ShardSample *sample)
{
    if (!sample->key || shard_key_check(sample->key))
        return shard_fail(w->err, SHARD_ERR_INVALID,
                          "sample key '%s' is not a valid key (formats/shard.md: no '.' or "
                          "whitespace in the basename, no empty or '..' component)",
                          sample->key ? sample->key : "(null)");
    if (sample->nfields == 0)
        return shard_fail(w->err, SHARD_ERR_INVALID, "sample '%s' has no fields", sample->key);
    if (w->capsorted < sample->nfields) {
        const ShardField **p = realloc(w->sorted, sample->nfields * sizeof *p);
        if (!p)
            return shard_fail(w->err, SHARD_ERR_NOMEM, "writer: out of memory");
        w->sorted = p;
        w->capsorted = sample->nfields;
    }
    for (size_t i = 0; i < sample->nfields; i++) {
        const ShardField *f = &sample->fields[i];
        if (!f->name || !field_name_ok(f->name))
            return shard_fail(w->err, SHARD_ERR_INVALID,
                              "sample '%s': field name '%s' is empty, starts with '.', or "
                              "holds '/', whitespace or invalid UTF-8",
                              sample->key, f->name ? f->name : "(null)");
        if (f->size && !f->data)
            return shard_fail(w->err, SHARD_ERR_INVALID, "sample '%s': field '%s' has no data",
                              sample->key, f->name);
        w->sorted[i] = f;
    }
    qsort(w->sorted, sample->nfields, sizeof *w->sorted, field_cmp);
    for (size_t i = 1; i < sample->nfields; i++)
        if (!strcmp(w->sorted[i - 1]->name, w->sorted[i]->name))
            return shard_fail(w->err, SHARD_ERR_INVALID, "sample '%s': field '%s' given twice",
                              sample->key, w->sorted[i]->name);
    return 0;
}

static int write_member(ShardWriter *w, const char *key, const ShardField *f)
{
    w->name.len = 0;
    if (shard_buf_printf(&w->name, "%s.%s", key, f->name))
        return shard_fail(w->err, SHARD_ERR_NOMEM, "writer: out of memory");
    const char *name = (const char *)w->name.data;
    struct archive_entry *e = w->entry;
    archive_entry_clear(e);
    archive_entry_copy_pathname(e, name); /* UTF-8, as the locale below says */
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)f->size);
    archive_entry_set_mtime(e, w->s.mtime, 0);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    uint64_t header_off = w->tar_off;
    if (!w->utf8) {
        for (const unsigned char *q = (const unsigned char *)name; *q; q++)
            if (*q >= 0x80)
                return shard_fail(w->err, SHARD_ERR_UNSUPPORTED,
                                  "%s: member '%s': non-ASCII names need the C.UTF-8 locale, "
                                  "which this system lacks", w->path, name);
    }
    locale_t old = w->utf8 ? uselocale(w->utf8) : (locale_t)0;
    int r = archive_write_header(w->ar, e);
    if (w->utf8)
        uselocale(old);
    if (r != ARCHIVE_OK || w->cb_rc)
        goto fail;
    uint64_t data_off = w->tar_off;
    const unsigned char *p = f->data;
    size_t left = f->size;
    while (left) {
        la_ssize_t k = archive_write_data(w->ar, p, left);
        if (k <= 0 || w->cb_rc)
            goto fail;
        p += k;
        left -= (size_t)k;
    }
    /* Writes the member's padding now, so a sample ends on a frame boundary. */
    if (archive_write_finish_entry(w->ar) < ARCHIVE_WARN || w->cb_rc)
        goto fail;
    if (w->s.write_index &&
        shard_buf_printf(&w->idx, "%s%s %llu %zu %s", w->idx.len && w->idx.data[w->idx.len - 1] != '\n' ? " " : "",
                         f->name, (unsigned long long)data_off, f->size, name))
        return shard_fail(w->err, SHARD_ERR_NOMEM, "writer: out of memory");
    return 0;
fail:
    if (w->cb_rc) {
        char inner[SHARD_ERROR_MAX];
        memcpy(inner, w->err, sizeof inner);
        return shard_fail(w->err, w->cb_rc, "%s: member '%s' at offset %llu: %s", w->path, name,
                          (unsigned long long)header_off, inner);
    }
    return shard_fail(w->err, SHARD_ERR_IO, "%s: member '%s' at offset %llu: libarchive: %s",
                      w->path, name, (unsigned long long)header_off,
                      archive_error_string(w->ar));
}

/* The sample's image size, for the columns beside the index: "-" without an image or when
 * its header does not parse (the writer packs bytes; whoever hands them in checks them). */
static int note_geometry(ShardWriter *w, const ShardSample *sample)
{
    if (shard_array_grow(&w->cols, &w->capcols, (size_t)(w->count + 1) * SHARD_GEOMETRY_NCOLS,
                         sizeof *w->cols, 256))
        return SHARD_ERR_NOMEM;
    const ShardField *image = NULL;
    int rank = -1;
    for (size_t i = 0; i < sample->nfields; i++)
        if (shard_columns_better_image(sample->fields[i].name, &rank))
            image = &sample->fields[i];
    uint32_t *out = w->cols + w->count * SHARD_GEOMETRY_NCOLS;
    out[0] = out[1] = SHARD_COLUMN_NONE;
    if (image)
        shard_columns_geometry(image->data, image->size, out, NULL, 0);
    return 0;
}

int shard_writer_add(ShardWriter *w, const ShardSample *sample)
{
    if (w->failed || w->finished)
        return shard_fail(w->err, SHARD_ERR_STATE, "writer: %s",
                          w->finished ? "already finished" : "a previous call failed");
    int rc = check_sample(w, sample);
    if (rc)
        return rc;
    uint64_t est = shard_writer_sample_size(sample);
    if (w->open && shard_writer_rotates(w->count, w->size_est, est, w->s.maxcount, w->s.maxsize)) {
        if ((rc = shard_writer_finish_shard(w)))
            goto fail;
    }
    if (!w->open && (rc = shard_writer_start_shard(w)))
        goto fail;
    size_t frame_before = w->frame.len;
    for (size_t i = 0; i < sample->nfields; i++)
        if ((rc = write_member(w, sample->key, w->sorted[i])))
            goto fail;
    if (w->s.write_index && (shard_buf_append(&w->idx, "\n", 1) || note_geometry(w, sample))) {
        rc = shard_fail(w->err, SHARD_ERR_NOMEM, "writer: out of memory");
        goto fail;
    }
    w->count++;
    w->size_est += est;
    /* A frame never splits a sample: when this sample took the frame past frame_size,
     * the frame is what came before it, and the sample starts the next one. */
    if (w->zstd && frame_before && w->frame.len > w->s.frame_size &&
        (rc = shard_writer_flush_frame(w, frame_before)))
        goto fail;
    return 0;
fail:
    w->failed = 1;
    return rc;
}

int shard_writer_finish(ShardWriter *w)
{
    if (w->failed)
        return shard_fail(w->err, SHARD_ERR_STATE, "writer: a previous call failed");
    if (w->finished)
        return 0;
    w->finished = 1;
    if (w->single && !w->open && !w->ninfos) { /* the named file, even with no sample */
        int rc = shard_writer_start_shard(w);
        if (rc) {
            w->failed = 1;
            return rc;
        }
    }
    if (w->open) {
        int rc = shard_writer_finish_shard(w);
        if (rc) {
            w->failed = 1;
            return rc;
        }
    }
    return 0;
}

size_t shard_writer_count(const ShardWriter *w)
{
    return w->ninfos;
}

const ShardFileInfo *shard_writer_shard(const ShardWriter *w, size_t i)
{
    return i < w->ninfos ? &w->infos[i] : NULL;
}

const char *shard_writer_error(const ShardWriter *w)
{
    return w->err;
}

void shard_writer_free(ShardWriter **pw)
{
    if (!pw || !*pw)
        return;
    ShardWriter *w = *pw;
    if (w->ar)
        archive_write_free(w->ar);
    shard_sink_abort(&w->sink);
    shard_store_free(&w->store);
    archive_entry_free(w->entry);
    if (w->utf8)
        freelocale(w->utf8);
    ZSTD_freeCCtx(w->cctx);
    for (size_t i = 0; i < w->ninfos; i++)
        free((char *)w->infos[i].url);
    free(w->infos);
    free(w->path);
    free(w->pattern);
    free(w->seek);
    free(w->sorted);
    shard_buf_free(&w->idx);
    free(w->cols);
    shard_buf_free(&w->frame);
    shard_buf_free(&w->zout);
    shard_buf_free(&w->name);
    free(w);
    *pw = NULL;
}
