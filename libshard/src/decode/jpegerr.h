/*
 * libjpeg's errors as libshard takes them, for every file that calls libjpeg (jpeg.c,
 * imagecheck.c, pack/shrink.c): an error longjmps back to the caller's setjmp with libjpeg's message,
 * and the first warning (corrupt data libjpeg would otherwise paper over with grey) is kept
 * in the same message for the caller to judge.
 */
#ifndef SHARD_DECODE_JPEGERR_H
#define SHARD_DECODE_JPEGERR_H

#include <setjmp.h>
#include <stdio.h>

#include <jpeglib.h>

typedef struct ShardJpegErr {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX + 64];
    int warned;  /* a warning's message is in msg */
    int limited; /* msg is a limit's (the data may be sound), not libjpeg's */
    struct jpeg_progress_mgr progress;
    int max_scans;
} ShardJpegErr;

static inline void shard_jpeg_error_exit(j_common_ptr c)
{
    ShardJpegErr *e = (ShardJpegErr *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jump, 1);
}

static inline void shard_jpeg_emit_message(j_common_ptr c, int level)
{
    ShardJpegErr *e = (ShardJpegErr *)c->err;
    if (level < 0 && !e->warned) { /* -1: a warning; others are trace messages */
        e->warned = 1;
        (*c->err->format_message)(c, e->msg);
    }
}

/* Called by libjpeg as it reads (each row of a scan): a progressive JPEG's scans each walk
 * every block, so their number is what bounds the time one takes (as djpeg -maxscans). */
static inline void shard_jpeg_progress(j_common_ptr c)
{
    ShardJpegErr *e = (ShardJpegErr *)c->err;
    if (c->is_decompressor && ((j_decompress_ptr)c)->input_scan_number > e->max_scans) {
        snprintf(e->msg, sizeof e->msg, "a progressive JPEG of more than %d scans (max_scans)",
                 e->max_scans);
        e->limited = 1;
        longjmp(e->jump, 1);
    }
}

/* Holds decompressor d, whose error manager e is, to max_scans scans. */
static inline void shard_jpeg_limit_scans(struct jpeg_decompress_struct *d, ShardJpegErr *e,
                                          int max_scans)
{
    e->max_scans = max_scans;
    e->progress.progress_monitor = shard_jpeg_progress;
    d->progress = &e->progress;
}

/* "corrupt JPEG: " before libjpeg's own message, nothing before a limit's. */
static inline const char *shard_jpeg_what(const ShardJpegErr *e)
{
    return e->limited ? "" : "corrupt JPEG: ";
}

/* The error manager for a libjpeg object (its err member); the caller then sets e->jump. */
static inline struct jpeg_error_mgr *shard_jpeg_err_init(ShardJpegErr *e)
{
    struct jpeg_error_mgr *m = jpeg_std_error(&e->mgr);
    m->error_exit = shard_jpeg_error_exit;
    m->emit_message = shard_jpeg_emit_message;
    e->warned = 0;
    e->limited = 0;
    e->msg[0] = 0;
    return m;
}

#endif /* SHARD_DECODE_JPEGERR_H */
