/*
 * shardcat show: the loader's first batch for a seed and an epoch drawn as a PNG grid,
 * each tile the image exactly as the batch holds it (the crop, the flip, the resize), its
 * key and label under it in a bitmap font, so that a user sees what the model will see.
 */
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "font5x8.h"
#include "shardcat_show.h"

#define GAP 6         /* pixels between tiles and around the grid */
#define LINE_GAP 2    /* pixels between caption lines */
#define CAPTION_LINES 2

static const unsigned char BACKGROUND[3] = {24, 24, 24};
static const unsigned char INK[3] = {235, 235, 235};
static const unsigned char DIM[3] = {150, 150, 150};

typedef struct Canvas {
    unsigned char *px; /* RGB rows */
    int width, height;
} Canvas;

/* Text at (x, y) in the font at scale, cut at max_width pixels. */
static void text(Canvas *c, int x, int y, int scale, const char *s, int max_width,
                 const unsigned char rgb[3])
{
    int advance = (FONT5X8_WIDTH + 1) * scale;
    for (; *s && max_width >= FONT5X8_WIDTH * scale; s++, x += advance, max_width -= advance) {
        const unsigned char *g = font5x8_glyph((unsigned char)*s);
        for (int r = 0; r < FONT5X8_HEIGHT * scale; r++)
            for (int k = 0; k < FONT5X8_WIDTH * scale; k++)
                if (g[r / scale] & (0x10 >> (k / scale)) && x + k < c->width && y + r < c->height)
                    memcpy(c->px + ((size_t)(y + r) * c->width + x + k) * 3, rgb, 3);
    }
}

/* s as it fits in chars characters: whole, or "..." and its end (a key's end tells samples
 * of one folder apart). */
static const char *fit(const char *s, size_t chars, char *buf, size_t size)
{
    size_t n = strlen(s);
    if (n <= chars || chars < 4)
        return s;
    snprintf(buf, size, "...%s", s + n - (chars - 3));
    return buf;
}

/* PNG bytes growing in memory (libpng's write callback). */
typedef struct Bytes {
    unsigned char *p;
    size_t n, cap;
    int failed;
} Bytes;

static void append(png_structp png, png_bytep data, png_size_t n)
{
    Bytes *b = png_get_io_ptr(png);
    if (b->failed)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void flush(png_structp png) { (void)png; }

/* Writes c to url (a path, gs://, s3://; "-": standard output) as an 8-bit RGB PNG, whole
 * or not at all; 0, or -1 with why in msg. */
static int write_png(const Canvas *c, const char *url, char *msg, size_t size)
{
    Bytes b = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, info ? &info : NULL);
        free(b.p);
        snprintf(msg, size, "%s: making the PNG failed", url);
        return -1;
    }
    png_set_write_fn(png, &b, append, flush);
    png_set_IHDR(png, info, (png_uint_32)c->width, (png_uint_32)c->height, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < c->height; y++)
        png_write_row(png, c->px + (size_t)y * c->width * 3);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    ShardError err;
    int rc = 0;
    if (b.failed) {
        rc = -1;
        snprintf(msg, size, "out of memory for the PNG");
    } else if (!strcmp(url, "-")) { /* standard output: a PNG is a stream of bytes */
        if (isatty(STDOUT_FILENO) || fwrite(b.p, 1, b.n, stdout) != b.n || fflush(stdout)) {
            rc = -1;
            snprintf(msg, size, "-: %s", isatty(STDOUT_FILENO)
                                          ? "standard output is a terminal: redirect it to a "
                                            "file or a viewer"
                                          : "cannot write the PNG to standard output");
        }
    } else if ((rc = shard_put(url, b.p, b.n, NULL, &err))) {
        snprintf(msg, size, "%.*s", (int)(size - 1), err.message);
    }
    free(b.p);
    return rc ? -1 : 0;
}

/* A canvas of w x h filled with the background; 0, or -1 with why in msg. */
static int canvas(Canvas *c, int w, int h, char *msg, size_t msgsize)
{
    c->width = w, c->height = h;
    c->px = malloc((size_t)w * h * 3);
    if (!c->px) {
        snprintf(msg, msgsize, "out of memory for a %d x %d picture", w, h);
        return -1;
    }
    for (size_t i = 0; i < (size_t)w * h; i++)
        memcpy(c->px + i * 3, BACKGROUND, 3);
    return 0;
}

/* The columns of a square grid that holds n tiles (columns given: that many, at most n). */
static int columns_for(int columns, size_t n)
{
    while (!columns || (size_t)columns * (size_t)columns < n)
        columns++;
    return (size_t)columns > n ? (int)n : columns;
}

/* The batch as a grid of tiles of its images' size (NHWC uint8), columns a row, captions
 * under, below `title` lines of a title when one is given. */
static int grid(const ShardBatch *b, int columns, const char *title, Canvas *c, char *msg,
                size_t msgsize)
{
    int w = b->width, h = b->height;
    int scale = w >= 384 ? 2 : 1;
    int line = FONT5X8_HEIGHT * scale + LINE_GAP;
    int top = title ? line + LINE_GAP : 0;
    int rows = (int)((b->size + (size_t)columns - 1) / (size_t)columns);
    int cell_h = h + LINE_GAP + CAPTION_LINES * line;
    if (canvas(c, GAP + columns * (w + GAP), GAP + top + rows * (cell_h + GAP), msg, msgsize))
        return -1;
    if (title)
        text(c, GAP, GAP, scale, title, c->width - 2 * GAP, INK);
    size_t chars = (size_t)(w / ((FONT5X8_WIDTH + 1) * scale));
    for (size_t i = 0; i < b->size; i++) {
        int x = GAP + (int)(i % (size_t)columns) * (w + GAP);
        int y = GAP + top + (int)(i / (size_t)columns) * (cell_h + GAP);
        const unsigned char *img = (const unsigned char *)b->images + i * b->image_bytes;
        for (int r = 0; r < h; r++)
            memcpy(c->px + ((size_t)(y + r) * c->width + x) * 3, img + (size_t)r * w * 3,
                   (size_t)w * 3);
        char buf[512], label[64];
        text(c, x, y + h + LINE_GAP, scale, fit(b->keys[i], chars, buf, sizeof buf), w, INK);
        if (b->labels[i] >= 0)
            snprintf(label, sizeof label, "label %lld%s", (long long)b->labels[i],
                     b->repeats && b->repeats[i] ? " (repeat)" : "");
        else
            snprintf(label, sizeof label, "no label%s",
                     b->repeats && b->repeats[i] ? " (repeat)" : "");
        text(c, x, y + h + LINE_GAP + line, scale, label, w, DIM);
    }
    return 0;
}

/* The canvases one under the other, left-aligned, into out (theirs freed). */
static int stack(Canvas *parts, size_t n, Canvas *out, char *msg, size_t msgsize)
{
    int w = 0, h = 0;
    for (size_t i = 0; i < n; i++) {
        w = parts[i].width > w ? parts[i].width : w;
        h += parts[i].height;
    }
    int rc = canvas(out, w, h, msg, msgsize);
    for (size_t i = 0, y = 0; i < n; y += (size_t)parts[i].height, i++) {
        for (int r = 0; !rc && r < parts[i].height; r++)
            memcpy(out->px + ((y + (size_t)r) * (size_t)w) * 3,
                   parts[i].px + (size_t)r * parts[i].width * 3, (size_t)parts[i].width * 3);
        free(parts[i].px);
    }
    return rc;
}

/* The first batch of every bucket (aspect_buckets) until each has one or the epoch ends,
 * each a grid under its bucket's size, one under the other, into c. 0; SHARD_EOS when no
 * batch came; else -1 with why in msg. */
static int draw_buckets(ShardLoader *l, int columns, Canvas *c, size_t *samples, char *msg,
                        size_t msgsize)
{
    size_t n = shard_loader_buckets(l, NULL, NULL, NULL, 0), drawn = 0;
    Canvas *parts = calloc(n ? n : 1, sizeof *parts);
    unsigned char *seen = calloc(n ? n : 1, 1);
    int rc = parts && seen ? 0 : -1;
    if (rc)
        snprintf(msg, msgsize, "out of memory");
    while (!rc && drawn < n) {
        const ShardBatch *b;
        int got = shard_loader_next(l, &b);
        if (got == SHARD_EOS)
            break;
        if (got) {
            snprintf(msg, msgsize, "%s", shard_loader_error(l));
            rc = -1;
            break;
        }
        size_t k = (size_t)b->bucket;
        if (b->bucket >= 0 && k < n && !seen[k]) {
            char title[64];
            snprintf(title, sizeof title, "bucket %d x %d (height x width)", b->height,
                     b->width);
            rc = grid(b, columns_for(columns, b->size), title, &parts[drawn], msg, msgsize);
            seen[k] = 1;
            drawn += !rc;
            *samples += b->size;
        }
        shard_batch_release(l, b);
    }
    if (!rc && !drawn)
        rc = SHARD_EOS;
    if (!rc)
        rc = stack(parts, drawn, c, msg, msgsize);
    else
        for (size_t i = 0; parts && i < drawn; i++)
            free(parts[i].px);
    free(parts);
    free(seen);
    return rc;
}

/* What show may hold: two batches and the picture, each about count x w x h x 3 bytes, within
 * a quarter of the machine's memory and at most 2 GiB. 0, or 1 after saying why. */
static int within_memory(const ShardLoaderSettings *ls)
{
    double need = 3.0 * (double)ls->batch_size * ls->transform.width * ls->transform.height * 3;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double limit = pages > 0 && page > 0 ? (double)pages * (double)page / 4 : 2.0 * (1 << 30);
    if (limit > 2.0 * (1 << 30))
        limit = 2.0 * (1 << 30);
    if (need <= limit)
        return 0;
    fprintf(stderr, "shardcat: show: %zu tiles of %d x %d need about %.0f MB (two batches and "
                    "the picture), more than show's limit of %.0f MB (a quarter of this "
                    "machine's memory, at most 2 GiB): draw fewer (--count) or smaller "
                    "(--image-size) tiles\n",
            ls->batch_size, ls->transform.width, ls->transform.height, need / 1e6, limit / 1e6);
    return 1;
}

int shardcat_show(const ShardcatCli *cli, ShardLoaderSettings *ls, ShardRemote *remote)
{
    return shardcat_show_from(cli, ls, remote, cli->state);
}

int shardcat_show_from(const ShardcatCli *cli, ShardLoaderSettings *ls, ShardRemote *remote,
                       const char *state)
{
    if (within_memory(ls))
        return 1;
    ShardReaderSettings *rs = &ls->reader;
    rs->urls = (const char *const *)cli->args;
    rs->nurls = (size_t)cli->nargs;
    rs->remote = remote;
    rs->manifest_commands = cli->manifest_commands;
    rs->manifest_local = cli->manifest_local;
    ls->transform.layout = SHARD_LAYOUT_NHWC; /* rows of RGB, as a PNG's */
    ls->transform.dtype = SHARD_DTYPE_UINT8;
    ls->missing_label = SHARD_LABEL_MINUS_ONE; /* shown as "no label" */
    ls->raw_fields = NULL;
    ls->batches = 2;
    rs->aspect_buckets = cli->aspect_buckets;
    rs->keys = cli->keys;
    ShardLoader *l;
    ShardError err;
    if (shard_loader_open(&l, ls, &err)) {
        fprintf(stderr, "shardcat: %s\n", err.message);
        return 1;
    }
    if (!rs->have_seed)
        fprintf(stderr, "shardcat: seed %llu (random; pass --seed to draw these again)\n",
                (unsigned long long)shard_loader_seed(l));
    int status = 0;
    const ShardBatch *b = NULL;
    char msg[SHARD_ERROR_MAX + 64];
    Canvas c = {0};
    size_t samples = 0;
    uint64_t epoch = ls->reader.epoch;
    int rc = state ? shard_loader_restore(l, state) : 0;
    if (!rc && rs->aspect_buckets && cli->command == SHARDCAT_SHOW) { /* batch: the step's */
        rc = draw_buckets(l, cli->columns, &c, &samples, msg, sizeof msg);
    } else if (!rc && !(rc = shard_loader_next(l, &b))) {
        samples = b->size, epoch = b->epoch;
        rc = grid(b, columns_for(cli->columns, b->size), NULL, &c, msg, sizeof msg);
        shard_batch_release(l, b);
    } else if (rc && rc != SHARD_EOS) {
        snprintf(msg, sizeof msg, "%s", shard_loader_error(l));
        rc = -1;
    }
    if (rc == SHARD_EOS) {
        fprintf(stderr, "shardcat: no samples: the epoch is empty for this consumer\n");
        status = 1;
    } else if (rc || write_png(&c, cli->output, msg, sizeof msg)) {
        char face[SHARD_ERROR_MAX + 256];
        fprintf(stderr, "shardcat: %s\n", cli_face(msg, face, sizeof face));
        status = 1;
    } else {
        fprintf(stderr, "shardcat: %zu samples of epoch %llu, seed %llu, drawn into %s\n",
                samples, (unsigned long long)epoch, (unsigned long long)shard_loader_seed(l),
                cli->output);
    }
    free(c.px);
    shard_loader_free(&l);
    return status;
}
