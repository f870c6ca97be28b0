/*
 * Reading one shard (shard/file.h).
 *
 * Local files are mapped and handed to libarchive as a single block: libarchive then
 * returns member data as pointers into the mapping, so an uncompressed tar is read with no
 * copy at all and every view stays valid while the file is open. Compressed shards and
 * pipes go through libarchive's filters; their blocks are copied once into the sample
 * buffer. Seeking uses the .idx (and for .tar.zst the seek table, one frame decompressed
 * at a time) and bypasses libarchive.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <zstd.h>

#include "index.h"
#include "internal.h"
#include "shard/file.h"
#include "shard/names.h"
#include "zstdseek.h"

extern char **environ;

#define PIPE_BUFSIZE (1u << 20)

typedef struct FieldRec {
    size_t name, member; /* offsets into the arena */
    size_t data;         /* offset into the arena, or SIZE_MAX when view points into the map */
    const unsigned char *view;
    uint64_t size, offset;
} FieldRec;

typedef struct KeySet {
    char **slots;
    size_t cap, n;
} KeySet;

struct ShardFile {
    ShardFileSettings s;
    char *url;
    char err[SHARD_ERROR_MAX];
    int failed; /* sticky error code */

    /* source */
    int fd;
    const unsigned char *map;
    uint64_t size;
    int sent; /* the mapping was handed to libarchive */
    pid_t pid; /* pipe: */
    unsigned char *pbuf;

    /* sequential reading */
    struct archive *ar;
    struct archive_entry *entry;
    int have_entry; /* a header read but not yet taken into a sample */
    int eof;
    const char *compression;
    uint64_t next_index;
    KeySet seen;
    char *cur_key;
    char *last_member; /* the member before the current header, for messages */

    /* the sample handed out */
    ShardBuf arena;
    FieldRec *recs;
    ShardFieldView *views;
    size_t nrecs, caprecs;
    ShardSampleView sample;
    ShardBuf keybuf;

    /* seeking */
    ShardIndex idx;
    int have_idx;
    int indexed; /* reading by index since a seek */
    ShardSeekEntry *frames;
    size_t nframes;
    uint64_t *frame_doff, *frame_coff; /* cumulative decompressed / compressed offsets */
    ZSTD_DCtx *dctx;
    ShardBuf frame; /* the decompressed frame cached */
    size_t frame_no; /* which frame is in it, SIZE_MAX for none */
};

/* ---- key set ------------------------------------------------------------------------ */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int keyset_has(const KeySet *k, const char *key)
{
    if (!k->cap)
        return 0;
    for (size_t j = hash_str(key) & (k->cap - 1); k->slots[j]; j = (j + 1) & (k->cap - 1))
        if (!strcmp(k->slots[j], key))
            return 1;
    return 0;
}

/* Takes ownership of key. */
static int keyset_add(KeySet *k, char *key)
{
    if ((k->n + 1) * 2 > k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 1024;
        char **slots = calloc(cap, sizeof *slots);
        if (!slots)
            return SHARD_ERR_NOMEM;
        for (size_t i = 0; i < k->cap; i++) {
            if (!k->slots[i])
                continue;
            size_t j = hash_str(k->slots[i]) & (cap - 1);
            while (slots[j])
                j = (j + 1) & (cap - 1);
            slots[j] = k->slots[i];
        }
        free(k->slots);
        k->slots = slots;
        k->cap = cap;
    }
    size_t j = hash_str(key) & (k->cap - 1);
    while (k->slots[j])
        j = (j + 1) & (k->cap - 1);
    k->slots[j] = key;
    k->n++;
    return 0;
}

static void keyset_free(KeySet *k)
{
    for (size_t i = 0; i < k->cap; i++)
        free(k->slots[i]);
    free(k->slots);
    memset(k, 0, sizeof *k);
}

/* ---- sources ------------------------------------------------------------------------ */

static la_ssize_t read_cb(struct archive *a, void *cookie, const void **buf)
{
    ShardFile *f = cookie;
    (void)a;
    if (f->pid > 0) {
        for (;;) {
            ssize_t k = read(f->fd, f->pbuf, PIPE_BUFSIZE);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                archive_set_error(a, errno, "reading from the pipe: %s", strerror(errno));
            *buf = f->pbuf;
            return k;
        }
    }
    if (f->sent)
        return 0;
    f->sent = 1;
    *buf = f->map;
    return (la_ssize_t)f->size;
}

static int open_pipe(ShardFile *f, const char *cmd)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return shard_fail(f->err, SHARD_ERR_IO, "%s: pipe: %s", f->url, strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    char *argv[] = {"sh", "-c", (char *)cmd, NULL};
    int rc = posix_spawn(&f->pid, "/bin/sh", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc) {
        close(fds[0]);
        f->pid = 0;
        return shard_fail(f->err, SHARD_ERR_IO, "%s: cannot start the command: %s", f->url,
                          strerror(rc));
    }
    f->fd = fds[0];
    f->pbuf = malloc(PIPE_BUFSIZE);
    if (!f->pbuf)
        return shard_fail(f->err, SHARD_ERR_NOMEM, "%s: out of memory", f->url);
    return 0;
}

static int open_local(ShardFile *f)
{
    f->fd = open(f->url, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        int e = errno;
        return shard_fail(f->err, shard_errno_code(e), "%s: cannot open: %s", f->url, strerror(e));
    }
    struct stat st;
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return shard_fail(f->err, SHARD_ERR_IO, "%s: not a regular file", f->url);
    f->size = (uint64_t)st.st_size;
    if (f->size) {
        void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
        if (m == MAP_FAILED)
            return shard_fail(f->err, SHARD_ERR_IO, "%s: mmap: %s", f->url, strerror(errno));
        madvise(m, f->size, MADV_SEQUENTIAL);
        f->map = m;
    }
    return 0;
}

/* ---- open --------------------------------------------------------------------------- */

void shard_file_default_settings(ShardFileSettings *s)
{
    memset(s, 0, sizeof *s);
    s->lowercase = 1;
    s->load_index = 1;
    s->index = NULL;
    s->on_skip = NULL;
    s->cookie = NULL;
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

int shard_file_open(ShardFile **out, const char *url, const ShardFileSettings *s, ShardError *err)
{
    *out = NULL;
    ShardFile *f = calloc(1, sizeof *f);
    if (!f)
        return shard_report(err, SHARD_ERR_NOMEM, "out of memory");
    if (s)
        f->s = *s;
    else
        shard_file_default_settings(&f->s);
    f->fd = -1;
    f->frame_no = SIZE_MAX;
    f->url = shard_strdup(url);
    f->entry = NULL;
    if (!f->url)
        return fail_open(f, err, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
    int rc = !strncmp(url, "pipe:", 5) ? open_pipe(f, url + 5) : open_local(f);
    if (rc)
        return fail_open(f, err, rc);
    f->ar = archive_read_new();
    if (!f->ar)
        return fail_open(f, err, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
    archive_read_support_filter_all(f->ar);
    archive_read_support_format_tar(f->ar);
    if (archive_read_open2(f->ar, f, NULL, read_cb, NULL, NULL) != ARCHIVE_OK) {
        int compressed = f->map && f->size >= 4 &&
                         ((f->map[0] == 0x28 && f->map[1] == 0xb5 && f->map[2] == 0x2f &&
                           f->map[3] == 0xfd) ||
                          (f->map[0] == 0x1f && f->map[1] == 0x8b));
        const char *why = archive_error_string(f->ar);
        if (compressed) /* libarchive decompresses ahead: the first tar header never came */
            return fail_open(f, err, shard_fail(f->err, SHARD_ERR_FORMAT,
                                                "%s: offset %llu: the compressed stream %s "
                                                "before the first tar header could be read: %s",
                                                f->url,
                                                (unsigned long long)(why && strstr(why, "runcated") ? f->size : 0),
                                                why && strstr(why, "runcated") ? "ends" : "breaks",
                                                why ? why : "damaged"));
        return fail_open(f, err, shard_fail(f->err, SHARD_ERR_FORMAT,
                                            "%s: offset 0: not a tar archive, or its first "
                                            "header is damaged: %s",
                                            f->url, archive_error_string(f->ar)));
    }
    switch (archive_filter_code(f->ar, 0)) {
    case ARCHIVE_FILTER_NONE: f->compression = "none"; break;
    case ARCHIVE_FILTER_GZIP: f->compression = "gzip"; break;
    case ARCHIVE_FILTER_ZSTD: f->compression = "zstd"; break;
    default: f->compression = archive_filter_name(f->ar, 0); break;
    }
    if (f->map && !strcmp(f->compression, "zstd")) {
        uint64_t tb;
        rc = shard_seek_table_decode(f->map, f->size, f->url, &f->frames, &f->nframes, &tb, f->err);
        if (rc && rc != SHARD_ERR_NOT_FOUND)
            return fail_open(f, err, rc);
    }
    if (f->s.load_index && f->pid == 0) {
        char *ipath = f->s.index ? shard_strdup(f->s.index) : shard_index_path(f->url);
        if (!ipath)
            return fail_open(f, err, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
        if (f->s.index || access(ipath, F_OK) == 0) {
            rc = shard_index_load(&f->idx, ipath, f->err);
            if (rc) {
                free(ipath);
                return fail_open(f, err, rc);
            }
            f->have_idx = 1;
        }
        free(ipath);
    }
    *out = f;
    return 0;
}

/* ---- sequential reading ------------------------------------------------------------- */

static int set_failed(ShardFile *f, int rc)
{
    f->failed = rc;
    return rc;
}

static int archive_fail(ShardFile *f, const char *member, uint64_t offset)
{
    const char *msg = archive_error_string(f->ar);
    if (member)
        shard_fail(f->err, SHARD_ERR_FORMAT, "%s: offset %llu: member '%s': %s", f->url,
                   (unsigned long long)offset, member, msg ? msg : "damaged tar data");
    else if (f->last_member)
        shard_fail(f->err, SHARD_ERR_FORMAT, "%s: offset %llu: the header after member '%s': %s",
                   f->url, (unsigned long long)offset, f->last_member,
                   msg ? msg : "damaged tar header");
    else
        shard_fail(f->err, SHARD_ERR_FORMAT, "%s: offset %llu: the first header: %s", f->url,
                   (unsigned long long)offset, msg ? msg : "damaged tar header");
    return set_failed(f, SHARD_ERR_FORMAT);
}

static int read_header(ShardFile *f)
{
    if (f->have_entry) {
        const char *m = archive_entry_pathname(f->entry);
        free(f->last_member);
        f->last_member = shard_strdup(m ? m : "");
    }
    uint64_t pos = (uint64_t)archive_filter_bytes(f->ar, 0);
    int r = archive_read_next_header(f->ar, &f->entry);
    if (r == ARCHIVE_EOF) {
        f->eof = 1;
        f->have_entry = 0;
        return 0;
    }
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        return archive_fail(f, NULL, pos);
    f->have_entry = 1;
    return 0;
}

static int add_rec(ShardFile *f, FieldRec **out)
{
    if (f->nrecs == f->caprecs) {
        size_t cap = f->caprecs ? f->caprecs * 2 : 8;
        FieldRec *r = realloc(f->recs, cap * sizeof *r);
        ShardFieldView *v = r ? realloc(f->views, cap * sizeof *v) : NULL;
        if (r)
            f->recs = r;
        if (!v)
            return SHARD_ERR_NOMEM;
        f->views = v;
        f->caprecs = cap;
    }
    *out = &f->recs[f->nrecs++];
    memset(*out, 0, sizeof **out);
    return 0;
}

static int arena_str(ShardFile *f, const char *s, size_t n, size_t *off, int lower)
{
    *off = f->arena.len;
    if (shard_buf_append(&f->arena, s, n) || shard_buf_append(&f->arena, "", 1))
        return SHARD_ERR_NOMEM;
    if (lower)
        for (char *p = (char *)f->arena.data + *off; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
    return 0;
}

/* Reads the current entry's data into rec: a view into the mapping when it is one
 * contiguous block there, else a copy in the arena. */
static int read_data(ShardFile *f, FieldRec *rec, const char *member, uint64_t header_off)
{
    const void *buf;
    size_t len;
    la_int64_t off;
    int blocks = 0;
    uint64_t expect = rec->size;
    for (;;) {
        int r = archive_read_data_block(f->ar, &buf, &len, &off);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
            return archive_fail(f, member, header_off);
        const unsigned char *p = buf;
        if (blocks == 0 && f->map && p >= f->map && p + len <= f->map + f->size && off == 0 &&
            len == expect) {
            rec->view = p;
            rec->data = SIZE_MAX;
        } else {
            if (rec->data == SIZE_MAX) {
                /* A second block after a view: move the view into the arena first. */
                rec->data = f->arena.len;
                if (shard_buf_append(&f->arena, rec->view, expect))
                    return set_failed(f, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
                rec->view = NULL;
            }
            if (blocks == 0)
                rec->data = f->arena.len;
            uint64_t have = f->arena.len - rec->data;
            if ((uint64_t)off > have) { /* a hole in a sparse member */
                if (shard_buf_reserve(&f->arena, (size_t)((uint64_t)off - have)))
                    return set_failed(f, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
                memset(f->arena.data + f->arena.len, 0, (size_t)((uint64_t)off - have));
                f->arena.len += (size_t)((uint64_t)off - have);
            }
            if (shard_buf_append(&f->arena, p, len))
                return set_failed(f, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
        }
        blocks++;
    }
    if (blocks == 0)
        rec->data = f->arena.len, rec->view = NULL;
    return 0;
}

static void publish(ShardFile *f, uint64_t first_offset)
{
    for (size_t i = 0; i < f->nrecs; i++) {
        FieldRec *r = &f->recs[i];
        ShardFieldView *v = &f->views[i];
        v->name = (const char *)f->arena.data + r->name;
        v->member = (const char *)f->arena.data + r->member;
        v->data = r->data == SIZE_MAX ? r->view : f->arena.data + r->data;
        v->size = r->size;
        v->offset = r->offset;
    }
    f->sample.key = (const char *)f->keybuf.data;
    f->sample.url = f->url;
    f->sample.index = f->next_index++;
    f->sample.offset = first_offset;
    f->sample.fields = f->views;
    f->sample.nfields = f->nrecs;
}

static int next_sequential(ShardFile *f, const ShardSampleView **out)
{
    f->arena.len = 0;
    f->nrecs = 0;
    f->keybuf.len = 0;
    uint64_t first_offset = 0;
    int rc;
    if (!f->have_entry && !f->eof && (rc = read_header(f)))
        return rc;
    while (f->have_entry) {
        struct archive_entry *e = f->entry;
        const char *member = archive_entry_pathname(e);
        uint64_t header_off = (uint64_t)archive_read_header_position(f->ar);
        uint64_t data_off = (uint64_t)archive_filter_bytes(f->ar, 0);
        size_t kstart, klen;
        const char *field;
        const char *why = NULL;
        if (!member)
            why = "no name";
        else if (archive_entry_filetype(e) != AE_IFREG)
            why = archive_entry_filetype(e) == AE_IFDIR   ? "a folder"
                  : archive_entry_filetype(e) == AE_IFLNK ? "a symbolic link"
                  : archive_entry_hardlink(e)             ? "a hard link"
                                                          : "not a regular file";
        else if (archive_entry_hardlink(e))
            why = "a hard link";
        else if (shard_name_split(member, &kstart, &klen, &field))
            why = "not a sample field (no dot in the basename, or a hidden or __ name)";
        if (why) {
            if (f->s.on_skip)
                f->s.on_skip(f->s.cookie, member ? member : "", header_off, why);
            if ((rc = read_header(f)))
                return rc;
            continue;
        }
        if (f->keybuf.len == 0) {
            if (shard_buf_append(&f->keybuf, member + kstart, klen) || shard_buf_append(&f->keybuf, "", 1))
                return set_failed(f, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
            if (keyset_has(&f->seen, (const char *)f->keybuf.data))
                return set_failed(f, shard_fail(f->err, SHARD_ERR_FORMAT,
                                                "%s: offset %llu: member '%s': key '%s' appears "
                                                "again after other keys (its members are not "
                                                "adjacent)",
                                                f->url, (unsigned long long)header_off, member,
                                                (const char *)f->keybuf.data));
            first_offset = header_off;
        } else if (klen != f->keybuf.len - 1 || memcmp(f->keybuf.data, member + kstart, klen)) {
            break; /* the next sample begins: keep the header for the next call */
        }
        for (size_t i = 0; i < f->nrecs; i++) {
            const char *prev = (const char *)f->arena.data + f->recs[i].name;
            int same = f->s.lowercase ? !strcasecmp(prev, field) : !strcmp(prev, field);
            if (same)
                return set_failed(f, shard_fail(f->err, SHARD_ERR_FORMAT,
                                                "%s: offset %llu: member '%s': sample '%s' has "
                                                "field '%s' twice",
                                                f->url, (unsigned long long)header_off, member,
                                                (const char *)f->keybuf.data, prev));
        }
        FieldRec *rec;
        if (add_rec(f, &rec) || arena_str(f, field, strlen(field), &rec->name, f->s.lowercase) ||
            arena_str(f, member, strlen(member), &rec->member, 0))
            return set_failed(f, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
        rec->size = (uint64_t)archive_entry_size(e);
        rec->offset = data_off;
        if ((rc = read_data(f, rec, member, header_off)))
            return rc;
        if ((rc = read_header(f)))
            return rc;
    }
    if (f->nrecs == 0) {
        if (f->pid > 0) {
            int status = 0;
            close(f->fd);
            f->fd = -1;
            waitpid(f->pid, &status, 0);
            f->pid = -1;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return set_failed(f, shard_fail(f->err, SHARD_ERR_IO,
                                                "%s: the command failed (status %d)", f->url,
                                                WIFEXITED(status) ? WEXITSTATUS(status) : -1));
        }
        return SHARD_EOS;
    }
    char *done = shard_strdup((const char *)f->keybuf.data);
    if (!done || keyset_add(&f->seen, done)) {
        free(done);
        return set_failed(f, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
    }
    publish(f, first_offset);
    *out = &f->sample;
    return 0;
}

/* ---- reading by index --------------------------------------------------------------- */

/* Copies size bytes at tar offset off into the arena, decompressing frames as needed. */
static int read_zst_range(ShardFile *f, uint64_t off, uint64_t size, size_t *at)
{
    *at = f->arena.len;
    while (size) {
        /* the frame holding off: last frame whose start <= off */
        size_t lo = 0, hi = f->nframes;
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (f->frame_doff[mid] <= off)
                lo = mid;
            else
                hi = mid;
        }
        if (lo >= f->nframes || off >= f->frame_doff[f->nframes])
            return shard_fail(f->err, SHARD_ERR_FORMAT,
                              "%s: tar offset %llu is past the end of the data (%llu bytes)",
                              f->url, (unsigned long long)off,
                              (unsigned long long)f->frame_doff[f->nframes]);
        if (f->frame_no != lo) {
            const ShardSeekEntry *e = &f->frames[lo];
            f->frame.len = 0;
            if (shard_buf_reserve(&f->frame, e->dsize))
                return shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory");
            size_t r = ZSTD_decompressDCtx(f->dctx, f->frame.data, e->dsize,
                                           f->map + f->frame_coff[lo], e->csize);
            if (ZSTD_isError(r) || r != e->dsize) {
                f->frame_no = SIZE_MAX;
                return shard_fail(f->err, SHARD_ERR_FORMAT,
                                  "%s: zstd frame %zu at offset %llu: %s", f->url, lo,
                                  (unsigned long long)f->frame_coff[lo],
                                  ZSTD_isError(r) ? ZSTD_getErrorName(r)
                                                  : "size differs from the seek table");
            }
            f->frame.len = r;
            f->frame_no = lo;
        }
        uint64_t in = off - f->frame_doff[lo];
        uint64_t take = f->frame.len - in < size ? f->frame.len - in : size;
        if (shard_buf_append(&f->arena, f->frame.data + in, (size_t)take))
            return shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory");
        off += take;
        size -= take;
    }
    return 0;
}

static int next_indexed(ShardFile *f, const ShardSampleView **out)
{
    if (f->next_index >= f->idx.nsamples)
        return SHARD_EOS;
    f->arena.len = 0;
    f->nrecs = 0;
    f->keybuf.len = 0;
    uint64_t i = f->next_index;
    for (uint64_t k = f->idx.first[i]; k < f->idx.first[i + 1]; k++) {
        const ShardIndexEntry *e = &f->idx.entries[k];
        FieldRec *rec;
        const char *name = e->name ? e->name : e->ext;
        if (add_rec(f, &rec) || arena_str(f, e->ext, strlen(e->ext), &rec->name, f->s.lowercase) ||
            arena_str(f, name, strlen(name), &rec->member, 0))
            return set_failed(f, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
        rec->size = e->size;
        rec->offset = e->offset;
        if (f->nframes) {
            int rc = read_zst_range(f, e->offset, e->size, &rec->data);
            if (rc)
                return set_failed(f, rc);
        } else {
            if (e->offset > f->size || e->size > f->size - e->offset)
                return set_failed(f, shard_fail(f->err, SHARD_ERR_FORMAT,
                                                "%s: index line %llu: member '%s' at offset %llu "
                                                "size %llu lies past the end of the shard (%llu "
                                                "bytes)",
                                                f->url, (unsigned long long)i + 2, name,
                                                (unsigned long long)e->offset,
                                                (unsigned long long)e->size,
                                                (unsigned long long)f->size));
            rec->view = f->map + e->offset;
            rec->data = SIZE_MAX;
        }
        if (k == f->idx.first[i]) {
            size_t ks = 0, kl = 0;
            const char *field;
            if (e->name && !shard_name_split(e->name, &ks, &kl, &field)) {
                if (shard_buf_append(&f->keybuf, e->name + ks, kl))
                    return set_failed(f, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
            }
            if (shard_buf_append(&f->keybuf, "", 1))
                return set_failed(f, shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory"));
        }
    }
    uint64_t first = f->idx.entries[f->idx.first[i]].offset;
    publish(f, first >= 512 ? first - 512 : 0);
    *out = &f->sample;
    return 0;
}

int shard_file_next(ShardFile *f, const ShardSampleView **out)
{
    *out = NULL;
    if (f->failed)
        return f->failed;
    return f->indexed ? next_indexed(f, out) : next_sequential(f, out);
}

int shard_file_seek(ShardFile *f, uint64_t i)
{
    if (f->failed)
        return f->failed;
    if (!f->have_idx)
        return shard_fail(f->err, SHARD_ERR_UNSUPPORTED,
                          "%s: no index (write one with 'shardcat index')", f->url);
    if (!f->map || (strcmp(f->compression, "none") && !f->nframes))
        return shard_fail(f->err, SHARD_ERR_UNSUPPORTED,
                          "%s: seeking needs a local .tar, or a .tar.zst with a seek table",
                          f->url);
    if (i >= f->idx.nsamples)
        return shard_fail(f->err, SHARD_ERR_NOT_FOUND, "%s: sample %llu of %llu", f->url,
                          (unsigned long long)i, (unsigned long long)f->idx.nsamples);
    if (f->nframes && !f->frame_doff) {
        f->frame_doff = malloc((f->nframes + 1) * sizeof *f->frame_doff);
        f->frame_coff = malloc((f->nframes + 1) * sizeof *f->frame_coff);
        f->dctx = ZSTD_createDCtx();
        if (!f->frame_doff || !f->frame_coff || !f->dctx)
            return shard_fail(f->err, SHARD_ERR_NOMEM, "out of memory");
        f->frame_doff[0] = f->frame_coff[0] = 0;
        for (size_t k = 0; k < f->nframes; k++) {
            f->frame_doff[k + 1] = f->frame_doff[k] + f->frames[k].dsize;
            f->frame_coff[k + 1] = f->frame_coff[k] + f->frames[k].csize;
        }
    }
    f->indexed = 1;
    f->next_index = i;
    return 0;
}

int shard_file_in_map(const ShardFile *f, const void *p, uint64_t n)
{
    const unsigned char *q = p;
    return f->map && q >= f->map && n <= f->size && (uint64_t)(q - f->map) <= f->size - n;
}

int64_t shard_file_count(const ShardFile *f)
{
    return f->have_idx ? (int64_t)f->idx.nsamples : -1;
}

const char *shard_file_compression(const ShardFile *f) { return f->compression; }

int64_t shard_file_size(const ShardFile *f) { return f->pid ? -1 : (int64_t)f->size; }

const char *shard_file_error(const ShardFile *f) { return f->err; }

void shard_file_free(ShardFile **pf)
{
    if (!pf || !*pf)
        return;
    ShardFile *f = *pf;
    if (f->ar)
        archive_read_free(f->ar);
    if (f->map)
        munmap((void *)f->map, f->size);
    if (f->fd >= 0)
        close(f->fd);
    if (f->pid > 0) {
        kill(f->pid, SIGTERM);
        waitpid(f->pid, NULL, 0);
    }
    free(f->pbuf);
    free(f->url);
    free(f->cur_key);
    free(f->last_member);
    keyset_free(&f->seen);
    shard_buf_free(&f->arena);
    shard_buf_free(&f->keybuf);
    shard_buf_free(&f->frame);
    free(f->recs);
    free(f->views);
    shard_index_clear(&f->idx);
    free(f->frames);
    free(f->frame_doff);
    free(f->frame_coff);
    ZSTD_freeDCtx(f->dctx);
    free(f);
    *pf = NULL;
}
