/*
 * Writing one shard of a pack plan (shard/pack.h: shard_pack_write_shard): its inputs read
 * (remote ones several on their way at once), checked, re-encoded when asked, written by
 * by the shard writer into the plan's output (a folder or a bucket: the writer's sink).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "pack/packplan.h"
#include "pack/packplandef.h"
#include "pack/convention.h"
#include "pack/record.h"
#include "pack/shrink.h"
#include "remote/store.h"
#include "shard/file.h"
#include "shard/image.h"
#include "shard/pack.h"
#include "shard/writer.h"
#include "source/open.h"

/* The inputs of the shard being written: the buffer they are read into, and the remote ones
 * opened ahead, in a ring of win. */
typedef struct Reading {
    unsigned char *buf;
    size_t cap;
    ShardRemote *remote; /* the plan's, once a remote input is among them */
    ShardSource **ring;
    size_t win, next, end;
} Reading;

/* Reads a whole file into *buf; returns 0, or an errno value, or -1 for a size change, -2
 * for a file that is no longer a regular one.
 * An input replaced by something that is no regular file (a FIFO, a device) since the scan
 * is refused at open, not waited on. */
static int read_input(const Input *x, unsigned char **buf, size_t *cap)
{
    int fd = open(x->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -2;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (*cap < x->in.size + 1) {
        free(*buf);
        *cap = x->in.size + 1;
        *buf = malloc(*cap);
        if (!*buf) {
            *cap = 0;
            close(fd);
            return ENOMEM;
        }
    }
    size_t got = 0;
    for (;;) {
        /* One byte more than expected, to notice a file that grew. */
        ssize_t k = read(fd, *buf + got, x->in.size + 1 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            return e;
        }
        if (k == 0)
            break;
        got += (size_t)k;
        if (got > x->in.size)
            break;
    }
    close(fd);
    return got == x->in.size ? 0 : -1;
}

/* Opens the remote inputs among [rd->next, min(i + win, end)) and starts their transfers,
 * so that win of them are on their way while one is written. A slot left NULL (the open
 * failed) is opened again when its turn comes, for the message. */
static void open_ahead(const ShardPackPlan *p, Reading *rd, size_t i)
{
    for (; rd->next < rd->end && rd->next < i + rd->win; rd->next++) {
        const Input *x = &p->v[rd->next];
        ShardSource *s = NULL;
        char err[SHARD_ERROR_MAX];
        if ((shard_store_can(x->path) & SHARD_STORE_COSTLY) &&
            !shard_source_open(&s, x->path, rd->remote, SHARD_SOURCE_SEQUENTIAL, err))
            shard_source_prefetch(s);
        rd->ring[rd->next % rd->win] = s;
    }
}

/* A remote input read whole through s (taken; NULL: opened now): 0, 1 when it cannot be
 * read (what says why, naming the URL and offset), -1 when its size is not the listed one. */
static int read_remote(ShardRemote *r, const Input *x, ShardSource *s, unsigned char **buf,
                       size_t *cap, char *what)
{
    if (!s && shard_source_open(&s, x->path, r, SHARD_SOURCE_SEQUENTIAL, what))
        return 1;
    if (*cap < x->in.size + 1) {
        free(*buf);
        *cap = x->in.size + 1;
        if (!(*buf = malloc(*cap))) {
            *cap = 0;
            shard_source_put(s);
            snprintf(what, SHARD_ERROR_MAX, "out of memory");
            return 1;
        }
    }
    size_t got = 0;
    const void *b;
    ssize_t k;
    int rc = 0;
    while ((k = shard_source_read(s, &b)) > 0) {
        if ((uint64_t)k > x->in.size - got) {
            rc = -1; /* grew: no need to read the rest */
            break;
        }
        memcpy(*buf + got, b, (size_t)k);
        got += (size_t)k;
    }
    if (k < 0) {
        snprintf(what, SHARD_ERROR_MAX, "%s", s->err);
        rc = 1;
    } else if (!rc && got != x->in.size) {
        rc = -1;
    }
    shard_source_put(s);
    return rc;
}

/* A bad input: 1 to leave it out, or 0 after the error is set. */
static int bad_input(const ShardPackCallbacks *cb, size_t i, const Input *x, ShardPackBad why,
                     const char *what, char *msg)
{
    if (cb && cb->on_bad && cb->on_bad(cb->cookie, i, why, what))
        return 1;
    shard_fail(msg, why == SHARD_PACK_UNREADABLE ? SHARD_ERR_IO : SHARD_ERR_FORMAT, "%s: %s",
               x->path, what);
    return 0;
}

/* Reads input i into rd->buf: 0, or as the callbacks say, 1 to leave it out, or an error
 * with msg. */
static int read_one(const ShardPackPlan *p, size_t i, Reading *rd, const ShardPackCallbacks *cb,
                    char *msg)
{
    const Input *x = &p->v[i];
    char what[SHARD_ERROR_MAX];
    int e;
    if (rd->remote && (shard_store_can(x->path) & SHARD_STORE_COSTLY)) {
        open_ahead(p, rd, i);
        e = read_remote(rd->remote, x, rd->ring[i % rd->win], &rd->buf, &rd->cap, what);
        rd->ring[i % rd->win] = NULL;
        if (e == 1)
            return bad_input(cb, i, x, SHARD_PACK_UNREADABLE, what, msg) ? 1 : SHARD_ERR_IO;
        e = e ? -1 : 0;
    } else {
        e = read_input(x, &rd->buf, &rd->cap);
    }
    if (!e)
        return 0;
    if (e > 0)
        snprintf(what, sizeof what, "cannot read: %s", strerror(e));
    if (bad_input(cb, i, x, e > 0 ? SHARD_PACK_UNREADABLE : SHARD_PACK_CHANGED,
                  e > 0 ? what
                  : e == -2 ? "no longer a regular file (replaced since the scan)"
                            : "file changed size while packing",
                  msg))
        return 1;
    return e > 0 ? SHARD_ERR_IO : SHARD_ERR_FORMAT;
}

/* Input i, read into rd->buf, checked, re-encoded when asked, and written into w: 0 (or
 * left out as the callbacks said), or an error with msg. */
static int write_one(const ShardPackPlan *p, size_t i, Reading *rd, ShardWriter *w,
                     const ShardPackCallbacks *cb, char *msg)
{
    const Input *x = &p->v[i];
    int rc = read_one(p, i, rd, cb, msg);
    if (rc)
        return rc == 1 ? 0 : rc;
    unsigned char *buf = rd->buf;
    char what[SHARD_ERROR_MAX];
    int vr = p->s.verify ? shard_image_verify(buf, x->in.size, what, sizeof what)
                         : (shard_image_format(buf, x->in.size) ? 0 : SHARD_ERR_FORMAT);
    if (vr == SHARD_ERR_FORMAT && !p->s.verify)
        snprintf(what, sizeof what,
                 "not an image (no JPEG, PNG, GIF, WebP, BMP, TIFF or PNM signature)");
    if (vr)
        return bad_input(cb, i, x, vr == SHARD_ERR_FORMAT ? SHARD_PACK_NOT_IMAGE : SHARD_PACK_CORRUPT,
                         what, msg) ? 0 : vr;
    const char *fmt = shard_image_format(buf, x->in.size);
    int gw, gh;
    char why[200];
    if (shard_image_decoded(fmt) &&
        (vr = shard_image_geometry(buf, x->in.size, &gw, &gh, NULL, why, sizeof why))) {
        /* packed as bytes, its size "-" in the columns, unless the caller leaves it out:
         * the loader cannot decode it, said now */
        snprintf(what, sizeof what, "broken %s image (its header: %s), which the loader cannot "
                 "decode", fmt, vr == SHARD_AGAIN ? "cut short" : why);
        if (cb && cb->on_bad && cb->on_bad(cb->cookie, i, SHARD_PACK_UNDECODED, what))
            return 0;
    }
    if (!shard_image_decoded(fmt)) {
        /* packed as bytes unless the caller leaves it out: said now, not at training time */
        snprintf(what, sizeof what, "%s image, which the loader does not decode (JPEG, PNG and "
                                    "WebP are)", fmt);
        if (cb && cb->on_bad && cb->on_bad(cb->cookie, i, SHARD_PACK_UNDECODED, what))
            return 0;
    }
    ShardShrunk shrunk = {0};
    if (p->s.max_side) {
        int sr = shard_jpeg_shrink(buf, x->in.size, (int)p->s.max_side, p->s.quality, &shrunk, what);
        if (sr)
            return bad_input(cb, i, x, sr == SHARD_ERR_NOMEM ? SHARD_PACK_UNREADABLE : SHARD_PACK_CORRUPT,
                             what, msg) ? 0 : sr;
    }
    char *json = shard_pack_sample_json(x, &shrunk);
    char cls[24];
    ShardField f[3];
    ShardSample sample = {x->key, f,
                          shard_pack_sample_fields(x, f, shrunk.data ? shrunk.data : buf,
                                                   shrunk.data ? shrunk.size : x->in.size, cls,
                                                   json ? json : "{}")};
    int wr = json ? shard_writer_add(w, &sample) : SHARD_ERR_NOMEM;
    if (!wr && shrunk.data && cb && cb->on_resized)
        cb->on_resized(cb->cookie, i, x->in.size, shrunk.size);
    free(json);
    free(shrunk.data);
    if (wr) {
        snprintf(msg, SHARD_ERROR_MAX, "%s", wr == SHARD_ERR_NOMEM && !json ? "out of memory"
                                                                            : shard_writer_error(w));
        return wr;
    }
    if (cb && cb->on_written && cb->on_written(cb->cookie, i, x->in.size))
        return shard_fail(msg, SHARD_ERR_STATE, "pack: stopped");
    return 0;
}

int shard_pack_write_shard(const ShardPackPlan *p, size_t j, const ShardPackCallbacks *cb,
                           ShardFileInfo *info, ShardError *err)
{
    memset(info, 0, sizeof *info);
    if (!p->built || j >= p->nshards)
        return shard_report(err, SHARD_ERR_INVALID, "pack: no such shard in the plan");
    ShardWriterSettings ws;
    shard_pack_writer_settings(p, j, &ws);
    char msg[SHARD_ERROR_MAX] = "";
    ws.remote = shard_store_remote(p->out); /* into a bucket: the run's one remote */
    ShardWriter *w;
    int rc = shard_writer_open(&w, &ws, err);
    if (rc)
        return rc;
    Reading rd = {.win = p->s.inflight, .next = p->first[j], .end = p->first[j + 1]};
    for (size_t i = p->first[j]; i < rd.end && !rd.remote; i++)
        if (shard_store_can(p->v[i].path) & SHARD_STORE_COSTLY)
            rd.remote = p->remote; /* made with the plan's first remote input */
    if (rd.remote && !(rd.ring = calloc(rd.win, sizeof *rd.ring)))
        rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
    for (size_t i = p->first[j]; i < rd.end && !rc; i++)
        rc = write_one(p, i, &rd, w, cb, msg);
    free(rd.buf);
    for (size_t k = 0; rd.ring && k < rd.win; k++)
        shard_source_put(rd.ring[k]); /* opened ahead of a failure */
    free(rd.ring);
    if (!rc && shard_writer_finish(w)) {
        rc = SHARD_ERR_IO;
        snprintf(msg, sizeof msg, "%s", shard_writer_error(w));
    }
    if (!rc && shard_writer_count(w) == 1) {
        *info = *shard_writer_shard(w, 0);
        if (!(info->url = strdup(info->url)))
            rc = shard_fail(msg, SHARD_ERR_NOMEM, "out of memory");
        else if (p->recording)
            rc = shard_pack_record_done(p, j, info, msg); /* after the shard: a resume keeps it */
    }
    shard_writer_free(&w);
    return rc ? shard_report(err, rc, msg) : 0;
}
