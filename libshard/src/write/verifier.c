/*
 * shard_verify (shard/verify.h): every check a shard allows, each defect reported with
 * where it is.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "base/attr.h"
#include "base/buf.h"
#include "base/digest.h"
#include "base/error.h"
#include "base/text.h"
#include "remote/store.h"
#include "shard/file.h"
#include "shard/image.h"
#include "shard/names.h"
#include "shard/verify.h"
#include "source/open.h"
#include "tar/columns.h"
#include "tar/idx.h"
#include "tar/ustar.h"
#include "tar/seektable.h"
#include "tar/shardfile.h"
#include "tar/tar.h"

void shard_verify_default_settings(ShardVerifySettings *s)
{
    memset(s, 0, sizeof *s);
    s->decode = 0;
    s->check_index = 1;
    s->expect = NULL;
    s->on_defect = NULL;
    s->cookie = NULL;
    s->max_defects = 20;
}

typedef struct Ctx {
    const ShardVerifySettings *s;
    ShardVerifyResult *r;
    const char *url;
} Ctx;

static void defect(Ctx *c, const char *fmt, ...) SHARD_PRINTF(2, 3);
static void defect(Ctx *c, const char *fmt, ...)
{
    c->r->defects++;
    if (!c->s->on_defect)
        return;
    char msg[SHARD_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    shard_escape_message(msg, sizeof msg);
    c->s->on_defect(c->s->cookie, msg);
}

/* The image format a field's name promises ("jpeg", "png"), or NULL. */
static const char *named_format(const char *field)
{
    static const char *const jpeg[] = {"jpg", "jpeg", "jpe", "jfif"};
    const char *ext = strrchr(field, '.');
    ext = ext ? ext + 1 : field;
    for (size_t i = 0; i < sizeof jpeg / sizeof *jpeg; i++)
        if (!shard_ascii_casecmp(ext, jpeg[i]))
            return "jpeg";
    return shard_ascii_casecmp(ext, "png") ? NULL : "png";
}

/* What readers would refuse in a sample: a key against the key rules, fields that clash
 * once lower-cased (the readers' default), a field that would break an index line. */
static void check_names(Ctx *c, const char *url, const ShardSampleView *v)
{
    if (shard_key_check(v->key))
        defect(c, "%s: offset %llu: sample '%s': the key breaks the key rules (an empty, '.' or "
                  "'..' part, a leading '/', whitespace, control characters or not UTF-8)",
               url, (unsigned long long)v->offset, v->key);
    for (size_t k = 0; k < v->nfields; k++) {
        const char *f = v->fields[k].name;
        for (const char *p = f; *p; p++)
            if ((unsigned char)*p <= ' ' || *p == 0x7f) {
                defect(c, "%s: offset %llu: member '%s': the field has whitespace or control "
                          "characters",
                       url, (unsigned long long)v->fields[k].offset, v->fields[k].member);
                break;
            }
        /* a sample's fields are few in any real shard: pairs are cheap (the reader, which
         * must cope with many, uses a hash) */
        for (size_t j = 0; j < k && v->nfields <= 256; j++)
            if (!shard_ascii_casecmp(v->fields[j].name, f)) {
                defect(c, "%s: offset %llu: member '%s': sample '%s' has field '%s' twice for "
                          "readers that lower-case field names (the default; also as '%s')",
                       url, (unsigned long long)v->fields[k].offset, v->fields[k].member, v->key,
                       f, v->fields[j].name);
                break;
            }
    }
}

static int defects_full(const Ctx *c)
{
    return c->s->max_defects && c->r->defects >= c->s->max_defects;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether a zstd frame ends in its content checksum: Content_Checksum_flag, bit 2 of the
 * descriptor after the magic (RFC 8878, 3.1.1.1.1). */
static int frame_has_checksum(const unsigned char *fr, size_t n)
{
    return n > 4 && fr[0] == 0x28 && fr[1] == 0xb5 && fr[2] == 0x2f && fr[3] == 0xfd &&
           (fr[4] & 0x04);
}

/* Each frame alone: it decompresses, its content checksum holds, its size and checksum
 * agree with the seek table. Returns the frame boundaries (tar offsets) in *bounds. */
static void check_frames(Ctx *c, ShardSource *src, uint64_t **bounds, size_t *nbounds)
{
    ShardSeekEntry *e = NULL;
    size_t n = 0;
    uint64_t tb;
    char msg[SHARD_ERROR_MAX];
    *bounds = NULL;
    *nbounds = 0;
    int rc = shard_seek_table_read(src, &e, &n, &tb, msg);
    if (rc == SHARD_ERR_NOT_FOUND) {
        defect(c, "%s: no seek table at the end (not written by libshard, or truncated)", c->url);
        return;
    }
    if (rc) {
        defect(c, "%s", msg);
        return;
    }
    c->r->frames = n;
    ZSTD_DCtx *d = ZSTD_createDCtx();
    ShardBuf out = {0}, packed = {0};
    uint64_t coff = 0, doff = 0;
    *bounds = malloc((n + 1) * sizeof **bounds);
    for (size_t i = 0; i < n && d && *bounds && !defects_full(c); i++) {
        const unsigned char *fr = shard_source_view(src, coff, e[i].csize, &packed);
        out.len = 0;
        if (!fr) {
            defect(c, "%s", src->err);
            break;
        }
        if (e[i].dsize > SHARD_DEFAULT_MAX_MEMBER) { /* as the readers hold frames */
            defect(c, "%s: zstd frame %zu at offset %llu claims %u bytes decompressed, more than "
                      "the limit of %llu (max_member_size)",
                   c->url, i, (unsigned long long)coff, e[i].dsize,
                   (unsigned long long)SHARD_DEFAULT_MAX_MEMBER);
            break;
        }
        if (shard_buf_reserve(&out, e[i].dsize ? e[i].dsize : 1))
            break;
        size_t got = ZSTD_decompressDCtx(d, out.data, e[i].dsize, fr, e[i].csize);
        if (ZSTD_isError(got))
            defect(c, "%s: zstd frame %zu at offset %llu (tar bytes %llu..%llu): %s", c->url, i,
                   (unsigned long long)coff, (unsigned long long)doff,
                   (unsigned long long)(doff + e[i].dsize), ZSTD_getErrorName(got));
        else if (got != e[i].dsize)
            defect(c, "%s: zstd frame %zu at offset %llu: %zu bytes, the seek table says %u",
                   c->url, i, (unsigned long long)coff, got, e[i].dsize);
        else if (e[i].has_checksum && e[i].csize >= 4 && frame_has_checksum(fr, e[i].csize)) {
            /* a table without checksums, or a frame without one, is as the format allows */
            const unsigned char *t = fr + e[i].csize - 4;
            uint32_t ck = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
            if (ck != e[i].checksum)
                defect(c, "%s: seek table entry %zu (frame at offset %llu): checksum %08x, the "
                          "frame's is %08x",
                       c->url, i, (unsigned long long)coff, e[i].checksum, ck);
        }
        (*bounds)[(*nbounds)++] = doff;
        coff += e[i].csize;
        doff += e[i].dsize;
    }
    shard_buf_free(&out);
    shard_buf_free(&packed);
    ZSTD_freeDCtx(d);
    free(e);
}

static int digest_block(void *cookie, const void *block, size_t n, char *err)
{
    (void)err;
    shard_digests_update(cookie, block, n);
    return 0;
}

static void check_manifest(Ctx *c)
{
    const ShardFileInfo *x = c->s->expect;
    char md5[33], sha[65], msg[SHARD_ERROR_MAX];
    ShardDigests d;
    if (shard_digests_init(&d, x->md5[0] != 0, x->sha256[0] != 0)) {
        defect(c, "%s: out of memory", c->url);
        return;
    }
    int rc = shard_source_each(c->url, c->s->remote, digest_block, &d, msg);
    uint64_t size = d.total;
    shard_digests_final(&d, md5, sha);
    if (rc) {
        defect(c, "%s", msg);
        return;
    }
    if (x->filesize && x->filesize != size)
        defect(c, "%s: %llu bytes, the manifest says %llu", c->url, (unsigned long long)size,
               (unsigned long long)x->filesize);
    if (x->md5[0] && shard_ascii_casecmp(x->md5, md5))
        defect(c, "%s: MD5 %s, the manifest says %s (content changed somewhere in bytes 0..%llu)",
               c->url, md5, x->md5, (unsigned long long)size);
    if (x->sha256[0] && shard_ascii_casecmp(x->sha256, sha))
        defect(c, "%s: SHA-256 %s, the manifest says %s", c->url, sha, x->sha256);
}

/* The shard under check: its source, its frames' tar offsets (.tar.zst), the reader of its
 * samples, its index, and what the sample loop found. */
/* A member the readers leave out: a defect where it holds data a sample would have had
 * (a link, a special file, a file named with no field); folders, hidden names and "__"
 * names are left out by WebDataset's design. */
static void dropped(void *cookie, const char *member, uint64_t offset, ShardSkipReason reason,
                    const char *why)
{
    Ctx *c = cookie;
    const char *base = strrchr(member, '/');
    base = base ? base + 1 : member;
    if (reason == SHARD_SKIP_FOLDER || reason == SHARD_SKIP_NO_NAME ||
        (reason == SHARD_SKIP_NOT_FIELD && (base[0] == '.' || !strncmp(base, "__", 2))))
        return;
    defect(c, "%s: offset %llu: member '%s' is %s: every reader leaves it out", c->url,
           (unsigned long long)offset, member, reason == SHARD_SKIP_NOT_FIELD
                                                   ? "named with no field (no dot in its name)"
                                                   : why);
}

typedef struct Check {
    ShardSource *src;
    int local;               /* a stored object, not a stream */
    uint64_t *bounds;        /* frame starts in the tar, from the frame check */
    size_t nbounds;
    uint64_t frame_defects;  /* defects the frame check found */
    ShardFile *f;
    ShardIndex idx;
    int have_idx;
    char *ipath;
    ShardColumns cols;       /* the columns beside the index, when found */
    int have_cols, kw, kh;   /* kw, kh: the width and height columns, or -1 */
    char *cpath;
    uint64_t *starts;        /* sample starts, to hold against the frames */
    size_t nstarts, capstarts;
    uint64_t tar_end;        /* the end of the last member's data */
} Check;

/* Opens the shard: its frames checked first, each on its own (a damaged frame is named by
 * number and offset even when it stops the tar reader before it gets anywhere), then the
 * reader up to its first header. 0 to go on; 1 when the shard cannot be read, its defect
 * recorded; or an error. */
static int check_open(Ctx *c, Check *k, ShardError *err)
{
    char msg[SHARD_ERROR_MAX];
    int rc = shard_source_open(&k->src, c->url, c->s->remote, SHARD_SOURCE_SEQUENTIAL, msg);
    if (rc)
        return shard_report(err, rc, msg);
    ShardSource *src = k->src;
    k->local = src->size >= 0;
    c->r->filesize = k->local ? (uint64_t)src->size : 0;
    ShardBuf head = {0};
    const unsigned char *m = k->local && src->size >= 4 && shard_source_seekable(src)
                                 ? shard_source_view(src, 0, 4, &head) : NULL;
    int zstd = m && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd;
    shard_buf_free(&head);
    if (zstd)
        check_frames(c, src, &k->bounds, &k->nbounds);
    k->frame_defects = c->r->defects;
    ShardFileSettings fs;
    shard_file_default_settings(&fs);
    fs.load_index = 0;
    fs.lowercase = 0; /* fields as stored, compared byte-wise (formats/shard.md 2.2) */
    fs.on_skip_reason = dropped;
    fs.cookie = c;
    ShardError ferr;
    if ((rc = shard_file_open_deferred(&k->f, shard_source_ref(src), &fs, &ferr)))
        return shard_report(err, rc, ferr.message);
    if (!(rc = shard_file_start(k->f)))
        return 0;
    if (rc != SHARD_ERR_FORMAT)
        return shard_report(err, rc, shard_file_error(k->f));
    /* libarchive's read-ahead hitting a frame already reported adds nothing. */
    if (!(k->frame_defects && shard_file_bad_frame(k->f)))
        defect(c, "%s", shard_file_error(k->f));
    return 1;
}

/* Sample v against the index line the shard's index gives it. */
static void check_index_line(Ctx *c, Check *k, const ShardSampleView *v)
{
    uint64_t i = v->index;
    const ShardIndex *idx = &k->idx;
    if (i >= idx->nsamples) {
        if (i == idx->nsamples)
            defect(c, "%s: the index lists %llu samples, the shard has more (sample '%s' at "
                      "offset %llu is not in it)",
                   k->ipath, (unsigned long long)idx->nsamples, v->key,
                   (unsigned long long)v->offset);
        return;
    }
    uint64_t a = idx->first[i], b = idx->first[i + 1];
    if (b - a != v->nfields) {
        defect(c, "%s: line %llu: %llu members, sample '%s' at offset %llu has %zu", k->ipath,
               (unsigned long long)i + 2, (unsigned long long)(b - a), v->key,
               (unsigned long long)v->offset, v->nfields);
        return;
    }
    for (uint64_t j = a; j < b; j++) {
        const ShardIndexEntry *e = &idx->entries[j];
        const ShardFieldView *fv = &v->fields[j - a];
        if (e->offset != fv->offset || e->size != fv->size || strcmp(e->ext, fv->name) ||
            (e->name && strcmp(e->name, fv->member))) {
            defect(c, "%s: line %llu: '%s %llu %llu %s', the shard has member '%s' with data at "
                      "offset %llu, size %llu",
                   k->ipath, (unsigned long long)i + 2, e->ext, (unsigned long long)e->offset,
                   (unsigned long long)e->size, e->name ? e->name : "", fv->member,
                   (unsigned long long)fv->offset, (unsigned long long)fv->size);
            return;
        }
    }
}

/* Each image field of v: the format its name promises, one the loader decodes, and every
 * image decoded (JPEG, PNG, WebP) within the decoders' limits. */
static void check_images(Ctx *c, const ShardSampleView *v)
{
    for (size_t k = 0; k < v->nfields; k++) {
        const ShardFieldView *fv = &v->fields[k];
        const char *fmt = shard_image_format(fv->data, fv->size);
        const char *named = named_format(fv->name);
        if (named && (!fmt || strcmp(fmt, named))) {
            defect(c, "%s: offset %llu: member '%s': named as %s, it holds %s%s", c->url,
                   (unsigned long long)fv->offset, fv->member,
                   !strcmp(named, "jpeg") ? "a JPEG" : "a PNG",
                   fmt ? "an image in " : "no image format libshard knows", fmt ? fmt : "");
            continue;
        }
        if (fmt && !shard_image_decoded(fmt)) {
            defect(c, "%s: offset %llu: member '%s': %s image, which the loader does not decode "
                      "(JPEG, PNG and WebP are)",
                   c->url, (unsigned long long)fv->offset, fv->member, fmt);
            continue;
        }
        if (!fmt)
            continue;
        c->r->images++;
        c->r->jpegs += !strcmp(fmt, "jpeg");
        char why[256];
        if (shard_image_verify(fv->data, fv->size, why, sizeof why))
            defect(c, "%s: offset %llu: member '%s': %s", c->url, (unsigned long long)fv->offset,
                   fv->member, why);
    }
}

/* Sample v's image size against its line of the columns beside the index. */
static void check_columns_line(Ctx *c, Check *k, const ShardSampleView *v)
{
    uint64_t i = v->index;
    if (i >= k->cols.n) {
        if (i == k->cols.n)
            defect(c, "%s: the columns list %llu samples, the shard has more (sample '%s' at "
                      "offset %llu)", k->cpath, (unsigned long long)k->cols.n, v->key,
                   (unsigned long long)v->offset);
        return;
    }
    const ShardFieldView *image = shard_columns_image_of(v);
    uint32_t want[2] = {SHARD_COLUMN_NONE, SHARD_COLUMN_NONE};
    if (image)
        shard_columns_geometry(image->data, (size_t)image->size, want, NULL, 0);
    uint32_t w = k->kw >= 0 ? shard_columns_value(&k->cols, i, k->kw) : want[0];
    uint32_t h = k->kh >= 0 ? shard_columns_value(&k->cols, i, k->kh) : want[1];
    if (w == want[0] && h == want[1])
        return;
    char said[48], is[80], ws[12] = "-", hs[12] = "-";
    if (w != SHARD_COLUMN_NONE)
        snprintf(ws, sizeof ws, "%u", w);
    if (h != SHARD_COLUMN_NONE)
        snprintf(hs, sizeof hs, "%u", h);
    if (w == SHARD_COLUMN_NONE && h == SHARD_COLUMN_NONE)
        snprintf(said, sizeof said, "none");
    else
        snprintf(said, sizeof said, "%s x %s", ws, hs);
    if (!image)
        snprintf(is, sizeof is, "the sample has no image");
    else if (want[0] == SHARD_COLUMN_NONE)
        snprintf(is, sizeof is, "its header does not parse");
    else
        snprintf(is, sizeof is, "its header says %u x %u", want[0], want[1]);
    defect(c, "%s: line %llu: sample '%s' (member '%s' at offset %llu): the columns say %s, %s",
           k->cpath, (unsigned long long)i + 2, v->key, image ? image->member : "-",
           (unsigned long long)(image ? image->offset : v->offset), said, is);
}

/* Every sample in order; the reader's last code (SHARD_EOS at a clean end). */
static int check_samples(Ctx *c, Check *k)
{
    const ShardSampleView *v;
    int rc = 0;
    while (!defects_full(c) && (rc = shard_file_next(k->f, &v)) == 0) {
        c->r->samples++;
        c->r->members += v->nfields;
        if (k->nbounds) {
            if (shard_array_grow(&k->starts, &k->capstarts, k->nstarts + 1, sizeof *k->starts,
                                 1024))
                break;
            k->starts[k->nstarts++] = v->offset;
        }
        const ShardFieldView *last = &v->fields[v->nfields - 1];
        k->tar_end = last->offset + ((last->size + 511) & ~(uint64_t)511);
        check_names(c, c->url, v);
        if (k->have_idx)
            check_index_line(c, k, v);
        if (k->have_cols)
            check_columns_line(c, k, v);
        if (c->s->decode)
            check_images(c, v);
    }
    if (rc != 0 && rc != SHARD_EOS && !defects_full(c) && !(k->frame_defects && shard_file_bad_frame(k->f)))
        defect(c, "%s", shard_file_error(k->f));
    return rc;
}

/* What only the end tells, once the samples were read to it (rc SHARD_EOS). */
/* After the last sample of a plain tar: members the readers pass over (a folder, a link:
 * their own defects), then the end-of-archive blocks, then zeros to the end (a writer's
 * padding to its record size); anything else is bytes every reader stops before (tars
 * appended). */
static void check_after_end(Ctx *c, Check *k)
{
    uint64_t at = k->tar_end, size = (uint64_t)k->src->size;
    unsigned char buf[4096];
    ShardUstar u;
    for (;;) { /* the headers after the last sample, to the first zero block */
        if (at + 512 > size || shard_source_read_at(k->src, at, buf, 512))
            return;
        int got = shard_ustar_parse(buf, &u);
        if (got == 1)
            break;
        if (got < 0 || u.size > size) {
            defect(c, "%s: offset %llu: no tar header where the archive goes on after its last "
                      "sample", c->url, (unsigned long long)at);
            return;
        }
        at += 512 + (u.size + 511) / 512 * 512;
    }
    uint64_t eoa = at;
    while (at < size) {
        size_t n = size - at < sizeof buf ? (size_t)(size - at) : sizeof buf;
        if (shard_source_read_at(k->src, at, buf, n))
            return;
        for (size_t i = 0; i < n; i++)
            if (buf[i]) {
                defect(c, "%s: offset %llu: data after the tar's end-of-archive block (at %llu), "
                          "which every reader stops at (tars appended?)",
                       c->url, (unsigned long long)(at + i), (unsigned long long)eoa);
                return;
            }
        at += n;
    }
}

static void check_end(Ctx *c, Check *k, int rc)
{
    const char *url = c->url;
    ShardVerifyResult *r = c->r;
    /* A plain tar cut right after a member reads as complete: only the missing
     * end-of-archive blocks tell. */
    if (rc == SHARD_EOS && k->local && !strcmp(shard_file_compression(k->f), "none") &&
        k->tar_end && (uint64_t)k->src->size < k->tar_end + 1024)
        defect(c, "%s: offset %llu: the file ends without the tar's end-of-archive blocks "
                  "(truncated at a member boundary?)",
               url, (unsigned long long)k->src->size);
    if (rc == SHARD_EOS && k->local && !strcmp(shard_file_compression(k->f), "none") &&
        k->tar_end && (uint64_t)k->src->size > k->tar_end + 1024 && shard_source_seekable(k->src))
        check_after_end(c, k);
    if (rc == SHARD_EOS && k->have_idx && r->samples < k->idx.nsamples)
        defect(c, "%s: the index lists %llu samples, the shard has %llu", k->ipath,
               (unsigned long long)k->idx.nsamples, (unsigned long long)r->samples);
    if (rc == SHARD_EOS && k->have_cols && r->samples < k->cols.n)
        defect(c, "%s: the columns list %llu samples, the shard has %llu", k->cpath,
               (unsigned long long)k->cols.n, (unsigned long long)r->samples);
    /* Frames end on sample boundaries: every frame start is a sample start (or the end). */
    if (rc == SHARD_EOS && k->nbounds) {
        qsort(k->starts, k->nstarts, sizeof *k->starts, cmp_u64);
        for (size_t i = 1; i < k->nbounds && !defects_full(c); i++) {
            uint64_t b = k->bounds[i];
            if (b >= k->tar_end)
                continue;
            if (!bsearch(&b, k->starts, k->nstarts, sizeof *k->starts, cmp_u64))
                defect(c, "%s: zstd frame %zu starts at tar offset %llu, inside a sample (frames "
                          "must end on sample boundaries)",
                       url, i, (unsigned long long)b);
        }
    }
    /* remote shards too: their bytes read again, through the same source (a second read) */
    if (c->s->expect && !defects_full(c)) {
        if (rc == SHARD_EOS && c->s->expect->nsamples != r->samples)
            defect(c, "%s: %llu samples, the manifest says %llu", url,
                   (unsigned long long)r->samples, (unsigned long long)c->s->expect->nsamples);
        check_manifest(c);
    }
}

int shard_verify(const char *url, const ShardVerifySettings *s, ShardVerifyResult *r,
                 ShardError *err)
{
    ShardVerifySettings defaults;
    if (!s) {
        shard_verify_default_settings(&defaults);
        s = &defaults;
    }
    ShardVerifyResult none;
    if (!r)
        r = &none;
    memset(r, 0, sizeof *r);
    Ctx c = {s, r, url};
    Check k = {0};
    int rc = check_open(&c, &k, err);
    if (!rc) {
        int stored = k.local || (shard_store_can(url) & SHARD_STORE_BESIDE);
        k.ipath = stored && s->check_index ? shard_index_path(url) : NULL;
        char msg[SHARD_ERROR_MAX];
        int irc = k.ipath ? shard_index_load(&k.idx, k.ipath, s->remote, NULL, msg)
                           : SHARD_ERR_NOT_FOUND;
        if (irc && irc != SHARD_ERR_NOT_FOUND)
            defect(&c, "%s", msg);
        else if (!irc)
            k.have_idx = r->has_index = 1;
        k.cpath = stored && s->check_index ? shard_columns_path(url) : NULL;
        int crc = k.cpath ? shard_columns_load(&k.cols, k.cpath, s->remote, msg)
                          : SHARD_ERR_NOT_FOUND;
        if (crc && crc != SHARD_ERR_NOT_FOUND) {
            defect(&c, "%s", msg);
        } else if (!crc) {
            k.have_cols = r->has_columns = 1;
            k.kw = shard_columns_find(&k.cols, "width");
            k.kh = shard_columns_find(&k.cols, "height");
        }
        int end = check_samples(&c, &k);
        r->tarsize = k.tar_end ? k.tar_end + 1024 : 0;
        check_end(&c, &k, end);
    }
    free(k.starts);
    free(k.bounds);
    free(k.ipath);
    free(k.cpath);
    shard_columns_clear(&k.cols);
    if (k.have_idx)
        shard_index_clear(&k.idx);
    shard_file_free(&k.f);
    shard_source_put(k.src);
    if (rc < 0)
        return rc;
    return r->defects ? SHARD_ERR_FORMAT : 0;
}
