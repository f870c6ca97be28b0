/*
 * Random access (seek.h).
 */
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/error.h"
#include "shard/names.h"
#include "tar/seek.h"
#include "tar/tar.h"
#include "tar/ustar.h"

struct ShardIndexed {
    ShardSource *src;
    ShardIndex idx;
    int zstd, plain;
    ShardSeekEntry *frames;
    size_t nframes;
    uint64_t *frame_doff, *frame_coff; /* cumulative decompressed / compressed offsets */
    ZSTD_DCtx *dctx;
    ShardBuf frame;   /* the decompressed frame cached */
    size_t frame_no;  /* which frame is in it, SIZE_MAX for none */
    ShardBuf packed;  /* a compressed frame, when the source has no mapping */
    int proven;       /* its headers were read where the index says */
    ShardBuf span;    /* a remote sample's bytes, read in one request (read_span), with */
    uint64_t span_from; /* their offset, and */
    uint64_t run_last;  /* the last sample to be read in order with it (shard_indexed_run_to) */
};

/* The bytes between a sample's members (long-name headers, padding) read with them rather
 * than asked for apart. */
#define SPAN_SLACK (64u << 10)
/* The most one request for a run of samples reads ahead (a view's consecutive chosen). */
#define RUN_BYTES (4u << 20)

static int prepare_frames(ShardIndexed *x, char *err);
static int read_zst_into(ShardIndexed *x, uint64_t off, uint64_t size, uint64_t limit,
                         unsigned char *dst, char *err);

/* The tar's n bytes at off into dst: read from the file, or out of the zstd frames. */
static int tar_bytes(ShardIndexed *x, uint64_t off, unsigned char *dst, size_t n, char *err)
{
    if (x->zstd)
        return read_zst_into(x, off, n, SHARD_DEFAULT_MAX_MEMBER, dst, err);
    int rc = shard_source_read_at(x->src, off, dst, n);
    return rc ? shard_fail(err, rc, "%s", x->src->err) : 0;
}

/* The header before entry e's data, in h, is e's: 0, or an error naming both files. */
static int check_header(const ShardIndexed *x, const unsigned char *h, const ShardIndexEntry *e,
                        uint64_t line, char *err)
{
    ShardUstar u;
    int got = shard_ustar_parse(h, &u);
    if (got == 0 && shard_ustar_is(&u, e->name, e->size))
        return 0;
    const char *name = e->name ? e->name : e->ext;
    if (got != 0)
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: index line %llu: member '%s': no tar header at offset %llu, "
                          "before its data at %llu (the index does not belong to this shard; "
                          "rebuild it with 'shardcat index')",
                          x->src->url, (unsigned long long)line, name,
                          (unsigned long long)e->offset - 512, (unsigned long long)e->offset);
    return shard_fail(err, SHARD_ERR_FORMAT,
                      "%s: index line %llu: member '%s' of %llu bytes, but the tar header at "
                      "offset %llu is '%s' of %llu bytes (type %c) (the index does not belong "
                      "to this shard; rebuild it with 'shardcat index')",
                      x->src->url, (unsigned long long)line, name, (unsigned long long)e->size,
                      (unsigned long long)e->offset - 512, u.name, (unsigned long long)u.size,
                      u.type);
}

/* After the index's last member: the end of the archive, with nothing a reader would take
 * as a sample between (members that are no sample's fields are passed over, a few). */
static int check_end(ShardIndexed *x, uint64_t total, char *err)
{
    uint64_t pos = x->idx.end;
    unsigned char h[512];
    for (int step = 0; step < 64 && pos + 512 <= total; step++) {
        int rc = tar_bytes(x, pos, h, 512, err);
        if (rc)
            return rc;
        ShardUstar u;
        int got = shard_ustar_parse(h, &u);
        if (got == 1)
            return 0;
        size_t ks, kl;
        const char *field;
        int extended = u.type == 'x' || u.type == 'g' || u.type == 'L' || u.type == 'K';
        if (got != 0 || (!extended && (u.type == '0' || u.type == '7') &&
                         !shard_name_split(u.name, &ks, &kl, &field)))
            return shard_fail(err, SHARD_ERR_FORMAT,
                              "%s: the tar goes on at offset %llu (%s) after the last sample of "
                              "its index %llu lists: the index lists too few samples or "
                              "belongs to another shard (rebuild it with 'shardcat index')",
                              x->src->url, (unsigned long long)pos,
                              got != 0 ? "no tar header there" : u.name,
                              (unsigned long long)x->idx.nsamples);
        if (u.size > total)
            break;
        pos += 512 + (u.size + 511) / 512 * 512;
    }
    return 0;
}

/* Whether the header h at pos is one a reader would take as a sample's field: a file member
 * named KEY.FIELD (pax and GNU long-name headers, folders and the like are not). */
static int a_field(const ShardUstar *u)
{
    size_t ks, kl;
    const char *field;
    int extended = u->type == 'x' || u->type == 'g' || u->type == 'L' || u->type == 'K';
    return !extended && (u->type == '0' || u->type == '7' || u->type == 'S') &&
           !shard_name_split(u->name, &ks, &kl, &field);
}

/* The index whole: between its members (and before the first), where one member's data end
 * on a block and the next one's header begins the tar has room for nothing; where there is
 * more room, it may hold only what extends the next member's header (pax, GNU long names)
 * or members no sample takes, which are read (at most max_reads headers: past them the
 * index is left unproven, *whole 0). A member that would be a sample's field there is one
 * the index leaves out: an error naming it. */
/* A window of the tar read ahead, so that a tar with a header before every member (GNU long
 * names) is read in a few large reads rather than one a member. */
typedef struct Window {
    unsigned char *buf;
    uint64_t at, len, cap;
} Window;

/* The header at pos into h: from the window (refilled from pos), or read alone. */
static int header_at(ShardIndexed *x, Window *w, uint64_t pos, uint64_t total, unsigned char *h,
                     char *err)
{
    if (!w->cap)
        return tar_bytes(x, pos, h, 512, err);
    if (pos < w->at || pos + 512 > w->at + w->len) {
        uint64_t n = total - pos < w->cap ? total - pos : w->cap;
        int rc = tar_bytes(x, pos, w->buf, (size_t)n, err);
        if (rc)
            return rc;
        w->at = pos;
        w->len = n;
    }
    memcpy(h, w->buf + (pos - w->at), 512);
    return 0;
}

static int prove_whole(ShardIndexed *x, uint64_t total, size_t max_reads, int *whole,
                       char *err)
{
    uint64_t expect = 0;
    size_t reads = 0;
    Window w = {0};
    int rc = 0;
    *whole = 0;
    for (uint64_t i = 0; i < x->idx.nentries && !rc; i++) {
        const ShardIndexEntry *e = &x->idx.entries[i];
        uint64_t header = e->offset - 512;
        for (uint64_t pos = expect; pos < header && pos + 512 <= total && !rc;) {
            if (reads++ >= max_reads) {
                free(w.buf);
                return 0;
            }
            if (reads == 32 && !x->src->costly && !x->zstd && (w.buf = malloc(1 << 20)))
                w.cap = 1 << 20; /* many headers between members: read ahead in large runs */
            unsigned char h[512];
            ShardUstar u;
            if ((rc = header_at(x, &w, pos, total, h, err)))
                break;
            int bad = shard_ustar_parse(h, &u) != 0;
            if (bad || a_field(&u)) {
                rc = shard_fail(err, SHARD_ERR_FORMAT,
                                  "%s: offset %llu: %s%s%s, between the members the index lists "
                                  "at %llu and %llu: the index leaves it out (lines dropped, or "
                                  "another shard's index; rebuild it with 'shardcat index')",
                                  x->src->url, (unsigned long long)pos,
                                  bad ? "no tar header" : "member '", bad ? "" : u.name,
                                  bad ? "" : "'",
                                  (unsigned long long)(i ? x->idx.entries[i - 1].offset : 0),
                                  (unsigned long long)e->offset);
                break;
            }
            pos += 512 + (u.size + 511) / 512 * 512;
        }
        expect = e->offset + (e->size + 511) / 512 * 512;
    }
    free(w.buf);
    *whole = !rc;
    return rc;
}

/* The most headers an open reads between a remote shard's members to prove its index whole
 * (each a request): a tar written with a long-name header before every member is left
 * unproven rather than read whole. */
#define REMOTE_PROOF_READS 16

/* Whether the index belongs to the shard (shard_indexed_open): for a plain tar, the first
 * member's header where the index says, and when the tar reaches past the last member's
 * end, its header too and nothing a reader would take after it (proven); for a .tar.zst,
 * whose headers cost frames, nothing a reader would take after the last member. A tar that
 * ends before that end was cut short: its readers name where, so the index is not refused
 * for it. */
static int check_belongs(ShardIndexed *x, int own, char *err)
{
    uint64_t total;
    if (!x->idx.nentries || !shard_source_seekable(x->src))
        return 0;
    if (x->src->costly) { /* each request counts: what lies between members, a few */
        int whole;
        if (own || !x->plain || x->src->size < 0)
            return 0;
        int rc = prove_whole(x, (uint64_t)x->src->size, REMOTE_PROOF_READS, &whole, err);
        return rc;
    }
    if (x->zstd) {
        if (!x->nframes)
            return 0; /* no seek table: nothing to read by */
        int rc = prepare_frames(x, err);
        if (rc)
            return rc;
        total = x->frame_doff[x->nframes];
        /* reading a header here costs a frame decompressed: only where more than the end
         * of the archive and a writer's padding follows the last member is it read what */
        if (x->idx.end > total || total - x->idx.end <= 1024 + 10240)
            return 0;
        return check_end(x, total, err);
    } else if (x->plain && x->src->size >= 0) {
        total = (uint64_t)x->src->size;
    } else {
        return 0;
    }
    unsigned char h[512];
    const ShardIndexEntry *first = &x->idx.entries[0];
    const ShardIndexEntry *last = &x->idx.entries[x->idx.nentries - 1];
    int rc = 0;
    if (first->offset <= total)
        if ((rc = tar_bytes(x, first->offset - 512, h, 512, err)) ||
            (rc = check_header(x, h, first, 2, err)))
            return rc;
    int whole = 1; /* an index libshard made from the shard itself, bound to its version,
                      in a folder of this user's alone, is whole */
    if (!own && (rc = prove_whole(x, total, SIZE_MAX, &whole, err)))
        return rc;
    if (x->idx.end + 512 > total)
        return 0;
    if ((rc = tar_bytes(x, last->offset - 512, h, 512, err)) ||
        (rc = check_header(x, h, last, x->idx.nsamples + 1, err)) ||
        (rc = check_end(x, total, err)))
        return rc;
    x->proven = whole;
    return 0;
}

int shard_indexed_open(ShardIndexed **out, ShardSource *src, const char *index_url, int required,
                       const char *compression, const ShardFileSettings *s, char *err)
{
    *out = NULL;
    ShardIndexed *x = calloc(1, sizeof *x);
    if (!x)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", src->url);
    x->src = src;
    x->zstd = !strcmp(compression, "zstd");
    x->plain = !strcmp(compression, "none");
    x->frame_no = SIZE_MAX;
    int rc = 0;
    if (x->zstd) {
        uint64_t tb;
        rc = shard_seek_table_read(src, &x->frames, &x->nframes, &tb, err);
        if (rc == SHARD_ERR_NOT_FOUND || rc == SHARD_ERR_UNSUPPORTED)
            rc = 0;
    }
    if (!rc && !index_url) {
        shard_indexed_free(&x);
        return 0;
    }
    if (!rc) {
        rc = shard_index_load(&x->idx, index_url, src->remote, s, err);
        if (rc == SHARD_ERR_NOT_FOUND && !required) {
            shard_indexed_free(&x);
            return 0;
        }
    }
    if (!rc)
        rc = check_belongs(x, required, err); /* required: an index the cache made */
    if (rc) {
        shard_indexed_free(&x);
        return rc;
    }
    *out = x;
    return 0;
}

int shard_indexed_can_seek(const ShardIndexed *x)
{
    return shard_source_seekable(x->src) && (x->plain || (x->zstd && x->nframes));
}

uint64_t shard_indexed_count(const ShardIndexed *x) { return x->idx.nsamples; }

int shard_indexed_proven(const ShardIndexed *x) { return x->proven; }

const ShardIndex *shard_indexed_index(const ShardIndexed *x) { return &x->idx; }

int shard_indexed_stream_from(const ShardIndexed *x, uint64_t i, uint64_t *off)
{
    if (!x->plain || i == 0 || i > x->idx.nsamples || x->idx.first[i - 1] >= x->idx.first[i])
        return 0; /* sample i - 1 has no member to end at */
    const ShardIndexEntry *e = &x->idx.entries[x->idx.first[i] - 1]; /* sample i - 1's last */
    *off = (e->offset + e->size + 511) / 512 * 512;
    return 1;
}

static int prepare_frames(ShardIndexed *x, char *err)
{
    if (x->frame_doff)
        return 0;
    x->frame_doff = malloc((x->nframes + 1) * sizeof *x->frame_doff);
    x->frame_coff = malloc((x->nframes + 1) * sizeof *x->frame_coff);
    x->dctx = ZSTD_createDCtx();
    if (!x->frame_doff || !x->frame_coff || !x->dctx)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", x->src->url);
    x->frame_doff[0] = x->frame_coff[0] = 0;
    for (size_t k = 0; k < x->nframes; k++) {
        x->frame_doff[k + 1] = x->frame_doff[k] + x->frames[k].dsize;
        x->frame_coff[k + 1] = x->frame_coff[k] + x->frames[k].csize;
    }
    return 0;
}

/* Copies size bytes at tar offset off to dst, decompressing frames as needed; a frame may
 * not claim more than limit bytes decompressed. */
static int read_zst_into(ShardIndexed *x, uint64_t off, uint64_t size, uint64_t limit,
                         unsigned char *dst, char *err)
{
    const char *url = x->src->url;
    int rc = prepare_frames(x, err);
    if (rc)
        return rc;
    uint64_t end = x->frame_doff[x->nframes];
    if (off > end || size > end - off || (off == end && size))
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: tar bytes %llu..%llu lie past the end of the data (%llu bytes)",
                          url, (unsigned long long)off, (unsigned long long)(off + size),
                          (unsigned long long)end);
    while (size) {
        /* the frame holding off: last frame whose start <= off */
        size_t lo = 0, hi = x->nframes;
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (x->frame_doff[mid] <= off)
                lo = mid;
            else
                hi = mid;
        }
        if (x->frame_no != lo) {
            const ShardSeekEntry *e = &x->frames[lo];
            x->frame.len = 0;
            x->frame_no = SIZE_MAX;
            if (e->dsize > limit)
                return shard_fail(err, SHARD_ERR_FORMAT,
                                  "%s: zstd frame %zu at offset %llu claims %llu bytes "
                                  "decompressed, more than the limit of %llu (max_member_size)",
                                  url, lo, (unsigned long long)x->frame_coff[lo],
                                  (unsigned long long)e->dsize, (unsigned long long)limit);
            if (shard_buf_reserve(&x->frame, e->dsize ? e->dsize : 1))
                return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
            const unsigned char *packed =
                shard_source_view(x->src, x->frame_coff[lo], e->csize, &x->packed);
            if (!packed)
                return shard_fail(err, SHARD_ERR_IO, "%s", x->src->err);
            double t0 = shard_seconds();
            size_t r = ZSTD_decompressDCtx(x->dctx, x->frame.data, e->dsize, packed, e->csize);
            x->src->cost.unpack_seconds += shard_seconds() - t0;
            x->src->cost.unpack_bytes += ZSTD_isError(r) ? 0 : r;
            if (ZSTD_isError(r) || r != e->dsize)
                return shard_fail(err, SHARD_ERR_FORMAT, "%s: zstd frame %zu at offset %llu: %s",
                                  url, lo, (unsigned long long)x->frame_coff[lo],
                                  ZSTD_isError(r) ? ZSTD_getErrorName(r)
                                                  : "size differs from the seek table");
            x->frame.len = r;
            x->frame_no = lo;
        }
        uint64_t in = off - x->frame_doff[lo];
        uint64_t take = x->frame.len - in < size ? x->frame.len - in : size;
        memcpy(dst, x->frame.data + in, (size_t)take);
        dst += take;
        off += take;
        size -= take;
    }
    return 0;
}

/* Reads the field entry e of sample i (index line i + 2) into rec, with the header before
 * it (checked, check_header): a view of the mapping where the source can hold it, else a
 * copy read in one piece with the header (a .tar.zst's through its frames, none claiming
 * more than limit bytes). */
static int read_field(ShardIndexed *x, uint64_t i, const ShardIndexEntry *e, ShardFieldRec *rec,
                      uint64_t limit, ShardSampleBuf *sb, char *err)
{
    ShardSource *src = x->src;
    const char *name = e->name ? e->name : e->ext;
    uint64_t line = i + 2;
    uint64_t from = e->offset - 512, n = e->size + 512; /* the parser: offset >= 512 */
    if (!x->zstd && src->size >= 0 &&
        (from > (uint64_t)src->size || n > (uint64_t)src->size - from))
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: index line %llu: member '%s' at offset %llu size %llu lies past "
                          "the end of the shard (%llu bytes)",
                          src->url, (unsigned long long)line, name,
                          (unsigned long long)e->offset, (unsigned long long)e->size,
                          (unsigned long long)src->size);
    if (!x->zstd && src->map) {
        int rc = check_header(x, src->map + from, e, line, err);
        if (rc)
            return rc;
        if ((rec->hold = shard_source_hold(src, src->map + e->offset, e->size))) {
            rec->view = src->map + e->offset;
            rec->data = SIZE_MAX;
            return 0;
        }
    }
    unsigned char *dst = shard_sb_room(sb, (size_t)n);
    if (!dst)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", src->url);
    int rc = 0;
    if (x->span.len) /* the sample's bytes, read in one request (read_span) */
        memcpy(dst, x->span.data + (from - x->span_from), (size_t)n);
    else
        rc = x->zstd ? read_zst_into(x, from, n, limit, dst, err)
                     : shard_source_read_at(src, from, dst, (size_t)n);
    if (rc && !x->zstd)
        rc = shard_fail(err, rc, "%s: index line %llu: member '%s' at offset %llu: %s", src->url,
                        (unsigned long long)line, name, (unsigned long long)e->offset,
                        src->err);
    if (rc || (rc = check_header(x, dst, e, line, err)))
        return rc;
    memmove(dst, dst + 512, (size_t)e->size);
    shard_sb_grew(sb, (size_t)e->size);
    return 0;
}

/* Sample i's bytes, its members and their headers, [*a, *b): 1, or 0 where they are not
 * read as one (a member past the file's end, said where it is read alone; members far
 * apart: a tar made by another tool, with other files between them). */
static int extent(const ShardIndexed *x, uint64_t i, uint64_t *a, uint64_t *b)
{
    const ShardSource *src = x->src;
    uint64_t lo = x->idx.first[i], hi = x->idx.first[i + 1], need = 0;
    *a = UINT64_MAX, *b = 0;
    for (uint64_t k = lo; k < hi; k++) {
        const ShardIndexEntry *e = &x->idx.entries[k];
        if (e->offset < 512 || e->size > (uint64_t)src->size || e->offset > (uint64_t)src->size - e->size)
            return 0;
        *a = e->offset - 512 < *a ? e->offset - 512 : *a;
        *b = e->offset + e->size > *b ? e->offset + e->size : *b;
        need += e->size + 512;
    }
    return lo < hi && *b - *a <= need + SPAN_SLACK;
}

/* A remote plain tar's sample i in x->span (its bytes from x->span_from): one request for
 * the sample, and for those after it up to the run announced (shard_indexed_run_to) while
 * they lie close and the request stays under RUN_BYTES, rather than one a member; a sample
 * already in the span is read from it. x->span left empty where that does not pay: a
 * local source, a .tar.zst (read by frames), a sample not read as one (extent). */
static int read_span(ShardIndexed *x, uint64_t i, char *err)
{
    ShardSource *src = x->src;
    uint64_t a, b;
    if (!src->costly || src->map || x->zstd || src->size < 0 || !extent(x, i, &a, &b)) {
        x->span.len = 0;
        return 0;
    }
    if (x->span.len && a >= x->span_from && b <= x->span_from + x->span.len)
        return 0;
    for (uint64_t j = i + 1, ja, jb; j <= x->run_last && j < shard_indexed_count(x); j++)
        if (!extent(x, j, &ja, &jb) || ja < b || ja - b > SPAN_SLACK || jb - a > RUN_BYTES)
            break;
        else
            b = jb;
    x->span.len = 0;
    if (shard_buf_reserve(&x->span, (size_t)(b - a)))
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", src->url);
    int rc = shard_source_read_at(src, a, x->span.data, (size_t)(b - a));
    if (rc)
        return shard_fail(err, rc, "%s: index line %llu: the sample's bytes at offset %llu: %s",
                          src->url, (unsigned long long)i + 2, (unsigned long long)a, src->err);
    x->span.len = (size_t)(b - a);
    x->span_from = a;
    return 0;
}

void shard_indexed_run_to(ShardIndexed *x, uint64_t last) { x->run_last = last; }

int shard_indexed_read(ShardIndexed *x, uint64_t i, const ShardFileSettings *s, ShardSampleBuf *sb,
                       uint64_t *offset, char *err)
{
    shard_sb_reset(sb);
    const char *url = x->src->url;
    /* the index was parsed under these settings' limits: every line's members and sample
     * hold them (shard_index_parse) */
    uint64_t limit = s->max_member_size ? s->max_member_size : SHARD_DEFAULT_MAX_MEMBER;
    uint64_t lo = x->idx.first[i], hi = x->idx.first[i + 1];
    /* the key, from the first member's name (v1.1 has no names: "") */
    const char *first = lo < hi ? x->idx.entries[lo].name : NULL;
    size_t ks = 0, kl = 0;
    const char *field;
    if (first && shard_name_split(first, &ks, &kl, &field))
        kl = 0;
    if (lo < hi && shard_sb_set_key(sb, first ? first + ks : "", kl))
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
    int rc = read_span(x, i, err);
    if (rc)
        return rc;
    for (uint64_t k = lo; k < hi; k++) {
        const ShardIndexEntry *e = &x->idx.entries[k];
        ShardFieldRec *rec = shard_sb_add(sb, e->ext, e->name ? e->name : e->ext, s->lowercase);
        if (!rec)
            return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", url);
        rec->size = e->size;
        rec->offset = e->offset;
        if ((rc = read_field(x, i, e, rec, limit, sb, err)))
            return rc;
    }
    if (i >= x->run_last) /* no run goes on from it: the span's memory back */
        shard_buf_free(&x->span);
    uint64_t start = x->idx.entries[lo].offset;
    *offset = start >= 512 ? start - 512 : 0;
    return 0;
}

int shard_indexed_list(ShardIndexed *x, uint64_t i, const ShardFileSettings *s,
                       ShardSampleBuf *sb, uint64_t *offset, char *err)
{
    shard_sb_reset(sb);
    uint64_t lo = x->idx.first[i], hi = x->idx.first[i + 1];
    const char *first = x->idx.entries[lo].name;
    size_t ks = 0, kl = 0;
    const char *field;
    if (shard_name_split(first, &ks, &kl, &field))
        kl = 0; /* the parser holds names to the key rules: not reached */
    if (shard_sb_set_key(sb, first + ks, kl))
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", x->src->url);
    for (uint64_t k = lo; k < hi; k++) {
        const ShardIndexEntry *e = &x->idx.entries[k];
        ShardFieldRec *rec = shard_sb_add(sb, e->ext, e->name, s->lowercase);
        if (!rec)
            return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", x->src->url);
        rec->size = e->size;
        rec->offset = e->offset;
        rec->data = SIZE_MAX; /* as the tar reader's headers_only: no view, no copy */
        rec->view = NULL;
    }
    *offset = x->idx.entries[lo].offset - 512;
    return 0;
}

void shard_indexed_free(ShardIndexed **px)
{
    if (!px || !*px)
        return;
    ShardIndexed *x = *px;
    shard_index_clear(&x->idx);
    free(x->frames);
    free(x->frame_doff);
    free(x->frame_coff);
    ZSTD_freeDCtx(x->dctx);
    shard_buf_free(&x->frame);
    shard_buf_free(&x->packed);
    shard_buf_free(&x->span);
    free(x);
    *px = NULL;
}
