/*
 * Sequential reading (tar.h). libarchive reads through the source's read and skip
 * callbacks. A local shard's mapping is handed over as one block, so member data of an
 * uncompressed tar come back as pointers into it: those stay views (with a hold on the
 * source); data in libarchive's own buffers (decompressed, or a member across two blocks)
 * are copied once into the sample's arena.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>
#include <zstd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/handoff.h"
#include "base/keyset.h"
#include "shard/names.h"
#include "tar/tar.h"

/* the most room made ahead for one member: its declared size may be a lie */
#define RESERVE_MAX ((uint64_t)16 << 20)
/* a zstd frame is decompressed whole, its checksum checked, before libarchive sees a byte
 * of it; a frame larger than this (another tool's one-frame .tar.zst) goes on in pieces */
#define ZFRAME_MAX ((size_t)16 << 20)

struct ShardTar {
    ShardSource *src;
    ShardFileSettings s;
    struct archive *ar;
    struct archive_entry *entry;
    int have_entry; /* a header read but not yet taken into a sample */
    int eof;
    const char *compression;
    ShardKeySet seen;
    char *last_member;         /* the member before the current header, for messages */
    unsigned char magic[4];    /* the stream's first bytes, for messages */
    int src_rc;                /* the source's or the zstd layer's failure, or 0 */
    int src_ended;             /* the source's stream came to its end */
    int bad_frame;             /* a zstd frame did not decompress */
    char rerr[SHARD_ERROR_MAX]; /* its message, naming the URL and the offset */
    size_t nmagic;
    /* .tar.zst: frames decompressed here, whole (libarchive then reads a plain tar) */
    int started;                  /* the first block was read */
    int zstd;
    ZSTD_DStream *zs;
    ShardBuf zout;                /* the frame handed out last, or being decompressed */
    int zout_given;               /* zout was handed out: start the next frame */
    const unsigned char *zin;     /* the source's block being decompressed */
    size_t zin_len, zin_pos;
    uint64_t zin_off, zframe_off; /* compressed offsets: of zin, of the frame's start */
    uint64_t base;                /* where in the shard the stream began (a plain tar read
                                     from a sample on: shard_file_seek_in_order) */
    /* members mode: the sample the caller will group consecutive members into (WebDataset's
     * key: the path up to the first dot of its file name), so that max_sample_size holds */
    ShardBuf run_key;
    uint64_t run_bytes;
};

static int zstd_magic(const unsigned char *p, size_t n)
{
    return n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd;
}

/* The next whole zstd frame of the stream, decompressed (a piece of one past ZFRAME_MAX);
 * 0 at the end, -1 with t->rerr set. libzstd checks each frame's checksum at its end, so a
 * damaged frame is reported before any of its samples exist. */
static la_ssize_t zstd_next(ShardTar *t, const void **buf)
{
    if (t->zout_given) {
        t->zout.len = 0;
        t->zout_given = 0;
    }
    const char *url = t->src->url;
    for (;;) {
        if (t->zin_pos == t->zin_len) {
            const void *block;
            t->zin_off += t->zin_len;
            ssize_t k = shard_source_read(t->src, &block);
            if (k < 0) {
                t->src_rc = (int)k;
                snprintf(t->rerr, sizeof t->rerr, "%s", t->src->err);
                return -1;
            }
            t->zin = block;
            t->zin_len = (size_t)k;
            t->zin_pos = 0;
            if (k == 0) {
                if (t->zout.len || t->zframe_off < t->zin_off) {
                    t->src_rc = shard_fail(t->rerr, SHARD_ERR_FORMAT,
                                           "%s: offset %llu: the zstd frame at offset %llu is cut "
                                           "short (truncated)",
                                           url, (unsigned long long)t->zin_off,
                                           (unsigned long long)t->zframe_off);
                    return -1;
                }
                return 0;
            }
        }
        if (shard_buf_reserve(&t->zout, ZSTD_DStreamOutSize())) {
            t->src_rc = shard_fail(t->rerr, SHARD_ERR_NOMEM, "%s: out of memory", url);
            return -1;
        }
        ZSTD_inBuffer in = {t->zin, t->zin_len, t->zin_pos};
        ZSTD_outBuffer out = {t->zout.data + t->zout.len, t->zout.cap - t->zout.len, 0};
        double t0 = shard_seconds();
        size_t r = ZSTD_decompressStream(t->zs, &out, &in);
        t->src->cost.unpack_seconds += shard_seconds() - t0;
        t->src->cost.unpack_bytes += out.pos;
        t->zin_pos = in.pos;
        t->zout.len += out.pos;
        if (ZSTD_isError(r)) {
            t->bad_frame = 1;
            t->src_rc = shard_fail(t->rerr, SHARD_ERR_FORMAT,
                                   "%s: offset %llu: zstd frame at offset %llu: decompression "
                                   "failed: %s",
                                   url, (unsigned long long)(t->zin_off + in.pos),
                                   (unsigned long long)t->zframe_off, ZSTD_getErrorName(r));
            return -1;
        }
        int done = r == 0; /* a frame ended, its checksum checked */
        if (done)
            t->zframe_off = t->zin_off + t->zin_pos;
        if ((done && t->zout.len) || t->zout.len >= ZFRAME_MAX) {
            *buf = t->zout.data;
            t->zout_given = 1;
            return (la_ssize_t)t->zout.len;
        }
    }
}

static la_ssize_t read_cb(struct archive *a, void *cookie, const void **buf)
{
    ShardTar *t = cookie;
    if (t->zstd) {
        la_ssize_t k = zstd_next(t, buf);
        if (k < 0)
            archive_set_error(a, EIO, "%s", t->rerr);
        return k;
    }
    ssize_t k = shard_source_read(t->src, buf);
    if (k < 0) {
        t->src_rc = (int)k;
        snprintf(t->rerr, sizeof t->rerr, "%s", t->src->err);
        archive_set_error(a, EIO, "%s", t->src->err);
        return -1;
    }
    t->src_ended |= k == 0;
    for (ssize_t i = 0; i < k && t->nmagic < sizeof t->magic; i++)
        t->magic[t->nmagic++] = ((const unsigned char *)*buf)[i];
    int first = !t->started;
    t->started = 1;
    if (first && zstd_magic(*buf, (size_t)k) && (t->zs = ZSTD_createDStream())) {
        /* the first block of a zstd stream: decompress it here, frame by frame */
        ZSTD_initDStream(t->zs);
        t->zstd = 1;
        t->zin = *buf;
        t->zin_len = (size_t)k;
        t->zin_pos = 0;
        la_ssize_t z = zstd_next(t, buf);
        if (z < 0)
            archive_set_error(a, EIO, "%s", t->rerr);
        return z;
    }
    return k;
}

static la_int64_t skip_cb(struct archive *a, void *cookie, la_int64_t request)
{
    ShardTar *t = cookie;
    (void)a;
    if (t->zstd) /* the source's bytes are compressed: libarchive reads through instead */
        return 0;
    int64_t k = shard_source_skip(t->src, request);
    return k < 0 ? 0 : k;
}

static const char *filter_name(struct archive *ar)
{
    switch (archive_filter_code(ar, 0)) {
    case ARCHIVE_FILTER_NONE: return "none";
    case ARCHIVE_FILTER_GZIP: return "gzip";
    case ARCHIVE_FILTER_ZSTD: return "zstd";
    default: return archive_filter_name(ar, 0);
    }
}

int shard_tar_open(ShardTar **out, ShardSource *src, const ShardFileSettings *s, int *bad_frame,
                   char *err)
{
    *out = NULL;
    ShardTar *t = calloc(1, sizeof *t);
    if (!t)
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", src->url);
    t->src = src;
    t->s = *s;
    t->base = src->pos;
    t->seen.owns = 1;
    t->ar = archive_read_new();
    if (!t->ar) {
        shard_tar_free(&t);
        return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", src->url);
    }
    archive_read_support_filter_all(t->ar);
    archive_read_support_format_tar(t->ar);
    if (archive_read_open2(t->ar, t, NULL, read_cb, skip_cb, NULL) != ARCHIVE_OK) {
        if (t->src_rc) { /* the bytes never came: the source (or the zstd layer) says why */
            int rc = shard_fail(err, t->src_rc, "%s", t->rerr);
            if (bad_frame)
                *bad_frame = t->bad_frame;
            shard_tar_free(&t);
            return rc;
        }
        const unsigned char *m = t->magic;
        int compressed = zstd_magic(m, t->nmagic) ||
                         (t->nmagic >= 4 && m[0] == 0x1f && m[1] == 0x8b);
        const char *why = archive_error_string(t->ar);
        int rc;
        if (compressed) { /* libarchive decompresses ahead: the first tar header never came */
            int cut = t->src_ended; /* the bytes ran out before it did */
            rc = shard_fail(err, SHARD_ERR_FORMAT,
                            "%s: offset %llu: the compressed stream %s before the first tar "
                            "header could be read: %s",
                            src->url, cut && src->size > 0 ? (unsigned long long)src->size : 0ull,
                            cut ? "ends" : "breaks", why ? why : "damaged");
        } else {
            rc = shard_fail(err, SHARD_ERR_FORMAT,
                            "%s: offset %llu: not a tar archive, or its first header is damaged: "
                            "%s",
                            src->url, (unsigned long long)t->base, why);
        }
        shard_tar_free(&t);
        return rc;
    }
    t->compression = t->zstd ? "zstd" : filter_name(t->ar);
    *out = t;
    return 0;
}

const char *shard_tar_compression(const ShardTar *t) { return t->compression; }

static int archive_fail(ShardTar *t, const char *member, uint64_t offset, char *err)
{
    const char *msg = archive_error_string(t->ar);
    const char *url = t->src->url;
    if (t->src_rc) /* already names the URL and the offset */
        return shard_fail(err, t->src_rc, "%s%s%s", t->rerr,
                          member ? ", in member " : t->last_member ? ", after member " : "",
                          member ? member : t->last_member ? t->last_member : "");
    if (member)
        return shard_fail(err, SHARD_ERR_FORMAT, "%s: offset %llu: member '%s': %s", url,
                          (unsigned long long)offset, member, msg ? msg : "damaged tar data");
    if (t->last_member)
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: offset %llu: the header after member '%s': %s", url,
                          (unsigned long long)offset, t->last_member,
                          msg ? msg : "damaged tar header");
    return shard_fail(err, SHARD_ERR_FORMAT, "%s: offset %llu: the first header: %s", url,
                      (unsigned long long)offset, msg ? msg : "damaged tar header");
}

static int read_header(ShardTar *t, char *err)
{
    if (t->have_entry) {
        const char *m = archive_entry_pathname(t->entry);
        free(t->last_member);
        t->last_member = strdup(m ? m : "");
        /* headers only: the data are skipped first, so that pos is the next header's */
        if (t->s.headers_only && archive_read_data_skip(t->ar) != ARCHIVE_OK)
            return archive_fail(t, m, t->base + (uint64_t)archive_read_header_position(t->ar),
                                err);
    }
    uint64_t pos = t->base + (uint64_t)archive_filter_bytes(t->ar, 0);
    int r = archive_read_next_header(t->ar, &t->entry);
    if (r == ARCHIVE_EOF) {
        t->eof = 1;
        t->have_entry = 0;
        return 0;
    }
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        return archive_fail(t, NULL, pos, err);
    t->have_entry = 1;
    return 0;
}

static int nomem(ShardTar *t, char *err)
{
    return shard_fail(err, SHARD_ERR_NOMEM, "%s: out of memory", t->src->url);
}

/* Zeros up to byte `to` of the field rec: a hole in a sparse member (libarchive hands out
 * only the blocks with data). */
static int fill_hole(ShardSampleBuf *sb, const ShardFieldRec *rec, uint64_t to)
{
    uint64_t have = shard_sb_copied(sb, rec);
    if (to <= have)
        return 0;
    if (to - have > SIZE_MAX / 2)
        return SHARD_ERR_NOMEM;
    return shard_sb_append(sb, NULL, (size_t)(to - have));
}

/* Reads the current entry's data into rec: a view where it is one contiguous block the
 * source can hold, else a copy in the arena, holes of a sparse member as zeros. */
static int read_data(ShardTar *t, ShardSampleBuf *sb, ShardFieldRec *rec, const char *member,
                     uint64_t header_off, char *err)
{
    const void *buf;
    size_t len;
    la_int64_t off;
    int blocks = 0;
    for (;;) {
        int r = archive_read_data_block(t->ar, &buf, &len, &off);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
            return archive_fail(t, member, header_off, err);
        const unsigned char *p = buf;
        if (blocks == 0 && off == 0 && len == rec->size &&
            (rec->hold = shard_source_hold(t->src, p, len))) {
            rec->view = p;
            rec->data = SIZE_MAX;
        } else {
            /* A second block after a view: the view moves into the arena first. */
            if (rec->data == SIZE_MAX && shard_sb_unview(sb, rec))
                return nomem(t, err);
            /* room for the whole member at once: growing by doubling would copy it again */
            if (blocks == 0 && rec->size <= RESERVE_MAX &&
                shard_sb_reserve(sb, (size_t)rec->size))
                return nomem(t, err);
            unsigned char *dst;
            if (fill_hole(sb, rec, (uint64_t)off) || !(dst = shard_sb_room(sb, len)))
                return nomem(t, err);
            /* the data go to another thread (the consumer, a decoder) */
            shard_copy_handoff(dst, p, len);
            shard_sb_grew(sb, len);
        }
        blocks++;
    }
    /* a sparse member may end in a hole: the field still has all its bytes */
    if (rec->data != SIZE_MAX && fill_hole(sb, rec, rec->size))
        return nomem(t, err);
    return 0;
}

/* Why a member is left out of the samples, as WebDataset leaves it out; NULL to take it. */
static const char *skip_reason(struct archive_entry *e, const char *member, int members,
                               size_t *kstart, size_t *klen, const char **field,
                               ShardSkipReason *code)
{
    if (!member)
        return *code = SHARD_SKIP_NO_NAME, "no name";
    if (archive_entry_filetype(e) != AE_IFREG) {
        if (archive_entry_filetype(e) == AE_IFDIR)
            return *code = SHARD_SKIP_FOLDER, "a folder";
        if (archive_entry_filetype(e) == AE_IFLNK)
            return *code = SHARD_SKIP_SYMLINK, "a symbolic link";
        if (archive_entry_hardlink(e))
            return *code = SHARD_SKIP_HARDLINK, "a hard link";
        return *code = SHARD_SKIP_SPECIAL, "not a regular file";
    }
    if (archive_entry_hardlink(e))
        return *code = SHARD_SKIP_HARDLINK, "a hard link";
    if (members) { /* the whole path its key, its one field unnamed */
        *kstart = 0;
        *klen = strlen(member);
        *field = member + *klen;
        return NULL;
    }
    if (shard_name_split(member, kstart, klen, field))
        return *code = SHARD_SKIP_NOT_FIELD,
               "not a sample field (no dot in the basename, or a hidden or __ name)";
    return NULL;
}

/* Members mode: the member of size bytes added to the sample WebDataset's grouping will put
 * it in (consecutive members of one key, the path up to the first dot of the file name),
 * refused when that takes the sample past max_sample_size, before its bytes are read. */
static int check_run(ShardTar *t, const char *member, uint64_t size, uint64_t header_off,
                     char *err)
{
    const char *base = strrchr(member, '/');
    base = base ? base + 1 : member;
    const char *dot = strchr(base, '.');
    size_t klen = dot ? (size_t)(dot - member) : 0;
    if (!klen || t->run_key.len != klen + 1 || memcmp(t->run_key.data, member, klen)) {
        t->run_key.len = 0;
        t->run_bytes = 0;
        if (klen && (shard_buf_append(&t->run_key, member, klen) ||
                     shard_buf_append(&t->run_key, "", 1)))
            return nomem(t, err);
    }
    uint64_t max = t->s.max_sample_size ? t->s.max_sample_size : SHARD_DEFAULT_MAX_SAMPLE;
    if (size > max || t->run_bytes > max - size)
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: offset %llu: member '%s' of %llu bytes takes sample '%s' to "
                          "%llu bytes, more than the limit of %llu (max_sample_size)",
                          t->src->url, (unsigned long long)header_off, member,
                          (unsigned long long)size, klen ? (const char *)t->run_key.data : member,
                          (unsigned long long)(t->run_bytes + size), (unsigned long long)max);
    t->run_bytes += size;
    return 0;
}

/* The limits of the settings on a member (formats/shard.md 2.5): its name, its declared
 * size. Checked before anything is read or kept for it. */
static int check_limits(const ShardTar *t, struct archive_entry *e,
                        const char *member, uint64_t header_off, char *err)
{
    const char *url = t->src->url;
    uint64_t max_name = t->s.max_name ? t->s.max_name : SHARD_DEFAULT_MAX_NAME;
    uint64_t max_size = t->s.max_member_size ? t->s.max_member_size : SHARD_DEFAULT_MAX_MEMBER;
    size_t len = member ? strlen(member) : 0;
    if (len > max_name)
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: offset %llu: a member name of %zu bytes, more than the limit of "
                          "%llu (max_name): '%.60s...'",
                          url, (unsigned long long)header_off, len, (unsigned long long)max_name,
                          member);
    if (archive_entry_filetype(e) != AE_IFREG)
        return 0;
    la_int64_t size = archive_entry_size(e);
    if (size < 0 || (uint64_t)size > max_size)
        return shard_fail(err, SHARD_ERR_FORMAT,
                          "%s: offset %llu: member '%s' declares %lld bytes, more than the limit "
                          "of %llu (max_member_size)",
                          url, (unsigned long long)header_off, member ? member : "",
                          (long long)size, (unsigned long long)max_size);
    return 0;
}

int shard_tar_next(ShardTar *t, ShardSampleBuf *sb, uint64_t *offset, char *err)
{
    shard_sb_reset(sb);
    *offset = 0;
    const char *url = t->src->url;
    int rc;
    if (!t->have_entry && !t->eof && (rc = read_header(t, err)))
        return rc;
    while (t->have_entry) {
        struct archive_entry *e = t->entry;
        const char *member = archive_entry_pathname(e);
        uint64_t header_off = t->base + (uint64_t)archive_read_header_position(t->ar);
        uint64_t data_off = t->base + (uint64_t)archive_filter_bytes(t->ar, 0);
        if ((rc = check_limits(t, e, member, header_off, err)))
            return rc;
        size_t kstart = 0, klen = 0;
        const char *field = NULL;
        ShardSkipReason code;
        const char *why = skip_reason(e, member, t->s.members, &kstart, &klen, &field, &code);
        if (why) {
            if (t->s.on_skip_reason)
                t->s.on_skip_reason(t->s.cookie, member ? member : "", header_off, code, why);
            else if (t->s.on_skip)
                t->s.on_skip(t->s.cookie, member ? member : "", header_off, why);
            if ((rc = read_header(t, err)))
                return rc;
            continue;
        }
        if (shard_sb_has_key(sb) && t->s.members)
            break; /* one member a sample */
        if (t->s.members &&
            (rc = check_run(t, member, (uint64_t)archive_entry_size(e), header_off, err)))
            return rc;
        if (!shard_sb_has_key(sb)) {
            if (shard_sb_set_key(sb, member + kstart, klen))
                return nomem(t, err);
            if (!t->s.members && shard_keyset_has(&t->seen, (const char *)sb->key.data))
                return shard_fail(err, SHARD_ERR_FORMAT,
                                  "%s: offset %llu: member '%s': key '%s' appears again after "
                                  "other keys (its members are not adjacent)",
                                  url, (unsigned long long)header_off, member,
                                  (const char *)sb->key.data);
            *offset = header_off;
        } else if (klen != sb->key.len - 1 || memcmp(sb->key.data, member + kstart, klen)) {
            break; /* the next sample begins: keep the header for the next call */
        }
        uint64_t max_fields = t->s.max_fields ? t->s.max_fields : SHARD_DEFAULT_MAX_FIELDS;
        if (sb->n >= max_fields)
            return shard_fail(err, SHARD_ERR_FORMAT,
                              "%s: offset %llu: member '%s': sample '%s' has more than %llu "
                              "members (max_fields)",
                              url, (unsigned long long)header_off, member,
                              (const char *)sb->key.data, (unsigned long long)max_fields);
        long dup = shard_sb_find(sb, field, t->s.lowercase);
        if (dup == -2)
            return nomem(t, err);
        if (dup >= 0)
            return shard_fail(err, SHARD_ERR_FORMAT,
                              "%s: offset %llu: member '%s': sample '%s' has field '%s' twice",
                              url, (unsigned long long)header_off, member,
                              (const char *)sb->key.data, shard_sb_name(sb, (size_t)dup));
        uint64_t size = (uint64_t)archive_entry_size(e); /* checked by check_limits */
        uint64_t max_sample = t->s.max_sample_size ? t->s.max_sample_size
                                                   : SHARD_DEFAULT_MAX_SAMPLE;
        if (size > max_sample || sb->declared > max_sample - size)
            return shard_fail(err, SHARD_ERR_FORMAT,
                              "%s: offset %llu: member '%s' of %llu bytes takes sample '%s' to "
                              "%llu bytes, more than the limit of %llu (max_sample_size)",
                              url, (unsigned long long)header_off, member,
                              (unsigned long long)size, (const char *)sb->key.data,
                              (unsigned long long)(sb->declared + size),
                              (unsigned long long)max_sample);
        ShardFieldRec *rec = shard_sb_add(sb, field, member, t->s.lowercase);
        if (!rec)
            return nomem(t, err);
        sb->declared += size;
        rec->size = size;
        rec->offset = data_off;
        if (t->s.headers_only) {
            rec->data = SIZE_MAX; /* no view and no copy: the data stay unread */
            rec->view = NULL;
        } else if ((rc = read_data(t, sb, rec, member, header_off, err))) {
            return rc;
        }
        if ((rc = read_header(t, err)))
            return rc;
    }
    if (sb->n == 0) {
        if ((rc = shard_source_finish(t->src)))
            return shard_fail(err, rc, "%s", t->src->err);
        return SHARD_EOS;
    }
    if (t->s.members) /* paths may come again: nothing to remember */
        return 0;
    char *done = strdup((const char *)sb->key.data);
    int added = done ? shard_keyset_insert(&t->seen, done) : SHARD_ERR_NOMEM;
    if (added <= 0)
        free(done);
    return added < 0 ? nomem(t, err) : 0;
}

int shard_tar_bad_frame(const ShardTar *t) { return t->bad_frame; }

void shard_tar_free(ShardTar **pt)
{
    if (!pt || !*pt)
        return;
    ShardTar *t = *pt;
    if (t->ar)
        archive_read_free(t->ar);
    shard_keyset_free(&t->seen);
    shard_buf_free(&t->run_key);
    ZSTD_freeDStream(t->zs);
    shard_buf_free(&t->zout);
    free(t->last_member);
    free(t);
    *pt = NULL;
}
