/*
 * Columns beside the index (columns.c; formats/columns.md): per-sample values (an image's
 * stored width and height) parsed and formatted.
 */
#ifndef SHARD_TAR_COLUMNS_H
#define SHARD_TAR_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

#include "base/attr.h"
#include "shard/remote.h"
#include "shard/sample.h"

/* A value the file says is none ("-"). */
#define SHARD_COLUMN_NONE UINT32_MAX
/* The most columns a file may hold. */
#define SHARD_COLUMNS_MAX 64

typedef struct ShardColumns {
    char *text;        /* the file, tokens NUL-terminated in place */
    uint64_t n;        /* samples */
    size_t ncols;
    const char *names[SHARD_COLUMNS_MAX]; /* into text */
    uint32_t *v;       /* n x ncols values, row by row; SHARD_COLUMN_NONE: none */
} ShardColumns;

/* Parses the len bytes of text (NUL-terminated after them), taking ownership of text
 * (malloc'd; freed by shard_columns_clear, or here on failure). name says in messages what
 * was parsed. 0, or SHARD_ERR_FORMAT with err (SHARD_ERROR_MAX bytes) naming the line, or
 * SHARD_ERR_NOMEM. */
SHARD_HIDDEN int shard_columns_parse(ShardColumns *c, char *text, size_t len, const char *name,
                                     char *err);
/* The columns at url (a path, file://, http(s)://, gs://, s3://; remote borrowed, NULL for
 * the defaults), read whole and parsed. 0; SHARD_ERR_NOT_FOUND when there are none; another
 * code with err naming the URL or line. */
SHARD_HIDDEN int shard_columns_load(ShardColumns *c, const char *url, ShardRemote *remote,
                                    char *err);
/* Column name's number, or -1. */
SHARD_HIDDEN int shard_columns_find(const ShardColumns *c, const char *name);
/* Value of sample i in column k. */
SHARD_HIDDEN uint32_t shard_columns_value(const ShardColumns *c, uint64_t i, int k);
SHARD_HIDDEN void shard_columns_clear(ShardColumns *c);

/* The columns this version writes (formats/columns.md, section 3), in this order. */
#define SHARD_GEOMETRY_NCOLS 2
SHARD_HIDDEN extern const char *const shard_geometry_names[SHARD_GEOMETRY_NCOLS];

/* Whether a field of this name is a better image than the best so far (*rank: its place
 * among "jpg", "jpeg", "png", "webp", the first of which a sample has being the image the
 * loader decodes by default; -1 before any), which it then becomes. */
SHARD_HIDDEN int shard_columns_better_image(const char *field, int *rank);

/* The field of a sample read whole that is its image (the best by
 * shard_columns_better_image), or NULL. */
SHARD_HIDDEN const ShardFieldView *shard_columns_image_of(const ShardSampleView *v);

/* A whole image's stored size into out[2] (width, height), or {NONE, NONE} when its header
 * does not parse (said in why, why_size bytes, when given). 0, or the error of
 * shard_image_geometry. */
SHARD_HIDDEN int shard_columns_geometry(const void *data, size_t size, uint32_t out[2], char *why,
                                        size_t why_size);

/* The text of n samples' values v (n x ncols, row by row) in columns names: malloc'd, *len
 * bytes; NULL when out of memory. */
SHARD_HIDDEN char *shard_columns_format(const char *const *names, size_t ncols, const uint32_t *v,
                                        uint64_t n, size_t *len);

#endif /* SHARD_TAR_COLUMNS_H */
